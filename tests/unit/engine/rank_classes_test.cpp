// Rank classes: the coarsest partition of the world's ranks whose members behave alike
// (same speed, same mix of classes in each of their communicator groups).
#include "sim/engine/rank_classes.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace fsdpsim::engine {
namespace {

std::vector<RankSpeed> world_with_slow(std::int32_t world, std::vector<std::int32_t> slow) {
  std::vector<RankSpeed> speed(static_cast<std::size_t>(world));
  for (const std::int32_t r : slow) speed[static_cast<std::size_t>(r)].compute = 0.5;
  return speed;
}

TEST(RankClasses, EqualRanksAreOneClass) {
  const RankClasses c = rank_classes(world_with_slow(8, {}), {RankGroups{}});
  ASSERT_EQ(c.count(), 1U);
  EXPECT_EQ(c.size[0], 8);
  EXPECT_EQ(c.representative[0], 0);
  EXPECT_EQ(c.peers[0][0], (std::vector<std::int32_t>{0}));
}

TEST(RankClasses, OneSlowRankOnAWorldCommunicatorIsTwoClasses) {
  const RankClasses c = rank_classes(world_with_slow(8, {3}), {RankGroups{}});
  ASSERT_EQ(c.count(), 2U);
  EXPECT_EQ(c.representative, (std::vector<std::int32_t>{0, 3}));
  EXPECT_EQ(c.size, (std::vector<std::int32_t>{7, 1}));
  EXPECT_EQ(c.speed[1].compute, 0.5);
  EXPECT_EQ(c.class_of_rank[3], 1);
  EXPECT_EQ(c.peers[0][0], (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(c.peers[0][1], (std::vector<std::int32_t>{0, 1}));
}

TEST(RankClasses, OneSlowRankUnderHybridShardingIsFourClasses) {
  // 2 nodes of 8: shard groups are the nodes, replicate groups pair rank i with rank i + 8.
  const std::vector<RankGroups> channels = {RankGroups{8, 1}, RankGroups{2, 8}};
  const RankClasses c = rank_classes(world_with_slow(16, {3}), channels);
  ASSERT_EQ(c.count(), 4U);
  // The slow rank, its node, its replica on the other node, the rest of the other node.
  EXPECT_EQ(c.representative, (std::vector<std::int32_t>{0, 3, 8, 11}));
  EXPECT_EQ(c.size, (std::vector<std::int32_t>{7, 1, 7, 1}));
  EXPECT_EQ(c.peers[0][0], (std::vector<std::int32_t>{0, 1}));  // node 0's shard group
  EXPECT_EQ(c.peers[0][2], (std::vector<std::int32_t>{2, 3}));  // node 1's shard group
  EXPECT_EQ(c.peers[1][1], (std::vector<std::int32_t>{1, 3}));  // rank 3 with rank 11
  EXPECT_EQ(c.peers[1][0], (std::vector<std::int32_t>{0, 2}));  // rank 0 with rank 8
}

TEST(RankClasses, SymmetricStragglersShareAClass) {
  // One slow rank at the same place in each node: the nodes are alike again.
  const std::vector<RankGroups> channels = {RankGroups{4, 1}, RankGroups{2, 4}};
  const RankClasses c = rank_classes(world_with_slow(8, {1, 5}), channels);
  ASSERT_EQ(c.count(), 2U);
  EXPECT_EQ(c.size, (std::vector<std::int32_t>{6, 2}));
}

TEST(RankClasses, GroupsThatDoNotTileTheWorldAreRejected) {
  EXPECT_THROW(rank_classes(world_with_slow(8, {}), {RankGroups{3, 1}}), std::invalid_argument);
  EXPECT_THROW(rank_classes(world_with_slow(8, {}), {RankGroups{2, 8}}), std::invalid_argument);
  EXPECT_THROW(rank_classes({}, {RankGroups{}}), std::invalid_argument);
}

}  // namespace
}  // namespace fsdpsim::engine
