// Internal to fsdpsim_models: an RMSNorm run eagerly, op by op, as the reference Python code
// writes it; no op fuses with the next (the fused kind, one kernel per pass, is
// kernel_factory's NormKind::kRmsNorm). Two forms (NormKind):
//  * kEagerRmsNorm, the Llama reference: Meta's llama model.py and torchtitan's norms.RMSNorm
//    (`self._norm(x.float()).type_as(x) * self.weight`), HF transformers' LlamaRMSNorm, fms's
//    LayerNormParameterized(use_high_precision_pow=True), and F.rms_norm / nn.RMSNorm until
//    pytorch/pytorch#153666 (2025) gave them a fused CUDA kernel, `_fused_rms_norm` (before, a
//    CompositeImplicitAutograd op):
//      x32 = x.float();  r = rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
//      y = (x32 * r).type_as(x);  return weight * y
//    Autograd keeps x32 (pow and the multiply save it), r (rsqrt saves its result, the multiply
//    its other operand) and y (the weight multiply).
//  * kEagerT5RmsNorm, HF T5LayerNorm (transformers modeling_t5.py): the fp32 copy feeds only the
//    variance; the multiply reads the input and promotes:
//      variance = x.to(float32).pow(2).mean(-1, keepdim=True)
//      y = x * rsqrt(variance + eps);  y = y.to(weight.dtype) if half;  return weight * y
//    Autograd keeps the fp32 copy (pow), x and r (the multiply) and y. (With NVIDIA apex
//    installed, modeling_t5.py swaps in apex's FusedRMSNorm: the fused kind.)
// With an fp32 compute dtype the casts are no-ops and run no kernel.
//
// Bookkeeping (layer_draft.hpp), as kernel_factory's fused norms: forward saves the tensors above
// and leaves its output to whichever op consumes it (the caller); backward expects the output
// gradient held by the caller and leaves the input gradient for the caller to allocate. The
// temporaries in between are allocated and freed here, so they count towards the layer's peak.
#pragma once

#include <cstdint>
#include <string>

#include "models/kernel_factory.hpp"
#include "models/layer_draft.hpp"

namespace fsdpsim::models::detail {

// `kind` is kEagerRmsNorm or kEagerT5RmsNorm. Returns the bytes of the saved tensor that is the
// input itself (append_norm_forward's contract).
std::int64_t append_eager_rms_norm_forward(LayerDraft& draft, const std::string& name,
                                           NormKind kind, std::int64_t width,
                                           const BuildContext& ctx);
void append_eager_rms_norm_backward(LayerDraft& draft, const std::string& name, NormKind kind,
                                    std::int64_t width, const BuildContext& ctx);

}  // namespace fsdpsim::models::detail
