// Internal to fsdpsim_models: the attention core of HF T5Attention (transformers modeling_t5.py,
// T5Attention.forward), which is always unfused: T5 adds a learned relative position bias to the
// scores, which the fused kernels of that era could not take, and HF T5 has no SDPA path.
//   scores = q @ k^T                      (no 1/sqrt(d_kv) scaling: T5's initialization has it)
//   scores += position_bias               ([b, heads, q, k]: relative bias + additive mask)
//   w = softmax(scores.float(), -1).type_as(scores);  w = dropout(w);  o = unshape(w @ v)
//
// Bookkeeping, as attention_kernels.hpp for the unfused path: the caller allocated the
// token-major q [Tq, heads*d_kv], k and v [Tkv, heads*d_kv] as temporaries; the core copies them
// head-major (torch.matmul on transposed views), releases them, and saves its output o (the input
// of the output projection). Backward: the caller allocated d(o); the core releases it and leaves
// dq, dk, dv allocated, token-major.
#pragma once

#include <cstdint>

#include "models/layer_draft.hpp"

namespace fsdpsim::models::detail {

struct T5AttentionDims {
  const char* prefix = "attn";  // kernel names: "<prefix>_scores", ... ("cross_attn" in decoders)
  std::int64_t heads = 0;
  std::int64_t d_kv = 0;
  std::int64_t seq_q = 0;
  std::int64_t seq_kv = 0;  // encoder length for cross-attention
  bool dropout = false;     // attention-probability dropout (dropout_rate > 0)
  // The bias gradient is accumulated across the stack (self-attention: the relative bias is
  // trainable); cross-attention's bias is a zero tensor plus the mask, without gradient.
  bool bias_needs_grad = false;
  // Decoder self-attention: the mask in the bias is causal, so model FLOPs count half of each
  // score and probability product (causal_attention_gemm), as the other families' unfused path.
  bool causal = false;
};

// Bytes of one [b, heads, seq_q, seq_kv] tensor in the compute dtype (scores, position bias).
std::int64_t t5_score_bytes(const T5AttentionDims& dims, const BuildContext& ctx);

void append_t5_attention_forward(LayerDraft& draft, const T5AttentionDims& dims,
                                 const BuildContext& ctx);
void append_t5_attention_backward(LayerDraft& draft, const T5AttentionDims& dims,
                                  const BuildContext& ctx);

}  // namespace fsdpsim::models::detail
