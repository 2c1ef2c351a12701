// The torch.compile rewrite: runs of memory-bound kernels become one kernel without their
// handed-off intermediates; float8 linears' inputs are recomputed rather than saved.
#include "models/compile_fusion.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/kernel_factory.hpp"
#include "models/layer_draft.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

using testing::find_kernel;

const detail::BuildContext kCtx = detail::make_context(testing::options(1, 8));

NamedKernel gemm(const char* name) {
  return detail::gemm_kernel(name, GemmShape{8, 8, 8, 1}, kCtx);
}

NamedKernel pointwise(const char* name, std::int64_t bytes, std::int64_t handoff = 0) {
  return detail::handed_off(detail::memory_bound_kernel(name, bytes, kCtx), handoff);
}

std::vector<std::string> names(const std::vector<NamedKernel>& kernels) {
  std::vector<std::string> out;
  for (const NamedKernel& k : kernels) out.push_back(k.name);
  return out;
}

std::int64_t total_bytes(const std::vector<NamedKernel>& kernels) {
  std::int64_t sum = 0;
  for (const NamedKernel& k : kernels) sum += k.kernel.bytes.value();
  return sum;
}

TEST(CompileFusion, MergesAChainIntoOneKernelWithoutItsIntermediates) {
  Layer layer;
  layer.kind = LayerKind::kBlock;
  // dropout's 20-byte output is read only by the add: fused, it is neither written nor read.
  layer.forward = {gemm("a"), pointwise("dropout", 100, 20), pointwise("add", 60),
                   pointwise("norm", 50), gemm("b")};
  layer.backward = {pointwise("norm_bwd", 70, 30), pointwise("add_grad", 90), gemm("c")};
  fuse_for_compile(layer);
  EXPECT_EQ(names(layer.forward), (std::vector<std::string>{"a", "dropout+add+norm", "b"}));
  EXPECT_EQ(find_kernel(layer.forward, "dropout+add+norm").kernel.bytes.value(),
            100 + 60 + 50 - 2 * 20);
  EXPECT_EQ(find_kernel(layer.forward, "dropout+add+norm").kernel.kind, KernelKind::kMemoryBound);
  EXPECT_EQ(names(layer.backward), (std::vector<std::string>{"norm_bwd+add_grad", "c"}));
  EXPECT_EQ(layer.backward[0].kernel.bytes.value(), 70 + 90 - 2 * 30);
}

TEST(CompileFusion, InductorsNormsStreamAtTheOrdinaryRate) {
  // Eager, a norm runs PyTorch's kernel at its own rate; compiled, Inductor's own kernel, alone
  // or fused with its neighbours, takes the ordinary streaming rate.
  Layer layer;
  layer.kind = LayerKind::kBlock;
  layer.forward = {gemm("a"), pointwise("norm", 50), gemm("b")};
  layer.forward[1].kernel.norm = NormPass::kLayerNormForward;
  layer.backward = {pointwise("norm_bwd", 70), pointwise("norm_bwd_weight", 40), gemm("c")};
  layer.backward[0].kernel.norm = NormPass::kInputGrad;
  layer.backward[1].kernel.norm = NormPass::kLayerNormWeightGrad;
  fuse_for_compile(layer);
  EXPECT_EQ(find_kernel(layer.forward, "norm").kernel.norm, NormPass::kNone);
  EXPECT_EQ(find_kernel(layer.backward, "norm_bwd+norm_bwd_weight").kernel.norm, NormPass::kNone);
}

TEST(CompileFusion, StopsAfterAKernelThatEndsFusionAndAtTheAttentionCore) {
  Layer layer;
  NamedKernel amax = pointwise("amax", 10);
  amax.ends_fusion = true;
  layer.forward = {pointwise("norm", 40),    amax,
                   pointwise("cast", 30),    pointwise("split", 20),
                   pointwise("softmax", 50), gemm("pv")};
  layer.attention_forward_begin = 3;  // split, softmax, pv
  layer.attention_forward_end = 6;
  fuse_for_compile(layer);
  EXPECT_EQ(names(layer.forward),
            (std::vector<std::string>{"norm+amax", "cast", "split+softmax", "pv"}));
  EXPECT_EQ(layer.attention_forward_begin, 2u);
  EXPECT_EQ(layer.attention_forward_end, 4u);
  EXPECT_EQ(total_bytes(layer.forward), 40 + 10 + 30 + 20 + 50 + total_bytes({gemm("pv")}));
}

TEST(CompileFusion, GptBlockFusesResidualChainsAndKeepsWhatItSaves) {
  WorkloadOptions options = testing::options(1, 8);  // T = 8, d = 64, ffn 256, bf16
  const Workload eager = build_workload(testing::tiny_gpt(), options);
  options.compiled = true;
  const Workload compiled = build_workload(testing::tiny_gpt(), options);
  const Layer& before = eager.layers[1];
  const Layer& after = compiled.layers[1];
  const std::vector<std::string> expected = {"ln1",
                                             "qkv",
                                             "attn",
                                             "attn_out",
                                             "attn_resid_dropout+residual1+ln2",
                                             "mlp_up",
                                             "gelu",
                                             "mlp_down",
                                             "mlp_resid_dropout+residual2"};
  EXPECT_EQ(names(after.forward), expected);
  const std::int64_t hidden = 8 * 64 * 2;
  const std::int64_t chain =
      find_kernel(before.forward, "attn_resid_dropout").kernel.bytes.value() +
      find_kernel(before.forward, "residual1").kernel.bytes.value() +
      find_kernel(before.forward, "ln2").kernel.bytes.value();
  EXPECT_EQ(find_kernel(after.forward, "attn_resid_dropout+residual1+ln2").kernel.bytes.value(),
            chain - 2 * hidden);  // the dropout output stays in registers
  EXPECT_EQ(total_bytes(after.backward), total_bytes(before.backward) - 2 * 2 * hidden);
  EXPECT_LT(after.backward.size(), before.backward.size());
  // bf16 linears' inputs are read by the weight-gradient GEMMs: still saved.
  EXPECT_EQ(after.saved_activations, before.saved_activations);
  // Embedding and head are not compiled (torchtitan compiles each block).
  EXPECT_EQ(names(compiled.layers.back().forward), names(eager.layers.back().forward));
}

TEST(CompileFusion, Float8LinearInputsAreRecomputedInsteadOfSaved) {
  WorkloadOptions options = testing::options(1, 8);
  options.float8_linears = true;
  const Workload eager = build_workload(testing::tiny_gpt(), options);
  options.compiled = true;
  const Workload compiled = build_workload(testing::tiny_gpt(), options);
  // ln1 and ln2 outputs (T x d) and the GELU output (T x ffn), bf16.
  const std::int64_t recomputed = 2 * (8 * 64 * 2) + 8 * 256 * 2;
  EXPECT_EQ(eager.layers[1].rematerializable_saved.value(), recomputed);
  EXPECT_EQ(compiled.layers[1].saved_activations.value(),
            eager.layers[1].saved_activations.value() - recomputed);
  EXPECT_EQ(compiled.layers[1].saved_activations_checkpointed,
            eager.layers[1].saved_activations_checkpointed);
}

}  // namespace
}  // namespace fsdpsim::models
