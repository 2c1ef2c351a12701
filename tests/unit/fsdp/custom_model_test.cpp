// A custom model (models/custom_layer_spec.hpp) written to match the hand-checked tiny workload
// (tiny_model.hpp): the same parameters, saved bytes and kernel times, with the forward's two
// kernels (40 + 60 us) as one 100 us memory-bound kernel. Its FSDP1 step must then take the
// 2820 us worked out on paper in schedule_test.cpp and peak at the same memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>
#include <vector>

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

// tiny_custom with every layer a unit of its own: the root holds no layer.
models::TransformerSpec every_layer_a_unit() {
  models::TransformerSpec spec = tiny_custom();
  for (models::CustomLayerSpec& l : spec.custom_layers) l.fsdp_unit = true;
  return spec;
}

models::Workload one_token_workload(const models::TransformerSpec& spec) {
  models::WorkloadOptions options;
  options.seq_len = 1;
  return models::build_workload(spec, options);
}

// One step of `workload` on the tiny cluster under FSDP `version`, one token per GPU.
ScheduleInput one_token_step(const models::Workload& workload, std::int32_t version) {
  ScheduleInput in;
  in.workload = &workload;
  in.cluster = testing::tiny_cluster();
  in.fsdp.version = version;
  in.training.global_batch = 2;
  in.training.seq_len = 1;
  return in;
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
  EXPECT_EQ(to_sim_time(r.step_time), to_sim_time(microseconds(2980.0)));  // schedule_test.cpp
  const StepResult tiny = simulate(testing::tiny_workload());
  EXPECT_EQ(r.step_time.value(), tiny.step_time.value());
  EXPECT_EQ(r.memory.peak_active.value(), tiny.memory.peak_active.value());
  EXPECT_EQ(r.tokens_per_step_per_gpu, 1);
}

// tiny_custom with the embedding a unit too: the root holds the head, the model's last layer.
models::TransformerSpec root_holds_the_head() {
  models::TransformerSpec spec = tiny_custom();
  spec.custom_layers.front().fsdp_unit = true;
  return spec;
}

// tiny_custom with the head a unit too: the root holds the embedding, the model's first layer.
models::TransformerSpec root_holds_the_embedding() {
  models::TransformerSpec spec = tiny_custom();
  spec.custom_layers.back().fsdp_unit = true;
  return spec;
}

// The root wraps the whole model, whichever layers it holds: its hooks run first and last (FSDP1
// and FSDP2), where the root has no layers and where it holds only the last one (they ran at
// the head, after the children's forward). The root's pre-forward makes the all-gather streams
// wait for the previous step's optimizer, which updates the shards they read.
TEST(CustomModel, RootHooksRunFirstAndLastWhicheverLayersTheRootHolds) {
  for (const models::TransformerSpec& spec : {every_layer_a_unit(), root_holds_the_head()}) {
    const models::Workload workload = one_token_workload(spec);
    for (const std::int32_t version : {1, 2}) {
      ScheduleInput in = one_token_step(workload, version);
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
      EXPECT_GE(first_collective_start, warmup_optimizer_end)
          << spec.custom_layers.front().fsdp_unit << " FSDP" << version;
    }
  }
}

// The root's pre-backward runs on the loss, before any unit's: where the root holds only the
// embedding it ran at the end of backward, and its prefetch (FSDP2) gathered the head, resharded
// by then, for no layer of this step to use, held into the next step's forward. Every gather of
// the step is used by a kernel of its unit after it, each child unit gathers twice (forward,
// backward) and the root once (it is not resharded after forward).
TEST(CustomModel, EveryGatherIsUsedWhereTheRootHoldsOnlyTheFirstLayer) {
  const models::Workload workload = one_token_workload(root_holds_the_embedding());
  for (const std::int32_t version : {1, 2}) {
    ScheduleInput in = one_token_step(workload, version);
    SimulationOptions warm;
    warm.warm_up = true;
    const SimulationOutput out = simulate_step(in, warm);
    const engine::Program& p = out.schedule.program;
    const std::size_t units = out.schedule.units.size();
    std::vector<int> gathers(units, 0);
    for (std::size_t i = out.schedule.measured_first_op; i < p.ops.size(); ++i) {
      const std::string_view name = p.names[p.ops[i].name];
      if (!name.ends_with(".all_gather") || p.ops[i].group < 0) continue;
      ++gathers[static_cast<std::size_t>(p.ops[i].group)];
      bool used = false;
      for (std::size_t j = i + 1; j < p.ops.size() && !used; ++j) {
        used = p.ops[j].group == p.ops[i].group && p.ops[j].kind == engine::OpKind::kCompute &&
               p.names[p.ops[j].name].find("all_gather") == std::string_view::npos;
      }
      EXPECT_TRUE(used) << name << " at op " << i << ", FSDP" << version;
    }
    for (std::size_t u = 0; u + 1 < units; ++u) EXPECT_EQ(gathers[u], 2) << "FSDP" << version;
    EXPECT_EQ(gathers[units - 1], 1) << "FSDP" << version;
  }
}

// PyTorch makes no FlatParamHandle (FSDP1) or FSDPParamGroup (FSDP2) for a module without
// parameters of its own: the root of a model made only of units, or a unit that holds none (a
// pooling stage). Their hooks run, but they gather, reduce and step nothing, and the rate
// limiter and backward prefetch pass them by. Units u0..u3 (embedding, two blocks, head; the
// param-less pool after the blocks), limit 2, BACKWARD_PRE. Cold step, queue empty: the forward
// pops at u2 and u3, the backward at u3's unshard, at its prefetch of u2 (no: one event left),
// u2's of u1 and u1's of u0: 5. The step after starts from the backward's [g2, g1, g0]: the
// forward pops 4, the backward 4 (u3, and the prefetches of u2, u1, u0): 8. In all 13.
TEST(CustomModel, UnitsWithoutParametersHaveNoHandle) {
  models::TransformerSpec spec = every_layer_a_unit();
  spec.custom_layers.insert(spec.custom_layers.begin() + 2, unit("pool", 0, 1'000'000, true));
  const models::Workload workload = one_token_workload(spec);
  for (const std::int32_t version : {1, 2}) {
    ScheduleInput in = one_token_step(workload, version);
    in.cluster.fsdp_hook_overhead = microseconds(1.0);  // hooks on the CPU's timeline
    in.fsdp.limit_all_gathers = version == 1;
    SimulationOptions warm;
    warm.warm_up = true;
    const SimulationOutput out = simulate_step(in, warm);
    const engine::Program& p = out.schedule.program;
    std::size_t collectives = 0;
    for (const engine::Op& op : p.ops) {
      const std::string_view name = p.names[op.name];
      const bool pool_kernel = name.starts_with("pool.fwd.") || name.starts_with("pool.bwd.");
      EXPECT_FALSE(name.starts_with("root.") || (name.starts_with("pool.") && !pool_kernel))
          << "FSDP" << version << ": " << name;
      if (op.kind == engine::OpKind::kCommunication) {
        EXPECT_GT(op.bytes.value(), 0) << "FSDP" << version << ": " << name;
        ++collectives;
      }
    }
    // 4 units x (forward all-gather, backward all-gather, reduce-scatter) x 2 steps.
    EXPECT_EQ(collectives, 24u) << "FSDP" << version;
    std::size_t limiter_waits = 0;
    std::size_t root_hooks = 0;
    for (const engine::CpuStep& step : p.cpu) {
      if (step.kind != engine::CpuStepKind::kWork && step.kind != engine::CpuStepKind::kWait)
        continue;
      const std::string_view name = p.names[step.name];
      limiter_waits += name == "rate_limiter";
      root_hooks += name.starts_with("root.");
    }
    EXPECT_EQ(limiter_waits, version == 1 ? 13u : 0u);
    // pre_forward, post_forward, pre_backward in each step; no post_backward hook.
    EXPECT_EQ(root_hooks, 6u) << "FSDP" << version;
  }
}

}  // namespace
}  // namespace fsdpsim::fsdp
