// `fsdpsim sweep`: what-if sweeps. Every point of a grid of scenario keys is loaded (base --set
// overrides, then the point's) and simulated on a pool of worker threads; the rows are kept by
// point index, so every output is byte-identical whatever the number of threads. An invalid
// point is a `skipped` row with the loader's reason, an out-of-memory point an `oom` row.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/app/csv_table.hpp"
#include "sim/app/preset_paths.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/sweep_grid.hpp"

namespace CLI {
class App;
}

namespace fsdpsim::app {

struct SweepOptions {
  std::string scenario;
  std::vector<std::string> grid;       // --grid KEY=V1,V2,...
  std::vector<std::string> overrides;  // --set KEY=VALUE (every point)
  int jobs = 1;                        // -j N; 0 = std::thread::hardware_concurrency()
  std::string csv_path;                // --out PATH.csv|-
  std::string jsonl_path;              // --jsonl PATH|-
  std::string md_path;                 // --md PATH|-
  std::size_t top = 20;                // --top N rows of the markdown table (0 = all)
  std::string shard;                   // --shard K/N
  std::string configs_dir;             // --configs DIR
  bool timing = false;                 // --timing: wall time and points/s on stderr
  std::int64_t trace_row = -1;         // --trace-row N: trace grid point N ...
  std::string trace_path;              // --trace PATH: ... to PATH
};

// A validated sweep, ready to run.
struct SweepPlan {
  std::filesystem::path scenario;
  std::vector<std::string> base_overrides;
  std::vector<GridAxis> axes;
  Shard shard;
  PresetLocator presets;
  std::int64_t total_points = 1;  // of the whole grid
  std::string sweep_id;           // sweep_fingerprint of the scenario, grid and named files
  // The scenario and every preset or calibration file its points name: no output may go there.
  std::vector<std::filesystem::path> input_files;
  std::vector<std::int64_t> indices;  // the points this shard runs, ascending
};

// The options a point's overrides (base_overrides, then grid_point_overrides) come from, for
// load_scenario's messages: "--set" for each base override, then each key's axis (its origin as
// scenario.hpp lists them: "--grid", "--grid KEY1+KEY2", "FILE: /sweep/NAME").
std::vector<std::string> point_override_origins(const SweepPlan& plan);

// The scenario of grid point `index`: the file, the base overrides, then the point's; throws
// ConfigError as load_scenario does.
Scenario load_grid_point(const SweepPlan& plan, std::int64_t index);

// Reads the scenario and its `sweep` block, parses the --grid options and checks them before
// anything runs. Throws ConfigError (exit code 2) on a malformed --grid/--set/--shard, an
// unreadable scenario, a bad sweep block, or a grid key that no scenario accepts.
SweepPlan plan_sweep(const SweepOptions& options);

// The check plan_sweep makes of the scenario file's own `sweep` block, for the commands that run
// only its base point (run, explain, check): a sweep key no scenario accepts is an error there
// too, not found only when the sweep runs. Nothing happens without a sweep block. With
// `load_every_point` (check, a gate for the whole file), also what `sweep` refuses once its points
// are loaded: a grid of no valid point, or a value no point can take (a misspelt one), for grids
// of up to kBlockPointsCheckedAtMost points (about 1 ms each, 4 with a calibration profile).
// Returns what it found of the block, nothing when the scenario has none.
inline constexpr std::int64_t kBlockPointsCheckedAtMost = 2000;
struct SweepBlockCheck {
  std::int64_t points = 0;   // the grid's
  bool loaded = false;       // every point was loaded (load_every_point, a small enough grid)
  std::int64_t skipped = 0;  // of them, points that do not load: configurations sweep skips
};
std::optional<SweepBlockCheck> check_sweep_block(const std::filesystem::path& scenario,
                                                 const std::vector<std::string>& overrides,
                                                 const PresetLocator& presets,
                                                 bool load_every_point = false);

// What check says of the block it checked, as the detail of its passing "sweep block" result.
std::string sweep_block_check_text(const SweepBlockCheck& block);

struct SweepRun {
  SweepTable table;                     // the finished points, in index order
  std::vector<std::string> json_lines;  // one result object per finished point, same order
  bool stopped = false;                 // `stop` was raised before every point ran
};

// Runs the plan's points on `jobs` threads (>= 1). Points already started when `stop` becomes
// true are finished; no new ones start. `on_progress(done, total)` is called from the calling
// thread about every 100 ms and at the end. Exceptions other than ConfigError (our own bugs) stop
// the sweep and are rethrown after the workers have joined.
SweepRun run_sweep(const SweepPlan& plan, int jobs, const std::atomic<bool>* stop,
                   const std::function<void(std::int64_t, std::int64_t)>& on_progress = {});

// Registers the subcommand and its options on `app`; the options live in `options`.
CLI::App* add_sweep_command(CLI::App& app, SweepOptions& options);

// Runs it. Returns the process exit code (0, or 130 after Ctrl-C); throws ConfigError on bad input.
int sweep_command(const SweepOptions& options);

}  // namespace fsdpsim::app
