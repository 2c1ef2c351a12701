// Every knob on the tiny model of tiny_model.hpp, timelines worked out on paper. Shared facts
// (world 2 on one node, fp32 parameters and reduction unless a test says otherwise): a 10M-
// parameter unit all-gathers or reduce-scatters 40 MB in 20 us; its gradient concat takes 80 us
// on the compute stream; dividing its gradient by 2 before the reduce-scatter (_div_if_needed:
// predivide 2, postdivide 1 at world 2) takes 80 us on the post-backward stream, and the fp32
// reduce-scatter output is kept as _saved_grad_shard with no kernel; AdamW (fused=True here: 7 fp32
// passes) takes 140 us per 5M-element shard. Layers: forward 100 us (attention 40, MLP 60),
// backward 200 us. Kernels and copies on two streams at once share the SMs, each at half its
// rate (a pre-divide beside a backward holds the backward back by its own 80 us). The
// FULL_SHARD / BACKWARD_PRE baseline (schedule_test.cpp, with the default foreach AdamW) takes
// 2140 us with the fused one: its pre-divides of b1 and b0 share the SMs with the backward of b0
// and of the embedding.
#include <gtest/gtest.h>

#include <functional>

#include "sim/fsdp/fsdp_units.hpp"
#include "sim/fsdp/simulation.hpp"
#include "tests/unit/models/test_specs.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

SimTime us(double v) { return to_sim_time(microseconds(v)); }

struct Knobs {
  ScheduleInput input;
  SimulationOutput out;

  [[nodiscard]] std::vector<std::pair<SimTime, SimTime>> spans(const std::string& name) const {
    std::vector<std::pair<SimTime, SimTime>> found;
    const engine::Program& p = out.schedule.program;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      if (p.names[p.ops[i].name] == name)
        found.emplace_back(out.timeline.ops[i].start, out.timeline.ops[i].end);
    }
    return found;
  }
  [[nodiscard]] std::pair<SimTime, SimTime> span(const std::string& name) const {
    const auto all = spans(name);
    EXPECT_EQ(all.size(), 1u) << name;
    return all.empty() ? std::pair<SimTime, SimTime>{} : all.front();
  }
  [[nodiscard]] std::size_t count_suffix(const std::string& suffix) const {
    std::size_t n = 0;
    for (const engine::Op& op : out.schedule.program.ops) {
      const std::string_view name = out.schedule.program.names[op.name];
      n += name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    }
    return n;
  }
  [[nodiscard]] std::size_t first_index(const std::string& name) const {
    const engine::Program& p = out.schedule.program;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      if (p.names[p.ops[i].name] == name) return i;
    }
    ADD_FAILURE() << "no op " << name;
    return 0;
  }
  // Positions in the CPU program of the steps of `kind` whose name ends with `suffix`: the op's
  // name for a launch, the tensor's for an allocation or a free, the step's own for waits and
  // host work.
  [[nodiscard]] std::vector<std::size_t> cpu_steps(engine::CpuStepKind kind,
                                                   const std::string& suffix) const {
    const engine::Program& p = out.schedule.program;
    std::vector<std::size_t> found;
    for (std::size_t i = 0; i < p.cpu.size(); ++i) {
      const engine::CpuStep& step = p.cpu[i];
      if (step.kind != kind) continue;
      const bool tensor = kind == engine::CpuStepKind::kAlloc || kind == engine::CpuStepKind::kFree;
      const std::string_view name = kind == engine::CpuStepKind::kLaunch
                                        ? p.names[p.ops[step.target].name]
                                    : tensor ? p.names[p.tensors[step.target].name]
                                             : p.names[step.name];
      if (name.ends_with(suffix)) found.push_back(i);
    }
    return found;
  }
  [[nodiscard]] SimTime step() const { return out.timeline.makespan; }
  [[nodiscard]] std::int64_t baseline(memory::MemoryCategory c) const {
    return out.schedule.baseline[static_cast<std::size_t>(c)].value();
  }
  [[nodiscard]] std::int64_t tensor_bytes(const std::string& name) const {
    const engine::Program& p = out.schedule.program;
    for (const engine::TensorInfo& t : p.tensors) {
      if (p.names[t.name] == name) return t.size.value();
    }
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }
};

Knobs run_on(const models::Workload& workload, const std::function<void(ScheduleInput&)>& configure,
             const SimulationOptions& options = {}) {
  Knobs k;
  k.input.workload = &workload;
  k.input.cluster = testing::tiny_cluster();
  k.input.fsdp.param_dtype = Dtype::kFp32;
  k.input.fsdp.reduce_dtype = Dtype::kFp32;
  k.input.training.global_batch = 2;
  k.input.training.micro_batch = 1;
  k.input.training.seq_len = 8;
  k.input.training.optimizer_impl = OptimizerImpl::kFused;
  configure(k.input);
  k.out = simulate_step(k.input, options);
  return k;
}

// The tiny workload with blocks.0's 10M parameters itemized as 4M + 6M.
const models::Workload& blocks0_itemized() {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    w.layers[1].parameter_numels = {4'000'000, 6'000'000};
    w.layers[1].parameter_tensors = 2;
    return w;
  }();
  return workload;
}

Knobs run(const std::function<void(ScheduleInput&)>& configure) {
  static const models::Workload workload = testing::tiny_workload();
  return run_on(workload, configure);
}

// SHARD_GRAD_OP keeps parameters from forward to backward: no backward all-gather (3 instead
// of 5), same step here because the baseline hides its backward all-gathers.
TEST(Knobs, ShardGradOpSkipsBackwardAllGathers) {
  const Knobs k =
      run([](ScheduleInput& in) { in.fsdp.sharding_strategy = ShardingStrategy::kShardGradOp; });
  EXPECT_EQ(k.count_suffix(".all_gather"), 3u);
  EXPECT_EQ(k.step(), us(2140));
  // Allocated at the peak (MB): 180 before the step, root 40 + embedding activations 1, b0 and
  // b1 kept 40 + 40 with activations 10 + 10, head 20; backward frees the head's and b1's
  // activations (-30) while the head's and b1's per-parameter gradients (16 + 40; the
  // embedding's 24 come at the end of backward) and then b1's flat gradient (40) are allocated:
  // 180 + 161 - 30 + 96 = 407 (FULL_SHARD re-gathers b0 and b1 instead of keeping them and
  // peaks at the same 407).
  EXPECT_EQ(k.out.result.memory.peak_allocated.value(), 407'000'000);
  const Knobs full = run([](ScheduleInput&) {});
  EXPECT_EQ(full.count_suffix(".all_gather"), 5u);
}

// NO_SHARD: no all-gather; each unit pre-divides its 40 MB gradient (80 us) and all-reduces it
// in place (factor 2(n-1)/n = 1 at 1 TB/s: 40 us), which is then the unit's full fp32 gradient
// (_reduce_grad_no_shard: no copy, the reduction's dtype being the parameters'). Forward 0-400;
// head bwd 400-600; b1 bwd 600-800, concat 800-880, pre-divide 880-1040 beside b0 bwd (both at
// half rate), all-reduce 1040-1080; b0 bwd 880-1160, concat 1160-1240, pre-divide 1240-1400
// beside the embedding's bwd, all-reduce 1400-1440; embedding bwd 1240-1520, concat 1520-1600,
// pre-divide 1600-1680 alone, all-reduce 1680-1720; AdamW on full 10M-element tensors 3 x 280
// us: 2560.
TEST(Knobs, NoShardAllReducesFullGradients) {
  const Knobs k =
      run([](ScheduleInput& in) { in.fsdp.sharding_strategy = ShardingStrategy::kNoShard; });
  EXPECT_EQ(k.count_suffix(".all_gather"), 0u);
  EXPECT_EQ(k.span("blocks.1.all_reduce"), std::make_pair(us(1040), us(1080)));
  EXPECT_EQ(k.span("blocks.0.all_reduce"), std::make_pair(us(1400), us(1440)));
  EXPECT_EQ(k.span("root.all_reduce"), std::make_pair(us(1680), us(1720)));
  EXPECT_EQ(k.count_suffix(".accumulate_grad") + k.count_suffix(".grad_to_param_dtype"), 0u);
  EXPECT_EQ(k.step(), us(2560));
  // Reduced in bf16, each gradient is cast to the fp32 FlatParameter's dtype
  // (_cast_grad_to_param_dtype): 10M elements read as bf16 and written as fp32, 60 MB.
  const Knobs bf16 = run([](ScheduleInput& in) {
    in.fsdp.sharding_strategy = ShardingStrategy::kNoShard;
    in.fsdp.param_dtype = Dtype::kBf16;
    in.fsdp.reduce_dtype = Dtype::kBf16;
  });
  EXPECT_EQ(bf16.count_suffix(".grad_to_param_dtype"), 3u);
  EXPECT_EQ(bf16.count_suffix(".accumulate_grad"), 0u);
  const engine::Program& p = bf16.out.schedule.program;
  const engine::Op& cast = p.ops[bf16.first_index("blocks.1.grad_to_param_dtype")];
  EXPECT_EQ(cast.bytes.value(), 60'000'000);
  // bf16 parameters reduced in fp32, the FlatParameter's dtype: the cast into the reduction's
  // dtype makes the tensor that is all-reduced and then kept as .grad, with no copy after.
  const Knobs mixed = run([](ScheduleInput& in) {
    in.fsdp.sharding_strategy = ShardingStrategy::kNoShard;
    in.fsdp.param_dtype = Dtype::kBf16;
    in.fsdp.reduce_dtype = Dtype::kFp32;
  });
  EXPECT_EQ(mixed.count_suffix(".grad_to_reduce_dtype"), 3u);
  EXPECT_EQ(mixed.count_suffix(".grad_to_param_dtype") + mixed.count_suffix(".accumulate_grad"),
            0u);
  // Full replicas: 4 + 8 bytes per parameter before the step.
  EXPECT_EQ(k.out.schedule.baseline[static_cast<std::size_t>(memory::MemoryCategory::kParameters)]
                .value(),
            120'000'000);
}

// On one GPU FSDP1 runs NO_SHARD whatever the strategy (_init_core_state: "FSDP is switching to
// use NO_SHARD instead of ... since the world size is 1"): FULL_SHARD gathers nothing and takes
// NO_SHARD's step to the picosecond.
TEST(Knobs, OneGpuRunsNoShardWhateverTheStrategy) {
  const auto one_gpu = [](ShardingStrategy strategy) {
    return [strategy](ScheduleInput& in) {
      in.cluster.gpus_per_node = 1;
      in.training.global_batch = 1;
      in.fsdp.sharding_strategy = strategy;
    };
  };
  const Knobs full = run(one_gpu(ShardingStrategy::kFullShard));
  const Knobs none = run(one_gpu(ShardingStrategy::kNoShard));
  EXPECT_EQ(full.count_suffix(".all_gather"), 0u);
  EXPECT_EQ(full.count_suffix(".all_reduce"), 3u);
  EXPECT_EQ(full.step(), none.step());
  EXPECT_EQ(full.out.result.memory.peak_allocated, none.out.result.memory.peak_allocated);
}

// HYBRID_SHARD on 2 nodes x 2 GPUs, 400 GB/s per node: shard groups of 2 inside a node.
void hybrid_shard_on_two_nodes(ScheduleInput& in) {
  in.cluster.nodes = 2;
  in.cluster.nic_bandwidth_per_node = gb_per_s(400.0);
  in.training.global_batch = 4;
  in.fsdp.sharding_strategy = ShardingStrategy::kHybridShard;
  in.fsdp.shard_group_size = 2;
}

// HYBRID_SHARD on 2 nodes x 2 GPUs: shard groups inside a node (all-gathers as in the
// baseline), replicas across nodes. The 20 MB shard is all-reduced over 2 ranks, one per node,
// on the all-reduce stream, using its GPU's share of the NICs (400 GB/s / 2 GPUs = 200 GB/s):
// 100 us, plus NCCL's tree network latency for each of the ring's 2 steps (one rank per node:
// 2 x 8.5 us; the idealized cluster has no other latency): 117 us. The data-parallel world is 4:
// each gradient is divided by 2 before the reduce-scatter (80 us) and its shard by 2 after the
// all-reduce (40 MB: 40 us, on the all-reduce stream). Pre-divide 900-1060 beside b0 bwd (to
// 1180), RS(b1) 1060-1080, AR 1080-1197, post-divide 1197-1277 beside b0's concat (1180-1300:
// 17 us alone, 40 at half rate, 23 alone); b0's pre-divide 1300-1460 beside the embedding's bwd
// (to 1580), RS(b0) 1460-1480, AR 1480-1597, its post-divide beside the root's concat alike
// (1580-1700); root pre-divide 1700-1780, RS(root) 1780-1800, AR 1800-1917, post-divide
// 1917-1957; AdamW 420: 2377.
TEST(Knobs, HybridShardAllReducesShardsAcrossReplicas) {
  const Knobs k = run(hybrid_shard_on_two_nodes);
  EXPECT_EQ(k.span("blocks.1.reduce_scatter"), std::make_pair(us(1060), us(1080)));
  EXPECT_EQ(k.span("blocks.1.all_reduce"), std::make_pair(us(1080), us(1197)));
  EXPECT_EQ(k.span("blocks.1.grad_postdivide"), std::make_pair(us(1197), us(1277)));
  EXPECT_EQ(k.span("blocks.0.all_reduce"), std::make_pair(us(1480), us(1597)));
  EXPECT_EQ(k.span("root.all_reduce"), std::make_pair(us(1800), us(1917)));
  EXPECT_EQ(k.step(), us(2377));
  EXPECT_NEAR(k.out.result.breakdown.exposed_communication.value(), 157e-6,
              1e-12);  // AG root, RS+AR root
}

// HYBRID_SHARD: _post_backward_hook record_streams the unit's unsharded gradient on the
// post-backward stream only, so its block is reusable once the reduce-scatter is done (1080 us),
// not after the replica all-reduce and post-divide on the all-reduce stream (1277 us), which
// hold only the shard.
TEST(Knobs, HybridShardReleasesTheUnshardedGradientAfterTheReduceScatter) {
  const Knobs k = run(hybrid_shard_on_two_nodes);
  const engine::Program& p = k.out.schedule.program;
  const std::vector<std::size_t> frees =
      k.cpu_steps(engine::CpuStepKind::kFree, "blocks.1.flat_grad");
  ASSERT_EQ(frees.size(), 1u);
  const engine::OpId released_after = p.cpu[frees.front()].after_op;
  ASSERT_NE(released_after, engine::kNoOp);
  EXPECT_EQ(p.names[p.ops[released_after].name], "blocks.1.reduce_scatter");
  EXPECT_EQ(k.out.timeline.ops[released_after].end, us(1080));
}

// forward_prefetch issues the next unit's all-gather before this unit's forward kernels.
TEST(Knobs, ForwardPrefetchIssuesTheNextAllGatherBeforeTheForward) {
  const Knobs on = run([](ScheduleInput& in) { in.fsdp.forward_prefetch = true; });
  const Knobs off = run([](ScheduleInput&) {});
  EXPECT_LT(on.first_index("blocks.1.all_gather"), on.first_index("blocks.0.fwd.attn"));
  EXPECT_GT(off.first_index("blocks.1.all_gather"), off.first_index("blocks.0.fwd.attn"));
  EXPECT_EQ(on.step(), off.step());  // the CPU runs ahead anyway: same timeline here
}

// CPU offload (PCIe 1 TB/s, host DRAM 2.4 TB/s per node, 1.2 TB/s per rank): each unshard first
// copies the 20 MB fp32 shard to the GPU (20 us) in the pre-unshard stream; each reduced shard
// goes back (20 us) after its accumulation; the CPU waits for the GPU, then runs AdamW on
// 15M elements x 84 B = 1.26 GB in 1050 us. H2D(root) 0-20, AG(root) 20-40, H2D(b0) 20-40,
// AG(b0) 40-60, ..., forward 40-440. The root's pre-backward calls _unshard on the root, still
// unsharded: nothing to copy or gather, but it pops the limiter's queue, and the CPU waits for
// b0's free event (the end of b0's forward, 240); the backward prefetch of b1 then copies its
// shard (240-260) and gathers it (260-280); backward as in the baseline shifted by 20 us; the
// last D2H ends at 1760, then 1050 us of CPU optimizer: 2810, the GPU idle while the host works
// (the breakdown's host work). The copies over PCIe take no SM time. No parameter or optimizer
// state on the GPU before the step.
TEST(Knobs, CpuOffloadCopiesOverPcieAndStepsOnTheCpu) {
  const Knobs k = run([](ScheduleInput& in) {
    in.fsdp.cpu_offload = true;
    in.cluster.pcie_bandwidth = gb_per_s(1000.0);
    in.cluster.host_memory_bandwidth = gb_per_s(2400.0);
    in.training.optimizer_impl = OptimizerImpl::kForLoop;  // torch's default on the host
  });
  EXPECT_EQ(k.spans("root.h2d_shard").front(), std::make_pair(us(0), us(20)));
  EXPECT_EQ(k.spans("root.all_gather").front(), std::make_pair(us(20), us(40)));
  EXPECT_EQ(k.spans("blocks.1.h2d_shard").back(), std::make_pair(us(240), us(260)));
  EXPECT_EQ(k.spans("blocks.1.all_gather").back(), std::make_pair(us(260), us(280)));
  EXPECT_EQ(k.span("root.d2h_grad"), std::make_pair(us(1740), us(1760)));
  EXPECT_EQ(k.step(), us(2810));
  EXPECT_DOUBLE_EQ(k.out.result.breakdown.host_work.value(), 1050e-6);
  for (Bytes b : k.out.schedule.baseline) EXPECT_EQ(b.value(), 0);
}

// optimizer_impl fused on the host is torch's CPU fused AdamW: one pass over the seven streams,
// 15M elements x 28 B = 420 MB at 1.2 TB/s per rank, 350 us instead of 1050: 2110 us. foreach
// runs the per-tensor CPU fallback, as for_loop does: 2810 us.
TEST(Knobs, CpuOffloadsFusedAdamwMakesOnePassOnTheHost) {
  const auto step_with = [](OptimizerImpl impl) {
    return run([impl](ScheduleInput& in) {
      in.fsdp.cpu_offload = true;
      in.cluster.pcie_bandwidth = gb_per_s(1000.0);
      in.cluster.host_memory_bandwidth = gb_per_s(2400.0);
      in.training.optimizer_impl = impl;
    });
  };
  const Knobs fused = step_with(OptimizerImpl::kFused);
  EXPECT_EQ(fused.step(), us(2110));
  EXPECT_DOUBLE_EQ(fused.out.result.breakdown.host_work.value(), 350e-6);
  EXPECT_EQ(step_with(OptimizerImpl::kForeach).step(), us(2810));
  EXPECT_EQ(step_with(OptimizerImpl::kForLoop).step(), us(2810));
}

// After a warm-up step the measured step starts where the warm-up ends, its CPU optimizer
// included: the same 2810 us, one host AdamW in it (the warm-up's was counted too, 3860 us), and
// only that one in the breakdown's host work.
TEST(Knobs, AWarmUpStepsCpuOptimizerIsNotInTheMeasuredStep) {
  static const models::Workload workload = testing::tiny_workload();
  SimulationOptions warm;
  warm.warm_up = true;
  const Knobs k = run_on(
      workload,
      [](ScheduleInput& in) {
        in.fsdp.cpu_offload = true;
        in.cluster.pcie_bandwidth = gb_per_s(1000.0);
        in.cluster.host_memory_bandwidth = gb_per_s(2400.0);
        in.training.optimizer_impl = OptimizerImpl::kForLoop;
      },
      warm);
  EXPECT_EQ(k.step(), us(2 * 2810));  // the whole timeline: two steps
  EXPECT_EQ(k.out.measured_start, us(2810));
  EXPECT_DOUBLE_EQ(k.out.result.step_time.value(), 2810e-6);
  EXPECT_DOUBLE_EQ(k.out.result.breakdown.host_work.value(), 1050e-6);
}

// Full activation checkpointing re-runs each block's forward (100 us) before its backward:
// +200 us, and 2 x 1 GFLOP more hardware FLOPs. Model FLOPs: 4 layers x 3 GFLOP.
TEST(Knobs, FullCheckpointingRecomputesEveryBlock) {
  const Knobs k = run([](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kFull;
  });
  EXPECT_EQ(k.span("blocks.1.recompute.attn").first, us(620));
  EXPECT_EQ(k.span("blocks.1.bwd.bwd"), std::make_pair(us(720), us(920)));
  EXPECT_EQ(k.step(), us(2340));
  EXPECT_DOUBLE_EQ(k.out.schedule.model_flops.value(), 12e9);
  EXPECT_DOUBLE_EQ(k.out.schedule.hardware_flops.value(), 14e9);
}

// With early stop at each block's "mlp" (the kernel after the last tensor backward reads), the
// recompute re-runs only "attn" (40 us): blocks.1's backward starts at 660 instead of 720, each
// block saves 60 us: 2340 - 120 = 2220, and 2 x 0.6 GFLOP fewer hardware FLOPs. Without early
// stop (the reentrant checkpoint, PyTorch < 2.1) the whole forward re-runs as above, unless
// compiled: the compiled backward re-runs only what it reads, whatever the flag.
TEST(Knobs, CheckpointEarlyStopSkipsTheKernelsAfterTheLastSavedTensor) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    for (models::Layer& l : w.layers)
      if (l.kind == models::LayerKind::kBlock) l.recompute_early_stop_kernel = "mlp";
    return w;
  }();
  const auto configure = [](bool early_stop, bool compiled = false) {
    return [early_stop, compiled](ScheduleInput& in) {
      in.workload = &workload;
      in.training.activation_checkpointing = ActivationCheckpointing::kFull;
      in.training.checkpoint_early_stop = early_stop;
      in.training.compiled = compiled;
    };
  };
  const Knobs stop = run(configure(true));
  EXPECT_EQ(stop.span("blocks.1.recompute.attn"), std::make_pair(us(620), us(660)));
  EXPECT_TRUE(stop.spans("blocks.1.recompute.mlp").empty());
  EXPECT_EQ(stop.span("blocks.1.bwd.bwd"), std::make_pair(us(660), us(860)));
  EXPECT_EQ(stop.step(), us(2220));
  EXPECT_DOUBLE_EQ(stop.out.schedule.hardware_flops.value(), 12.8e9);
  const Knobs whole = run(configure(false));
  EXPECT_EQ(whole.span("blocks.1.recompute.mlp"), std::make_pair(us(660), us(720)));
  EXPECT_EQ(whole.step(), us(2340));
  const Knobs compiled = run(configure(false, /*compiled=*/true));
  EXPECT_FALSE(compiled.spans("blocks.1.recompute.attn").empty());
  EXPECT_TRUE(compiled.spans("blocks.1.recompute.mlp").empty());
}

// Selective (every 2nd block, counted from 1 as torchtitan's and fms-fsdp's check_fn count):
// only blocks.1 is recomputed, 620-720 before its backward: +100 us.
TEST(Knobs, SelectiveCheckpointingRecomputesEveryNthBlock) {
  const Knobs k = run([](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kSelective;
    in.training.checkpoint_every_n_blocks = 2;
  });
  EXPECT_EQ(k.spans("blocks.0.recompute.attn").size(), 0u);
  EXPECT_EQ(k.span("blocks.1.recompute.attn"), std::make_pair(us(620), us(660)));
  EXPECT_EQ(k.step(), us(2240));
  EXPECT_DOUBLE_EQ(k.out.schedule.hardware_flops.value(), 13e9);
}

// Op-level: only the attention core (40 us, 0.4 GFLOP) is recomputed in each block, and each
// block saves 6 MB instead of 10 MB: +80 us.
TEST(Knobs, AttentionCheckpointingRecomputesOnlyTheCore) {
  const Knobs k = run([](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kAttention;
  });
  EXPECT_EQ(k.spans("blocks.1.recompute.mlp").size(), 0u);
  EXPECT_EQ(k.span("blocks.1.recompute.attn"), std::make_pair(us(620), us(660)));
  EXPECT_EQ(k.step(), us(2220));
  EXPECT_DOUBLE_EQ(k.out.schedule.hardware_flops.value(), 12.8e9);
  const engine::Program& p = k.out.schedule.program;
  for (const engine::TensorInfo& t : p.tensors) {
    if (p.names[t.name] == "blocks.0.saved") {
      EXPECT_EQ(t.size.value(), 6'000'000);
    }
  }
}

// A block whose first op saves its input (models::Layer::saved_input, the 1 MB the checkpoint
// keeps) recomputes 9 MB of its 10 MB: the re-run forward saves the checkpoint's own input
// tensor. The time does not change.
TEST(Knobs, RecomputeDoesNotCopyTheCheckpointsInput) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    for (const std::size_t b : {std::size_t{1}, std::size_t{2}})
      w.layers[b].saved_input = w.layers[b].saved_activations_checkpointed;
    return w;
  }();
  const auto full = [](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kFull;
  };
  const Knobs k = run_on(workload, full);
  const Knobs twice = run(full);
  for (const char* block : {"blocks.0", "blocks.1"}) {
    EXPECT_EQ(k.tensor_bytes(std::string(block) + ".recomputed"), 9'000'000);
    EXPECT_EQ(twice.tensor_bytes(std::string(block) + ".recomputed"), 10'000'000);
  }
  EXPECT_EQ(k.step(), twice.step());
  // Recomputing only the attention core re-saves what the core saves (4 MB), not the input.
  const Knobs core = run_on(workload, [](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kAttention;
  });
  EXPECT_EQ(core.tensor_bytes("blocks.0.recomputed"), 4'000'000);
}

// The checkpointed core keeps its inputs where nothing else saves them (unfused attention):
// each block saves 6 MB + a 1 MB input = 7 MB.
TEST(Knobs, AttentionCheckpointingKeepsTheCoresUnsavedInputs) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    for (models::Layer& l : w.layers) l.attention_core_input = Bytes(1'000'000);
    return w;
  }();
  const Knobs k = run_on(workload, [](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kAttention;
  });
  EXPECT_EQ(k.tensor_bytes("blocks.0.saved"), 7'000'000);
}

// torchtitan's op policy on tiny_linear_block (norm 10 us, "up" 40 us, "down" 40 us, both bias-
// free linears over 8 tokens): "up" is the first mm and keeps its 8 x 1000 bf16 output (16 kB),
// "down" is the second and is recomputed with the norm. Each block keeps its input (100 kB) and
// that output from forward to backward, and its recompute makes the other 984 kB of what
// autograd saves: 40 us and 0.1 GFLOP less per block than checkpointing it whole.
TEST(Knobs, OpPolicyCheckpointingSkipsTheSavedMmInTheRecompute) {
  static const models::Workload workload = testing::tiny_linear_workload();
  const auto with = [](ActivationCheckpointing ac) {
    return run_on(workload, [ac](ScheduleInput& in) { in.training.activation_checkpointing = ac; });
  };
  const Knobs op = with(ActivationCheckpointing::kSelectiveOp);
  const Knobs whole = with(ActivationCheckpointing::kFull);
  for (const char* block : {"blocks.0", "blocks.1"}) {
    const std::string b = block;
    EXPECT_TRUE(op.spans(b + ".recompute.up").empty());
    EXPECT_EQ(op.spans(b + ".recompute.norm").size(), 1u);
    EXPECT_EQ(op.spans(b + ".recompute.down").size(), 1u);
    EXPECT_EQ(whole.spans(b + ".recompute.up").size(), 1u);
    EXPECT_EQ(op.tensor_bytes(b + ".saved"), 116'000);
    EXPECT_EQ(op.tensor_bytes(b + ".recomputed"), 984'000);
    EXPECT_EQ(whole.tensor_bytes(b + ".saved"), 100'000);
  }
  // Where the norm's saved input is the block's (models::Layer::saved_input), the recompute
  // leaves those 100 kB to the checkpoint's own tensor.
  static const models::Workload input_saved = [] {
    models::Workload w = testing::tiny_linear_workload();
    for (const std::size_t b : {std::size_t{1}, std::size_t{2}})
      w.layers[b].saved_input = Bytes(100'000);
    return w;
  }();
  const Knobs shared = run_on(input_saved, [](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kSelectiveOp;
  });
  EXPECT_EQ(shared.tensor_bytes("blocks.0.recomputed"), 884'000);
  EXPECT_EQ(op.step(), whole.step() - us(80));
  EXPECT_NEAR(whole.out.schedule.hardware_flops.value() - op.out.schedule.hardware_flops.value(),
              0.2e9, 1.0);
}

// Two blocks per unit: units [blocks.0-1, root]; the 20M-parameter unit moves 80 MB in 40 us,
// concatenates 160 MB in 160 us and pre-divides its 80 MB gradient in 160 us.
// AG(root) 0-20, AG(blocks.0-1) 20-60, forward 20-420; its backward prefetch 60-100 (one free
// event only: no limiter wait); b1 bwd 620-820, b0 bwd 820-1020, concat 1020-1180, pre-divide
// 1180-1500 beside the embedding's bwd (both at half rate; the embedding's ends at 1540), RS
// 1500-1540; the root's concat 1540-1620, pre-divide 1620-1700, RS 1700-1720: step 2140.
// unit_count_before_root counts, without a workload, the units besides the root that make_units
// builds: on the tiny model's two blocks, 2 per block, 1 for two or three blocks per unit, 0 for
// the whole model.
TEST(Knobs, UnitCountBeforeRootMatchesTheUnitsMakeUnitsBuilds) {
  const models::Workload w = testing::tiny_workload();
  for (const auto& [policy, per_unit] :
       {std::pair{WrapPolicy::kPerBlock, 1}, std::pair{WrapPolicy::kEveryNBlocks, 2},
        std::pair{WrapPolicy::kEveryNBlocks, 3}, std::pair{WrapPolicy::kWholeModel, 1}}) {
    FsdpConfig f;
    f.wrap_policy = policy;
    f.blocks_per_unit = per_unit;
    const auto built = static_cast<std::int64_t>(make_units(w, f, 2).size()) - 1;
    EXPECT_EQ(unit_count_before_root(2, f), built) << per_unit;
    f.wrap_embedding_and_head = policy != WrapPolicy::kWholeModel;  // refused with whole_model
    if (f.wrap_embedding_and_head) {
      EXPECT_EQ(unit_count_before_root(2, f),
                static_cast<std::int64_t>(make_units(w, f, 2).size()) - 1)
          << per_unit;
    }
  }
}

// With wrap_embedding_and_head the embedding's unit comes first and the head's after the blocks,
// each of its one layer; every-n grouping of the blocks is unchanged and the root holds nothing.
TEST(Knobs, MakeUnitsGivesTheEmbeddingAndTheHeadUnitsOfTheirOwn) {
  const models::Workload w = testing::tiny_workload();
  FsdpConfig f;
  f.wrap_policy = WrapPolicy::kEveryNBlocks;
  f.blocks_per_unit = 2;
  f.wrap_embedding_and_head = true;
  const std::vector<FsdpUnit> units = make_units(w, f, 2);
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[0].name, "embedding");
  EXPECT_EQ(units[0].layers, std::vector<std::size_t>{0});
  EXPECT_EQ(units[0].shard_numel, 3'000'000);
  EXPECT_EQ(units[1].name, "blocks.0-1");
  EXPECT_EQ(units[1].numel, 20'000'000);
  EXPECT_EQ(units[2].name, "head");
  EXPECT_EQ(units[2].layers, std::vector<std::size_t>{3});
  EXPECT_TRUE(units[3].is_root);
  EXPECT_EQ(units[3].numel, 0);
  EXPECT_TRUE(units[3].layers.empty());
}

TEST(Knobs, WrappingTwoBlocksPerUnitGathersThemTogether) {
  const Knobs k = run([](ScheduleInput& in) {
    in.fsdp.wrap_policy = WrapPolicy::kEveryNBlocks;
    in.fsdp.blocks_per_unit = 2;
  });
  ASSERT_EQ(k.out.schedule.units.size(), 2u);
  EXPECT_EQ(k.out.schedule.units[0].name, "blocks.0-1");
  EXPECT_EQ(k.spans("blocks.0-1.all_gather").front(), std::make_pair(us(20), us(60)));
  EXPECT_EQ(k.spans("blocks.0-1.all_gather").back(), std::make_pair(us(60), us(100)));
  EXPECT_EQ(k.span("blocks.0-1.reduce_scatter"), std::make_pair(us(1500), us(1540)));
  EXPECT_EQ(k.step(), us(2140));
}

// The whole model as one unit: one 120 MB all-gather (60 us) before anything runs, one 240 us
// concat, 240 us pre-divide and 60 us reduce-scatter after everything: 2220 us.
TEST(Knobs, WholeModelWrappingSerializesCommunication) {
  const Knobs k = run([](ScheduleInput& in) { in.fsdp.wrap_policy = WrapPolicy::kWholeModel; });
  ASSERT_EQ(k.out.schedule.units.size(), 1u);
  EXPECT_EQ(k.span("root.all_gather"), std::make_pair(us(0), us(60)));
  EXPECT_EQ(k.span("root.reduce_scatter"), std::make_pair(us(1740), us(1800)));
  EXPECT_EQ(k.step(), us(2220));
}

// no_sync over 2 micro-batches: the first keeps unsharded gradients (3 x 40 MB) and skips the
// reduce-scatter, the second adds into them and reduces once: 3 reduce-scatters instead of 6,
// and 120 MB more allocated at the peak.
TEST(Knobs, NoSyncReducesOnlyOnTheLastMicroBatch) {
  const Knobs sync = run([](ScheduleInput& in) { in.training.global_batch = 4; });
  const Knobs nosync = run([](ScheduleInput& in) {
    in.training.global_batch = 4;
    in.training.no_sync = true;
  });
  EXPECT_EQ(sync.count_suffix(".reduce_scatter"), 6u);
  EXPECT_EQ(nosync.count_suffix(".reduce_scatter"), 3u);
  EXPECT_GT(nosync.out.result.memory.peak_allocated, sync.out.result.memory.peak_allocated);
  EXPECT_LT(nosync.out.result.breakdown.communication_busy,
            sync.out.result.breakdown.communication_busy);
}

// _offload_grad copies NO_SHARD's gradient to the host with non_blocking=False (only sharded
// strategies copy without blocking): the CPU waits for each unit's copy in its post-backward
// hook, three per step; FULL_SHARD's copies never block it.
TEST(Knobs, NoShardOffloadBlocksTheCpuOnEachGradientCopy) {
  const auto offloaded = [](ShardingStrategy strategy) {
    return run([strategy](ScheduleInput& in) {
      in.fsdp.cpu_offload = true;
      in.fsdp.sharding_strategy = strategy;
    });
  };
  EXPECT_EQ(offloaded(ShardingStrategy::kNoShard)
                .cpu_steps(engine::CpuStepKind::kWait, "blocking d2h_grad")
                .size(),
            3u);
  EXPECT_TRUE(offloaded(ShardingStrategy::kFullShard)
                  .cpu_steps(engine::CpuStepKind::kWait, "blocking d2h_grad")
                  .empty());
}

// FSDP1 with CPU offload: after every backward that reduced gradients the CPU waits for the GPU
// (_post_backward_final_callback), so it cannot start the next micro-batch early: one micro-batch
// synchronizes once, and so do 3 under no_sync (only the last one reduces). Then
// prepare_gradient_for_optim makes the host copy the gradient and drops the GPU's: every
// _saved_grad_shard is freed between the synchronization and the optimizer's first kernel.
// (Accumulating outside no_sync with offload fails in PyTorch; the scenario loader refuses it.)
TEST(Knobs, CpuOffloadSynchronizesAfterTheReducingBackwardAndDropsTheGpuGradient) {
  const auto configure = [](std::int64_t micro_batches, bool no_sync) {
    return [micro_batches, no_sync](ScheduleInput& in) {
      in.fsdp.cpu_offload = true;
      in.cluster.pcie_bandwidth = gb_per_s(1000.0);
      in.training.global_batch = 2 * micro_batches;
      in.training.no_sync = no_sync;
      in.training.optimizer_impl = OptimizerImpl::kForLoop;
    };
  };
  const Knobs one = run(configure(1, false));
  const Knobs accumulated = run(configure(3, true));
  const std::string sync = "offload_grads_synchronize";
  for (const Knobs* k : {&one, &accumulated}) {
    const std::vector<std::size_t> waits = k->cpu_steps(engine::CpuStepKind::kWait, sync);
    ASSERT_EQ(waits.size(), 1u);
    const std::vector<std::size_t> frees =
        k->cpu_steps(engine::CpuStepKind::kFree, "._saved_grad_shard");
    const std::vector<std::size_t> optimizer =
        k->cpu_steps(engine::CpuStepKind::kWork, ".cpu_adamw");
    ASSERT_FALSE(optimizer.empty());
    std::size_t between = 0;
    for (const std::size_t f : frees) between += f > waits.back() && f < optimizer.back();
    EXPECT_EQ(between, 3u);  // the root's and both blocks'
  }
}

// FSDP1 divides each gradient before its reduction by the largest power of two f with f^2 below
// the data-parallel world and after it by world / f (DefaultState._get_gradient_predivide_factor,
// _reduce_grad's _div_if_needed): at world 2 only before (2, then 1), at world 8 both (4, then
// 2), at world 1 neither. The pre-divide reads and writes the unit's 40 MB gradient (80 us
// alone), the post-divide its shard (10M / 8 x 4 B = 5 MB: 10 us).
TEST(Knobs, Fsdp1DividesGradientsAroundTheReduction) {
  const auto world = [](std::int32_t gpus) {
    return run([gpus](ScheduleInput& in) {
      in.cluster.gpus_per_node = gpus;
      in.training.global_batch = gpus;
    });
  };
  const Knobs one = world(1);
  const Knobs two = world(2);
  const Knobs eight = world(8);
  EXPECT_EQ(one.count_suffix(".grad_predivide") + one.count_suffix(".grad_postdivide"), 0u);
  EXPECT_EQ(two.count_suffix(".grad_predivide"), 3u);
  EXPECT_EQ(two.count_suffix(".grad_postdivide"), 0u);
  EXPECT_EQ(eight.count_suffix(".grad_predivide"), 3u);
  EXPECT_EQ(eight.count_suffix(".grad_postdivide"), 3u);
  // Device time alone (beside a backward kernel they share the SMs, taking longer).
  const auto duration = [](const Knobs& k, const std::string& name) {
    return k.out.schedule.program.ops[k.first_index(name)].duration;
  };
  EXPECT_EQ(duration(eight, "blocks.0.grad_predivide"), us(80));
  EXPECT_EQ(duration(eight, "blocks.0.grad_postdivide"), us(10));
}

// FSDP2 lets NCCL average fp32 and bf16 reductions (ReduceOp.AVG, no kernel) and divides only
// fp16 ones, with FSDP1's factors (_get_gradient_divide_factors): at world 8, by 4 before the
// reduce-scatter on its stream (the unit's 10M-element fp16 input, 20 MB read and written:
// 40 us alone) and by 2 after it (the 1.25M-element shard, 5 MB: 5 us); at world 2 only before.
TEST(Knobs, Fsdp2DividesOnlyFp16GradientsAroundTheReduction) {
  const auto configure = [](std::int32_t gpus, Dtype reduce) {
    return run([gpus, reduce](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.param_dtype = Dtype::kBf16;
      in.fsdp.reduce_dtype = reduce;
      in.cluster.gpus_per_node = gpus;
      in.training.global_batch = gpus;
    });
  };
  for (const Dtype averaged : {Dtype::kFp32, Dtype::kBf16}) {
    const Knobs k = configure(8, averaged);
    EXPECT_EQ(k.count_suffix(".grad_predivide") + k.count_suffix(".grad_postdivide"), 0u);
  }
  const Knobs two = configure(2, Dtype::kFp16);
  EXPECT_EQ(two.count_suffix(".grad_predivide"), 3u);
  EXPECT_EQ(two.count_suffix(".grad_postdivide"), 0u);
  const Knobs eight = configure(8, Dtype::kFp16);
  EXPECT_EQ(eight.count_suffix(".grad_predivide"), 3u);
  EXPECT_EQ(eight.count_suffix(".grad_postdivide"), 3u);
  const engine::Program& p = eight.out.schedule.program;
  EXPECT_EQ(p.ops[eight.first_index("blocks.0.grad_predivide")].stream,
            p.ops[eight.first_index("blocks.0.reduce_scatter")].stream);
  EXPECT_EQ(p.ops[eight.first_index("blocks.0.grad_predivide")].duration, us(40));
  EXPECT_LE(eight.span("blocks.0.grad_predivide").second,
            eight.span("blocks.0.reduce_scatter").first);
  EXPECT_EQ(p.ops[eight.first_index("blocks.0.grad_postdivide")].duration, us(5));
  EXPECT_GE(eight.span("blocks.0.grad_postdivide").first,
            eight.span("blocks.0.reduce_scatter").second);
}

// _accumulate_sharded_grad: the first reduction of a step keeps its reduce-scatter output as
// _saved_grad_shard (no kernel, no second buffer); a later micro-batch's output is added into it
// (one kernel per unit) and dropped. A bf16 reduction is first cast to the fp32 FlatParameter's
// dtype (_cast_grad_to_param_dtype), every time.
TEST(Knobs, Fsdp1KeepsTheFirstReducedShardAndAddsTheLaterOnes) {
  const auto configure = [](std::int64_t micro_batches, Dtype reduce) {
    return [micro_batches, reduce](ScheduleInput& in) {
      in.training.global_batch = 2 * micro_batches;
      in.fsdp.reduce_dtype = reduce;
    };
  };
  const Knobs one = run(configure(1, Dtype::kFp32));
  const Knobs two = run(configure(2, Dtype::kFp32));
  const Knobs bf16 = run(configure(2, Dtype::kBf16));
  EXPECT_EQ(one.count_suffix(".accumulate_grad"), 0u);
  EXPECT_EQ(one.count_suffix(".grad_to_param_dtype"), 0u);
  EXPECT_EQ(one.tensor_bytes("blocks.0._saved_grad_shard"), 20'000'000);
  EXPECT_EQ(two.count_suffix(".accumulate_grad"), 3u);
  EXPECT_EQ(bf16.count_suffix(".grad_to_param_dtype"), 6u);
  EXPECT_EQ(bf16.count_suffix(".accumulate_grad"), 3u);
  // One micro-batch holds the shard once, not the output and a copy of it.
  const Knobs full = run([](ScheduleInput&) {});
  EXPECT_EQ(full.out.result.memory.peak_allocated, one.out.result.memory.peak_allocated);
}

// The limiter pops its queue in every _unshard, also of a unit still unsharded (nothing to
// gather). SHARD_GRAD_OP keeps every unit unsharded after forward, so its backward issues no
// all-gather, but each BACKWARD_PRE prefetch still pops: on 6 blocks, with two free events in
// flight, the step starts with [b2, b1, b0, root] queued (the previous backward's frees); the
// forward pops three (root, b0, b1); in backward b5's and b4's frees join the root's and the
// prefetches from b4's to b1's pre-backward pop four: 7 waits per step, 3 in the first (cold)
// step, whose queue starts empty.
TEST(Knobs, Fsdp1RateLimiterPopsForUnitsAlreadyUnsharded) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    const models::Layer head = w.layers.back();
    w.layers.pop_back();
    for (int b = 2; b < 6; ++b) {
      models::Layer l = w.layers[1];
      l.name = "blocks." + std::to_string(b);
      w.layers.push_back(l);
      w.total_numel += l.numel;
    }
    w.layers.push_back(head);
    return w;
  }();
  Knobs k;
  k.input.workload = &workload;
  k.input.cluster = testing::tiny_cluster();
  k.input.fsdp.param_dtype = Dtype::kFp32;
  k.input.fsdp.reduce_dtype = Dtype::kFp32;
  k.input.fsdp.sharding_strategy = ShardingStrategy::kShardGradOp;
  k.input.training.global_batch = 2;
  k.input.training.seq_len = 8;
  SimulationOptions warm;
  warm.warm_up = true;
  k.out = simulate_step(k.input, warm);
  EXPECT_EQ(k.count_suffix(".all_gather"), 14u);  // 7 units, one forward all-gather per step
  EXPECT_EQ(k.cpu_steps(engine::CpuStepKind::kWait, "rate_limiter").size(), 10u);
}

// FSDP1 without the rate limiter: nothing but CUDA's launch queues stops the CPU from running
// micro-batches ahead of the GPU (kernels here take far longer than their launches), and each
// micro-batch it runs ahead allocates its activations early. The queues hold 1,024 ops per
// stream, which this model's compute stream fills within some 100 micro-batches; from there the
// lead, and the memory, stop growing.
TEST(Knobs, LaunchQueuesBoundTheCpuLeadAcrossMicroBatches) {
  const auto micro_batches = [](std::int64_t n) {
    return [n](ScheduleInput& in) {
      in.fsdp.limit_all_gathers = false;
      in.training.global_batch = 2 * n;
    };
  };
  const Knobs few = run(micro_batches(4));
  const Knobs many = run(micro_batches(200));
  const Knobs more = run(micro_batches(300));
  EXPECT_GT(many.out.result.memory.peak_active, few.out.result.memory.peak_active);
  EXPECT_EQ(more.out.result.memory.peak_active, many.out.result.memory.peak_active);
}

// FSDP2 (fp32, so copy-in and copy-out are plain copies): copy-in 40 us alone on its stream, the
// all-gather 20 us on its stream, copy-out 80 us on the compute stream; a copy-in beside a
// compute-stream op shares the SMs with it, each at half rate. Forward: copy-in(root) 0-40, AG
// 40-60; copy-in(b0) from 40, half done at 60 when copy-out(root) starts beside it: it ends at
// 100 (AG 100-120), copy-out(root) at 160; copy-in(b1) waits for it: 160-240 beside the
// embedding (160-300), AG 240-260; copy-out(b0) 300-380, b0 380-480, copy-out(b1) 480-560, b1
// from 560. Backward: b1's prefetch waits for its forward copy-out (560): copy-in 560-640
// beside b1's forward (to 700), AG 640-660; head 700-800, head bwd 800-1000; copy-out 1000-1080,
// b1 bwd from 1080 beside b0's copy-in (1080-1160, AG 1160-1180) to 1320, RS copy-in 1320-1400,
// RS 1400-1420; b0: copy-out 1400-1480, bwd 1480-1680, RS copy-in 1680-1760, RS 1760-1780;
// embedding bwd 1760-1960, root RS copy-in 1960-2040, RS 2040-2060 (its fp32 output is the
// fp32 gradient: no kernel after it); AdamW 420: 2480.
TEST(Knobs, Fsdp2CopiesInAndOutAroundEachAllGather) {
  const Knobs k = run([](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
  });
  EXPECT_EQ(k.spans("blocks.1.all_gather_copy_in").front(), std::make_pair(us(160), us(240)));
  EXPECT_EQ(k.spans("blocks.1.all_gather").front(), std::make_pair(us(240), us(260)));
  EXPECT_EQ(k.spans("blocks.1.all_gather").back(), std::make_pair(us(640), us(660)));
  EXPECT_EQ(k.spans("blocks.1.all_gather_copy_out").back(), std::make_pair(us(1000), us(1080)));
  EXPECT_EQ(k.span("blocks.0.reduce_scatter"), std::make_pair(us(1760), us(1780)));
  EXPECT_EQ(k.step(), us(2480));
  EXPECT_EQ(k.count_suffix(".accumulate_grad"), 0u);
  // No record_stream: every block is reusable when it is freed.
  EXPECT_EQ(k.out.result.memory.peak_allocated, k.out.result.memory.peak_active);
}

// FSDP2 under no_sync: with reduce_dtype equal to param_dtype each parameter keeps its .grad,
// and the next backward's AccumulateGrad adds every new gradient into it as autograd makes it:
// one parameter's gradient in flight (the layer's largest, 6M x 4 B here), one add per
// parameter. With reduce_dtype wider, the kept gradient is a reduce_dtype copy
// (to_accumulated_grad_if_needed) and the new ones are made beside it, whole, then added into it
// by accumulate_unsharded_grad_if_needed.
TEST(Knobs, Fsdp2AccumulatesInPlaceWhenReduceDtypeIsParamDtype) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    for (models::Layer& l : w.layers) {
      if (l.kind == models::LayerKind::kBlock) {
        l.parameter_numels = {6'000'000, 4'000'000};
        l.parameter_tensors = 2;
      }
    }
    return w;
  }();
  const auto accumulate = [](Dtype param, Dtype reduce) {
    return run_on(workload, [param, reduce](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.limit_all_gathers = false;
      in.fsdp.param_dtype = param;
      in.fsdp.reduce_dtype = reduce;
      in.training.global_batch = 4;
      in.training.no_sync = true;
    });
  };
  const Knobs in_place = accumulate(Dtype::kFp32, Dtype::kFp32);
  EXPECT_EQ(in_place.tensor_bytes("blocks.0.param_grad_in_flight"), 24'000'000);
  EXPECT_EQ(in_place.count_suffix("blocks.0.accumulate_grad"), 2u);
  EXPECT_EQ(in_place.out.schedule.program.ops[in_place.first_index("blocks.0.accumulate_grad")]
                .bytes.value(),
            3 * 24'000'000);
  EXPECT_EQ(in_place.count_suffix(".accumulate_unsharded_grad"), 0u);
  const Knobs upcast = accumulate(Dtype::kBf16, Dtype::kFp32);
  EXPECT_EQ(upcast.count_suffix(".param_grad_in_flight"), 0u);
  EXPECT_EQ(upcast.count_suffix("blocks.0.accumulate_unsharded_grad"), 1u);
}

// With a tied table the head's share of its gradient is in flight from the head's backward until
// the lookup's is added in the embedding's backward (autograd's input buffer), where it goes.
TEST(Knobs, Fsdp2HoldsATiedTablesGradientUntilTheLookupsIsAdded) {
  models::WorkloadOptions options;
  options.seq_len = 8;
  // 2 layers, d 64, 4 heads, vocab 1000, its embedding tied to the head.
  static const models::Workload workload =
      models::build_workload(models::testing::mpt_spec(2, 64, 4, 1000, 8), options);
  const Knobs k = run_on(workload, [](ScheduleInput& in) {
    in.cluster.gpu.norm_memory_efficiency = {1.0, 1.0, 1.0, 1.0, 1.0};  // tiny GPU: norms priced
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.training.global_batch = 4;
    in.training.no_sync = true;
  });
  const engine::Program& p = k.out.schedule.program;
  std::size_t freed = 0;
  std::size_t lookup_backward = 0;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const engine::CpuStep& step = p.cpu[i];
    if (step.kind == engine::CpuStepKind::kFree &&
        p.names[p.tensors[step.target].name] == "head.param_grad_in_flight") {
      freed = i;
    }
    if (step.kind == engine::CpuStepKind::kLaunch &&
        p.names[p.ops[step.target].name].starts_with("embedding.bwd")) {
      lookup_backward = i;
    }
  }
  ASSERT_GT(freed, 0u);
  EXPECT_GT(freed, lookup_backward);  // the last micro-batch's, after its lookup's backward
}

// Where param_dtype differs from the storage dtype, FSDP2 casts each unit's shards into one
// param_dtype buffer (_get_param_all_gather_inputs' _foreach_copy_) that all_gather_copy_in then
// copies: a blocks.N shard of 5M fp32 elements is read (20 MB) and written in bf16 (10 MB), and
// the 10 MB buffer is copied into the all-gather input. Where the dtypes agree, FSDPParam's
// param_dtype is None and the shards go to all_gather_copy_in as they are.
TEST(Knobs, Fsdp2CastsTheShardsIntoAParamDtypeBufferBeforeTheCopyIn) {
  const auto with = [](Dtype storage, Dtype param) {
    return run([storage, param](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.limit_all_gathers = false;
      in.training.param_storage_dtype = storage;
      in.fsdp.param_dtype = param;
    });
  };
  const auto op_bytes = [](const Knobs& k, const std::string& name) {
    return k.out.schedule.program.ops[k.first_index(name)].bytes.value();
  };
  const Knobs mixed = with(Dtype::kFp32, Dtype::kBf16);
  EXPECT_EQ(op_bytes(mixed, "blocks.0.all_gather_cast"), 30'000'000);
  EXPECT_EQ(op_bytes(mixed, "blocks.0.all_gather_copy_in"), 20'000'000);
  EXPECT_EQ(mixed.tensor_bytes("blocks.0.all_gather_cast_input"), 10'000'000);
  for (const Dtype d : {Dtype::kFp32, Dtype::kBf16}) {
    const Knobs same = with(d, d);
    EXPECT_EQ(same.count_suffix(".all_gather_cast"), 0u) << dtype_name(d);
    EXPECT_EQ(op_bytes(same, "blocks.0.all_gather_copy_in"), 2 * 5'000'000 * dtype_bytes(d))
        << dtype_name(d);
  }
  // Offloaded, the shard is first copied to the device into a tensor of its own (20 MB), then
  // cast (FSDPParam.all_gather_inputs: .to(device), then _to_dtype_if_needed), then copied in.
  const Knobs offloaded = run([](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.fsdp.param_dtype = Dtype::kBf16;
    in.fsdp.cpu_offload = true;
  });
  EXPECT_EQ(offloaded.tensor_bytes("blocks.0.h2d_shard"), 20'000'000);
  EXPECT_EQ(op_bytes(offloaded, "blocks.0.all_gather_cast"), 30'000'000);
  EXPECT_EQ(op_bytes(offloaded, "blocks.0.all_gather_copy_in"), 20'000'000);
}

// Two FSDP2 steps (a caching allocator makes simulate_step run a warm-up step): launches cost
// nothing, so the CPU issues the measured step while the GPU still runs the warm-up step's
// AdamW over the three 20 MB fp32 gradient shards. zero_grad drops them with no record_stream,
// so at no instant is a block active that is no longer allocated.
TEST(Knobs, Fsdp2ZeroGradFreesGradientShardsAtOnce) {
  static const models::Workload workload = testing::tiny_workload();
  ScheduleInput in;
  in.workload = &workload;
  in.cluster = testing::tiny_cluster();
  in.fsdp.version = 2;
  in.fsdp.param_dtype = Dtype::kFp32;
  in.fsdp.reduce_dtype = Dtype::kFp32;
  in.training.global_batch = 2;
  in.training.seq_len = 8;
  SimulationOptions options;
  options.record_memory = true;
  options.allocator = memory::AllocatorConfig{};
  options.allocator->capacity = in.cluster.gpu.usable_memory();
  const SimulationOutput out = simulate_step(in, options);
  ASSERT_EQ(out.schedule.units.size(), 3u);
  ASSERT_FALSE(out.memory_samples.empty());
  for (const memory::MemorySample& m : out.memory_samples) EXPECT_EQ(m.active, m.allocated);
}

// FSDP2 over two micro-batches, each reducing (foreach_reduce): the first sets each sharded
// .grad (a view of the fp32 output, no kernel), the second adds into it on the GPU. Under CPU
// offload every sharded gradient is copied to the host and dropped from the GPU; the second
// micro-batch's copy blocks the CPU (there is a host gradient to add to) and the CPU adds it.
TEST(Knobs, Fsdp2AccumulatesShardedGradientsOnTheGpuOrOnTheHost) {
  const auto configure = [](bool offload) {
    return [offload](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.limit_all_gathers = false;
      in.fsdp.cpu_offload = offload;
      in.training.global_batch = 4;
    };
  };
  const Knobs gpu = run(configure(false));
  const Knobs host = run(configure(true));
  EXPECT_EQ(gpu.count_suffix(".reduce_scatter"), 6u);
  EXPECT_EQ(gpu.count_suffix(".accumulate_grad"), 3u);
  EXPECT_EQ(gpu.count_suffix(".d2h_grad"), 0u);
  EXPECT_EQ(host.count_suffix(".accumulate_grad"), 0u);
  EXPECT_EQ(host.count_suffix(".d2h_grad"), 6u);
  EXPECT_EQ(host.cpu_steps(engine::CpuStepKind::kWork, ".accumulate_grad_on_host").size(), 3u);
  EXPECT_EQ(host.cpu_steps(engine::CpuStepKind::kWait, ".d2h_grad (blocking)").size(), 3u);
  EXPECT_EQ(gpu.cpu_steps(engine::CpuStepKind::kWait, ".d2h_grad (blocking)").size(), 0u);
  // finalize_backward blocks the CPU on the first micro-batch's non-blocking copies, before it
  // issues the second micro-batch; the blocking copies leave no event to wait for.
  const std::vector<std::size_t> finalized =
      host.cpu_steps(engine::CpuStepKind::kWait, "grad_offload_event.synchronize");
  ASSERT_EQ(finalized.size(), 1u);
  EXPECT_LT(finalized[0],
            host.cpu_steps(engine::CpuStepKind::kWait, ".d2h_grad (blocking)").front());
  EXPECT_TRUE(gpu.cpu_steps(engine::CpuStepKind::kWait, "grad_offload_event.synchronize").empty());
  // No sharded gradient stays on the GPU: each reduce-scatter output is a communication buffer.
  const engine::Program& p = host.out.schedule.program;
  for (const engine::TensorInfo& t : p.tensors) {
    if (p.names[t.name].find("reduce_scatter_output") == std::string::npos) continue;
    EXPECT_EQ(t.category, static_cast<std::uint8_t>(memory::MemoryCategory::kCommunication))
        << p.names[t.name];
  }
}

// fully_shard(reshard_after_forward=2): after its forward a block keeps its 1/2 of the
// parameters, written by a copy on the compute stream; the backward all-gather from that shard
// (copy-in on its own stream) waits for the copy (FSDPParamGroup.unshard waits on
// _reshard_after_forward_event), though the CPU issues it long before.
TEST(Knobs, Fsdp2AllGathersFromThePostForwardShardOnlyOnceItIsWritten) {
  const Knobs k = run([](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.fsdp.reshard_after_forward = 2;
  });
  for (const char* block : {"blocks.0", "blocks.1"}) {
    const std::string name(block);
    const auto resharded = k.span(name + ".post_forward_reshard");
    const auto backward_copy_in = k.spans(name + ".all_gather_copy_in").back();
    EXPECT_GE(backward_copy_in.first, resharded.second) << name;
  }
}

// FSDP2's per-unit reshard_after_forward. By default the two blocks reshard and the root does not:
// forward all-gathers root, blocks.0, blocks.1; backward blocks.1 and blocks.0 again (5). The
// last block kept (torchtitan's default policy) is not gathered again (4); the root resharded
// (an explicit fully_shard(model, reshard_after_forward=True)) is (6), done before the head's
// gradient kernel, which needs its parameters (the CPU issues it as backward starts, so it may
// overlap the end of the forward on the GPU).
TEST(Knobs, Fsdp2TakesReshardAfterForwardPerUnitForTheLastBlockAndTheRoot) {
  const auto fsdp2 = [](std::int32_t last, std::int32_t root) {
    return run([=](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.limit_all_gathers = false;
      in.fsdp.last_unit_reshard_after_forward = last;
      in.fsdp.root_reshard_after_forward = root;
    });
  };
  EXPECT_EQ(fsdp2(1, 0).count_suffix(".all_gather"), 5u);
  const Knobs last_kept = fsdp2(0, 0);
  EXPECT_EQ(last_kept.count_suffix(".all_gather"), 4u);
  EXPECT_EQ(last_kept.spans("blocks.1.all_gather").size(), 1u);
  const Knobs root_resharded = fsdp2(1, 1);
  EXPECT_EQ(root_resharded.count_suffix(".all_gather"), 6u);
  const auto root_gathers = root_resharded.spans("root.all_gather");
  ASSERT_EQ(root_gathers.size(), 2u);
  EXPECT_LE(root_gathers.back().second, root_resharded.span("head.bwd.bwd").first);
}

// torchtitan's FSDP2 units (fsdp.wrap_embedding_and_head, [norm, output] kept after forward):
// the embedding (6M) and the head (4M) are units of their own, the root holds nothing. Forward
// gathers embedding, blocks.0, blocks.1, head; backward blocks.1, blocks.0 and the embedding
// again (7, no root.all_gather), the embedding's prefetched by blocks.0's pre-backward before its
// lookup's backward; every unit reduce-scatters once, the embedding's after that backward. Freed
// after its forward, the embedding's 24 MB of fp32 parameters are no longer held at the peak,
// in the head's backward, beside the head's 16 MB and blocks.1's prefetched 40 MB.
TEST(Knobs, Fsdp2WrapsTheEmbeddingAndTheHeadAsTorchtitanDoes) {
  const auto fsdp2 = [](bool own_units) {
    return run([=](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.limit_all_gathers = false;
      in.fsdp.wrap_embedding_and_head = own_units;
      if (own_units) in.fsdp.last_unit_reshard_after_forward = 0;
    });
  };
  const Knobs root_holds = fsdp2(false);
  const Knobs k = fsdp2(true);
  std::vector<std::string> names;
  for (const FsdpUnit& u : k.out.schedule.units) names.push_back(u.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embedding", "blocks.0", "blocks.1", "head", "root"}));
  EXPECT_FALSE(k.out.schedule.units.back().holds_parameters());
  EXPECT_EQ(k.count_suffix(".all_gather"), 7u);
  EXPECT_EQ(k.spans("root.all_gather").size(), 0u);
  EXPECT_EQ(k.spans("head.all_gather").size(), 1u);
  const auto embedding_gathers = k.spans("embedding.all_gather");
  ASSERT_EQ(embedding_gathers.size(), 2u);
  EXPECT_LE(embedding_gathers.back().second, k.span("embedding.bwd.bwd").first);
  EXPECT_EQ(k.count_suffix(".reduce_scatter"), 4u);
  EXPECT_GE(k.span("embedding.reduce_scatter").first, k.span("embedding.bwd.bwd").second);
  EXPECT_EQ(root_holds.out.result.memory.peak_allocated.value() -
                k.out.result.memory.peak_allocated.value(),
            24'000'000);
}

// torchtitan's ChunkedLossWrapper on the tiny workload's head unit, split as the chunked build
// splits it: "head" the final norm (1M, 2 MB saved) and "loss" one chunk of the LM head and the
// loss (3M, 10 MB saved a chunk), run twice between the forward and the backward (bf16
// parameters, fp32 reduction). Each chunk's forward then backward runs before the next chunk's.
// The LM head's bf16 gradient goes to an fp32 copy after chunk 0 (to_accumulated_grad_if_needed)
// and is added to after chunk 1, which reduce-scatters it: 3M fp32 elements, 12 MB, in a
// reduce-scatter of its own; the norm's 1M (4 MB) goes in backward. The loss reshards the unit,
// so its backward gathers it again (2 all-gathers of the head, 1 without the chunks), behind
// the LM head's reduce-scatter on the communicator they share, before the norm's backward. The
// hidden states (8 MB) are freed as the loss returns, before the backward's first kernel, and the
// gradient the chunks made (8 MB, cast back from the 16 MB fp32 buffer) after the norm's
// backward.
TEST(Knobs, Fsdp2RunsAChunkedLossBetweenForwardAndBackward) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    w.layers.back() = testing::tiny_layer("head", models::LayerKind::kHead, 1'000'000, 2'000'000);
    models::Layer loss =
        testing::tiny_layer("loss", models::LayerKind::kChunkedLoss, 3'000'000, 10'000'000);
    loss.loss_chunking = {2, Bytes(8'000'000), Bytes(16'000'000)};
    w.layers.push_back(loss);
    return w;
  }();
  const auto fsdp2 = [](const models::Workload& on, std::int32_t version, bool own_units) {
    return run_on(on, [=](ScheduleInput& in) {
      in.fsdp.version = version;
      in.fsdp.limit_all_gathers = false;
      in.fsdp.param_dtype = Dtype::kBf16;
      in.fsdp.wrap_embedding_and_head = own_units;
      in.fsdp.last_unit_reshard_after_forward = 0;
    });
  };
  const Knobs k = fsdp2(workload, 2, true);
  std::vector<std::string> names;
  for (const FsdpUnit& u : k.out.schedule.units) names.push_back(u.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embedding", "blocks.0", "blocks.1", "head", "root"}));
  EXPECT_EQ(k.out.schedule.units[3].numel, 4'000'000);
  const auto chunk_forwards = k.spans("loss.fwd.mlp");
  const auto chunk_backwards = k.spans("loss.bwd.bwd");
  ASSERT_EQ(chunk_forwards.size(), 2u);
  ASSERT_EQ(chunk_backwards.size(), 2u);
  EXPECT_LE(k.span("head.fwd.mlp").second, chunk_forwards[0].first);
  EXPECT_LE(chunk_backwards[0].second, chunk_forwards[1].first);
  EXPECT_EQ(k.spans("head.lm_head.grad_to_reduce_dtype").size(), 1u);
  EXPECT_EQ(k.spans("head.lm_head.accumulate_unsharded_grad").size(), 1u);
  EXPECT_EQ(k.tensor_bytes("head.lm_head.reduce_scatter_input"), 12'000'000);
  EXPECT_EQ(k.tensor_bytes("head.reduce_scatter_input"), 4'000'000);
  const auto lm_head_reduce = k.span("head.lm_head.reduce_scatter");
  EXPECT_GE(lm_head_reduce.first, chunk_backwards[1].second);
  const auto head_gathers = k.spans("head.all_gather");
  ASSERT_EQ(head_gathers.size(), 2u);
  EXPECT_GE(head_gathers[1].first, lm_head_reduce.second);
  EXPECT_LE(head_gathers[1].second, k.span("head.bwd.bwd").first);
  EXPECT_GE(k.span("head.reduce_scatter").first, k.span("head.bwd.bwd").second);
  EXPECT_EQ(fsdp2(testing::tiny_workload(), 2, true).spans("head.all_gather").size(), 1u);

  EXPECT_EQ(k.tensor_bytes("loss.hidden"), 8'000'000);
  EXPECT_EQ(k.tensor_bytes("loss.gradient_buffer"), 16'000'000);
  EXPECT_EQ(k.tensor_bytes("loss.hidden_gradient"), 8'000'000);
  const auto launch = [&](const std::string& name) {
    return k.cpu_steps(engine::CpuStepKind::kLaunch, name);
  };
  const auto hidden_freed = k.cpu_steps(engine::CpuStepKind::kFree, "loss.hidden");
  const auto gradient_freed = k.cpu_steps(engine::CpuStepKind::kFree, "loss.hidden_gradient");
  ASSERT_EQ(hidden_freed.size(), 1u);
  ASSERT_EQ(gradient_freed.size(), 1u);
  EXPECT_GT(hidden_freed[0], launch("loss.bwd.bwd").back());
  EXPECT_LT(hidden_freed[0], launch("head.bwd.bwd").front());
  EXPECT_GT(gradient_freed[0], launch("head.bwd.bwd").front());

  // Only FSDP2 with the head's unit runs one.
  EXPECT_THROW(fsdp2(workload, 1, false), std::invalid_argument);
  EXPECT_THROW(fsdp2(workload, 2, false), std::invalid_argument);
  EXPECT_THROW(
      run_on(workload, [](ScheduleInput& in) { in.training.parallelism = Parallelism::kDdp; }),
      std::invalid_argument);
}

// Autocast over fp32 weights with every block checkpointed (the tiny workload with a 20 MB bf16
// copy of each block's weights made by autocast). FSDP2's unsharded parameters are leaves, so the
// autocast cache keeps each block's copy, which the checkpoint does not save, until the forward
// leaves autocast after the head: both blocks' copies are alive together at the end of forward,
// and freed before the first backward kernel. FSDP1 reads views of its FlatParameter, which
// autocast does not cache: no such copy. Not checkpointed, the copies are autograd's saved
// tensors (blocks.N.saved), no cache tensor of their own.
TEST(Knobs, Fsdp2KeepsACheckpointedBlocksAutocastCopiesUntilTheForwardEnds) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    for (const std::size_t b : {std::size_t{1}, std::size_t{2}})
      w.layers[b].autocast_weight_copies = {Bytes(20'000'000)};
    return w;
  }();
  const auto steps = [](const Knobs& k, engine::CpuStepKind kind, const std::string& name) {
    return k.cpu_steps(kind, name);
  };
  const auto run_with = [](std::int32_t version, ActivationCheckpointing ac) {
    return run_on(workload, [=](ScheduleInput& in) {
      in.fsdp.version = version;
      in.fsdp.limit_all_gathers = false;
      in.training.activation_checkpointing = ac;
    });
  };
  const Knobs k = run_with(2, ActivationCheckpointing::kFull);
  EXPECT_EQ(k.tensor_bytes("blocks.0.autocast_cache"), 20'000'000);
  const auto alloc0 = steps(k, engine::CpuStepKind::kAlloc, "blocks.0.autocast_cache");
  const auto alloc1 = steps(k, engine::CpuStepKind::kAlloc, "blocks.1.autocast_cache");
  const auto free0 = steps(k, engine::CpuStepKind::kFree, "blocks.0.autocast_cache");
  const auto head_forward = steps(k, engine::CpuStepKind::kLaunch, "head.fwd.mlp");
  const auto head_backward = steps(k, engine::CpuStepKind::kLaunch, "head.bwd.bwd");
  ASSERT_FALSE(alloc0.empty() || alloc1.empty() || free0.empty() || head_forward.empty() ||
               head_backward.empty());
  EXPECT_EQ(alloc0.size(), free0.size());  // one per forward
  EXPECT_LT(alloc1.front(), free0.front());
  EXPECT_LT(head_forward.front(), free0.front());
  EXPECT_LT(free0.front(), head_backward.front());
  EXPECT_TRUE(steps(run_with(1, ActivationCheckpointing::kFull), engine::CpuStepKind::kAlloc,
                    "autocast_cache")
                  .empty());
  EXPECT_TRUE(steps(run_with(2, ActivationCheckpointing::kNone), engine::CpuStepKind::kAlloc,
                    "autocast_cache")
                  .empty());
  // Saved tensors offloaded to the host (save_on_cpu) leave the cache's device copy behind: it
  // is kept once the block's saved tensors have been copied out.
  const Knobs offloaded = run_on(workload, [](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.training.offload_activations = true;
  });
  const auto kept = steps(offloaded, engine::CpuStepKind::kAlloc, "blocks.0.autocast_cache");
  const auto to_host = steps(offloaded, engine::CpuStepKind::kLaunch, "blocks.0.saved.to_host");
  ASSERT_FALSE(kept.empty() || to_host.empty());
  EXPECT_GT(kept.front(), to_host.front());
}

// FSDP1 wraps one module per unit: the [norm, output] group is FSDP2's, and a tied head has no
// unit of its own.
TEST(Knobs, EmbeddingAndHeadUnitsAreRefusedForFsdp1AndATiedHead) {
  ScheduleInput in = testing::tiny_input();
  in.fsdp.wrap_embedding_and_head = true;
  EXPECT_THROW(simulate_step(in, {}), std::invalid_argument);
  // tiny_linear_workload with its head's 200,000-element weight counted in the embedding.
  models::Workload tied = testing::tiny_linear_workload();
  tied.layers.front().numel = 600'000;
  tied.layers.back().numel = 0;
  tied.layers.back().parameter_tensors = 0;
  in.workload = &tied;
  in.fsdp.version = 2;
  in.fsdp.limit_all_gathers = false;
  EXPECT_THROW(simulate_step(in, {}), std::invalid_argument);
}

// FSDP2's explicit prefetch lists, n units deep. Forward (with forward_prefetch): the root's
// pre-forward gathers blocks.0 and, with n = 2, blocks.1 too, before the embedding's kernels
// are issued (with n = 1 blocks.1 waits for blocks.0's pre-forward). Backward: the root's
// pre-backward gathers blocks.1 and, with n = 2, blocks.0 before the head's gradient kernel is
// issued (with n = 1 blocks.1's pre-backward does, after it).
TEST(Knobs, Fsdp2PrefetchesAsManyUnitsAsItsListsName) {
  const auto fsdp2 = [](std::int32_t n) {
    return run([=](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.limit_all_gathers = false;
      in.fsdp.forward_prefetch = true;
      in.fsdp.forward_prefetch_modules = n;
      in.fsdp.backward_prefetch_modules = n;
    });
  };
  const auto launch = [](const Knobs& k, const std::string& name, std::size_t nth) {
    const std::vector<std::size_t> found = k.cpu_steps(engine::CpuStepKind::kLaunch, name);
    EXPECT_GT(found.size(), nth) << name;
    return found.size() > nth ? found[nth] : std::size_t{0};
  };
  const Knobs one = fsdp2(1);
  const Knobs two = fsdp2(2);
  EXPECT_GT(launch(one, "blocks.1.all_gather", 0), launch(one, "embedding.fwd.attn", 0));
  EXPECT_LT(launch(two, "blocks.1.all_gather", 0), launch(two, "embedding.fwd.attn", 0));
  EXPECT_GT(launch(one, "blocks.0.all_gather", 1), launch(one, "head.bwd.bwd", 0));
  EXPECT_LT(launch(two, "blocks.0.all_gather", 1), launch(two, "head.bwd.bwd", 0));
  EXPECT_EQ(one.count_suffix(".all_gather"), two.count_suffix(".all_gather"));
}

// FSDP2 has no flat parameter: autograd makes each layer's parameter gradients at that layer's
// backward. The root's 4M head gradient comes first (16 MB fp32), the blocks' next, its 6M
// embedding gradient (24 MB) last, after both blocks' reductions were issued.
TEST(Knobs, Fsdp2MakesTheRootsEmbeddingGradientLast) {
  const Knobs k = run([](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
  });
  EXPECT_EQ(k.tensor_bytes("head.param_grads"), 16'000'000);
  EXPECT_EQ(k.tensor_bytes("embedding.param_grads"), 24'000'000);
  const auto first = [&k](engine::CpuStepKind kind, const std::string& name) {
    const std::vector<std::size_t> found = k.cpu_steps(kind, name);
    EXPECT_FALSE(found.empty()) << name;
    return found.empty() ? std::size_t{0} : found.front();
  };
  const std::size_t head = first(engine::CpuStepKind::kAlloc, "head.param_grads");
  const std::size_t block = first(engine::CpuStepKind::kAlloc, "blocks.0.param_grads");
  const std::size_t embedding = first(engine::CpuStepKind::kAlloc, "embedding.param_grads");
  EXPECT_LT(head, block);
  EXPECT_LT(first(engine::CpuStepKind::kLaunch, "blocks.0.reduce_scatter"), embedding);
}

// FSDP2 HSDP with bf16 reduction of fp32 parameters: each unit's bf16 reduce-scatter output is
// the all-reduce input, kept in FSDPParamGroup._all_reduce_state until the end of backward
// after its fp32 copy became the gradient, so no unit's is dropped before the last all-reduce
// was issued.
TEST(Knobs, Fsdp2HsdpKeepsEachAllReduceInputUntilTheEndOfBackward) {
  const Knobs k = run([](ScheduleInput& in) {
    in.cluster.nodes = 2;
    in.cluster.nic_bandwidth_per_node = gb_per_s(400.0);
    in.training.global_batch = 4;
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.fsdp.reduce_dtype = Dtype::kBf16;
    in.fsdp.sharding_strategy = ShardingStrategy::kHybridShard;
    in.fsdp.shard_group_size = 2;
  });
  const std::vector<std::size_t> last_all_reduce =
      k.cpu_steps(engine::CpuStepKind::kLaunch, "root.all_reduce");
  const std::vector<std::size_t> output_frees =
      k.cpu_steps(engine::CpuStepKind::kFree, ".reduce_scatter_output");
  ASSERT_FALSE(last_all_reduce.empty());
  ASSERT_EQ(output_frees.size(), 3u);
  for (const std::size_t i : output_frees) EXPECT_GT(i, last_all_reduce.back());
}

// model.to(torch.bfloat16) before fully_shard (FSDP2, bf16 all-gather, fp32 reduce-scatter):
// FSDPParam.orig_dtype is bf16, so each rank's 15M-element shard (3 units x 5M) holds 2 bytes
// per parameter (30 MB), AdamW's zeros_like states 2 x 2 bytes (60 MB) instead of 60 MB and
// 120 MB; foreach_reduce casts the fp32 reduce-scatter output to bf16, so a unit's sharded
// gradient is 5M x 2 = 10 MB (fp32 storage keeps the 20 MB fp32 output itself); fused AdamW's 7
// passes over 5M bf16 elements move 70 MB: 70 us instead of 140 us.
TEST(Knobs, Fsdp2Bf16StorageHalvesShardsGradientsAndAdamwStates) {
  const auto configure = [](Dtype storage) {
    return [storage](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.param_dtype = Dtype::kBf16;
      in.training.param_storage_dtype = storage;
    };
  };
  const Knobs fp32 = run(configure(Dtype::kFp32));
  const Knobs bf16 = run(configure(Dtype::kBf16));
  EXPECT_EQ(fp32.baseline(memory::MemoryCategory::kParameters), 60'000'000);
  EXPECT_EQ(bf16.baseline(memory::MemoryCategory::kParameters), 30'000'000);
  EXPECT_EQ(fp32.baseline(memory::MemoryCategory::kOptimizerState), 120'000'000);
  EXPECT_EQ(bf16.baseline(memory::MemoryCategory::kOptimizerState), 60'000'000);
  EXPECT_EQ(fp32.tensor_bytes("blocks.0.reduce_scatter_output"), 20'000'000);
  EXPECT_EQ(fp32.count_suffix(".grad_to_storage_dtype"), 0u);
  EXPECT_EQ(bf16.tensor_bytes("blocks.0.grad_output"), 10'000'000);
  EXPECT_EQ(bf16.count_suffix(".grad_to_storage_dtype"), 3u);
  const auto duration = [](const Knobs& k, const std::string& name) {
    const auto [start, end] = k.span(name);
    return end - start;
  };
  EXPECT_EQ(duration(fp32, "blocks.0.adamw"), us(140));
  EXPECT_EQ(duration(bf16, "blocks.0.adamw"), us(70));
}

// FSDP2 keeps each parameter's unsharded copy in a tensor of its own (FSDPParam's
// all_gather_outputs, allocated at each unshard and freed at each reshard), and autograd makes
// each parameter's gradient on its own. With blocks.0's 10M parameters itemized as 4M + 6M
// (fp32: 16 and 24 MB), each unshard allocates those two and its backward their two gradients;
// the root, whose embedding and head are not itemized, keeps one tensor of 40 MB, and FSDP1's
// flat parameter stays one tensor.
TEST(Knobs, Fsdp2AllocatesEachParametersUnshardedCopyAndGradientOnItsOwn) {
  const models::Workload& workload = blocks0_itemized();
  const auto sizes = [](const Knobs& k, const std::string& name) {
    std::vector<std::int64_t> out;
    const engine::Program& p = k.out.schedule.program;
    for (const engine::TensorInfo& t : p.tensors) {
      if (p.names[t.name] == name) out.push_back(t.size.value());
    }
    return out;
  };
  const Knobs fsdp2 = run_on(workload, [](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
  });
  // Every allocation of `name` comes in pairs of 16 and 24 MB.
  const auto expect_per_parameter = [&](const std::string& name) {
    const std::vector<std::int64_t> all = sizes(fsdp2, name);
    ASSERT_FALSE(all.empty()) << name;
    ASSERT_EQ(all.size() % 2, 0u) << name;
    for (std::size_t i = 0; i < all.size(); i += 2) {
      EXPECT_EQ(all[i], 16'000'000) << name;
      EXPECT_EQ(all[i + 1], 24'000'000) << name;
    }
  };
  expect_per_parameter("blocks.0.unsharded_params");
  expect_per_parameter("blocks.0.param_grads");
  EXPECT_FALSE(sizes(fsdp2, "blocks.1.unsharded_params").empty());
  for (const std::int64_t b : sizes(fsdp2, "blocks.1.unsharded_params")) EXPECT_EQ(b, 40'000'000);
  for (const std::int64_t b : sizes(fsdp2, "root.unsharded_params")) EXPECT_EQ(b, 40'000'000);
  EXPECT_FALSE(sizes(fsdp2, "root.unsharded_params").empty());
  const Knobs fsdp1 = run_on(workload, [](ScheduleInput&) {});
  const std::vector<std::int64_t> flat = sizes(fsdp1, "blocks.0._full_param_padded");
  ASSERT_FALSE(flat.empty());
  for (const std::int64_t b : flat) EXPECT_EQ(b, 40'000'000);
}

// FSDP2 on one GPU (PyTorch 2.9 on) gathers and reduce-scatters nothing. Each unit's shard is
// copied into its unsharded tensor on the compute stream (10M fp32: read and write 40 MB, 80 us)
// before its forward and again before its backward; each reduction copies the chunk-cat input
// into the output on the reduce-scatter stream (80 us), a cudaMemcpyAsync that a copy engine
// moves beside the SMs' work. Root copy 0-80, embedding 80-180, blocks.0 copy 180-260 and
// forward 260-360, blocks.1 copy 360-440 and forward 440-540, head 540-640; head backward
// 640-840, blocks.1 copy 840-920, backward 920-1120, copy-in 1120-1200 and copy 1200-1280
// (reduce-scatter stream), blocks.0 copy 1200-1280, backward 1280-1480, copy-in 1480-1560,
// copy 1560-1640; embedding backward 1560-1760, the root's copy-in 1760-1840 and copy
// 1840-1920; fused AdamW 3 x 280 us: 2760.
TEST(Knobs, Fsdp2OnOneGpuCopiesEachShardInAndReducesByACopy) {
  const Knobs k = run([](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.cluster.gpus_per_node = 1;
    in.training.global_batch = 1;
  });
  EXPECT_EQ(k.count_suffix(".all_gather"), 0u);
  EXPECT_EQ(k.count_suffix(".all_gather_copy_in"), 0u);
  EXPECT_EQ(k.count_suffix(".all_gather_copy_out"), 0u);
  EXPECT_EQ(k.count_suffix(".reduce_scatter"), 0u);
  EXPECT_EQ(k.spans("root.copy_shard"),
            (std::vector<std::pair<SimTime, SimTime>>{{us(0), us(80)}}));
  EXPECT_EQ(k.spans("blocks.0.copy_shard"),
            (std::vector<std::pair<SimTime, SimTime>>{{us(180), us(260)}, {us(1200), us(1280)}}));
  EXPECT_EQ(k.span("blocks.1.reduce_scatter_copy"), std::make_pair(us(1200), us(1280)));
  EXPECT_EQ(k.span("root.reduce_scatter_copy"), std::make_pair(us(1840), us(1920)));
  EXPECT_EQ(k.step(), us(2760));
  // No all-gather buffer.
  EXPECT_EQ(k.cpu_steps(engine::CpuStepKind::kAlloc, ".all_gather_output").size(), 0u);

  // bf16 parameters over fp32 shards: each shard is first cast into a bf16 tensor of its own
  // (read 40 MB, write 20 MB: 60 us), then copied (40 us), per parameter: the root's 0-100, the
  // embedding 100-200, blocks.0's cast 200-260 and copy 260-300.
  const Knobs bf16 = run([](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.fsdp.param_dtype = Dtype::kBf16;
    in.cluster.gpus_per_node = 1;
    in.training.global_batch = 1;
  });
  EXPECT_EQ(bf16.spans("blocks.0.to_param_dtype").front(), std::make_pair(us(200), us(260)));
  EXPECT_EQ(bf16.spans("blocks.0.copy_shard").front(), std::make_pair(us(260), us(300)));
  EXPECT_EQ(bf16.tensor_bytes("blocks.0.param_dtype_shard"), 20'000'000);
}

// One parameter after another: each one's bf16 cast is made before its unsharded tensor, and the
// previous one's cast is dropped once the next exists (the loop variable is rebound), the last
// one's when wait_for_unshard returns.
TEST(Knobs, Fsdp2OnOneGpuDropsEachCastWhenTheNextIsMade) {
  const models::Workload& workload = blocks0_itemized();
  const Knobs k = run_on(workload, [](ScheduleInput& in) {
    in.fsdp.version = 2;
    in.fsdp.limit_all_gathers = false;
    in.fsdp.param_dtype = Dtype::kBf16;
    in.cluster.gpus_per_node = 1;
    in.training.global_batch = 1;
  });
  const engine::Program& p = k.out.schedule.program;
  std::vector<std::string> order;  // the first unshard of blocks.0, allocations and frees
  for (const engine::CpuStep& step : p.cpu) {
    const bool alloc = step.kind == engine::CpuStepKind::kAlloc;
    if (!alloc && step.kind != engine::CpuStepKind::kFree) continue;
    const engine::TensorInfo& t = p.tensors[step.target];
    const std::string_view name = p.names[t.name];
    if (name != "blocks.0.param_dtype_shard" && name != "blocks.0.unsharded_params") continue;
    std::string entry = alloc ? "alloc " : "free ";
    entry.append(name.substr(std::string_view("blocks.0.").size()))
        .append(" ")
        .append(std::to_string(t.size.value() / 1'000'000));
    order.push_back(entry);
    if (order.size() == 6) break;
  }
  EXPECT_EQ(order,
            (std::vector<std::string>{"alloc param_dtype_shard 8", "alloc unsharded_params 8",
                                      "alloc param_dtype_shard 12", "free param_dtype_shard 8",
                                      "alloc unsharded_params 12", "free param_dtype_shard 12"}));
}

// A block's saved tensors are each their own block to the caching allocator, as PyTorch
// allocates them; the head's and the embedding's stay one block (where their multi-GiB logits
// go relative to the loss's temporaries is not modelled), and so does what a checkpointed block
// keeps (its input, one tensor).
TEST(Knobs, BlocksAllocateEachSavedTensorOnItsOwn) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    for (models::Layer& l : w.layers) {
      const std::int64_t saved = l.saved_activations.value();
      l.saved_tensors = {{Bytes(saved * 4 / 10)}, {Bytes(saved * 6 / 10)}};
    }
    return w;
  }();
  const auto sizes = [](const Knobs& k, const std::string& name) {
    std::vector<std::int64_t> out;
    const engine::Program& p = k.out.schedule.program;
    for (const std::size_t i : k.cpu_steps(engine::CpuStepKind::kAlloc, name))
      out.push_back(p.tensors[p.cpu[i].target].size.value());
    return out;
  };
  const Knobs saved = run_on(workload, [](ScheduleInput&) {});
  EXPECT_EQ(sizes(saved, "blocks.0.saved"), (std::vector<std::int64_t>{4'000'000, 6'000'000}));
  EXPECT_EQ(sizes(saved, "head.saved"), (std::vector<std::int64_t>{20'000'000}));
  EXPECT_EQ(sizes(saved, "embedding.saved"), (std::vector<std::int64_t>{1'000'000}));
  const Knobs full = run_on(workload, [](ScheduleInput& in) {
    in.training.activation_checkpointing = ActivationCheckpointing::kFull;
  });
  EXPECT_EQ(sizes(full, "blocks.0.saved"), (std::vector<std::int64_t>{1'000'000}));
}

// Per-parameter gradients with a tied table (100 elements, the embedding's first parameter):
// the head's backward makes its gradient, after the head's own (a norm of 5); the embedding
// makes only its other parameters' (20). A layer that does not list its parameters makes one.
TEST(Knobs, TiedTableGradientIsMadeAtTheHead) {
  models::Layer embedding;
  embedding.kind = models::LayerKind::kEmbedding;
  embedding.numel = 120;
  embedding.parameter_numels = {100, 20};
  models::Layer head;
  head.kind = models::LayerKind::kHead;
  head.numel = 5;
  head.parameter_numels = {5};
  EXPECT_EQ(layer_gradient_numels(embedding, 100), std::vector<std::int64_t>{20});
  EXPECT_EQ(layer_gradient_numels(head, 100), (std::vector<std::int64_t>{5, 100}));
  EXPECT_EQ(layer_gradient_numels(head, 0), std::vector<std::int64_t>{5});
  head.parameter_numels.clear();
  EXPECT_EQ(layer_gradient_numels(head, 100), std::vector<std::int64_t>{105});
  embedding.parameter_numels = {100};
  embedding.numel = 100;
  EXPECT_TRUE(layer_gradient_numels(embedding, 100).empty());
}

// torchao's float8 all-gather on FSDP2 (2 GPUs, bf16 param_dtype, fp32 storage): the blocks'
// "up" and "down" linears are Float8Linears (their forward GEMMs run in fp8), 500k elements each,
// beside a 1000-element norm. A block's all-gather moves the norm in bf16 and the weights at one
// byte: 1000 x 2 + 1M x 1 = 1,002,000 bytes instead of 2,002,000, and so much is unsharded.
// Before it, each weight's 250k-element fp32 shard is cast on the copy-in stream: x * scale
// (8 bytes per element), clamp (8) and .to(float8) (5): 1.25 MB for the last; without
// precomputed scales first |x| (8), its max (4 + the fp32 amax) and a 4-byte MAX all-reduce per
// weight, each time the block is all-gathered (forward and backward: 2 per weight, 8 in all).
// The copy-in then writes the norm's 500-element shard (fp32 read, bf16 write: 3,000 bytes) and
// copies the weights' fp8 shards (2 x 500k). With precomputed scales a single all-reduce after
// the optimizer step carries the four weights' amaxes (16 bytes).
TEST(Knobs, Fsdp2Float8AllGatherMovesFloat8WeightsAtOneByte) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_linear_workload();
    for (models::Layer& layer : w.layers) {
      if (layer.kind != models::LayerKind::kBlock) continue;
      for (models::NamedKernel& k : layer.forward) {
        if (k.linear == models::LinearPass::kForward) k.kernel.dtype = Dtype::kFp8;
      }
    }
    return w;
  }();
  const auto configure = [](bool float8, bool precompute) {
    return [float8, precompute](ScheduleInput& in) {
      in.fsdp.version = 2;
      in.fsdp.limit_all_gathers = false;
      in.fsdp.param_dtype = Dtype::kBf16;
      in.fsdp.reduce_dtype = Dtype::kBf16;
      in.fsdp.float8_all_gather = float8;
      in.fsdp.precompute_float8_scale = precompute;
    };
  };
  const auto op_bytes = [](const Knobs& k, const std::string& name) {
    return k.out.schedule.program.ops[k.first_index(name)].bytes.value();
  };
  const Knobs bf16 = run_on(workload, configure(false, false));
  const Knobs dynamic = run_on(workload, configure(true, false));
  const Knobs precomputed = run_on(workload, configure(true, true));
  EXPECT_EQ(op_bytes(bf16, "blocks.0.all_gather"), 2'002'000);
  EXPECT_EQ(bf16.tensor_bytes("blocks.0.unsharded_params"), 2'002'000);
  EXPECT_EQ(bf16.count_suffix(".to_float8"), 0u);
  for (const Knobs* k : {&dynamic, &precomputed}) {
    EXPECT_EQ(op_bytes(*k, "blocks.0.all_gather"), 1'002'000);
    EXPECT_EQ(k->tensor_bytes("blocks.0.unsharded_params"), 1'002'000);
    EXPECT_EQ(op_bytes(*k, "blocks.1.float8_weight1.to_float8"), 1'250'000);
    EXPECT_EQ(op_bytes(*k, "blocks.1.float8_weight1.clamp"), 2'000'000);
    // The other shards are cast into a bf16 buffer first (fp32 -> bf16, 500 x 6 B), which
    // all_gather_copy_in copies (500 x 4 B) beside the float8 weights (500'000 x 1 B x 2).
    EXPECT_EQ(op_bytes(*k, "blocks.0.all_gather_cast"), 3'000);
    EXPECT_EQ(op_bytes(*k, "blocks.0.all_gather_copy_in"), 2'000 + 1'000'000);
    EXPECT_EQ(k->count_suffix(".to_float8"), 8u);  // 2 weights x 2 blocks x (forward, backward)
    // The root's embedding and head are no Float8Linears: gathered as before.
    EXPECT_EQ(op_bytes(*k, "root.all_gather"), op_bytes(bf16, "root.all_gather"));
  }
  EXPECT_EQ(dynamic.count_suffix(".float8_weight0.amax_all_reduce"), 4u);
  EXPECT_EQ(dynamic.count_suffix(".amax_all_reduce"), 8u);
  EXPECT_EQ(op_bytes(dynamic, "blocks.0.float8_weight0.abs"), 2'000'000);
  EXPECT_EQ(op_bytes(dynamic, "blocks.0.float8_weight0.amax"), 1'000'004);
  EXPECT_EQ(op_bytes(dynamic, "blocks.0.float8_weight0.amax_all_reduce"), 4);
  EXPECT_EQ(dynamic.count_suffix("float8_scales.amax_all_reduce"), 0u);
  EXPECT_EQ(precomputed.count_suffix(".abs"), 0u);
  EXPECT_EQ(precomputed.count_suffix(".amax_all_reduce"), 1u);
  EXPECT_EQ(op_bytes(precomputed, "float8_scales.amax_all_reduce"), 16);
  // foreach_norm reads the four weights' fp32 shards and writes their amaxes.
  EXPECT_EQ(op_bytes(precomputed, "float8_scales.foreach_norm"), 4 * 250'000 * 4 + 16);
  // On one GPU nothing is gathered; offloaded, a block's float8 weights (2 x 500'000 fp32) come to
  // the device before their fsdp_pre_all_gather cast, beside its norm's (1'000 fp32).
  const Knobs one_gpu = run_on(workload, [&](ScheduleInput& in) {
    configure(true, false)(in);
    in.cluster.gpus_per_node = 1;
    in.training.global_batch = 1;
    in.fsdp.cpu_offload = true;
  });
  EXPECT_EQ(one_gpu.count_suffix(".all_gather"), 0u);
  EXPECT_EQ(one_gpu.tensor_bytes("blocks.0.h2d_float8_shards"), 4'000'000);
  EXPECT_EQ(one_gpu.tensor_bytes("blocks.0.h2d_shard"), 4'000);
  EXPECT_EQ(op_bytes(one_gpu, "blocks.0.float8_weight0.to_float8"), 2'500'000);
}

// NO_SHARD with a bf16 param_dtype over fp32 parameters: the low-precision copy is the unsharded
// parameter, freed after each unit's forward (post_reshard) and cast again before its backward,
// 3 units x 2 casts. Forward prefetch casts the next unit early, but _reshard marks every unit
// unprefetched whatever it freed, so the backward casts are all there (without backward
// prefetch, each in its unit's own pre-backward hook; they were skipped).
TEST(Knobs, NoShardCastsAgainForBackwardWithForwardPrefetch) {
  const auto configure = [](bool forward_prefetch) {
    return [forward_prefetch](ScheduleInput& in) {
      in.fsdp.sharding_strategy = ShardingStrategy::kNoShard;
      in.fsdp.param_dtype = Dtype::kBf16;
      in.fsdp.backward_prefetch = BackwardPrefetch::kNone;
      in.fsdp.forward_prefetch = forward_prefetch;
    };
  };
  const Knobs off = run(configure(false));
  const Knobs on = run(configure(true));
  EXPECT_EQ(off.count_suffix(".cast_shard"), 6u);
  EXPECT_EQ(on.count_suffix(".cast_shard"), 6u);
  EXPECT_EQ(on.out.result.memory.peak_active, off.out.result.memory.peak_active);
}

// FSDP1 on a bf16 module (model.to(torch.bfloat16) before wrapping): the FlatParameter is bf16,
// so a bf16 param_dtype needs no _mp_shard cast, the gradient shard is kept in bf16 (5M x 2 B =
// 10 MB for a block, against 20 MB in fp32), and under cpu_offload the H2D copy of a 5M-element
// shard moves 10 MB at 1000 GB/s: 10 us instead of 20.
TEST(Knobs, Fsdp1Bf16StorageGathersWithoutCastAndKeepsBf16GradientShards) {
  const auto configure = [](Dtype storage, bool offload) {
    return [storage, offload](ScheduleInput& in) {
      in.fsdp.param_dtype = Dtype::kBf16;
      in.fsdp.reduce_dtype = Dtype::kBf16;
      in.training.param_storage_dtype = storage;
      in.fsdp.cpu_offload = offload;
      in.cluster.pcie_bandwidth = gb_per_s(1000.0);
    };
  };
  const Knobs fp32 = run(configure(Dtype::kFp32, false));
  const Knobs bf16 = run(configure(Dtype::kBf16, false));
  EXPECT_EQ(fp32.count_suffix(".cast_shard"), 5u);
  EXPECT_EQ(bf16.count_suffix(".cast_shard"), 0u);
  EXPECT_EQ(bf16.baseline(memory::MemoryCategory::kParameters), 30'000'000);
  EXPECT_EQ(bf16.baseline(memory::MemoryCategory::kOptimizerState), 60'000'000);
  EXPECT_EQ(fp32.tensor_bytes("blocks.0._saved_grad_shard"), 20'000'000);
  EXPECT_EQ(bf16.tensor_bytes("blocks.0._saved_grad_shard"), 10'000'000);
  const Knobs fp32_offload = run(configure(Dtype::kFp32, true));
  const Knobs bf16_offload = run(configure(Dtype::kBf16, true));
  const auto duration = [](const Knobs& k, const std::string& name) {
    const auto [start, end] = k.spans(name).front();
    return end - start;
  };
  EXPECT_EQ(duration(fp32_offload, "root.h2d_shard"), us(20));
  EXPECT_EQ(duration(bf16_offload, "root.h2d_shard"), us(10));
  EXPECT_EQ(duration(bf16_offload, "root.d2h_grad"), us(10));
}

// DDP (fp32): buckets in reverse order, the first capped at 1 MiB: [head 16 MB], [b1 40 MB],
// [b0 40 MB], [embedding 24 MB]. Each is copied in (8 B per element) then all-reduced
// (factor 1, 1 TB/s). Forward 0-400 (no all-gathers); head bwd 400-600, copy 600-632, AR
// 632-648; b1 bwd 632-832, copy 832-912, AR 912-952; b0 bwd 912-1112, copy 1112-1192, AR
// 1192-1232; embedding bwd 1192-1392, copy 1392-1440, AR 1440-1464; each bucket back into
// .grad once its all-reduce is done (finalize_backward): the first three 1440-1632 while the
// last all-reduce runs, the embedding's 1632-1680; AdamW over 30M elements: 840 us: 2520. Full
// replicas plus the bucket buffers before the step: 4 + 8 + 4 bytes per parameter.
TEST(Knobs, DdpAllReducesBucketsInReverseOrder) {
  const Knobs k = run([](ScheduleInput& in) { in.training.parallelism = Parallelism::kDdp; });
  EXPECT_EQ(k.span("bucket.0.all_reduce"), std::make_pair(us(632), us(648)));
  EXPECT_EQ(k.span("bucket.1.all_reduce"), std::make_pair(us(912), us(952)));
  EXPECT_EQ(k.span("bucket.3.all_reduce"), std::make_pair(us(1440), us(1464)));
  EXPECT_EQ(k.span("bucket.0.copy_to_grads"), std::make_pair(us(1440), us(1472)));
  EXPECT_EQ(k.span("bucket.3.copy_to_grads"), std::make_pair(us(1632), us(1680)));
  EXPECT_EQ(k.step(), us(2520));
  Bytes baseline{0};
  for (Bytes b : k.out.schedule.baseline) baseline += b;
  EXPECT_EQ(baseline.value(), 480'000'000);
}

// The bf16 compress hook casts and divides each bucket on the compute stream (it runs from the
// autograd hook): 40 MB read + 3 x 20 MB for a 10M-element bucket, 100 us, before the all-reduce.
TEST(Knobs, DdpCompressHookRunsOnTheComputeStream) {
  const Knobs k = run([](ScheduleInput& in) {
    in.training.parallelism = Parallelism::kDdp;
    in.fsdp.reduce_dtype = Dtype::kBf16;
  });
  const engine::Program& p = k.out.schedule.program;
  const std::size_t compress = k.first_index("bucket.1.compress");
  EXPECT_EQ(p.ops[compress].stream,
            k.out.schedule.program.ops[k.first_index("blocks.1.bwd.bwd")].stream);
  const auto [start, end] = k.span("bucket.1.compress");
  EXPECT_EQ(end - start, us(100));
  EXPECT_GE(k.span("bucket.1.all_reduce").first, end);
  // The future's callback copies the result back on a stream of its own, once the all-reduce
  // is done (Future::invokeCallback), not on the NCCL stream.
  const std::size_t decompress = k.first_index("bucket.1.decompress");
  EXPECT_NE(p.ops[decompress].stream, p.ops[k.first_index("bucket.1.all_reduce")].stream);
  EXPECT_EQ(k.span("bucket.1.decompress").first, k.span("bucket.1.all_reduce").second);
}

// Module buffers (two blocks' 1M-element masks) are neither flattened nor sharded: every rank
// keeps all of them before the step, in the modules' dtype (fp32: 8 MB; pure bf16 modules:
// 4 MB) unless FSDP1's MixedPrecision.buffer_dtype recasts them.
TEST(Knobs, BuffersStayWholeOnEveryRankInTheirDtype) {
  static const models::Workload with_buffers = [] {
    models::Workload w = testing::tiny_workload();
    for (models::Layer& l : w.layers) {
      if (l.kind == models::LayerKind::kBlock) l.buffers = {1'000'000};
    }
    return w;
  }();
  const auto extra = [&](const std::function<void(ScheduleInput&)>& configure) {
    const Knobs plain = run(configure);
    const Knobs buffered = run([&](ScheduleInput& in) {
      configure(in);
      in.workload = &with_buffers;
    });
    return buffered.baseline(memory::MemoryCategory::kParameters) -
           plain.baseline(memory::MemoryCategory::kParameters);
  };
  EXPECT_EQ(extra([](ScheduleInput&) {}), 8'000'000);
  EXPECT_EQ(extra([](ScheduleInput& in) { in.fsdp.buffer_dtype = Dtype::kBf16; }), 4'000'000);
  EXPECT_EQ(extra([](ScheduleInput& in) {
              in.fsdp.version = 2;
              in.training.param_storage_dtype = Dtype::kBf16;
            }),
            4'000'000);
  EXPECT_EQ(extra([](ScheduleInput& in) { in.fsdp.version = 2; }), 8'000'000);
}

}  // namespace
}  // namespace fsdpsim::fsdp
