// hardware/rank_pacing.hpp by hand: four measured nodes of two ranks. GPU speeds by node
// [1, 1], [1, 0.9], [0.96, 1], [1, 1.02]: the nodes' slowest, sorted, are 0.9, 0.96, 1, 1. Host
// speeds all 1 but rank 6's, 0.8: the nodes' slowest 0.8, 1, 1, 1.
#include "hardware/rank_pacing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>
#include <vector>

namespace fsdpsim::hardware {
namespace {

std::unique_ptr<CalibratedCurves> measured(std::vector<double> host) {
  auto c = std::make_unique<CalibratedCurves>("four nodes");
  c->set_rank_speeds({1.0, 1.0, 1.0, 0.9, 0.96, 1.0, 1.0, 1.02}, std::move(host), 2);
  return c;
}

const std::vector<double> kSlowHost6 = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 1.0};

void expect_straggler(const Straggler& s, std::int32_t rank, double compute, double host) {
  EXPECT_EQ(s.rank, rank);
  EXPECT_NEAR(s.compute_speed, compute, 1e-12);
  EXPECT_NEAR(s.host_speed, host, 1e-12);
}

// On the measured nodes, or on more (the rest taken to be like them): the slowest GPU, rank 3 at
// 0.9, and the slowest host, rank 6 at 0.8, as they are.
TEST(RankPacing, AJobOnEveryMeasuredNodeHoldsTheSlowestAsMeasured) {
  const auto curves = measured(kSlowHost6);
  const CalibratedCurves& c = *curves;
  for (const std::int32_t world : {8, 16, 64}) {
    const RankPacing p = rank_pacing(c, world);
    EXPECT_EQ(p.measured_nodes, 4);
    EXPECT_EQ(p.job_nodes, world / 2);
    EXPECT_FALSE(p.sampled);
    ASSERT_EQ(p.stragglers.size(), 2U) << world;
    expect_straggler(p.stragglers[0], 3, 0.9, 1.0);
    expect_straggler(p.stragglers[1], 6, 1.0, 0.8);
  }
}

// Two of the four nodes at random: each of the 6 pairs' slowest, averaged. The node of 0.9 is in
// 3 pairs (w = 1/2), the 0.96 node is the slowest of 2 more (w = 1/3), a 1 of the last (w = 1/6):
// 0.45 + 0.32 + 1/6 = 0.93667 for GPUs, 0.4 + 1/3 + 1/6 = 0.9 for hosts. One node at random: the
// mean of the nodes' slowest, 0.965 and 0.95. The stragglers sit on the job's first node, at
// the local rank of the slowest measured one (rank 3: local 1; rank 6: local 0).
TEST(RankPacing, AJobOnFewerNodesExpectsTheMeanSlowestOverPlacements) {
  const auto curves = measured(kSlowHost6);
  const CalibratedCurves& c = *curves;
  const RankPacing two = rank_pacing(c, 4);
  EXPECT_TRUE(two.sampled);
  EXPECT_EQ(two.job_nodes, 2);
  ASSERT_EQ(two.stragglers.size(), 2U);
  expect_straggler(two.stragglers[0], 0, 1.0, 0.9);
  expect_straggler(two.stragglers[1], 1, 0.45 + 0.32 + 1.0 / 6.0, 1.0);
  const RankPacing one = rank_pacing(c, 2);
  ASSERT_EQ(one.stragglers.size(), 2U);
  expect_straggler(one.stragglers[0], 0, 1.0, 0.95);
  expect_straggler(one.stragglers[1], 1, 0.965, 1.0);
  // A job of one rank, part of a node: one GPU of the eight at random, the mean of them all,
  // 7.88 / 8 = 0.985 for GPUs and 7.8 / 8 = 0.975 for hosts, both on its one rank.
  const RankPacing rank = rank_pacing(c, 1);
  EXPECT_TRUE(rank.sampled);
  ASSERT_EQ(rank.stragglers.size(), 1U);
  expect_straggler(rank.stragglers[0], 0, 0.985, 0.975);
}

// One node of eight measured, its last GPU at 0.9: a job on four of its GPUs holds that one in
// half of the C(8, 4) = 70 subsets, so it expects 0.5 x 0.9 + 0.5 x 1 = 0.95, at local rank 7 % 4.
TEST(RankPacing, AJobOnPartOfANodeExpectsItsShareOfTheSlowGpu) {
  CalibratedCurves c("one node");
  c.set_rank_speeds({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9}, {}, 8);
  const RankPacing half = rank_pacing(c, 4);
  EXPECT_TRUE(half.sampled);
  ASSERT_EQ(half.stragglers.size(), 1U);
  expect_straggler(half.stragglers[0], 3, 0.95, 1.0);
  const RankPacing whole = rank_pacing(c, 8);
  EXPECT_FALSE(whole.sampled);
  ASSERT_EQ(whole.stragglers.size(), 1U);
  expect_straggler(whole.stragglers[0], 7, 0.9, 1.0);
}

// Slowest GPU and host on one rank: one straggler, slow both ways. No launch times: GPUs alone.
// Nothing slower than rank 0: no straggler; no rank speeds: nothing at all.
TEST(RankPacing, OneRankSlowBothWaysIsOneStraggler) {
  const RankPacing both = rank_pacing(*measured({1.0, 1.0, 1.0, 0.8, 1.0, 1.0, 1.0, 1.0}), 8);
  ASSERT_EQ(both.stragglers.size(), 1U);
  expect_straggler(both.stragglers[0], 3, 0.9, 0.8);
  const RankPacing gpus = rank_pacing(*measured({}), 8);
  ASSERT_EQ(gpus.stragglers.size(), 1U);
  expect_straggler(gpus.stragglers[0], 3, 0.9, 1.0);
  CalibratedCurves fast("fast");
  fast.set_rank_speeds({1.0, 1.01, 1.0, 1.02}, {1.0, 1.0, 1.1, 1.0}, 1);
  EXPECT_TRUE(rank_pacing(fast, 4).stragglers.empty());
  EXPECT_TRUE(rank_pacing(CalibratedCurves("none"), 8).stragglers.empty());
  EXPECT_EQ(rank_pacing(CalibratedCurves("none"), 8).measured_nodes, 0);
}

// The expected largest of n standard normals, against Harter's tables (Biometrika 48, 1961) and
// the exact 1 / sqrt(pi) for n = 2.
TEST(RankPacing, ExpectedMaximaOfNormalsAreTheTabulatedOnes) {
  EXPECT_DOUBLE_EQ(expected_max_standard_normal(1), 0.0);
  EXPECT_NEAR(expected_max_standard_normal(2), 1.0 / std::sqrt(std::numbers::pi), 1e-6);
  EXPECT_NEAR(expected_max_standard_normal(3), 0.846284, 1e-5);
  EXPECT_NEAR(expected_max_standard_normal(4), 1.029375, 1e-5);
  EXPECT_NEAR(expected_max_standard_normal(8), 1.423600, 1e-5);
  EXPECT_NEAR(expected_max_standard_normal(16), 1.765991, 1e-5);
  EXPECT_NEAR(expected_max_standard_normal(100), 2.507594, 1e-5);
}

// Eight nodes of eight GPUs spread by 2.5 %: the slowest is expected 1.4236 standard deviations
// below the mean, at 1 - 0.025 x 1.4236 = 0.96441; the last node's eight ranks carry it. One node
// is the preset's on average: no straggler; nor without a spread.
TEST(RankPacing, ANodeSpreadSlowsTheLastNodeToTheExpectedSlowest) {
  const std::vector<Straggler> eight = node_spread_stragglers(0.025, 8, 8);
  ASSERT_EQ(eight.size(), 8U);
  for (std::size_t g = 0; g < 8; ++g) {
    EXPECT_EQ(eight[g].rank, 56 + static_cast<std::int32_t>(g));
    EXPECT_NEAR(eight[g].compute_speed, 1.0 - 0.025 * 1.423600, 1e-6);  // the table's digits
    EXPECT_DOUBLE_EQ(eight[g].host_speed, 1.0);
  }
  EXPECT_TRUE(node_spread_stragglers(0.025, 1, 8).empty());
  EXPECT_TRUE(node_spread_stragglers(0.0, 8, 8).empty());
}

}  // namespace
}  // namespace fsdpsim::hardware
