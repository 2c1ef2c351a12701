#include <gtest/gtest.h>

#include <string>

#include "models/workload.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

using testing::find_kernel;

constexpr std::int64_t kB = 2, kS = 256, kD = 512, kHeads = 8, kHeadDim = 64, kT = kB * kS;

TransformerSpec mid_gpt() {
  return testing::make_spec(ModelFamily::kGpt, 1, kD, kHeads, kHeads, 4 * kD, 1000, kS);
}

double attention_flops(const std::vector<NamedKernel>& kernels) {
  double sum = 0.0;
  for (const NamedKernel& k : kernels) {
    if (k.name.rfind("attn", 0) == 0 && k.name != "attn_out" && k.name.rfind("attn_out_", 0) != 0) {
      sum += k.kernel.flops.value();
    }
  }
  return sum;
}

TEST(Attention, FlashForwardIsOneFusedCausalKernel) {
  const Workload w = build_workload(mid_gpt(), testing::options(kB, kS, true));
  const Kernel& attn = find_kernel(w.layers[1].forward, "attn").kernel;
  EXPECT_EQ(attn.kind, KernelKind::kAttention);
  EXPECT_EQ(attn.attention.batch, kB);
  EXPECT_EQ(attn.attention.heads, kHeads);
  EXPECT_EQ(attn.attention.kv_heads, kHeads);
  EXPECT_EQ(attn.attention.seq_q, kS);
  EXPECT_EQ(attn.attention.seq_kv, kS);
  EXPECT_EQ(attn.attention.head_dim, kHeadDim);
  EXPECT_TRUE(attn.attention.causal);
  EXPECT_TRUE(attn.attention.fused);
  EXPECT_FALSE(attn.attention.backward);
  // 4*b*s^2*d_head*heads, halved for causal = 2*b*s^2*d.
  EXPECT_DOUBLE_EQ(attn.flops.value(), 2.0 * kB * kS * kS * kD);
  // Reads Q, K, V, writes O (bf16) and the fp32 log-sum-exp.
  EXPECT_EQ(attn.bytes.value(), 4 * kT * kD * 2 + kB * kHeads * kS * 4);
}

TEST(Attention, FlashBackwardIs2Point5TimesForward) {
  const Workload w = build_workload(mid_gpt(), testing::options(kB, kS, true));
  const Kernel& fwd = find_kernel(w.layers[1].forward, "attn").kernel;
  const Kernel& bwd = find_kernel(w.layers[1].backward, "attn_bwd").kernel;
  EXPECT_TRUE(bwd.attention.backward);
  EXPECT_DOUBLE_EQ(bwd.flops.value(), 2.5 * fwd.flops.value());
  // Reads Q, K, V, O, dO and the log-sum-exp; writes dQ, dK, dV.
  EXPECT_EQ(bwd.bytes.value(), 8 * kT * kD * 2 + kB * kHeads * kS * 4);
}

// unpad_attention (flash-attn's bert_padding around the kernel): before it, torch.nonzero and
// .item() on the mask, each read on the host, and a gather of the packed Q, K, V rows (read and
// written); after it, pad_input's zeros + index_put of O (3 x O). Backward: a gather of dO's rows
// (2 x dO) before the kernel, zeros + index_put of dQKV (3 x QKV) after. The kernel's own
// unpadded O is saved besides the output projection's padded one.
TEST(Attention, UnpaddedFlashGathersAndScattersAroundTheKernel) {
  WorkloadOptions padded = testing::options(kB, kS, true);
  WorkloadOptions unpadded = padded;
  unpadded.unpad_attention = true;
  const Workload p = build_workload(mid_gpt(), padded);
  const Workload u = build_workload(mid_gpt(), unpadded);
  const Layer& block = u.layers[1];
  const std::int64_t o = kT * kD * 2;
  const std::int64_t qkv = 3 * o;
  EXPECT_TRUE(find_kernel(block.forward, "attn_unpad_nonzero").host_sync);
  EXPECT_TRUE(find_kernel(block.forward, "attn_unpad_max_seqlen").host_sync);
  EXPECT_FALSE(find_kernel(block.forward, "attn").host_sync);
  EXPECT_EQ(find_kernel(block.forward, "attn_unpad_gather").kernel.bytes.value(), 2 * qkv);
  EXPECT_EQ(find_kernel(block.forward, "attn_pad").kernel.bytes.value(), 3 * o);
  EXPECT_EQ(find_kernel(block.backward, "attn_pad_bwd").kernel.bytes.value(), 2 * o);
  EXPECT_EQ(find_kernel(block.backward, "attn_unpad_bwd").kernel.bytes.value(), 3 * qkv);
  EXPECT_EQ(block.forward.size(), p.layers[1].forward.size() + 4);
  EXPECT_EQ(block.backward.size(), p.layers[1].backward.size() + 2);
  EXPECT_EQ(block.saved_activations.value() - p.layers[1].saved_activations.value(), o);
  // The unpadded copy of Q, K, V lives beside the padded one while the kernel runs.
  EXPECT_GE(block.forward_transient_peak().value(), p.layers[1].forward_transient_peak().value());
}

TEST(Attention, NaiveComputesTheFullSquareWithBatchedGemms) {
  const Workload w = build_workload(mid_gpt(), testing::options(kB, kS, false));
  const std::vector<NamedKernel>& fwd = w.layers[1].forward;
  EXPECT_THROW(find_kernel(fwd, "attn"), std::out_of_range);
  const Kernel& scores = find_kernel(fwd, "attn_scores").kernel;
  EXPECT_EQ(scores.kind, KernelKind::kGemm);
  EXPECT_EQ(scores.gemm.batch, kB * kHeads);
  EXPECT_EQ(scores.gemm.m, kS);
  EXPECT_EQ(scores.gemm.n, kS);
  EXPECT_EQ(scores.gemm.k, kHeadDim);
  const Kernel& pv = find_kernel(fwd, "attn_pv").kernel;
  EXPECT_EQ(pv.gemm.n, kHeadDim);
  EXPECT_EQ(pv.gemm.k, kS);
  // Softmax and minGPT's attention dropout are memory-bound passes over b*heads*s*s scores.
  const std::int64_t score_bytes = kB * kHeads * kS * kS * 2;
  EXPECT_EQ(find_kernel(fwd, "attn_softmax").kernel.bytes.value(), 2 * score_bytes);
  EXPECT_EQ(find_kernel(fwd, "attn_dropout").kernel.bytes.value(),
            2 * score_bytes + kB * kHeads * kS * kS);
  // No causal halving: 4*b*s^2*d forward, 8*b*s^2*d backward.
  EXPECT_DOUBLE_EQ(attention_flops(fwd), 4.0 * kB * kS * kS * kD);
  EXPECT_DOUBLE_EQ(attention_flops(w.layers[1].backward), 8.0 * kB * kS * kS * kD);
}

TEST(Attention, NaiveForwardDoublesFlashForwardFlops) {
  const Workload flash = build_workload(mid_gpt(), testing::options(kB, kS, true));
  const Workload naive = build_workload(mid_gpt(), testing::options(kB, kS, false));
  EXPECT_DOUBLE_EQ(attention_flops(naive.layers[1].forward),
                   2.0 * attention_flops(flash.layers[1].forward));
}

TEST(Attention, MptHasNoAttentionDropout) {
  const TransformerSpec mpt = testing::mpt_spec(1, kD, kHeads, 1000, kS);
  const Workload w = build_workload(mpt, testing::options(kB, kS, false));
  EXPECT_THROW(find_kernel(w.layers[1].forward, "attn_dropout"), std::out_of_range);
  EXPECT_THROW(find_kernel(w.layers[1].forward, "attn_resid_dropout"), std::out_of_range);
}

TEST(Attention, GroupedQueryAttentionShrinksKeyValueProjections) {
  const std::int64_t t = 1 * 1024, d = 4096, kv = 8 * 128;
  const Workload gqa = build_workload(testing::llama_3_1_8b(), testing::options(1, 1024));
  TransformerSpec mha_spec = testing::llama_3_1_8b();
  mha_spec.n_kv_heads = mha_spec.n_heads;
  const Workload mha = build_workload(mha_spec, testing::options(1, 1024));
  const std::vector<NamedKernel>& fwd = gqa.layers[1].forward;
  EXPECT_DOUBLE_EQ(find_kernel(fwd, "q").kernel.flops.value(), 2.0 * t * d * d);
  EXPECT_DOUBLE_EQ(find_kernel(fwd, "k").kernel.flops.value(), 2.0 * t * d * kv);
  EXPECT_DOUBLE_EQ(find_kernel(fwd, "v").kernel.flops.value(), 2.0 * t * d * kv);
  EXPECT_EQ(find_kernel(fwd, "k").kernel.gemm.n, kv);
  // k and v lose 2*T*d*(d - kv) FLOPs each; the attention core FLOPs do not change.
  EXPECT_DOUBLE_EQ(
      testing::total_flops(mha.layers[1].forward) - testing::total_flops(gqa.layers[1].forward),
      2.0 * 2.0 * t * d * (d - kv));
  EXPECT_DOUBLE_EQ(find_kernel(fwd, "attn").kernel.flops.value(),
                   find_kernel(mha.layers[1].forward, "attn").kernel.flops.value());
  // Eager torchtitan copies K and V to all 32 heads first (repeat_kv), so SDPA reads them at
  // the full width; compiled, the kernel reads them at kv width.
  EXPECT_EQ(find_kernel(fwd, "repeat_kv").kernel.bytes.value(), (2 * t * kv + 2 * t * d) * 2);
  const Kernel& attn = find_kernel(fwd, "attn").kernel;
  EXPECT_EQ(attn.attention.kv_heads, 32);
  EXPECT_EQ(attn.bytes.value(), 4 * t * d * 2 + 32 * 1024 * 4);
  WorkloadOptions compiled = testing::options(1, 1024);
  compiled.compiled = true;
  const Workload compiled_workload = build_workload(testing::llama_3_1_8b(), compiled);
  const Kernel& fused = find_kernel(compiled_workload.layers[1].forward, "attn").kernel;
  EXPECT_EQ(fused.attention.kv_heads, 8);
  EXPECT_EQ(fused.bytes.value(), (2 * t * d + 2 * t * kv) * 2 + 32 * 1024 * 4);
}

}  // namespace
}  // namespace fsdpsim::models
