// fsdpsim: the command line. Only here are errors mapped to exit codes (DESIGN.md):
// 0 ok, 1 internal error, 2 bad usage or bad input, 3 a check that ran but failed.
#include <CLI/CLI.hpp>
#include <iostream>

#include "sim/app/config_error.hpp"
#include "sim/app/run_command.hpp"
#include "sim/engine/executor.hpp"

namespace {

constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fsdpsim: predict PyTorch FSDP training step time, throughput and memory by simulation"};
  app.set_version_flag("--version", std::string("fsdpsim ") + FSDPSIM_VERSION);
  app.require_subcommand(1);
  fsdpsim::app::RunOptions run_options;
  CLI::App* run = fsdpsim::app::add_run_command(app, run_options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    if (run->parsed()) return fsdpsim::app::run_command(run_options);
  } catch (const fsdpsim::app::ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const fsdpsim::engine::DeadlockError& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  return kExitInternal;
}
