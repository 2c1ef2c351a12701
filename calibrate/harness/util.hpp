// The plain C++ part of the harness's shared helpers (no CUDA): exit codes, error types, string
// helpers, spreads. results.cpp needs only this, so that the profile writer can be unit-tested
// on machines without CUDA (tests/unit/calibrate/harness_writer_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units/text_scan.hpp"

namespace fsdpsim::harness {

// Exit codes (README "Calibrating a new cluster").
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;   // a CUDA, NCCL or cuBLASLt error while measuring
inline constexpr int kExitUsage = 2;    // bad options, or no usable GPU
inline constexpr int kExitTimeout = 3;  // no progress within --timeout: a rank failed or hung

// Bad options or an environment the harness cannot run in (exit 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure while measuring (exit 1).
class HarnessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable (no fmt here: the GPU machines have only the CUDA toolkit).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// The largest buffer the harness measures, and the largest integer an option takes: far past
// any real collective or shape, and no product of them overflows.
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;          // 1 PiB
inline constexpr std::int64_t kMaxGemmDimension = std::int64_t{1} << 24;  // m, n, k or batch
inline constexpr std::int64_t kMaxRanks = std::int64_t{1} << 20;          // ranks of a group

// `text` as a whole decimal integer in [min, max]; nothing else (no sign, spaces or trailing
// characters), else std::nullopt.
std::optional<std::int64_t> whole_integer(const std::string& text, std::int64_t min,
                                          std::int64_t max);

// "1K", "64M", "4G", "1024" -> bytes (binary suffixes, as nccl-tests -b / -e), at most kMaxBytes.
// Throws UsageError.
std::int64_t parse_size(const std::string& text, const std::string& option);
std::string format_size(std::int64_t bytes);
std::vector<std::string> split_list(const std::string& text);

// `text` with each control character but tab, and each byte that is not UTF-8, written as its
// name in angle brackets (sim/units/text_scan.hpp): for messages that quote options and files.
std::string printable(std::string_view text);

// Median, minimum and maximum of samples (not empty).
struct Spread {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};
Spread spread_of(std::vector<double> samples);

}  // namespace fsdpsim::harness
