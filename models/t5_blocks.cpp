// T5Block layers: kernels, saved tensors and transient peaks (t5_blocks.hpp has the structure
// and the bookkeeping of the tensors shared by a stack's blocks).
//
// Attention-only checkpointing recomputes one attention core per layer (Layer holds one range):
// the self-attention core of encoder blocks and the cross-attention core of decoder blocks (the
// last core a block records).
#include "models/t5_blocks.hpp"

#include <string>

#include "models/kernel_factory.hpp"
#include "models/t5_attention.hpp"

namespace fsdpsim::models::detail {
namespace {

struct Block {
  const TransformerSpec& spec;
  const BuildContext& ctx;  // this block's stack
  const BuildContext& enc;  // the encoder's (cross-attention keys and values)
  bool decoder = false;
  bool first = false;

  [[nodiscard]] bool dropout() const { return spec.dropout_rate > 0.0; }
  [[nodiscard]] std::int64_t hidden() const {
    return ctx.tokens * spec.d_model * ctx.element_bytes;
  }
  [[nodiscard]] std::int64_t inner_bytes(const BuildContext& c) const {
    return c.tokens * t5_inner(spec) * c.element_bytes;
  }
  [[nodiscard]] std::int64_t ffn_bytes() const {
    return ctx.tokens * spec.ffn_dim * ctx.element_bytes;
  }
  [[nodiscard]] T5AttentionDims self_dims() const {
    return {"attn", spec.n_heads, spec.d_kv, ctx.seq, ctx.seq, dropout(), true, decoder};
  }
  [[nodiscard]] T5AttentionDims cross_dims() const {
    return {"cross_attn", spec.n_heads, spec.d_kv, ctx.seq, enc.seq, dropout(), false};
  }
  // The [b, heads, q, k] biases this stack passes from block to block, and the gradients
  // accumulated across its blocks in backward.
  [[nodiscard]] std::int64_t stack_bias_bytes() const {
    return t5_score_bytes(self_dims(), ctx) + (decoder ? t5_score_bytes(cross_dims(), ctx) : 0);
  }
  [[nodiscard]] std::int64_t stack_gradient_bytes() const {
    const std::int64_t encoder_output = enc.tokens * spec.d_model * enc.element_bytes;
    return t5_score_bytes(self_dims(), ctx) + (decoder ? encoder_output : 0);
  }
};

// o projection output -> dropout -> residual add (the sum is the next sub-layer's input). In the
// block's last sub-layer the dropout's mask, saved once its kernel has run, is the last tensor
// backward reads: a recompute that stops early (Layer::recompute_early_stop_kernel) skips the add.
void residual_forward(LayerDraft& draft, const Block& b, const std::string& prefix,
                      bool block_tail = false) {
  const std::int64_t hidden = b.hidden();
  TransientTracker& temps = draft.forward_temps();
  temps.allocate(hidden);
  if (b.dropout()) {
    // Its output is read only by the residual add (handed off under torch.compile).
    draft.forward(handed_off(dropout_forward(prefix + "_dropout", b.spec.d_model, b.ctx), hidden));
    temps.allocate(hidden);
    temps.release(hidden);
    draft.save(b.ctx.tokens * b.spec.d_model * kMaskBytes);
    if (block_tail) draft.stop_recompute_before_next_kernel();
  }
  draft.forward(add_kernel(prefix + "_residual", b.spec.d_model, b.ctx));
  temps.release(hidden);
}

// The sub-layer's input gradient: T5LayerNorm backward, then the residual path's gradient added.
// Precondition: the normalized input's gradient is allocated; releases it.
void norm_and_residual_backward(LayerDraft& draft, const Block& b, const std::string& prefix) {
  TransientTracker& temps = draft.backward_temps();
  // The norm's input gradient is read only by the residual add.
  append_norm_backward(draft, prefix + "_norm", t5_block_norm(b.ctx), b.spec.d_model, b.ctx,
                       b.hidden());
  temps.allocate(b.hidden());  // the norm's input gradient
  temps.release(b.hidden());   // the normalized input's gradient
  draft.backward(add_kernel(prefix + "_residual_grad", b.spec.d_model, b.ctx));
  temps.release(b.hidden());  // the norm's input gradient, summed into the residual path
}

void position_bias_forward(LayerDraft& draft, const Block& b) {
  const BuildContext& ctx = b.ctx;
  const std::int64_t pairs = ctx.seq * ctx.seq;
  const std::int64_t table_out = pairs * b.spec.n_heads * ctx.element_bytes;
  // T5Stack.get_extended_attention_mask: [b, 1, 1, k] (encoder), causal [b, 1, q, k] (decoder).
  const std::int64_t mask =
      (b.decoder ? ctx.batch * pairs : ctx.batch * ctx.seq) * ctx.element_bytes;
  TransientTracker& temps = draft.forward_temps();
  // T5Attention._relative_position_bucket: about 15 small elementwise ops on the int64 [q, k]
  // grid in eager mode, counted as one pass that reads and writes it.
  draft.forward(memory_bound_kernel("relative_position_bucket", 2 * pairs * kIndexBytes, ctx));
  draft.forward(memory_bound_kernel("position_bias_lookup", pairs * kIndexBytes + table_out, ctx));
  draft.save(pairs * kIndexBytes);  // nn.Embedding saves the bucket ids
  temps.allocate(table_out);
  const std::int64_t bias = t5_score_bytes(b.self_dims(), ctx);
  draft.forward(memory_bound_kernel("position_bias_add_mask", table_out + mask + bias, ctx));
  temps.allocate(bias);  // alive until the stack's forward ends (released by the block)
  temps.release(table_out);
}

void cross_bias_forward(LayerDraft& draft, const Block& b) {
  const std::int64_t zeros = b.ctx.seq * b.enc.seq * b.spec.n_heads * b.ctx.element_bytes;
  const std::int64_t mask = b.ctx.batch * b.enc.seq * b.ctx.element_bytes;
  const std::int64_t bias = t5_score_bytes(b.cross_dims(), b.ctx);
  TransientTracker& temps = draft.forward_temps();
  // T5Attention without relative bias: position_bias = zeros((1, heads, q, k)) + mask.
  draft.forward(memory_bound_kernel("cross_bias_zeros", zeros, b.ctx));
  temps.allocate(zeros);
  draft.forward(memory_bound_kernel("cross_bias_add_mask", zeros + mask + bias, b.ctx));
  temps.allocate(bias);
  temps.release(zeros);
}

void self_attention_forward(LayerDraft& draft, const Block& b) {
  const std::int64_t d = b.spec.d_model;
  const std::int64_t inner = t5_inner(b.spec);
  // The block's first op: its input is the block's.
  draft.note_input_saved(
      append_norm_forward(draft, "self_attn_norm", t5_block_norm(b.ctx), d, b.ctx));
  draft.save(b.hidden());  // the normalized input, kept by q, k and v
  draft.forward(linear_forward("q", {d, inner, false}, b.ctx));
  draft.forward(linear_forward("k", {d, inner, false}, b.ctx));
  draft.forward(linear_forward("v", {d, inner, false}, b.ctx));
  draft.forward_temps().allocate(3 * b.inner_bytes(b.ctx));
  if (b.first) position_bias_forward(draft, b);
  append_t5_attention_forward(draft, b.self_dims(), b.ctx);
  draft.forward(linear_forward("o", {inner, d, false}, b.ctx));
  residual_forward(draft, b, "self_attn");
}

void cross_attention_forward(LayerDraft& draft, const Block& b) {
  const std::int64_t d = b.spec.d_model;
  const std::int64_t inner = t5_inner(b.spec);
  append_norm_forward(draft, "cross_attn_norm", t5_block_norm(b.ctx), d, b.ctx);
  draft.save(b.hidden());  // the normalized input, kept by q
  // k and v project the encoder output (saved once, by the encoder's final-norm layer).
  draft.forward(linear_forward("cross_q", {d, inner, false}, b.ctx));
  draft.forward(linear_forward("cross_k", {d, inner, false}, b.enc));
  draft.forward(linear_forward("cross_v", {d, inner, false}, b.enc));
  draft.forward_temps().allocate(b.inner_bytes(b.ctx) + 2 * b.inner_bytes(b.enc));
  if (b.first) cross_bias_forward(draft, b);
  append_t5_attention_forward(draft, b.cross_dims(), b.ctx);
  draft.forward(linear_forward("cross_o", {inner, d, false}, b.ctx));
  residual_forward(draft, b, "cross_attn");
}

// gelu_new (NewGELUActivation, transformers/activations.py), as eager PyTorch runs it:
// 0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3.0)))), eight elementwise kernels
// in Python's order, 0.5 * x first, each reading and writing whole T x ffn_dim tensors (2 passes,
// 3 for the two binary ones). Autograd keeps x (for pow: wi_0's output, saved by the caller),
// tanh's result t, and both factors of the last product, 0.5 * x and 1 + t; x^3 and the sums in
// between are temporaries. The output is left to the caller.
void gelu_new_forward(LayerDraft& draft, const Block& b) {
  const std::int64_t ffn = b.ffn_bytes();
  TransientTracker& temps = draft.forward_temps();
  const auto kernel = [&](const std::string& op, std::int64_t passes) {
    draft.forward(memory_bound_kernel("gelu_new_" + op, passes * ffn, b.ctx));
  };
  kernel("half_x", 2);
  draft.save(ffn);  // 0.5 * x
  kernel("pow", 2);
  temps.allocate(ffn);  // x^3
  kernel("scale_cube", 2);
  temps.allocate(ffn);
  temps.release(ffn);  // x^3
  kernel("add_x", 3);
  temps.allocate(ffn);
  temps.release(ffn);  // 0.044715 * x^3
  kernel("scale", 2);
  temps.allocate(ffn);
  temps.release(ffn);  // x + 0.044715 * x^3
  kernel("tanh", 2);
  draft.save(ffn);  // t
  temps.release(ffn);
  kernel("one_plus", 2);
  draft.save(ffn);  // 1 + t
  kernel("mul", 3);
}

// Its backward, node by node in autograd's order (last forward op first): the product's two
// gradients; tanh_backward; the two scalar multiplies; pow_backward (pow(x, 2), * 3, * grad);
// autograd adding x's gradient through pow, then through 0.5 * x, into the one through the sum
// (InputBuffer::accumulate). 11 kernels, 28 passes. Takes the output's gradient as a temporary
// and leaves x's gradient as one.
void gelu_new_backward(LayerDraft& draft, const Block& b) {
  const std::int64_t ffn = b.ffn_bytes();
  TransientTracker& temps = draft.backward_temps();
  const auto kernel = [&](const std::string& op, std::int64_t passes) {
    draft.backward(memory_bound_kernel("gelu_new_" + op + "_bwd", passes * ffn, b.ctx));
  };
  kernel("mul_other", 3);  // grad * 0.5x: the gradient of 1 + t
  temps.allocate(ffn);
  kernel("mul_self", 3);  // grad * (1 + t): the gradient of 0.5 * x, held to the end
  temps.allocate(ffn);
  temps.release(ffn);  // the output's gradient
  kernel("tanh", 3);
  temps.allocate(ffn);
  temps.release(ffn);  // 1 + t's
  kernel("scale", 2);
  temps.allocate(ffn);
  temps.release(ffn);  // the gradient of x + 0.044715 * x^3: x's first, and the cube's
  kernel("scale_cube", 2);
  temps.allocate(ffn);  // x^3's
  kernel("pow_square", 2);
  temps.allocate(ffn);
  kernel("pow_times_three", 2);
  temps.allocate(ffn);
  temps.release(ffn);  // x^2
  kernel("pow_grad", 3);
  temps.allocate(ffn);
  temps.release(2 * ffn);  // 3 * x^2 and x^3's gradient
  kernel("accumulate_pow", 3);
  temps.release(ffn);  // added in place into x's gradient
  kernel("half_x", 2);
  temps.allocate(ffn);
  kernel("accumulate_half_x", 3);
  temps.release(2 * ffn);  // 0.5 * x's gradient and x's contribution through it
}

void ffn_forward(LayerDraft& draft, const Block& b) {
  const std::int64_t d = b.spec.d_model;
  const std::int64_t f = b.spec.ffn_dim;
  const std::int64_t ffn = b.ffn_bytes();
  TransientTracker& temps = draft.forward_temps();
  append_norm_forward(draft, "ff_norm", t5_block_norm(b.ctx), d, b.ctx);
  draft.save(b.hidden());  // the normalized input, kept by wi (wi_0, wi_1)
  if (b.spec.gated_ffn) {
    // T5DenseGatedActDense: gelu_new(wi_0(x)) * wi_1(x).
    draft.forward(linear_forward("wi_0", {d, f, false}, b.ctx));
    draft.save(ffn);  // the GELU input
    gelu_new_forward(draft, b);
    draft.save(ffn);  // its output, kept by the product
    draft.forward(linear_forward("wi_1", {d, f, false}, b.ctx));
    draft.save(ffn);  // kept by the product
    draft.forward(memory_bound_kernel("gate_mul", 3 * ffn, b.ctx));
    if (b.dropout()) temps.allocate(ffn);  // the product, freed once dropped out
  } else {
    // T5DenseActDense: relu(wi(x)); ReLU saves its result (threshold_backward reads it).
    draft.forward(linear_forward("wi", {d, f, false}, b.ctx));
    temps.allocate(ffn);
    draft.forward(unary_forward("relu", f, b.ctx));
    draft.save(ffn);
    temps.release(ffn);
  }
  if (b.dropout()) {
    draft.forward(dropout_forward("ff_act_dropout", f, b.ctx));
    if (b.spec.gated_ffn) temps.release(ffn);
    draft.save(b.ctx.tokens * f * kMaskBytes);
  }
  // The wo input: the dropout output, or the product (gated); without dropout ReLU's result is
  // the wo input itself, saved once above.
  if (b.dropout() || b.spec.gated_ffn) draft.save(ffn);
  // Without dropout wo's mm, which packs its input before it runs, is the last op that saves.
  if (!b.dropout()) draft.stop_recompute_before_next_kernel();
  draft.forward(linear_forward("wo", {f, d, false}, b.ctx));
  residual_forward(draft, b, "ff", /*block_tail=*/true);
}

// Dropout backward (if any), then the output projection's backward; leaves the projection's
// input gradient (`projected` bytes) allocated.
void output_projection_backward(LayerDraft& draft, const Block& b, const std::string& prefix,
                                const std::string& linear, LinearDims dims,
                                std::int64_t projected) {
  TransientTracker& temps = draft.backward_temps();
  if (b.dropout()) {
    draft.backward(dropout_backward(prefix + "_dropout_bwd", b.spec.d_model, b.ctx));
    temps.allocate(b.hidden());
  }
  append_linear_backward(draft, linear, dims, b.ctx);
  temps.allocate(projected);
  if (b.dropout()) temps.release(b.hidden());
}

void ffn_backward(LayerDraft& draft, const Block& b) {
  const std::int64_t d = b.spec.d_model;
  const std::int64_t f = b.spec.ffn_dim;
  const std::int64_t ffn = b.ffn_bytes();
  TransientTracker& temps = draft.backward_temps();
  output_projection_backward(draft, b, "ff", "wo", {f, d, false}, ffn);
  if (b.dropout()) {
    draft.backward(dropout_backward("ff_act_dropout_bwd", f, b.ctx));
    temps.allocate(ffn);
    temps.release(ffn);
  }
  if (b.spec.gated_ffn) {
    // The product's backward reads the gradient and both saved factors, writes two gradients.
    draft.backward(memory_bound_kernel("gate_mul_bwd", 5 * ffn, b.ctx));
    temps.allocate(2 * ffn);
    temps.release(ffn);
    append_linear_backward(draft, "wi_1", {d, f, false}, b.ctx);
    temps.allocate(b.hidden());
    temps.release(ffn);
    gelu_new_backward(draft, b);
    append_linear_backward(draft, "wi_0", {d, f, false}, b.ctx);
    temps.allocate(b.hidden());
    temps.release(ffn);
    // Autograd sums the two gradients of the normalized input (input_buffer.cpp).
    draft.backward(add_kernel("ff_in_grad_sum", d, b.ctx));
    temps.release(b.hidden());
  } else {
    draft.backward(unary_backward("relu_bwd", f, b.ctx));
    temps.allocate(ffn);
    temps.release(ffn);
    append_linear_backward(draft, "wi", {d, f, false}, b.ctx);
    temps.allocate(b.hidden());
    temps.release(ffn);
  }
  norm_and_residual_backward(draft, b, "ff");
}

void cross_attention_backward(LayerDraft& draft, const Block& b) {
  const std::int64_t d = b.spec.d_model;
  const std::int64_t inner = t5_inner(b.spec);
  const std::int64_t q = b.inner_bytes(b.ctx);
  const std::int64_t kv = b.inner_bytes(b.enc);
  const std::int64_t encoder_hidden = b.enc.tokens * d * b.enc.element_bytes;
  TransientTracker& temps = draft.backward_temps();
  output_projection_backward(draft, b, "cross_attn", "cross_o", {inner, d, false}, q);
  append_t5_attention_backward(draft, b.cross_dims(), b.ctx);  // leaves dq, dk, dv
  // The k and v input gradients are added into the encoder output's gradient, which every
  // decoder block contributes to (input_buffer.cpp accumulates them).
  for (const char* name : {"cross_v", "cross_k"}) {
    append_linear_backward(draft, name, {d, inner, false}, b.enc);
    temps.allocate(encoder_hidden);
    temps.release(kv);
    draft.backward(add_kernel(std::string(name) + "_encoder_grad_accumulate", d, b.enc));
    temps.release(encoder_hidden);
  }
  append_linear_backward(draft, "cross_q", {d, inner, false}, b.ctx);
  temps.allocate(b.hidden());
  temps.release(q);
  norm_and_residual_backward(draft, b, "cross_attn");
}

void position_bias_backward(LayerDraft& draft, const Block& b) {
  const BuildContext& ctx = b.ctx;
  const std::int64_t pairs = ctx.seq * ctx.seq;
  const std::int64_t table_out = pairs * b.spec.n_heads * ctx.element_bytes;
  const std::int64_t table = b.spec.relative_attention_num_buckets * b.spec.n_heads;
  TransientTracker& temps = draft.backward_temps();
  // The mask add broadcast the [1, heads, q, k] bias over the batch: its backward sums the
  // accumulated gradient over the batch; the embedding backward scatter-adds it into the table.
  draft.backward(memory_bound_kernel("position_bias_batch_sum",
                                     t5_score_bytes(b.self_dims(), ctx) + table_out, ctx));
  temps.allocate(table_out);
  draft.backward(memory_bound_kernel("position_bias_lookup_bwd",
                                     pairs * kIndexBytes + table_out + table * kStatBytes, ctx));
  temps.release(table_out);
}

void self_attention_backward(LayerDraft& draft, const Block& b) {
  const std::int64_t d = b.spec.d_model;
  const std::int64_t inner = t5_inner(b.spec);
  const std::int64_t qkv = b.inner_bytes(b.ctx);
  TransientTracker& temps = draft.backward_temps();
  output_projection_backward(draft, b, "self_attn", "o", {inner, d, false}, qkv);
  append_t5_attention_backward(draft, b.self_dims(), b.ctx);  // leaves dq, dk, dv
  if (b.first) position_bias_backward(draft, b);
  append_linear_backward(draft, "v", {d, inner, false}, b.ctx);
  temps.allocate(b.hidden());
  temps.release(qkv);
  for (const char* name : {"k", "q"}) {
    append_linear_backward(draft, name, {d, inner, false}, b.ctx);
    temps.allocate(b.hidden());
    temps.release(qkv);
    draft.backward(add_kernel(std::string("self_attn_in_grad_sum_") + name, d, b.ctx));
    temps.release(b.hidden());
  }
  norm_and_residual_backward(draft, b, "self_attn");
}

std::string block_name(bool decoder, std::int64_t index) {
  return std::string(decoder ? "decoder" : "encoder") + ".blocks." + std::to_string(index);
}

}  // namespace

std::vector<std::int64_t> t5_block_parameters(const TransformerSpec& spec, bool decoder,
                                              bool first) {
  const std::int64_t d = spec.d_model;
  const std::int64_t projection = d * t5_inner(spec);
  const std::int64_t matrix = d * spec.ffn_dim;
  std::vector<std::int64_t> out;
  const auto add = [&out](std::int64_t numel, int copies) {
    out.resize(out.size() + static_cast<std::size_t>(copies), numel);
  };
  add(projection, 4);  // SelfAttention q, k, v, o
  if (first) add(spec.relative_attention_num_buckets * spec.n_heads, 1);
  add(d, 1);  // its layer_norm
  if (decoder) {
    add(projection, 4);  // EncDecAttention q, k, v, o
    add(d, 1);           // its layer_norm
  }
  add(matrix, spec.gated_ffn ? 3 : 2);  // wi (wi_0, wi_1), wo
  add(d, 1);                            // its layer_norm
  return out;
}

Layer build_t5_block(const TransformerSpec& spec, const BuildContext& enc, const BuildContext& dec,
                     bool decoder, std::int64_t index) {
  const Block b{spec, decoder ? dec : enc, enc, decoder, index == 0};
  LayerDraft draft(block_name(decoder, index), LayerKind::kBlock,
                   t5_block_parameters(spec, decoder, b.first));
  // Forward: the stack's biases are alive across the block (created by the first block).
  TransientTracker& fwd = draft.forward_temps();
  if (!b.first) fwd.allocate(b.stack_bias_bytes());
  self_attention_forward(draft, b);
  if (decoder) cross_attention_forward(draft, b);
  ffn_forward(draft, b);
  fwd.release(b.stack_bias_bytes());
  // Backward: the gradients accumulated across the stack are alive across the block.
  TransientTracker& bwd = draft.backward_temps();
  bwd.allocate(b.stack_gradient_bytes());
  ffn_backward(draft, b);
  if (decoder) cross_attention_backward(draft, b);
  self_attention_backward(draft, b);
  bwd.release(b.stack_gradient_bytes());
  // Full activation checkpointing keeps the block input (torch.utils.checkpoint saves the
  // inputs); the first block's count also holds the biases the later blocks' checkpoints keep.
  return draft.finish(b.hidden() + (b.first ? b.stack_bias_bytes() : 0));
}

}  // namespace fsdpsim::models::detail
