// hardware.stragglers on the tiny model of tiny_model.hpp (knobs_test.cpp: the FULL_SHARD /
// BACKWARD_PRE step with fused AdamW takes 2140 us; forward 100 us and backward 200 us per
// layer, 4 layers; no NCCL SMs taken, so waiting collectives slow nothing else).
#include <gtest/gtest.h>

#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

SimTime us(double v) { return to_sim_time(microseconds(v)); }

ScheduleInput input(std::vector<hardware::Straggler> stragglers) {
  ScheduleInput in = testing::tiny_input();
  in.training.optimizer_impl = OptimizerImpl::kFused;
  in.cluster.stragglers = std::move(stragglers);
  return in;
}

// One simulated copy of the step per class: 1,025 ranks of distinct speeds on 1,040 GPUs make
// 1,026 classes, refused before any is simulated; 1,023 make 1,024, simulated.
TEST(Stragglers, MoreClassesThanTheLimitAreRefused) {
  const auto slow_ranks = [](std::int32_t n) {
    std::vector<hardware::Straggler> out;
    for (std::int32_t r = 0; r < n; ++r) out.push_back({r, 0.5 + 0.4 * r / n, 1.0});
    return out;
  };
  ScheduleInput in = input(slow_ranks(1025));
  in.cluster.gpus_per_node = 8;
  in.cluster.nodes = 130;
  in.training.global_batch = 1040;
  EXPECT_THROW(simulate_step(in, {}), RankClassesError);
  in.cluster.stragglers = slow_ranks(1023);
  EXPECT_EQ(simulate_step(in, {}).result.rank_classes.size(), kMaxRankClasses);
}

// ... and so are classes that would each replay a long step: 1,024 classes of 1,024 micro-batches
// of the tiny model are more class-ops than kMaxRankClassOps, 1,024 classes of one micro-batch
// are not (the test above).
TEST(Stragglers, ClassesTimesOpsPastTheBudgetAreRefused) {
  std::vector<hardware::Straggler> slow;
  for (std::int32_t r = 0; r < 1023; ++r) slow.push_back({r, 0.5 + 0.4 * r / 1023, 1.0});
  ScheduleInput in = input(slow);
  in.cluster.gpus_per_node = 8;
  in.cluster.nodes = 130;
  in.training.global_batch = 1040 * 1024;
  try {
    (void)simulate_step(in, {});
    ADD_FAILURE() << "expected RankClassesError";
  } catch (const RankClassesError& e) {
    EXPECT_NE(std::string(e.what()).find("class-ops are simulated"), std::string::npos) << e.what();
  }
}

TEST(Stragglers, RanksListedAtFullSpeedChangeNothing) {
  const StepResult uniform = simulate_step(input({}), {}).result;
  const StepResult listed = simulate_step(input({{1, 1.0, 1.0}}), {}).result;
  EXPECT_EQ(to_sim_time(uniform.step_time), us(2140));
  EXPECT_EQ(listed.step_time.value(), uniform.step_time.value());
  ASSERT_EQ(listed.rank_classes.size(), 1U);
  EXPECT_EQ(listed.rank_classes[0].ranks, 2);
  EXPECT_EQ(listed.memory.peak_allocated.value(), uniform.memory.peak_allocated.value());
}

// Rank 1's layer kernels take twice as long: 4 x 100 us more forward and 4 x 200 us more
// backward. Every collective waits for it and the fast rank idles in those waits, so the step
// grows by exactly the slow rank's 1200 us: 3340 us. The slow rank's two pre-divides share the
// SMs with its backward kernels (80 us each on its compute stream), as in the uniform step; the
// fast rank's second one queues on its post-backward stream behind a reduce-scatter that waits
// for the slow rank, and runs after its backward, alone: the fast compute stream is busy 80 us
// less than in the uniform step, 1280 us less than the slow one.
TEST(Stragglers, OneSlowRankSetsTheStep) {
  const StepResult r = simulate_step(input({{1, 0.5, 1.0}}), {}).result;
  EXPECT_EQ(to_sim_time(r.step_time), us(3340));
  ASSERT_EQ(r.rank_classes.size(), 2U);
  const RankClassResult& fast = r.rank_classes[0];
  const RankClassResult& slow = r.rank_classes[1];
  EXPECT_EQ(fast.first_rank, 0);
  EXPECT_EQ(slow.first_rank, 1);
  EXPECT_EQ(slow.compute_speed, 0.5);
  // The slow rank's compute stream is busy 1280 us longer; the fast one waits that long.
  EXPECT_NEAR(slow.breakdown.compute_busy().value() - fast.breakdown.compute_busy().value(),
              1280e-6, 1e-9);
  EXPECT_NEAR((fast.breakdown.exposed_communication + fast.breakdown.idle).value() -
                  (slow.breakdown.exposed_communication + slow.breakdown.idle).value(),
              1280e-6, 1e-9);
}

// A slow host (launches, Python hooks) costs nothing while the CPU runs ahead of the GPU: the
// tiny model launches for free.
TEST(Stragglers, ASlowHostIsHiddenWhenTheGpuIsTheBottleneck) {
  const StepResult r = simulate_step(input({{0, 1.0, 0.1}}), {}).result;
  EXPECT_EQ(to_sim_time(r.step_time), us(2140));
  EXPECT_EQ(r.rank_classes.size(), 2U);
}

// Hybrid sharding on 2 nodes x 2 GPUs with rank 1 slow: shard groups {0, 1} and {2, 3},
// replicate groups {0, 2} and {1, 3}, so every rank is in a class of its own; rank 2 shares no
// group with rank 1 but waits for it through rank 3 and rank 0.
TEST(Stragglers, UnderHybridShardingEveryRankWaitsThroughItsGroups) {
  ScheduleInput in = input({{1, 0.5, 1.0}});
  in.cluster.nodes = 2;
  in.cluster.nic_bandwidth_per_node = gb_per_s(400.0);
  in.training.global_batch = 4;
  in.fsdp.sharding_strategy = ShardingStrategy::kHybridShard;
  in.fsdp.shard_group_size = 2;
  const StepResult r = simulate_step(in, {}).result;
  ASSERT_EQ(r.rank_classes.size(), 4U);
  in.cluster.stragglers.clear();
  const StepResult uniform = simulate_step(in, {}).result;
  EXPECT_GT(r.step_time.value(), uniform.step_time.value() + 1000e-6);
  // The largest class is reported: all have one rank, so the first (rank 0).
  EXPECT_EQ(r.breakdown_rank, 0);
}

}  // namespace
}  // namespace fsdpsim::fsdp
