// The host waiting for the GPU. A kernel whose result the host reads (NamedKernel::host_sync:
// torch.nonzero, .item()) makes the CPU wait for the compute stream right after launching it, so
// work issued after it cannot run ahead. On the tiny model of tiny_model.hpp (no checkpointing):
// blocks.0's 40 us "attn" kernel syncs; the CPU waits once, and nothing it launches afterwards
// starts before "attn" ends. The training loop's own waits (TrainingConfig::host_sync): once a
// step after the optimizer, before each micro-batch, or never.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

TEST(HostSync, TheCpuWaitsForAKernelWhoseResultItReads) {
  models::Workload w = testing::tiny_workload();
  w.layers[1].forward[0].host_sync = true;
  ScheduleInput in = testing::tiny_input();
  in.workload = &w;
  const SimulationOutput out = simulate_step(in, {});
  const engine::Program& p = out.schedule.program;
  int waits = 0;
  std::size_t wait_step = 0;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    if (p.cpu[i].kind == engine::CpuStepKind::kWait && p.names[p.cpu[i].name] == "attn") {
      ++waits;
      wait_step = i;
    }
  }
  ASSERT_EQ(waits, 1);
  SimTime attn_end;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.names[p.ops[i].name] == "blocks.0.fwd.attn") attn_end = out.timeline.ops[i].end;
  }
  EXPECT_EQ(out.timeline.cpu[wait_step].end, attn_end);
  for (std::size_t i = wait_step + 1; i < p.cpu.size(); ++i) {
    if (p.cpu[i].kind == engine::CpuStepKind::kLaunch) {
      EXPECT_GE(out.timeline.ops[p.cpu[i].target].start, attn_end);
    }
  }
}

// The CPU steps of `p` that wait, named `reason`.
std::vector<std::size_t> waits_named(const engine::Program& p, std::string_view reason) {
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    if (p.cpu[i].kind == engine::CpuStepKind::kWait && p.names[p.cpu[i].name] == reason)
      found.push_back(i);
  }
  return found;
}

// The end of the last compute-stream op issued before CPU step `cpu_step`.
SimTime last_compute_end_before(const SimulationOutput& out, std::size_t cpu_step) {
  const engine::Program& p = out.schedule.program;
  SimTime end;
  for (std::size_t i = 0; i < cpu_step; ++i) {
    if (p.cpu[i].kind != engine::CpuStepKind::kLaunch) continue;
    const engine::OpId op = p.cpu[i].target;
    if (p.ops[op].stream == kComputeStream) end = out.timeline.ops[op].end;
  }
  return end;
}

SimulationOutput two_steps(HostSync sync, std::int64_t micro_batches) {
  ScheduleInput in = testing::tiny_input();
  in.training.host_sync = sync;
  in.training.global_batch *= micro_batches;
  SimulationOptions options;
  options.warm_up = true;
  return simulate_step(in, options);
}

// host_sync step: after each step's optimizer the CPU waits for the compute stream, so the
// measured step's first op is launched only once the warm-up step's last kernel has ended.
TEST(HostSync, TheLoopWaitsForTheGpuOnceAStep) {
  const SimulationOutput out = two_steps(HostSync::kStep, 1);
  const engine::Program& p = out.schedule.program;
  const std::vector<std::size_t> waits = waits_named(p, "loss.item()");
  ASSERT_EQ(waits.size(), 2U);  // the warm-up step's and the measured step's
  EXPECT_LT(waits[0], out.schedule.measured_first_cpu_step);
  const SimTime warm_up_end = last_compute_end_before(out, waits[0]);
  EXPECT_EQ(out.timeline.cpu[waits[0]].end, warm_up_end);
  EXPECT_GE(out.timeline.cpu[out.schedule.measured_first_cpu_step].start, warm_up_end);
  for (std::size_t op = out.schedule.measured_first_op; op < p.ops.size(); ++op)
    EXPECT_GE(out.timeline.ops[op].start, warm_up_end);
  EXPECT_TRUE(waits_named(p, "input.to(device)").empty());
}

// host_sync none: nothing holds the CPU at the step's end, so it launches the measured step while
// the warm-up step's kernels still run.
TEST(HostSync, WithoutLoopWaitsTheCpuRunsIntoTheNextStep) {
  const SimulationOutput out = two_steps(HostSync::kNone, 1);
  const engine::Program& p = out.schedule.program;
  EXPECT_TRUE(waits_named(p, "loss.item()").empty());
  EXPECT_TRUE(waits_named(p, "input.to(device)").empty());
  const std::size_t first = out.schedule.measured_first_cpu_step;
  EXPECT_LT(out.timeline.cpu[first].start, last_compute_end_before(out, first));
}

// host_sync micro_batch: a wait before each micro-batch's forward (two a step here) but the
// first, which finds nothing issued to wait for; each ends when the compute stream has run
// everything issued before it.
TEST(HostSync, TheLoopWaitsBeforeEachMicroBatch) {
  const SimulationOutput out = two_steps(HostSync::kMicroBatch, 2);
  ASSERT_EQ(out.schedule.micro_batches, 2);
  const std::vector<std::size_t> waits = waits_named(out.schedule.program, "input.to(device)");
  ASSERT_EQ(waits.size(), 3U);
  for (const std::size_t w : waits)
    EXPECT_EQ(out.timeline.cpu[w].end, last_compute_end_before(out, w));
  EXPECT_TRUE(waits_named(out.schedule.program, "loss.item()").empty());
}

}  // namespace
}  // namespace fsdpsim::fsdp
