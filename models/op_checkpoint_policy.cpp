#include "models/op_checkpoint_policy.hpp"

namespace fsdpsim::models {

namespace {

// aten.mm: the forward GEMM of a bias-free nn.Linear in a non-fp8 dtype (linear with a bias
// folds to addmm for 2-D and contiguous 3-D inputs, aten/src/ATen/native/Linear.cpp).
bool is_aten_mm(const NamedKernel& k) {
  return k.linear == LinearPass::kForward && !k.linear_bias && k.kernel.dtype != Dtype::kFp8;
}

// aten._scaled_dot_product_flash_attention / _efficient_attention: SDPA's FlashAttention-2
// backend (FlashKernel::kFlash2 on a fused kernel).
bool is_sdpa_flash(const NamedKernel& k) {
  return k.kernel.kind == KernelKind::kAttention && k.kernel.attention.fused &&
         !k.kernel.attention.backward && k.kernel.attention.kernel == FlashKernel::kFlash2;
}

// The mm's output C[m, n]: bf16/fp16 GEMMs write their dtype, TF32 GEMMs write fp32.
std::int64_t mm_output_bytes(const Kernel& k) {
  const std::int64_t element = k.dtype == Dtype::kTf32 ? 4 : dtype_bytes(k.dtype);
  return k.gemm.m * k.gemm.n * k.gemm.batch * element;
}

// SDPA flash's saved outputs: O [b, s, heads, head_dim] in the compute dtype and the fp32
// log-sum-exp [b, heads, s] (at::_scaled_dot_product_flash_attention's first two outputs).
std::int64_t attention_output_bytes(const Kernel& k) {
  const AttentionShape& a = k.attention;
  constexpr std::int64_t kLogSumExpBytes = 4;
  return a.batch * a.heads * a.seq_q * (a.head_dim * dtype_bytes(k.dtype) + kLogSumExpBytes);
}

}  // namespace

OpCheckpointPlan torchtitan_op_checkpoint_plan(const Layer& layer) {
  OpCheckpointPlan plan;
  plan.saved_output.assign(layer.forward.size(), 0);
  std::int64_t mm_count = 0;
  std::int64_t saved = 0;
  for (std::size_t i = 0; i < layer.forward.size(); ++i) {
    const NamedKernel& k = layer.forward[i];
    if (is_aten_mm(k)) {
      // "Saves output of all compute ops, except every second mm".
      if (++mm_count % 2 == 0) continue;
      plan.saved_output[i] = 1;
      saved += mm_output_bytes(k.kernel);
    } else if (is_sdpa_flash(k)) {
      plan.saved_output[i] = 1;
      saved += attention_output_bytes(k.kernel);
    }
  }
  plan.saved_bytes = Bytes(saved);
  return plan;
}

}  // namespace fsdpsim::models
