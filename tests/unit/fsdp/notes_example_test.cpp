// The worked example of PyTorch's FSDP notes (docs/source/notes/fsdp.rst, "FSDP buffers sizes"):
// transformer blocks of 1.6B fp32 parameters on 8 GPUs need 2 x 1.6*4/8 = 1.6 GB of
// communication payload buffers and 2 x 1.6*4 = 12.8 GB of unsharded block parameters (the one in
// use and the one prefetched), 14.4 GB in all. Both terms must come out of the schedule.
#include <gtest/gtest.h>

#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

TEST(FsdpNotesExample, BlocksOf1_6BParametersOn8GpusNeed14_4GBOfBuffers) {
  models::Workload w;
  w.layers.push_back(testing::tiny_layer("embedding", models::LayerKind::kEmbedding, 8'000, 0));
  for (int i = 0; i < 4; ++i) {
    w.layers.push_back(testing::tiny_layer("blocks." + std::to_string(i), models::LayerKind::kBlock,
                                           1'600'000'000, 0));
  }
  w.layers.push_back(testing::tiny_layer("head", models::LayerKind::kHead, 8'000, 0));
  ScheduleInput in;
  in.workload = &w;
  in.cluster = testing::tiny_cluster();
  in.cluster.gpus_per_node = 8;
  in.fsdp.param_dtype = Dtype::kFp32;
  in.fsdp.reduce_dtype = Dtype::kFp32;
  in.training.global_batch = 8;
  in.training.seq_len = 8;
  const SimulationOutput out = simulate_step(in, {});
  const engine::Program& p = out.schedule.program;

  // Per-rank payload of each block's collectives: 1.6e9 x 4 B / 8 = 0.8 GB.
  for (const engine::Op& op : p.ops) {
    const std::string_view name = p.names[op.name];
    if (name.rfind("blocks.", 0) == 0 && name.find(".all_gather") != std::string::npos) {
      EXPECT_EQ(op.bytes.value() / 8, 800'000'000) << name;
    }
  }
  // Unsharded block parameters alive at once, as the allocator counts them (CPU order).
  std::int64_t live = 0;
  std::int64_t peak = 0;
  const auto is_block_params = [&](engine::TensorId t) {
    const std::string_view name = p.names[p.tensors[t].name];
    return name.rfind("blocks.", 0) == 0 && name.find("._full_param_padded") != std::string::npos;
  };
  for (const engine::CpuStep& step : p.cpu) {
    if (step.kind == engine::CpuStepKind::kAlloc && is_block_params(step.target)) {
      live += p.tensors[step.target].size.value();
      peak = std::max(peak, live);
    } else if (step.kind == engine::CpuStepKind::kFree && is_block_params(step.target)) {
      live -= p.tensors[step.target].size.value();
    }
  }
  EXPECT_EQ(peak, 2 * 6'400'000'000);
  EXPECT_EQ(peak + 2 * 800'000'000, 14'400'000'000);
}

}  // namespace
}  // namespace fsdpsim::fsdp
