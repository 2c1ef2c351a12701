// gpt (minGPT / Megatron GPT) and mpt (MosaicML MPT as llm-foundry builds it) layers.
//
// Block (pre-LN, minGPT model.py Block.forward):
//   x_mid = x + resid_dropout(attn_out(attention(split(qkv(ln1(x))))))
//   y     = x_mid + resid_dropout(mlp_down(gelu(mlp_up(ln2(x_mid)))))
// Parameters per block: qkv d*(d + 2*d_kv) + (d + 2*d_kv), attn_out d^2 + d, mlp_up d*ffn + ffn,
// mlp_down ffn*d + d, two LayerNorms 4d; with d_kv = d and ffn = 4d that is 12d^2 + 13d
// (configs/validation/README.md: P = 12*L*d^2 + 13*L*d + 2*d + V*d + s*d for MPT).
// Embedding: token table V*d and learned positions max_seq_len*d. Head: final LayerNorm 2d and,
// unless tied (MPT), the bias-free LM head V*d (minGPT: nn.Linear(n_embd, vocab, bias=False)).
//
// Dropout: minGPT has embedding, attention-probability and two residual dropouts (attn_pdrop,
// resid_pdrop, embd_pdrop = 0.1); MPT's llm-foundry benchmark configs set them to 0, so mpt
// emits none. Saved activations per block then reproduce Korthikanti et al. 2022, Sec. 4.1:
// s*b*h*(34 + 5*a*s/h) bytes for fp16 gpt with unfused attention (+ the fp32 LayerNorm
// statistics, 16 bytes per token, and the s x s causal mask the paper omits); with FlashAttention
// the a*s^2 terms become the fp32 log-sum-exp; mpt drops the two 1-byte residual masks (32*sbh).
#include <string>

#include "models/attention_kernels.hpp"
#include "models/families.hpp"
#include "models/head_layer.hpp"
#include "models/kernel_factory.hpp"

namespace fsdpsim::models::detail {
namespace {

bool has_dropout(const TransformerSpec& spec) { return spec.family == ModelFamily::kGpt; }

AttentionDims attention_dims(const TransformerSpec& spec) {
  return {spec.n_heads, spec.n_kv_heads, spec.d_model / spec.n_heads, has_dropout(spec)};
}

std::int64_t kv_width(const TransformerSpec& spec) {
  return spec.n_kv_heads * (spec.d_model / spec.n_heads);
}

void block_forward(LayerDraft& draft, const TransformerSpec& spec, const BuildContext& ctx) {
  const std::int64_t d = spec.d_model;
  const std::int64_t f = spec.ffn_dim;
  const std::int64_t hidden = ctx.tokens * d * ctx.element_bytes;
  const std::int64_t inner = ctx.tokens * f * ctx.element_bytes;
  const std::int64_t mask = ctx.tokens * d * kMaskBytes;
  const BuildContext wide = residual_context(ctx);
  const std::int64_t residual = ctx.tokens * d * wide.element_bytes;
  const AttentionDims attn = attention_dims(spec);
  const bool dropout = has_dropout(spec);
  TransientTracker& temps = draft.forward_temps();
  // A norm over the residual stream, then the linear that reads it. Under autocast over wider
  // weights layer_norm runs on autocast's fp32 list and returns the wide dtype, and F.linear
  // casts its input to the compute dtype (aten/src/ATen/autocast_mode.cpp).
  // Returns the bytes of the norm's saved input.
  const auto norm_then_linear_input = [&](const char* norm, const char* linear) {
    const std::int64_t input = append_norm_forward(draft, norm, NormKind::kLayerNorm, d, wide);
    if (wide.element_bytes != ctx.element_bytes) {
      temps.allocate(residual);
      draft.forward(cast_kernel(std::string(linear) + "_input_cast", d, wide.element_bytes,
                                ctx.element_bytes, ctx));
      temps.release(residual);
    }
    draft.save_rematerializable(hidden);  // the linear's input
    return input;
  };
  // A residual branch's dropout after its output projection: its output is allocated and the
  // projection's freed; its mask is saved for backward.
  const auto residual_dropout = [&](const char* name) {
    draft.forward(handed_off(dropout_forward(name, d, ctx), hidden));
    temps.allocate(hidden);
    temps.release(hidden);
    draft.save(mask);
  };

  draft.note_input_saved(norm_then_linear_input("ln1", "qkv"));  // the block input
  draft.forward(linear_forward("qkv", {d, d + 2 * kv_width(spec), true}, ctx));
  // q, k, v are views of the qkv output (minGPT: c_attn(x).split(n_embd, dim=2)).
  if (attention_saves_inputs(ctx)) {
    draft.save(qkv_bytes(attn, ctx));
  } else {
    temps.allocate(qkv_bytes(attn, ctx));
  }
  append_attention_forward(draft, attn, ctx);  // saves O, the attn_out input
  draft.forward(linear_forward("attn_out", {d, d, true}, ctx));
  temps.allocate(hidden);
  if (dropout) residual_dropout("attn_resid_dropout");
  draft.forward(residual_add_kernel("residual1", d, ctx));
  temps.release(hidden);  // x_mid is saved by ln2 below
  norm_then_linear_input("ln2", "mlp_up");
  draft.forward(linear_forward("mlp_up", {d, f, true}, ctx));
  draft.save(inner);  // GELU input
  draft.forward(unary_forward("gelu", f, ctx));
  draft.save_rematerializable(inner);  // GELU output: mlp_down input
  // The last tensor backward reads is mlp_down's input (its mm packs it before running), or,
  // with dropout, the dropout's mask (saved once the kernel has run): a recompute that stops
  // early (Layer::recompute_early_stop_kernel) skips what follows.
  if (!dropout) draft.stop_recompute_before_next_kernel();
  draft.forward(linear_forward("mlp_down", {f, d, true}, ctx));
  temps.allocate(hidden);
  if (dropout) {
    residual_dropout("mlp_resid_dropout");
    draft.stop_recompute_before_next_kernel();
  }
  draft.forward(residual_add_kernel("residual2", d, ctx));
  temps.release(hidden);  // the sum is the block output
}

void block_backward(LayerDraft& draft, const TransformerSpec& spec, const BuildContext& ctx) {
  const std::int64_t d = spec.d_model;
  const std::int64_t f = spec.ffn_dim;
  const std::int64_t hidden = ctx.tokens * d * ctx.element_bytes;
  const std::int64_t inner = ctx.tokens * f * ctx.element_bytes;
  const BuildContext wide = residual_context(ctx);
  const std::int64_t residual = ctx.tokens * d * wide.element_bytes;
  const bool casts = wide.element_bytes != ctx.element_bytes;
  const AttentionDims attn = attention_dims(spec);
  const std::int64_t qkv = qkv_bytes(attn, ctx);
  const bool dropout = has_dropout(spec);
  TransientTracker& temps = draft.backward_temps();
  // The residual stream's gradient entering a branch whose output is in the compute dtype:
  // autograd casts it (the backward of type promotion), then the resid dropout's backward.
  // Returns the bytes of temporaries to free once the branch's output linear has consumed them.
  const auto branch_output_gradient = [&](const char* branch) {
    std::int64_t live = 0;
    if (casts) {
      draft.backward(cast_kernel(std::string(branch) + "_out_grad_cast", d, wide.element_bytes,
                                 ctx.element_bytes, ctx));
      temps.allocate(hidden);
      live += hidden;
    }
    if (dropout) {
      draft.backward(dropout_backward(std::string(branch) + "_resid_dropout_bwd", d, ctx));
      temps.allocate(hidden);
      live += hidden;
    }
    return live;
  };
  // From the gradient of a linear's input (`hidden`, allocated) through the autocast cast and
  // the norm, to the residual stream's gradient accumulated by `add`. The norm's input gradient
  // is a temporary (x_mid's), or the block's input gradient (ln1's), which layers do not count.
  const auto linear_input_to_residual = [&](const char* linear, const char* norm, const char* add,
                                            bool input_gradient_is_temporary) {
    std::int64_t norm_output_gradient = hidden;
    if (casts) {
      draft.backward(cast_kernel(std::string(linear) + "_input_cast_bwd", d, ctx.element_bytes,
                                 wide.element_bytes, ctx));
      temps.allocate(residual);
      temps.release(hidden);
      norm_output_gradient = residual;
    }
    append_norm_backward(draft, norm, NormKind::kLayerNorm, d, wide, residual);
    if (input_gradient_is_temporary) temps.allocate(residual);  // the norm's input gradient ...
    temps.release(norm_output_gradient);
    // ... plus the residual path's gradient (autograd input_buffer.cpp accumulates in place).
    draft.backward(add_kernel(add, d, wide));
  };

  const std::int64_t mlp_out = branch_output_gradient("mlp");
  append_linear_backward(draft, "mlp_down", {f, d, true}, ctx);
  temps.allocate(inner);
  temps.release(mlp_out);
  draft.backward(unary_backward("gelu_bwd", f, ctx));
  temps.allocate(inner);
  temps.release(inner);
  append_linear_backward(draft, "mlp_up", {d, f, true}, ctx);
  temps.allocate(hidden);
  temps.release(inner);
  linear_input_to_residual("mlp_up", "ln2", "residual2_grad", true);
  const std::int64_t attn_out = branch_output_gradient("attn");
  append_linear_backward(draft, "attn_out", {d, d, true}, ctx);
  temps.allocate(hidden);  // dO
  temps.release(attn_out);
  append_attention_backward(draft, attn, ctx);  // leaves dQ, dK, dV
  if (attention_saves_inputs(ctx)) {
    // split() backward concatenates dQ, dK, dV into the qkv output gradient (unfused attention's
    // attn_split_heads_bwd already writes that layout).
    draft.backward(memory_bound_kernel("qkv_grad_cat", 2 * qkv, ctx));
    temps.allocate(qkv);
    temps.release(qkv);
  }
  append_linear_backward(draft, "qkv", {d, d + 2 * kv_width(spec), true}, ctx);
  temps.allocate(hidden);
  temps.release(qkv);
  // ln1's input gradient becomes the block's input gradient once the gradient of x_mid is
  // accumulated into it.
  linear_input_to_residual("qkv", "ln1", "residual1_grad", false);
  temps.release(residual);  // the gradient of x_mid, accumulated into the block's input gradient
}

}  // namespace

std::vector<std::int64_t> gpt_embedding_parameters(const TransformerSpec& spec) {
  return {spec.vocab * spec.d_model, spec.max_seq_len * spec.d_model};  // wte, wpe
}

std::vector<std::int64_t> gpt_block_parameters(const TransformerSpec& spec) {
  const std::int64_t d = spec.d_model;
  const std::int64_t f = spec.ffn_dim;
  const std::int64_t qkv_out = d + 2 * kv_width(spec);
  // ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj: a weight and a bias each.
  return {d, d, d * qkv_out, qkv_out, d * d, d, d, d, d * f, f, f * d, d};
}

std::vector<std::int64_t> gpt_head_parameters(const TransformerSpec& spec) {
  // ln_f weight and bias, lm_head weight unless tied to wte.
  if (spec.tied_embeddings) return {spec.d_model, spec.d_model};
  return {spec.d_model, spec.d_model, spec.vocab * spec.d_model};
}

Layer build_gpt_embedding(const TransformerSpec& spec, const BuildContext& compute) {
  // minGPT GPT.forward: x = drop(wte(idx) + wpe(arange(t))). nn.Embedding saves the indices;
  // its backward zero-fills the table's gradient and scatter-adds the looked-up rows into it
  // (append_embedding_backward).
  // F.embedding is on none of autocast's lists: its output, and so the residual stream, has the
  // weights' dtype.
  const BuildContext ctx = residual_context(compute);
  LayerDraft draft("embedding", LayerKind::kEmbedding, gpt_embedding_parameters(spec));
  const std::int64_t d = spec.d_model;
  const std::int64_t hidden = ctx.tokens * d * ctx.element_bytes;
  const std::int64_t positions = ctx.seq * d * ctx.element_bytes;
  const bool dropout = has_dropout(spec);
  TransientTracker& fwd = draft.forward_temps();

  draft.forward(memory_bound_kernel("tok_embedding", ctx.tokens * kIndexBytes + 2 * hidden, ctx));
  fwd.allocate(hidden);
  draft.save(ctx.tokens * kIndexBytes);
  draft.forward(memory_bound_kernel("pos_embedding", ctx.seq * kIndexBytes + 2 * positions, ctx));
  fwd.allocate(positions);
  draft.save(ctx.seq * kIndexBytes);
  // Broadcast add over the batch: reads both, writes the sum.
  draft.forward(memory_bound_kernel("embedding_add", 2 * hidden + positions, ctx));
  if (dropout) fwd.allocate(hidden);
  fwd.release(hidden + positions);
  if (dropout) {
    draft.forward(dropout_forward("embedding_dropout", d, ctx));
    draft.save(ctx.tokens * d * kMaskBytes);
    fwd.release(hidden);
  }

  TransientTracker& bwd = draft.backward_temps();
  if (dropout) {
    draft.backward(dropout_backward("embedding_dropout_bwd", d, ctx));
    bwd.allocate(hidden);
  }
  // Sum of the gradient over the batch (the broadcast's backward), then wpe's backward over the
  // t positions looked up, then wte's over the T ids.
  draft.backward(memory_bound_kernel("pos_embedding_batch_sum", hidden + positions, ctx));
  bwd.allocate(positions);
  append_embedding_backward(draft, "pos_embedding", spec.max_seq_len, d, ctx.seq, false, ctx);
  bwd.release(positions);
  append_embedding_backward(draft, "tok_embedding", spec.vocab, d, ctx.tokens,
                            /*adds_to_earlier_gradient=*/spec.tied_embeddings, ctx);
  if (dropout) bwd.release(hidden);
  return draft.finish(-1);
}

Layer build_gpt_block(const TransformerSpec& spec, const BuildContext& ctx, std::int64_t index) {
  LayerDraft draft("blocks." + std::to_string(index), LayerKind::kBlock,
                   gpt_block_parameters(spec));
  block_forward(draft, spec, ctx);
  block_backward(draft, spec, ctx);
  // Full activation checkpointing keeps only the block input (torch.utils.checkpoint).
  Layer block = draft.finish(ctx.tokens * spec.d_model * ctx.residual_bytes);
  if (spec.causal_mask_buffer) block.buffers.push_back(spec.max_seq_len * spec.max_seq_len);
  return block;
}

std::vector<Layer> build_gpt_head(const TransformerSpec& spec, const BuildContext& ctx) {
  return build_head_layers(
      {"ln_f", NormKind::kLayerNorm, spec.d_model, spec.vocab, gpt_head_parameters(spec), true},
      ctx);
}

}  // namespace fsdpsim::models::detail
