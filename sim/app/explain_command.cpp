#include "sim/app/explain_command.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <set>

#include "sim/app/cli_validators.hpp"
#include "sim/app/explain_step.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/sweep_command.hpp"

namespace fsdpsim::app {
namespace {

constexpr const char* kExplainFooter = R"(
The critical path is the chain of kernels, collectives, CPU launches and host work that set the
step time: the heaviest path of the op graph of the measured step (stream order, NCCL
communicator order, cross-stream waits, the CPU's issue order and its waits), with each op
weighted by the time it took in the simulation. "Exposed" communication is collective time during
which no compute-stream kernel ran. The diagnosis names the bound: CPU (the GPU idles waiting for
launches or host work), communication (the phase, collective and link with the most exposed
time), or compute.

Exit codes: 0 ok (an out-of-memory prediction is explained too), 1 internal error, 2 bad input.)";

}  // namespace

CLI::App* add_explain_command(CLI::App& app, ExplainOptions& options) {
  CLI::App* explain = app.add_subcommand(
      "explain",
      "Explain a scenario's step: critical path, exposed communication per unit, diagnosis");
  explain->add_option("scenario", options.scenario, "Scenario JSON file")
      ->required()
      ->check(non_empty());
  explain
      ->add_option("--set", options.overrides,
                   "Override a scenario key, e.g. --set training.micro_batch=2")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  explain
      ->add_option("--json", options.json_path,
                   "Write the analysis as JSON to PATH ('-' for stdout)")
      ->type_name("PATH|-")
      ->check(non_empty());
  explain->add_option("--top", options.top, "Rows per table (0 = all; default 10)")
      ->type_name("N")
      ->check(row_count());
  explain->add_option("--configs", options.configs_dir, "Folder of presets (as for run)")
      ->type_name("DIR")
      ->check(non_empty());
  explain->footer(kExplainFooter);
  return explain;
}

int explain_command(const ExplainOptions& options) {
  // Every file the scenario names (presets, a calibration profile) is an input an output must
  // not overwrite, as the scenario is.
  std::set<std::filesystem::path> inputs{options.scenario};
  PresetLocator presets{default_configs_dir(options.configs_dir)};
  presets.files_resolved = &inputs;
  const Scenario scenario = load_scenario(options.scenario, options.overrides, presets);
  check_sweep_block(options.scenario, options.overrides, presets);
  const std::vector<std::filesystem::path> input_files(inputs.begin(), inputs.end());
  check_outputs({options.json_path}, input_files);
  const fsdp::SimulationOutput output = simulate_scenario(scenario, /*record_memory=*/false);
  refuse_unknown_expect_keys(scenario, output);
  const Explanation explanation = explain_step(scenario, output);
  if (!options.json_path.empty())
    write_output(options.json_path, explanation_json(explanation).dump(2) + "\n", input_files);
  if (!writes_stdout(options.json_path)) std::cout << explanation_text(explanation, options.top);
  return 0;
}

}  // namespace fsdpsim::app
