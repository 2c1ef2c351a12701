// A scenario: model + hardware + training + FSDP configuration, loaded from a JSON file with
// optional `--set a.b=value` overrides, validated once, then immutable.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/transformer_spec.hpp"
#include "sim/app/expectations.hpp"
#include "sim/app/hardware_json.hpp"
#include "sim/app/preset_paths.hpp"
#include "sim/fsdp/fsdp_config.hpp"
#include "sim/memory/allocator_config.hpp"

namespace fsdpsim::app {

inline constexpr int kScenarioSchemaVersion = 1;

struct Scenario {
  std::filesystem::path file;
  std::string name;
  std::string description;
  models::TransformerSpec model;
  HardwareConfig hardware;
  fsdp::TrainingConfig training;
  fsdp::FsdpConfig fsdp;
  std::optional<memory::AllocatorConfig> allocator;  // none: the allocator is not modelled
  // The `expect` block, parsed (baseline read) once by the loader, for fsdpsim check; none when
  // absent. The `sweep` block is only validated here: fsdpsim sweep reads it from the file, in
  // its written key order (sweep_grid.hpp).
  std::optional<Expectations> expectations;
  // The overrides applied, each with where it came from (described as load_scenario's errors
  // describe them: "--set a.b=value", "--grid a.b=value", ...): for messages about the scenario
  // as a whole, such as a time out of range, to say which values it was run with.
  std::vector<std::string> overrides;
};

// Applies "a.b.c=value" to a JSON document. The value is parsed as JSON when it is valid JSON
// (numbers, true/false, quoted strings, objects), else taken as a string; null removes the key
// (RFC 7386), so that its default holds. Throws ConfigError on a malformed assignment.
void apply_override(nlohmann::json& document, const std::string& assignment);

// The keys a --set KEY walks down: "a.b.c" is {"a", "b", "c"}, but under `expect` and `sweep`,
// whose keys are dotted paths themselves, what follows the block's name is one key (under expect
// with a trailing .min or .max apart): "expect.breakdown.idle_s.max" is
// {"expect", "breakdown.idle_s", "max"}.
std::vector<std::string> override_key_segments(const std::string& key);

// Keys as a JSON path (RFC 6901), "/" for none.
std::string json_path_of_keys(const std::vector<std::string>& keys);

// A --set key as the JSON path the loader's messages give: "a.b.c" is "/a/b/c",
// "expect.breakdown.idle_s.max" is "/expect/breakdown.idle_s/max".
std::string json_path_of(const std::string& dotted_key);

// True when a loader error is caused by an override's key itself, not by its value: an unknown
// key at the key's path or at one of its parents, or a key that reaches into a value that is not
// an object. No value makes such an override valid.
bool error_names_key(const std::string& message, const std::string& key);

// Throws ConfigError when an override would be lost without a word: a later one replaces a key
// that holds an earlier one's (`--set model.n_layers=2 --set model=mpt-350m`: the new model has
// its own n_layers), or a grid axis sets the key of a --set, or a key holding it, which the --set
// says applies to every point. The same key twice among the --set options is not refused: the
// last holds, as documented. `origins` as for load_scenario.
void check_overrides_kept(const std::vector<std::string>& overrides,
                          const std::vector<std::string>& origins);

// `overrides` are applied in order, the last of a key holding. An error at a key one of them set
// says where the value came from: origins[i], what gave overrides[i], or "--set" where `origins`
// is shorter. An origin is "--set"; an option that takes the value alone ("--calibration"); or a
// grid axis: "--grid" (one key), "--grid KEY1+KEY2" (tied keys, as written) or "FILE: /sweep/NAME"
// (an axis of the scenario's sweep block). Overrides that would be lost are refused
// (check_overrides_kept).
Scenario load_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                       const PresetLocator& presets, const std::vector<std::string>& origins = {});

// The same from a document already in memory; `file` names it in errors and anchors relative
// preset paths.
Scenario scenario_from_json(nlohmann::json document, const std::filesystem::path& file,
                            const std::vector<std::string>& overrides, const PresetLocator& presets,
                            const std::vector<std::string>& origins = {});

}  // namespace fsdpsim::app
