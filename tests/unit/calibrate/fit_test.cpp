// Fitting a profile into curves (calibrate/fit.hpp): exact at measured points, monotone between,
// alpha-beta outside, and honest about what it could not fit.
#include "calibrate/fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace fsdpsim::calibrate {
namespace {

constexpr double kUs = 1e-6;

CollectivePoint at(std::int64_t bytes, double time_us) {
  CollectivePoint p;
  p.bytes = Bytes(bytes);
  p.median = Seconds(time_us * kUs);
  return p;
}

CollectiveSeries series(hardware::Collective op, std::vector<CollectivePoint> points,
                        std::int32_t ranks = 8, std::int32_t per_node = 8) {
  CollectiveSeries s;
  s.op = op;
  s.dtype = Dtype::kBf16;
  s.ranks = ranks;
  s.ranks_per_node = per_node;
  s.points = std::move(points);
  return s;
}

// t = 20 us + S / (100 GB/s), sampled at 1 KiB .. 1 GiB (x4).
std::vector<CollectivePoint> alpha_beta_points() {
  std::vector<CollectivePoint> points;
  for (std::int64_t b = 1024; b <= kBytesPerGiB; b *= 4)
    points.push_back(at(b, 20.0 + static_cast<double>(b) / 100e9 / kUs));
  return points;
}

TEST(CalibrationFit, CurveIsExactAtMonotoneMeasurements) {
  CurveFit fit;
  const std::vector<CollectivePoint> points = alpha_beta_points();
  const hardware::CollectiveCurve curve = fit_curve(points, fit);
  for (const CollectivePoint& p : points)
    EXPECT_DOUBLE_EQ(curve.time(p.bytes).value(), p.median.value());
  EXPECT_EQ(fit.max_knot_error, 0.0);
  EXPECT_EQ(fit.points, points.size());
}

TEST(CalibrationFit, AlphaBetaAsymptotesRecoverAnAlphaBetaCurve) {
  CurveFit fit;
  const hardware::CollectiveCurve curve = fit_curve(alpha_beta_points(), fit);
  // Least squares through exact alpha-beta points recovers alpha and beta.
  EXPECT_NEAR(fit.latency.value(), 20 * kUs, 1e-9);
  EXPECT_NEAR(curve.asymptotic_algbw().value(), 100e9, 100e9 * 1e-6);
  const double expected_16g = 20 * kUs + 16.0 * static_cast<double>(kBytesPerGiB) / 100e9;
  EXPECT_NEAR(curve.time(gib(16)).value(), expected_16g, expected_16g * 1e-6);
  EXPECT_NEAR(curve.time(Bytes(8)).value(), 20 * kUs + 8 / 100e9, 1e-9);
}

// Times 32, 18, 24 us at 1, 2 and 4 KiB: the first two are pooled at exp(mean of logs) = 24 us,
// which may come out an ulp above the 24 us measured at 4 KiB; the knots stay non-decreasing
// (the curve once refused them: exit 1, "internal error").
TEST(CalibrationFit, PooledTimesEqualToTheNextMeasurementStayMonotone) {
  for (const auto& [a, b, c] :
       {std::tuple{32.0, 18.0, 24.0}, std::tuple{16.0, 4.0, 8.0}, std::tuple{36.0, 16.0, 24.0}}) {
    std::vector<CollectivePoint> points = {at(1024, a), at(2048, b), at(4096, c)};
    for (std::int64_t bytes = 8192; bytes <= kBytesPerGiB; bytes *= 4)
      points.push_back(at(bytes, c + static_cast<double>(bytes) / 100e9 / kUs));
    CurveFit fit;
    std::optional<hardware::CollectiveCurve> curve;
    ASSERT_NO_THROW(curve.emplace(fit_curve(points, fit))) << a << " " << b << " " << c;
    const auto& knots = curve->knots();
    for (std::size_t i = 1; i < knots.size(); ++i) EXPECT_GE(knots[i].time, knots[i - 1].time);
    EXPECT_NEAR(knots[0].time.value(), c * kUs, 1e-15);
  }
}

// A sweep measured only from 64 MiB up has no latency below it: the fit says the fallback model
// prices smaller buffers.
TEST(CalibrationFit, ASweepStartingInTheBandwidthRegimeIsNotUsedBelowIt) {
  CollectiveSeries bandwidth = series(
      hardware::Collective::kAllReduce,
      {at(64LL << 20, 681), at(128LL << 20, 1340), at(256LL << 20, 2720), at(512LL << 20, 5400)});
  CalibrationProfile profile;
  profile.collectives = {bandwidth, series(hardware::Collective::kAllGather, alpha_beta_points())};
  const ProfileFit fit = fit_profile(profile, "p");
  ASSERT_EQ(fit.collectives.size(), 2U);
  for (const CurveFit& f : fit.collectives)
    EXPECT_EQ(f.extrapolates_down, f.key.op != hardware::Collective::kAllReduce);
}

// Of one collective and group, a measured series is fitted before a derived one (a rule's
// numbers), whichever columns it was read from; the skipped series names the one fitted.
TEST(CalibrationFit, AMeasuredSeriesIsPreferredToADerivedOne) {
  CollectiveSeries derived = series(hardware::Collective::kAllGather, alpha_beta_points());
  derived.origin = Origin::kDerived;
  derived.derivation = "scaled from another GPU";
  CollectiveSeries in_place = series(hardware::Collective::kAllGather, alpha_beta_points());
  in_place.in_place = true;
  for (CollectivePoint& p : in_place.points) p.median = Seconds(p.median.value() * 2.0);
  CalibrationProfile profile;
  profile.collectives = {derived, in_place};
  const ProfileFit fit = fit_profile(profile, "p");
  ASSERT_EQ(fit.collectives.size(), 1U);
  EXPECT_EQ(fit.collectives[0].origin, Origin::kMeasured);
  ASSERT_EQ(fit.skipped.size(), 1U);
  EXPECT_EQ(fit.skipped[0].why,
            "a preferred series (in-place, measured) of the same collective and group was fitted");
}

// Repeats of one size are pooled by their median, and how far apart they are is kept for the
// fit's note: timer noise is a few percent, two different runs can be 3x.
TEST(CalibrationFit, RepeatsOfOneSizeArePooledAndTheirSpreadKept) {
  std::vector<CollectivePoint> points = alpha_beta_points();
  CurveFit alone;
  (void)fit_curve(points, alone);
  EXPECT_EQ(alone.repeat_spread, 1.0);
  points.push_back(at(1 << 20, 3.0 * points[5].median.value() / kUs));
  points.push_back(at(1 << 20, 1.02 * points[5].median.value() / kUs));
  points.push_back(at(1 << 24, 1.5 * points[7].median.value() / kUs));
  CurveFit fit;
  const hardware::CollectiveCurve curve = fit_curve(points, fit);
  EXPECT_NEAR(fit.repeat_spread, 3.0, 1e-12);
  EXPECT_EQ(fit.repeat_spread_bytes, Bytes(1 << 20));
  EXPECT_NEAR(curve.time(Bytes(1 << 20)).value(), 1.02 * points[5].median.value(), 1e-15);
}

TEST(CalibrationFit, NoisyNonMonotoneMeasurementsBecomeMonotone) {
  // 2 MiB measured faster than 1 MiB (as the published 8x A100 sweep: 101.9 us, 101.4 us).
  const std::vector<CollectivePoint> points{at(1 << 19, 80.4), at(1 << 20, 101.9),
                                            at(1 << 21, 101.4), at(1 << 22, 101.5),
                                            at(1 << 23, 133.5)};
  CurveFit fit;
  const hardware::CollectiveCurve curve = fit_curve(points, fit);
  double previous = 0.0;
  for (std::int64_t b = 1 << 19; b <= 1 << 23; b += 1 << 15) {
    EXPECT_GE(curve.time(Bytes(b)).value(), previous);
    previous = curve.time(Bytes(b)).value();
  }
  // The three pooled sizes share the geometric mean of their times.
  const double pooled = std::cbrt(101.9 * 101.4 * 101.5) * kUs;
  EXPECT_NEAR(curve.time(Bytes(1 << 21)).value(), pooled, 1e-12);
  EXPECT_NEAR(fit.max_knot_error, std::fabs(pooled - 101.9 * kUs) / (101.9 * kUs), 1e-12);
  EXPECT_EQ(fit.worst_knot_bytes, Bytes(1 << 20));
  EXPECT_DOUBLE_EQ(curve.time(Bytes(1 << 23)).value(), 133.5 * kUs);  // untouched
}

TEST(CalibrationFit, LeaveOneOutErrorPredictsInteriorPointsFromNeighbours) {
  // 4 MiB at 100 us would be sqrt(50 * 400) = 141.4 us on the neighbours' power law: 41.4 % off.
  const std::vector<CollectivePoint> points{at(1 << 20, 50.0), at(1 << 22, 100.0),
                                            at(1 << 24, 400.0)};
  CurveFit fit;
  (void)fit_curve(points, fit);
  EXPECT_NEAR(fit.max_leave_one_out_error, (std::sqrt(50.0 * 400.0) - 100.0) / 100.0, 1e-12);
}

TEST(CalibrationFit, DuplicateSizesKeepTheirMedian) {
  CurveFit fit;
  const hardware::CollectiveCurve curve =
      fit_curve({at(1024, 10.0), at(1024, 30.0), at(1024, 11.0), at(4096, 40.0)}, fit);
  EXPECT_DOUBLE_EQ(curve.time(Bytes(1024)).value(), 11.0 * kUs);
  EXPECT_EQ(fit.points, 2U);
}

TEST(CalibrationFit, OneSizeOrBadTimesCannotBeFitted) {
  CurveFit fit;
  EXPECT_THROW((void)fit_curve({at(1024, 10.0)}, fit), InputError);
  EXPECT_THROW((void)fit_curve({at(1024, 10.0), at(2048, 0.0)}, fit), InputError);
  EXPECT_THROW((void)fit_curve({at(0, 10.0), at(2048, 20.0)}, fit), InputError);
}

TEST(CalibrationFit, ProfileFitPrefersOutOfPlaceMeasuredSeriesAndReportsTheRest) {
  CalibrationProfile p;
  CollectiveSeries measured = series(hardware::Collective::kAllGather, alpha_beta_points());
  CollectiveSeries in_place = measured;
  in_place.in_place = true;
  for (CollectivePoint& q : in_place.points) q.median = q.median * 2.0;
  CollectiveSeries derived = measured;
  derived.origin = Origin::kDerived;
  derived.derivation = "test";
  for (CollectivePoint& q : derived.points) q.median = q.median * 3.0;
  p.collectives = {
      in_place, derived, measured,
      series(hardware::Collective::kReduceScatter, {at(1024, 10.0)}),        // one size
      series(hardware::Collective::kAllReduce, alpha_beta_points(), 1, 1)};  // one rank
  const ProfileFit fit = fit_profile(p, "test");
  ASSERT_EQ(fit.collectives.size(), 1U);
  EXPECT_EQ(fit.collectives.front().origin, Origin::kMeasured);
  const hardware::CollectiveCurve* curve =
      fit.curves->find_collective(hardware::Collective::kAllGather, {8, 8});
  ASSERT_NE(curve, nullptr);
  EXPECT_DOUBLE_EQ(curve->time(Bytes(1024)).value(), measured.points.front().median.value());
  EXPECT_EQ(fit.skipped.size(),
            4U);  // in-place and derived (preferred one fitted), one size, one rank
}

TEST(CalibrationFit, InterferenceIsTheMedianSlowdownAgainstTheCurveAlone) {
  CalibrationProfile p;
  p.collectives.push_back(series(hardware::Collective::kAllGather, alpha_beta_points()));
  CollectiveSeries together = series(hardware::Collective::kAllGather, alpha_beta_points());
  together.concurrent_with = hardware::Collective::kReduceScatter;
  for (std::size_t i = 0; i < together.points.size(); ++i) {
    together.points[i].median = together.points[i].median * (i == 0 ? 5.0 : 1.5);
  }
  p.collectives.push_back(together);
  const ProfileFit fit = fit_profile(p, "test");
  ASSERT_EQ(fit.interference.size(), 1U);
  EXPECT_NEAR(fit.interference.front().median_slowdown, 1.5, 1e-12);
  EXPECT_EQ(fit.interference.front().concurrent_with, hardware::Collective::kReduceScatter);
}

TEST(CalibrationFit, GemmsEnterWithTheirMedianAndSlowdown) {
  CalibrationProfile p;
  for (const double t : {100.0, 300.0, 110.0}) {
    GemmPoint g;
    g.dtype = Dtype::kBf16;
    g.shape = GemmShape{4096, 4096, 4096, 1};
    g.median = Seconds(t * kUs);
    g.median_under_nccl = Seconds(t * 1.2 * kUs);
    p.gemms.push_back(g);
  }
  const ProfileFit fit = fit_profile(p, "test");
  EXPECT_EQ(fit.gemms, 1U);
  const hardware::GemmMeasurement& m =
      fit.curves->gemms().at(hardware::GemmKey{Dtype::kBf16, 4096, 4096, 4096, 1});
  EXPECT_DOUBLE_EQ(m.time.value(), 110.0 * kUs);
  ASSERT_TRUE(fit.gemm_slowdown_under_nccl.has_value());
  EXPECT_NEAR(*fit.gemm_slowdown_under_nccl, 1.2, 1e-12);
}

// The harness times each GEMM alone just before timing it under NCCL: the slowdown is over that
// baseline (the same clocks and temperature), not over the gemm phase's time, where every
// duplicate has one.
TEST(CalibrationFit, TheSlowdownUnderNcclIsOverTheAloneTimeBesideIt) {
  CalibrationProfile p;
  for (const double t : {100.0, 120.0}) {
    GemmPoint g;
    g.dtype = Dtype::kBf16;
    g.shape = GemmShape{4096, 4096, 4096, 1};
    g.median = Seconds(90.0 * kUs);  // the gemm phase: cooler, faster
    g.median_under_nccl = Seconds(t * 1.1 * kUs);
    g.median_alone_beside_nccl = Seconds(t * kUs);
    p.gemms.push_back(g);
  }
  ASSERT_NEAR(*fit_profile(p, "test").gemm_slowdown_under_nccl, 1.1, 1e-12);
  // One duplicate without it: the medians' ratio, as for a profile without any.
  p.gemms.back().median_alone_beside_nccl.reset();
  EXPECT_NEAR(*fit_profile(p, "test").gemm_slowdown_under_nccl, 121.0 / 90.0, 1e-12);
}

// cudaMalloc 100 us + 1000 us/GiB and cudaFree 100 us + 200 us/GiB, timed at 1 and 3 GiB: the
// lines come back exactly; a size timed once, or a zero time, cannot be fitted.
TEST(CalibrationFit, AllocationTimingsBecomeOneLinePerDeviceCall) {
  const std::vector<AllocationTiming> timings = {{gib(1), Seconds(1100 * kUs), Seconds(300 * kUs)},
                                                 {gib(3), Seconds(3100 * kUs), Seconds(700 * kUs)}};
  const hardware::AllocationCosts c = fit_allocation_costs(timings);
  EXPECT_NEAR(c.malloc.fixed.value(), 100 * kUs, 1e-12);
  EXPECT_NEAR(c.malloc.per_gib.value(), 1000 * kUs, 1e-12);
  EXPECT_NEAR(c.free.fixed.value(), 100 * kUs, 1e-12);
  EXPECT_NEAR(c.free.per_gib.value(), 200 * kUs, 1e-12);
  // A falling line (noise) keeps no negative slope: a flat line through the mean.
  const hardware::AllocationCosts flat =
      fit_allocation_costs({{gib(1), Seconds(200 * kUs), Seconds(90 * kUs)},
                            {gib(2), Seconds(100 * kUs), Seconds(110 * kUs)}});
  EXPECT_DOUBLE_EQ(flat.malloc.per_gib.value(), 0.0);
  EXPECT_NEAR(flat.malloc.fixed.value(), 150 * kUs, 1e-12);
  EXPECT_THROW(fit_allocation_costs({{gib(1), Seconds(1e-3), Seconds(1e-3)}}), InputError);
  EXPECT_THROW(fit_allocation_costs(
                   {{gib(1), Seconds(0.0), Seconds(1e-3)}, {gib(2), Seconds(1e-3), Seconds(1e-3)}}),
               InputError);
  // fit_profile hands the lines to the curves the simulator reads.
  CalibrationProfile profile;
  profile.memory.allocations = timings;
  const ProfileFit fit = fit_profile(profile, "allocations only");
  ASSERT_TRUE(fit.curves->allocation_costs().has_value());
  EXPECT_NEAR(fit.curves->allocation_costs()->free.per_gib.value(), 200 * kUs, 1e-12);
}

// The rank-speed phase's 8192^3 GEMM on four ranks, each on a host of its own (h0-h3): held for
// `held_us`, and where given timed short first (`short_us`) and a kernel launch (`launch_us`).
RankSpeedMeasurement four_ranks(const std::vector<double>& held_us,
                                const std::vector<double>& short_us,
                                const std::vector<double>& launch_us) {
  const auto timed = [](const std::vector<double>& us, std::size_t r) -> std::optional<Seconds> {
    if (us.empty()) return std::nullopt;
    return Seconds(us[r] * kUs);
  };
  RankSpeedMeasurement g;
  g.shape = GemmShape{8192, 8192, 8192, 1};
  for (std::size_t r = 0; r < held_us.size(); ++r) {
    std::string host = "h";
    host += std::to_string(r);
    g.ranks.push_back(RankTiming{host, Seconds(held_us[r] * kUs), std::nullopt, std::nullopt,
                                 timed(short_us, r), timed(launch_us, r)});
  }
  return g;
}

// Four ranks timed the held 8192^3 GEMM in 2000, 1980, 2500 and 2000 us, and a kernel launch in
// 3, 3, 3 and 4 us, each on a host of its own: GPU speeds (rank 0's time over each rank's) 1,
// 1.0101, 0.8 and 1, host speeds 1, 1, 1 and 0.75. Rank 2 has the slowest GPU, rank 3 the slowest
// host; rank 0 ran the GEMM at 2 x 8192^3 / 2 ms = 549.8 TFLOP/s.
TEST(CalibrationFit, RankSpeedsAreRankZerosTimeOverEachRanks) {
  CalibrationProfile p;
  p.rank_speeds = four_ranks({2000.0, 1980.0, 2500.0, 2000.0}, {}, {3.0, 3.0, 3.0, 4.0});
  const ProfileFit fit = fit_profile(p, "speeds");
  ASSERT_TRUE(fit.rank_speeds.has_value());
  const RankSpeedFit& f = *fit.rank_speeds;
  EXPECT_EQ(f.ranks, 4U);
  EXPECT_EQ(f.gpu.slowest_rank, 2);
  EXPECT_EQ(f.gpu.slowest_host, "h2");
  EXPECT_DOUBLE_EQ(f.gpu.slowest, 0.8);
  EXPECT_NEAR(f.gpu.fastest, 2000.0 / 1980.0, 1e-12);
  EXPECT_DOUBLE_EQ(f.gpu.median, 1.0);
  EXPECT_NEAR(f.rank0_tflops, 2.0 * 8192.0 * 8192.0 * 8192.0 / 2e-3 / 1e12, 1e-9);
  ASSERT_TRUE(f.host.has_value());
  EXPECT_EQ(f.host->slowest_rank, 3);
  EXPECT_DOUBLE_EQ(f.host->slowest, 0.75);
  EXPECT_NEAR(f.rank0_launch->value(), 3e-6, 1e-15);
  EXPECT_FALSE(f.sustained.has_value());  // the GEMM was not timed short
  EXPECT_FALSE(fit.curves->sustained_gemm_fraction().has_value());
  ASSERT_EQ(fit.curves->gpu_speeds().size(), 4U);
  EXPECT_DOUBLE_EQ(fit.curves->gpu_speeds()[2], 0.8);
  EXPECT_DOUBLE_EQ(fit.curves->host_speeds()[3], 0.75);

  EXPECT_EQ(fit.curves->speed_ranks_per_node(), 0);  // the profile does not say
  // Nodes of two ranks, as the profile's topology says.
  p.topology.gpus_per_node = 2;
  EXPECT_EQ(fit_profile(p, "two per node").curves->speed_ranks_per_node(), 2);
  p.topology.gpus_per_node = 3;  // 4 ranks are not whole nodes of 3: not known
  EXPECT_EQ(fit_profile(p, "three per node").curves->speed_ranks_per_node(), 0);
  // Ranks 2 and 3 on one host: it launches in the median of their 3 and 4 us, 3.5, so both run
  // at 3 / 3.5 = 0.857 of rank 0's host, the first of them named the slowest.
  p.rank_speeds->ranks[3].host = "h2";
  const ProfileFit shared = fit_profile(p, "shared host");
  EXPECT_EQ(shared.rank_speeds->host->slowest_rank, 2);
  EXPECT_DOUBLE_EQ(shared.curves->host_speeds()[2], 3.0 / 3.5);
  EXPECT_DOUBLE_EQ(shared.curves->host_speeds()[3], 3.0 / 3.5);
  // Without launch times there are no host speeds.
  for (RankTiming& t : p.rank_speeds->ranks) t.launch.reset();
  const ProfileFit gpus_only = fit_profile(p, "gpus only");
  EXPECT_FALSE(gpus_only.rank_speeds->host.has_value());
  EXPECT_TRUE(gpus_only.curves->host_speeds().empty());
  // A GPU 25 times slower than rank 0 is broken, or its time in the wrong unit.
  p.rank_speeds->ranks[3].gemm = Seconds(50000.0 * kUs);
  try {
    (void)fit_profile(p, "broken");
    ADD_FAILURE() << "a rank 25x slower was fitted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "/rank_speeds/ranks/3/gemm_us: rank 3 took 25 times rank 0's time on the "
                  "held GEMM"),
              std::string::npos)
        << e.what();
  }
}

// The same four ranks, each also timing the GEMM short before the hold: 1680, 1680, 2000 and
// 1700 us against 2000, 1980, 2500 and 2000 held, so they kept 0.84, 0.8485, 0.8 and 0.85 of
// their short rate under load. Rank 0's 0.84 is what the profile's GEMMs (rank 0's, timed short)
// are divided by; the median is (0.84 + 0.8485) / 2, the lowest rank 2's.
TEST(CalibrationFit, HeldOverShortGemmIsTheSustainedFraction) {
  CalibrationProfile p;
  p.rank_speeds =
      four_ranks({2000.0, 1980.0, 2500.0, 2000.0}, {1680.0, 1680.0, 2000.0, 1700.0}, {});
  const ProfileFit fit = fit_profile(p, "sustained");
  ASSERT_TRUE(fit.rank_speeds->sustained.has_value());
  const SustainedFraction& f = *fit.rank_speeds->sustained;
  EXPECT_NEAR(f.rank0, 0.84, 1e-12);
  EXPECT_NEAR(f.median, (0.84 + 1680.0 / 1980.0) / 2.0, 1e-12);
  EXPECT_NEAR(f.lowest, 0.8, 1e-12);
  EXPECT_EQ(f.lowest_rank, 2);
  EXPECT_NEAR(f.highest, 0.85, 1e-12);
  ASSERT_TRUE(fit.curves->sustained_gemm_fraction().has_value());
  EXPECT_NEAR(*fit.curves->sustained_gemm_fraction(), 0.84, 1e-12);
  // A short time a fifth longer than the held one: the two were swapped.
  p.rank_speeds->ranks[1].gemm_short = Seconds(1.2 * 1980.0 * kUs);
  try {
    (void)fit_profile(p, "swapped");
    ADD_FAILURE() << "a held GEMM faster than its short timing was fitted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/rank_speeds/ranks/1/gemm_short_us: rank 1 ran the held "
                                         "GEMM at 1.2 of its short rate; expected 0.25 to 1.1"),
              std::string::npos)
        << e.what();
  }
  // A rank without the short time that rank 0 has (a measurement built by hand, not read).
  p.rank_speeds->ranks[1].gemm_short.reset();
  try {
    (void)fit_profile(p, "one missing");
    ADD_FAILURE() << "a rank without a short time was fitted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/rank_speeds/ranks/1/gemm_short_us: missing, where rank "
                                         "0 has one"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fsdpsim::calibrate
