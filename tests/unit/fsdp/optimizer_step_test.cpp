// AdamW's three GPU implementations on the tiny model of tiny_model.hpp (world 2, fp32): three
// units of 10M parameters, so the optimizer steps three 5M-element fp32 shards (20 MB each,
// 60 MB in all); one byte of memory traffic takes 1 ps and launching costs nothing.
// torch/optim/adamw.py: fused=True -> _fused_adamw (7 fp32 passes: 140 us per shard),
// foreach -> _multi_tensor_adamw and foreach=False -> _single_tensor_adamw (the same 8 kernels,
// 21 passes: 420 us per shard). Memory at the optimizer step as in schedule_test.cpp's
// PeakMemoryFollowsCpuIssueAndRecordStream: 520 MB active when the first temporary is allocated,
// the step's peak with either temporary. The foreach and fused kernels are multi_tensor_apply
// launches (their own efficiency; 1 here, like memory_efficiency).
#include <gtest/gtest.h>

#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

SimulationOutput simulate(OptimizerImpl impl, double multi_tensor_efficiency = 1.0) {
  ScheduleInput in = testing::tiny_input();
  in.cluster.gpu.multi_tensor_memory_efficiency = multi_tensor_efficiency;
  in.training.optimizer_impl = impl;
  return simulate_step(in, {});
}

// Sizes of the program's tensors whose name ends with `suffix`, in allocation order.
std::vector<std::int64_t> tensor_sizes(const SimulationOutput& out, const std::string& suffix) {
  std::vector<std::int64_t> sizes;
  const engine::Program& p = out.schedule.program;
  for (const engine::TensorInfo& t : p.tensors) {
    const std::string_view name = p.names[t.name];
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      sizes.push_back(t.size.value());
  }
  return sizes;
}

// Names of the optimizer's ops, in issue order.
std::vector<std::string> optimizer_ops(const SimulationOutput& out) {
  std::vector<std::string> names;
  const engine::Program& p = out.schedule.program;
  for (const engine::Op& op : p.ops) {
    const std::string_view name = p.names[op.name];
    if (name.find(".adamw") != std::string::npos) names.emplace_back(name);
  }
  return names;
}

TEST(OptimizerStep, FusedAdamwIsOneKernelPerShardWithoutTemporaries) {
  const SimulationOutput out = simulate(OptimizerImpl::kFused);
  EXPECT_DOUBLE_EQ(out.result.breakdown.optimizer.value(), 420e-6);
  EXPECT_EQ(optimizer_ops(out),
            (std::vector<std::string>{"blocks.0.adamw", "blocks.1.adamw", "root.adamw"}));
  EXPECT_TRUE(tensor_sizes(out, "sqrt").empty());
  // The optimizer adds nothing: the peak is elsewhere, below the other two implementations'.
  EXPECT_LT(out.result.memory.peak_active.value(), 560'000'000);
}

// bf16 states beside the fp32 shards (torchtitan's fused_opt_states_bf16): the fused kernel reads
// and writes each state in bf16, 3 x 4 + 4 x 2 = 20 bytes an element instead of 28 (100 us a
// shard, 300 us in all), and the states held before the step are 4 bytes a parameter: 60 MB of
// the three shards' 15M elements, against 120 MB in fp32.
TEST(OptimizerStep, FusedAdamwWithBf16StatesMovesAndHoldsHalfTheirBytes) {
  ScheduleInput in = testing::tiny_input();
  in.training.optimizer_impl = OptimizerImpl::kFused;
  const SimulationOutput fp32 = simulate_step(in, {});
  in.training.optimizer_state_dtype = Dtype::kBf16;
  const SimulationOutput bf16 = simulate_step(in, {});
  EXPECT_DOUBLE_EQ(bf16.result.breakdown.optimizer.value(), 300e-6);
  const auto state = [](const SimulationOutput& out) {
    return out.schedule.baseline[static_cast<std::size_t>(memory::MemoryCategory::kOptimizerState)]
        .value();
  };
  EXPECT_EQ(state(fp32), 120'000'000);
  EXPECT_EQ(state(bf16), 60'000'000);
}

// Each _foreach_ op covers every shard before the next op; _foreach_sqrt's outputs (60 MB) are
// allocated together after _foreach_addcmul_ and live to the end: 520 + 60 = 580 MB.
TEST(OptimizerStep, ForeachAdamwMakesTheTemporariesOfAllShardsAtOnce) {
  const SimulationOutput out = simulate(OptimizerImpl::kForeach);
  EXPECT_DOUBLE_EQ(out.result.breakdown.optimizer.value(), 1260e-6);
  const std::vector<std::string> ops = optimizer_ops(out);
  ASSERT_EQ(ops.size(), 24u);
  EXPECT_EQ(ops[2], "root.adamw.weight_decay");
  EXPECT_EQ(ops[3], "blocks.0.adamw.lerp");
  EXPECT_EQ(ops[23], "root.adamw.addcdiv");
  // One block per unit's shard (_foreach_sqrt allocates one output per tensor), all live at once.
  EXPECT_EQ(tensor_sizes(out, "exp_avg_sq_sqrt"),
            (std::vector<std::int64_t>{20'000'000, 20'000'000, 20'000'000}));
  EXPECT_EQ(out.result.memory.peak_active.value(), 580'000'000);
}

// One shard at a time: exp_avg_sq.sqrt() / bias_correction2_sqrt holds two 20 MB temporaries of
// one shard at once: 520 + 40 = 560 MB.
TEST(OptimizerStep, ForLoopAdamwHoldsTwoTemporariesOfOneShard) {
  const SimulationOutput out = simulate(OptimizerImpl::kForLoop);
  EXPECT_DOUBLE_EQ(out.result.breakdown.optimizer.value(), 1260e-6);
  const std::vector<std::string> ops = optimizer_ops(out);
  ASSERT_EQ(ops.size(), 24u);
  EXPECT_EQ(ops[0], "blocks.0.adamw.weight_decay");
  EXPECT_EQ(ops[7], "blocks.0.adamw.addcdiv");
  EXPECT_EQ(ops[8], "blocks.1.adamw.weight_decay");
  EXPECT_EQ(tensor_sizes(out, ".adamw.sqrt").size(), 3u);
  EXPECT_EQ(tensor_sizes(out, ".adamw.denom").front(), 20'000'000);
  EXPECT_EQ(out.result.memory.peak_active.value(), 560'000'000);
}

// FSDP2 keeps a tensor per parameter, and _single_tensor_adamw loops over them: with blocks.0's
// 10M parameters itemized as 4M + 6M, its shards (2M and 3M elements on world 2) each get the
// eight kernels and their own two temporaries (8 and 12 MB fp32), where FSDP1's FlatParameter
// is one 20 MB shard; so do the root's embedding (6M: 12 MB) and head (4M: 8 MB).
const models::Workload& blocks0_itemized() {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    w.layers[1].parameter_numels = {4'000'000, 6'000'000};
    for (std::size_t l : {0U, 2U, 3U}) w.layers[l].parameter_numels = {w.layers[l].numel};
    return w;
  }();
  return workload;
}

TEST(OptimizerStep, ForLoopAdamwStepsEachFsdp2ParameterOnItsOwn) {
  ScheduleInput in = testing::tiny_input();
  in.workload = &blocks0_itemized();
  in.training.optimizer_impl = OptimizerImpl::kForLoop;
  in.fsdp.version = 2;
  in.fsdp.limit_all_gathers = false;
  const SimulationOutput out = simulate_step(in, {});
  const std::vector<std::string> ops = optimizer_ops(out);
  ASSERT_EQ(ops.size(), 40u);
  EXPECT_EQ(ops[0], "blocks.0.param0.adamw.weight_decay");
  EXPECT_EQ(ops[8], "blocks.0.param1.adamw.weight_decay");
  EXPECT_EQ(ops[16], "blocks.1.adamw.weight_decay");
  EXPECT_EQ(tensor_sizes(out, ".adamw.denom"),
            (std::vector<std::int64_t>{8'000'000, 12'000'000, 20'000'000, 12'000'000, 8'000'000}));
  // The step's time is the same bytes: 21 passes over 15M fp32 elements.
  EXPECT_DOUBLE_EQ(out.result.breakdown.optimizer.value(), 1260e-6);
}

// DDP's optimizer sees each layer's parameters whole: blocks.0's 4M and 6M fp32 parameters get
// their own kernels and temporaries (16 and 24 MB), the other layers one tensor each.
TEST(OptimizerStep, ForLoopAdamwStepsEachDdpParameterOnItsOwn) {
  ScheduleInput in = testing::tiny_input();
  in.workload = &blocks0_itemized();
  in.training.optimizer_impl = OptimizerImpl::kForLoop;
  in.training.parallelism = Parallelism::kDdp;
  const SimulationOutput out = simulate_step(in, {});
  const std::vector<std::string> ops = optimizer_ops(out);
  ASSERT_EQ(ops.size(), 40u);
  EXPECT_EQ(ops[8], "blocks.0.param0.adamw.weight_decay");
  EXPECT_EQ(ops[16], "blocks.0.param1.adamw.weight_decay");
  EXPECT_EQ(
      tensor_sizes(out, ".adamw.denom"),
      (std::vector<std::int64_t>{24'000'000, 16'000'000, 24'000'000, 40'000'000, 16'000'000}));
}

// multi_tensor_apply launches (foreach, fused) run at multi_tensor_memory_efficiency; the
// for-loop's kernels are ordinary elementwise ones at memory_efficiency. At 0.5: the foreach
// and fused steps take twice as long (2520 and 840 us), the for-loop step is unchanged.
TEST(OptimizerStep, ForeachAndFusedKernelsRunAtTheMultiTensorRate) {
  EXPECT_DOUBLE_EQ(simulate(OptimizerImpl::kForeach, 0.5).result.breakdown.optimizer.value(),
                   2520e-6);
  EXPECT_DOUBLE_EQ(simulate(OptimizerImpl::kFused, 0.5).result.breakdown.optimizer.value(), 840e-6);
  EXPECT_DOUBLE_EQ(simulate(OptimizerImpl::kForLoop, 0.5).result.breakdown.optimizer.value(),
                   1260e-6);
}

}  // namespace
}  // namespace fsdpsim::fsdp
