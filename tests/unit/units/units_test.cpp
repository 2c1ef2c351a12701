#include "sim/units/units.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <type_traits>

#include "sim/units/sim_time.hpp"

namespace fsdpsim {
namespace {

template <typename A, typename B>
concept Addable = requires(A a, B b) {
  a + b;
};

TEST(Units, BytesOverBandwidthIsSeconds) {
  const Seconds s = Bytes(2'000'000'000) / gb_per_s(1000.0);
  EXPECT_DOUBLE_EQ(s.value(), 0.002);
}

TEST(Units, FlopsOverRateIsSeconds) {
  EXPECT_DOUBLE_EQ((Flops(312e12) / tflop_per_s(312.0)).value(), 1.0);
}

TEST(Units, DifferentUnitsDoNotAdd) {
  static_assert(Addable<Bytes, Bytes>);
  static_assert(!Addable<Bytes, Seconds>);
  static_assert(!Addable<Flops, FlopsPerSec>);
  static_assert(!std::is_convertible_v<double, Seconds>);
}

TEST(Units, GibAndGbAreDistinct) {
  EXPECT_EQ(gib(1.0).value(), 1073741824);
  EXPECT_DOUBLE_EQ(to_gb(Bytes(1'000'000'000)), 1.0);
  EXPECT_DOUBLE_EQ(gbit_per_s(8.0).value(), 1e9);
}

// Byte counts past 2^63 are out of range, not wrapped.
TEST(Units, ByteCountsThatOverflowThrow) {
  const Bytes max(std::numeric_limits<std::int64_t>::max());
  EXPECT_THROW((void)(max + Bytes(1)), ByteCountRangeError);
  EXPECT_THROW((void)(Bytes(std::numeric_limits<std::int64_t>::min()) - Bytes(1)),
               ByteCountRangeError);
  EXPECT_THROW((void)(Bytes(std::int64_t{1} << 40) * (std::int64_t{1} << 30)), ByteCountRangeError);
  EXPECT_THROW((void)((std::int64_t{1} << 30) * Bytes(std::int64_t{1} << 40)), ByteCountRangeError);
  Bytes b = max;
  EXPECT_THROW(b += Bytes(1), ByteCountRangeError);
  EXPECT_EQ((max - Bytes(1) + Bytes(1)).value(), max.value());
  EXPECT_EQ((Bytes(-3) * 3).value(), -9);
  // Floating-point quantities are not checked: they saturate to infinity as doubles do.
  EXPECT_EQ((Seconds(1e308) * 10.0).value(), std::numeric_limits<double>::infinity());
}

TEST(SimTime, ConvertsSecondsToWholePicoseconds) {
  EXPECT_EQ(to_sim_time(Seconds(1.5e-6)).picoseconds(), 1'500'000);
  EXPECT_EQ(to_sim_time(Seconds(1e-12 * 0.6)).picoseconds(), 1);
  EXPECT_DOUBLE_EQ(to_sim_time(milliseconds(2.0)).seconds(), 0.002);
}

// An operation longer than a day, or a sum past 2^63 ps, is out of range, not a wrapped time.
TEST(SimTime, OutOfRangeDurationsAndSumsThrow) {
  EXPECT_EQ(to_sim_time(Seconds(86400.0)).picoseconds(), 86'400'000'000'000'000);
  EXPECT_THROW((void)to_sim_time(Seconds(86400.5)), SimTimeRangeError);
  EXPECT_THROW((void)to_sim_time(Seconds(std::numeric_limits<double>::infinity())),
               SimTimeRangeError);
  EXPECT_THROW((void)to_sim_time(Seconds(std::numeric_limits<double>::quiet_NaN())),
               SimTimeRangeError);
  EXPECT_THROW((void)(SimTime::max() + SimTime::from_picoseconds(1)), SimTimeRangeError);
  SimTime t = SimTime::max();
  EXPECT_THROW(t += SimTime::from_picoseconds(1), SimTimeRangeError);
}

}  // namespace
}  // namespace fsdpsim
