// `fsdpsim validate CASES.csv`: simulate every measured run of a CSV (configs/validation/README.md
// columns) and report the prediction error per case, per source, per GPU, per model size and
// overall, under each row's own FLOP definition.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace fsdpsim::app {

struct ValidateOptions {
  std::string cases;
  std::vector<std::string> overrides;  // --set applied to every case
  std::string calibration;             // --calibration PROFILE (hardware.calibration)
  std::string json_path;               // --json PATH|-
  std::string md_path;                 // --md PATH
  std::string configs_dir;
  std::string scenarios_dir;          // --scenarios-out DIR: each row's scenario as JSON
  std::vector<std::string> where;     // --where COLUMN=VALUE | COLUMN!=VALUE (all must hold)
  std::vector<std::string> group_by;  // --group-by COLUMN: tokens/s errors per value of it
  std::string fit;                    // --fit KEY=LO:HI: golden-section fit of one global parameter
  double max_mape = 0.0;              // --max-mape: exit 3 when tokens/s MAPE exceeds it (0 = off)
};

CLI::App* add_validate_command(CLI::App& app, ValidateOptions& options);
int validate_command(const ValidateOptions& options);

}  // namespace fsdpsim::app
