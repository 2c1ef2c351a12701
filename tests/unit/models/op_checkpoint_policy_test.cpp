// torchtitan's op-level selective checkpointing policy on real blocks: which forward kernels keep
// their output, and the bytes they keep, worked out from the block's shapes.
#include "models/op_checkpoint_policy.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

std::vector<std::string> saved_kernels(const Layer& layer) {
  const OpCheckpointPlan plan = torchtitan_op_checkpoint_plan(layer);
  EXPECT_EQ(plan.saved_output.size(), layer.forward.size());
  std::vector<std::string> names;
  for (std::size_t i = 0; i < layer.forward.size(); ++i) {
    if (plan.saved_output[i] != 0) names.push_back(layer.forward[i].name);
  }
  return names;
}

// A Llama block runs seven mm: q (1), k (2), v (3), o (4), gate = w1 (5), up = w3 (6), down = w2
// (7). The odd ones are saved, with SDPA's output and log-sum-exp. Llama 3.1 8B, one sequence of
// 1024 tokens in bf16: q and down 1024 x 4096 x 2 bytes each, v 1024 x 1024 x 2, gate
// 1024 x 14336 x 2, attention 32 heads x 1024 x (128 x 2 + 4).
TEST(OpCheckpointPolicy, LlamaBlockKeepsEveryOtherMmAndTheAttention) {
  const Workload w = build_workload(testing::llama_3_1_8b(), testing::options(1, 1024));
  const Layer& block = w.layers[1];
  ASSERT_EQ(block.kind, LayerKind::kBlock);
  EXPECT_EQ(saved_kernels(block), (std::vector<std::string>{"q", "v", "attn", "gate", "down"}));
  const std::int64_t t = 1024;
  const std::int64_t expected =
      t * 4096 * 2 + t * 1024 * 2 + 32 * t * (128 * 2 + 4) + t * 14336 * 2 + t * 4096 * 2;
  EXPECT_EQ(torchtitan_op_checkpoint_plan(block).saved_bytes.value(), expected);
}

// A float8 linear's matmul is aten.mm to the policy (the dispatch mode sees it before the
// Float8Tensor turns it into _scaled_mm): the same kernels are kept, with the same bf16 outputs,
// though the block now runs the float8 casts before each linear.
TEST(OpCheckpointPolicy, Float8LinearsCountAsMm) {
  WorkloadOptions o = testing::options(1, 1024);
  const Workload plain = build_workload(testing::llama_3_1_8b(), o);
  o.float8_linears = true;
  const Workload w = build_workload(testing::llama_3_1_8b(), o);
  EXPECT_GT(w.layers[1].forward.size(), plain.layers[1].forward.size());
  EXPECT_EQ(saved_kernels(w.layers[1]),
            (std::vector<std::string>{"q", "v", "attn", "gate", "down"}));
  EXPECT_EQ(torchtitan_op_checkpoint_plan(w.layers[1]).saved_bytes,
            torchtitan_op_checkpoint_plan(plain.layers[1]).saved_bytes);
}

// cuDNN's SDPA is on the list too (torchtitan b39377f9f); flash-attn's own kernels, 1.x or
// Triton, are not SDPA ops and are recomputed.
TEST(OpCheckpointPolicy, CudnnAttentionIsKeptFlashAttnsOwnKernelsAreNot) {
  WorkloadOptions o = testing::options(1, 1024);
  o.flash_kernel = FlashKernel::kCudnn;
  EXPECT_EQ(saved_kernels(build_workload(testing::llama_3_1_8b(), o).layers[1]),
            (std::vector<std::string>{"q", "v", "attn", "gate", "down"}));
  for (const FlashKernel own : {FlashKernel::kFlash1, FlashKernel::kTriton}) {
    o.flash_kernel = own;
    EXPECT_EQ(saved_kernels(build_workload(testing::llama_3_1_8b(), o).layers[1]),
              (std::vector<std::string>{"q", "v", "gate", "down"}));
  }
}

// Linears with a bias run addmm (MPT's), an unfused attention bmm and softmax: the policy saves
// nothing of them, and a block is recomputed whole from its input.
TEST(OpCheckpointPolicy, AddmmAndUnfusedAttentionAreRecomputed) {
  const Workload mpt =
      build_workload(testing::mpt_spec(2, 256, 4, 1000, 512), testing::options(1, 512));
  EXPECT_EQ(saved_kernels(mpt.layers[1]), (std::vector<std::string>{"attn"}));
  const Workload unfused =
      build_workload(testing::mpt_spec(2, 256, 4, 1000, 512), testing::options(1, 512, false));
  EXPECT_TRUE(saved_kernels(unfused.layers[1]).empty());
  EXPECT_EQ(torchtitan_op_checkpoint_plan(unfused.layers[1]).saved_bytes.value(), 0);
}

}  // namespace
}  // namespace fsdpsim::models
