// `fsdpsim check`: runs the scenarios that carry an `expect` block and reports every expectation
// as PASS or FAIL, for CI. Files or folders (searched recursively for *.json); JSON files that are
// not scenarios (no schema_version + model, e.g. recorded results) and scenarios without `expect`
// are skipped and counted. Exit code 0 when every check passes, 3 when one fails, 2 when a
// scenario or its expect block is bad input (the others still run and are reported), 1 when
// fsdpsim fails on one (likewise).
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "sim/app/expectations.hpp"
#include "sim/app/preset_paths.hpp"

namespace CLI {
class App;
}

namespace fsdpsim::app {

inline constexpr int kExitCheckFailed = 3;
inline constexpr int kExitCheckInternalError = 1;

struct CheckOptions {
  std::vector<std::string> paths;      // scenario files or folders
  std::string junit_path;              // --junit PATH
  std::vector<std::string> overrides;  // --set KEY=VALUE, applied to every scenario
  std::string configs_dir;             // --configs DIR
};

// kInterrupted: not read, because Ctrl-C or SIGTERM stopped the command first.
enum class ScenarioCheckStatus { kChecked, kNoExpect, kNotScenario, kError, kInterrupted };

struct ScenarioCheck {
  std::string file;
  ScenarioCheckStatus status = ScenarioCheckStatus::kError;
  std::vector<CheckResult> results;  // kChecked only
  std::string error;                 // kError only: the message
  bool internal = false;             // kError only: fsdpsim failed, not the input
  std::filesystem::path baseline;    // the expect block's baseline file, if any
};

// What `check` reads: the *.json files named by `paths` (folders searched recursively, links to
// folders followed once each, hidden entries passed over), sorted, each once however it is
// spelled (a/x.json and ./a/x.json), as entries of any kind, so that a link to nothing or a
// special file named *.json is reported when read rather than passed over; and each path that
// does not exist or folder that cannot be read, with the reason, so that the other scenarios are
// still checked and reported.
struct CheckInputs {
  std::vector<std::filesystem::path> files;
  std::vector<ScenarioCheck> unreadable;  // kError entries, one per path or folder
  // The files named themselves on the command line, by identity: such a file must be a scenario
  // however a folder argument spelled it when it reached the same file.
  std::set<std::filesystem::path> named;
  [[nodiscard]] bool was_named(const std::filesystem::path& file) const;
};
CheckInputs find_check_files(const std::vector<std::string>& paths);

// Loads and validates one file, and simulates and checks it if it has expectations (its own
// `expect` block or one `overrides` set). Bad input is returned as kError, never thrown.
ScenarioCheck check_scenario_file(const std::filesystem::path& file,
                                  const std::vector<std::string>& overrides,
                                  const PresetLocator& presets);

// A file the check did not reach, stopped by Ctrl-C or SIGTERM first: kInterrupted, or
// kNotScenario for other JSON found in a folder (read, not simulated), so that a result or a
// profile beside the scenarios is not reported as a scenario left unchecked. A file `named` on the
// command line stays kInterrupted.
ScenarioCheck not_reached(const std::filesystem::path& file, bool named);

// The report: one line per check ("PASS <file> <detail>" / "FAIL ..."), one per error ("ERROR
// <message>"), then the summary line(s).
std::string check_report(const std::vector<ScenarioCheck>& checks);

// JUnit XML: one testsuite per scenario, one testcase per check (classname = scenario file, name
// = check), <failure> on a failed check, <error> for a bad scenario or path, <skipped> for a
// scenario without expectations or not reached before an interrupt; with nothing checked, an
// <error> that says so.
std::string check_junit_xml(const std::vector<ScenarioCheck>& checks);

// 0 all passed, 3 a check failed, 2 a scenario or path was bad input or nothing was checked, 1
// fsdpsim failed on a scenario (internal error).
int check_exit_code(const std::vector<ScenarioCheck>& checks);

CLI::App* add_check_command(CLI::App& app, CheckOptions& options);

// Returns the process exit code (130 / 143 when interrupted: the scenarios checked by then are
// reported and the JUnit XML written); throws ConfigError when the JUnit path is not a usable
// output.
int check_command(const CheckOptions& options);

}  // namespace fsdpsim::app
