// Measured curves in front of the cost models (hardware/calibrated_curves.hpp): interpolation,
// asymptotes, lookups, and which costs the models take from them -- with round numbers that can
// be checked by hand.
#include "hardware/calibrated_curves.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>

#include "hardware/cost_model.hpp"

namespace fsdpsim::hardware {
namespace {

constexpr double kUs = 1e-6;
const Bytes kMiB(kBytesPerMiB);

CollectiveCurve three_knot_curve() {
  // 1 MiB: 100 us, 4 MiB: 200 us, 16 MiB: 600 us; below: 20 us per MiB; above: 40 GB/s.
  return CollectiveCurve(
      {{kMiB, Seconds(100 * kUs)}, {kMiB * 4, Seconds(200 * kUs)}, {kMiB * 16, Seconds(600 * kUs)}},
      20 * kUs / static_cast<double>(kBytesPerMiB), 1.0 / 40e9);
}

ClusterSpec one_node() {
  ClusterSpec c;
  c.gpu.name = "test-gpu";
  c.gpu.peak_dense[static_cast<std::size_t>(Dtype::kBf16)] = tflop_per_s(100.0);
  c.gpu.hbm = gib(80);
  c.gpu.hbm_bandwidth = gb_per_s(2000.0);
  c.gpu.sm_count = 100;
  c.gpu.gemm_efficiency = 0.8;
  c.gpu.attention_forward_efficiency = 0.5;
  c.gpu.attention_backward_efficiency = 0.5;
  c.gpu.memory_efficiency = 0.8;
  c.gpu.multi_tensor_memory_efficiency = 0.8;
  c.nodes = 2;
  c.gpus_per_node = 8;
  c.nvlink_bandwidth = gb_per_s(300.0);
  c.nic_bandwidth_per_node = gbit_per_s(1600.0);
  c.nvlink_efficiency = 0.8;
  c.nic_efficiency = 0.9;
  c.nvlink_hop_latency = microseconds(2.0);
  c.network_hop_latency = microseconds(4.0);
  c.collective_base_latency = microseconds(10.0);
  c.nccl_channels = 20;
  return c;
}

Kernel gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  Kernel g;
  g.kind = KernelKind::kGemm;
  g.dtype = Dtype::kBf16;
  g.gemm = GemmShape{m, n, k, 1};
  g.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  g.bytes = Bytes(2 * (m * k + k * n + m * n));
  return g;
}

TEST(CalibratedCurves, CurveIsExactAtItsKnots) {
  const CollectiveCurve c = three_knot_curve();
  EXPECT_DOUBLE_EQ(c.time(kMiB).value(), 100 * kUs);
  EXPECT_DOUBLE_EQ(c.time(kMiB * 4).value(), 200 * kUs);
  EXPECT_DOUBLE_EQ(c.time(kMiB * 16).value(), 600 * kUs);
}

TEST(CalibratedCurves, CurveInterpolatesLogTimeInLogSize) {
  const CollectiveCurve c = three_knot_curve();
  // 2 MiB is the geometric middle of 1 and 4 MiB: sqrt(100 * 200) us.
  EXPECT_NEAR(c.time(kMiB * 2).value(), std::sqrt(100.0 * 200.0) * kUs, 1e-12);
  // 8 MiB: sqrt(200 * 600) us.
  EXPECT_NEAR(c.time(kMiB * 8).value(), std::sqrt(200.0 * 600.0) * kUs, 1e-12);
}

TEST(CalibratedCurves, CurveIsMonotoneAndBoundedBetweenKnots) {
  const CollectiveCurve c = three_knot_curve();
  double previous = 0.0;
  for (std::int64_t b = kBytesPerMiB; b <= 16 * kBytesPerMiB; b += kBytesPerMiB / 8) {
    const double t = c.time(Bytes(b)).value();
    EXPECT_GE(t, previous) << b;
    EXPECT_GE(t, 100 * kUs);
    EXPECT_LE(t, 600 * kUs);
    previous = t;
  }
}

TEST(CalibratedCurves, BelowTheMeasuredRangeTheLatencyAsymptoteHolds) {
  const CollectiveCurve c = three_knot_curve();
  EXPECT_NEAR(c.latency().value(), 80 * kUs, 1e-12);       // 100 us - 1 MiB * 20 us/MiB
  EXPECT_NEAR(c.time(kMiB / 2).value(), 90 * kUs, 1e-12);  // on the alpha-beta line
  EXPECT_NEAR(c.time(Bytes(1)).value(), 80 * kUs, 1e-10);  // -> alpha
}

TEST(CalibratedCurves, AboveTheMeasuredRangeTheBandwidthAsymptoteHolds) {
  const CollectiveCurve c = three_knot_curve();
  EXPECT_DOUBLE_EQ(c.asymptotic_algbw().value(), 40e9);
  EXPECT_NEAR(c.time(kMiB * 32).value(), 600 * kUs + static_cast<double>(16 * kBytesPerMiB) / 40e9,
              1e-12);
  const Bytes huge = gib(1024);
  EXPECT_NEAR(static_cast<double>(huge.value()) / c.time(huge).value(), 40e9, 40e9 * 1e-3);
}

TEST(CalibratedCurves, InvalidCurvesAreRejected) {
  const auto knots = [](double t0, double t1) {
    return std::vector<CurveKnot>{{kMiB, Seconds(t0 * kUs)}, {kMiB * 2, Seconds(t1 * kUs)}};
  };
  EXPECT_THROW(CollectiveCurve({{kMiB, Seconds(kUs)}}, 0.0, 1e-9), std::invalid_argument);
  EXPECT_THROW(CollectiveCurve(knots(200, 100), 0.0, 1e-9),
               std::invalid_argument);  // time decreases
  EXPECT_THROW(CollectiveCurve(knots(100, 200), 1.0, 1e-9),
               std::invalid_argument);  // negative latency
  EXPECT_THROW(CollectiveCurve(knots(100, 200), 0.0, 0.0), std::invalid_argument);  // no bandwidth
  EXPECT_THROW(CollectiveCurve({{kMiB * 2, Seconds(kUs)}, {kMiB, Seconds(2 * kUs)}}, 0.0, 1e-9),
               std::invalid_argument);  // sizes out of order
}

TEST(CalibratedCurves, CollectiveTimeUsesTheCurveOfItsGroupAndCountsIt) {
  ClusterSpec c = one_node();
  const ClusterSpec fallback = c;
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_collective(CollectiveCurveKey{Collective::kAllGather, Dtype::kFp32, 8, 8},
                         three_knot_curve());
  c.gpu.calibration = curves;

  EXPECT_DOUBLE_EQ(collective_time(c, Collective::kAllGather, CommGroup{8, 8}, kMiB * 4).value(),
                   200 * kUs);
  // Another group shape, or another collective: the ring model, exactly as without a profile.
  EXPECT_EQ(collective_time(c, Collective::kAllGather, CommGroup{16, 8}, kMiB * 4),
            collective_time(fallback, Collective::kAllGather, CommGroup{16, 8}, kMiB * 4));
  EXPECT_EQ(collective_time(c, Collective::kReduceScatter, CommGroup{8, 8}, kMiB),
            collective_time(fallback, Collective::kReduceScatter, CommGroup{8, 8}, kMiB));
  // Nothing to price: not counted.
  EXPECT_EQ(collective_time(c, Collective::kAllGather, CommGroup{1, 1}, kMiB).value(), 0.0);
  EXPECT_EQ(collective_time(c, Collective::kAllGather, CommGroup{8, 8}, Bytes(0)).value(), 0.0);

  const CalibrationCounts n = curves->usage().counts();
  EXPECT_EQ(n.collectives_calibrated, 1);
  EXPECT_EQ(n.collectives_fallback, 2);
  EXPECT_EQ(n.gemms_calibrated + n.gemms_fallback, 0);
}

// The NICs' share of a measured collective across nodes comes from the same curve, and the
// question is not counted again: the usage counts each collective once.
TEST(CalibratedCurves, TheNetworkShareOfAMeasuredCollectiveIsNotCountedAgain) {
  ClusterSpec c = one_node();
  c.nodes = 4;
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_collective(CollectiveCurveKey{Collective::kAllGather, Dtype::kBf16, 32, 8},
                         three_knot_curve());
  c.gpu.calibration = curves;
  const CommGroup world{32, 8};
  EXPECT_DOUBLE_EQ(collective_time(c, Collective::kAllGather, world, kMiB * 4).value(), 200 * kUs);
  const Seconds network = collective_network_time(c, Collective::kAllGather, world, kMiB * 4);
  EXPECT_GT(network.value(), 0.0);
  EXPECT_LT(network.value(), 200 * kUs);
  const CalibrationCounts n = curves->usage().counts();
  EXPECT_EQ(n.collectives_calibrated, 1);
  EXPECT_EQ(n.collectives_fallback, 0);
}

// A sweep that stops in the latency regime (its largest time under twice its smallest) knows no
// bandwidth: above its largest size the ring model prices the collective, below it the curve.
TEST(CalibratedCurves, ALatencyBoundSweepIsNotExtrapolatedUpward) {
  ClusterSpec c = one_node();
  const ClusterSpec fallback = c;
  const CollectiveCurve flat({{Bytes(1024), Seconds(20 * kUs)}, {Bytes(65536), Seconds(21 * kUs)}},
                             0.0, 1e-12);
  EXPECT_FALSE(flat.reaches_bandwidth_regime());
  EXPECT_TRUE(three_knot_curve().reaches_bandwidth_regime());
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_collective(CollectiveCurveKey{Collective::kAllGather, Dtype::kBf16, 8, 8}, flat);
  c.gpu.calibration = curves;
  EXPECT_DOUBLE_EQ(
      collective_time(c, Collective::kAllGather, CommGroup{8, 8}, Bytes(65536)).value(), 21 * kUs);
  EXPECT_EQ(collective_time(c, Collective::kAllGather, CommGroup{8, 8}, gib(4)),
            collective_time(fallback, Collective::kAllGather, CommGroup{8, 8}, gib(4)));
  const CalibrationCounts n = curves->usage().counts();
  EXPECT_EQ(n.collectives_calibrated, 1);
  EXPECT_EQ(n.collectives_fallback, 1);
}

// A sweep that starts in the bandwidth regime (nccl-tests -b 64M: its times grow in proportion
// to size) knows no latency: below its smallest size the ring model prices the collective (its
// latency line once priced a 4-byte all-reduce at 41 ps), from it up the curve.
TEST(CalibratedCurves, ABandwidthBoundSweepIsNotExtrapolatedDownward) {
  ClusterSpec c = one_node();
  const ClusterSpec fallback = c;
  const double mib64 = static_cast<double>(mib(64).value());
  const CollectiveCurve steep({{mib(64), Seconds(681 * kUs)},
                               {mib(128), Seconds(1340 * kUs)},
                               {mib(256), Seconds(2720 * kUs)}},
                              681 * kUs / mib64, 2720 * kUs / (4 * mib64));
  EXPECT_FALSE(steep.reaches_latency_regime());
  EXPECT_TRUE(three_knot_curve().reaches_latency_regime());
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_collective(CollectiveCurveKey{Collective::kAllReduce, Dtype::kBf16, 8, 8}, steep);
  c.gpu.calibration = curves;
  EXPECT_DOUBLE_EQ(collective_time(c, Collective::kAllReduce, CommGroup{8, 8}, mib(128)).value(),
                   1340 * kUs);
  EXPECT_EQ(collective_time(c, Collective::kAllReduce, CommGroup{8, 8}, Bytes(4)),
            collective_time(fallback, Collective::kAllReduce, CommGroup{8, 8}, Bytes(4)));
  const CalibrationCounts n = curves->usage().counts();
  EXPECT_EQ(n.collectives_calibrated, 1);
  EXPECT_EQ(n.collectives_fallback, 1);
}

TEST(CalibratedCurves, CollectiveLookupPrefersBf16ThenFp16ThenFp32) {
  CalibratedCurves curves("test");
  const CollectiveCurve slow({{kMiB, Seconds(kUs * 10)}, {kMiB * 2, Seconds(kUs * 20)}}, 0.0, 1e-9);
  curves.add_collective(CollectiveCurveKey{Collective::kAllReduce, Dtype::kFp32, 8, 8},
                        three_knot_curve());
  EXPECT_DOUBLE_EQ(
      curves.find_collective(Collective::kAllReduce, CommGroup{8, 8})->time(kMiB).value(),
      100 * kUs);
  curves.add_collective(CollectiveCurveKey{Collective::kAllReduce, Dtype::kBf16, 8, 8}, slow);
  EXPECT_DOUBLE_EQ(
      curves.find_collective(Collective::kAllReduce, CommGroup{8, 8})->time(kMiB).value(),
      10 * kUs);
  EXPECT_EQ(curves.find_collective(Collective::kAllReduce, CommGroup{8, 4}), nullptr);
}

TEST(CalibratedCurves, MeasuredGemmReplacesTheRooflineForItsShape) {
  ClusterSpec c = one_node();
  const Kernel k = gemm(4096, 4096, 4096);
  const Seconds roofline = kernel_time(c.gpu, k);
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_gemm(GemmKey{Dtype::kBf16, 4096, 4096, 4096, 1},
                   GemmMeasurement{Seconds(2e-3), std::nullopt});
  c.gpu.calibration = curves;
  EXPECT_DOUBLE_EQ(kernel_time(c.gpu, k).value(), 2e-3);
  // Another dtype of the same shape is not measured: the roofline.
  Kernel fp16 = k;
  fp16.dtype = Dtype::kFp16;
  c.gpu.peak_dense[static_cast<std::size_t>(Dtype::kFp16)] = tflop_per_s(100.0);
  EXPECT_EQ(kernel_time(c.gpu, fp16), roofline);
  const CalibrationCounts n = curves->usage().counts();
  EXPECT_EQ(n.gemms_calibrated, 1);
  EXPECT_EQ(n.gemms_fallback, 1);
}

TEST(CalibratedCurves, NearbyGemmShapesScaleTheMeasurementByTheModel) {
  ClusterSpec c = one_node();
  const GpuSpec model = c.gpu;
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_gemm(GemmKey{Dtype::kBf16, 4096, 4096, 4096, 1},
                   GemmMeasurement{Seconds(2e-3), std::nullopt});
  c.gpu.calibration = curves;
  // Within 2x in every dimension: measured time x model(8192 x 4096 x 4096) / model(4096^3).
  const Kernel near = gemm(8192, 4096, 4096);
  const double expected =
      2e-3 * kernel_time(model, near).value() / kernel_time(model, gemm(4096, 4096, 4096)).value();
  EXPECT_NEAR(kernel_time(c.gpu, near).value(), expected, expected * 1e-12);
  // Beyond 2x in one dimension: the roofline, counted as fallback.
  const Kernel far = gemm(16384, 4096, 4096);
  EXPECT_EQ(kernel_time(c.gpu, far), kernel_time(model, far));
  EXPECT_EQ(curves->usage().counts().gemms_fallback, 1);
}

TEST(CalibratedCurves, GemmsSharingSmsWithNcclUseTheMeasuredSlowdown) {
  ClusterSpec c = one_node();
  const GpuSpec model = c.gpu;
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_gemm(GemmKey{Dtype::kBf16, 4096, 4096, 4096, 1},
                   GemmMeasurement{Seconds(2e-3), Seconds(2.5e-3)});
  curves->add_gemm(GemmKey{Dtype::kBf16, 1024, 1024, 1024, 1},
                   GemmMeasurement{Seconds(1e-4), std::nullopt});
  c.gpu.calibration = curves;
  // Measured under NCCL: that time.
  EXPECT_DOUBLE_EQ(kernel_time_sharing_sms(c.gpu, gemm(4096, 4096, 4096), 20).value(), 2.5e-3);
  // Measured alone only: the model's slowdown applied to the measurement.
  const Kernel small = gemm(1024, 1024, 1024);
  const double ratio =
      kernel_time_sharing_sms(model, small, 20).value() / kernel_time(model, small).value();
  EXPECT_NEAR(kernel_time_sharing_sms(c.gpu, small, 20).value(), 1e-4 * ratio, 1e-15);
  // With a median slowdown in the profile, that factor instead.
  curves->set_gemm_slowdown_under_nccl(1.25);
  EXPECT_NEAR(kernel_time_sharing_sms(c.gpu, small, 20).value(), 1.25e-4, 1e-15);
  // No SMs taken: the calibrated time alone. Sharing queries are never counted (kernel_time was).
  EXPECT_DOUBLE_EQ(kernel_time_sharing_sms(c.gpu, gemm(4096, 4096, 4096), 0).value(), 2e-3);
  EXPECT_EQ(curves->usage().counts().gemms_calibrated + curves->usage().counts().gemms_fallback, 0);
}

TEST(CalibratedCurves, RecordingKeepsEveryDistinctQuery) {
  ClusterSpec c = one_node();
  auto curves = std::make_shared<CalibratedCurves>("test");
  curves->add_collective(CollectiveCurveKey{Collective::kAllGather, Dtype::kBf16, 8, 8},
                         three_knot_curve());
  c.gpu.calibration = curves;
  curves->usage().set_recording(true);
  for (int i = 0; i < 3; ++i)
    (void)collective_time(c, Collective::kAllGather, CommGroup{8, 8}, kMiB);
  (void)collective_time(c, Collective::kAllGather, CommGroup{16, 8}, kMiB);
  (void)kernel_time(c.gpu, gemm(512, 512, 512));
  const auto collectives = curves->usage().collective_queries();
  ASSERT_EQ(collectives.size(), 2U);
  const QueryStats& covered = collectives.at(CollectiveQuery{Collective::kAllGather, 8, 8, kMiB});
  EXPECT_EQ(covered.count, 3);
  EXPECT_TRUE(covered.calibrated);
  EXPECT_FALSE(collectives.at(CollectiveQuery{Collective::kAllGather, 16, 8, kMiB}).calibrated);
  EXPECT_EQ(curves->usage().gemm_queries().size(), 1U);
}

}  // namespace
}  // namespace fsdpsim::hardware
