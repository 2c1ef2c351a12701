// FSDP1 with ModuleWrapPolicy({Block, nn.Linear}) (fsdp.wrap_policy block_and_linear) on the tiny
// model with linears of tiny_model.hpp: units in post-forward order blocks.0.up, blocks.0.down,
// blocks.0 (its 1000-element norm), blocks.1.up, blocks.1.down, blocks.1, head.proj (the LM
// head's linear), root (the embedding). FULL_SHARD over the two GPUs, BACKWARD_PRE, fp32.
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
  const std::vector<FsdpUnit> units = make_units(w, linear_wrapped(w).fsdp, 2);
  std::vector<std::string> names;
  for (const FsdpUnit& u : units) names.push_back(u.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"blocks.0.up", "blocks.0.down", "blocks.0", "blocks.1.up",
                                      "blocks.1.down", "blocks.1", "head.proj", "root"}));
  EXPECT_EQ(units[0].numel, 500'000);
  EXPECT_EQ(units[0].parameter_tensors, 1);
  EXPECT_EQ(units[0].linear_module, "up");
  EXPECT_EQ(units[2].numel, 1'000);
  EXPECT_EQ(units[2].parameter_tensors, 1);
  EXPECT_TRUE(units[2].linear_module.empty());
  EXPECT_EQ(units[2].nested_linear_numel, 1'000'000);
  EXPECT_EQ(units[6].numel, 200'000);  // the LM head's nn.Linear is wrapped too
  EXPECT_EQ(units[6].linear_module, "proj");
  EXPECT_EQ(units[7].numel, 400'000);  // the root keeps the embedding
  EXPECT_EQ(units[7].nested_linear_numel, 200'000);
  EXPECT_TRUE(wraps_whole_layers(units[7], w));
  // The layer belongs whole to its block's unit; the linears' units hold part of it.
  EXPECT_EQ(unit_of_layer(units, w.layers.size()), (std::vector<std::size_t>{7, 2, 5, 7}));
}

// Forward: the root, then each block's norm unit, then each linear just before its GEMM, the
// head's last. Backward (BACKWARD_PRE): each unit's pre-backward prefetches the unit before it in
// post-forward order, so every gather is issued one unit ahead: the root's fetches the head's
// linear (freed after its forward, as a non-root FULL_SHARD unit), the head's blocks.1,
// blocks.1's its "down", "down"'s its "up", "up"'s blocks.0, ... The root stays gathered
// (FULL_SHARD keeps it).
TEST(LinearWrap, EachLinearIsGatheredJustAheadOfItsGemm) {
  const models::Workload w = testing::tiny_linear_workload();
  const SimulationOutput out = simulate_step(linear_wrapped(w), {});
  EXPECT_EQ(testing::all_gathers(out),
            (std::vector<std::string>{"root", "blocks.0", "blocks.0.up", "blocks.0.down",
                                      "blocks.1", "blocks.1.up", "blocks.1.down", "head.proj",
                                      "head.proj", "blocks.1", "blocks.1.down", "blocks.1.up",
                                      "blocks.0", "blocks.0.down", "blocks.0.up"}));
  EXPECT_EQ(testing::count_ops_ending_in(out, ".reduce_scatter"),
            (std::map<std::string, int>{{"blocks.0", 1},
                                        {"blocks.0.down", 1},
                                        {"blocks.0.up", 1},
                                        {"blocks.1", 1},
                                        {"blocks.1.down", 1},
                                        {"blocks.1.up", 1},
                                        {"head.proj", 1},
                                        {"root", 1}}));
}

// A checkpointed block's recompute runs its linears' full forward hooks (_pre_forward skips only
// handles already in BACKWARD_PRE, and a linear's pre-backward hook has not fired yet): "up" is
// gathered for the recompute and freed after it, then gathered again (prefetched) for its
// backward. "down" was prefetched by its block's pre-backward hook, used by the recompute, freed
// by its post-forward and gathered again by its own pre-backward: three gathers each per step.
// The head's linear is not checkpointed: gathered for its forward and again for its backward.
TEST(LinearWrap, CheckpointedBlocksGatherEachLinearThreeTimes) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = linear_wrapped(w);
  in.training.activation_checkpointing = ActivationCheckpointing::kFull;
  EXPECT_EQ(testing::gather_counts(simulate_step(in, {})),
            (std::map<std::string, int>{{"root", 1},
                                        {"head.proj", 2},
                                        {"blocks.0", 2},
                                        {"blocks.0.up", 3},
                                        {"blocks.0.down", 3},
                                        {"blocks.1", 2},
                                        {"blocks.1.up", 3},
                                        {"blocks.1.down", 3}}));
}

// Smaller units hold less unsharded. Both peaks include the fp32 shards (2,602,000 / 2 elements
// x 4 B = 5,204,000 B) and the root, which FULL_SHARD keeps gathered: the embedding and head
// (600,000 x 4 B) per block, the embedding alone (400,000 x 4 B) per linear. On top of that,
// per-block wrapping peaks with three 4,004,000 B blocks gathered (the running one, the
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
            5'204'000 + 1'600'000 + 2 * 2'000'000 + 2 * 4'000);
  EXPECT_EQ(parameters(simulate_step(per_block, {})), 5'204'000 + 2'400'000 + 3 * 4'004'000);
}

// A head tied to the embedding's table keeps its linear in the root: a unit of its own would take
// the table the root's lookup reads (the tiny model with the head's weight counted in the
// embedding, which then holds 600,000 elements, and a head of 0 parameters of its own).
TEST(LinearWrap, ATiedHeadsLinearStaysInTheRoot) {
  models::Workload w = testing::tiny_linear_workload();
  w.layers.front().numel = 600'000;
  w.layers.back().numel = 0;
  w.layers.back().parameter_tensors = 0;
  const std::vector<FsdpUnit> units = make_units(w, linear_wrapped(w).fsdp, 2);
  ASSERT_EQ(units.size(), 7u);
  EXPECT_EQ(units.back().name, "root");
  EXPECT_EQ(units.back().numel, 600'000);
  EXPECT_EQ(units.back().nested_linear_numel, 0);
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
