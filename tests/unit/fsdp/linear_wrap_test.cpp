// FSDP1 with ModuleWrapPolicy({Block, nn.Linear}) (fsdp.wrap_policy block_and_linear) on the tiny
// model with linears of tiny_model.hpp: units in post-forward order blocks.0.up, blocks.0.down,
// blocks.0 (its 1000-element norm), blocks.1.up, blocks.1.down, blocks.1, root (embedding and
// head). FULL_SHARD over the two GPUs, BACKWARD_PRE, fp32.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "measured_ops.hpp"
#include "sim/fsdp/fsdp_units.hpp"
#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

ScheduleInput linear_wrapped(const models::Workload& w) {
  ScheduleInput in = testing::tiny_input();
  in.workload = &w;
  in.fsdp.wrap_policy = WrapPolicy::kBlockAndLinear;
  return in;
}

// Each linear is a unit of its weight (and bias); its block's unit keeps the rest. The order is
// the one FSDP records post-forward: a block's linears return before the block.
TEST(LinearWrap, EachLinearIsAUnitBeforeItsBlock) {
  const models::Workload w = testing::tiny_linear_workload();
  const std::vector<FsdpUnit> units = make_units(w, WrapPolicy::kBlockAndLinear, 1, 2);
  std::vector<std::string> names;
  for (const FsdpUnit& u : units) names.push_back(u.name);
  EXPECT_EQ(names, (std::vector<std::string>{"blocks.0.up", "blocks.0.down", "blocks.0",
                                             "blocks.1.up", "blocks.1.down", "blocks.1", "root"}));
  EXPECT_EQ(units[0].numel, 500'000);
  EXPECT_EQ(units[0].parameter_tensors, 1);
  EXPECT_EQ(units[0].linear_module, "up");
  EXPECT_EQ(units[2].numel, 1'000);
  EXPECT_EQ(units[2].parameter_tensors, 1);
  EXPECT_TRUE(units[2].linear_module.empty());
  EXPECT_EQ(units[6].numel, 600'000);  // the head's linear stays in the root
  // The layer belongs whole to its block's unit; the linears' units hold part of it.
  EXPECT_EQ(unit_of_layer(units, w.layers.size()), (std::vector<std::size_t>{6, 2, 5, 6}));
}

// Forward: the root, then each block's norm unit, then each linear just before its GEMM.
// Backward (BACKWARD_PRE): each unit's pre-backward prefetches the unit before it in post-forward
// order, so every gather is issued one unit ahead: the root's fetches blocks.1, blocks.1's its
// "down", "down"'s its "up", "up"'s blocks.0, ... The root stays gathered (FULL_SHARD keeps it).
TEST(LinearWrap, EachLinearIsGatheredJustAheadOfItsGemm) {
  const models::Workload w = testing::tiny_linear_workload();
  const SimulationOutput out = simulate_step(linear_wrapped(w), {});
  EXPECT_EQ(
      testing::all_gathers(out),
      (std::vector<std::string>{"root", "blocks.0", "blocks.0.up", "blocks.0.down", "blocks.1",
                                "blocks.1.up", "blocks.1.down", "blocks.1", "blocks.1.down",
                                "blocks.1.up", "blocks.0", "blocks.0.down", "blocks.0.up"}));
  EXPECT_EQ(testing::count_ops_ending_in(out, ".reduce_scatter"),
            (std::map<std::string, int>{{"blocks.0", 1},
                                        {"blocks.0.down", 1},
                                        {"blocks.0.up", 1},
                                        {"blocks.1", 1},
                                        {"blocks.1.down", 1},
                                        {"blocks.1.up", 1},
                                        {"root", 1}}));
}

// A checkpointed block's recompute runs its linears' full forward hooks (_pre_forward skips only
// handles already in BACKWARD_PRE, and a linear's pre-backward hook has not fired yet): "up" is
// gathered for the recompute and freed after it, then gathered again (prefetched) for its
// backward. "down" was prefetched by its block's pre-backward hook, used by the recompute, freed
// by its post-forward and gathered again by its own pre-backward: three gathers each per step.
TEST(LinearWrap, CheckpointedBlocksGatherEachLinearThreeTimes) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = linear_wrapped(w);
  in.training.activation_checkpointing = ActivationCheckpointing::kFull;
  EXPECT_EQ(testing::gather_counts(simulate_step(in, {})),
            (std::map<std::string, int>{{"root", 1},
                                        {"blocks.0", 2},
                                        {"blocks.0.up", 3},
                                        {"blocks.0.down", 3},
                                        {"blocks.1", 2},
                                        {"blocks.1.up", 3},
                                        {"blocks.1.down", 3}}));
}

// Smaller units hold less unsharded. Both peaks include the fp32 shards (2,602,000 / 2 elements
// x 4 B = 5,204,000 B) and the root, which FULL_SHARD keeps gathered (600,000 x 4 B). On top of
// that, per-block wrapping peaks with three 4,004,000 B blocks gathered (the running one, the
// prefetched one, one whose free waits for its event); per-linear wrapping with two 2,000,000 B
// linears and both blocks' 4,000 B norms.
TEST(LinearWrap, UnshardedParametersPeakBelowPerBlockWrapping) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput per_block = linear_wrapped(w);
  per_block.fsdp.wrap_policy = WrapPolicy::kPerBlock;
  const auto parameters = [](const SimulationOutput& out) {
    return out.result.memory
        .peak_active_by_category[static_cast<std::size_t>(memory::MemoryCategory::kParameters)]
        .value();
  };
  EXPECT_EQ(parameters(simulate_step(linear_wrapped(w), {})),
            5'204'000 + 2'400'000 + 2 * 2'000'000 + 2 * 4'000);
  EXPECT_EQ(parameters(simulate_step(per_block, {})), 5'204'000 + 2'400'000 + 3 * 4'004'000);
}

// FSDP2's schedule has no hooks inside a layer: it refuses the policy rather than leave the
// linears' units never gathered.
TEST(LinearWrap, Fsdp2RefusesThePolicy) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = linear_wrapped(w);
  in.fsdp.version = 2;
  EXPECT_THROW(simulate_step(in, {}), std::invalid_argument);
}

}  // namespace
}  // namespace fsdpsim::fsdp
