// `fsdpsim calibrate plan|fit|import-nccl-tests`: what a scenario needs measured, how well a
// calibration profile fits, and nccl-tests logs turned into a profile (README "Calibrating a new
// cluster"). The measuring itself is the separate fsdpsim-calibrate harness (calibrate/harness).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace fsdpsim::app {

enum class CalibrateAction : std::uint8_t { kNone, kPlan, kFit, kImport };

struct CalibrateOptions {
  CalibrateAction action = CalibrateAction::kNone;
  std::string configs_dir;  // --configs DIR
  // plan
  std::string scenario;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string plan_output;             // -o PLAN.txt (for fsdpsim-calibrate --plan)
  // fit
  std::string profile;
  std::string fit_output;  // -o FIT.json
  std::string against;     // --against PRESET: the GEMMs against that preset's model
  // import-nccl-tests
  std::vector<std::string> logs;
  std::string import_output;  // -o PROFILE.json (required)
  std::string gpu;            // --gpu PRESET: the hardware preset of the GPUs the logs ran on
  std::string name;
  std::string description;
  // When a log does not say: NAME for every log, FILE=NAME for one (repeatable).
  std::vector<std::string> collectives;
  std::int32_t ranks = 0;  // overrides (0: from the log)
  std::int32_t ranks_per_node = 0;
  bool in_place = false;
  bool allow_truncated = false;
};

CLI::App* add_calibrate_command(CLI::App& app, CalibrateOptions& options);

// Returns the exit code; throws ConfigError on bad input (exit code 2).
int calibrate_command(const CalibrateOptions& options);

}  // namespace fsdpsim::app
