// `fsdpsim explain`: why a scenario's step takes the time it does — the critical path through
// the op graph of the measured step, exposed vs overlapped communication per FSDP unit, and a
// one-line diagnosis.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace fsdpsim::app {

struct ExplainOptions {
  std::string scenario;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string json_path;               // --json PATH|-
  std::size_t top = 10;                // --top N rows per table (0 = all)
  std::string configs_dir;             // --configs DIR
};

// Registers the subcommand and its options on `app`; the options live in `options`.
CLI::App* add_explain_command(CLI::App& app, ExplainOptions& options);

// Runs it. Returns the process exit code; throws ConfigError on bad input.
int explain_command(const ExplainOptions& options);

}  // namespace fsdpsim::app
