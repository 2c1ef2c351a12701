// The model output a training loop keeps (models::Layer::loop_kept_output), on the tiny model of
// tiny_model.hpp with a 30 MB output written by the head's "attn" kernel: it is allocated with
// the head's forward and lives until the next forward has returned its own, when the loop's
// name is rebound (Composer's state.outputs, `pred = model(x)`).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

constexpr std::int64_t kOutput = 30'000'000;

models::Workload workload(bool kept) {
  models::Workload w = testing::tiny_workload();
  if (kept) {
    w.layers.back().loop_kept_output = Bytes(kOutput);
    w.layers.back().loop_kept_output_kernel = "attn";
  }
  return w;
}

SimulationOutput simulate(const models::Workload& w, std::int64_t micro_batches) {
  ScheduleInput in;
  in.workload = &w;
  in.cluster = testing::tiny_cluster();
  in.fsdp.param_dtype = Dtype::kFp32;
  in.fsdp.reduce_dtype = Dtype::kFp32;
  in.training.global_batch = 2 * micro_batches;  // world 2, micro-batch 1
  in.training.micro_batch = 1;
  in.training.seq_len = 8;
  return simulate_step(in, {});
}

// The CPU program, one entry per step that allocates or frees the kept output or launches one
// of the head's forward kernels, in issue order.
std::vector<std::string> head_events(const SimulationOutput& out) {
  const engine::Program& p = out.schedule.program;
  std::vector<std::string> events;
  for (const engine::CpuStep& step : p.cpu) {
    if (step.kind == engine::CpuStepKind::kLaunch) {
      const std::string_view name = p.names[p.ops[step.target].name];
      if (name.starts_with("head.fwd.")) events.push_back("launch " + std::string(name));
    } else if (step.kind == engine::CpuStepKind::kAlloc ||
               step.kind == engine::CpuStepKind::kFree) {
      const std::string_view name = p.names[p.tensors[step.target].name];
      if (name == "head.output_kept_by_loop")
        events.push_back(step.kind == engine::CpuStepKind::kAlloc ? "alloc" : "free");
    }
  }
  return events;
}

// Two micro-batches: the first output is let go once the second forward has written its own,
// before the loss kernels that follow; the second outlives the step.
TEST(LoopKeptOutput, LivesUntilTheNextForwardReturnsItsOwn) {
  const std::vector<std::string> expected = {"alloc",
                                             "launch head.fwd.attn",
                                             "launch head.fwd.mlp",  // micro-batch 1
                                             "alloc",
                                             "launch head.fwd.attn",
                                             "free",
                                             "launch head.fwd.mlp"};  // micro-batch 2
  EXPECT_EQ(head_events(simulate(workload(true), 2)), expected);
}

// One micro-batch: the output is alive from the head's forward through the whole backward,
// where the step peaks (407 MB without it, knobs_test.cpp ShardGradOpSkipsBackwardAllGathers).
TEST(LoopKeptOutput, AddsItsBytesToABackwardPeak) {
  const SimulationOutput plain = simulate(workload(false), 1);
  const SimulationOutput kept = simulate(workload(true), 1);
  EXPECT_EQ(plain.result.memory.peak_allocated.value(), 407'000'000);
  EXPECT_EQ(kept.result.memory.peak_allocated.value(), 407'000'000 + kOutput);
  EXPECT_EQ(kept.timeline.makespan, plain.timeline.makespan);
}

// A kept output whose writer the head does not have is the builder's bug, not the user's.
TEST(LoopKeptOutput, UnknownWriterKernelIsALogicError) {
  models::Workload w = workload(true);
  w.layers.back().loop_kept_output_kernel = "lm_head";
  EXPECT_THROW(simulate(w, 1), std::logic_error);
}

}  // namespace
}  // namespace fsdpsim::fsdp
