#include "sim/app/validate_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "models/workload.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/validation_cases.hpp"
#include "sim/app/validation_flops.hpp"
#include "sim/app/validation_stats.hpp"

namespace fsdpsim::app {
namespace {

constexpr int kExitCheckFailed = 3;
// Issue #7's bound on any one case: the markdown lists the cases beyond it first.
constexpr double kLargeError = 0.25;

// (measured, predicted) of one quantity.
using Compared = std::pair<double, double>;

struct Outcome {
  const ValidationCase* c = nullptr;
  std::string size_bucket;
  std::optional<double> measured_tokens;  // absent when the source prints only TFLOPS
  double predicted_tokens = 0.0;
  // Under the row's own FLOP definition (validation_flops.hpp), each where the row prints it.
  std::optional<Compared> model_tflops;
  std::optional<Compared> hardware_tflops;
  std::optional<Compared> mfu;
  std::optional<Compared> hfu;
  // The definition check: the utilization the row's own tokens/s gives under the definition
  // fsdpsim implements, over the utilization the row prints, minus 1.
  std::optional<double> mfu_definition_gap;
  std::optional<double> hfu_definition_gap;
  std::optional<Compared> peak_mem;
  std::string status;  // "ok" or "oom"
};

// The TFLOPS a TFLOPS-only row is judged by: the model count where it prints one.
const std::optional<Compared>& row_tflops(const Outcome& o) {
  return o.model_tflops ? o.model_tflops : o.hardware_tflops;
}

std::string size_bucket(double params_b) {
  if (params_b < 1.0) return "< 1B";
  if (params_b < 10.0) return "1-10B";
  if (params_b < 100.0) return "10-100B";
  return ">= 100B";
}

nlohmann::json summary_json(const ErrorSummary& s) {
  return {{"count", s.count},
          {"mape", s.mape},
          {"median_ape", s.median_ape},
          {"max_ape", s.max_ape},
          {"mean_error", s.mean_error}};
}

struct Group {
  std::vector<double> measured;
  std::vector<double> predicted;
};

double max_abs(const std::vector<double>& xs) {
  double m = 0.0;
  for (const double x : xs) m = std::max(m, std::abs(x));
  return m;
}

nlohmann::json definition_check_json(const std::vector<double>& gaps) {
  return {{"count", gaps.size()}, {"max_gap", max_abs(gaps)}};
}

std::string pct(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

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

// The values of a --group-by column in table order: numerically when every value is a number
// (gpus, seq_len), else as text.
std::vector<std::string> ordered_values(const std::map<std::string, Group>& groups) {
  std::vector<std::string> values;
  for (const auto& [value, group] : groups) values.push_back(value);
  const auto number = [](const std::string& v) -> std::optional<double> {
    try {
      std::size_t used = 0;
      const double x = std::stod(v, &used);
      return used == v.size() ? std::optional<double>(x) : std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  if (std::all_of(values.begin(), values.end(), [&](const std::string& v) { return number(v); })) {
    std::sort(values.begin(), values.end(),
              [&](const std::string& a, const std::string& b) { return *number(a) < *number(b); });
  }
  return values;
}

RowFilter parse_filter(const std::string& text, const std::vector<ValidationCase>& cases) {
  RowFilter f;
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
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

// --fit KEY=LO:HI
struct FitRequest {
  std::string key;
  double lo = 0.0;
  double hi = 0.0;
};

FitRequest parse_fit(const std::string& text) {
  const std::size_t eq = text.find('=');
  const std::size_t colon = text.find(':', eq == std::string::npos ? 0 : eq);
  FitRequest r;
  try {
    if (eq == std::string::npos || eq == 0 || colon == std::string::npos) throw std::exception();
    r.key = text.substr(0, eq);
    r.lo = std::stod(text.substr(eq + 1, colon - eq - 1));
    r.hi = std::stod(text.substr(colon + 1));
  } catch (const std::exception&) {
    throw ConfigError("--fit", "", fmt::format("expected KEY=LO:HI, found \"{}\"", text));
  }
  if (!(r.lo < r.hi)) {
    throw ConfigError("--fit", "", fmt::format("expected LO < HI, found {} and {}", r.lo, r.hi));
  }
  return r;
}

struct Evaluation {
  std::vector<Outcome> outcomes;
  nlohmann::json skipped = nlohmann::json::array();
};

Evaluation evaluate(const std::vector<const ValidationCase*>& cases,
                    const std::filesystem::path& file, const std::vector<std::string>& overrides,
                    const PresetLocator& presets) {
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
    Scenario scenario;
    try {
      scenario = scenario_from_json(built.document, file, overrides, presets);
    } catch (const ConfigError& error) {
      skip(fmt::format("line {}: {}", c.line, error.what()));
      continue;
    }
    const fsdp::StepResult r = simulate_scenario(scenario, false).result;
    const FlopDefinition def = flop_definition(c, scenario);
    Outcome o;
    o.c = &c;
    o.size_bucket = size_bucket(static_cast<double>(models::parameter_count(scenario.model)) / 1e9);
    o.measured_tokens = c.number("measured_tokens_per_s_per_gpu");
    o.predicted_tokens = r.tokens_per_s_per_gpu;
    o.status = r.out_of_memory ? "oom" : "ok";
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
    e.outcomes.push_back(o);
  }
  return e;
}

double tokens_mape(const Evaluation& e) {
  Group g;
  for (const Outcome& o : e.outcomes) {
    if (!o.measured_tokens) continue;
    g.measured.push_back(*o.measured_tokens);
    g.predicted.push_back(o.predicted_tokens);
  }
  return summarize_errors(g.measured, g.predicted).mape;
}

// Golden-section search (Kiefer 1953) of the tokens/s MAPE over [lo, hi]: one global parameter
// fitted to the selected cases. 20 steps shrink the bracket by 0.618^20 ~ 7e-5.
std::pair<double, double> fit_parameter(const FitRequest& fit,
                                        const std::vector<const ValidationCase*>& cases,
                                        const std::filesystem::path& file,
                                        const std::vector<std::string>& overrides,
                                        const PresetLocator& presets) {
  const auto mape_at = [&](double x) {
    std::vector<std::string> with = overrides;
    with.push_back(fmt::format("{}={}", fit.key, x));
    return tokens_mape(evaluate(cases, file, with, presets));
  };
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
  return f1 <= f2 ? std::make_pair(x1, f1) : std::make_pair(x2, f2);
}

}  // namespace

CLI::App* add_validate_command(CLI::App& app, ValidateOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "validate", "Simulate measured runs from a CSV and report the prediction error");
  cmd->add_option("cases", options.cases,
                  "CSV of measured runs (columns of configs/validation/README.md)")
      ->required();
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
  cmd->add_option(
      "--max-mape", options.max_mape,
      "Exit 3 when the tokens/s mean absolute percentage error exceeds this fraction (e.g. 0.10)");
  return cmd;
}

int validate_command(const ValidateOptions& options) {
  const PresetLocator presets{default_configs_dir(options.configs_dir)};
  const std::filesystem::path file(options.cases);
  const std::vector<ValidationCase> cases = read_validation_cases(file);
  std::vector<std::string> overrides = options.overrides;
  if (!options.calibration.empty())
    overrides.push_back("hardware.calibration=" + options.calibration);

  std::vector<RowFilter> filters;
  for (const std::string& w : options.where) filters.push_back(parse_filter(w, cases));
  for (const std::string& column : options.group_by) require_column("--group-by", column, cases);
  std::vector<const ValidationCase*> chosen;
  for (const ValidationCase& c : cases) {
    if (selected(c, filters)) chosen.push_back(&c);
  }
  std::optional<std::pair<double, double>> fitted;
  std::string fit_key;
  if (!options.fit.empty()) {
    const FitRequest fit = parse_fit(options.fit);
    fitted = fit_parameter(fit, chosen, file, overrides, presets);
    fit_key = fit.key;
    overrides.push_back(fmt::format("{}={}", fit.key, fitted->first));
  }
  Evaluation evaluation = evaluate(chosen, file, overrides, presets);
  if (!options.scenarios_dir.empty()) {
    std::filesystem::create_directories(options.scenarios_dir);
    for (const ValidationCase* c : chosen) {
      const CaseScenario built = scenario_for_case(*c, file);
      if (built.document.is_null()) continue;
      write_output(
          (std::filesystem::path(options.scenarios_dir) / (c->get("case_id") + ".json")).string(),
          built.document.dump(2) + "\n");
    }
  }
  const std::vector<Outcome>& outcomes = evaluation.outcomes;
  const nlohmann::json& skipped = evaluation.skipped;

  // Summaries.
  Group tokens;
  Group tflops;  // model and hardware TFLOPS alike, each under its row's definition
  Group mfu_group;
  Group hfu_group;
  Group memory;
  std::vector<double> mfu_gaps;
  std::vector<double> hfu_gaps;
  std::map<std::string, Group> by_source;
  std::map<std::string, Group> by_gpu;
  std::map<std::string, Group> by_size;
  std::map<std::string, std::map<std::string, Group>> by_column;  // --group-by
  for (const Outcome& o : outcomes) {
    // Rows that print only TFLOPS join no tokens/s group (nor an empty one of their own).
    std::vector<Group*> token_groups;
    if (o.measured_tokens) {
      token_groups = {&tokens, &by_source[o.c->get("source")], &by_gpu[o.c->get("gpu")],
                      &by_size[o.size_bucket]};
      for (const std::string& column : options.group_by)
        token_groups.push_back(&by_column[column][o.c->get(column)]);
    }
    for (Group* g : token_groups) {
      g->measured.push_back(*o.measured_tokens);
      g->predicted.push_back(o.predicted_tokens);
    }
    for (const auto& [pair, group] :
         {std::pair{&o.model_tflops, &tflops}, std::pair{&o.hardware_tflops, &tflops},
          std::pair{&o.mfu, &mfu_group}, std::pair{&o.hfu, &hfu_group},
          std::pair{&o.peak_mem, &memory}}) {
      if (!*pair) continue;
      group->measured.push_back((*pair)->first);
      group->predicted.push_back((*pair)->second);
    }
    if (o.mfu_definition_gap) mfu_gaps.push_back(*o.mfu_definition_gap);
    if (o.hfu_definition_gap) hfu_gaps.push_back(*o.hfu_definition_gap);
  }
  const ErrorSummary token_summary = summarize_errors(tokens.measured, tokens.predicted);
  nlohmann::json report;
  report["schema"] = "fsdpsim.validation/1";
  report["cases_file"] = file.filename().string();
  report["where"] = options.where;
  if (fitted) {
    report["fit"] = {{"key", fit_key}, {"value", fitted->first}, {"mape", fitted->second}};
  }
  report["evaluated"] = outcomes.size();
  report["skipped"] = skipped.size();
  report["tokens_per_s"] = summary_json(token_summary);
  report["tflops"] = summary_json(summarize_errors(tflops.measured, tflops.predicted));
  report["mfu"] = summary_json(summarize_errors(mfu_group.measured, mfu_group.predicted));
  report["hfu"] = summary_json(summarize_errors(hfu_group.measured, hfu_group.predicted));
  report["peak_mem"] = summary_json(summarize_errors(memory.measured, memory.predicted));
  report["definition_check"] = {{"mfu", definition_check_json(mfu_gaps)},
                                {"hfu", definition_check_json(hfu_gaps)}};
  nlohmann::json rho = nlohmann::json::object();
  for (const auto& [name, g] : by_source) rho[name] = spearman(g.measured, g.predicted);
  report["spearman"] = rho;
  for (const auto& [key, groups] :
       {std::pair<const char*, const std::map<std::string, Group>*>{"by_source", &by_source},
        {"by_gpu", &by_gpu},
        {"by_model_size", &by_size}}) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, g] : *groups)
      j[name] = summary_json(summarize_errors(g.measured, g.predicted));
    report[key] = j;
  }
  if (!options.group_by.empty()) {
    nlohmann::json columns = nlohmann::json::object();
    for (const auto& [column, groups] : by_column) {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& [value, g] : groups) {
        j[value] = summary_json(summarize_errors(g.measured, g.predicted));
        j[value]["spearman"] = spearman(g.measured, g.predicted);
      }
      columns[column] = j;
    }
    report["by_column"] = columns;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const Outcome& o : outcomes) {
    nlohmann::json row = {{"case_id", o.c->get("case_id")},
                          {"source", o.c->get("source")},
                          {"status", o.status},
                          {"predicted_tokens_per_s_per_gpu", o.predicted_tokens}};
    if (o.measured_tokens) {
      row["measured_tokens_per_s_per_gpu"] = *o.measured_tokens;
      row["error"] = o.predicted_tokens / *o.measured_tokens - 1.0;
    }
    for (const auto& [key, pair] :
         {std::pair{"model_tflops", &o.model_tflops},
          std::pair{"hardware_tflops", &o.hardware_tflops}, std::pair{"mfu", &o.mfu},
          std::pair{"hfu", &o.hfu}, std::pair{"peak_mem_gib", &o.peak_mem}}) {
      if (*pair) row[key] = {{"measured", (*pair)->first}, {"predicted", (*pair)->second}};
    }
    rows.push_back(row);
  }
  report["cases"] = rows;
  report["skipped_cases"] = skipped;

  if (!options.json_path.empty()) write_output(options.json_path, report.dump(2) + "\n");
  if (!options.md_path.empty()) {
    std::string md = fmt::format("# fsdpsim validate: {}\n\n", file.filename().string());
    const auto out_of_memory = std::count_if(outcomes.begin(), outcomes.end(),
                                             [](const Outcome& o) { return o.status == "oom"; });
    md += fmt::format(
        "{} cases evaluated, {} skipped. Errors are |predicted - measured| / measured.{}\n\n",
        outcomes.size(), skipped.size(),
        out_of_memory == 0
            ? std::string()
            : fmt::format(" {} of the evaluated runs are predicted out of memory (marked in the "
                          "case table): their error is that of the over-memory step's time.",
                          out_of_memory));
    if (!options.where.empty()) {
      md += fmt::format("Rows where {}.\n\n", fmt::join(options.where, " and "));
    }
    if (fitted) {
      md += fmt::format("Fitted on these rows: {} = {:.4f} (tokens/s MAPE {}).\n\n", fit_key,
                        fitted->first, pct(fitted->second));
    }
    md += "| quantity | cases | MAPE | median | max |\n|---|---|---|---|---|\n";
    for (const auto& [name, g] : {std::pair<const char*, const Group*>{"tokens/s/GPU", &tokens},
                                  {"TFLOPS/GPU (row's definition)", &tflops},
                                  {"MFU (row's definition)", &mfu_group},
                                  {"HFU (row's definition)", &hfu_group},
                                  {"peak memory", &memory}}) {
      const ErrorSummary e = summarize_errors(g->measured, g->predicted);
      md += fmt::format("| {} | {} | {} | {} | {} |\n", name, e.count, pct(e.mape),
                        pct(e.median_ape), pct(e.max_ape));
    }
    if (!mfu_gaps.empty() || !hfu_gaps.empty()) {
      md += fmt::format(
          "\nDefinition check: each row's own tokens/s under the FLOP count fsdpsim implements "
          "for its source gives the MFU it prints within {} ({} rows) and the HFU within {} ({} "
          "rows), so MFU and HFU errors are the tokens/s errors seen through that count.\n",
          pct(max_abs(mfu_gaps)), mfu_gaps.size(), pct(max_abs(hfu_gaps)), hfu_gaps.size());
    }
    // Per group: the absolute errors, their signed mean (bias: > 0 predicts too fast) and the
    // rank correlation of predicted and measured within the group.
    const auto group_table = [&md](const std::string& title,
                                   const std::map<std::string, Group>& groups,
                                   const std::vector<std::string>& order) {
      md += fmt::format(
          "\n## tokens/s/GPU by {}\n\n| {} | cases | MAPE | median | max | bias | Spearman "
          "|\n|---|---|---|---|---|---|---|\n",
          title, title);
      for (const std::string& name : order) {
        const Group& g = groups.at(name);
        const ErrorSummary e = summarize_errors(g.measured, g.predicted);
        const std::string rank_correlation =
            e.count < 2 ? "–" : fmt::format("{:.2f}", spearman(g.measured, g.predicted));
        md +=
            fmt::format("| {} | {} | {} | {} | {} | {:+.1f}% | {} |\n", name, e.count, pct(e.mape),
                        pct(e.median_ape), pct(e.max_ape), 100.0 * e.mean_error, rank_correlation);
      }
    };
    for (const auto& [title, groups] :
         {std::pair<const char*, const std::map<std::string, Group>*>{"source", &by_source},
          {"GPU", &by_gpu},
          {"model size", &by_size}}) {
      std::vector<std::string> order;
      for (const auto& [name, g] : *groups) order.push_back(name);
      group_table(title, *groups, order);
    }
    for (const std::string& column : options.group_by) {
      group_table(column, by_column[column], ordered_values(by_column[column]));
    }
    // Measured and predicted: tokens/s/GPU where the source prints it, else its TFLOPS/GPU.
    const auto compared = [](const Outcome& o) {
      return o.measured_tokens ? std::pair{*o.measured_tokens, o.predicted_tokens} : *row_tflops(o);
    };
    const auto signed_error = [&](const Outcome& o) {
      const auto [measured, predicted] = compared(o);
      return predicted / measured - 1.0;
    };
    const auto case_row = [&](const Outcome& o) {
      const auto [measured, predicted] = compared(o);
      return fmt::format("| {} | {:.1f}{} | {:.1f}{} | {:+.1f}% |\n", o.c->get("case_id"), measured,
                         o.measured_tokens ? "" : " TFLOPS", predicted,
                         o.status == "oom" ? " (out of memory)" : "", 100.0 * signed_error(o));
    };
    // The worst rows first: those off by more than kLargeError, largest error first.
    std::vector<const Outcome*> large;
    for (const Outcome& o : outcomes) {
      if (std::abs(signed_error(o)) > kLargeError) large.push_back(&o);
    }
    std::sort(large.begin(), large.end(), [&](const Outcome* a, const Outcome* b) {
      return std::abs(signed_error(*a)) > std::abs(signed_error(*b));
    });
    md += fmt::format(
        "\n## Cases off by more than {:.0f}%\n\n{} of {}.\n\n| case | measured | predicted | "
        "error |\n|---|---|---|---|\n",
        100.0 * kLargeError, large.size(), outcomes.size());
    for (const Outcome* o : large) md += case_row(*o);
    md += "\n## Cases\n\n| case | measured | predicted | error |\n|---|---|---|---|\n";
    for (const Outcome& o : outcomes) md += case_row(o);
    md += "\n## Skipped\n\n| case | line | reason |\n|---|---|---|\n";
    for (const auto& s : skipped) {
      md += fmt::format("| {} | {} | {} |\n", s["case_id"].get<std::string>(),
                        s["line"].get<std::int64_t>(), s["reason"].get<std::string>());
    }
    write_output(options.md_path, md);
  }
  if (options.json_path != "-") {
    if (fitted) {
      std::cout << fmt::format("fitted {} = {:.4f} (tokens/s MAPE {} on {} cases)\n", fit_key,
                               fitted->first, pct(fitted->second), outcomes.size());
    }
    std::cout << fmt::format(
        "validated {} cases ({} skipped): tokens/s/GPU MAPE {}, median {}, max {}\n",
        outcomes.size(), skipped.size(), pct(token_summary.mape), pct(token_summary.median_ape),
        pct(token_summary.max_ape));
  }
  if (options.max_mape > 0.0 && token_summary.mape > options.max_mape) {
    std::cerr << fmt::format("validation failed: tokens/s MAPE {} exceeds {}\n",
                             pct(token_summary.mape), pct(options.max_mape));
    return kExitCheckFailed;
  }
  return 0;
}

}  // namespace fsdpsim::app
