#include "sim/app/sweep_command.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <iostream>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include "sim/app/cli_validators.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/expectations.hpp"
#include "sim/app/interrupt_guard.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/markdown_cell.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/sweep_trace.hpp"
#include "sim/app/unusable_grid_values.hpp"

namespace fsdpsim::app {
namespace {

constexpr std::size_t kSkipReasonsShown = 3;  // distinct skip reasons printed on the terminal

constexpr const char* kSweepFooter = R"(
The grid is the Cartesian product of the scenario file's optional "sweep" block
({"fsdp.backward_prefetch": ["BACKWARD_PRE", "none"], "training.micro_batch": [1, 2]}) and the
--grid options, in that order; a --grid for a key the file sweeps replaces the file's values. The
first axis varies slowest. Values are read like --set values (JSON when valid JSON, else a string).
Keys that vary together are one axis, tied with '+', each value an array of one value per key
(null removes the key, as --set KEY=null does, so its default holds): --grid
'fsdp.version+fsdp.backward_prefetch+fsdp.limit_all_gathers=[1,"BACKWARD_PRE",true],[2,null,null]'
is one axis of two values, a CSV column of that name holding each value's array.

A point whose scenario is invalid (a value the loader rejects, a global batch that the micro batch
does not divide) is a "skipped" row with the reason; an out-of-memory point is an "oom" row. A
grid value malformed wherever the grid puts it, where its neighbours ran (a misspelt value), is
bad input: the outputs are written and the sweep exits 2 naming it. The
CSV has one line per point in grid order: index, the grid values, status, reason, step_time_s,
tokens_per_s_per_gpu, model_tflops_per_gpu, hardware_tflops_per_gpu, mfu, hfu,
peak_mem_allocated_gib, peak_mem_reserved_gib, exposed_communication_s, num_alloc_retries (the
cudaMalloc retries a point fits only with), calibration (the profile that priced the point, empty
without one), sweep_id (a hash of the scenario, the --set options, the
grid and the preset and calibration files they name: the same in every slice of one sweep) and
grid_points (the points of the whole grid).
Whatever -j, the outputs
are byte-identical. --shard K/N runs slice K of N: the points, in index order, each dealt to
the slice holding the fewest points that share one of its axis values (among the next slices
with room), so each slice gets as many points and a like share of every axis's values;
`fsdpsim merge` joins the slices into the CSV of the whole sweep.

stdout gets the counts, the Pareto front (tokens/s/GPU vs peak reserved memory) and a last line
"best that fits: ...", then "best without cudaMalloc retries: ..." when the best fits only by
flushing the allocator's cache; when an output goes to '-', that summary goes to stderr instead.
Ctrl-C (or SIGTERM) finishes the points in flight, writes the rows finished so far and exits 130
(143).
--trace-row N --trace PATH simulates point N again and writes its Chrome/Perfetto trace.

Exit codes: 0 ok, 1 internal error, 2 bad usage or bad input, 130 interrupted (143 terminated).)";

// Loader messages start with the scenario file; every row would repeat it.
std::string reason_without_file(const std::string& message, const std::filesystem::path& file) {
  const std::string prefix = fmt::format("{}: ", file.string());
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

std::vector<std::string> with(std::vector<std::string> overrides,
                              const std::vector<std::string>& more) {
  overrides.insert(overrides.end(), more.begin(), more.end());
  return overrides;
}

// Where an axis's overrides come from, for load_scenario's messages (scenario.hpp): "--grid" for
// one key, the tied keys as written after it, or the sweep block's file and JSON path.
std::string axis_origin(const GridAxis& axis) {
  return axis.origin == "--grid" && axis.keys.size() == 1 ? "--grid" : axis.where();
}

// The options a load of the base overrides plus one axis value's come from.
std::vector<std::string> value_origins(const SweepPlan& plan, const GridAxis& axis) {
  std::vector<std::string> origins(plan.base_overrides.size(), "--set");
  origins.insert(origins.end(), axis.keys.size(), axis_origin(axis));
  return origins;
}

// Whether any axis sets a key whose JSON path satisfies `pred`.
template <typename Pred>
bool any_axis_path(const SweepPlan& plan, const Pred& pred) {
  return std::any_of(plan.axes.begin(), plan.axes.end(), [&](const GridAxis& axis) {
    return std::any_of(axis.keys.begin(), axis.keys.end(),
                       [&](const std::string& key) { return pred(json_path_of(key)); });
  });
}

}  // namespace

std::vector<std::string> point_override_origins(const SweepPlan& plan) {
  std::vector<std::string> origins(plan.base_overrides.size(), "--set");
  for (const GridAxis& axis : plan.axes)
    origins.insert(origins.end(), axis.keys.size(), axis_origin(axis));
  return origins;
}

Scenario load_grid_point(const SweepPlan& plan, std::int64_t index) {
  return load_scenario(plan.scenario,
                       with(plan.base_overrides, grid_point_overrides(plan.axes, index)),
                       plan.presets, point_override_origins(plan));
}

namespace {

// True when a loader error is about the value at the key's path or inside it.
bool error_is_at_key(const std::string& message, const std::string& key) {
  const std::string path = json_path_of(key);
  return message.find(fmt::format("{}: ", path)) != std::string::npos ||
         message.find(fmt::format("{}/", path)) != std::string::npos;
}

// Whether path `inner` ("/fsdp/limit_all_gathers") is `outer` ("/fsdp") or inside it.
bool path_within(const std::string& inner, const std::string& outer) {
  return inner.rfind(outer, 0) == 0 && (inner.size() == outer.size() || inner[outer.size()] == '/');
}

// A loader error about the plan's scenario file itself ("<file>: /path: what"), split into its
// JSON path and what it says; nothing for an error about another file or an option.
struct ScenarioFileError {
  std::string path;
  std::string what;
};

std::optional<ScenarioFileError> scenario_file_error(const std::string& message,
                                                     const SweepPlan& plan) {
  const std::string prefix = plan.scenario.string() + ": /";
  if (message.rfind(prefix, 0) != 0) return std::nullopt;
  const std::size_t end = message.find(": ", prefix.size());
  if (end == std::string::npos) return std::nullopt;
  return ScenarioFileError{message.substr(prefix.size() - 1, end - (prefix.size() - 1)),
                           message.substr(end + 2)};
}

// Whether a loader error on the plan's scenario is an unknown key or an unknown preset at a path
// no grid axis sets, nor sets anything inside of: no point of the grid can change it.
bool unknown_name_away_from_axes(const std::string& message, const SweepPlan& plan) {
  const std::optional<ScenarioFileError> error = scenario_file_error(message, plan);
  if (!error) return false;
  const std::string& path = error->path;
  const std::string& what = error->what;
  const bool unknown =
      what.rfind("unknown key", 0) == 0 ||
      (what.rfind("unknown ", 0) == 0 && what.find(" preset \"") != std::string::npos);
  return unknown && !any_axis_path(plan, [&](const std::string& axis_path) {
           return path_within(path, axis_path) || path_within(axis_path, path);
         });
}

// Whether a loader error on the plan's scenario is at a value of the file that cannot hold an
// axis's key, one that is neither an object nor a preset name (the file's "training": [] under
// --grid training.micro_batch): every point fails on it, which is what to say.
bool error_above_an_axis(const std::string& message, const SweepPlan& plan,
                         const nlohmann::json& document) {
  const std::optional<ScenarioFileError> error = scenario_file_error(message, plan);
  if (!error) return false;
  const std::string& path = error->path;
  std::string dotted = path.substr(1);
  std::replace(dotted.begin(), dotted.end(), '/', '.');
  const nlohmann::json* value = find_dotted_key(document, dotted);
  if (value == nullptr || value->is_object() || value->is_string() || value->is_null())
    return false;
  return any_axis_path(plan, [&](const std::string& axis_path) {
    return axis_path != path && path_within(axis_path, path);
  });
}

// Rejects keys that no value can make valid, and a bad value the file gives for a key an axis
// replaces at every point (never simulated, but `run` refuses the same file), before anything
// runs. `document` is the scenario with the --set overrides applied.
void check_keys(const SweepPlan& plan, const nlohmann::json& document) {
  try {
    load_scenario(plan.scenario, plan.base_overrides, plan.presets);
  } catch (const ConfigError& e) {
    for (const std::string& assignment : plan.base_overrides) {
      const std::string key = assignment.substr(0, assignment.find('='));
      if (error_names_key(e.what(), key))
        throw ConfigError(fmt::format("--set {}: not a scenario key ({})", key, e.what()));
    }
    if (error_above_an_axis(e.what(), plan, document)) throw;
    for (const GridAxis& axis : plan.axes) {
      for (const std::string& key : axis.keys) {
        if (find_dotted_key(document, key) == nullptr || !error_is_at_key(e.what(), key)) continue;
        throw ConfigError(
            fmt::format("{} (the sweep replaces this value at every point, but a "
                        "value the file gives must be valid too)",
                        e.what()));
      }
    }
    // An unknown key or preset away from every axis makes every point invalid: refused here, as
    // a slice of a sharded sweep, which may hold only invalid points, would exit 0 without it.
    if (unknown_name_away_from_axes(e.what(), plan)) throw;
  }
  for (const GridAxis& axis : plan.axes) {
    // Per key of the axis: whether every value that sets it (a null removes it, which any key
    // allows) failed to load naming it, and the first such failure.
    const std::size_t keys = axis.keys.size();
    std::vector<bool> every_value_names_key(keys, true);
    std::vector<std::optional<std::string>> first_error(keys);
    const auto still_possible = [&] {
      return std::find(every_value_names_key.begin(), every_value_names_key.end(), true) !=
             every_value_names_key.end();
    };
    for (std::size_t v = 0; v < axis.values.size() && still_possible(); ++v) {
      std::optional<std::string> error;
      try {
        load_scenario(plan.scenario, with(plan.base_overrides, axis_value_overrides(axis, v)),
                      plan.presets, value_origins(plan, axis));
      } catch (const ConfigError& e) {
        error = e.what();
      }
      for (std::size_t k = 0; k < keys; ++k) {
        if (axis.value_of(v, k).is_null()) continue;
        const bool names_key = error && error_names_key(*error, axis.keys[k]);
        every_value_names_key[k] = every_value_names_key[k] && names_key;
        if (names_key && !first_error[k]) first_error[k] = error;
      }
    }
    for (std::size_t k = 0; k < keys; ++k) {
      if (!every_value_names_key[k] || !first_error[k]) continue;
      throw ConfigError(fmt::format("{}: {}not a scenario key ({})", axis.where(),
                                    keys == 1 ? "" : axis.keys[k] + " is ", *first_error[k]));
    }
  }
}

// Every preset and calibration file the sweep's points name: the files the base
// scenario resolves and those each axis value resolves on top of it (every file reference is one
// key's value, so no combination of values names a file that no single value does). A value the
// loader rejects names no file it got to; its points are skipped rows, unless the value names a
// file that is missing or invalid on its own: a mistake at every point, refused as `run` refuses
// it rather than made rows that exit 0. A number, a boolean or a null names no file, so an axis
// of them costs no loads (a load per value made a long axis slow).
std::set<std::filesystem::path> named_files(const SweepPlan& plan) {
  std::set<std::filesystem::path> files;
  PresetLocator recording = plan.presets;
  recording.files_resolved = &files;
  const auto load = [&](const std::vector<std::string>& overrides, const GridAxis* axis) {
    std::vector<std::string> origins(plan.base_overrides.size(), "--set");
    if (axis != nullptr) origins = value_origins(plan, *axis);
    try {
      load_scenario(plan.scenario, overrides, recording, origins);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      const bool at_axis =
          axis != nullptr &&
          std::any_of(axis->keys.begin(), axis->keys.end(), [&](const std::string& key) {
            const std::string path = json_path_of(key);
            return what.find(path + ": ") != std::string::npos ||
                   what.find(path + ")") != std::string::npos ||
                   what.find(path + "/") != std::string::npos;
          });
      if (at_axis && names_unusable_file(what)) {
        throw ConfigError(fmt::format("{}: {}", axis->where(), what));
      }
    }
  };
  load(plan.base_overrides, nullptr);
  for (const GridAxis& axis : plan.axes) {
    for (std::size_t v = 0; v < axis.values.size(); ++v) {
      bool names_nothing = true;
      for (std::size_t k = 0; k < axis.keys.size(); ++k) {
        const nlohmann::json& value = axis.value_of(v, k);
        names_nothing =
            names_nothing && (value.is_number() || value.is_boolean() || value.is_null());
      }
      if (names_nothing) continue;
      load(with(plan.base_overrides, axis_value_overrides(axis, v)), &axis);
    }
  }
  return files;
}

// The expect block's keys, checked against the first point's result before the grid runs (a
// point the loader rejects has no result; its row says why).
void check_expect_keys(const SweepPlan& plan) {
  if (plan.total_points == 0) return;
  std::optional<Scenario> first;
  try {
    first = load_grid_point(plan, 0);
  } catch (const ConfigError&) {
    return;
  }
  if (first->expectations) refuse_unknown_expect_keys(*first, simulate_scenario(*first, false));
}

// A slice of a sharded sweep whose own points are all invalid may sit beside slices holding
// valid ones, so it writes its skipped rows; but a grid with no valid point at all (a malformed
// value of the base scenario, which every point shares) is refused by every slice before it
// runs, as an unsharded sweep refuses it, rather than found by merge after the whole job.
// Points are loaded, not simulated, in index order from the slice's first, until one loads;
// past kGridPointsLoadedAtMost the grid is left to merge to judge.
// About 1 ms a point on a 2-core machine, 4 ms with a calibration profile to read (2026-12).
constexpr std::int64_t kGridPointsLoadedAtMost = 10000;

// Why grid point `index` does not load (its reason as a row gives it), or nothing when it loads.
std::optional<std::string> load_refusal(const SweepPlan& plan, std::int64_t index) {
  try {
    (void)load_grid_point(plan, index);
    return std::nullopt;
  } catch (const ConfigError& e) {
    return reason_without_file(e.what(), plan.scenario);
  }
}

void refuse_grid_without_valid_point(const SweepPlan& plan) {
  if (plan.shard.n <= 1 || plan.total_points == 0 || plan.indices.empty()) return;
  std::string first_reason;
  const std::int64_t start = plan.indices.front();
  const std::int64_t tried = std::min(plan.total_points, kGridPointsLoadedAtMost);
  for (std::int64_t n = 0; n < tried; ++n) {
    const std::optional<std::string> refusal = load_refusal(plan, (start + n) % plan.total_points);
    if (!refusal) return;
    if (first_reason.empty()) first_reason = *refusal;
  }
  if (tried < plan.total_points) return;
  throw ConfigError(
      plan.scenario.string(), "",
      fmt::format("expected at least one valid point, found {} invalid scenario{} in the whole "
                  "grid (the first: {}); no slice can hold a valid point, so none is written",
                  plan.total_points, plan.total_points == 1 ? "" : "s", first_reason));
}

// What `sweep` refuses after running that loading alone decides, for `check`: a grid of no
// valid point, or a value of an axis that no point could take (misspelt, out of range:
// unusable_grid_values.hpp). Points are loaded, not simulated, all of them: a grid of more than
// kBlockPointsCheckedAtMost (a few seconds' loading) is left to `sweep`. Returns the number of
// points that do not load.
std::int64_t refuse_unusable_block_values(const SweepPlan& plan) {
  SweepTable table;
  table.grid_keys = grid_axis_names(plan.axes);
  table.grid_points = plan.total_points;
  std::string first_reason;
  for (std::int64_t index = 0; index < plan.total_points; ++index) {
    SweepRow row;
    row.index = index;
    row.labels = grid_point_labels(plan.axes, index);
    row.status = PointStatus::kOk;  // loads: a point `sweep` would simulate
    if (const std::optional<std::string> refusal = load_refusal(plan, index)) {
      row.status = PointStatus::kSkipped;
      row.reason = escape_control_characters(*refusal);
      if (first_reason.empty()) first_reason = row.reason;
    }
    table.rows.push_back(std::move(row));
  }
  if (!first_reason.empty() &&
      std::all_of(table.rows.begin(), table.rows.end(),
                  [](const SweepRow& r) { return r.status == PointStatus::kSkipped; })) {
    throw ConfigError(
        plan.scenario.string(), "/sweep",
        fmt::format("expected at least one valid point, found {} invalid "
                    "scenario{} (the first: {}): `fsdpsim sweep` would refuse it",
                    plan.total_points, plan.total_points == 1 ? "" : "s", first_reason));
  }
  const auto unusable = unusable_grid_values(table);
  if (!unusable.empty()) {
    const UnusableGridValue& v = unusable.front();
    throw ConfigError(
        plan.scenario.string(), "/sweep/" + v.key,
        v.points == 1
            ? fmt::format("the value {} cannot be simulated at its one point ({}): `fsdpsim "
                          "sweep` would skip it and exit 2",
                          v.value, v.reason)
            : fmt::format("the value {} can be simulated at none of its {} points (the first: "
                          "{}): `fsdpsim sweep` would skip them all and exit 2",
                          v.value, v.points, v.reason));
  }
  return std::count_if(table.rows.begin(), table.rows.end(),
                       [](const SweepRow& r) { return r.status == PointStatus::kSkipped; });
}

// --grid KEY=[1,2] is one value, an array (which some keys take); a list is KEY=1,2. Said where
// `reason`, the first point's, refused such an array as one at its key (a key that takes arrays
// refuses their items otherwise: hardware.stragglers); empty elsewhere.
std::string array_grid_value_hint(const std::vector<GridAxis>& axes, const std::string& reason) {
  for (const GridAxis& axis : axes) {
    if (axis.origin != "--grid" || axis.keys.size() != 1 || axis.values.size() != 1 ||
        !axis.values.front().is_array() || axis.values.front().empty() ||
        !reason.starts_with(json_path_of(axis.keys.front()) + ": expected ") ||
        reason.find("found an array") == std::string::npos) {
      continue;
    }
    std::vector<std::string> items;
    for (const nlohmann::json& item : axis.values.front()) items.push_back(item.dump());
    return fmt::format(
        " (--grid {}={} sweeps one value, the array; to sweep its items write "
        "--grid {}={})",
        axis.name(), axis.values.front().dump(), axis.name(), fmt::join(items, ","));
  }
  return "";
}

// Points refused at a key no axis sets: the scenario's own value (not a --set's), which an axis
// makes moot or wrong at those points (training.checkpoint_early_stop under an axis of
// training.compiled). Said once, for the first such key of `reasons`; empty when there is none.
std::string scenario_key_hint(const std::vector<GridAxis>& axes,
                              const std::vector<std::string>& reasons) {
  for (const std::string& reason : reasons) {
    const std::size_t colon = reason.find(": ");
    if (!reason.starts_with("/") || colon == std::string::npos ||
        reason.find("the value comes from --set") != std::string::npos) {
      continue;
    }
    const std::string path = reason.substr(0, colon);
    const bool swept = std::any_of(axes.begin(), axes.end(), [&](const GridAxis& axis) {
      return std::any_of(axis.keys.begin(), axis.keys.end(), [&](const std::string& key) {
        const std::string swept_path = json_path_of(key);
        return path == swept_path || path.starts_with(swept_path + "/") ||
               swept_path.starts_with(path + "/");
      });
    });
    if (swept) continue;
    std::string key = path.substr(1);
    std::replace(key.begin(), key.end(), '/', '.');
    return fmt::format(
        "note: {} is the scenario's own, set at every point; to set it only where it applies, "
        "sweep it tied to the axis that decides, null where it does not (--grid "
        "'AXIS+{}=[a1,v1],[a2,null]')\n",
        key, key);
  }
  return "";
}

struct PointOutcome {
  SweepRow row;
  std::string json_line;
};

PointOutcome run_point(const SweepPlan& plan, std::int64_t index) {
  PointOutcome out;
  out.row.index = index;
  out.row.labels = grid_point_labels(plan.axes, index);
  out.row.metrics.fill(std::numeric_limits<double>::quiet_NaN());
  nlohmann::json grid = nlohmann::json::object();
  const std::vector<std::size_t> c = grid_coordinates(plan.axes, index);
  for (std::size_t i = 0; i < plan.axes.size(); ++i) {
    for (std::size_t k = 0; k < plan.axes[i].keys.size(); ++k)
      grid[plan.axes[i].keys[k]] = plan.axes[i].value_of(c[i], k);
  }
  nlohmann::json line;
  try {
    const Scenario scenario = load_grid_point(plan, index);
    line = result_to_json(scenario, simulate_scenario(scenario, /*record_memory=*/false));
  } catch (const ConfigError& e) {
    out.row.status = PointStatus::kSkipped;
    // The reason may quote a file's bytes (a preset that is not UTF-8): escaped, it can go into
    // the JSON lines, the CSV and the markdown.
    out.row.reason = escape_control_characters(reason_without_file(e.what(), plan.scenario));
    line = {{"status", "skipped"}, {"reason", out.row.reason}};
  } catch (const std::bad_alloc&) {
    // One point too large for this machine's memory does not cost the others their rows; its
    // memory is given back as the exception unwinds.
    out.row.status = PointStatus::kSkipped;
    out.row.reason = kOutOfHostMemoryReason;
    line = {{"status", "skipped"}, {"reason", out.row.reason}};
  }
  if (line.contains("schema")) {
    out.row.status = line["status"] == "oom" ? PointStatus::kOom : PointStatus::kOk;
    out.row.reason = line.value("oom_reason", "");
    for (std::size_t m = 0; m < kSweepMetricKeys.size(); ++m) {
      const char* key = kSweepMetricKeys[m];
      const nlohmann::json& v = line.contains(key) ? line[key] : line["breakdown"][key];
      out.row.metrics[m] = v.get<double>();
    }
    if (const auto it = line.find("calibration"); it != line.end())
      out.row.calibration = (*it)["profile"].get<std::string>();
  }
  line["index"] = index;
  line["grid"] = grid;
  out.json_line = line.dump() + "\n";
  return out;
}

std::string format_duration(double seconds) {
  if (!(seconds < 1e7)) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60)
         : s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60)
                   : fmt::format("{}s", s);
}

}  // namespace

std::optional<SweepBlockCheck> check_sweep_block(const std::filesystem::path& scenario,
                                                 const std::vector<std::string>& overrides,
                                                 const PresetLocator& presets,
                                                 bool load_every_point) {
  // The block as the overrides leave it: --set 'sweep={...}' is checked as a block in the file.
  nlohmann::json document = read_json_file(scenario);
  if (!document.is_object()) return std::nullopt;  // the scenario's own loader says what is wrong
  for (const std::string& o : overrides) apply_override(document, o);
  const auto it = document.find("sweep");
  if (it == document.end()) return std::nullopt;
  SweepPlan plan;
  plan.scenario = scenario;
  plan.base_overrides = overrides;
  plan.presets = presets;
  plan.axes = parse_sweep_block(*it, scenario.string(), sweep_keys_in_file_order(scenario));
  plan.total_points = grid_point_count(plan.axes);
  // What `sweep` refuses before running that the block alone decides: an axis another axis of it
  // makes do nothing, a key no scenario accepts, a value naming a missing preset or file. (Not
  // an axis beside this command's --set, which the block does not apply to.)
  if (grid_point_count(plan.axes) > 0) {
    SweepPlan block_only = plan;
    block_only.base_overrides.clear();
    check_overrides_kept(grid_point_overrides(plan.axes, 0), point_override_origins(block_only));
  }
  check_keys(plan, document);
  (void)named_files(plan);
  SweepBlockCheck block;
  block.points = plan.total_points;
  block.loaded = load_every_point && plan.total_points <= kBlockPointsCheckedAtMost;
  if (block.loaded) block.skipped = refuse_unusable_block_values(plan);
  return block;
}

std::string sweep_block_check_text(const SweepBlockCheck& block) {
  if (!block.loaded) {
    return fmt::format(
        "sweep block: its keys and the files it names are valid; its {} points were not loaded "
        "one by one (check loads blocks of up to {}), so a value that fails only once loaded, "
        "as a misspelt one, is left to `fsdpsim sweep`",
        block.points, kBlockPointsCheckedAtMost);
  }
  if (block.skipped == 0) {
    return block.points == 1 ? "sweep block: its one point loads"
                             : fmt::format("sweep block: all {} points load", block.points);
  }
  return fmt::format(
      "sweep block: {} of its {} points load; `fsdpsim sweep` skips {}",
      block.points - block.skipped, block.points,
      block.skipped == 1
          ? std::string("the other one as a configuration that cannot run")
          : fmt::format("the other {} as configurations that cannot run", block.skipped));
}

SweepPlan plan_sweep(const SweepOptions& options) {
  SweepPlan plan;
  plan.scenario = options.scenario;
  plan.base_overrides = options.overrides;
  plan.presets = PresetLocator{default_configs_dir(options.configs_dir)};
  if (!options.shard.empty()) plan.shard = parse_shard(options.shard);
  if (options.jobs < 0)
    throw ConfigError(fmt::format("-j {}: expected 0 (all cores) or more threads", options.jobs));
  std::vector<GridAxis> command_line;
  for (const std::string& g : options.grid) command_line.push_back(parse_grid_option(g));

  nlohmann::json document = read_json_file(plan.scenario);
  const std::string file = plan.scenario.string();
  if (!document.is_object()) throw ConfigError(file, "/", "expected a scenario object");
  for (const std::string& o : plan.base_overrides) apply_override(document, o);
  std::vector<GridAxis> from_file;
  if (const auto it = document.find("sweep"); it != document.end()) {
    from_file = parse_sweep_block(*it, file, sweep_keys_in_file_order(plan.scenario));
  }
  plan.axes = combine_axes(std::move(from_file), command_line);
  try {
    plan.total_points = grid_point_count(plan.axes);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", file, e.what()));
  }
  // Once here, rather than as the skip reason of every point.
  if (plan.total_points > 0) {
    check_overrides_kept(with(plan.base_overrides, grid_point_overrides(plan.axes, 0)),
                         point_override_origins(plan));
  }
  plan.indices = plan.shard.indices(plan.axes);
  check_keys(plan, document);
  const std::set<std::filesystem::path> files = named_files(plan);
  std::vector<std::string> contents;
  for (const std::filesystem::path& named : files) contents.push_back(read_text_file(named));
  plan.sweep_id = sweep_fingerprint(document, plan.axes, contents);
  plan.input_files = {plan.scenario};
  plan.input_files.insert(plan.input_files.end(), files.begin(), files.end());
  return plan;
}

SweepRun run_sweep(const SweepPlan& plan, int jobs, const std::atomic<bool>* stop,
                   const std::function<void(std::int64_t, std::int64_t)>& on_progress) {
  const auto total = static_cast<std::int64_t>(plan.indices.size());
  std::vector<std::optional<PointOutcome>> outcomes(plan.indices.size());
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  std::mutex mutex;
  std::condition_variable changed;
  const auto should_stop = [&] { return failed.load() || (stop != nullptr && stop->load()); };

  const auto worker = [&] {
    while (!should_stop()) {
      const std::int64_t position = next.fetch_add(1);
      if (position >= total) break;
      try {
        outcomes[static_cast<std::size_t>(position)] =
            run_point(plan, plan.indices[static_cast<std::size_t>(position)]);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
        failed.store(true);
      }
      done.fetch_add(1);
      changed.notify_all();
    }
    changed.notify_all();
  };
  const auto threads = static_cast<std::int64_t>(std::max(1, jobs));
  std::vector<std::thread> pool;
  for (std::int64_t t = 0; t < std::min(threads, std::max<std::int64_t>(total, 1)); ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {
      // The system refused a thread (a process or memory limit): stop the ones started.
      failed.store(true);
      for (std::thread& started : pool) started.join();
      throw ConfigError(fmt::format("-j {}: could not start worker thread {} ({}); try fewer", jobs,
                                    t + 1, e.what()));
    }
  }
  {
    constexpr auto kProgressPeriod = std::chrono::milliseconds(100);
    auto last_report = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex);
    while (done.load() < total && !should_stop()) {
      changed.wait_for(lock, kProgressPeriod);
      if (on_progress && std::chrono::steady_clock::now() - last_report >= kProgressPeriod) {
        last_report = std::chrono::steady_clock::now();
        on_progress(done.load(), total);
      }
    }
  }
  for (std::thread& t : pool) t.join();
  if (on_progress) on_progress(done.load(), total);
  if (failure) std::rethrow_exception(failure);

  SweepRun run;
  run.table.grid_keys = grid_axis_names(plan.axes);
  run.table.sweep_id = plan.sweep_id;
  run.table.grid_points = plan.total_points;
  run.table.calibration_known = true;
  for (std::optional<PointOutcome>& o : outcomes) {
    if (!o) {
      run.stopped = true;
      continue;
    }
    run.table.rows.push_back(std::move(o->row));
    run.json_lines.push_back(std::move(o->json_line));
  }
  return run;
}

CLI::App* add_sweep_command(CLI::App& app, SweepOptions& options) {
  CLI::App* sweep =
      app.add_subcommand("sweep", "Simulate every point of a grid of scenario keys and rank them");
  sweep
      ->add_option("scenario", options.scenario,
                   "Scenario JSON file (its optional \"sweep\" block adds axes)")
      ->required()
      ->check(non_empty());
  sweep
      ->add_option("--grid", options.grid,
                   "An axis of the grid, e.g. --grid training.micro_batch=1,2,4")
      ->type_name("KEY=V1,V2,...")
      ->allow_extra_args(false);
  sweep->add_option("--set", options.overrides, "Override a scenario key at every point")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  sweep->add_option("-j,--jobs", options.jobs, "Worker threads (0 = one per core; default 1)")
      ->type_name("N")
      ->check(whole_number("a number of threads >= 0 (0 = one per core)"));
  sweep->add_option("--out", options.csv_path, "Write the table as CSV to PATH ('-' for stdout)")
      ->type_name("PATH|-")
      ->check(non_empty());
  sweep
      ->add_option("--jsonl", options.jsonl_path, "Write one result JSON object per point and line")
      ->type_name("PATH|-")
      ->check(non_empty());
  sweep->add_option("--md", options.md_path, "Write a markdown report ranked by throughput")
      ->type_name("PATH|-")
      ->check(non_empty());
  sweep->add_option("--top", options.top, "Rows of the markdown ranking (0 = all; default 20)")
      ->type_name("N")
      ->check(row_count());
  sweep
      ->add_option(
          "--shard", options.shard,
          "Run slice K of N (an equal share of the points and of each axis's values); see merge")
      ->type_name("K/N");
  sweep->add_option("--configs", options.configs_dir, "Folder of presets (as for run)")
      ->type_name("DIR")
      ->check(non_empty());
  sweep->add_flag("--timing", options.timing, "Print the wall time and points/s on stderr");
  CLI::Option* trace_row =
      sweep->add_option("--trace-row", options.trace_row, "Grid point (index) to write a trace of")
          ->type_name("N")
          ->check(whole_number("a grid point index >= 0"));
  CLI::Option* trace =
      sweep
          ->add_option("--trace", options.trace_path,
                       "Write the Chrome/Perfetto trace of point --trace-row to PATH")
          ->type_name("PATH")
          ->check(non_empty());
  trace_row->needs(trace);
  trace->needs(trace_row);
  sweep->footer(kSweepFooter);
  return sweep;
}

int sweep_command(const SweepOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // Ctrl-C or SIGTERM from here on, planning included, stops the sweep and writes the rows
  // finished so far.
  std::optional<InterruptGuard> guard;
  guard.emplace();
  const SweepPlan plan = plan_sweep(options);
  if (!options.trace_path.empty()) check_trace_row(plan, options.trace_row);
  // Before the grid runs, not after: a sweep can take hours.
  check_outputs({options.csv_path, options.jsonl_path, options.md_path, options.trace_path},
                plan.input_files);
  refuse_grid_without_valid_point(plan);
  check_expect_keys(plan);
  const int jobs = options.jobs == 0
                       ? static_cast<int>(std::max(1U, std::thread::hardware_concurrency()))
                       : options.jobs;
  const bool show_progress = ::isatty(::fileno(stderr)) != 0;
  const auto run_start = std::chrono::steady_clock::now();
  const auto elapsed_s = [](std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  };
  const auto progress = [&](std::int64_t done, std::int64_t total) {
    if (!show_progress) return;
    constexpr std::int64_t kWidth = 30;
    const std::int64_t filled = total == 0 ? kWidth : kWidth * done / total;
    const double rate = static_cast<double>(done) / std::max(elapsed_s(run_start), 1e-9);
    const double eta = rate > 0.0 ? static_cast<double>(total - done) / rate : -1.0;
    std::cerr << fmt::format("\rsweep [{}{}] {}/{} points  {:.1f} points/s  ETA {}   ",
                             std::string(static_cast<std::size_t>(filled), '#'),
                             std::string(static_cast<std::size_t>(kWidth - filled), '.'), done,
                             total, rate, eta < 0.0 ? "?" : format_duration(eta));
    if (done == total || InterruptGuard::flag().load()) std::cerr << "\n";
    std::cerr.flush();
  };

  const SweepRun run = run_sweep(plan, jobs, &InterruptGuard::flag(), progress);
  const bool interrupted = run.stopped;
  // The trace's point is simulated again while a signal still only raises the flag: a Ctrl-C
  // then costs the trace, not the table of a grid that may have taken hours.
  std::optional<std::string> trace;
  bool trace_out_of_memory = false;  // the table is written all the same
  if (!options.trace_path.empty() && !interrupted) {
    try {
      std::string content = sweep_point_trace(plan, options.trace_row);
      if (!InterruptGuard::flag().load()) trace = std::move(content);
    } catch (const std::bad_alloc&) {
      trace_out_of_memory = true;
    }
  }
  const bool trace_interrupted =
      !options.trace_path.empty() && !interrupted && !trace && !trace_out_of_memory;
  // The grid has stopped: a signal from here on ends the command as usual (write_outputs holds it
  // back until its files are all in place or all discarded), and an output that waits, a FIFO
  // nobody reads, can be interrupted.
  guard.reset();
  std::string jsonl;
  for (const std::string& line : run.json_lines) jsonl += line;
  std::vector<OutputFile> outputs;  // written together: all or none
  if (!options.csv_path.empty()) outputs.push_back({options.csv_path, table_to_csv(run.table)});
  if (!options.jsonl_path.empty()) outputs.push_back({options.jsonl_path, jsonl});
  const std::string title =
      fmt::format("fsdpsim sweep of {}{}{}", plan.scenario.filename().string(),
                  plan.shard.n > 1 ? fmt::format(" (slice {}/{})", plan.shard.k, plan.shard.n) : "",
                  interrupted ? fmt::format(", interrupted after {} of {} points",
                                            run.table.rows.size(), plan.indices.size())
                              : "");
  if (!options.md_path.empty())
    outputs.push_back({options.md_path, sweep_markdown(run.table, title, options.top)});
  // Why points were skipped, on the terminal too (the CSV and markdown have every reason).
  std::vector<std::string> reasons;  // the first kSkipReasonsShown distinct ones
  std::set<std::string> distinct;
  std::size_t skipped = 0;
  for (const SweepRow& row : run.table.rows) {
    if (row.status != PointStatus::kSkipped) continue;
    ++skipped;
    if (distinct.insert(row.reason).second && reasons.size() < kSkipReasonsShown)
      reasons.push_back(row.reason);
  }
  const auto print_reasons = [&] {
    for (const std::string& reason : reasons) std::cerr << "skipped: " << reason << "\n";
    if (distinct.size() > reasons.size()) {
      std::cerr << fmt::format(
          "skipped: ... and points for {} other reasons (the CSV and markdown "
          "give each point's)\n",
          distinct.size() - reasons.size());
    }
    std::cerr << scenario_key_hint(plan.axes, reasons);
  };
  // A whole grid of invalid points is bad input: nothing is written. A slice of a sharded sweep
  // may hold only invalid points while others hold valid ones; `merge` judges the whole grid.
  const bool nothing_valid = !interrupted && skipped > 0 && skipped == run.table.rows.size();
  if (nothing_valid && plan.shard.n <= 1) {
    print_reasons();
    const std::string list_hint = array_grid_value_hint(plan.axes, reasons.front());
    throw ConfigError(plan.scenario.string(), "",
                      fmt::format("expected at least one valid point, found {} invalid "
                                  "scenario{} (the first: {}); no output was written{}",
                                  skipped, skipped == 1 ? "" : "s", reasons.front(), list_hint));
  }
  if (trace) outputs.push_back({options.trace_path, *trace});
  write_outputs(outputs, plan.input_files);

  const bool stdout_taken = writes_stdout(options.csv_path) || writes_stdout(options.jsonl_path) ||
                            writes_stdout(options.md_path) || writes_stdout(options.trace_path);
  std::ostream& summary = stdout_taken ? std::cerr : std::cout;
  // A slice's log says it is one, lest it read as a whole (smaller) sweep.
  if (plan.shard.n > 1) {
    summary << fmt::format("slice {}/{} of a grid of {} points: ", plan.shard.k, plan.shard.n,
                           plan.total_points);
  }
  summary << sweep_summary_text(run.table);
  summary.flush();
  print_reasons();
  const double seconds = elapsed_s(start);
  if (options.timing) {
    // One thread per point at most: that many ran.
    const auto threads = std::max<std::int64_t>(
        1, std::min<std::int64_t>(jobs, static_cast<std::int64_t>(plan.indices.size())));
    std::cerr << fmt::format("timing: {} points in {:.2f} s ({:.1f} points/s) on {} thread{}\n",
                             run.table.rows.size(), seconds,
                             static_cast<double>(run.table.rows.size()) / std::max(seconds, 1e-9),
                             threads, threads == 1 ? "" : "s");
  }
  if (interrupted) {
    std::cerr << fmt::format("interrupted: wrote the {} of {} points that finished\n",
                             run.table.rows.size(), plan.indices.size());
    return InterruptGuard::exit_code();
  }
  if (trace_interrupted) {
    std::cerr << fmt::format(
        "interrupted: wrote every point; the trace of point {} was not "
        "written\n",
        options.trace_row);
    return InterruptGuard::exit_code();
  }
  // A value the grid asked for that the loader refused as such wherever the grid put it (a
  // misspelt value) is bad input, though the other points were worth writing. A slice cannot
  // tell (the value's other points may be in other slices): merge judges the whole grid.
  bool bad_input = false;
  if (plan.shard.n <= 1) {
    if (const auto unusable = unusable_grid_values(run.table); !unusable.empty()) {
      std::cerr << unusable_grid_values_text(unusable);
      bad_input = true;
    }
  }
  if (trace_out_of_memory) {
    std::cerr << fmt::format(
        "error: --trace-row {}: out of host memory simulating the point again with its memory "
        "timeline and trace; every point was written, the trace was not\n",
        options.trace_row);
    bad_input = true;
  }
  return bad_input ? 2 : 0;
}

}  // namespace fsdpsim::app
