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

namespace {

// The length of the well-formed UTF-8 sequence at `text[i]` (RFC 3629, table 3-7 of Unicode:
// no overlong forms, surrogates or code points past U+10FFFF), or 0.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) {
    return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u;
  };
  const unsigned b0 = byte(0);
  const auto continuation = [](unsigned b, unsigned lo = 0x80, unsigned hi = 0xbf) {
    return b >= lo && b <= hi;
  };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) return continuation(byte(1)) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    const unsigned lo = b0 == 0xe0 ? 0xa0 : 0x80;
    const unsigned hi = b0 == 0xed ? 0x9f : 0xbf;
    return continuation(byte(1), lo, hi) && continuation(byte(2)) ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    const unsigned lo = b0 == 0xf0 ? 0x90 : 0x80;
    const unsigned hi = b0 == 0xf4 ? 0x8f : 0xbf;
    return continuation(byte(1), lo, hi) && continuation(byte(2)) && continuation(byte(3)) ? 4 : 0;
  }
  return 0;
}

std::string hex_name(unsigned value, const char* prefix, int digits) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = prefix;
  for (int d = digits - 1; d >= 0; --d) out += kHex[(value >> (4 * d)) & 0xf];
  return out;
}

}  // namespace

std::optional<NonText> first_non_text(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if ((b < 0x20 && b != '\t') || b == 0x7f) return NonText{i, hex_name(b, "U+", 4)};
    const std::size_t length = utf8_length(text, i);
    if (length == 0) return NonText{i, hex_name(b, "0x", 2)};
    if (length == 2 && b == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0)
      return NonText{i, hex_name(static_cast<unsigned char>(text[i + 1]), "U+", 4)};
    i += length;
  }
  return std::nullopt;
}

std::string printable(std::string_view text) {
  std::string out;
  while (const std::optional<NonText> bad = first_non_text(text)) {
    out.append(text.substr(0, bad->offset));
    out += "<" + bad->name + ">";
    const bool c1 =
        static_cast<unsigned char>(text[bad->offset]) == 0xc2 && bad->name.starts_with("U+");
    text.remove_prefix(bad->offset + (c1 ? 2 : 1));
  }
  out.append(text);
  return out;
}

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
