// Internal to fsdpsim_models: one HF T5Block (transformers modeling_t5.py) of the encoder
// (T5LayerSelfAttention, T5LayerFF) or of the decoder (T5LayerSelfAttention with a causal mask,
// T5LayerCrossAttention on the encoder output, T5LayerFF). Every sub-layer is
//   h = h + dropout(sublayer(T5LayerNorm(h)))
// with bias-free linears; the FFN is wi -> ReLU -> dropout -> wo (v1.0, "relu") or
// gelu_new(wi_0) * wi_1 -> dropout -> wo (v1.1, "gated-gelu"). The first block of each stack owns
// the relative position bias (relative_attention_num_buckets x heads) and computes the
// [b, heads, s, s] bias every block of the stack adds to its scores (T5Stack passes it on).
//
// Tensors shared across the blocks of a stack, and how they reach the memory model:
//  * the position bias (and the decoder's cross-attention bias, zeros + mask): alive during the
//    whole stack forward, counted in every block's forward transient peak; under full activation
//    checkpointing every later block's checkpoint keeps it as an input, counted once in the
//    first block's checkpointed bytes;
//  * the position bias gradient: summed over the stack's blocks in backward, counted in every
//    block's backward transient peak;
//  * (decoder) the encoder output is saved by every cross-attention K/V projection: counted once,
//    by the encoder's final-norm layer (t5_family.cpp), whose backward comes right after the last
//    decoder block's; its gradient accumulates over the decoder blocks and is counted in each
//    decoder block's backward transient peak.
// Known gap: selective checkpointing counts blocks across both stacks, so when n_layers is not a
// multiple of checkpoint_every_n_blocks the decoder's first block is not checkpointed while
// later ones are, and the biases their checkpoints keep are not counted.
#pragma once

#include <cstdint>

#include "models/kernel_factory.hpp"
#include "models/layer_draft.hpp"
#include "models/transformer_spec.hpp"

namespace fsdpsim::models::detail {

inline std::int64_t t5_inner(const TransformerSpec& spec) { return spec.n_heads * spec.d_kv; }

// T5LayerNorm as transformers runs it: eagerly, unless WorkloadOptions::rms_norm says fused
// (apex's FusedRMSNorm, which modeling_t5.py swaps in when apex is installed).
inline NormKind t5_norm(const BuildContext& ctx) {
  return ctx.rms_norm.value_or(RmsNormKernel::kEager) == RmsNormKernel::kEager
             ? NormKind::kEagerT5RmsNorm
             : NormKind::kRmsNorm;
}

// A block's T5LayerNorms: compiled, Inductor writes its own fused norm whatever the module's
// code (as a Llama block's, llama_family.cpp block_norm).
inline NormKind t5_block_norm(const BuildContext& ctx) {
  return ctx.compiled ? NormKind::kRmsNorm : t5_norm(ctx);
}

// Each nn.Parameter of one block in registration order (q, k, v, o: d_model x inner each, the
// relative bias table in the first block, the self-attention's T5LayerNorm weight; the decoder's
// cross-attention q, k, v, o and norm; the FFN's 2 or 3 matrices and norm; no biases).
std::vector<std::int64_t> t5_block_parameters(const TransformerSpec& spec, bool decoder,
                                              bool first);

// `enc` is the encoder's context (seq = encoder length), `dec` the decoder's; an encoder block
// uses only `enc`.
Layer build_t5_block(const TransformerSpec& spec, const BuildContext& enc, const BuildContext& dec,
                     bool decoder, std::int64_t index);

}  // namespace fsdpsim::models::detail
