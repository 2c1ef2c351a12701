// A kernel whose result the host reads (NamedKernel::host_sync: torch.nonzero, .item()) makes the
// CPU wait for the compute stream right after launching it, so work issued after it cannot run
// ahead. On the tiny model of tiny_model.hpp (no checkpointing): blocks.0's 40 us "attn" kernel
// syncs; the CPU waits once, and nothing it launches afterwards starts before "attn" ends.
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace fsdpsim::fsdp
