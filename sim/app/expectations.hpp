// A scenario's `expect` block: what a training team requires of its config, checked against the
// result JSON by `fsdpsim check`.
//
//   "expect": {
//     "status": "ok",                                   equality (string, bool, integer, or a
//                                                       number at the result's 6 significant
//                                                       digits)
//     "peak_mem_reserved_gib": {"max": 78},             bounds (numbers), min and/or max
//     "tokens_per_s_per_gpu": {"min": 3000},
//     "breakdown.exposed_communication_s": {"max": 0.5},   dotted paths reach nested keys
//     "baseline": "baselines/llama3_8b.json",           a recorded result JSON (relative to the
//     "tolerance": 0.05,                                 scenario file), compared within a relative
//     "keys": ["step_time_s", "peak_mem_reserved_gib"]   tolerance (default 0.05) on these keys
//   }
//
// "baseline", "tolerance" and "keys" are the only reserved names; any other key is a path into
// the result JSON. Checks run in key order (min before max), then the baseline keys in order.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fsdpsim::app {

inline constexpr double kDefaultBaselineTolerance = 0.05;

enum class ExpectationKind { kMin, kMax, kEqual, kBaseline };

struct Expectation {
  ExpectationKind kind = ExpectationKind::kEqual;
  std::string key;          // dotted path into the result JSON
  std::string json_path;    // where it is written in the scenario, e.g. /expect/mfu/min
  nlohmann::json expected;  // the bound, the value, or the baseline's value
  double tolerance = 0.0;   // relative; kBaseline only
};

struct Expectations {
  std::string file;  // the scenario file, for messages
  std::vector<Expectation> items;
  std::filesystem::path baseline;  // the baseline file read; empty without one
  std::string baseline_scenario;   // the scenario name the baseline records, if it has one
};

// The file a baseline named `reference` in `scenario_file`'s expect block is: relative to the
// scenario's folder.
std::filesystem::path baseline_file(const std::filesystem::path& scenario_file,
                                    const std::string& reference);

// Validates the block and reads the baseline file. Throws ConfigError naming `scenario_file` and
// the JSON path (/expect/...) on a malformed block or an unreadable baseline.
Expectations parse_expectations(const nlohmann::json& block,
                                const std::filesystem::path& scenario_file);

struct CheckResult {
  std::string name;  // the check, e.g. "tokens_per_s_per_gpu >= 3000"
  bool passed = false;
  std::string detail;  // e.g. "tokens_per_s_per_gpu = 3521.2 >= 3000" or "... , expected >= 3000"
};

// One result per expectation, in order. Throws ConfigError (naming the file and the expectation's
// JSON path, with a did-you-mean) when a key is not in the result or its type does not fit.
std::vector<CheckResult> evaluate_expectations(const Expectations& expectations,
                                               const nlohmann::json& result);

// The value at a dotted key ("fsdp.backward_prefetch") of a JSON document, or nullptr.
const nlohmann::json* find_dotted_key(const nlohmann::json& root, const std::string& key);

}  // namespace fsdpsim::app
