// clip_grad_norm_ (training.clip_grad_norm) on the tiny model of tiny_model.hpp (world 2, fp32,
// one byte of memory traffic per ps, launches free): three units of 10M parameters, so FSDP
// clips three 5M-element fp32 gradient shards (20 MB each). Per shard the norm reads it once
// (20 us) and the scaling reads and writes it (40 us): 180 us in all. Each scalar kernel of the
// coefficient takes the shortest kernel time, kMinKernelDuration (2.5 us): FSDP1 has seven
// (stack, vector_norm, pow; pow, add, div, clamp), torch.nn.utils five (no pows).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hardware/cost_model.hpp"
#include "hardware/roofline.hpp"
#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

ScheduleInput tiny_input(bool clip) {
  ScheduleInput in = testing::tiny_input();
  in.training.optimizer_impl = OptimizerImpl::kFused;
  in.training.clip_grad_norm = clip;
  return in;
}

// Names of the program's ops that contain `part`, in issue order.
std::vector<std::string> ops_named(const SimulationOutput& out, const std::string& part) {
  std::vector<std::string> names;
  const engine::Program& p = out.schedule.program;
  for (const engine::Op& op : p.ops) {
    const std::string_view name = p.names[op.name];
    if (name.find(part) != std::string::npos) names.emplace_back(name);
  }
  return names;
}

// The optimizer's compute, and the norm's all-reduce: a collective on the compute stream, which
// the breakdown counts as (exposed) communication.
double optimizer_seconds(const ScheduleInput& in) {
  const StepBreakdown b = simulate_step(in, {}).result.breakdown;
  return b.optimizer.value() + b.exposed_communication.value();
}

// The 4-byte all-reduce of the norm over the two ranks of the node.
double norm_all_reduce_seconds(const ScheduleInput& in) {
  return hardware::collective_time(in.cluster, hardware::Collective::kAllReduce,
                                   hardware::CommGroup{2, 2}, Bytes(4))
      .value();
}

// FSDP1: per-shard norm kernels, the scalar kernels, one all-reduce over the FSDP group, then
// per-shard mul_; all before the optimizer, on the compute stream.
TEST(GradientClipping, Fsdp1NormsReducesAndScalesEveryShardBeforeTheOptimizer) {
  const ScheduleInput off = tiny_input(false);
  const ScheduleInput on = tiny_input(true);
  const double expected =
      180e-6 + 7 * hardware::kMinKernelDuration.value() + norm_all_reduce_seconds(on);
  EXPECT_NEAR(optimizer_seconds(on) - optimizer_seconds(off), expected, 1e-12);

  const SimulationOutput out = simulate_step(on, {});
  const std::vector<std::string> clip = ops_named(out, "clip_grad_norm");
  ASSERT_EQ(clip.size(), 3u + 3u + 1u + 4u + 3u);
  EXPECT_EQ(clip.front(), "blocks.0.clip_grad_norm.norm");
  EXPECT_EQ(clip[6], "clip_grad_norm.all_reduce");
  EXPECT_EQ(clip.back(), "root.clip_grad_norm.scale");
  // The optimizer step comes after the last scaling kernel.
  const std::vector<std::string> all = ops_named(out, "");
  const auto scale = std::find(all.begin(), all.end(), "root.clip_grad_norm.scale");
  const auto adamw = std::find(all.begin(), all.end(), "blocks.0.adamw");
  EXPECT_LT(scale, adamw);
}

// NO_SHARD and DDP hold whole, already all-reduced gradients: the local norm is the total.
TEST(GradientClipping, ReplicatedGradientsNeedNoAllReduce) {
  ScheduleInput no_shard = tiny_input(true);
  no_shard.fsdp.sharding_strategy = ShardingStrategy::kNoShard;
  EXPECT_TRUE(ops_named(simulate_step(no_shard, {}), "clip_grad_norm.all_reduce").empty());

  ScheduleInput ddp = tiny_input(true);
  ddp.training.parallelism = Parallelism::kDdp;
  const SimulationOutput out = simulate_step(ddp, {});
  EXPECT_TRUE(ops_named(out, "clip_grad_norm.all_reduce").empty());
  // torch.nn.utils.clip_grad_norm_: five scalar kernels around no collective.
  EXPECT_EQ(ops_named(out, "clip_grad_norm.total").size() +
                ops_named(out, "clip_grad_norm.coefficient").size(),
            5u);
}

// FSDP2's DTensor gradients: torch.nn.utils.clip_grad_norm_ with foreach, whose norm and mul_
// are multi_tensor_apply launches (at half the rate here: the 180 us become 360 us), and one
// all-reduce turns the partial norm into the total.
TEST(GradientClipping, Fsdp2UsesForeachKernelsAndOneAllReduce) {
  ScheduleInput off = tiny_input(false);
  off.fsdp.version = 2;
  off.cluster.gpu.multi_tensor_memory_efficiency = 0.5;
  ScheduleInput on = off;
  on.training.clip_grad_norm = true;
  const double expected =
      360e-6 + 5 * hardware::kMinKernelDuration.value() + norm_all_reduce_seconds(on);
  EXPECT_NEAR(optimizer_seconds(on) - optimizer_seconds(off), expected, 1e-12);
  EXPECT_EQ(ops_named(simulate_step(on, {}), "clip_grad_norm.all_reduce").size(), 1u);
}

// CPU offload: the gradients are on the host, so are the norm and the scaling; the norm goes to
// the GPU for the all-reduce and the host waits for it before scaling. The node's 200 GB/s of
// DRAM is shared by its two ranks: the norm reads 60 MB in 600 us, the scaling moves 120 MB in
// 1200 us.
TEST(GradientClipping, CpuOffloadClipsOnTheHostAroundADeviceAllReduce) {
  ScheduleInput in = tiny_input(true);
  in.fsdp.cpu_offload = true;
  const SimulationOutput out = simulate_step(in, {});
  const engine::Program& p = out.schedule.program;
  std::vector<std::pair<std::string, double>> host;  // name, duration in us (work only)
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const engine::CpuStep& s = p.cpu[i];
    if (s.kind != engine::CpuStepKind::kWork && s.kind != engine::CpuStepKind::kWait) continue;
    const std::string_view name = p.names[s.name];
    if (name.find("clip_grad_norm") == std::string::npos) continue;
    const engine::CpuStepTiming& t = out.timeline.cpu[i];
    host.emplace_back(
        name, s.kind == engine::CpuStepKind::kWork ? (t.end - t.start).microseconds() : 0.0);
  }
  using Steps = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(host, (Steps{{"clip_grad_norm.cpu_norm", 600.0},
                         {"clip_grad_norm.cpu", 0.0},
                         {"clip_grad_norm.cpu_scale", 1200.0}}));
  EXPECT_EQ(ops_named(out, "clip_grad_norm.all_reduce").size(), 1u);
  EXPECT_TRUE(ops_named(out, "clip_grad_norm.norm").empty());
}

}  // namespace
}  // namespace fsdpsim::fsdp
