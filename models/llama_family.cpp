// llama layers (Llama 2 / Llama 3.x as in Meta's reference model.py and torchtitan).
//
// Block: h = x + wo(attention(rope(wq(n1)), rope(wk(n1)), wv(n1))) with n1 = rmsnorm1(x);
//        y = h + w2(silu(w1(n2)) * w3(n2)) with n2 = rmsnorm2(h).
// No biases. Parameters per block: q d*d, k and v d*(n_kv_heads*head_dim) each, o d*d,
// gate (w1) and up (w3) d*ffn each, down (w2) ffn*d, two RMSNorm weights d each.
// Model: embedding V*d, final RMSNorm d, untied LM head V*d (Llama-3.1-8B: 8,030,261,248).
//
// Under autocast over weights wider than the compute dtype (WorkloadOptions::residual_dtype) the
// embedding's output, the residual stream and the norms are in the weights' dtype, and each
// linear reading a norm casts its input (block_forward), as in gpt_family.cpp. RoPE stays
// torchtitan's and Meta's (type_as(xq): bf16 q and k), not HF's, whose fp32 cos and sin would
// promote them under an fp32 stream.
//
// Kernel choices: separate q/k/v projections (torchtitan, HF); RMSNorm fused, saving its input
// and fp32 rstd (nn.RMSNorm with its 2025 fused kernel), or with WorkloadOptions::rms_norm eager,
// op by op (models/eager_rms_norm.hpp; HF's LlamaRMSNorm, torchtitan's norms.RMSNorm until 2025,
// fms); no dropout; without flash_attention, HF LlamaAttention's eager core (an additive causal
// mask, softmax in fp32: models/attention_kernels.cpp). RoPE, SwiGLU and GQA as torchtitan's
// torchtitan/models/llama3/model.py runs them:
//  * eager: apply_rotary_emb is x.float() -> view_as_complex * freqs_cis -> view_as_real ->
//    type_as(x), three kernels over q and k with fp32 in the middle (the multiply saves only
//    freqs_cis, a buffer, since its other operand is what needs the gradient: no activation);
//    backward runs the same three on dq and dk. F.silu(w1(x)) * w3(x) is two kernels, and
//    autograd keeps gate (for silu), silu(gate) and up (for the multiply); backward is two
//    multiplies and silu_backward. repeat_kv copies K and V to all heads before SDPA (expand +
//    reshape), so SDPA saves the repeated K and V and backward sums their gradients per kv head.
//  * compiled (torch.compile of each block, models/compile_fusion.hpp): Inductor generates one
//    RoPE kernel over q and k and one SwiGLU kernel that saves gate and up and recomputes silu
//    in backward; K and V stay at the kv-head width; the norms are its fused kernels whatever
//    the module's code (the final norm, outside the blocks, stays as the module runs it).
#include <string>

#include "models/attention_kernels.hpp"
#include "models/families.hpp"
#include "models/head_layer.hpp"
#include "models/kernel_factory.hpp"

namespace fsdpsim::models::detail {
namespace {

std::int64_t head_dim(const TransformerSpec& spec) { return spec.d_model / spec.n_heads; }
std::int64_t kv_width(const TransformerSpec& spec) { return spec.n_kv_heads * head_dim(spec); }

AttentionDims attention_dims(const TransformerSpec& spec) {
  return {spec.n_heads, spec.n_kv_heads, head_dim(spec), false};
}

// Reads q and k and the fp32 cos/sin table (seq x head_dim), writes the rotated q and k.
std::int64_t rope_bytes(const TransformerSpec& spec, const BuildContext& ctx) {
  const std::int64_t qk = ctx.tokens * (spec.d_model + kv_width(spec)) * ctx.element_bytes;
  return 2 * qk + ctx.seq * head_dim(spec) * kStatBytes;
}

// RoPE over q and k together, on the forward or the backward stream of kernels (`emit`); the
// caller holds the input as a temporary and gets the output as one. Compiled: Inductor's one
// kernel. Eager: apply_rotary_emb's upcast, complex multiply and downcast over T * (d + kv width)
// elements; fp32 activations skip the two casts (Tensor.float() and type_as return their input).
template <typename Emit>
void rope(Emit emit, TransientTracker& temps, const std::string& name, const TransformerSpec& spec,
          const BuildContext& ctx) {
  const std::int64_t elems = ctx.tokens * (spec.d_model + kv_width(spec));
  const std::int64_t narrow = elems * ctx.element_bytes;
  if (ctx.compiled) {
    emit(memory_bound_kernel(name, rope_bytes(spec, ctx), ctx));
    temps.allocate(narrow);
    return;
  }
  const std::int64_t wide = elems * kStatBytes;
  const std::int64_t table_bytes = ctx.seq * head_dim(spec) * kStatBytes;
  if (ctx.element_bytes == kStatBytes) {
    emit(memory_bound_kernel(name + "_mul", 2 * wide + table_bytes, ctx));
    temps.allocate(wide);
    return;
  }
  emit(handed_off(memory_bound_kernel(name + "_upcast", narrow + wide, ctx), wide));
  temps.allocate(wide);
  emit(handed_off(memory_bound_kernel(name + "_mul", 2 * wide + table_bytes, ctx), wide));
  temps.allocate(wide);
  temps.release(wide);
  emit(memory_bound_kernel(name + "_downcast", wide + narrow, ctx));
  temps.allocate(narrow);
  temps.release(wide);
}

bool eager_rms_norm(const BuildContext& ctx) {
  return ctx.rms_norm.value_or(RmsNormKernel::kFused) == RmsNormKernel::kEager;
}

// The block's two RMSNorms.
NormKind block_norm(const BuildContext& ctx) {
  return eager_rms_norm(ctx) && !ctx.compiled ? NormKind::kEagerRmsNorm : NormKind::kRmsNorm;
}

// Autocast over weights wider than the compute dtype, eager: each linear reading the residual
// stream's norm casts that norm's output itself (block_forward).
bool casts_linear_inputs(const BuildContext& ctx) {
  return ctx.residual_bytes != ctx.element_bytes && !ctx.compiled;
}

bool repeats_kv(const TransformerSpec& spec, const BuildContext& ctx) {
  return !ctx.compiled && ctx.flash_attention && spec.n_kv_heads < spec.n_heads;
}

// What a block's forward and backward both size their kernels and tensors by.
struct BlockSizes {
  std::int64_t d = 0;       // d_model
  std::int64_t f = 0;       // ffn_dim
  std::int64_t hidden = 0;  // bytes of one [tokens, d] activation
  std::int64_t kv = 0;      // bytes of K or V at the kv-head width
  std::int64_t inner = 0;   // bytes of one [tokens, f] activation
  bool repeat = false;      // repeat_kv widens K and V to every head before attention
  AttentionDims attn;       // as the attention kernel sees them (after repeat_kv)
};

BlockSizes block_sizes(const TransformerSpec& spec, const BuildContext& ctx) {
  BlockSizes z;
  z.d = spec.d_model;
  z.f = spec.ffn_dim;
  z.hidden = ctx.tokens * z.d * ctx.element_bytes;
  z.kv = ctx.tokens * kv_width(spec) * ctx.element_bytes;
  z.inner = ctx.tokens * z.f * ctx.element_bytes;
  z.repeat = repeats_kv(spec, ctx);
  z.attn = z.repeat ? AttentionDims{spec.n_heads, spec.n_heads, head_dim(spec), false}
                    : attention_dims(spec);
  z.attn.eager_softmax = EagerSoftmax::kAdditiveMaskFp32;
  return z;
}

void block_forward(LayerDraft& draft, const TransformerSpec& spec, const BuildContext& ctx) {
  const auto [d, f, hidden, kv, inner, repeat, attn] = block_sizes(spec, ctx);
  const bool saved_qkv = attention_saves_inputs(ctx);
  const BuildContext wide = residual_context(ctx);
  const std::int64_t residual = ctx.tokens * d * wide.element_bytes;
  TransientTracker& temps = draft.forward_temps();
  const auto forward = [&](NamedKernel k) { draft.forward(std::move(k)); };
  // A linear reading a norm's output: under autocast over wider weights the residual stream and
  // the norms are in the weights' dtype (F.embedding is on none of autocast's lists) and F.linear
  // casts its input, each projection its own copy (cached_cast caches only leaf tensors,
  // aten/src/ATen/autocast_mode.cpp), which its mm saves. Compiled, Inductor fuses the casts
  // into the norm and CSE makes them one tensor (models/compile_fusion.hpp).
  const bool casts = casts_linear_inputs(ctx);
  const auto norm_output_read_by = [&, d = d, hidden = hidden](const char* linear,
                                                               std::int64_t out_width) {
    if (casts) {
      draft.forward(cast_kernel(std::string(linear) + "_input_cast", d, wide.element_bytes,
                                ctx.element_bytes, ctx));
      draft.save_rematerializable(hidden);
    }
    draft.forward(linear_forward(linear, {d, out_width, false}, ctx));
  };

  // Saves the block input (eager: its fp32 copy, the rsqrt and the normalized input).
  draft.note_input_saved(append_norm_forward(draft, "rmsnorm1", block_norm(ctx), d, wide));
  if (casts) {
    temps.allocate(residual);  // rmsnorm1 output, which q, k and v each cast
  } else {
    draft.save_rematerializable(hidden);  // rmsnorm1 output, the input of q, k and v (one tensor)
  }
  norm_output_read_by("q", d);
  norm_output_read_by("k", kv_width(spec));
  norm_output_read_by("v", kv_width(spec));
  if (casts) temps.release(residual);
  temps.allocate(hidden + 2 * kv);  // q and k before RoPE, v
  rope(forward, temps, "rope", spec, ctx);
  temps.release(hidden + kv);  // q and k before RoPE
  if (repeat) {
    // repeat_kv: reads the rotated K and V, writes both at the full head count.
    draft.forward(memory_bound_kernel("repeat_kv", 2 * kv + 2 * hidden, ctx));
    temps.allocate(2 * hidden);
    temps.release(2 * kv);
  }
  const std::int64_t attention_inputs = qkv_bytes(attn, ctx);
  if (saved_qkv) {  // the kernel saves them (Q, K and V): they leave the temporaries
    const std::int64_t per_head = ctx.tokens * attn.head_dim * ctx.element_bytes;
    draft.save(attn.heads * per_head);
    draft.save(attn.kv_heads * per_head);
    draft.save(attn.kv_heads * per_head);
    temps.release(attention_inputs);
  }
  append_attention_forward(draft, attn, ctx);  // saves O, the input of o
  draft.forward(linear_forward("o", {d, d, false}, ctx));
  temps.allocate(hidden);
  draft.forward(residual_add_kernel("residual1", d, ctx));
  temps.release(hidden);  // h is saved by rmsnorm2 below
  append_norm_forward(draft, "rmsnorm2", block_norm(ctx), d, wide);
  if (casts) {
    temps.allocate(residual);  // rmsnorm2 output, which gate and up each cast
  } else {
    draft.save_rematerializable(hidden);  // rmsnorm2 output, the input of gate and up
  }
  norm_output_read_by("gate", f);
  if (ctx.compiled) {
    draft.forward(linear_forward("up", {d, f, false}, ctx));
    draft.save(inner);  // gate (silu's input)
    draft.save(inner);  // up (the multiply's other operand)
    draft.forward(memory_bound_kernel("swiglu", 3 * inner, ctx));
  } else {
    // F.silu(self.w1(x)) * self.w3(x): Python evaluates the silu before w3.
    draft.forward(memory_bound_kernel("silu", 2 * inner, ctx));
    norm_output_read_by("up", f);
    if (casts) temps.release(residual);
    draft.save(inner);  // gate (silu's input)
    draft.save(inner);  // silu(gate), kept by the multiply
    draft.save(inner);  // up, kept by the multiply
    draft.forward(memory_bound_kernel("swiglu_mul", 3 * inner, ctx));
  }
  draft.save_rematerializable(inner);  // swiglu output: down input
  // down's mm packs its input before it runs and nothing after it saves a tensor: a recompute
  // that stops early (Layer::recompute_early_stop_kernel) ends here.
  draft.stop_recompute_before_next_kernel();
  draft.forward(linear_forward("down", {f, d, false}, ctx));
  temps.allocate(hidden);
  draft.forward(residual_add_kernel("residual2", d, ctx));
  temps.release(hidden);  // the sum is the block output
}

void block_backward(LayerDraft& draft, const TransformerSpec& spec, const BuildContext& ctx) {
  const auto [d, f, hidden, kv, inner, repeat, attn] = block_sizes(spec, ctx);
  const BuildContext wide = residual_context(ctx);
  const std::int64_t residual = ctx.tokens * d * wide.element_bytes;
  const bool casts = casts_linear_inputs(ctx);
  TransientTracker& temps = draft.backward_temps();
  const auto backward = [&](NamedKernel k) { draft.backward(std::move(k)); };
  // The residual stream's gradient entering a branch whose output is in the compute dtype:
  // autograd casts it (the backward of the add's type promotion) for the branch's last linear.
  const auto branch_output_gradient = [&, d = d, hidden = hidden](const char* branch) {
    if (!casts) return;
    draft.backward(cast_kernel(std::string(branch) + "_out_grad_cast", d, wide.element_bytes,
                               ctx.element_bytes, ctx));
    temps.allocate(hidden);
  };
  // A linear's input gradient (`hidden`, allocated) back through its autocast cast
  // (ToCopyBackward) to the norm output's dtype: the bytes it then holds.
  const auto linear_input_gradient = [&, d = d, hidden = hidden](const char* linear) {
    if (!casts) return hidden;
    draft.backward(cast_kernel(std::string(linear) + "_input_cast_bwd", d, ctx.element_bytes,
                               wide.element_bytes, ctx));
    temps.allocate(residual);
    temps.release(hidden);
    return residual;
  };
  // The gradients of a norm's output, summed over its readers: in the norm's dtype when casts.
  const std::int64_t norm_output_gradient = casts ? residual : hidden;
  const BuildContext& sums = casts ? wide : ctx;

  branch_output_gradient("mlp");
  append_linear_backward(draft, "down", {f, d, false}, ctx);
  temps.allocate(inner);             // d(out), written while the branch's gradient is read
  if (casts) temps.release(hidden);  // the branch output's gradient, consumed
  if (ctx.compiled) {
    // Reads d(swiglu out), gate and up; writes d(gate) and d(up).
    draft.backward(memory_bound_kernel("swiglu_bwd", 5 * inner, ctx));
    temps.allocate(2 * inner);
    temps.release(inner);  // d(out)
    append_linear_backward(draft, "up", {d, f, false}, ctx);
    temps.allocate(hidden);
    temps.release(inner);  // d(up)
    linear_input_gradient("up");
  } else {
    // MulBackward0: d(silu) = d(out) * up and d(up) = d(out) * silu(gate); d(out) goes when it
    // returns. Autograd then runs w3's backward (the later of the two in forward: the higher
    // sequence number) before SiluBackward: silu_backward(d(silu), gate).
    draft.backward(memory_bound_kernel("swiglu_mul_bwd_silu", 3 * inner, ctx));
    temps.allocate(inner);
    draft.backward(memory_bound_kernel("swiglu_mul_bwd_up", 3 * inner, ctx));
    temps.allocate(inner);
    temps.release(inner);  // d(out)
    append_linear_backward(draft, "up", {d, f, false}, ctx);
    temps.allocate(hidden);
    temps.release(inner);  // d(up)
    linear_input_gradient("up");
    draft.backward(memory_bound_kernel("silu_bwd", 3 * inner, ctx));
    temps.allocate(inner);
    temps.release(inner);  // d(silu)
  }
  append_linear_backward(draft, "gate", {d, f, false}, ctx);
  temps.allocate(hidden);
  temps.release(inner);
  linear_input_gradient("gate");
  // Autograd sums the two gradients of rmsnorm2's output (input_buffer.cpp).
  draft.backward(handed_off(add_kernel("mlp_in_grad_sum", d, sums), norm_output_gradient));
  temps.release(norm_output_gradient);
  append_norm_backward(draft, "rmsnorm2", block_norm(ctx), d, wide, norm_output_gradient);
  temps.allocate(residual);  // gradient of h ...
  temps.release(norm_output_gradient);
  draft.backward(add_kernel("residual2_grad", d, wide));  // ... plus the residual path's
  branch_output_gradient("attn");
  append_linear_backward(draft, "o", {d, d, false}, ctx);
  temps.allocate(hidden);                       // dO, written while the branch's gradient is read
  if (casts) temps.release(hidden);             // the branch output's gradient, consumed
  append_attention_backward(draft, attn, ctx);  // leaves dq, dk (rotated) and dv
  if (repeat) {
    // The expand's backward sums the head gradients of each kv head: reads dK and dV at the full
    // head count, writes them at the kv-head width.
    draft.backward(memory_bound_kernel("repeat_kv_bwd", 2 * hidden + 2 * kv, ctx));
    temps.allocate(2 * kv);
    temps.release(2 * hidden);
  }
  rope(backward, temps, "rope_bwd", spec, ctx);
  temps.release(hidden + kv);
  append_linear_backward(draft, "v", {d, kv_width(spec), false}, ctx);
  temps.allocate(hidden);
  temps.release(kv);
  linear_input_gradient("v");
  append_linear_backward(draft, "k", {d, kv_width(spec), false}, ctx);
  temps.allocate(hidden);
  temps.release(kv);
  linear_input_gradient("k");
  draft.backward(add_kernel("attn_in_grad_sum_k", d, sums));
  temps.release(norm_output_gradient);
  append_linear_backward(draft, "q", {d, d, false}, ctx);
  temps.allocate(hidden);
  temps.release(hidden);  // dq
  linear_input_gradient("q");
  draft.backward(handed_off(add_kernel("attn_in_grad_sum_q", d, sums), norm_output_gradient));
  temps.release(norm_output_gradient);
  append_norm_backward(draft, "rmsnorm1", block_norm(ctx), d, wide, norm_output_gradient);
  temps.release(norm_output_gradient);  // rmsnorm1's input gradient becomes the block's ...
  draft.backward(add_kernel("residual1_grad", d, wide));
  temps.release(residual);  // ... once the gradient of h is accumulated into it
}

}  // namespace

std::vector<std::int64_t> llama_embedding_parameters(const TransformerSpec& spec) {
  return {spec.vocab * spec.d_model};  // tok_embeddings
}

std::vector<std::int64_t> llama_block_parameters(const TransformerSpec& spec) {
  const std::int64_t d = spec.d_model;
  const std::int64_t kv = d * kv_width(spec);
  const std::int64_t ffn = d * spec.ffn_dim;
  // As torchtitan's (and Meta's) TransformerBlock registers them: attention (wq, wk, wv, wo),
  // feed_forward (w1, w2, w3), then attention_norm and ffn_norm; no biases.
  return {d * d, kv, kv, d * d, ffn, ffn, ffn, d, d};
}

std::vector<std::int64_t> llama_head_parameters(const TransformerSpec& spec) {
  // norm weight, output weight unless tied to tok_embeddings.
  if (spec.tied_embeddings) return {spec.d_model};
  return {spec.d_model, spec.vocab * spec.d_model};
}

Layer build_llama_embedding(const TransformerSpec& spec, const BuildContext& compute) {
  // tok_embeddings: gather T rows (saves the ids); backward zero-fills the V x d gradient and
  // scatter-adds T rows into it. F.embedding is on none of autocast's lists: its output, and so
  // the residual stream, has the weights' dtype.
  const BuildContext ctx = residual_context(compute);
  LayerDraft draft("embedding", LayerKind::kEmbedding, llama_embedding_parameters(spec));
  const std::int64_t hidden = ctx.tokens * spec.d_model * ctx.element_bytes;
  const std::int64_t ids = ctx.tokens * kIndexBytes;
  draft.forward(memory_bound_kernel("tok_embedding", ids + 2 * hidden, ctx));
  draft.save(ids);
  append_embedding_backward(draft, "tok_embedding", spec.vocab, spec.d_model, ctx.tokens,
                            /*adds_to_earlier_gradient=*/spec.tied_embeddings, ctx);
  return draft.finish(-1);
}

Layer build_llama_block(const TransformerSpec& spec, const BuildContext& ctx, std::int64_t index) {
  LayerDraft draft("blocks." + std::to_string(index), LayerKind::kBlock,
                   llama_block_parameters(spec));
  block_forward(draft, spec, ctx);
  block_backward(draft, spec, ctx);
  // Full activation checkpointing keeps only the block input (torch.utils.checkpoint).
  return draft.finish(ctx.tokens * spec.d_model * ctx.residual_bytes);
}

std::vector<Layer> build_llama_head(const TransformerSpec& spec, const BuildContext& ctx) {
  const NormKind norm = eager_rms_norm(ctx) ? NormKind::kEagerRmsNorm : NormKind::kRmsNorm;
  return build_head_layers(
      {"norm", norm, spec.d_model, spec.vocab, llama_head_parameters(spec), true}, ctx);
}

}  // namespace fsdpsim::models::detail
