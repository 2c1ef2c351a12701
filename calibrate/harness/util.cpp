#include "calibrate/harness/util.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace fsdpsim::harness {

std::optional<std::int64_t> whole_integer(const std::string& text, std::int64_t min,
                                          std::int64_t max) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || text.front() == '-' || ec != std::errc{} || ptr != end) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

std::int64_t parse_size(const std::string& text, const std::string& option) {
  if (text.empty())
    throw UsageError(cat(option, ": expected a size such as 1K, 64M or 4G, found nothing"));
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0)
    ++digits;
  if (digits == 0)
    throw UsageError(cat(option, ": expected a size such as 1K, 64M or 4G, found '", text, "'"));
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    shift = 30;
  } else if (!suffix.empty() && suffix != "B") {
    throw UsageError(cat(option, ": unknown size suffix '", suffix, "' (K, M, G: powers of 1024)"));
  }
  const std::optional<std::int64_t> value =
      whole_integer(text.substr(0, digits), 1, kMaxBytes >> shift);
  if (!value) {
    throw UsageError(
        cat(option, ": expected a size from 1 byte to 1 PiB (2^50), found '", text, "'"));
  }
  return *value << shift;
}

std::string format_size(std::int64_t bytes) {
  if (bytes >= (std::int64_t{1} << 30) && bytes % (std::int64_t{1} << 30) == 0)
    return cat(bytes >> 30, " GiB");
  if (bytes >= (std::int64_t{1} << 20) && bytes % (std::int64_t{1} << 20) == 0)
    return cat(bytes >> 20, " MiB");
  if (bytes >= 1024 && bytes % 1024 == 0) return cat(bytes >> 10, " KiB");
  return cat(bytes, " B");
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (const char c : text) {
    if (c == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item += c;
    }
  }
  if (!item.empty()) out.push_back(item);
  return out;
}

std::string printable(std::string_view text) { return escape_control_characters(text, "\t"); }

Spread spread_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  Spread s;
  s.median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

}  // namespace fsdpsim::harness
