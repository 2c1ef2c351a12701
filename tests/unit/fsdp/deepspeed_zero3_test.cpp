// DeepSpeed 0.3's ZeRO-3 (sim/fsdp/deepspeed_zero3_schedule.cpp) on a tiny model with linears,
// on the idealized two-GPU node of tiny_model.hpp (1 byte = 1 ps, collectives at 1 TB/s without
// latency), fp16:
//   embedding  one 400k-element table (gathered: above the 100k persistence threshold)
//   blocks.0/1 a 1000-element norm (persistent), "up" 1000 x 500 and "down" 500 x 1000 (500k
//              elements each, gathered), kernels: norm 10 us, up 40 us, down 40 us; backward
//              down_dgrad, down_wgrad, up_dgrad, up_wgrad 20 us each, norm_bwd 10 us
//   head       "proj" 400 x 500 (200k, gathered), 10 us forward, 20 us backward
// A gathered 500k-element parameter is 1 MB of fp16: its all-gather moves (2-1)/2 MB per rank,
// 0.5 us at 1 TB/s; each rank's piece is 0.5 MB.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "hardware/calibrated_curves.hpp"
#include "measured_ops.hpp"
#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

using testing::tiny_kernel;

ScheduleInput input(const models::Workload& w) {
  ScheduleInput in = testing::tiny_input();
  in.workload = &w;
  in.training.parallelism = Parallelism::kDeepSpeedZero3;
  in.fsdp.param_dtype = Dtype::kFp16;
  in.fsdp.reduce_dtype = Dtype::kFp16;
  return in;
}

// No weight kept between uses unless nothing runs between them (a one-element reuse distance),
// and a one-element prefetch bucket: each pre-hook prefetches only the next weight of the trace.
ScheduleInput without_reuse(const models::Workload& w) {
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.max_reuse_distance = 1;
  in.fsdp.deepspeed.prefetch_bucket_size = 1;
  return in;
}

// How many times the CPU waits for `reason`.
int cpu_waits(const SimulationOutput& out, const std::string& reason) {
  int waits = 0;
  const engine::Program& p = out.schedule.program;
  for (const engine::CpuStep& s : p.cpu) {
    if (s.kind == engine::CpuStepKind::kWait && p.names[s.name] == reason) ++waits;
  }
  return waits;
}

// Forward gathers each module's weight once, in module order; the persistent norms never. With
// the default reuse distance (1e9 elements) everything gathered in forward is kept for backward,
// so backward gathers nothing; after the optimizer step the persistent norms are re-gathered.
TEST(DeepSpeedZero3, ForwardGathersEachWeightAloneAndBackwardReusesThem) {
  const models::Workload w = testing::tiny_linear_workload();
  const SimulationOutput out = simulate_step(input(w), {});
  EXPECT_EQ(testing::all_gathers(out),
            (std::vector<std::string>{"embedding.param0", "blocks.0.up.weight",
                                      "blocks.0.down.weight", "blocks.1.up.weight",
                                      "blocks.1.down.weight", "head.proj.weight", "persistent"}));
}

// _keep_for_later with a reuse distance of one element: a weight is kept only when nothing runs
// between its two uses -- the head's projection, whose backward follows its forward at once.
// Every other weight is gathered again in backward. With a one-element prefetch bucket each
// pre-hook prefetches the next weight of the trace not gathered, so the gathers run in use order.
TEST(DeepSpeedZero3, ReleasedWeightsAreGatheredAgainInBackward) {
  const models::Workload w = testing::tiny_linear_workload();
  const SimulationOutput out = simulate_step(without_reuse(w), {});
  EXPECT_EQ(
      testing::all_gathers(out),
      (std::vector<std::string>{
          "embedding.param0", "blocks.0.up.weight", "blocks.0.down.weight", "blocks.1.up.weight",
          "blocks.1.down.weight", "head.proj.weight", "blocks.1.down.weight", "blocks.1.up.weight",
          "blocks.0.down.weight", "blocks.0.up.weight", "embedding.param0", "persistent"}));
}

// Each release waits for the compute stream (the blocking ones(1).to(device) of
// _partition_param): with a reuse distance of one element, five weights are released after their
// forward and all six after their backward.
TEST(DeepSpeedZero3, EveryReleaseWaitsForTheComputeStream) {
  const models::Workload w = testing::tiny_linear_workload();
  EXPECT_EQ(cpu_waits(simulate_step(without_reuse(w), {}), "partition: ones(1).to(device)"), 11);
}

// Full checkpointing adds each block's recompute between its forward and its backward: "up" is
// gathered in forward, recompute and backward; "down", whose backward follows its recompute at
// once, is kept between those two.
TEST(DeepSpeedZero3, CheckpointedBlocksGatherTheirWeightsAgainForTheRecompute) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = without_reuse(w);
  in.training.activation_checkpointing = ActivationCheckpointing::kFull;
  EXPECT_EQ(testing::gather_counts(simulate_step(in, {})),
            (std::map<std::string, int>{{"blocks.0.up.weight", 3},
                                        {"blocks.1.up.weight", 3},
                                        {"blocks.0.down.weight", 2},
                                        {"blocks.1.down.weight", 2},
                                        {"embedding.param0", 2},
                                        {"head.proj.weight", 1},
                                        {"persistent", 1}}));
}

// fetch_sub_module waits for the device before each module it had to gather or found in flight;
// the prefetch issued right after (a one-element bucket: the next weight) then runs beside that
// module's GEMM.
TEST(DeepSpeedZero3, PrefetchedGatherOverlapsOneGemmAndTheNextGemmWaitsForBoth) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.prefetch_bucket_size = 1;
  const std::vector<testing::Op> ops = testing::measured_ops(simulate_step(in, {}));
  const testing::Op& up = testing::op_named(ops, "blocks.0.fwd.up");
  const testing::Op& down_gather = testing::op_named(ops, "blocks.0.down.weight.all_gather");
  const testing::Op& down_copies = testing::op_named(ops, "blocks.0.down.weight.copy_out");
  const testing::Op& down = testing::op_named(ops, "blocks.0.fwd.down");
  EXPECT_LT(down_gather.timing.start, up.timing.end);  // prefetched beside "up"
  EXPECT_GE(down.timing.start, up.timing.end);
  EXPECT_GE(down.timing.start, down_copies.timing.end);
}

// ProcessGroupNCCL copies each rank's piece out of the flat buffer: one launch per rank. With
// 10 us launches and 2 ranks the CPU spends 20 us launching them; the collective (0.5 us) has
// long ended, so the last copy (0.5 MB read + written at 1 TB/s = 1 us, at least the 2.5 us
// kernel floor) ends 2.5 us after the last launch.
TEST(DeepSpeedZero3, RankCopiesCostTheCpuOneLaunchEach) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.cluster.kernel_launch_overhead = microseconds(10.0);
  const std::vector<testing::Op> ops = testing::measured_ops(simulate_step(in, {}));
  const testing::Op& copies = testing::op_named(ops, "blocks.0.up.weight.copy_out");
  EXPECT_DOUBLE_EQ(copies.launch_cost.microseconds(), 20.0);
  EXPECT_DOUBLE_EQ((copies.timing.end - copies.timing.start).microseconds(), 2.5);
}

// Gradients: with a 600k-element bucket each 500k weight overflows it, so the bucket before it
// is all-reduced alone; the CPU waits for the reduction stream before each (overlap_comm).
TEST(DeepSpeedZero3, GradientBucketsAreAllReducedAfterTheCpuWaitsForThePreviousOne) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.reduce_bucket_size = 600'000;
  const SimulationOutput out = simulate_step(in, {});
  int all_reduces = 0;
  for (const testing::Op& op : testing::measured_ops(out))
    if (op.name == "ipg_bucket.all_reduce") ++all_reduces;
  // Backward order: proj 200k | down 500k | up 500k + norm 1k | down 500k | up 500k + norm 1k |
  // embedding 400k -> buckets {proj}, {down}, {up, norm}... : 6 buckets.
  EXPECT_EQ(all_reduces, 6);
  EXPECT_GE(cpu_waits(out, "reduction_stream.synchronize"), 6);
}

// Neither reduction path makes the reduction stream wait for the compute stream (DeepSpeed
// 0.3.13 has no wait_stream there; 0.6 added one): with every weight kept from forward (the
// default reuse distance) no fetch synchronizes the device in backward, so the bucket holding
// proj's gradient, reduced when down's weight overflows it, is flattened while down's weight
// gradient is still being computed.
TEST(DeepSpeedZero3, TheReductionStreamDoesNotWaitForTheComputeStream) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.reduce_bucket_size = 600'000;
  const std::vector<testing::Op> ops = testing::measured_ops(simulate_step(in, {}));
  const testing::Op* flatten = nullptr;
  for (const testing::Op& op : ops) {
    if (op.name == "ipg_bucket.flatten") {
      flatten = &op;
      break;
    }
  }
  ASSERT_NE(flatten, nullptr);
  EXPECT_LT(flatten->timing.start, testing::op_named(ops, "blocks.1.bwd.down_wgrad").timing.end);
}

// The parameters reduce-scattered in one step, in issue order.
std::vector<std::string> reduce_scatters(const SimulationOutput& out) {
  return testing::ops_ending_in(out, ".reduce_scatter");
}

// The tiny model with a 1000-element bias on each block's "down" linear (500 x 1000).
models::Workload biased_workload() {
  models::Workload w = testing::tiny_linear_workload();
  for (models::Layer& l : w.layers) {
    if (l.kind != models::LayerKind::kBlock) continue;
    l.forward[2].linear_bias = true;
    l.numel += 1'000;
    l.parameter_tensors += 1;
    w.total_numel += 1'000;
  }
  return w;
}

// contiguous_gradients (with reduce_scatter, its default): the buckets fill as before (a
// 600k-element bucket, backward order proj 200k | down 500k | up 500k + norm 1k | ... |
// embedding 400k), but each parameter of a bucket is reduce-scattered on its own and nothing is
// all-reduced. Before each reduce-scatter ProcessGroupNCCL copies the per-rank pieces into a flat
// input: one launch per rank, 2 x 10 us of CPU.
TEST(DeepSpeedZero3, ContiguousGradientsAreReduceScatteredOneParameterAtATime) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.reduce_bucket_size = 600'000;
  in.fsdp.deepspeed.contiguous_gradients = true;
  in.cluster.kernel_launch_overhead = microseconds(10.0);
  const SimulationOutput out = simulate_step(in, {});
  EXPECT_EQ(
      reduce_scatters(out),
      (std::vector<std::string>{"head.proj.weight", "blocks.1.down.weight", "blocks.1.up.weight",
                                "blocks.1.param0", "blocks.0.down.weight", "blocks.0.up.weight",
                                "blocks.0.param0", "embedding.param0"}));
  for (const testing::Op& op : testing::measured_ops(out))
    EXPECT_NE(op.name, "ipg_bucket.all_reduce");
  const std::vector<testing::Op> ops = testing::measured_ops(out);
  EXPECT_DOUBLE_EQ(
      testing::op_named(ops, "blocks.0.up.weight.grad_flatten").launch_cost.microseconds(), 20.0);
}

// _reduce_scatter_gradient gives each rank a view of its piece of the gradient, and a rank whose
// piece lies past the gradient's end a torch.zeros of one: on 1200 ranks the 1000-element norm
// has one-element pieces, so 200 ranks get zeros (200 launches of 10 us), none a tail copy; on 3
// ranks its pieces are 334 elements, the third straddles the end: one zeroed piece, and the last
// 332 elements copied into it.
TEST(DeepSpeedZero3, RanksPastAGradientsEndReduceScatterZeroedPieces) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.contiguous_gradients = true;
  in.cluster.kernel_launch_overhead = microseconds(10.0);
  in.cluster.nodes = 600;
  in.training.global_batch = 1200;
  std::vector<testing::Op> ops = testing::measured_ops(simulate_step(in, {}));
  EXPECT_DOUBLE_EQ(
      testing::op_named(ops, "blocks.0.param0.grad_zero_pieces").launch_cost.microseconds(),
      2000.0);
  EXPECT_TRUE(std::none_of(ops.begin(), ops.end(), [](const testing::Op& op) {
    return op.name == "blocks.0.param0.grad_tail";
  }));
  in.cluster.nodes = 1;
  in.cluster.gpus_per_node = 3;
  in.training.global_batch = 3;
  ops = testing::measured_ops(simulate_step(in, {}));
  EXPECT_DOUBLE_EQ(
      testing::op_named(ops, "blocks.0.param0.grad_zero_pieces").launch_cost.microseconds(), 10.0);
  EXPECT_NO_THROW(testing::op_named(ops, "blocks.0.param0.grad_tail"));
}

// backward() allocates two reduce_bucket_size fp16 buffers (overlap_comm) and the epilogue drops
// them; each gradient up to the bucket size is copied into one, a larger one (here the 500k
// weights against a 450k bucket) stays where autograd made it.
TEST(DeepSpeedZero3, ContiguousGradientsCopyAllButTheLargestIntoTwoBucketBuffers) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.reduce_bucket_size = 450'000;
  in.fsdp.deepspeed.contiguous_gradients = true;
  const SimulationOutput out = simulate_step(in, {});
  const engine::Program& p = out.schedule.program;
  int allocated = 0;
  int freed = 0;
  for (const engine::CpuStep& step : p.cpu) {
    if (step.kind != engine::CpuStepKind::kAlloc && step.kind != engine::CpuStepKind::kFree)
      continue;
    if (p.names[p.tensors[step.target].name] != "ipg_buffer") continue;
    EXPECT_EQ(p.tensors[step.target].size.value(), 2 * 450'000);
    (step.kind == engine::CpuStepKind::kAlloc ? allocated : freed) += 1;
  }
  EXPECT_EQ(allocated, 2);
  EXPECT_EQ(freed, 2);
  EXPECT_EQ(testing::ops_ending_in(out, ".grad_to_ipg_buffer"),
            (std::vector<std::string>{"head.proj.weight", "blocks.1.param0", "blocks.0.param0",
                                      "embedding.param0"}));
}

// Autograd makes a linear's bias gradient before its weight's, and each AccumulateGrad hook
// adds its parameter to the bucket: with a 600k-element bucket, proj (200k) and down's bias (1k)
// fill it, down's weight (500k) overflows it, so the bias goes with proj, before the weight.
TEST(DeepSpeedZero3, ABiasJoinsTheBucketBeforeItsWeight) {
  const models::Workload w = biased_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.reduce_bucket_size = 600'000;
  in.fsdp.deepspeed.contiguous_gradients = true;
  const std::vector<std::string> order = reduce_scatters(simulate_step(in, {}));
  ASSERT_GE(order.size(), 3u);
  EXPECT_EQ(order[0], "head.proj.weight");
  EXPECT_EQ(order[1], "blocks.1.down.bias");
  EXPECT_EQ(order[2], "blocks.1.down.weight");
}

// The bias's gradient is ready as soon as the module's pre-backward fetch returns, before its
// GEMMs: with a 200k-element bucket that proj's gradient fills, down's bias flushes it, so
// proj's reduce-scatter is issued before down's first gradient GEMM.
TEST(DeepSpeedZero3, ABiasFlushesTheBucketBeforeItsLinearsGemms) {
  const models::Workload w = biased_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.reduce_bucket_size = 200'000;
  in.fsdp.deepspeed.contiguous_gradients = true;
  std::vector<std::string> issued;
  for (const testing::Op& op : testing::measured_ops(simulate_step(in, {})))
    issued.push_back(op.name);
  const auto at = [&](const std::string& name) {
    return std::find(issued.begin(), issued.end(), name) - issued.begin();
  };
  EXPECT_LT(at("head.proj.weight.reduce_scatter"), at("blocks.1.bwd.down_dgrad"));
  EXPECT_LT(at("blocks.1.bwd.down_dgrad"), static_cast<std::ptrdiff_t>(issued.size()));
}

// The memory alive before the step: per element of the rank's partitions (ceil(numel / 2) of
// every parameter) fp16 and fp32 copies (6 B), Adam's two fp32 moments (8 B) and the fp16
// gradient partition (2 B); the persistent norms whole in fp16.
TEST(DeepSpeedZero3, BaselineMemoryIsPartitionsMasterWeightsMomentsAndPersistentParameters) {
  const models::Workload w = testing::tiny_linear_workload();
  const SimulationOutput out = simulate_step(input(w), {});
  const std::int64_t partitions = 2'602'000 / 2;
  const auto& base = out.schedule.baseline;
  EXPECT_EQ(base[static_cast<std::size_t>(memory::MemoryCategory::kParameters)].value(),
            6 * partitions + 2 * 2 * 1000);
  EXPECT_EQ(base[static_cast<std::size_t>(memory::MemoryCategory::kOptimizerState)].value(),
            8 * partitions);
  EXPECT_EQ(base[static_cast<std::size_t>(memory::MemoryCategory::kGradients)].value(),
            2 * partitions);
}

// The tiny model with a tied LM head, as Megatron-LM's GPT: the embedding layer holds the
// 400 x 500 token table (200k elements, the head's weight) and an 8k-element position table; the
// head holds only a 1k-element norm and reads the token table.
models::Workload tied_workload() {
  models::Workload w = testing::tiny_linear_workload();
  w.layers.front().numel = 208'000;
  w.layers.front().parameter_tensors = 2;
  w.layers.back().numel = 1'000;
  w.layers.back().forward.insert(w.layers.back().forward.begin(),
                                 {"ln_f", testing::tiny_kernel(10, 0.0)});
  w.total_numel = 208'000 + 2 * 1'001'000 + 1'000;
  return w;
}

// The head's weight is the token table: the head gathers no weight of its own, and the position
// table (8k elements) persists. With the reuse distance of one element the table is gathered by
// the embedding's forward, the head's forward, the head's backward (the head's norm module runs
// between its two uses) and the embedding's backward.
TEST(DeepSpeedZero3, ATiedHeadReadsTheTokenTable) {
  const models::Workload w = tied_workload();
  const std::map<std::string, int> count =
      testing::gather_counts(simulate_step(without_reuse(w), {}));
  EXPECT_EQ(count.count("head.proj.weight"), 0u);
  EXPECT_EQ(count.count("embedding.param0"), 0u);
  EXPECT_EQ(count.at("embedding.word_embeddings"), 4);
}

// The head's backward, the step's first, makes the token table's whole gradient, which autograd
// holds until the lookup's is added at the end of backward: it is allocated before blocks.1's
// backward starts, however the table is registered.
TEST(DeepSpeedZero3, TheTiedTablesGradientComesWithTheHeadsBackward) {
  const models::Workload w = tied_workload();
  for (const bool external : {false, true}) {
    ScheduleInput in = input(w);
    in.fsdp.deepspeed.register_external_embedding = external;
    const SimulationOutput out = simulate_step(in, {});
    const engine::Program& p = out.schedule.program;
    std::size_t table_grad = p.cpu.size();
    std::size_t blocks_backward = p.cpu.size();
    for (std::size_t i = 0; i < p.cpu.size(); ++i) {
      const engine::CpuStep& step = p.cpu[i];
      if (step.kind == engine::CpuStepKind::kAlloc &&
          p.names[p.tensors[step.target].name] == "embedding.word_embeddings.grad") {
        table_grad = std::min(table_grad, i);
      }
      if (step.kind == engine::CpuStepKind::kLaunch &&
          p.names[p.ops[step.target].name] == "blocks.1.bwd.down_dgrad") {
        blocks_backward = std::min(blocks_backward, i);
      }
    }
    ASSERT_LT(blocks_backward, p.cpu.size()) << external;
    EXPECT_LT(table_grad, blocks_backward) << external;
  }
}

// A calibration profile counts each collective it is asked about once: the per-rank copies
// after an all-gather take its duration from the launched op, not from a second query.
TEST(DeepSpeedZero3, CalibrationCountsEachCollectiveOnce) {
  const models::Workload w = testing::tiny_linear_workload();
  ScheduleInput in = input(w);
  auto curves = std::make_shared<hardware::CalibratedCurves>("test");
  for (const hardware::Collective op :
       {hardware::Collective::kAllGather, hardware::Collective::kAllReduce}) {
    curves->add_collective(hardware::CollectiveCurveKey{op, Dtype::kFp16, 2, 2},
                           hardware::CollectiveCurve({{Bytes(1 << 10), Seconds(10e-6)},
                                                      {Bytes(1 << 20), Seconds(20e-6)},
                                                      {Bytes(1 << 30), Seconds(2e-3)}},
                                                     1e-9, 1e-12));
  }
  in.cluster.gpu.calibration = curves;
  const SimulationOutput out = simulate_step(in, {});
  std::int64_t collectives = 0;
  for (const engine::Op& op : out.schedule.program.ops)
    collectives += op.kind == engine::OpKind::kCommunication;
  const hardware::CalibrationCounts n = curves->usage().counts();
  EXPECT_GT(collectives, 0);
  EXPECT_EQ(n.collectives_calibrated + n.collectives_fallback, collectives);
}

// register_external_parameter(model, table): the model's pre-forward hook gathers the table
// before anything else, and nothing releases it before the step ends (the model's post-forward
// keeps it for its pre-backward, which follows at once; no post-backward fires), so it is
// gathered once. Its 200k elements alone reach a 150k max-live limit, so nothing is prefetched:
// every weight is gathered by the module that uses it, after the previous module's GEMM.
TEST(DeepSpeedZero3, AnExternalTokenTableStaysGatheredAllStepAndBlocksPrefetch) {
  const models::Workload w = tied_workload();
  ScheduleInput in = without_reuse(w);
  in.fsdp.deepspeed.register_external_embedding = true;
  in.fsdp.deepspeed.max_live_parameters = 150'000;
  const SimulationOutput out = simulate_step(in, {});
  const std::vector<std::string> gathers = testing::all_gathers(out);
  ASSERT_FALSE(gathers.empty());
  EXPECT_EQ(gathers.front(), "embedding.word_embeddings");
  EXPECT_EQ(testing::gather_counts(out).at("embedding.word_embeddings"), 1);
  const std::vector<testing::Op> ops = testing::measured_ops(out);
  const testing::Op& up = testing::op_named(ops, "blocks.0.fwd.up");
  const testing::Op& down_gather = testing::op_named(ops, "blocks.0.down.weight.all_gather");
  EXPECT_GE(down_gather.timing.start, up.timing.end);  // not prefetched beside "up"
}

// After loss.backward() the optimizer releases what was kept (_partition_all_parameters, each
// release waiting for the compute stream) before the engine's allreduce_gradients reduces the
// last bucket. An external token table is kept all step, so its release is the step's last, and
// it comes before the last reduce-scatter is launched.
TEST(DeepSpeedZero3, KeptParametersAreReleasedBeforeTheLastBucketIsReduced) {
  const models::Workload w = tied_workload();
  ScheduleInput in = input(w);
  in.fsdp.deepspeed.register_external_embedding = true;
  in.fsdp.deepspeed.reduce_bucket_size = 600'000;
  in.fsdp.deepspeed.contiguous_gradients = true;
  const SimulationOutput out = simulate_step(in, {});
  const engine::Program& p = out.schedule.program;
  std::size_t last_release = 0;
  std::size_t last_reduce = 0;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const engine::CpuStep& step = p.cpu[i];
    if (step.kind == engine::CpuStepKind::kWait &&
        p.names[step.name] == "partition: ones(1).to(device)")
      last_release = i;
    if (step.kind == engine::CpuStepKind::kLaunch &&
        p.names[p.ops[step.target].name].ends_with(".reduce_scatter"))
      last_reduce = i;
  }
  ASSERT_GT(last_release, 0u);
  EXPECT_LT(last_release, last_reduce);
}

}  // namespace
}  // namespace fsdpsim::fsdp
