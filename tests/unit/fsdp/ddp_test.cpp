// DDP (sim/fsdp/ddp_schedule.cpp) on the tiny model with linears of tiny_model.hpp, on its ideal
// two-GPU node (1 byte = 1 ps; an all-reduce of B bytes takes B ps at world 2), fp32 unless a
// test says otherwise, one micro-batch, fused AdamW (28 B per element):
//   embedding  a 400k-element table: lookup 10 us, backward 20 us (no GEMM: never cast)
//   blocks.0/1 a 1000-element norm, "up" and "down" of 500k elements each: forward norm 10, up
//              40, down 40 us; backward down_dgrad, down_wgrad, up_dgrad, up_wgrad 20 us each,
//              norm_bwd 10 us
//   head       "proj", 200k elements: forward 10 us, backward proj_dgrad 20 us
// Gradients become ready in this order: head.proj (after proj_dgrad), blocks.1.down (after
// down_wgrad), blocks.1.up (after up_wgrad), the rest of blocks.1 (the norm, at its end), the
// same for blocks.0, then the embedding. Each is copied into its bucket at 8 B per element.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "measured_ops.hpp"
#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

SimTime us(double v) { return to_sim_time(microseconds(v)); }

ScheduleInput input(const models::Workload& w) {
  ScheduleInput in = testing::tiny_input();
  in.workload = &w;
  in.training.parallelism = Parallelism::kDdp;
  in.training.optimizer_impl = OptimizerImpl::kFused;
  return in;
}

std::pair<SimTime, SimTime> span(const std::vector<testing::Op>& ops, const std::string& name) {
  const testing::Op& op = testing::op_named(ops, name);
  return {op.timing.start, op.timing.end};
}

// Rebuilt buckets in gradient-ready order, the first closed at 1 MiB: [head.proj 0.8 MB,
// blocks.1.down 2 MB] and everything else (7.608 MB, under 25 MiB). The first bucket's
// all-reduce starts as soon as blocks.1.down's gradient is in it, half-way through blocks.1's
// backward. Copies under 2.5 MB take the 2.5 us kernel floor (hardware/roofline.hpp).
// Forward 0-200; head proj_dgrad 200-220, its copy 220-222.5; blocks.1 down_dgrad, down_wgrad
// 222.5-262.5, copy 262.5-266.5, bucket 0's all-reduce (2.8 MB) 266.5-269.3 beside up_dgrad,
// up_wgrad 266.5-306.5, copy -310.5, norm_bwd -320.5, the norm's copy -323; blocks.0 the same
// 100.5 us later, to 423.5; embedding backward -443.5, copy (3.2 MB) -446.7, bucket 1's
// all-reduce (7.608 MB) -454.308; finalize_backward copies bucket 0 back 446.7-452.3 and bucket
// 1 454.308-469.524; AdamW over 2.602M elements, 72.856 us: 542.38.
TEST(Ddp, BucketsFillParameterByParameterInGradientReadyOrder) {
  const models::Workload w = testing::tiny_linear_workload();
  const SimulationOutput out = simulate_step(input(w), {});
  const auto ops = testing::measured_ops(out);
  EXPECT_EQ(testing::ops_ending_in(out, ".all_reduce"),
            (std::vector<std::string>{"bucket.0", "bucket.1"}));
  EXPECT_EQ(testing::ops_ending_in(out, ".copy_to_bucket"),
            (std::vector<std::string>{"head.proj", "blocks.1.down", "blocks.1.up", "blocks.1",
                                      "blocks.0.down", "blocks.0.up", "blocks.0", "embedding"}));
  EXPECT_EQ(span(ops, "blocks.1.down.copy_to_bucket"), std::make_pair(us(262.5), us(266.5)));
  EXPECT_EQ(span(ops, "bucket.0.all_reduce"), std::make_pair(us(266.5), us(269.3)));
  EXPECT_EQ(span(ops, "blocks.1.bwd.up_dgrad").first, us(266.5));
  EXPECT_EQ(span(ops, "bucket.1.all_reduce"), std::make_pair(us(446.7), us(454.308)));
  EXPECT_EQ(span(ops, "bucket.0.copy_to_grads"), std::make_pair(us(446.7), us(452.3)));
  EXPECT_EQ(span(ops, "bucket.1.copy_to_grads"), std::make_pair(us(454.308), us(469.524)));
  EXPECT_EQ(out.timeline.makespan, us(542.38));
}

// bucket_cap_mb 1: every bucket closes at 1 MiB, [head.proj, blocks.1.down], [blocks.1.up],
// [blocks.1's norm, blocks.0.down], [blocks.0.up], [blocks.0's norm, embedding].
TEST(Ddp, BucketCapSplitsTheGradientsIntoMoreAllReduces) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.ddp_bucket_cap_mb = 1.0;
  const SimulationOutput out = simulate_step(in, {});
  EXPECT_EQ(testing::ops_ending_in(out, ".all_reduce"),
            (std::vector<std::string>{"bucket.0", "bucket.1", "bucket.2", "bucket.3", "bucket.4"}));
  // blocks.1.up's bucket is reduced as soon as its gradient is in: 306.5 + 4 us copy.
  const auto ops = testing::measured_ops(out);
  EXPECT_EQ(span(ops, "bucket.1.all_reduce"), std::make_pair(us(310.5), us(312.5)));
}

// bucket_cap_mb given, even PyTorch's 25, caps the first bucket too (bucket_bytes_cap_default
// is false): all 10.4 MB of gradients fit one bucket, reduced after the embedding's.
TEST(Ddp, AnExplicitBucketCapAppliesToTheFirstBucket) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.ddp_bucket_cap_mb = 25.0;
  const SimulationOutput out = simulate_step(in, {});
  EXPECT_EQ(testing::ops_ending_in(out, ".all_reduce"), (std::vector<std::string>{"bucket.0"}));
  const auto ops = testing::measured_ops(out);
  EXPECT_GE(span(ops, "bucket.0.all_reduce").first, span(ops, "embedding.copy_to_bucket").second);
}

// gradient_as_bucket_view: each gradient is copied into its bucket as before, then .grad is the
// bucket's view and the copy goes: nothing is copied back, so AdamW starts when bucket 1's
// all-reduce ends (454.308 + 72.856 us), and the step holds no gradients beside the buckets
// when the optimizer runs. A second micro-batch of the step (no no_sync)
// adds its gradients into the views (12 B per element), which the Reducer divides in place.
TEST(Ddp, GradientsAsBucketViewsAreNotCopiedBack) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  const SimulationOutput copied = simulate_step(in, {});
  in.fsdp.ddp_gradient_as_bucket_view = true;
  const SimulationOutput views = simulate_step(in, {});
  EXPECT_TRUE(testing::ops_ending_in(views, ".copy_to_grads").empty());
  EXPECT_EQ(views.timeline.makespan, us(527.164));
  // The copied step peaks at the optimizer with every gradient; the views step in backward, with
  // one gradient in flight (a linear's 500k x 4 B before its copy) beside 2 MB of activations.
  const auto gradients = [](const SimulationOutput& o) {
    return o.result.memory
        .peak_active_by_category[static_cast<std::size_t>(memory::MemoryCategory::kGradients)]
        .value();
  };
  EXPECT_EQ(gradients(copied), 2'602'000 * 4);
  EXPECT_EQ(gradients(views), 500'000 * 4);
  EXPECT_EQ(
      copied.result.memory.peak_allocated.value() - views.result.memory.peak_allocated.value(),
      2'602'000 * 4 - 500'000 * 4 - 2'000'000);
  in.training.global_batch = 4;
  const SimulationOutput two = simulate_step(in, {});
  EXPECT_EQ(testing::count_ops_ending_in(two, ".copy_to_bucket").size(), 8u);
  EXPECT_EQ(testing::count_ops_ending_in(two, ".copy_to_bucket").at("embedding"), 1);
  EXPECT_EQ(testing::count_ops_ending_in(two, ".divide_in_bucket").at("embedding"), 1);
  EXPECT_EQ(testing::count_ops_ending_in(two, ".accumulate_grad").at("embedding"), 1);
}

// bf16 autocast, two micro-batches under no_sync: each forward casts the linears' weights its
// layer reads (blocks.0: 1M elements x (4 + 2) B, 6 us; head.proj), not the norms or the
// embedding table; each linear's gradient comes back through ToCopyBackward0 (2 + 4 B per
// element) right after its gradient kernels; AccumulateGrad keeps the first micro-batch's and
// adds the second's (12 B per element).
TEST(Ddp, AutocastCastsTheLinearsAndAccumulatesGradients) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.param_dtype = Dtype::kBf16;
  in.training.global_batch = 4;
  in.training.no_sync = true;
  const SimulationOutput out = simulate_step(in, {});
  EXPECT_EQ(testing::count_ops_ending_in(out, ".autocast_cast"),
            (std::map<std::string, int>{{"blocks.0", 2}, {"blocks.1", 2}, {"head", 2}}));
  EXPECT_EQ(testing::count_ops_ending_in(out, ".grad_to_fp32"),
            (std::map<std::string, int>{{"blocks.0.down", 2},
                                        {"blocks.0.up", 2},
                                        {"blocks.1.down", 2},
                                        {"blocks.1.up", 2},
                                        {"head.proj", 2}}));
  EXPECT_EQ(testing::count_ops_ending_in(out, ".accumulate_grad").size(), 8u);  // every piece
  const auto ops = testing::measured_ops(out);
  const auto duration = [&](const std::string& name) {
    const auto [start, end] = span(ops, name);
    return end - start;
  };
  EXPECT_EQ(duration("blocks.0.autocast_cast"), us(6));
  EXPECT_EQ(duration("blocks.0.up.grad_to_fp32"), us(3));
  EXPECT_EQ(duration("blocks.0.up.accumulate_grad"), us(6));
  EXPECT_EQ(span(ops, "blocks.0.up.grad_to_fp32").first, span(ops, "blocks.0.bwd.up_wgrad").second);
}

// A head whose linear reads the embedding's table (tied, 1000 x 1000): autocast casts the table
// where the head's linear runs (1M elements x (4 + 2) B, 6 us) and not the head's own norm; the
// head's share of the table's gradient comes back through the cast right after the linear's
// gradient kernels and is held (4 MB) until the embedding's backward has added its own, when
// AccumulateGrad takes it as .grad.
// A head of a 2,000-parameter norm and an lm_head linear whose weight is the embedding's
// 1000 x 1000 table.
models::Layer tied_head() {
  models::Layer head;
  head.name = "head";
  head.kind = models::LayerKind::kHead;
  head.numel = 2'000;  // the norm; the linear's weight is the embedding's
  head.parameter_tensors = 1;
  head.forward = {{"norm", testing::tiny_kernel(10, 0.0)},
                  testing::tiny_linear("lm_head", 1000, 1000, 10)};
  head.forward[1].kernel.kind = KernelKind::kGemm;  // GEMM-class work, but a linear's
  head.backward = {testing::tiny_linear_grad("lm_head", models::LinearPass::kInputGrad),
                   testing::tiny_linear_grad("lm_head", models::LinearPass::kWeightGrad),
                   {"norm_bwd", testing::tiny_kernel(10, 0.0)}};
  return head;
}

TEST(Ddp, ATiedTableIsCastWhereTheHeadReadsIt) {
  models::Workload w;
  w.layers = {testing::tiny_embedding(1'000'000), tied_head()};
  w.total_numel = 1'002'000;
  ScheduleInput in = input(w);
  in.fsdp.param_dtype = Dtype::kBf16;
  const SimulationOutput out = simulate_step(in, {});
  EXPECT_EQ(testing::count_ops_ending_in(out, ".autocast_cast"),
            (std::map<std::string, int>{{"head", 1}}));
  EXPECT_EQ(testing::count_ops_ending_in(out, ".grad_to_fp32"),
            (std::map<std::string, int>{{"embedding.tied", 1}}));
  const auto ops = testing::measured_ops(out);
  const auto [start, end] = span(ops, "head.autocast_cast");
  EXPECT_EQ(end - start, us(6));
  EXPECT_EQ(span(ops, "embedding.tied.grad_to_fp32").first,
            span(ops, "head.bwd.lm_head_wgrad").second);
  EXPECT_GE(span(ops, "embedding.tied.copy_to_bucket").first,
            span(ops, "embedding.bwd.lookup_bwd").second);
  const engine::Program& p = out.schedule.program;
  for (const engine::TensorInfo& t : p.tensors) {
    const std::string_view name = p.names[t.name];
    EXPECT_NE(name, "embedding.tied.grad") << "the head's share becomes .grad, no new tensor";
    if (name == "embedding.tied.head_grad") {
      EXPECT_EQ(t.size.value(), 4'000'000);
    }
  }
}

// T5's decoder looks up the encoder's table and holds no parameters of its own: the table is one
// gradient, reduced once, and nothing casts or frees a copy for the decoder's lookup.
TEST(Ddp, ASecondLookupOfTheTiedTableHoldsNoGradientOfItsOwn) {
  models::Workload w;
  models::Layer decoder_lookup = testing::tiny_embedding(0);
  decoder_lookup.name = "decoder.embedding";
  decoder_lookup.parameter_tensors = 0;
  w.layers = {testing::tiny_embedding(1'000'000), decoder_lookup, tied_head()};
  w.total_numel = 1'002'000;
  ScheduleInput in = input(w);
  in.fsdp.param_dtype = Dtype::kBf16;
  const SimulationOutput out = simulate_step(in, {});
  EXPECT_EQ(testing::count_ops_ending_in(out, ".copy_to_bucket"),
            (std::map<std::string, int>{{"embedding.tied", 1}, {"head", 1}}));
  EXPECT_EQ(testing::count_ops_ending_in(out, ".grad_to_fp32"),
            (std::map<std::string, int>{{"embedding.tied", 1}}));
}

// Under full checkpointing a block's forward runs without saving its casts: they stay in
// autocast's cache until the forward ends, and the recompute casts again, keeping those copies
// until each linear's gradient is in.
TEST(Ddp, CheckpointedBlocksCastAgainInTheirRecompute) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.param_dtype = Dtype::kBf16;
  in.training.activation_checkpointing = ActivationCheckpointing::kFull;
  const SimulationOutput out = simulate_step(in, {});
  EXPECT_EQ(testing::count_ops_ending_in(out, ".autocast_cast"),
            (std::map<std::string, int>{{"blocks.0", 2}, {"blocks.1", 2}, {"head", 1}}));
  const engine::Program& p = out.schedule.program;
  std::vector<std::size_t> frees;
  std::size_t head_backward = 0;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {  // one step: all of it is measured
    const engine::CpuStep& s = p.cpu[i];
    if (s.kind == engine::CpuStepKind::kFree &&
        p.names[p.tensors[s.target].name] == "blocks.0.up.autocast_weights")
      frees.push_back(i);
    if (s.kind == engine::CpuStepKind::kLaunch &&
        p.names[p.ops[s.target].name] == "head.bwd.proj_dgrad")
      head_backward = i;
  }
  ASSERT_EQ(frees.size(), 2u);
  EXPECT_LT(frees[0], head_backward);  // the forward's copy: gone when the forward ends
  EXPECT_GT(frees[1], head_backward);  // the recompute's: kept until up's gradient
}

// blocks.0, blocks.1 and the head each hold one fp32 buffer of `numel` elements.
models::Workload workload_with_buffers(std::int64_t numel) {
  models::Workload w = testing::tiny_linear_workload();
  for (models::Layer& l : w.layers) {
    if (l.name != "embedding") l.buffers = {numel};
  }
  return w;
}

// 75M elements (300 MB): each buffer fills a 250 MiB bucket of its own, broadcast in place (no
// flatten, no copy back), 300 MB at 1 TB/s = 300 us each, two in flight on the NCCL stream:
// broadcast 0 0-300, broadcast 1 300-600; the third bucket first finishes the oldest (the compute
// stream waits for 300), then broadcast 2 600-900. The forward starts once the compute stream has
// waited for the last: the step is 900 us longer than without buffers.
TEST(Ddp, BuffersAreBroadcastInBucketsBeforeTheForward) {
  const models::Workload w = workload_with_buffers(75'000'000);
  const SimulationOutput out = simulate_step(input(w), {});
  const auto ops = testing::measured_ops(out);
  EXPECT_EQ(testing::ops_ending_in(out, ".broadcast"),
            (std::vector<std::string>{"buffers.0", "buffers.1", "buffers.2"}));
  EXPECT_TRUE(testing::ops_ending_in(out, ".flatten").empty());
  EXPECT_TRUE(testing::ops_ending_in(out, ".copy_back").empty());
  EXPECT_EQ(span(ops, "buffers.0.broadcast"), std::make_pair(us(0), us(300)));
  EXPECT_EQ(span(ops, "buffers.1.broadcast"), std::make_pair(us(300), us(600)));
  EXPECT_EQ(span(ops, "buffers.2.broadcast"), std::make_pair(us(600), us(900)));
  EXPECT_EQ(span(ops, "embedding.fwd.lookup").first, us(900));
  const models::Workload plain = testing::tiny_linear_workload();
  const SimulationOutput without = simulate_step(input(plain), {});
  EXPECT_EQ(out.timeline.makespan, without.timeline.makespan + us(900));
  // Replicated on every rank, in the modules' fp32.
  const auto params = [](const SimulationOutput& o) {
    return o.schedule.baseline[static_cast<std::size_t>(memory::MemoryCategory::kParameters)];
  };
  EXPECT_EQ(params(out) - params(without), Bytes(900'000'000));
}

// 25M elements (100 MB): the three buffers share one bucket (it reaches 250 MiB with the third),
// flattened on the compute stream (2 x 300 MB: 0-600), broadcast 600-900, then copied back one
// by one (200 us each: 900-1100, -1300, -1500); the forward starts at 1500.
TEST(Ddp, BuffersSharingABucketAreFlattenedAndCopiedBack) {
  const models::Workload w = workload_with_buffers(25'000'000);
  const SimulationOutput out = simulate_step(input(w), {});
  const auto ops = testing::measured_ops(out);
  EXPECT_EQ(span(ops, "buffers.0.flatten"), std::make_pair(us(0), us(600)));
  EXPECT_EQ(span(ops, "buffers.0.broadcast"), std::make_pair(us(600), us(900)));
  EXPECT_EQ(testing::count_ops_ending_in(out, ".copy_back"),
            (std::map<std::string, int>{{"buffers.0", 3}}));
  EXPECT_EQ(span(ops, "embedding.fwd.lookup").first, us(1500));
}

// require_forward_param_sync: under no_sync only the first forward of a step follows a synced
// one; without it every forward does; broadcast_buffers false broadcasts nothing.
TEST(Ddp, OnlyForwardsAfterASyncedOneBroadcastBuffers) {
  const models::Workload w = workload_with_buffers(75'000'000);
  const auto broadcasts = [&](bool no_sync, bool broadcast) {
    ScheduleInput in = input(w);
    in.training.global_batch = 6;  // three micro-batches
    in.training.no_sync = no_sync;
    in.fsdp.ddp_broadcast_buffers = broadcast;
    return testing::count_ops_ending_in(simulate_step(in, {}), ".broadcast");
  };
  EXPECT_EQ(broadcasts(true, true),
            (std::map<std::string, int>{{"buffers.0", 1}, {"buffers.1", 1}, {"buffers.2", 1}}));
  EXPECT_EQ(broadcasts(false, true),
            (std::map<std::string, int>{{"buffers.0", 3}, {"buffers.1", 3}, {"buffers.2", 3}}));
  EXPECT_TRUE(broadcasts(false, false).empty());
}

}  // namespace
}  // namespace fsdpsim::fsdp
