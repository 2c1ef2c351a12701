// Error statistics of predictions against measurements: absolute percentage errors summarized
// as mean (MAPE), median and max, the mean signed error (the bias), and Spearman's rank
// correlation.
#pragma once

#include <optional>
#include <vector>

namespace fsdpsim::app {

struct ErrorSummary {
  int count = 0;
  double mape = 0.0;  // fractions: 0.05 = 5 %
  double median_ape = 0.0;
  double max_ape = 0.0;
  double mean_error = 0.0;  // mean of (predicted - measured) / measured: > 0 predicts too high
};

// |predicted - measured| / measured for each pair, and its signed mean. Precondition:
// measured > 0.
ErrorSummary summarize_errors(const std::vector<double>& measured,
                              const std::vector<double>& predicted);

// Spearman's rho with average ranks for ties; none (undefined) for fewer than 2 pairs or when
// one side has every value equal.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace fsdpsim::app
