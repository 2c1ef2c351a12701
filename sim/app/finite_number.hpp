// The one way the app reads a number from text it did not get as JSON (a CSV cell, a grid label,
// a command-line range): the whole text in decimal or scientific notation, and finite. No hex,
// no surrounding spaces, no "inf" or "nan", no leading '+' (std::from_chars, general format).
#pragma once

#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

namespace fsdpsim::app {

inline std::optional<double> finite_number(std::string_view text) {
  double x = 0.0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || r.ec != std::errc{} || r.ptr != text.data() + text.size() ||
      !std::isfinite(x))
    return std::nullopt;
  return x;
}

}  // namespace fsdpsim::app
