// `fsdpsim run`: load a scenario, simulate one training step, print and write the results.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace fsdpsim::app {

struct RunOptions {
  std::string scenario;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string json_path;               // --json PATH|-
  std::string trace_path;              // --trace PATH
  std::string memory_timeline_path;    // --memory-timeline PATH (CSV)
  std::string allocations_path;        // --allocations PATH (CSV)
  bool max_micro_batch = false;        // --max-micro-batch
  std::string configs_dir;             // --configs DIR
  bool timing = false;                 // --timing: wall-clock phases on stderr
};

// Registers the subcommand and its options on `app`; the options live in `options`.
CLI::App* add_run_command(CLI::App& app, RunOptions& options);

// Runs it. Returns the process exit code; throws ConfigError on bad input.
int run_command(const RunOptions& options);

}  // namespace fsdpsim::app
