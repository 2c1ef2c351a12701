// Numbers as fsdpsim writes them: results and profiles keep 6 significant digits, readable and
// with diffs that mean something; an `expect` that a number equals a value compares at the same
// precision, since the result it is checked against has no more.
#pragma once

#include <cmath>

namespace fsdpsim::app {

inline constexpr int kWrittenSignificantDigits = 6;

// `x` rounded to kWrittenSignificantDigits significant digits (0, infinities and NaN as they are).
inline double round6(double x) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  const double scale = std::pow(
      10.0, kWrittenSignificantDigits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(x)))));
  return std::round(x * scale) / scale;
}

}  // namespace fsdpsim::app
