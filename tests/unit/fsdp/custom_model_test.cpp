// A custom model (models/custom_layer_spec.hpp) written to match the hand-checked tiny workload
// (tiny_model.hpp): the same parameters, saved bytes and kernel times, with the forward's two
// kernels (40 + 60 us) as one 100 us memory-bound kernel. Its FSDP1 step must then take the
// 2820 us worked out on paper in schedule_test.cpp and peak at the same memory.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/workload.hpp"
#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

models::CustomLayerSpec unit(std::string name, std::int64_t params, std::int64_t saved,
                             bool fsdp_unit) {
  models::CustomLayerSpec l;
  l.name = std::move(name);
  l.params = params;
  l.parameter_tensors = 1;
  // 100 MB of memory traffic = 100 us on the tiny GPU; backward moves twice as much (200 us).
  l.memory_bytes_per_sample = 100'000'000;
  l.saved_activation_bytes_per_sample = saved;
  l.kernels = 1;
  l.fsdp_unit = fsdp_unit;
  return l;
}

models::TransformerSpec tiny_custom() {
  models::TransformerSpec s;
  s.name = "tiny-custom";
  s.family = models::ModelFamily::kCustom;
  models::CustomLayerSpec blocks = unit("blocks", 10'000'000, 10'000'000, true);
  blocks.count = 2;
  s.custom_layers = {unit("embedding", 6'000'000, 1'000'000, false), blocks,
                     unit("head", 4'000'000, 20'000'000, false)};
  return s;
}

StepResult simulate(const models::Workload& workload) {
  ScheduleInput in;
  in.workload = &workload;
  in.cluster = testing::tiny_cluster();
  in.fsdp.backward_prefetch = BackwardPrefetch::kBackwardPre;
  in.fsdp.param_dtype = Dtype::kFp32;
  in.fsdp.reduce_dtype = Dtype::kFp32;
  in.training.global_batch = 2;
  in.training.micro_batch = 1;
  in.training.seq_len = 1;
  return simulate_step(in, {}).result;
}

TEST(CustomModel, StepMatchesTheHandCheckedTinyWorkload) {
  models::WorkloadOptions options;
  options.micro_batch = 1;
  options.seq_len = 1;
  options.compute_dtype = Dtype::kFp32;
  const models::Workload custom = models::build_workload(tiny_custom(), options);
  const StepResult r = simulate(custom);
  EXPECT_EQ(to_sim_time(r.step_time), to_sim_time(microseconds(2820.0)));  // schedule_test.cpp
  const StepResult tiny = simulate(testing::tiny_workload());
  EXPECT_EQ(r.step_time.value(), tiny.step_time.value());
  EXPECT_EQ(r.memory.peak_active.value(), tiny.memory.peak_active.value());
  EXPECT_EQ(r.tokens_per_step_per_gpu, 1);
}

// Every layer in a child unit leaves the root without layers; its hooks must still run first
// and last (FSDP1 and FSDP2): the root's pre-forward makes the all-gather streams wait for the
// previous step's optimizer, which updates the shards they read.
TEST(CustomModel, RootHooksRunWhenTheRootHasNoLayers) {
  models::TransformerSpec spec = tiny_custom();
  for (models::CustomLayerSpec& l : spec.custom_layers) l.fsdp_unit = true;
  models::WorkloadOptions options;
  options.seq_len = 1;
  const models::Workload workload = models::build_workload(spec, options);
  for (const std::int32_t version : {1, 2}) {
    ScheduleInput in;
    in.workload = &workload;
    in.cluster = testing::tiny_cluster();
    in.fsdp.version = version;
    in.training.global_batch = 2;
    in.training.seq_len = 1;
    SimulationOptions two_steps;  // the allocator's warm-up step precedes the measured one
    memory::AllocatorConfig allocator;
    allocator.capacity = in.cluster.gpu.usable_memory();
    two_steps.allocator = allocator;
    const SimulationOutput out = simulate_step(in, two_steps);
    const engine::Program& p = out.schedule.program;
    SimTime warmup_optimizer_end{};
    SimTime first_collective_start = out.timeline.makespan;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const bool measured = i >= out.schedule.measured_first_op;
      if (!measured && p.ops[i].phase == static_cast<std::uint8_t>(Phase::kOptimizer)) {
        warmup_optimizer_end = std::max(warmup_optimizer_end, out.timeline.ops[i].end);
      }
      if (measured && p.ops[i].kind == engine::OpKind::kCommunication) {
        first_collective_start = std::min(first_collective_start, out.timeline.ops[i].start);
      }
    }
    EXPECT_GE(first_collective_start, warmup_optimizer_end) << "FSDP" << version;
  }
}

}  // namespace
}  // namespace fsdpsim::fsdp
