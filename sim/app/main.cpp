// fsdpsim: the command line. Only here are errors mapped to exit codes (README.md, "Exit codes"):
// 0 ok, 1 internal error, 2 bad usage or bad input, 3 a check that ran but failed.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <new>
#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/resource.h>
#endif

#include "sim/app/calibrate_command.hpp"
#include "sim/app/check_command.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/explain_command.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/merge_command.hpp"
#include "sim/app/report_command.hpp"
#include "sim/app/run_command.hpp"
#include "sim/app/sweep_command.hpp"
#include "sim/app/validate_command.hpp"
#include "sim/engine/executor.hpp"

namespace {

constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;

// A command simulates scenarios one after another, each building and dropping tens of MiB of
// program, timeline and allocator state. glibc gives the top of the heap back to the kernel
// whenever more than 128 KiB of it is free (M_TRIM_THRESHOLD), so every simulation faulted its
// pages in again: ~9 % of `fsdpsim validate`'s CPU time was the kernel's (reports/performance.md).
// Keeping 256 MiB of slack at the top of each heap (M_TOP_PAD) lets the next simulation reuse
// those pages (validate on the published cases: 1.1 s of kernel time -> 0.1 s, peak resident
// 179 -> 189 MB). The pad is part of every heap extension, the first included, so under an
// address-space or data limit that leaves no room for it (ulimit -v, a container's limit) the
// very first allocation would fail: there the default stays.
void keep_freed_memory_for_the_next_simulation() {
#if defined(__GLIBC__)
  constexpr int kHeapTopPad = 256 << 20;
  constexpr rlim_t kRoomForThePad = rlim_t{4} * kHeapTopPad;
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit limit{};
    if (getrlimit(resource, &limit) != 0) return;
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < kRoomForThePad) return;
  }
  mallopt(M_TOP_PAD, kHeapTopPad);
#endif
}

// `code`, unless what the command wrote to stdout never reached its reader (a full disk, a closed
// pipe or descriptor): a failed run then, as a file that cannot be written is.
int checked_stdout(int code) {
  std::cout.flush();
  if (!std::cout.fail()) return code;
  std::cerr << "error: cannot write the standard output\n";
  return code == 0 ? kExitBadInput : code;
}

// The command line parsed and its command run, each error mapped to its exit code.
int parse_and_run(int argc, char** argv) {
  CLI::App app{
      "fsdpsim: predict PyTorch FSDP training step time, throughput and memory by simulation"};
  app.set_version_flag("--version", std::string("fsdpsim ") + FSDPSIM_VERSION);
  app.require_subcommand(1);
  // CLI11's messages quote the command line (an unknown option, a value it cannot convert),
  // which nothing has checked for escape sequences.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return fsdpsim::escape_control_characters(CLI::FailureMessage::simple(a, e));
  });
  fsdpsim::app::RunOptions run_options;
  CLI::App* run = fsdpsim::app::add_run_command(app, run_options);
  fsdpsim::app::SweepOptions sweep_options;
  CLI::App* sweep = fsdpsim::app::add_sweep_command(app, sweep_options);
  fsdpsim::app::MergeOptions merge_options;
  CLI::App* merge = fsdpsim::app::add_merge_command(app, merge_options);
  fsdpsim::app::CheckOptions check_options;
  CLI::App* check = fsdpsim::app::add_check_command(app, check_options);
  fsdpsim::app::ValidateOptions validate_options;
  CLI::App* validate = fsdpsim::app::add_validate_command(app, validate_options);
  fsdpsim::app::ExplainOptions explain_options;
  CLI::App* explain = fsdpsim::app::add_explain_command(app, explain_options);
  fsdpsim::app::ReportOptions report_options;
  CLI::App* report = fsdpsim::app::add_report_command(app, report_options);
  fsdpsim::app::CalibrateOptions calibrate_options;
  CLI::App* calibrate = fsdpsim::app::add_calibrate_command(app, calibrate_options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return checked_stdout(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return checked_stdout(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return checked_stdout(app.exit(e));
  } catch (const CLI::RequiredError& e) {
    // CLI11 reads an unknown command as a missing one: name it and the commands there are.
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || (argc > 1 && sub->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !known) {
      std::cerr << "unknown command \"" << fsdpsim::escape_control_characters(argv[1])
                << "\": expected one of " << names << "\nRun with --help for more information.\n";
      return kExitBadInput;
    }
    app.exit(e);
    return kExitBadInput;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    int code = kExitInternal;
    if (run->parsed()) code = fsdpsim::app::run_command(run_options);
    if (sweep->parsed()) code = fsdpsim::app::sweep_command(sweep_options);
    if (merge->parsed()) code = fsdpsim::app::merge_command(merge_options);
    if (check->parsed()) code = fsdpsim::app::check_command(check_options);
    if (validate->parsed()) code = fsdpsim::app::validate_command(validate_options);
    if (explain->parsed()) code = fsdpsim::app::explain_command(explain_options);
    if (report->parsed()) code = fsdpsim::app::report_command(report_options);
    if (calibrate->parsed()) code = fsdpsim::app::calibrate_command(calibrate_options);
    return checked_stdout(code);
  } catch (const fsdpsim::app::ConfigError& e) {
    // Messages echo command-line text, which nothing else has checked for escape sequences.
    std::cerr << "error: " << fsdpsim::escape_control_characters(e.what()) << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    // A scenario within every size bound can still need more than this machine gives (tens of
    // GiB at 1,024 micro-batches of a deep model, reports/performance.md): a limit of the input
    // on this machine, said as such, not a crash.
    if (sweep->parsed()) {
      // Each point's memory is given back when it ends (a point too large is skipped), and so is
      // --trace-row's: what grows is the table of every point, held until it is written.
      std::cerr << "error: out of host memory: the sweep's table (a row and a result line per "
                   "point, kept until the outputs are written) needs more memory than the "
                   "machine gives the process; run the grid in slices (--shard K/N, each with "
                   "its own --out) or with fewer points\n";
      return kExitBadInput;
    }
    if (merge->parsed()) {
      std::cerr << "error: out of host memory: merging holds every row of every slice and "
                   "needs more memory than the machine gives the process\n";
      return kExitBadInput;
    }
    // The scenario that needed it, where one was named (check and validate simulate many).
    const std::string& scenario = run->parsed()       ? run_options.scenario
                                  : explain->parsed() ? explain_options.scenario
                                                      : std::string();
    std::cerr << "error: "
              << (scenario.empty() ? std::string()
                                   : fsdpsim::escape_control_characters(scenario) + ": ")
              << "out of host memory: simulating this needs more memory than the "
                 "machine gives the process; fewer micro-batches per step (global_batch), layers "
                 "or straggler classes make the simulation smaller\n";
    return kExitBadInput;
  } catch (const fsdpsim::engine::DeadlockError& e) {
    std::cerr << "internal error: " << fsdpsim::escape_control_characters(e.what()) << "\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << fsdpsim::escape_control_characters(e.what()) << "\n";
    return kExitInternal;
  }
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_for_the_next_simulation();
  try {
    return parse_and_run(argc, argv);
  } catch (const std::bad_alloc&) {
    // Building the command line's parser is the one step outside parse_and_run's own handlers.
    std::cerr << "error: out of host memory before any command ran: the process may allocate "
                 "too little (ulimit -v, a container's memory limit)\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    // What parse_and_run's handlers do not take: CLI11 refusing the parser as built, or a
    // handler's own message failing to build. Written without allocating, so nothing escapes,
    // control characters as '?'.
    std::fputs("internal error: ", stderr);
    for (const char* c = e.what(); *c != '\0'; ++c) {
      const auto byte = static_cast<unsigned char>(*c);
      std::fputc(byte < 0x20 || byte == 0x7f ? '?' : byte, stderr);  // no escape sequences
    }
    std::fputc('\n', stderr);
    return kExitInternal;
  } catch (...) {
    std::fputs("internal error: an exception of unknown type\n", stderr);
    return kExitInternal;
  }
}
