// The executable specification of FSDP1 FULL_SHARD on a tiny model (tiny_model.hpp), every
// number worked out on paper below. Units: 1 MB = 1e6 bytes, 1 us = 1e6 ps; one byte of
// memory traffic takes 1 ps; a collective of S bytes over 2 ranks moves S/2 per rank at 1 TB/s.
//
// Sizes (fp32 params and reduction, world 2, no padding): every unit has 10M parameters, so its
// all-gather and reduce-scatter move 40 MB -> 20 us; its gradient concat (SplitWithSizesBackward)
// reads and writes 40 MB -> 80 us; the gradient's pre-divide by 2 before the reduce-scatter
// (_div_if_needed, predivide factor 2 and postdivide 1 at world 2) reads and writes it again ->
// 80 us; the fp32 reduce-scatter output is _saved_grad_shard as it is (no kernel); AdamW
// (foreach, the default) moves 21 x 4 B x 5M = 420 MB -> 420 us per unit. Layers: forward
// 100 us (attention 40 + MLP 60), backward 200 us. Kernels on two streams at once share the SMs,
// each at half its rate (engine::OpKind): a pre-divide beside a 200 us backward takes 160 us and
// holds the backward back by its own 80.
#include <gtest/gtest.h>

#include "measured_ops.hpp"
#include "sim/engine/program.hpp"
#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

SimTime us(double v) { return to_sim_time(microseconds(v)); }

struct SimRun {
  SimulationOutput out;
  // Start and end of the op with this exact name.
  [[nodiscard]] std::pair<SimTime, SimTime> span(const std::string& name) const {
    const engine::Program& p = out.schedule.program;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      if (p.names[p.ops[i].name] == name)
        return {out.timeline.ops[i].start, out.timeline.ops[i].end};
    }
    ADD_FAILURE() << "no op named " << name;
    return {};
  }
};

SimRun simulate(BackwardPrefetch prefetch, bool limit_all_gathers = true) {
  static const models::Workload workload = testing::tiny_workload();
  ScheduleInput in;
  in.workload = &workload;
  in.cluster = testing::tiny_cluster();
  in.fsdp.backward_prefetch = prefetch;
  in.fsdp.limit_all_gathers = limit_all_gathers;
  in.fsdp.param_dtype = Dtype::kFp32;
  in.fsdp.reduce_dtype = Dtype::kFp32;
  in.training.global_batch = 2;
  in.training.micro_batch = 1;
  in.training.seq_len = 8;
  return SimRun{simulate_step(in, {})};
}

// Forward: AG(root) 0-20 is exposed; AG(b0) 20-40 and AG(b1) 40-60 hide behind the embedding
// (20-120); blocks run 120-220 and 220-320, the head 320-420.
// Backward with BACKWARD_PRE: the root's pre-backward hook prefetches b1 before the head's
// gradient kernels. The limiter (2 in flight: b0 and b1 were freed in forward) blocks the CPU
// until b0's forward ends (220), so AG(b1) runs 220-240. b1's hook prefetches b0 (240-260)
// *before* RS(b1) is issued, so both overlap compute. head bwd 420-620, b1 bwd 620-820,
// concat 820-900; b1's pre-divide on the post-backward stream and b0 bwd on the compute stream
// share the SMs from 900: the pre-divide's 80 us take 160 (to 1060, RS(b1) 1060-1080), b0 bwd
// has done 80 of its 200 by then and ends at 1180. concat 1180-1260; b0's pre-divide beside
// the embedding's bwd alike: 1260-1420 (RS(b0) 1420-1440), the embedding to 1540. Root concat
// 1540-1620, the root's pre-divide 1620-1700 (alone: the compute stream idles) and RS(root)
// 1700-1720 are exposed, then AdamW 3 x 420 = 1260: step = 2980 us.
TEST(Fsdp1FullShard, BackwardPreOverlapsEveryBackwardAllGather) {
  const SimRun r = simulate(BackwardPrefetch::kBackwardPre);
  EXPECT_EQ(r.span("root.all_gather"), std::make_pair(us(0), us(20)));
  EXPECT_EQ(r.span("blocks.0.all_gather").first, us(20));
  EXPECT_EQ(r.span("blocks.1.fwd.attn").first, us(220));
  EXPECT_EQ(r.span("blocks.1.fwd.mlp").second, us(320));
  EXPECT_EQ(r.span("head.bwd.bwd"), std::make_pair(us(420), us(620)));
  EXPECT_EQ(r.span("blocks.1.grad_predivide"), std::make_pair(us(900), us(1060)));
  EXPECT_EQ(r.span("blocks.1.reduce_scatter"), std::make_pair(us(1060), us(1080)));
  EXPECT_EQ(r.span("blocks.0.bwd.bwd"), std::make_pair(us(900), us(1180)));
  EXPECT_EQ(r.span("blocks.0.grad_predivide"), std::make_pair(us(1260), us(1420)));
  EXPECT_EQ(r.span("root.reduce_scatter"), std::make_pair(us(1700), us(1720)));
  EXPECT_EQ(r.out.timeline.makespan, us(2980));
  const StepBreakdown& b = r.out.result.breakdown;
  EXPECT_DOUBLE_EQ(b.forward.value(), 400e-6);
  // The compute stream: 200 + 200 + 80 + 280 + 80 + 280 + 80.
  EXPECT_DOUBLE_EQ(b.backward.value(), 1200e-6);
  EXPECT_DOUBLE_EQ(b.optimizer.value(), 1260e-6);
  EXPECT_DOUBLE_EQ(b.exposed_communication.value(), 40e-6);
  EXPECT_DOUBLE_EQ(b.idle.value(), 80e-6);
}

// With backward_prefetch=None, b0's all-gather is issued in b0's own pre-backward hook, after
// RS(b1) was issued on the same communicator: NCCL runs it only after b1's pre-divide and RS
// (900-1000, alone: b0 bwd waits for its all-gather), so AG(b0) 1000-1020 and all three are
// exposed. b0 bwd 1020-1220, concat 1220-1300, then as with BACKWARD_PRE from 1260, 40 us later:
// b0's pre-divide shares the SMs with the embedding's bwd (to 1580), root concat, pre-divide
// and RS end at 1760, AdamW: 3020 us.
TEST(Fsdp1FullShard, NoPrefetchSerializesAllGatherBehindReduceScatter) {
  const SimRun r = simulate(BackwardPrefetch::kNone);
  const auto gathers_after = r.span("blocks.1.reduce_scatter").second;
  EXPECT_EQ(gathers_after, us(1000));
  // The backward all-gather of b0 is the second op of that name.
  const engine::Program& p = r.out.schedule.program;
  std::vector<SimTime> starts;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.names[p.ops[i].name] == "blocks.0.all_gather")
      starts.push_back(r.out.timeline.ops[i].start);
  }
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[1], us(1000));
  EXPECT_EQ(r.out.timeline.makespan, us(3020));
}

// BACKWARD_POST prefetches b0 in b1's post-backward hook, after b1 is resharded and before
// RS(b1) is issued: here that is as good as BACKWARD_PRE. The root's post-backward, last of
// all, targets b1, whose pre-backward already ran (_needs_pre_backward_unshard is false): it
// gathers nothing, and the next forward gathers b1 as usual.
TEST(Fsdp1FullShard, BackwardPostIssuesTheNextAllGatherBeforeTheReduceScatter) {
  const SimRun r = simulate(BackwardPrefetch::kBackwardPost);
  EXPECT_EQ(r.out.timeline.makespan, us(2980));
  EXPECT_EQ(testing::all_gathers(r.out),
            (std::vector<std::string>{"root", "blocks.0", "blocks.1", "blocks.1", "blocks.0"}));
}

// Memory, counted as PyTorch's allocator counts it (MB). Before the step: fp32 shards 4 x 15M
// = 60 and AdamW states 8 x 15M = 120 -> 180. The CPU runs ahead of the GPU, so tensors are
// allocated long before their kernels run, and blocks freed with record_stream stay active
// until the GPU passes the free.
// Allocated (drops at the CPU's free): root params 40 + activations 1 + 10 + 10 + 20, forward
// frees of b0 and b1; in backward b1 (40) and b0 (40) are gathered again, per-parameter
// gradients of the head (16; the embedding's 24 come at the end of backward) and b1 (40)
// accumulate, the head's activations (20) and b1's (10) are freed, then b1's flat gradient (40)
// is allocated: 180+40+1+10+10+20 - 80 (forward frees) + 80 + 56 - 30 + 40 = 407 at the peak.
// Active at CPU time 220 us stays higher: the frees of b1's forward parameters (until 320 us),
// of the gathered b1 (until its concat ends), of every flat gradient (until its reduce-scatter
// is accumulated) are pending when the CPU allocates AdamW's sqrt temporary (4 x 15M = 60):
// 180 + root params 40 + embedding activations 1 + b1 forward params 40 + b1 and b0 gathered
// 80 + root per-parameter gradients 40 + three flat gradients 120 + three gradient shards 60
// - already released (b0 forward params at 220 us) = 520, + 60 = 580.
TEST(Fsdp1FullShard, PeakMemoryFollowsCpuIssueAndRecordStream) {
  const SimRun r = simulate(BackwardPrefetch::kBackwardPre);
  const memory::MemoryStats& m = r.out.result.memory;
  EXPECT_EQ(m.peak_allocated.value(), 407'000'000);
  EXPECT_EQ(m.peak_active.value(), 580'000'000);
  const engine::Program& p = r.out.schedule.program;
  EXPECT_EQ(p.names[p.tensors[m.peak_tensor].name], "optimizer.exp_avg_sq_sqrt");
  EXPECT_EQ(m.peak_active_time, us(220));
}

TEST(Fsdp1FullShard, RateLimiterBlocksTheCpuOnTheOldestFreeEvent) {
  // With the limiter, the CPU waits in the root's pre-backward hook for b0's forward (220 us)
  // before issuing AG(b1); without it nothing blocks and AG(b1) is issued at time 0 but still
  // runs after the forward all-gathers on the unshard stream: 60-80.
  const SimRun limited = simulate(BackwardPrefetch::kBackwardPre, true);
  const SimRun unlimited = simulate(BackwardPrefetch::kBackwardPre, false);
  const engine::Program& p = unlimited.out.schedule.program;
  std::vector<SimTime> unlimited_starts;
  std::vector<SimTime> limited_starts;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.names[p.ops[i].name] != "blocks.1.all_gather") continue;
    unlimited_starts.push_back(unlimited.out.timeline.ops[i].start);
  }
  const engine::Program& q = limited.out.schedule.program;
  for (std::size_t i = 0; i < q.ops.size(); ++i) {
    if (q.names[q.ops[i].name] == "blocks.1.all_gather")
      limited_starts.push_back(limited.out.timeline.ops[i].start);
  }
  ASSERT_EQ(unlimited_starts.size(), 2u);
  ASSERT_EQ(limited_starts.size(), 2u);
  EXPECT_EQ(unlimited_starts[1], us(60));
  EXPECT_EQ(limited_starts[1], us(220));
  // Step time is the same here: the tiny model is compute-bound either way.
  EXPECT_EQ(unlimited.out.timeline.makespan, limited.out.timeline.makespan);
}

// PyTorch shares one _FreeEventQueue across iterations, and the first backward prefetch finds it
// empty (nothing popped), so a step ends with three free events queued: b1's and b0's backward
// reshards and the root's. With depth 1, the first forward holds AG(b1) until b0's forward ends
// (its free event); in the steady state AG(b1) pops the root's long-finished event instead and
// runs while b0 computes. The commands simulate that steady state (SimulationOptions::warm_up).
TEST(Fsdp1FullShard, TheLimiterQueueCarriesOverSoTheSteadyStateRunsAhead) {
  static const models::Workload workload = testing::tiny_workload();
  ScheduleInput in;
  in.workload = &workload;
  in.cluster = testing::tiny_cluster();
  in.fsdp.max_inflight_all_gathers = 1;
  in.fsdp.param_dtype = Dtype::kFp32;
  in.fsdp.reduce_dtype = Dtype::kFp32;
  in.training.global_batch = 2;
  in.training.micro_batch = 1;
  in.training.seq_len = 8;
  SimulationOptions warm;
  warm.warm_up = true;
  for (const bool steady : {false, true}) {
    const SimulationOutput out = simulate_step(in, steady ? warm : SimulationOptions{});
    const std::vector<testing::Op> ops = testing::measured_ops(out);
    SimTime b0_forward_end;
    SimTime b1_gather_start;
    bool gathered = false;
    for (const testing::Op& op : ops) {
      if (op.name.find("blocks.0") == 0 && op.name.ends_with("mlp") && b0_forward_end == SimTime{})
        b0_forward_end = op.timing.end;
      if (op.name == "blocks.1.all_gather" && !gathered) {
        b1_gather_start = op.timing.start;
        gathered = true;
      }
    }
    ASSERT_TRUE(gathered && b0_forward_end > SimTime{});
    if (steady) {
      EXPECT_LT(b1_gather_start, b0_forward_end) << "steady state: not held back";
    } else {
      EXPECT_GE(b1_gather_start, b0_forward_end) << "first step: waits for b0's free event";
    }
  }
}

TEST(Fsdp1FullShard, ProgramIsFreeOfDeadlocksAndDeterministic) {
  const SimRun a = simulate(BackwardPrefetch::kBackwardPre);
  const SimRun b = simulate(BackwardPrefetch::kBackwardPre);
  ASSERT_EQ(a.out.timeline.ops.size(), b.out.timeline.ops.size());
  for (std::size_t i = 0; i < a.out.timeline.ops.size(); ++i) {
    EXPECT_EQ(a.out.timeline.ops[i].start, b.out.timeline.ops[i].start);
  }
}

}  // namespace
}  // namespace fsdpsim::fsdp
