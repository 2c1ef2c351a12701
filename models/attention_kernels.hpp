// Internal to fsdpsim_models: the attention core (softmax(Q K^T / sqrt(d_head)) V, causal) of one
// block, fused (FlashAttention) or unfused (minGPT-style eager PyTorch).
//
// Bookkeeping contract with the caller (see layer_draft.hpp):
//  * Q [T, heads*head_dim], K and V [T, kv_heads*head_dim] exist before the forward core.
//    attention_saves_inputs(ctx) says who keeps them: fused -> the kernel saves them, so the
//    caller save()s them; unfused -> they are temporaries the caller allocate()d and the core
//    release()s once it has copied them into head-major layout.
//  * The forward core saves its output O [T, d] (the input of the output projection, which
//    shares that storage: counted once, here).
//  * Backward: the caller has allocated dO [T, d] as a temporary; the core releases it and
//    leaves dQ, dK, dV (qkv_bytes) allocated, token-major, for the caller to consume.
#pragma once

#include <cstdint>

#include "models/layer_draft.hpp"

namespace fsdpsim::models::detail {

// How the unfused core masks and normalizes its scores.
enum class EagerSoftmax : std::uint8_t {
  // minGPT's and llm-foundry's torch attention: masked_fill with a bool causal mask (which it
  // saves), softmax in the compute dtype.
  kMaskedFill,
  // HF LlamaAttention's eager path (softmax(..., dtype=torch.float32).to(query.dtype)) and Meta's
  // llama model.py (F.softmax(scores.float()).type_as(xq)): an additive causal mask (add saves
  // nothing), softmax in fp32, which saves its fp32 output, cast back for P V.
  kAdditiveMaskFp32,
};

struct AttentionDims {
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  bool dropout = false;  // attention-probability dropout (minGPT attn_dropout)
  EagerSoftmax eager_softmax = EagerSoftmax::kMaskedFill;
};

inline bool attention_saves_inputs(const BuildContext& ctx) { return ctx.flash_attention; }

// Bytes of Q, K and V together: T * (heads + 2*kv_heads) * head_dim * e.
std::int64_t qkv_bytes(const AttentionDims& dims, const BuildContext& ctx);

void append_attention_forward(LayerDraft& draft, const AttentionDims& dims,
                              const BuildContext& ctx);
void append_attention_backward(LayerDraft& draft, const AttentionDims& dims,
                               const BuildContext& ctx);

}  // namespace fsdpsim::models::detail
