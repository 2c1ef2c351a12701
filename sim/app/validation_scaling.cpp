#include "sim/app/validation_scaling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/app/markdown_cell.hpp"
#include "sim/app/validation_report.hpp"

namespace fsdpsim::app {
namespace {

double gpus(const ValidationOutcome& o) { return o.c->number("gpus").value_or(0.0); }

struct FactorSummary {
  int count = 0;
  double measured_change = 0.0;  // sums until averaged
  double predicted_change = 0.0;
  double error = 0.0;
  double abs_error = 0.0;

  void add(const ScalingPair& p) {
    ++count;
    measured_change += p.measured_change;
    predicted_change += p.predicted_change;
    error += p.error;
    abs_error += std::abs(p.error);
  }
  [[nodiscard]] FactorSummary mean() const {
    const auto n = static_cast<double>(count);
    return {count, measured_change / n, predicted_change / n, error / n, abs_error / n};
  }
};

// By factor, in increasing order (the pairs are sorted by it).
std::vector<std::pair<double, FactorSummary>> by_factor(const std::vector<ScalingPair>& pairs) {
  std::vector<std::pair<double, FactorSummary>> out;
  for (const ScalingPair& p : pairs) {
    if (out.empty() || out.back().first != p.factor) out.emplace_back(p.factor, FactorSummary{});
    out.back().second.add(p);
  }
  for (auto& [factor, s] : out) s = s.mean();
  return out;
}

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", 100.0 * fraction); }

// A change over `factor` times the GPUs as the change per doubling that compounds to it.
double per_doubling(double change, double factor) {
  return std::pow(1.0 + change, 1.0 / std::log2(factor)) - 1.0;
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const std::size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

// The median over the pairs of the measured and of the predicted change per doubling: robust to
// the odd pair whose measurements disagree (a run that got faster on four times the GPUs).
std::pair<double, double> median_per_doubling(const std::vector<ScalingPair>& pairs) {
  std::vector<double> measured;
  std::vector<double> predicted;
  for (const ScalingPair& p : pairs) {
    measured.push_back(per_doubling(p.measured_change, p.factor));
    predicted.push_back(per_doubling(p.predicted_change, p.factor));
  }
  return {median(measured), median(predicted)};
}

// The pairs of each source (the cluster and software that ran them), in source order.
std::map<std::string, std::vector<ScalingPair>> by_source(const std::vector<ScalingPair>& pairs) {
  std::map<std::string, std::vector<ScalingPair>> out;
  for (const ScalingPair& p : pairs) out[p.fewer->c->get("source")].push_back(p);
  return out;
}

nlohmann::json per_doubling_json(const std::vector<ScalingPair>& pairs) {
  if (pairs.empty()) return nullptr;
  const auto [measured, predicted] = median_per_doubling(pairs);
  return {{"measured_change", measured}, {"predicted_change", predicted}};
}

}  // namespace

std::string scaling_key(const ValidationCase& c, const nlohmann::json& scenario,
                        double nic_bytes_per_s) {
  nlohmann::json key = scenario;
  key.erase("name");
  key.erase("description");
  // The model is its shape: a row that leaves the optional model column empty names its model
  // after its case_id, which no other row shares.
  if (key["model"].is_object() && c.get("model").empty()) key["model"].erase("name");
  nlohmann::json& hardware = key["hardware"];
  hardware["node"].erase("nic_Gbps_per_node");
  hardware["nic_bytes_per_s"] = nic_bytes_per_s;
  const auto world =
      hardware.value("nodes", std::int64_t{1}) * hardware["node"].value("gpus_per_node", 1);
  hardware.erase("nodes");
  // A job on part of one node has its GPU count as gpus_per_node in the scenario.
  hardware["node"]["gpus_per_node"] = c.get("gpus_per_node");
  nlohmann::json& training = key["training"];
  const auto micro = training.value("micro_batch", std::int64_t{1});
  training["micro_batches_per_step"] =
      training.value("global_batch", micro * world) / (micro * world);
  training.erase("global_batch");
  key["source"] = c.get("source");
  return key.dump();
}

std::vector<ScalingPair> scaling_pairs(const std::vector<ValidationOutcome>& outcomes) {
  std::map<std::string, std::vector<const ValidationOutcome*>> groups;
  for (const ValidationOutcome& o : outcomes) {
    if (o.measured_tokens && o.status == "ok" && !o.scaling_key.empty())
      groups[o.scaling_key].push_back(&o);  // in file order
  }
  std::vector<ScalingPair> pairs;
  for (const auto& [key, rows] : groups) {
    const ValidationOutcome* fewer = *std::min_element(
        rows.begin(), rows.end(),
        [](const ValidationOutcome* a, const ValidationOutcome* b) { return gpus(*a) < gpus(*b); });
    for (const ValidationOutcome* more : rows) {
      if (gpus(*more) <= gpus(*fewer)) continue;
      ScalingPair p;
      p.fewer = fewer;
      p.more = more;
      p.factor = gpus(*more) / gpus(*fewer);
      p.measured_change = *more->measured_tokens / *fewer->measured_tokens - 1.0;
      p.predicted_change = more->predicted_tokens / fewer->predicted_tokens - 1.0;
      p.error = (1.0 + p.predicted_change) / (1.0 + p.measured_change) - 1.0;
      pairs.push_back(p);
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const ScalingPair& a, const ScalingPair& b) {
    return std::tuple(a.factor, a.fewer->c->line, a.more->c->line) <
           std::tuple(b.factor, b.fewer->c->line, b.more->c->line);
  });
  return pairs;
}

nlohmann::json scaling_json(const std::vector<ScalingPair>& pairs) {
  nlohmann::json factors = nlohmann::json::object();
  for (const auto& [factor, s] : by_factor(pairs)) {
    factors[fmt::format("{:g}", factor)] = {{"count", s.count},
                                            {"measured_change", s.measured_change},
                                            {"predicted_change", s.predicted_change},
                                            {"mean_error", s.error},
                                            {"mean_abs_error", s.abs_error}};
  }
  nlohmann::json cases = nlohmann::json::array();
  for (const ScalingPair& p : pairs) {
    cases.push_back({{"fewer", p.fewer->c->get("case_id")},
                     {"more", p.more->c->get("case_id")},
                     {"gpus", {std::llround(gpus(*p.fewer)), std::llround(gpus(*p.more))}},
                     {"measured_change", p.measured_change},
                     {"predicted_change", p.predicted_change},
                     {"error", p.error}});
  }
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& [source, own] : by_source(pairs)) {
    sources[source] = {{"count", own.size()}, {"per_doubling", per_doubling_json(own)}};
  }
  return {{"pairs", pairs.size()},
          {"per_doubling", per_doubling_json(pairs)},
          {"by_factor", factors},
          {"by_source", sources},
          {"cases", cases}};
}

std::string scaling_markdown(const std::vector<ScalingPair>& pairs) {
  std::string md =
      "\n## Scaling: the same run on more GPUs\n\n"
      "Rows that differ only in their GPU count (same source, model, GPU, micro-batch, "
      "micro-batches per step and every other setting; the global batch grows with the GPUs), "
      "each against the one on the fewest GPUs: how much the tokens/s per GPU changed, measured "
      "and predicted. The error is (1 + predicted change) / (1 + measured change) - 1: above 0, "
      "fsdpsim keeps more of the per-GPU throughput than the runs did. An error in level that is "
      "the same at every GPU count cancels here; what is left is what the model gets wrong about "
      "scale.\n\n";
  if (pairs.empty()) return md + "No two evaluated rows differ only in their GPU count.\n";
  md +=
      "| GPUs x | pairs | measured change | predicted change | error (mean) | error (mean "
      "abs.) |\n|---|---|---|---|---|---|\n";
  for (const auto& [factor, s] : by_factor(pairs)) {
    md += fmt::format("| {:g} | {} | {} | {} | {} | {} |\n", factor, s.count,
                      signed_percent(s.measured_change), signed_percent(s.predicted_change),
                      signed_percent(s.error), percent(s.abs_error));
  }
  const auto [measured, predicted] = median_per_doubling(pairs);
  md += fmt::format(
      "\nPer doubling of the GPUs (each pair's change as the change per doubling that compounds "
      "to it, the median over the pairs): measured {}, predicted {}.\n",
      signed_percent(measured), signed_percent(predicted));
  md +=
      "\n| source | pairs | measured per doubling | predicted per doubling |\n"
      "|---|---|---|---|\n";
  for (const auto& [source, own] : by_source(pairs)) {
    const auto [own_measured, own_predicted] = median_per_doubling(own);
    md += fmt::format("| {} | {} | {} | {} |\n", markdown_cell(source), own.size(),
                      signed_percent(own_measured), signed_percent(own_predicted));
  }
  // With a calibration profile, one row of a pair can be priced by measured curves and the other
  // by the model (a group shape the profile did not measure): its error then mixes the two.
  const auto measured_collectives = [](const ValidationOutcome& o) {
    return o.calibration && o.calibration->collectives_calibrated > 0;
  };
  const auto mixed = std::count_if(pairs.begin(), pairs.end(), [&](const ScalingPair& p) {
    return p.fewer->calibration && measured_collectives(*p.fewer) != measured_collectives(*p.more);
  });
  if (mixed > 0) {
    md += fmt::format(
        "\n{} of the {} pairs compare a row whose collectives the calibration profile priced with "
        "one whose collectives the model priced (a group shape the profile did not measure): "
        "their errors mix the profile's and the model's.\n",
        mixed, pairs.size());
  }
  md +=
      "\n| fewer GPUs | more GPUs | GPUs | measured change | predicted change | error "
      "|\n|---|---|---|---|---|---|\n";
  for (const ScalingPair& p : pairs) {
    md += fmt::format("| {} | {} | {:g} -> {:g} | {} | {} | {} |\n",
                      markdown_cell(p.fewer->c->get("case_id")),
                      markdown_cell(p.more->c->get("case_id")), gpus(*p.fewer), gpus(*p.more),
                      signed_percent(p.measured_change), signed_percent(p.predicted_change),
                      signed_percent(p.error));
  }
  return md;
}

}  // namespace fsdpsim::app
