// Simulated time: integer picoseconds, so event ordering is exact and reproducible.
//
// Seconds (a double from a cost model) become SimTime in exactly one function, to_sim_time().
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "sim/units/units.hpp"

namespace fsdpsim {

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime from_picoseconds(std::int64_t ps) { return SimTime(ps); }
  static constexpr SimTime max() { return SimTime(std::numeric_limits<std::int64_t>::max()); }

  [[nodiscard]] constexpr std::int64_t picoseconds() const { return ps_; }
  [[nodiscard]] constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  [[nodiscard]] constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }

  friend constexpr SimTime operator+(SimTime a, SimTime b) { return SimTime(a.ps_ + b.ps_); }
  friend constexpr SimTime operator-(SimTime a, SimTime b) { return SimTime(a.ps_ - b.ps_); }
  constexpr SimTime& operator+=(SimTime other) {
    ps_ += other.ps_;
    return *this;
  }
  friend constexpr auto operator<=>(SimTime a, SimTime b) = default;

 private:
  constexpr explicit SimTime(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

// The one conversion from a cost model's Seconds to simulated time: rounded to the nearest
// picosecond. Negative or non-finite durations are a bug in a cost model.
inline SimTime to_sim_time(Seconds s) {
  return SimTime::from_picoseconds(static_cast<std::int64_t>(std::llround(s.value() * 1e12)));
}

inline constexpr Seconds to_seconds(SimTime t) { return Seconds(t.seconds()); }

}  // namespace fsdpsim
