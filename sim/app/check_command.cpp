#include "sim/app/check_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <iostream>
#include <set>
#include <system_error>

#include "sim/app/cli_validators.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/interrupt_guard.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/junit_xml.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/sweep_command.hpp"
#include "sim/units/text_scan.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kSkippedNamesShown = 10;

constexpr const char* kCheckFooter = R"(
A scenario's "expect" block states what the config must achieve, on any key of the result JSON
(dotted paths reach nested keys):
  "expect": {
    "status": "ok",
    "peak_mem_reserved_gib": {"max": 78},
    "tokens_per_s_per_gpu": {"min": 3000},
    "breakdown.exposed_communication_s": {"max": 0.05},
    "baseline": "baselines/my_job.result.json", "tolerance": 0.05,
    "keys": ["step_time_s", "peak_mem_reserved_gib"]
  }
The baseline is a result JSON recorded with `fsdpsim run SCENARIO --json PATH` (of a step that
fits), relative to the scenario file; the keys must stay within the relative tolerance (default
0.05) of it.

Folders are searched recursively for *.json, hidden files and folders (.git, .vscode) passed
over; files that are not scenarios (no schema_version, or none of model, hardware, training,
fsdp beside it) are skipped, counted and named in the summary. Scenarios without "expect" are
loaded and validated (a misspelled key is an error, as in run) but not simulated, and reported
as skipped, unless they have a "sweep" block: a block is a check of its own, named sweep block:
its keys, the files it names and, up to 2,000 points, every point loaded, as `fsdpsim sweep`
would refuse them; for a larger grid it is named sweep block (keys only).
A file named on the command line must be a scenario, and so must a file with an "expect" block.

Exit codes: 0 every check passed, 1 internal error, 2 bad usage, a bad scenario / expect block
or a path that cannot be read, a scenario too large for the machine's memory (the other scenarios
are still checked and reported) or nothing checked at all, 3 a check failed, 130 interrupted
(143 terminated): the scenarios checked by then are reported and the JUnit XML written (a second
signal ends it at once).)";

constexpr std::array<const char*, 4> kScenarioSections = {"model", "hardware", "training", "fsdp"};

// A scenario holds schema_version and a model, or schema_version beside a scenario's own sections
// (hardware, training, fsdp): a misspelt model is then an error, not a file skipped as another
// JSON. Presets and calibration profiles carry schema_version without any of these.
bool is_scenario(const nlohmann::json& document) {
  if (!document.is_object() || !document.contains("schema_version")) return false;
  return std::any_of(kScenarioSections.begin(), kScenarioSections.end(),
                     [&](const char* key) { return document.contains(key); });
}

std::string plural(std::size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// A file name or message on one line of the report: a line feed in a name would split it.
std::string one_line(const std::string& text) { return escape_control_characters(text, "\t"); }

// Nothing was checked and nothing was bad input: the run cannot pass (exit 2), and says why.
bool nothing_was_checked(const std::vector<ScenarioCheck>& checks) {
  return std::none_of(checks.begin(), checks.end(), [](const ScenarioCheck& c) {
    return c.status == ScenarioCheckStatus::kChecked || c.status == ScenarioCheckStatus::kError ||
           c.status == ScenarioCheckStatus::kInterrupted;
  });
}

std::string nothing_checked(const std::vector<ScenarioCheck>& checks) {
  const bool any_scenario = std::any_of(checks.begin(), checks.end(), [](const ScenarioCheck& c) {
    return c.status == ScenarioCheckStatus::kNoExpect;
  });
  return any_scenario ? "nothing was checked: no scenario has an expect or a sweep block"
                      : "nothing was checked: no scenario was found";
}

}  // namespace

namespace {

constexpr int kMaxFolderDepth = 64;

ScenarioCheck unreadable_path(const fs::path& path, const std::string& why) {
  ScenarioCheck check;
  check.file = path.string();
  check.status = ScenarioCheckStatus::kError;
  check.error = fmt::format("{}: {}", check.file, why);
  return check;
}

// Whether a folder search passes an entry over: hidden ones (.git, .vscode and their JSON, which
// may hold comments, are not scenarios), as git, ctest and pytest pass them over. A hidden path
// named on the command line is read.
bool hidden(const fs::path& entry) { return entry.filename().string().starts_with('.'); }

// Every *.json entry under `dir`, whatever its kind (a link that leads nowhere or a FIFO is then
// refused when read, by name, rather than passed over), following links to folders once each. A
// folder that cannot be read is reported and its siblings still searched.
void collect_json_files(const fs::path& dir, int depth, std::set<fs::path>& visited,
                        CheckInputs& inputs) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (!ec && !visited.insert(canonical).second) return;  // a link back up: searched already
  if (depth > kMaxFolderDepth) {
    inputs.unreadable.push_back(
        unreadable_path(dir, fmt::format("folders nested deeper than {} levels", kMaxFolderDepth)));
    return;
  }
  std::vector<fs::path> folders;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code kind;
    if (hidden(it->path())) continue;
    if (it->is_directory(kind)) {
      folders.push_back(it->path());
    } else if (it->path().extension() == ".json") {
      files.push_back(it->path());
    }
  }
  if (ec) {
    inputs.unreadable.push_back(
        unreadable_path(dir, fmt::format("cannot read the folder: {}", ec.message())));
    return;
  }
  inputs.files.insert(inputs.files.end(), files.begin(), files.end());
  for (const fs::path& folder : folders) collect_json_files(folder, depth + 1, visited, inputs);
}

// The path that names the same file as others spelled differently.
fs::path identity(const fs::path& file) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(file, ec);
  return ec ? file.lexically_normal() : canonical;
}

// The baseline file a scenario's expect block names (with --set applied), if it names one as a
// string: known before the scenario is loaded, so that the JUnit XML cannot be written over it
// when the load fails (an expectation out of range, a bad key elsewhere).
fs::path named_baseline(nlohmann::json document, const fs::path& file,
                        const std::vector<std::string>& overrides) {
  try {
    for (const std::string& o : overrides) apply_override(document, o);
  } catch (const ConfigError&) {
    return {};  // load_scenario reports the malformed override
  }
  const auto expect = document.is_object() ? document.find("expect") : document.end();
  if (expect == document.end() || !expect->is_object()) return {};
  const auto baseline = expect->find("baseline");
  if (baseline == expect->end() || !baseline->is_string() || baseline->get<std::string>().empty())
    return {};
  return baseline_file(file, baseline->get<std::string>());
}

}  // namespace

CheckInputs find_check_files(const std::vector<std::string>& paths) {
  CheckInputs inputs;
  std::set<fs::path> visited;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      collect_json_files(p, 0, visited, inputs);
    } else if (fs::exists(fs::symlink_status(p, ec))) {
      inputs.files.emplace_back(p);
      inputs.named.insert(identity(p));
    } else {
      inputs.unreadable.push_back(unreadable_path(p, "no such file or folder"));
    }
  }
  std::sort(inputs.files.begin(), inputs.files.end());
  std::set<fs::path> seen;
  std::vector<fs::path> unique;
  for (const fs::path& file : inputs.files) {
    if (seen.insert(identity(file)).second) unique.push_back(file);
  }
  inputs.files = std::move(unique);
  return inputs;
}

bool CheckInputs::was_named(const fs::path& file) const { return named.contains(identity(file)); }

ScenarioCheck check_scenario_file(const fs::path& file, const std::vector<std::string>& overrides,
                                  const PresetLocator& presets) {
  ScenarioCheck check;
  check.file = file.string();
  const auto fail = [&check](std::string message) {
    check.status = ScenarioCheckStatus::kError;
    check.error = std::move(message);
    check.results.clear();
  };
  try {
    const nlohmann::json document = read_json_file(file);
    check.baseline = named_baseline(document, file, overrides);
    if (!is_scenario(document)) {
      // An expect block says the file was meant to be checked: a misspelled schema_version or
      // model would otherwise turn its checks off in silence.
      if (document.is_object() && document.contains("expect")) {
        throw ConfigError(
            file.string(), "",
            fmt::format("has an expect block but is not a scenario (no {}): expected a JSON "
                        "object with schema_version and model",
                        document.contains("schema_version") ? "model" : "schema_version"));
      }
      check.status = ScenarioCheckStatus::kNotScenario;
      return check;
    }
    // A --set of the whole block would drop the scenario's own gates without a word.
    if (document.contains("expect")) {
      for (const std::string& o : overrides) {
        if (o.substr(0, o.find('=')) != "expect") continue;
        throw ConfigError(file.string(), "/expect",
                          fmt::format("has an expect block of its own, which --set {} would "
                                      "replace; add to it key by key instead (--set "
                                      "expect.KEY=..., e.g. --set 'expect.mfu={{\"min\": 0.4}}')",
                                      o.substr(0, o.find('=') + 1) + "..."));
      }
    }
    // Loaded whether or not it has expectations: a misspelled "expect" (or any other key) is an
    // error here as in `run`, not a gate turned off; and --set may add the block.
    const Scenario scenario = load_scenario(file, overrides, presets);
    // A sweep block that passes is a check of its own (what `sweep` would refuse), so a folder of
    // sweep files is a suite CI can gate.
    const std::optional<SweepBlockCheck> block =
        check_sweep_block(file, overrides, presets, /*load_every_point=*/true);
    if (block) {
      check.results.push_back({block->loaded ? "sweep block" : "sweep block (keys only)", true,
                               sweep_block_check_text(*block)});
    }
    if (!scenario.expectations) {
      check.status = block ? ScenarioCheckStatus::kChecked : ScenarioCheckStatus::kNoExpect;
      return check;
    }
    const nlohmann::json result =
        result_to_json(scenario, simulate_scenario(scenario, /*record_memory=*/false));
    for (CheckResult& r : evaluate_expectations(*scenario.expectations, result))
      check.results.push_back(std::move(r));
    check.status = ScenarioCheckStatus::kChecked;
  } catch (const ConfigError& e) {
    // Errors in a preset or baseline name that file; say which scenario led there.
    const std::string message = e.what();
    fail(message.rfind(check.file, 0) == 0 ? message : fmt::format("{}: {}", check.file, message));
  } catch (const std::bad_alloc&) {
    // One scenario too large for this machine's memory (given back as the exception unwinds)
    // does not cost the others their report.
    fail(
        fmt::format("{}: out of host memory: simulating this scenario needs more memory than "
                    "the machine gives the process",
                    check.file));
  } catch (const std::exception& e) {
    fail(fmt::format("{}: internal error: {}", check.file, e.what()));
    check.internal = true;
  }
  return check;
}

ScenarioCheck not_reached(const fs::path& file, bool named) {
  ScenarioCheck check;
  check.file = file.string();
  check.status = ScenarioCheckStatus::kInterrupted;
  if (named) return check;
  try {
    // Reading takes milliseconds; simulating is what the interrupt skips. A file with an expect
    // block was meant to be checked, scenario or not.
    const nlohmann::json document = read_json_file(file);
    if (!is_scenario(document) && !(document.is_object() && document.contains("expect")))
      check.status = ScenarioCheckStatus::kNotScenario;
  } catch (const ConfigError&) {
    // Unreadable: left as not reached, as it was.
  }
  return check;
}

std::string check_report(const std::vector<ScenarioCheck>& checks) {
  std::string out;
  std::size_t scenarios = 0;
  std::size_t passed = 0;
  std::size_t failed = 0;
  std::size_t errors = 0;
  std::size_t internal_errors = 0;
  std::size_t interrupted = 0;
  std::vector<std::string> without_expect;
  std::vector<std::string> not_scenarios;  // other JSON found in the folders
  for (const ScenarioCheck& c : checks) {
    switch (c.status) {
      case ScenarioCheckStatus::kChecked:
        ++scenarios;
        for (const CheckResult& r : c.results) {
          out += fmt::format("{} {} {}\n", r.passed ? "PASS" : "FAIL", one_line(c.file), r.detail);
          ++(r.passed ? passed : failed);
        }
        break;
      case ScenarioCheckStatus::kError:
        ++(c.internal ? internal_errors : errors);
        out += fmt::format("ERROR {}\n", one_line(c.error));
        break;
      case ScenarioCheckStatus::kNoExpect:
        without_expect.push_back(one_line(c.file));
        break;
      case ScenarioCheckStatus::kNotScenario:
        not_scenarios.push_back(one_line(c.file));
        break;
      case ScenarioCheckStatus::kInterrupted:
        ++interrupted;
        break;
    }
  }
  out +=
      fmt::format("check: {}, {}: {} passed, {} failed", plural(scenarios, "scenario", "scenarios"),
                  plural(passed + failed, "check", "checks"), passed, failed);
  if (errors > 0)
    out += fmt::format("; {} with bad input", plural(errors, "scenario", "scenarios"));
  if (internal_errors > 0) {
    out += fmt::format("; {} fsdpsim failed on (internal error)",
                       plural(internal_errors, "scenario", "scenarios"));
  }
  if (interrupted > 0) {
    out +=
        fmt::format("; interrupted before {} could be read", plural(interrupted, "file", "files"));
  }
  if (!without_expect.empty()) {
    out += fmt::format("; skipped {} without an expect block",
                       plural(without_expect.size(), "scenario", "scenarios"));
  }
  if (!not_scenarios.empty()) {
    out +=
        fmt::format("; skipped {} that {}", plural(not_scenarios.size(), "JSON file", "JSON files"),
                    not_scenarios.size() == 1 ? "is not a scenario" : "are not scenarios");
  }
  out += "\n";
  // Named, so that a config that lost its model or schema_version is seen to have left the suite.
  const auto list = [&out](const char* label, const std::vector<std::string>& files) {
    if (files.empty()) return;
    const std::size_t shown = std::min(files.size(), kSkippedNamesShown);
    out += fmt::format(
        "  {}: {}{}\n", label,
        fmt::join(files.begin(), files.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        files.size() > shown ? ", ..." : "");
  };
  list("without expect", without_expect);
  list("not scenarios", not_scenarios);
  if (nothing_was_checked(checks)) out += fmt::format("  {}\n", nothing_checked(checks));
  return out;
}

std::string check_junit_xml(const std::vector<ScenarioCheck>& checks) {
  std::vector<JunitSuite> suites;
  for (const ScenarioCheck& c : checks) {
    if (c.status == ScenarioCheckStatus::kNotScenario) continue;
    JunitSuite suite;
    suite.name = c.file;
    switch (c.status) {
      case ScenarioCheckStatus::kError:
        suite.cases.push_back(
            {c.file, "load scenario and expectations", JunitOutcome::kError, c.error});
        break;
      case ScenarioCheckStatus::kNoExpect:
        suite.cases.push_back(
            {c.file, "expectations", JunitOutcome::kSkipped, "the scenario has no expect block"});
        break;
      case ScenarioCheckStatus::kInterrupted:
        suite.cases.push_back({c.file, "expectations", JunitOutcome::kSkipped,
                               "not checked: fsdpsim check was interrupted first"});
        break;
      case ScenarioCheckStatus::kChecked:
      case ScenarioCheckStatus::kNotScenario:
        break;
    }
    for (const CheckResult& r : c.results) {
      suite.cases.push_back({c.file, r.name,
                             r.passed ? JunitOutcome::kPassed : JunitOutcome::kFailed,
                             r.passed ? "" : r.detail});
    }
    suites.push_back(std::move(suite));
  }
  // The job fails (exit 2): the report says why rather than showing nothing wrong.
  if (nothing_was_checked(checks)) {
    suites.push_back(
        {"fsdpsim check",
         {{"fsdpsim check", "scenarios checked", JunitOutcome::kError, nothing_checked(checks)}}});
  }
  return junit_xml("fsdpsim check", suites);
}

int check_exit_code(const std::vector<ScenarioCheck>& checks) {
  if (std::any_of(checks.begin(), checks.end(), [](const ScenarioCheck& c) {
        return c.status == ScenarioCheckStatus::kError && c.internal;
      })) {
    return kExitCheckInternalError;
  }
  bool failed = false;
  for (const ScenarioCheck& c : checks) {
    if (c.status == ScenarioCheckStatus::kError) return 2;
    failed = failed || std::any_of(c.results.begin(), c.results.end(),
                                   [](const CheckResult& r) { return !r.passed; });
  }
  if (nothing_was_checked(checks)) return 2;  // a gate that checked nothing has not passed
  return failed ? kExitCheckFailed : 0;
}

CLI::App* add_check_command(CLI::App& app, CheckOptions& options) {
  CLI::App* check = app.add_subcommand(
      "check", "Run scenarios with an expect block and check their results (CI)");
  check
      ->add_option(
          "paths", options.paths,
          "Scenario files or folders (searched recursively for *.json, hidden entries passed over)")
      ->required()
      ->check(non_empty());
  check->add_option("--junit", options.junit_path, "Write a JUnit XML report to PATH")
      ->type_name("PATH")
      ->check(non_empty());
  check->add_option("--set", options.overrides, "Override a scenario key in every scenario")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  check->add_option("--configs", options.configs_dir, "Folder of presets (as for run)")
      ->type_name("DIR")
      ->check(non_empty());
  check->footer(kCheckFooter);
  return check;
}

int check_command(const CheckOptions& options) {
  // The scenarios, every preset and profile they name and their baselines are inputs the JUnit
  // XML must not overwrite.
  std::set<fs::path> files_named;
  PresetLocator presets{default_configs_dir(options.configs_dir)};
  presets.files_resolved = &files_named;
  const CheckInputs found = find_check_files(options.paths);
  std::vector<ScenarioCheck> checks = found.unreadable;
  if (!options.junit_path.empty()) {
    // Refused before any scenario is simulated, not after them all: the XML over a scenario,
    // a file one names or a baseline. Loading takes milliseconds; what fails to load is
    // reported when its scenario is checked.
    std::vector<fs::path> inputs = found.files;
    for (const fs::path& file : found.files) {
      try {
        const nlohmann::json document = read_json_file(file);
        if (const fs::path baseline = named_baseline(document, file, options.overrides);
            !baseline.empty()) {
          inputs.push_back(baseline);
        }
        if (is_scenario(document)) (void)load_scenario(file, options.overrides, presets);
      } catch (const std::exception&) {
        continue;  // reported when this scenario is checked
      }
    }
    inputs.insert(inputs.end(), files_named.begin(), files_named.end());
    check_outputs({options.junit_path}, inputs);
  }
  // Ctrl-C or SIGTERM (a CI job's time limit) stops before the next scenario: those checked by
  // then are reported and the JUnit XML is written.
  const InterruptGuard guard;
  for (const fs::path& file : found.files) {
    // Files found in a folder may be other JSON (results, profiles); a file named on the
    // command line must be a scenario.
    const bool named = found.was_named(file);
    if (InterruptGuard::flag().load()) {
      checks.push_back(not_reached(file, named));
      continue;
    }
    checks.push_back(check_scenario_file(file, options.overrides, presets));
    if (named && checks.back().status == ScenarioCheckStatus::kNotScenario) {
      checks.back().status = ScenarioCheckStatus::kError;
      checks.back().error = fmt::format(
          "{}: expected a scenario (a JSON object with schema_version and model), found other "
          "JSON",
          file.string());
    }
  }
  // File names come from the folders searched, and may hold escape sequences.
  // With the JUnit XML on stdout, the text report goes to stderr.
  (writes_stdout(options.junit_path) ? std::cerr : std::cout)
      << escape_control_characters(check_report(checks));
  std::cout.flush();
  if (!options.junit_path.empty()) {
    std::vector<fs::path> inputs(files_named.begin(), files_named.end());
    for (const ScenarioCheck& c : checks) {
      inputs.emplace_back(c.file);
      if (!c.baseline.empty()) inputs.push_back(c.baseline);
    }
    write_output(options.junit_path, check_junit_xml(checks), inputs);
  }
  // Interrupted, whether or not a scenario was left unread (a signal during the last one).
  return InterruptGuard::flag().load() ? InterruptGuard::exit_code() : check_exit_code(checks);
}

}  // namespace fsdpsim::app
