// Strong units shared by every layer (STYLE.md "Types and names").
//
// Each quantity is a tiny tagged type with explicit construction, so `Bytes + Seconds` does not
// compile and a bare double never silently becomes a time. Only the meaningful cross-unit
// operations exist: Bytes / BytesPerSec -> Seconds, Flops / FlopsPerSec -> Seconds.
// GB (1e9) and GiB (2^30) are always explicit in the helper names.
#pragma once

#include <compare>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

namespace fsdpsim {

// A byte count beyond int64 (8 EiB): the inputs' sizes are out of any real range (a custom layer's
// bytes per sample x a micro-batch of millions x thousands of layers). The app reports it as bad
// input, as it does SimTimeRangeError.
class ByteCountRangeError : public std::range_error {
 public:
  using std::range_error::range_error;
};

// A quantity of one unit. `Rep` is the representation, `Tag` makes each unit a distinct type.
template <typename Rep, typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(Rep value) : value_(value) {}

  [[nodiscard]] constexpr Rep value() const { return value_; }

  // Integer quantities (byte counts) throw ByteCountRangeError rather than wrap past int64.
  constexpr Quantity& operator+=(Quantity other) { return *this = *this + other; }
  constexpr Quantity& operator-=(Quantity other) { return *this = *this - other; }
  friend constexpr Quantity operator+(Quantity a, Quantity b) {
    if constexpr (std::is_integral_v<Rep>) {
      Rep sum{};
      if (__builtin_add_overflow(a.value_, b.value_, &sum)) overflow();
      return Quantity(sum);
    } else {
      return Quantity(a.value_ + b.value_);
    }
  }
  friend constexpr Quantity operator-(Quantity a, Quantity b) {
    if constexpr (std::is_integral_v<Rep>) {
      Rep difference{};
      if (__builtin_sub_overflow(a.value_, b.value_, &difference)) overflow();
      return Quantity(difference);
    } else {
      return Quantity(a.value_ - b.value_);
    }
  }
  friend constexpr Quantity operator*(Quantity a, Rep k) {
    if constexpr (std::is_integral_v<Rep>) {
      Rep product{};
      if (__builtin_mul_overflow(a.value_, k, &product)) overflow();
      return Quantity(product);
    } else {
      return Quantity(a.value_ * k);
    }
  }
  friend constexpr Quantity operator*(Rep k, Quantity a) { return a * k; }
  friend constexpr Quantity operator/(Quantity a, Rep k) { return Quantity(a.value_ / k); }
  // The ratio of two quantities of one unit is a plain number.
  friend constexpr double ratio(Quantity a, Quantity b) {
    return static_cast<double>(a.value_) / static_cast<double>(b.value_);
  }
  friend constexpr auto operator<=>(Quantity a, Quantity b) = default;

 private:
  [[noreturn]] static void overflow() {
    throw ByteCountRangeError("a byte count overflows 2^63 bytes (8 EiB)");
  }
  Rep value_{};
};

struct BytesTag {};
struct SecondsTag {};
struct BytesPerSecTag {};
struct FlopsTag {};
struct FlopsPerSecTag {};

using Bytes = Quantity<std::int64_t, BytesTag>;        // exact byte counts
using Seconds = Quantity<double, SecondsTag>;          // durations from cost models
using BytesPerSec = Quantity<double, BytesPerSecTag>;  // bandwidths
using Flops = Quantity<double, FlopsTag>;              // floating-point operation counts
using FlopsPerSec = Quantity<double, FlopsPerSecTag>;  // compute rates

inline constexpr std::int64_t kBytesPerGiB = std::int64_t{1} << 30;
inline constexpr std::int64_t kBytesPerMiB = std::int64_t{1} << 20;
inline constexpr double kBytesPerGB = 1e9;

constexpr Seconds operator/(Bytes bytes, BytesPerSec rate) {
  return Seconds(static_cast<double>(bytes.value()) / rate.value());
}
constexpr Seconds operator/(Flops flops, FlopsPerSec rate) {
  return Seconds(flops.value() / rate.value());
}

constexpr Bytes gib(double n) {
  return Bytes(static_cast<std::int64_t>(n * static_cast<double>(kBytesPerGiB)));
}
constexpr Bytes mib(double n) {
  return Bytes(static_cast<std::int64_t>(n * static_cast<double>(kBytesPerMiB)));
}
constexpr double to_gib(Bytes b) {
  return static_cast<double>(b.value()) / static_cast<double>(kBytesPerGiB);
}
constexpr double to_gb(Bytes b) { return static_cast<double>(b.value()) / kBytesPerGB; }
constexpr BytesPerSec gb_per_s(double n) { return BytesPerSec(n * kBytesPerGB); }
constexpr BytesPerSec gbit_per_s(double n) { return BytesPerSec(n * kBytesPerGB / 8.0); }
constexpr FlopsPerSec tflop_per_s(double n) { return FlopsPerSec(n * 1e12); }
constexpr Seconds microseconds(double n) { return Seconds(n * 1e-6); }
constexpr Seconds milliseconds(double n) { return Seconds(n * 1e-3); }

}  // namespace fsdpsim
