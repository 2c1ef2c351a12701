#include "models/op_checkpoint_policy.hpp"

namespace fsdpsim::models {

namespace {

// aten.mm: the forward GEMM of a bias-free nn.Linear, float8 or not (a linear with a bias folds
// to addmm for 2-D and contiguous 3-D inputs, aten/src/ATen/native/Linear.cpp).
bool is_aten_mm(const NamedKernel& k) { return k.linear == LinearPass::kForward && !k.linear_bias; }

// aten._scaled_dot_product_flash_attention / _cudnn_attention: SDPA's FlashAttention-2 and cuDNN
// backends (FlashKernel::kFlash2 and kCudnn on a fused kernel).
bool is_sdpa(const NamedKernel& k) {
  return k.kernel.kind == KernelKind::kAttention && k.kernel.attention.fused &&
         !k.kernel.attention.backward &&
         (k.kernel.attention.kernel == FlashKernel::kFlash2 ||
          k.kernel.attention.kernel == FlashKernel::kCudnn);
}

}  // namespace

OpCheckpointPlan torchtitan_op_checkpoint_plan(const Layer& layer) {
  OpCheckpointPlan plan;
  plan.saved_output.assign(layer.forward.size(), 0);
  std::int64_t mm_count = 0;
  std::int64_t saved = 0;
  for (std::size_t i = 0; i < layer.forward.size(); ++i) {
    const NamedKernel& k = layer.forward[i];
    // "Saves output of all compute ops, except every second mm".
    const bool kept = is_aten_mm(k) ? ++mm_count % 2 == 1 : is_sdpa(k);
    if (!kept) continue;
    plan.saved_output[i] = 1;
    saved += k.output_bytes;
  }
  plan.saved_bytes = Bytes(saved);
  return plan;
}

}  // namespace fsdpsim::models
