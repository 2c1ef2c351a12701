// Internal to fsdpsim_models: HF T5LayerNorm run eagerly (transformers modeling_t5.py,
// T5LayerNorm.forward): an RMS norm with a weight and no bias or mean subtraction, whose variance
// is computed in fp32:
//   variance = x.to(float32).pow(2).mean(-1, keepdim=True)
//   y = x * rsqrt(variance + eps)            (fp32, type promotion)
//   y = y.to(weight.dtype) if the weight is half precision;  return weight * y
// Each line is its own kernel (no fusion in eager mode). Autograd keeps the fp32 copy of x
// (pow saves its input), x and rsqrt (mul saves both operands) and the normalized y (the
// weight multiply saves it). With an fp32 compute dtype the two casts are no-ops. (When NVIDIA
// apex is installed, modeling_t5.py swaps in apex's FusedRMSNorm, which models/kernel_factory's
// fused kRmsNorm describes; the eager path is what a plain PyTorch install runs.)
//
// Bookkeeping (layer_draft.hpp): forward saves the tensors above; the output (weight * y) is
// saved by whichever op consumes it (the caller). Backward expects the output gradient allocated
// by the caller, leaves the input gradient allocated for the caller, frees its own temporaries.
#pragma once

#include <cstdint>
#include <string>

#include "models/layer_draft.hpp"

namespace fsdpsim::models::detail {

void append_t5_norm_forward(LayerDraft& draft, const std::string& name, std::int64_t width,
                            const BuildContext& ctx);
void append_t5_norm_backward(LayerDraft& draft, const std::string& name, std::int64_t width,
                             const BuildContext& ctx);

}  // namespace fsdpsim::models::detail
