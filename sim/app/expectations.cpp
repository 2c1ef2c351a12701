#include "sim/app/expectations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/significant_digits.hpp"

namespace fsdpsim::app {
namespace {

const std::vector<std::string> kDefaultBaselineKeys = {
    "step_time_s", "tokens_per_s_per_gpu", "peak_mem_allocated_gib", "peak_mem_reserved_gib"};

bool valid_key(const std::string& key) {
  for (const std::string& part : split_dotted_key(key)) {
    if (part.empty()) return false;
  }
  return true;
}

// The value at a dotted path, or nullptr; on a miss, `missing` names the first absent segment and
// `hint` a close key at that level.
const nlohmann::json* find_path(const nlohmann::json& root, const std::string& key,
                                std::string& missing, std::string& hint) {
  const nlohmann::json* node = &root;
  for (const std::string& part : split_dotted_key(key)) {
    if (!node->is_object() || !node->contains(part)) {
      missing = part;
      if (node->is_object()) {
        std::vector<std::string> keys;
        for (const auto& [k, unused] : node->items()) keys.push_back(k);
        hint = did_you_mean(part, keys);
      }
      return nullptr;
    }
    node = &node->at(part);
  }
  return node;
}

bool scalar(const nlohmann::json& v) { return v.is_string() || v.is_number() || v.is_boolean(); }

// Numbers as the result JSON prints them; strings quoted.
std::string show(const nlohmann::json& v) { return v.dump(); }

std::string percent(double x) { return fmt::format("{:+.2f}%", 100.0 * x); }

// Results are never negative (as the baseline's check below says): a max or a value to equal
// under 0 could never hold, so the check would fail whatever the step did.
void refuse_negative(const nlohmann::json& value, const std::string& file,
                     const std::string& path) {
  if (value.is_number() && value.get<double>() < 0.0) {
    throw ConfigError(file, path,
                      fmt::format("expected 0 or more (results are never negative, so this check "
                                  "could not pass), found {}",
                                  value.dump()));
  }
}

// MFU and HFU are fractions of the peak (0.45 = 45 %), never above 1: a bound or value above it
// is a percentage (50 for 0.50), whose max could never fail or whose min never pass.
void refuse_percentage_of_a_fraction(const std::string& key, const nlohmann::json& value,
                                     const std::string& file, const std::string& path) {
  if ((key == "mfu" || key == "hfu") && value.is_number() && value.get<double>() > 1.0) {
    throw ConfigError(file, path,
                      fmt::format("expected a fraction from 0 to 1 ({} is a share of the peak: "
                                  "0.45 = 45%), found {}",
                                  key, value.dump()));
  }
}

void parse_bounds(const nlohmann::json& value, const std::string& key, const std::string& file,
                  std::vector<Expectation>& items) {
  const std::string path = "/expect/" + pointer_token(key);
  if (value.empty())
    throw ConfigError(file, path,
                      "expected {\"min\": X} and/or {\"max\": Y}, found an empty object");
  for (const auto& [bound, unused] : value.items()) {
    if (bound != "min" && bound != "max") {
      const std::string hint = did_you_mean(bound, {"min", "max"});
      // {"breakdown": {"forward_s": {...}}} for a key inside breakdown: the dotted form reaches it.
      const std::string nested =
          hint.empty() && unused.is_object()
              ? fmt::format("; a key inside {} is written \"{}.{}\": {{...}}", key, key, bound)
              : "";
      throw ConfigError(
          file, path + "/" + pointer_token(bound),
          fmt::format("unknown bound; expected min or max{}{}",
                      hint.empty() ? "" : fmt::format("; did you mean {}?", hint), nested));
    }
  }
  for (const char* bound : {"min", "max"}) {
    if (!value.contains(bound)) continue;
    const nlohmann::json& b = value.at(bound);
    if (!b.is_number() || !std::isfinite(b.get<double>())) {
      throw ConfigError(file, fmt::format("{}/{}", path, bound),
                        fmt::format("expected a number, found {}", describe_json_type(b)));
    }
    const bool is_max = std::string(bound) == "max";
    if (is_max) refuse_negative(b, file, fmt::format("{}/max", path));
    refuse_percentage_of_a_fraction(key, b, file, fmt::format("{}/{}", path, bound));
    Expectation e;
    e.kind = is_max ? ExpectationKind::kMax : ExpectationKind::kMin;
    e.key = key;
    e.json_path = fmt::format("{}/{}", path, bound);
    e.expected = b;
    items.push_back(std::move(e));
  }
  if (value.contains("min") && value.contains("max") &&
      value.at("min").get<double>() > value.at("max").get<double>()) {
    throw ConfigError(
        file, path,
        fmt::format("min {} is above max {}", value.at("min").dump(), value.at("max").dump()));
  }
}

}  // namespace

std::filesystem::path baseline_file(const std::filesystem::path& scenario_file,
                                    const std::string& reference) {
  return scenario_file.parent_path() / reference;
}

namespace {

// Adds the baseline's expectations to `out`, and the file it read and the scenario it records.
void parse_baseline(const nlohmann::json& block, const std::filesystem::path& scenario_file,
                    Expectations& out) {
  std::vector<Expectation>& items = out.items;
  const std::string file = scenario_file.string();
  const nlohmann::json& reference = block.at("baseline");
  if (!reference.is_string() || reference.get<std::string>().empty()) {
    throw ConfigError(
        file, "/expect/baseline",
        fmt::format("expected the path of a result JSON, found {}", describe_json_type(reference)));
  }
  double tolerance = kDefaultBaselineTolerance;
  if (block.contains("tolerance")) {
    const nlohmann::json& t = block.at("tolerance");
    // Above 1 (100 %) the gate passes values of the baseline's sign up to any size: a typo (5
    // for 0.05) would turn it off.
    if (!t.is_number() || !(t.get<double>() >= 0.0 && t.get<double>() <= 1.0)) {
      throw ConfigError(
          file, "/expect/tolerance",
          fmt::format("expected a relative tolerance from 0 to 1 (0.05 = 5%), found {}",
                      describe_json_type(t)));
    }
    tolerance = t.get<double>() + 0.0;  // -0 is 0 ("within -0%" otherwise)
  }
  std::vector<std::string> keys = kDefaultBaselineKeys;
  if (block.contains("keys")) {
    const nlohmann::json& k = block.at("keys");
    if (!k.is_array() || k.empty()) {
      throw ConfigError(file, "/expect/keys",
                        fmt::format("expected a non-empty array of result keys, found {}",
                                    describe_json_type(k)));
    }
    keys.clear();
    for (std::size_t i = 0; i < k.size(); ++i) {
      if (!k[i].is_string() || !valid_key(k[i].get<std::string>())) {
        throw ConfigError(file, fmt::format("/expect/keys/{}", i),
                          fmt::format("expected a result key such as \"step_time_s\", found {}",
                                      describe_json_type(k[i])));
      }
      const std::string key = k[i].get<std::string>();
      if (const auto twice = std::find(keys.begin(), keys.end(), key); twice != keys.end()) {
        throw ConfigError(file, fmt::format("/expect/keys/{}", i),
                          fmt::format("\"{}\" is listed twice (keys/{}); list each key once", key,
                                      twice - keys.begin()));
      }
      keys.push_back(key);
    }
  }
  const std::filesystem::path baseline_path =
      baseline_file(scenario_file, reference.get<std::string>());
  nlohmann::json baseline;
  try {
    baseline = read_json_file(baseline_path);
  } catch (const ConfigError& e) {
    // A path read from the scenario's folder ("../../reports/x.json") is named resolved too.
    const std::filesystem::path resolved = baseline_path.lexically_normal();
    throw ConfigError(file, "/expect/baseline",
                      resolved == baseline_path
                          ? std::string(e.what())
                          : fmt::format("{} (that is, {})", e.what(), resolved.string()));
  }
  // A recorded `fsdpsim run --json`: another file's numbers would be compared as if they were.
  const auto schema = baseline.is_object() ? baseline.find("schema") : baseline.end();
  if (!baseline.is_object() || schema == baseline.end() || *schema != kResultSchema) {
    throw ConfigError(
        file, "/expect/baseline",
        fmt::format("expected a result JSON of fsdpsim run --json (\"schema\": \"{}\"), found "
                    "{} in {}",
                    kResultSchema,
                    schema == baseline.end() || !baseline.is_object()
                        ? std::string("no schema")
                        : fmt::format("\"schema\": {}", schema->dump()),
                    baseline_path.string()));
  }
  // An out-of-memory result's numbers are those of a step the device could not hold: a gate
  // against them compares with a run that never was. A result says "ok" or "oom"; anything else
  // is not a result as fsdpsim writes it.
  if (const auto status = baseline.find("status"); status == baseline.end() || *status != "ok") {
    const bool oom = status != baseline.end() && *status == "oom";
    throw ConfigError(
        file, "/expect/baseline",
        oom ? fmt::format("the baseline {} records an out-of-memory step (\"status\": \"oom\"), "
                          "whose numbers no run reached; record the baseline from a "
                          "configuration that fits",
                          baseline_path.string())
            : fmt::format("expected the baseline {} to record a step that fits (\"status\": "
                          "\"ok\"), found {}",
                          baseline_path.string(),
                          status == baseline.end() ? std::string("no status")
                                                   : "\"status\": " + status->dump()));
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::string missing;
    std::string hint;
    const nlohmann::json* value = find_path(baseline, keys[i], missing, hint);
    const std::string path =
        block.contains("keys") ? fmt::format("/expect/keys/{}", i) : "/expect/baseline";
    if (value != nullptr && value->is_object() && !value->empty()) {
      throw ConfigError(
          file, path,
          fmt::format("\"{}\" of the baseline {} is an object, not a value; name a "
                      "key inside it, e.g. \"{}.{}\"",
                      keys[i], baseline_path.string(), keys[i], value->begin().key()));
    }
    if (value == nullptr || !scalar(*value)) {
      throw ConfigError(
          file, path,
          fmt::format("the baseline {} has no value \"{}\"{}", baseline_path.string(), keys[i],
                      hint.empty() ? "" : fmt::format("; did you mean {}?", hint)));
    }
    if (value->is_number() && value->get<double>() < 0.0) {
      throw ConfigError(file, path,
                        fmt::format("the baseline {} has {} = {}; results are never negative",
                                    baseline_path.string(), keys[i], value->dump()));
    }
    Expectation e;
    e.kind = ExpectationKind::kBaseline;
    e.key = keys[i];
    e.json_path = path;
    e.expected = *value;
    e.tolerance = tolerance;
    items.push_back(std::move(e));
  }
  out.baseline = baseline_path;
  if (const auto recorded = baseline.find("scenario");
      recorded != baseline.end() && recorded->is_string()) {
    out.baseline_scenario = recorded->get<std::string>();
  }
}

}  // namespace

const nlohmann::json* find_dotted_key(const nlohmann::json& root, const std::string& key) {
  std::string missing;
  std::string hint;
  return find_path(root, key, missing, hint);
}

Expectations parse_expectations(const nlohmann::json& block,
                                const std::filesystem::path& scenario_file) {
  Expectations out;
  out.file = scenario_file.string();
  const std::string& file = out.file;
  if (!block.is_object()) {
    throw ConfigError(file, "/expect",
                      fmt::format("expected an object of result keys and bounds, found {}",
                                  describe_json_type(block)));
  }
  if (block.empty())
    throw ConfigError(file, "/expect", "the block is empty; remove it or add expectations");
  if (!block.contains("baseline")) {
    for (const char* key : {"tolerance", "keys"}) {
      if (block.contains(key))
        throw ConfigError(file, fmt::format("/expect/{}", key), "only valid with \"baseline\"");
    }
  }
  for (const auto& [key, value] : block.items()) {
    if (key == "baseline" || key == "tolerance" || key == "keys") continue;
    const std::string path = "/expect/" + pointer_token(key);
    if (!valid_key(key))
      throw ConfigError(file, path,
                        "expected a result key such as tokens_per_s_per_gpu or breakdown.idle_s");
    if (value.is_object()) {
      parse_bounds(value, key, file, out.items);
    } else if (key == "status" && !(value == "ok" || value == "oom")) {
      // A status no result has could never pass: bad input, not a failed check.
      throw ConfigError(file, path,
                        fmt::format("expected \"ok\" or \"oom\" (a result's status), found {}",
                                    describe_json_type(value)));
    } else if (scalar(value)) {
      refuse_negative(value, file, path);
      refuse_percentage_of_a_fraction(key, value, file, path);
      Expectation e;
      e.kind = ExpectationKind::kEqual;
      e.key = key;
      e.json_path = path;
      e.expected = value;
      out.items.push_back(std::move(e));
    } else {
      throw ConfigError(
          file, path,
          fmt::format("expected a value to equal or {{\"min\": X, \"max\": Y}}, found {}",
                      describe_json_type(value)));
    }
  }
  if (block.contains("baseline")) parse_baseline(block, scenario_file, out);
  return out;
}

std::vector<CheckResult> evaluate_expectations(const Expectations& expectations,
                                               const nlohmann::json& result) {
  std::vector<CheckResult> results;
  // A block that does not name the status expects the step to fit: an out-of-memory result's
  // throughput and memory would otherwise pass bounds for a configuration that cannot run.
  const bool names_status = std::any_of(expectations.items.begin(), expectations.items.end(),
                                        [](const Expectation& e) { return e.key == "status"; });
  // It is a check of its own whether it passes or not, so that CI's test history shows one test
  // that starts failing, not a test that appears.
  if (!names_status) {
    CheckResult r;
    r.name = "status == \"ok\" (implied)";
    r.passed = result.value("status", "") != "oom";
    r.detail = r.passed ? "status = \"ok\" (implied: a block without \"status\" expects the step "
                          "to fit)"
                        : fmt::format(
                              "status = \"oom\", expected \"ok\": an expect block "
                              "without \"status\" expects the step to fit (\"status\": "
                              "\"oom\" checks a step that does not) [{}]",
                              result.value("oom_reason", ""));
    results.push_back(std::move(r));
  }
  for (const Expectation& e : expectations.items) {
    std::string missing;
    std::string hint;
    const nlohmann::json* found = find_path(result, e.key, missing, hint);
    if (found == nullptr) {
      // The calibration object is there only for a step a profile priced.
      const bool uncalibrated = missing == "calibration" && !result.contains("calibration");
      throw ConfigError(
          expectations.file, e.json_path,
          fmt::format("the result JSON has no key \"{}\" (at \"{}\"){}", e.key, missing,
                      uncalibrated   ? ": the result has a calibration object only when the "
                                       "scenario names a calibration profile (hardware.calibration)"
                      : hint.empty() ? ""
                                     : fmt::format("; did you mean {}?", hint)));
    }
    const nlohmann::json& actual = *found;
    // Bounds and numbers compare with numbers; strings with strings; booleans with booleans.
    const bool numeric = e.kind == ExpectationKind::kMin || e.kind == ExpectationKind::kMax ||
                         e.expected.is_number();
    const bool comparable = numeric                  ? actual.is_number()
                            : e.expected.is_string() ? actual.is_string()
                                                     : actual.is_boolean();
    if (!comparable) {
      throw ConfigError(expectations.file, e.json_path,
                        fmt::format("result key {} is {}, which cannot be compared with {}", e.key,
                                    describe_json_type(actual), describe_json_type(e.expected)));
    }
    // A count (parameters, world_size) equals only a whole number: 8030261248.4 could never pass.
    if (e.kind == ExpectationKind::kEqual && actual.is_number_integer() &&
        e.expected.is_number_float() &&
        e.expected.get<double>() != std::floor(e.expected.get<double>())) {
      throw ConfigError(expectations.file, e.json_path,
                        fmt::format("result key {} is a whole number, which {} can never equal",
                                    e.key, show(e.expected)));
    }
    CheckResult r;
    const std::string value = fmt::format("{} = {}", e.key, show(actual));
    switch (e.kind) {
      case ExpectationKind::kMin:
        r.name = fmt::format("{} >= {}", e.key, show(e.expected));
        r.passed = actual.get<double>() >= e.expected.get<double>();
        r.detail = r.passed ? fmt::format("{} >= {}", value, show(e.expected))
                            : fmt::format("{}, expected >= {}", value, show(e.expected));
        break;
      case ExpectationKind::kMax:
        r.name = fmt::format("{} <= {}", e.key, show(e.expected));
        r.passed = actual.get<double>() <= e.expected.get<double>();
        r.detail = r.passed ? fmt::format("{} <= {}", value, show(e.expected))
                            : fmt::format("{}, expected <= {}", value, show(e.expected));
        break;
      case ExpectationKind::kEqual:
        r.name = fmt::format("{} == {}", e.key, show(e.expected));
        // Numbers at the precision the result is written with: a value copied from the text
        // summary (135714.9) equals the result's 135715.
        // Integers (parameter counts, world size) are written exactly and compared so, whether
        // the expected value is written 125311488 or 125311488.0.
        r.passed = actual.is_number_integer() ? actual == e.expected
                   : e.expected.is_number() && actual.is_number()
                       ? round6(actual.get<double>()) == round6(e.expected.get<double>())
                       : actual == e.expected;
        r.detail = r.passed ? value : fmt::format("{}, expected {}", value, show(e.expected));
        break;
      case ExpectationKind::kBaseline: {
        const std::string within =
            fmt::format("within {:g}% of baseline {}", 100.0 * e.tolerance, show(e.expected));
        // The name stays the same when the baseline is recorded again (CI keeps a test's
        // history by its name); the detail has the recorded value.
        r.name = e.expected.is_number()
                     ? fmt::format("{} within {:g}% of baseline", e.key, 100.0 * e.tolerance)
                     : fmt::format("{} as in the baseline", e.key);
        if (actual.is_number()) {
          const double base = e.expected.get<double>();
          const double diff = actual.get<double>() - base;
          // At the 6 significant digits results are written in: a change of exactly the
          // tolerance is within it, whatever the subtraction's rounding (8979.0 against
          // 7183.2 is +25%, not a hair more).
          r.passed = round6(std::fabs(diff)) <= round6(e.tolerance * std::fabs(base));
          const std::string change = base != 0.0 ? fmt::format(" ({})", percent(diff / base)) : "";
          r.detail = fmt::format("{}{}{}", value, r.passed ? " " : ", expected ", within) + change;
        } else {
          r.passed = actual == e.expected;
          r.detail =
              r.passed ? fmt::format("{} as in the baseline", value)
                       : fmt::format("{}, expected {} as in the baseline", value, show(e.expected));
        }
        break;
      }
    }
    // A baseline recorded for another scenario (copied with the expect block, or named by a
    // wrong path) compares unlike steps: said on its lines, whether they pass or not.
    if (e.kind == ExpectationKind::kBaseline && !expectations.baseline_scenario.empty() &&
        result.value("scenario", expectations.baseline_scenario) !=
            expectations.baseline_scenario) {
      r.detail +=
          fmt::format(" [the baseline records scenario \"{}\"]", expectations.baseline_scenario);
    }
    // A figure of a step that does not fit is what it would be were the device large enough:
    // said on every line, a pass too.
    if (result.value("status", "") == "oom" && (e.key != "status" || !r.passed)) {
      r.detail += r.passed ? std::string(" [status oom: the step does not fit]")
                           : fmt::format(" [status oom: {}]", result.value("oom_reason", ""));
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace fsdpsim::app
