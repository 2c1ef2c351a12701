#include "sim/app/validate_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "models/workload.hpp"
#include "sim/app/calibration_json.hpp"
#include "sim/app/cli_validators.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/finite_number.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/model_json.hpp"
#include "sim/app/preset_paths.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/validation_cases.hpp"
#include "sim/app/validation_flops.hpp"
#include "sim/app/validation_report.hpp"
#include "sim/app/validation_scaling.hpp"
#include "sim/app/validation_stats.hpp"

namespace fsdpsim::app {
namespace {

constexpr int kExitCheckFailed = 3;
// --where COLUMN=VALUE or COLUMN!=VALUE: a row is kept when every filter holds.
struct RowFilter {
  std::string column;
  std::string value;
  bool equal = true;
};

void require_column(const std::string& option, const std::string& column,
                    const std::vector<ValidationCase>& cases) {
  if (!cases.empty() && cases.front().fields.count(column) == 0) {
    throw ConfigError(option, "", fmt::format("the cases file has no column \"{}\"", column));
  }
}

RowFilter parse_filter(const std::string& text, const std::vector<ValidationCase>& cases) {
  RowFilter f;
  const std::size_t eq = text.find('=');
  // "gpu==h100-sxm-80gb" would keep rows whose gpu is "=h100-sxm-80gb": none.
  if (eq == std::string::npos || eq == 0 || text.compare(eq, 2, "==") == 0) {
    throw ConfigError("--where", "",
                      fmt::format("expected COLUMN=VALUE or COLUMN!=VALUE, found \"{}\"", text));
  }
  f.equal = text[eq - 1] != '!';
  f.column = text.substr(0, f.equal ? eq : eq - 1);
  f.value = text.substr(eq + 1);
  require_column("--where", f.column, cases);
  return f;
}

bool selected(const ValidationCase& c, const std::vector<RowFilter>& filters) {
  for (const RowFilter& f : filters) {
    if ((c.get(f.column) == f.value) != f.equal) return false;
  }
  return true;
}

// Why --where kept no row: the first filter no row passes on its own, with the values the
// column has ("no row is left after --where (gpu is never "h100"; it is a100-sxm-80gb or
// h100-sxm-80gb)").
std::string where_miss(const std::vector<ValidationCase>& cases,
                       const std::vector<RowFilter>& filters) {
  constexpr std::size_t kValuesShown = 10;
  for (const RowFilter& f : filters) {
    if (std::any_of(cases.begin(), cases.end(),
                    [&](const ValidationCase& c) { return selected(c, {f}); }))
      continue;
    if (!f.equal) return fmt::format(" ({} is \"{}\" on every row)", f.column, f.value);
    std::set<std::string> values;
    for (const ValidationCase& c : cases) values.insert(c.get(f.column));
    std::vector<std::string> shown;
    for (const std::string& v : values) {
      if (shown.size() == kValuesShown) break;
      shown.push_back(fmt::format("\"{}\"", v));
    }
    return fmt::format(
        " ({} is never \"{}\"; it is {}{})", f.column, f.value, fmt::join(shown, ", "),
        values.size() > shown.size() ? fmt::format(", ... ({} values)", values.size()) : "");
  }
  return " (each filter matches rows, but no row matches them all)";
}

// --fit KEY=LO:HI
struct FitRequest {
  std::string key;
  double lo = 0.0;
  double hi = 0.0;
};

FitRequest parse_fit(const std::string& text) {
  const std::size_t eq = text.find('=');
  const std::size_t colon = text.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || colon == std::string::npos)
    throw ConfigError("--fit", "", fmt::format("expected KEY=LO:HI, found \"{}\"", text));
  FitRequest r;
  r.key = text.substr(0, eq);
  const std::optional<double> lo =
      finite_number(std::string_view(text).substr(eq + 1, colon - eq - 1));
  const std::optional<double> hi = finite_number(std::string_view(text).substr(colon + 1));
  if (!lo || !hi) {
    throw ConfigError("--fit", "",
                      fmt::format("expected KEY=LO:HI with LO and HI finite decimal numbers, "
                                  "found \"{}\"",
                                  text));
  }
  r.lo = *lo;
  r.hi = *hi;
  if (!(r.lo < r.hi)) {
    throw ConfigError("--fit", "", fmt::format("expected LO < HI, found {} and {}", r.lo, r.hi));
  }
  return r;
}

// Measurements no run on the row's GPU can have made: model FLOPs (under the row's count) or
// TFLOPS above the GPU's densest peak, a peak memory above the device's. An error naming the
// line and column, as a malformed cell is.
void check_measurements_fit_the_gpu(const ValidationCase& c, const Scenario& scenario,
                                    const FlopDefinition& def, const std::filesystem::path& file) {
  const hardware::GpuSpec& gpu = scenario.hardware.cluster.gpu;
  double densest = 0.0;
  for (const FlopsPerSec peak : gpu.peak_dense) densest = std::max(densest, peak.value() / 1e12);
  const auto refuse = [&](const char* column, const std::string& expected) {
    throw ConfigError(fmt::format("{}: line {}, column {}: expected {}, found \"{}\"",
                                  file.string(), c.line, column, expected, c.get(column)));
  };
  if (const auto tokens = c.number("measured_tokens_per_s_per_gpu");
      tokens && model_tflops(def, *tokens) > densest) {
    refuse("measured_tokens_per_s_per_gpu",
           fmt::format("a rate whose FLOPs under the row's count stay within {}'s densest peak, "
                       "{:g} TFLOP/s (this one needs {:.4g}: a rate per node or per job rather "
                       "than per GPU?)",
                       gpu.name, densest, model_tflops(def, *tokens)));
  }
  for (const char* column : {"measured_model_tflops_per_gpu", "measured_hardware_tflops_per_gpu"}) {
    if (const auto tflops = c.number(column); tflops && *tflops > densest)
      refuse(column, fmt::format("at most {}'s densest peak, {:g} TFLOP/s", gpu.name, densest));
  }
  for (const char* column : {"measured_peak_mem_gib", "measured_peak_reserved_gib"}) {
    if (const auto gib = c.number(column); gib && *gib > to_gib(gpu.hbm))
      refuse(column, fmt::format("at most {}'s memory, {:.2f} GiB", gpu.name, to_gib(gpu.hbm)));
  }
}

struct Evaluation {
  std::vector<ValidationOutcome> outcomes;
  nlohmann::json skipped = nlohmann::json::array();
};

// A row the loader or the simulation refuses as it stands is malformed: an error naming its line,
// and its column where the loader's message names one.
[[noreturn]] void refuse_row(const ValidationCase& c, const std::filesystem::path& file,
                             const std::string& reason) {
  const bool names_column = reason.rfind("column ", 0) == 0 || reason.rfind("columns ", 0) == 0;
  throw ConfigError(
      fmt::format("{}: line {}{} {}", file.string(), c.line, names_column ? "," : ":", reason));
}

// The checks a row gets without being simulated, for the rows validate does not evaluate (left
// out by --where) and those it skips: its scenario loaded as it stands and its measurements set
// against its GPU, or, where it is skipped (no GPU count, a GPU without a preset, no measured
// throughput), its model.
void check_row_alone(const ValidationCase& c, const CaseScenario& built,
                     const std::filesystem::path& file, const PresetLocator& presets) {
  try {
    if (built.document.is_null()) {
      if (!built.model.is_null()) (void)model_from_json(built.model, file, "/model", presets);
      return;
    }
    const Scenario scenario = scenario_from_json(built.document, file, {}, presets, {});
    check_measurements_fit_the_gpu(c, scenario, flop_definition(c, scenario), file);
  } catch (const ConfigError& error) {
    // check_measurements_fit_the_gpu names the file and line itself.
    const std::string what = error.what();
    if (what.rfind(file.string() + ": line ", 0) == 0) throw;
    refuse_row(c, file, message_in_columns(what, file));
  }
}

Evaluation evaluate(const std::vector<const ValidationCase*>& cases,
                    const std::filesystem::path& file, const std::vector<std::string>& overrides,
                    const std::vector<std::string>& origins, const PresetLocator& presets) {
  Evaluation e;
  for (const ValidationCase* row : cases) {
    const ValidationCase& c = *row;
    const CaseScenario built = scenario_for_case(c, file);
    const auto skip = [&](const std::string& reason) {
      e.skipped.push_back({{"case_id", c.get("case_id")}, {"line", c.line}, {"reason", reason}});
    };
    if (built.document.is_null()) {
      skip(built.skip_reason);
      continue;
    }
    // A row the loader or the simulation refuses as it stands is malformed (settings that
    // contradict each other, values out of range): an error naming its line and column. One
    // that only a --set, --calibration or --fit value makes invalid is skipped: that what-if
    // does not apply to it.
    const auto refuse = [&](const std::string& reason) { refuse_row(c, file, reason); };
    const auto refuse_or_skip = [&](const std::string& reason) {
      if (overrides.empty()) refuse(reason);
      try {
        (void)simulate_scenario(scenario_from_json(built.document, file, {}, presets, {}), false);
      } catch (const ConfigError& own) {  // the row's own cells, whatever the override says
        refuse(message_in_columns(own.what(), file));
      }
      skip(reason);
    };
    Scenario scenario;
    try {
      scenario = scenario_from_json(built.document, file, overrides, presets, origins);
    } catch (const ConfigError& error) {
      // A key no scenario has is the option's error, once, not every row's skip.
      for (std::size_t i = 0; i < overrides.size(); ++i) {
        const std::string key = overrides[i].substr(0, overrides[i].find('='));
        if (error_names_key(error.what(), key)) {
          throw ConfigError(fmt::format("{} {}: not a scenario key ({})", origins[i], key,
                                        message_in_columns(error.what(), file)));
        }
      }
      refuse_or_skip(message_in_columns(error.what(), file));
      continue;
    }
    fsdp::StepResult r;
    // The profile's usage counters are shared by the rows, simulated one after another.
    const hardware::CalibratedCurves* curves = scenario.hardware.cluster.gpu.calibration.get();
    const hardware::CalibrationCounts before =
        curves != nullptr ? curves->usage().counts() : hardware::CalibrationCounts{};
    try {
      r = simulate_scenario(scenario, false).result;
    } catch (const ConfigError& error) {  // rates or sizes out of range
      refuse_or_skip(message_in_columns(error.what(), file));
      continue;
    }
    const FlopDefinition def = flop_definition(c, scenario);
    // The measurements are the row's, made on its own GPU: a what-if that makes the GPU smaller
    // or slower than they show does not make them malformed (checked again without it).
    try {
      check_measurements_fit_the_gpu(c, scenario, def, file);
    } catch (const ConfigError&) {
      if (overrides.empty()) throw;
      const Scenario own = scenario_from_json(built.document, file, {}, presets, {});
      check_measurements_fit_the_gpu(c, own, flop_definition(c, own), file);
    }
    ValidationOutcome o;
    o.c = &c;
    o.size_bucket = size_bucket(static_cast<double>(models::parameter_count(scenario.model)) / 1e9);
    o.measured_tokens = c.number("measured_tokens_per_s_per_gpu");
    o.predicted_tokens = r.tokens_per_s_per_gpu;
    if (o.measured_tokens) {
      // The row's own step: where its global batch is no whole number of micro-batches on every
      // GPU, the scenario runs the last one whole (Composer's partial one, priced as full), so the
      // simulated step is scaled to the row's tokens at the simulated rate.
      const std::optional<double> global = c.number("global_batch");
      const std::optional<double> gpus = c.number("gpus");
      const double tokens = global && gpus
                                ? *global * static_cast<double>(scenario.training.seq_len) / *gpus
                                : static_cast<double>(r.tokens_per_step_per_gpu);
      o.step_time_s = Compared{tokens / *o.measured_tokens,
                               tokens == static_cast<double>(r.tokens_per_step_per_gpu)
                                   ? r.step_time.value()
                                   : tokens / r.tokens_per_s_per_gpu};
    }
    o.status = r.out_of_memory ? "oom" : "ok";
    o.alloc_retries = r.reserved.alloc_retries;
    if (curves != nullptr) {
      const hardware::CalibrationCounts after = curves->usage().counts();
      // This row's share of the profile's running counts (the maximum is not kept per row).
      o.calibration = hardware::CalibrationCounts{
          after.collectives_calibrated - before.collectives_calibrated,
          after.collectives_fallback - before.collectives_fallback,
          after.gemms_calibrated - before.gemms_calibrated,
          after.gemms_fallback - before.gemms_fallback,
          after.collectives_extrapolated - before.collectives_extrapolated,
          0.0,
          after.gemms_shapeless - before.gemms_shapeless};
    }
    o.scaling_key =
        scaling_key(c, built.document, scenario.hardware.cluster.nic_bandwidth_per_node.value());
    const double tokens = r.tokens_per_s_per_gpu;
    if (const auto m = c.number("measured_model_tflops_per_gpu")) {
      o.model_tflops = Compared{*m, model_tflops(def, tokens)};
    }
    if (const auto m = c.number("measured_hardware_tflops_per_gpu")) {
      o.hardware_tflops = Compared{*m, hardware_tflops(def, tokens)};
    }
    if (const auto m = c.number("measured_mfu")) {
      o.mfu = Compared{*m, mfu(def, tokens)};
      if (o.measured_tokens) o.mfu_definition_gap = mfu(def, *o.measured_tokens) / *m - 1.0;
    }
    if (const auto m = c.number("measured_hfu")) {
      o.hfu = Compared{*m, hfu(def, tokens)};
      if (o.measured_tokens) o.hfu_definition_gap = hfu(def, *o.measured_tokens) / *m - 1.0;
    }
    if (const auto mem = c.number("measured_peak_mem_gib")) {
      // The sources print torch.cuda.max_memory_allocated().
      o.peak_mem = std::make_pair(*mem, to_gib(r.memory.peak_allocated));
    }
    // torch.cuda.max_memory_reserved(): the caching allocator's segments, as run reports them.
    // Not for a row predicted out of memory: its reserved memory is the allocator's at the
    // failure, not what the step would reserve (allocated memory goes on counting what it needs).
    if (const auto mem = c.number("measured_peak_reserved_gib"); mem && !r.out_of_memory) {
      o.peak_reserved = std::make_pair(*mem, to_gib(r.reported_peak_reserved()));
    }
    e.outcomes.push_back(o);
  }
  return e;
}

// Golden-section search (Kiefer 1953) of the tokens/s MAPE over [lo, hi]: one global parameter
// fitted to the selected cases. 20 steps shrink the bracket by 0.618^20 ~ 7e-5.
std::pair<double, double> fit_parameter(const FitRequest& fit,
                                        const std::vector<const ValidationCase*>& cases,
                                        const std::filesystem::path& file,
                                        const std::vector<std::string>& overrides,
                                        const std::vector<std::string>& origins,
                                        const PresetLocator& presets) {
  const auto mape_at = [&](double x) {
    std::vector<std::string> with = overrides;
    with.push_back(fmt::format("{}={}", fit.key, x));
    std::vector<std::string> with_origins = origins;
    with_origins.emplace_back("--fit");
    const Evaluation e = evaluate(cases, file, with, with_origins, presets);
    const ErrorSummary s = tokens_summary(e.outcomes);
    if (s.count == 0) {
      // Every row skipped at this value: a key the scenarios do not have, a value out of its
      // range, or rows without a measured tokens/s.
      throw ConfigError(
          "--fit", "",
          fmt::format("at {}={} no kept row with a measured tokens/s could be simulated{}", fit.key,
                      x,
                      e.skipped.empty() ? std::string()
                                        : ": " + e.skipped.front()["reason"].get<std::string>()));
    }
    return s.mape;
  };
  // The request's own faults are found before the search, at the user's values, not at a value
  // the search happened to try: the key given by --set as well, no row to fit on, a key the
  // scenarios do not have or whose values are not numbers (refused at LO).
  for (const std::string& o : overrides) {
    if (o.rfind(fit.key + "=", 0) == 0) {
      throw ConfigError(
          "--fit", "",
          fmt::format("{}: --set {} gives it too; --fit chooses its value", fit.key, o));
    }
  }
  if (std::none_of(cases.begin(), cases.end(), [](const ValidationCase* c) {
        return c->number("measured_tokens_per_s_per_gpu").has_value();
      })) {
    throw ConfigError("--fit", "",
                      fmt::format("fits the tokens/s MAPE, but none of the {} kept rows has a "
                                  "measured tokens/s/GPU",
                                  cases.size()));
  }
  const double at_lo = mape_at(fit.lo);
  constexpr double kInverseGolden = 0.6180339887498949;
  constexpr int kSteps = 20;
  double a = fit.lo;
  double b = fit.hi;
  double x1 = b - kInverseGolden * (b - a);
  double x2 = a + kInverseGolden * (b - a);
  double f1 = mape_at(x1);
  double f2 = mape_at(x2);
  for (int i = 0; i < kSteps; ++i) {
    if (f1 <= f2) {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - kInverseGolden * (b - a);
      f1 = mape_at(x1);
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + kInverseGolden * (b - a);
      f2 = mape_at(x2);
    }
  }
  // A key the kept rows' scenarios never read gives bit-identical predictions at every value:
  // any "fitted" value would be meaningless.
  if (f1 == f2 && f1 == at_lo && f1 == mape_at(fit.hi)) {
    throw ConfigError("--fit", "",
                      fmt::format("{}: the tokens/s MAPE is the same ({:.6g}) everywhere in [{}, "
                                  "{}], so the kept rows do not depend on the key",
                                  fit.key, f1, fit.lo, fit.hi));
  }
  return f1 <= f2 ? std::make_pair(x1, f1) : std::make_pair(x2, f2);
}

// A preset or profile named by a relative path is read from the cases file's folder
// (PresetLocator::resolve, `from_file` the CSV): a scenario written to another folder names it
// absolutely, so that `run` reads the same file; so is one named by its name when the presets
// came from --configs (`own_configs`), which `run` would look up in its default folder.
void name_presets_absolutely(nlohmann::json& document, const std::filesystem::path& cases_file,
                             const PresetLocator& presets, bool own_configs) {
  const auto absolute = [&](nlohmann::json* value, const char* kind) {
    if (value == nullptr || !value->is_string()) return;
    const std::string reference = value->get<std::string>();
    const bool is_path = names_a_path(reference);
    if (is_path && !std::filesystem::path(reference).is_absolute())
      *value = std::filesystem::absolute(cases_file.parent_path() / reference).string();
    if (!is_path && own_configs) {
      try {
        *value =
            std::filesystem::absolute(presets.resolve(kind, reference, cases_file, "")).string();
      } catch (const ConfigError&) {
        // A name no preset has: the row was skipped for it, and its scenario says so as written.
      }
    }
  };
  const auto at = [&document](const char* section, const char* key) -> nlohmann::json* {
    const auto s = document.find(section);
    if (s == document.end() || !s->is_object()) return nullptr;
    const auto k = s->find(key);
    return k == s->end() ? nullptr : &*k;
  };
  if (const auto model = document.find("model"); model != document.end())
    absolute(&*model, "models");
  absolute(at("model", "preset"), "models");
  absolute(at("hardware", "preset"), "hardware");
  absolute(at("hardware", "calibration"), "calibration");
}

// --scenarios-out writes DIR/<case_id>.json: the id must name a file inside DIR.
void require_file_name(const ValidationCase& c, const std::filesystem::path& file) {
  constexpr std::size_t kLongestName = 200;  // + ".json" and the staging name, under NAME_MAX
  const std::string& id = c.get("case_id");
  // Control characters (a line break, a tab, an escape) make names no shell lists plainly.
  const bool control = std::any_of(id.begin(), id.end(), [](char ch) {
    const auto byte = static_cast<unsigned char>(ch);
    return byte < 0x20 || byte == 0x7F;
  });
  const bool plain = id.find_first_of(std::string("/\\\0", 3)) == std::string::npos && !control &&
                     id.front() != '.' && id.size() <= kLongestName;
  if (!plain) {
    throw ConfigError(fmt::format(
        "{}: line {}, column case_id: --scenarios-out names each file after its case_id, "
        "expected a file name (no '/', '\\' or control characters, not starting with '.', at "
        "most {} bytes), found \"{}\"",
        file.string(), c.line, kLongestName, id));
  }
}

}  // namespace

CLI::App* add_validate_command(CLI::App& app, ValidateOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "validate", "Simulate measured runs from a CSV and report the prediction error");
  cmd->add_option("cases", options.cases,
                  "CSV of measured runs (columns of configs/validation/README.md)")
      ->required()
      ->check(non_empty());
  cmd->add_option("--set", options.overrides, "Override a scenario key in every case")
      ->type_name("KEY=VALUE");
  cmd->add_option("--calibration", options.calibration,
                  "Calibration profile for every case (hardware.calibration)")
      ->type_name("PROFILE");
  cmd->add_option("--json", options.json_path, "Write the report as JSON to PATH ('-' for stdout)")
      ->type_name("PATH|-");
  cmd->add_option("--md", options.md_path, "Write the report as markdown to PATH")
      ->type_name("PATH");
  cmd->add_option("--configs", options.configs_dir, "Folder of presets")->type_name("DIR");
  cmd->add_option("--scenarios-out", options.scenarios_dir,
                  "Write each row's scenario JSON to DIR/<case_id>.json (to run or explain it)")
      ->type_name("DIR");
  cmd->add_option("--where", options.where,
                  "Keep only rows whose COLUMN equals (=) or differs from (!=) VALUE; repeatable")
      ->type_name("COLUMN=VALUE");
  cmd->add_option("--group-by", options.group_by,
                  "Also summarize the tokens/s errors per value of COLUMN (MAPE, bias, "
                  "Spearman); repeatable")
      ->type_name("COLUMN");
  cmd->add_option("--fit", options.fit,
                  "Fit one scenario key in [LO, HI] to minimise the tokens/s MAPE of the kept "
                  "rows (golden-section search), then report with the fitted value")
      ->type_name("KEY=LO:HI");
  // An empty path or name would silently do nothing.
  for (const char* name : {"--calibration", "--json", "--md", "--configs", "--scenarios-out"})
    cmd->get_option(name)->check(non_empty());
  cmd->add_option("--max-mape", options.max_mape,
                  "Exit 3 when the tokens/s mean absolute percentage error exceeds this fraction "
                  "(e.g. 0.10)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            // Above 1 is a percentage written as one (10 for 10 %): a gate that never fires.
            const std::string expected =
                "expected a positive fraction of at most 1 (0.10 = 10%), found " + text;
            double v = 0.0;
            try {
              v = std::stod(text);
            } catch (const std::exception&) {
              return expected;
            }
            return v > 0.0 && v <= 1.0 ? std::string() : expected;
          },
          "FRACTION", "positive fraction"));
  cmd->footer(
      "\nExit codes: 0 ok (skipped rows are listed, not errors), 1 internal error, 2 bad input\n"
      "(a malformed row names its line and column), 3 the tokens/s MAPE exceeds --max-mape.");
  return cmd;
}

int validate_command(const ValidateOptions& options) {
  // Every file a row names (the cases, presets, a calibration profile) is an input an output
  // must not overwrite.
  std::set<std::filesystem::path> inputs{options.cases};
  PresetLocator presets{default_configs_dir(options.configs_dir)};
  presets.files_resolved = &inputs;
  if (std::error_code ec; !std::filesystem::is_directory(presets.configs_dir, ec)) {
    throw ConfigError("--configs", "",
                      fmt::format("expected a folder of presets, found \"{}\" (not a folder)",
                                  presets.configs_dir.string()));
  }
  const std::filesystem::path file(options.cases);
  const std::vector<ValidationCase> cases = read_validation_cases(file);
  check_outputs({options.json_path, options.md_path}, {file});
  // The scenarios' folder is made before the files are written: a file output of the same path
  // would then find a folder there.
  if (!options.scenarios_dir.empty()) {
    for (const auto& [option, path] :
         {std::pair{"--json", options.json_path}, std::pair{"--md", options.md_path}}) {
      if (!path.empty() && !writes_stdout(path) &&
          output_place(path) == output_place(options.scenarios_dir)) {
        throw ConfigError(path, "",
                          fmt::format("is given for {} and --scenarios-out; each needs a place "
                                      "of its own",
                                      option));
      }
    }
  }
  std::vector<std::string> overrides;
  // `--set hardware.calibration=P` is taken as `--calibration P`: one profile for every row,
  // resolved from the working directory and checked once. The last --set of it holds, as for
  // any key; --calibration and --set both naming one is refused.
  std::string calibration = options.calibration;
  std::string calibration_option = "--calibration";  // as the user named it, for messages
  bool calibration_complete = true;
  for (const std::string& o : options.overrides) {
    if (o.rfind("hardware.calibration=", 0) != 0) {
      overrides.push_back(o);
      continue;
    }
    if (!options.calibration.empty()) {
      throw ConfigError(fmt::format(
          "--set {}: --calibration {} names the profile already; every row is priced with one", o,
          options.calibration));
    }
    const nlohmann::json value = parse_inline_value(o.substr(o.find('=') + 1), "--set " + o);
    if (!value.is_string() || value.get<std::string>().empty()) {
      throw ConfigError(
          fmt::format("--set {}: expected a profile name or path, found {}", o, value.dump()));
    }
    calibration = value.get<std::string>();
    calibration_option = "--set hardware.calibration";
  }
  std::vector<std::string> origins(overrides.size(), "--set");  // of each override, for messages
  {
    // Checked once here rather than reported as the skip reason of every row.
    nlohmann::json probe = nlohmann::json::object();
    for (const std::string& o : overrides) apply_override(probe, o);
  }
  if (!calibration.empty()) {
    // Resolved and read once here, so a wrong name or a malformed profile is one error rather
    // than every row skipped, and a relative path is the command line's (the working
    // directory's), not the CSV's folder's.
    const std::filesystem::path profile = std::filesystem::absolute(
        presets.resolve("calibration", calibration, calibration_option, ""));
    calibration_complete =
        load_calibration(profile.string(), calibration_option, "", presets)->complete();
    overrides.push_back("hardware.calibration=" + profile.string());
    origins.emplace_back(calibration_option);
  }

  std::vector<RowFilter> filters;
  for (const std::string& w : options.where) filters.push_back(parse_filter(w, cases));
  for (const std::string& column : options.group_by) require_column("--group-by", column, cases);
  // Every row is checked, also those --where leaves out and those skipped: a malformed file is
  // an error whichever rows a command looks at. The rows evaluated are checked as they run.
  std::vector<const ValidationCase*> chosen;
  for (const ValidationCase& c : cases) {
    const CaseScenario built = scenario_for_case(c, file);
    if (selected(c, filters) && !built.document.is_null()) {
      chosen.push_back(&c);
    } else {
      check_row_alone(c, built, file, presets);
      if (selected(c, filters)) chosen.push_back(&c);
    }
  }
  if (!options.scenarios_dir.empty()) {
    for (const ValidationCase* c : chosen) require_file_name(*c, file);
  }
  std::optional<std::pair<double, double>> fitted;
  std::string fit_key;
  if (!options.fit.empty()) {
    const FitRequest fit = parse_fit(options.fit);
    fitted = fit_parameter(fit, chosen, file, overrides, origins, presets);
    fit_key = fit.key;
    overrides.push_back(fmt::format("{}={}", fit.key, fitted->first));
    origins.emplace_back("--fit");
  }
  Evaluation evaluation = evaluate(chosen, file, overrides, origins, presets);
  // Every output of the run, written together at the end (all or none).
  std::vector<OutputFile> outputs;
  bool created_scenarios_dir = false;  // removed again, empty, if the outputs fail
  if (!options.scenarios_dir.empty()) {
    if (options.scenarios_dir == "-") {
      throw ConfigError("--scenarios-out", "",
                        "expected a folder, found '-' (stdout, as for --json), which cannot hold "
                        "one file per row; write ./- for a folder named '-'");
    }
    std::error_code ec;
    created_scenarios_dir = !std::filesystem::exists(options.scenarios_dir, ec);
    std::filesystem::create_directories(options.scenarios_dir, ec);
    if (ec || !std::filesystem::is_directory(options.scenarios_dir, ec)) {
      throw ConfigError("--scenarios-out", "",
                        fmt::format("expected a folder to write the scenarios to, cannot create "
                                    "\"{}\"",
                                    options.scenarios_dir));
    }
    for (const ValidationCase* c : chosen) {
      CaseScenario built = scenario_for_case(*c, file);
      if (built.document.is_null()) continue;
      // The scenario the row was simulated as: with --set, --calibration and --fit's value.
      for (const std::string& o : overrides) apply_override(built.document, o);
      name_presets_absolutely(built.document, file, presets, !options.configs_dir.empty());
      outputs.push_back(
          {(std::filesystem::path(options.scenarios_dir) / (c->get("case_id") + ".json")).string(),
           built.document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"});
    }
  }
  const std::vector<ValidationOutcome>& outcomes = evaluation.outcomes;
  const nlohmann::json& skipped = evaluation.skipped;
  // Why rows were skipped, on the terminal too (the JSON and markdown list them all), after the
  // summary line.
  const auto print_skipped = [&skipped] {
    constexpr std::size_t kReasonsShown = 5;
    for (std::size_t i = 0; i < skipped.size() && i < kReasonsShown; ++i) {
      // A quoted case_id may hold a line break or an escape: shown on its line, never run by the
      // terminal.
      const std::string id =
          escape_control_characters(skipped[i]["case_id"].get<std::string>(), "");
      std::cerr << fmt::format("skipped {} (line {}): {}\n", id,
                               skipped[i]["line"].get<std::int64_t>(),
                               escape_control_characters(skipped[i]["reason"].get<std::string>()));
    }
    if (skipped.size() > kReasonsShown)
      std::cerr << fmt::format("({} more skipped rows in --json / --md)\n",
                               skipped.size() - kReasonsShown);
  };
  if (outcomes.empty()) {
    print_skipped();
    throw ConfigError(
        file.string(), "",
        chosen.empty()
            ? (options.where.empty() ? std::string("expected at least one row, found none")
                                     : "no row is left after --where" + where_miss(cases, filters))
            : fmt::format("expected at least one row fsdpsim can "
                          "simulate, found none of {} ({} skipped)",
                          chosen.size(), skipped.size()));
  }
  ValidationContext context;
  context.cases_file = file.filename().string();
  context.where = options.where;
  context.calibration = calibration;
  context.calibration_complete = calibration_complete;
  for (const std::string& column : options.group_by) {
    if (std::find(context.group_by.begin(), context.group_by.end(), column) ==
        context.group_by.end())
      context.group_by.push_back(column);
  }
  if (fitted) context.fit = ValidationFit{fit_key, fitted->first, fitted->second};
  const ValidationReport report(outcomes, skipped, std::move(context));
  const ErrorSummary token_summary = report.tokens();
  if (options.max_mape > 0.0 && token_summary.count == 0) {
    // A gate on no case would pass whatever the predictions.
    throw ConfigError("--max-mape", "",
                      fmt::format("gates the tokens/s MAPE, but none of the {} simulated rows has "
                                  "a measured tokens/s/GPU",
                                  outcomes.size()));
  }
  if (!options.json_path.empty()) {
    outputs.push_back(
        {options.json_path,
         report.json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"});
  }
  if (!options.md_path.empty()) outputs.push_back({options.md_path, report.markdown()});
  try {
    write_outputs(outputs, {inputs.begin(), inputs.end()});
  } catch (const ConfigError&) {
    std::error_code ignored;
    if (created_scenarios_dir) std::filesystem::remove(options.scenarios_dir, ignored);
    throw;
  }
  // The summary goes to stderr when stdout carries an output; `--json -` is read by a program.
  std::ostream& summary = writes_stdout(options.md_path) ? std::cerr : std::cout;
  if (!writes_stdout(options.json_path)) {
    if (fitted) {
      summary << fmt::format("fitted {} = {:.4f} (tokens/s MAPE {} on {} cases)\n", fit_key,
                             fitted->first, percent(fitted->second), token_summary.count);
    }
    const std::string validated = fmt::format("validated {} case{} ({} skipped)", outcomes.size(),
                                              outcomes.size() == 1 ? "" : "s", skipped.size());
    if (token_summary.count > 0) {
      summary << fmt::format("{}: tokens/s/GPU MAPE {}, median {}, max {}\n", validated,
                             percent(token_summary.mape), percent(token_summary.median_ape),
                             percent(token_summary.max_ape));
    } else {
      const ErrorSummary tflops = report.tflops();
      summary << fmt::format(
          "{}: none has a measured tokens/s/GPU; TFLOPS/GPU MAPE {}, median {}, max {} ({} "
          "cases)\n",
          validated, percent(tflops.mape), percent(tflops.median_ape), percent(tflops.max_ape),
          tflops.count);
    }
    // A setting under a name validate has no column for changes nothing: say so, rather than
    // simulate the rows without it in silence.
    if (const std::vector<std::string> own = columns_of_your_own(cases); !own.empty()) {
      summary << fmt::format(
          "note: column{} of your own, not read into the scenarios (kept for --where and "
          "--group-by): {}\n",
          own.size() == 1 ? "" : "s", fmt::join(own, ", "));
    }
    if (!calibration_complete) {
      summary << "note: the calibration profile is incomplete (\"complete\": false): the harness "
                 "run that wrote it stopped early, so some shapes may be missing from it\n";
    }
    // A row predicted out of memory ran in fact: its error is of a step that would fail.
    const auto oom = std::count_if(outcomes.begin(), outcomes.end(),
                                   [](const ValidationOutcome& o) { return o.status == "oom"; });
    if (oom > 0) {
      summary << fmt::format(
          "{} of them predicted out of memory (their errors compare a step fsdpsim finds does not "
          "fit; the markdown marks them)\n",
          oom);
    }
  }
  print_skipped();
  if (options.max_mape > 0.0 && token_summary.mape > options.max_mape) {
    // The limit as given: a limit under 0.05% would print as 0.0%.
    std::cerr << fmt::format("validation failed: tokens/s MAPE {} exceeds --max-mape {:g}\n",
                             percent(token_summary.mape), options.max_mape);
    return kExitCheckFailed;
  }
  return 0;
}

}  // namespace fsdpsim::app
