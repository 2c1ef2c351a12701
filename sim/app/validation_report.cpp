#include "sim/app/validation_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "sim/app/finite_number.hpp"
#include "sim/app/markdown_cell.hpp"
#include "sim/app/retries_text.hpp"
#include "sim/app/validation_scaling.hpp"

namespace fsdpsim::app {

struct ValidationGroup {
  std::vector<double> measured;
  std::vector<double> predicted;

  void add(const Compared& pair) {
    measured.push_back(pair.first);
    predicted.push_back(pair.second);
  }
  [[nodiscard]] ErrorSummary summary() const { return summarize_errors(measured, predicted); }
  [[nodiscard]] std::optional<double> rank_correlation() const {
    return spearman(measured, predicted);
  }
};

using ValidationGroups = std::map<std::string, ValidationGroup>;

struct ValidationSummaries {
  ValidationGroup tokens;
  ValidationGroup tflops;  // model and hardware TFLOPS alike, each under its row's definition
  ValidationGroup mfu;
  ValidationGroup hfu;
  ValidationGroup memory;
  ValidationGroup reserved;
  std::vector<double> mfu_gaps;
  std::vector<double> hfu_gaps;
  // Rows whose printed MFU or HFU is further than kDefinitionGapTolerance from fsdpsim's count:
  // "case_id (MFU +11.8%, HFU +9.0%)".
  std::vector<std::string> wide_gaps;
  ValidationGroups by_source;
  ValidationGroups by_gpu;
  ValidationGroups by_size;
  ValidationGroups by_allocator;                      // allocator_state()
  ValidationGroups by_network;                        // network_state()
  std::map<std::string, ValidationGroups> by_column;  // --group-by
  std::vector<ScalingPair> scaling;
};

namespace {

// The TFLOPS a row is judged by (a TFLOPS-only row's headline): the model count where it prints
// one.
const std::optional<Compared>& row_tflops(const ValidationOutcome& o) {
  return o.model_tflops ? o.model_tflops : o.hardware_tflops;
}

// Issue #7's bound on any one case: the markdown lists the cases beyond it first.
constexpr double kLargeError = 0.25;

// The predicted step's allocator state, a group of its own: a step that retries cudaMalloc
// stalls on device-wide synchronizations whose cost rests on the preset's cudaMalloc/cudaFree
// prices (configs/hardware/*.json "cuda_malloc_us") unless a calibration profile timed them.
constexpr const char* kNoRetry = "no retry";
// The definition check's tolerance: printed MFUs are rounded, and fsdpsim's counts follow each
// source's formula (0.14% at most on the published rows, reports/validation.md).
constexpr double kDefinitionGapTolerance = 0.01;

constexpr const char* kRetries = "cudaMalloc retries";
constexpr const char* kOutOfMemory = "out of memory";

const char* allocator_state(const ValidationOutcome& o) {
  if (o.status == "oom") return kOutOfMemory;
  return o.alloc_retries > 0 ? kRetries : kNoRetry;
}

// Where a row's collectives ran: inside one node, or across nodes at the bandwidth its source
// states, or at one assumed (the inter_node_assumed column, configs/validation/README.md): there
// the error is the model's and the assumption's together.
constexpr const char* kOneNode = "one node";
constexpr const char* kStatedNetwork = "several nodes, bandwidth stated";
constexpr const char* kAssumedNetwork = "several nodes, bandwidth assumed";

const char* network_state(const ValidationOutcome& o) {
  const std::optional<double> gpus = o.c->number("gpus");
  const std::optional<double> per_node = o.c->number("gpus_per_node");
  if (!gpus || !per_node || *gpus <= *per_node) return kOneNode;
  // An empty inter_node_gbps_per_node ran at the GPU preset's: assumed too.
  return o.c->yes("inter_node_assumed") || o.c->get("inter_node_gbps_per_node").empty()
             ? kAssumedNetwork
             : kStatedNetwork;
}

ValidationSummaries summarize(const std::vector<ValidationOutcome>& outcomes,
                              const std::vector<std::string>& group_by) {
  ValidationSummaries s;
  for (const ValidationOutcome& o : outcomes) {
    // Rows that print only TFLOPS join no tokens/s group (nor an empty one of their own).
    if (o.measured_tokens) {
      const Compared tokens{*o.measured_tokens, o.predicted_tokens};
      for (ValidationGroup* g :
           {&s.tokens, &s.by_source[o.c->get("source")], &s.by_gpu[o.c->get("gpu")],
            &s.by_size[o.size_bucket], &s.by_allocator[allocator_state(o)],
            &s.by_network[network_state(o)]}) {
        g->add(tokens);
      }
      for (const std::string& column : group_by) s.by_column[column][o.c->get(column)].add(tokens);
    }
    // A row's TFLOPS once: the model count where it prints both (row_tflops).
    for (const auto& [pair, group] :
         {std::pair{&row_tflops(o), &s.tflops}, std::pair{&o.mfu, &s.mfu},
          std::pair{&o.hfu, &s.hfu}, std::pair{&o.peak_mem, &s.memory},
          std::pair{&o.peak_reserved, &s.reserved}}) {
      if (*pair) group->add(**pair);
    }
    std::vector<std::string> wide;  // "MFU +11.8%"
    for (const auto& [gap, gaps, name] : {std::tuple{&o.mfu_definition_gap, &s.mfu_gaps, "MFU"},
                                          std::tuple{&o.hfu_definition_gap, &s.hfu_gaps, "HFU"}}) {
      if (!*gap) continue;
      gaps->push_back(**gap);
      if (std::abs(**gap) > kDefinitionGapTolerance)
        wide.push_back(fmt::format("{} {:+.1f}%", name, 100.0 * **gap));
    }
    if (!wide.empty())
      s.wide_gaps.push_back(fmt::format("{} ({})", o.c->get("case_id"), fmt::join(wide, ", ")));
  }
  s.scaling = scaling_pairs(outcomes);
  return s;
}

// An error statistic of no case is undefined: null, never a 0.0 that reads as a perfect fit.
nlohmann::json summary_json(const ErrorSummary& s) {
  const auto defined = [&s](double x) {
    return s.count > 0 ? nlohmann::json(x) : nlohmann::json();
  };
  return {{"count", s.count},
          {"mape", defined(s.mape)},
          {"median_ape", defined(s.median_ape)},
          {"max_ape", defined(s.max_ape)},
          {"mean_error", defined(s.mean_error)}};
}

// A rank correlation needs two cases with different values on each side: null otherwise.
nlohmann::json rank_correlation_json(const ValidationGroup& g) {
  const std::optional<double> rho = g.rank_correlation();
  return rho ? nlohmann::json(*rho) : nlohmann::json();
}

double max_abs(const std::vector<double>& xs) {
  double m = 0.0;
  for (const double x : xs) m = std::max(m, std::abs(x));
  return m;
}

nlohmann::json definition_check_json(const std::vector<double>& gaps) {
  return {{"count", gaps.size()}, {"max_gap", max_abs(gaps)}};
}

// The values of a --group-by column in table order: numerically when every value is a number
// (gpus, seq_len), else as text.
std::vector<std::string> ordered_values(const ValidationGroups& groups) {
  std::vector<std::string> values;
  for (const auto& [value, group] : groups) values.push_back(value);
  // In numeric order when every value is a finite number ("nan" is not: it would break the
  // ordering the sort needs), else in text order.
  if (std::all_of(values.begin(), values.end(),
                  [](const std::string& v) { return finite_number(v).has_value(); })) {
    std::sort(values.begin(), values.end(), [](const std::string& a, const std::string& b) {
      return *finite_number(a) < *finite_number(b);
    });
  }
  return values;
}

// Measured and predicted: tokens/s/GPU where the source prints it, else its TFLOPS/GPU.
Compared headline(const ValidationOutcome& o) {
  return o.measured_tokens ? Compared{*o.measured_tokens, o.predicted_tokens} : *row_tflops(o);
}

double signed_error(const ValidationOutcome& o) {
  const auto [measured, predicted] = headline(o);
  return predicted / measured - 1.0;
}

// What the predicted cell notes about the allocator: out of memory, or the retries of a step
// that fits.
std::string allocator_note(const ValidationOutcome& o) {
  if (o.status == "oom") return " (out of memory)";
  if (o.alloc_retries == 0) return "";
  return " (" + cuda_malloc_retries(o.alloc_retries) + ")";
}

std::string case_row(const ValidationOutcome& o) {
  const auto [measured, predicted] = headline(o);
  return fmt::format(
      "| {} | {:.1f}{} | {:.1f}{} | {:+.1f}% |\n", markdown_cell(o.c->get("case_id")), measured,
      o.measured_tokens ? "" : " TFLOPS", predicted, allocator_note(o), 100.0 * signed_error(o));
}

// The states of `all` that `groups` has, in that order.
std::vector<std::string> present(const ValidationGroups& groups,
                                 std::initializer_list<const char*> all) {
  std::vector<std::string> order;
  for (const char* state : all) {
    if (groups.count(state) != 0) order.emplace_back(state);
  }
  return order;
}

// Per group: the absolute errors, their signed mean (bias: > 0 predicts too fast) and the rank
// correlation of predicted and measured within the group.
std::string group_table(const std::string& title, const ValidationGroups& groups,
                        const std::vector<std::string>& order) {
  std::string md = fmt::format(
      "\n## tokens/s/GPU by {}\n\n| {} | cases | MAPE | median | max | bias | Spearman "
      "|\n|---|---|---|---|---|---|---|\n",
      title, title);
  for (const std::string& name : order) {
    const ValidationGroup& g = groups.at(name);
    const ErrorSummary e = g.summary();
    const std::optional<double> rho = g.rank_correlation();
    const std::string rank_correlation = rho ? fmt::format("{:.2f}", *rho) : "–";
    md += fmt::format("| {} | {} | {} | {} | {} | {:+.1f}% | {} |\n",
                      name.empty() ? "(empty)" : markdown_cell(name), e.count, percent(e.mape),
                      percent(e.median_ape), percent(e.max_ape), 100.0 * e.mean_error,
                      rank_correlation);
  }
  return md;
}

std::vector<std::string> keys(const ValidationGroups& groups) {
  std::vector<std::string> k;
  for (const auto& [name, g] : groups) k.push_back(name);
  return k;
}

// How much of the rows the calibration profile priced: the rows of which it priced no
// collective or no GEMM (every one the model's), named up to a few.
std::string calibration_coverage(const std::vector<ValidationOutcome>& outcomes) {
  static constexpr std::size_t kNamed = 5;
  std::size_t rows = 0;
  std::vector<std::string> no_collective;
  std::vector<std::string> no_gemm;
  for (const ValidationOutcome& o : outcomes) {
    if (!o.calibration) continue;
    ++rows;
    const hardware::CalibrationCounts& n = *o.calibration;
    if (n.collectives_calibrated == 0 && n.collectives_fallback > 0)
      no_collective.push_back(o.c->get("case_id"));
    if (n.gemms_calibrated == 0 && n.gemms_fallback > 0) no_gemm.push_back(o.c->get("case_id"));
  }
  if (rows == 0) return "";
  // "none", "all", or "2: `a`, `b`".
  const auto which = [rows](const std::vector<std::string>& ids) -> std::string {
    if (ids.empty()) return "none";
    if (ids.size() == rows) return "all";
    std::vector<std::string> shown;
    for (std::size_t i = 0; i < std::min(ids.size(), kNamed); ++i)
      shown.push_back(fmt::format("`{}`", markdown_cell(ids[i])));
    return fmt::format("{} ({}{})", ids.size(), fmt::join(shown, ", "),
                       ids.size() > kNamed ? fmt::format(" and {} more", ids.size() - kNamed) : "");
  };
  const std::string out = fmt::format(
      "Of the {} rows, those whose every collective the fallback model priced: {}{}; those whose "
      "every GEMM it priced: {}",
      rows, which(no_collective),
      no_collective.empty() ? ""
                            : " (the profile has no curve of their collectives and group shapes, "
                              "or its curves stop below their sizes)",
      which(no_gemm));
  return out + " (each row's counts: `calibration` in the JSON's cases).";
}

// An upper bound as a percentage: rounded up at two decimals, never down (a gap of 0.14 % is
// not "within 0.1 %").
std::string bound_percent(double fraction) {
  return fmt::format("{:.2f}%", std::ceil(fraction * 10000.0) / 100.0);
}

}  // namespace

std::string percent(double fraction) {
  // An absurd measured value (1e-300 tokens/s) gives an absurd error: three digits of it.
  const double p = 100.0 * fraction;
  return std::abs(p) < 1e6 ? fmt::format("{:.1f}%", p) : fmt::format("{:.3g}%", p);
}

std::string size_bucket(double params_b) {
  if (params_b < 1.0) return "< 1B";
  if (params_b < 10.0) return "1-10B";
  if (params_b < 100.0) return "10-100B";
  return ">= 100B";
}

ErrorSummary tokens_summary(const std::vector<ValidationOutcome>& outcomes) {
  ValidationGroup g;
  for (const ValidationOutcome& o : outcomes) {
    if (o.measured_tokens) g.add({*o.measured_tokens, o.predicted_tokens});
  }
  return g.summary();
}

ValidationReport::ValidationReport(const std::vector<ValidationOutcome>& outcomes,
                                   nlohmann::json skipped, ValidationContext context)
    : outcomes_(outcomes),
      skipped_(std::move(skipped)),
      context_(std::move(context)),
      summaries_(
          std::make_unique<const ValidationSummaries>(summarize(outcomes_, context_.group_by))) {}

ValidationReport::~ValidationReport() = default;

ErrorSummary ValidationReport::tokens() const { return summaries_->tokens.summary(); }
ErrorSummary ValidationReport::tflops() const { return summaries_->tflops.summary(); }

nlohmann::json ValidationReport::json() const {
  const ValidationSummaries& s = *summaries_;
  const std::vector<ValidationOutcome>& outcomes = outcomes_;
  const nlohmann::json& skipped = skipped_;
  const ValidationContext& context = context_;
  nlohmann::json report;
  report["schema"] = "fsdpsim.validation/1";
  report["cases_file"] = context.cases_file;
  report["where"] = context.where;
  report["calibration"] =
      context.calibration.empty() ? nlohmann::json(nullptr) : nlohmann::json(context.calibration);
  if (context.fit) {
    report["fit"] = {
        {"key", context.fit->key}, {"value", context.fit->value}, {"mape", context.fit->mape}};
  }
  report["evaluated"] = outcomes.size();
  report["skipped"] = skipped.size();
  report["tokens_per_s"] = summary_json(s.tokens.summary());
  report["tflops"] = summary_json(s.tflops.summary());
  report["mfu"] = summary_json(s.mfu.summary());
  report["hfu"] = summary_json(s.hfu.summary());
  report["peak_mem"] = summary_json(s.memory.summary());
  report["peak_reserved_mem"] = summary_json(s.reserved.summary());
  report["definition_check"] = {{"mfu", definition_check_json(s.mfu_gaps)},
                                {"hfu", definition_check_json(s.hfu_gaps)}};
  nlohmann::json rho = nlohmann::json::object();
  for (const auto& [name, g] : s.by_source) rho[name] = rank_correlation_json(g);
  report["spearman"] = rho;
  for (const auto& [key, groups] :
       {std::pair{"by_source", &s.by_source}, std::pair{"by_gpu", &s.by_gpu},
        std::pair{"by_model_size", &s.by_size}, std::pair{"by_allocator", &s.by_allocator},
        std::pair{"by_network", &s.by_network}}) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, g] : *groups) j[name] = summary_json(g.summary());
    report[key] = j;
  }
  if (!context.group_by.empty()) {
    nlohmann::json columns = nlohmann::json::object();
    for (const auto& [column, groups] : s.by_column) {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& [value, g] : groups) {
        j[value] = summary_json(g.summary());
        j[value]["spearman"] = rank_correlation_json(g);
      }
      columns[column] = j;
    }
    report["by_column"] = columns;
  }
  report["scaling"] = scaling_json(s.scaling);
  nlohmann::json rows = nlohmann::json::array();
  for (const ValidationOutcome& o : outcomes) {
    nlohmann::json row = {{"case_id", o.c->get("case_id")},
                          {"source", o.c->get("source")},
                          {"status", o.status},
                          {"predicted_tokens_per_s_per_gpu", o.predicted_tokens},
                          {"predicted_alloc_retries", o.alloc_retries}};
    if (o.measured_tokens) {
      row["measured_tokens_per_s_per_gpu"] = *o.measured_tokens;
      row["error"] = o.predicted_tokens / *o.measured_tokens - 1.0;
    }
    if (o.calibration) {
      row["calibration"] = {{"collectives_calibrated", o.calibration->collectives_calibrated},
                            {"collectives_fallback", o.calibration->collectives_fallback},
                            {"gemms_calibrated", o.calibration->gemms_calibrated},
                            {"gemms_fallback", o.calibration->gemms_fallback},
                            {"collectives_extrapolated", o.calibration->collectives_extrapolated}};
    }
    for (const auto& [key, pair] :
         {std::pair{"step_time_s", &o.step_time_s}, std::pair{"model_tflops", &o.model_tflops},
          std::pair{"hardware_tflops", &o.hardware_tflops}, std::pair{"mfu", &o.mfu},
          std::pair{"hfu", &o.hfu}, std::pair{"peak_mem_gib", &o.peak_mem},
          std::pair{"peak_reserved_gib", &o.peak_reserved}}) {
      if (*pair) row[key] = {{"measured", (*pair)->first}, {"predicted", (*pair)->second}};
    }
    rows.push_back(row);
  }
  report["cases"] = rows;
  report["skipped_cases"] = skipped;
  return report;
}

std::string ValidationReport::markdown() const {
  const ValidationSummaries& s = *summaries_;
  const std::vector<ValidationOutcome>& outcomes = outcomes_;
  const nlohmann::json& skipped = skipped_;
  const ValidationContext& context = context_;
  std::string md = fmt::format("# fsdpsim validate: {}\n\n", context.cases_file);
  const auto out_of_memory =
      std::count_if(outcomes.begin(), outcomes.end(),
                    [](const ValidationOutcome& o) { return o.status == "oom"; });
  md += fmt::format(
      "{} cases evaluated, {} skipped. Errors are |predicted - measured| / measured.{}\n\n",
      outcomes.size(), skipped.size(),
      out_of_memory == 0
          ? std::string()
          : fmt::format(" {} of the evaluated runs are predicted out of memory (marked in the "
                        "case table): their error is that of the step's time were the device large "
                        "enough from the failing allocation on.",
                        out_of_memory));
  if (!context.where.empty()) {
    md += fmt::format("Rows where {}.\n\n", fmt::join(context.where, " and "));
  }
  if (!context.calibration.empty()) {
    md += fmt::format(
        "Every row is priced with the calibration profile `{}` (collectives and GEMMs it measured; "
        "the model for the rest); rows of another GPU are skipped.{} {}\n\n",
        context.calibration,
        context.calibration_complete
            ? ""
            : " The profile is incomplete (\"complete\": false): the harness run that wrote it "
              "stopped early, so some shapes may be missing from it.",
        calibration_coverage(outcomes));
  }
  if (context.fit) {
    md += fmt::format("Fitted on these rows: {} = {:.4f} (tokens/s MAPE {}).\n\n", context.fit->key,
                      context.fit->value, percent(context.fit->mape));
  }
  md += "| quantity | cases | MAPE | median | max |\n|---|---|---|---|---|\n";
  for (const auto& [name, g] :
       {std::pair{"tokens/s/GPU", &s.tokens}, std::pair{"TFLOPS/GPU (row's definition)", &s.tflops},
        std::pair{"MFU (row's definition)", &s.mfu}, std::pair{"HFU (row's definition)", &s.hfu},
        std::pair{"peak allocated memory", &s.memory},
        std::pair{"peak reserved memory", &s.reserved}}) {
    const ErrorSummary e = g->summary();
    if (e.count == 0) {
      md += fmt::format("| {} | 0 | – | – | – |\n", name);  // no row measured it
      continue;
    }
    md += fmt::format("| {} | {} | {} | {} | {} |\n", name, e.count, percent(e.mape),
                      percent(e.median_ape), percent(e.max_ape));
  }
  if (!s.mfu_gaps.empty() || !s.hfu_gaps.empty()) {
    std::vector<std::string> within;
    for (const auto& [name, gaps] :
         {std::pair{"MFU", &s.mfu_gaps}, std::pair{"HFU", &s.hfu_gaps}}) {
      if (!gaps->empty()) {
        within.push_back(fmt::format("the {} it prints within {} ({} row{})", name,
                                     bound_percent(max_abs(*gaps)), gaps->size(),
                                     gaps->size() == 1 ? "" : "s"));
      }
    }
    md += fmt::format(
        "\nDefinition check: each row's own tokens/s under the FLOP count fsdpsim implements "
        "for its source gives {}, so MFU and HFU errors are the tokens/s errors seen through "
        "that count{}.\n",
        fmt::join(within, " and "),
        s.wide_gaps.empty()
            ? ""
            : fmt::format(" where a row is within {:.0f}% of it", 100.0 * kDefinitionGapTolerance));
    if (!s.wide_gaps.empty()) {
      md += fmt::format(
          "\nMore than {:.0f}% from that count, so counted another way (their MFU and HFU errors "
          "include the gap): {}.\n",
          100.0 * kDefinitionGapTolerance, fmt::join(s.wide_gaps, ", "));
    }
  }
  md += group_table("source", s.by_source, keys(s.by_source));
  md += group_table("GPU", s.by_gpu, keys(s.by_gpu));
  md += group_table("model size", s.by_size, keys(s.by_size));
  md += group_table("predicted allocator state", s.by_allocator,
                    present(s.by_allocator, {kNoRetry, kRetries, kOutOfMemory}));
  md +=
      "\nA predicted step with cudaMalloc retries fits only after the caching allocator has freed "
      "its cache and synchronized the device; fsdpsim prices those calls by segment size (a "
      "calibration profile's timings, else the preset's, timed on an H200), but how often the "
      "real allocator retries depends on how fragmented its cache is, so such predictions are "
      "less certain than the others.\n";
  md += group_table("inter-node bandwidth", s.by_network,
                    present(s.by_network, {kOneNode, kStatedNetwork, kAssumedNetwork}));
  md +=
      "\nA run on several nodes whose source does not state the bandwidth between them "
      "(inter_node_assumed true, or inter_node_gbps_per_node empty: the GPU preset's) is "
      "simulated at an assumed one, so its error is the model's and the assumption's "
      "together.\n";
  for (const std::string& column : context.group_by) {
    const auto found = s.by_column.find(column);
    if (found == s.by_column.end()) continue;  // no row prints tokens/s
    md += group_table(column, found->second, ordered_values(found->second));
  }
  md += scaling_markdown(s.scaling);
  // The worst rows first: those off by more than kLargeError, largest error first.
  std::vector<const ValidationOutcome*> large;
  for (const ValidationOutcome& o : outcomes) {
    if (std::abs(signed_error(o)) > kLargeError) large.push_back(&o);
  }
  std::sort(large.begin(), large.end(), [](const ValidationOutcome* a, const ValidationOutcome* b) {
    return std::abs(signed_error(*a)) > std::abs(signed_error(*b));
  });
  md += fmt::format("\n## Cases off by more than {:.0f}%\n\n{} of {}.\n", 100.0 * kLargeError,
                    large.size(), outcomes.size());
  if (!large.empty()) md += "\n| case | measured | predicted | error |\n|---|---|---|---|\n";
  for (const ValidationOutcome* o : large) md += case_row(*o);
  md += "\n## Cases\n\n| case | measured | predicted | error |\n|---|---|---|---|\n";
  for (const ValidationOutcome& o : outcomes) md += case_row(o);
  md += "\n## Skipped\n\n";
  if (skipped.empty()) md += "None: every row was simulated.\n";
  if (!skipped.empty()) md += "| case | line | reason |\n|---|---|---|\n";
  for (const auto& skip : skipped) {
    md += fmt::format("| {} | {} | {} |\n", markdown_cell(skip["case_id"].get<std::string>()),
                      skip["line"].get<std::int64_t>(),
                      markdown_cell(skip["reason"].get<std::string>()));
  }
  return md;
}

}  // namespace fsdpsim::app
