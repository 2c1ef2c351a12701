#include "sim/app/validation_stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fsdpsim::app {
namespace {

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = average;
    i = j + 1;
  }
  return r;
}

}  // namespace

ErrorSummary summarize_errors(const std::vector<double>& measured,
                              const std::vector<double>& predicted) {
  ErrorSummary s;
  std::vector<double> ape;
  double signed_sum = 0.0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double error = (predicted[i] - measured[i]) / measured[i];
    ape.push_back(std::fabs(error));
    signed_sum += error;
  }
  s.count = static_cast<int>(ape.size());
  if (ape.empty()) return s;
  s.mean_error = signed_sum / static_cast<double>(ape.size());
  s.mape = std::accumulate(ape.begin(), ape.end(), 0.0) / static_cast<double>(ape.size());
  std::sort(ape.begin(), ape.end());
  const std::size_t n = ape.size();
  s.median_ape = n % 2 == 1 ? ape[n / 2] : (ape[n / 2 - 1] + ape[n / 2]) / 2.0;
  s.max_ape = ape.back();
  return s;
}

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || a.size() != b.size()) return std::nullopt;
  const std::vector<double> ra = ranks(a);
  const std::vector<double> rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1.0) / 2.0;
  double cov = 0.0;
  double va = 0.0;
  double vb = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0.0 || vb == 0.0) return std::nullopt;
  return cov / std::sqrt(va * vb);
}

}  // namespace fsdpsim::app
