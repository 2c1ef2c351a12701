// Simulated time: integer picoseconds, so event ordering is exact and reproducible.
//
// Seconds (a double from a cost model) become SimTime in exactly one function, to_sim_time().
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/units/units.hpp"

namespace fsdpsim {

// A duration or a time beyond what simulated time holds: the inputs' rates or sizes are out of
// any real range (a GPU at 1e-9 TFLOP/s, a 2^31-wide model). The app reports it as bad input.
class SimTimeRangeError : public std::range_error {
 public:
  using std::range_error::range_error;
};

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime from_picoseconds(std::int64_t ps) { return SimTime(ps); }
  static constexpr SimTime max() { return SimTime(std::numeric_limits<std::int64_t>::max()); }

  [[nodiscard]] constexpr std::int64_t picoseconds() const { return ps_; }
  [[nodiscard]] constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  [[nodiscard]] constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }

  // Sums past the int64 range (about 106 days) throw SimTimeRangeError.
  friend constexpr SimTime operator+(SimTime a, SimTime b) {
    std::int64_t sum = 0;
    if (__builtin_add_overflow(a.ps_, b.ps_, &sum))
      throw SimTimeRangeError("simulated time overflows 2^63 ps (about 106 days)");
    return SimTime(sum);
  }
  friend constexpr SimTime operator-(SimTime a, SimTime b) { return SimTime(a.ps_ - b.ps_); }
  constexpr SimTime& operator+=(SimTime other) { return *this = *this + other; }
  friend constexpr auto operator<=>(SimTime a, SimTime b) = default;

 private:
  constexpr explicit SimTime(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

// Longest single operation simulated: a day. Anything longer comes from rates or sizes out of
// any real range, and would overflow the step's simulated time.
inline constexpr double kMaxOperationSeconds = 86400.0;

// The one conversion from a cost model's Seconds to simulated time: rounded to the nearest
// picosecond. Negative or non-finite durations are a bug in a cost model; longer than
// kMaxOperationSeconds (or infinite) throws SimTimeRangeError.
inline SimTime to_sim_time(Seconds s) {
  if (!(s.value() <= kMaxOperationSeconds)) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3g", s.value());
    throw SimTimeRangeError(std::string("an operation would last ") + seconds +
                            " s, longer than the one day fsdpsim simulates per operation");
  }
  return SimTime::from_picoseconds(static_cast<std::int64_t>(std::llround(s.value() * 1e12)));
}

// to_sim_time, its range error naming the operation (a kernel, a collective, host work), so that
// a rate or size out of range can be traced to the model layer, link or host rate it comes from.
inline SimTime to_sim_time(std::string_view operation, Seconds s) {
  try {
    return to_sim_time(s);
  } catch (const SimTimeRangeError& e) {
    throw SimTimeRangeError(std::string(operation) + ": " + e.what());
  }
}

inline constexpr Seconds to_seconds(SimTime t) { return Seconds(t.seconds()); }

}  // namespace fsdpsim
