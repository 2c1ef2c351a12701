// t5: HF T5ForConditionalGeneration (transformers modeling_t5.py) as FSDP sees it, layers in
// forward order:
//   embedding          shared token table (vocab x d_model), encoder lookup + dropout
//   encoder.blocks.i   T5Block (t5_blocks.hpp)
//   encoder.final_norm T5Stack.final_layer_norm + dropout: its own small layer, left to the root
//                      FSDP unit as the transformer auto-wrap policy on T5Block leaves it; it also
//                      holds the encoder output, which every decoder block's cross-attention
//                      saves and which stays alive until this layer's backward (right after the
//                      last decoder block's)
//   decoder.embedding  decoder lookup in the shared table (no parameters of its own) + dropout
//   decoder.blocks.i   T5Block with cross-attention
//   head               decoder final_layer_norm + dropout, the d_model^-0.5 rescale when the LM
//                      head is tied (v1.0), lm_head, cross-entropy
// Parameters (no biases anywhere): shared V*d; per block see t5_block_parameters; the relative bias
// (buckets x heads) in the first block of each stack only; a final T5LayerNorm weight d per
// stack; lm_head V*d unless tied. t5-small 60,506,624 ... t5-11b 11,307,321,344 (HF
// model.num_parameters(); tests/unit/models/t5_test.cpp).
// Encoder length = WorkloadOptions::seq_len, decoder length = decoder_seq_len (0: the same).
#include <string>
#include <utility>
#include <vector>

#include "models/families.hpp"
#include "models/head_layer.hpp"
#include "models/kernel_factory.hpp"
#include "models/t5_blocks.hpp"

namespace fsdpsim::models::detail {
namespace {

bool has_dropout(const TransformerSpec& spec) { return spec.dropout_rate > 0.0; }

// Token lookup (+ dropout): nn.Embedding saves the ids; backward zero-fills a gradient of the
// shared table and scatter-adds T rows into it (append_embedding_backward), which autograd adds
// to the table's gradient from a use whose backward ran earlier (`adds_to_earlier_gradient`: the
// tied head's and the decoder lookup's for the encoder lookup, the tied head's for the decoder
// lookup).
// `live_gradient`: bytes of a gradient accumulated across the layer's backward by others (the
// decoder lookup runs between the decoder blocks, which sum the encoder output's gradient, and
// the encoder's final norm, which consumes it).
Layer build_lookup(const TransformerSpec& spec, const BuildContext& ctx, std::string name,
                   std::vector<std::int64_t> parameters, std::int64_t live_gradient,
                   bool adds_to_earlier_gradient) {
  LayerDraft draft(std::move(name), LayerKind::kEmbedding, std::move(parameters));
  const std::int64_t hidden = ctx.tokens * spec.d_model * ctx.element_bytes;
  const std::int64_t ids = ctx.tokens * kIndexBytes;
  draft.forward(memory_bound_kernel("tok_embedding", ids + 2 * hidden, ctx));
  draft.save(ids);
  TransientTracker& bwd = draft.backward_temps();
  bwd.allocate(live_gradient);
  if (has_dropout(spec)) {
    draft.forward_temps().allocate(hidden);
    draft.forward(dropout_forward("embedding_dropout", spec.d_model, ctx));
    draft.forward_temps().release(hidden);
    draft.save(ctx.tokens * spec.d_model * kMaskBytes);
    draft.backward(dropout_backward("embedding_dropout_bwd", spec.d_model, ctx));
    bwd.allocate(hidden);  // the lookup's output gradient, read by the scatter-add below
  }
  append_embedding_backward(draft, "tok_embedding", spec.vocab, spec.d_model, ctx.tokens,
                            adds_to_earlier_gradient, ctx);
  bwd.release(live_gradient + (has_dropout(spec) ? hidden : 0));
  return draft.finish(-1);
}

// T5LayerNorm then dropout, the start of a stack's end (encoder final norm, head).
void final_norm_forward(LayerDraft& draft, const TransformerSpec& spec, const BuildContext& ctx) {
  const std::int64_t hidden = ctx.tokens * spec.d_model * ctx.element_bytes;
  append_norm_forward(draft, "final_norm", t5_norm(ctx), spec.d_model, ctx);
  if (has_dropout(spec)) {
    draft.forward_temps().allocate(hidden);
    draft.forward(dropout_forward("final_dropout", spec.d_model, ctx));
    draft.forward_temps().release(hidden);
    draft.save(ctx.tokens * spec.d_model * kMaskBytes);
  }
}

// Precondition: the stack output's gradient is allocated; releases it.
void final_norm_backward(LayerDraft& draft, const TransformerSpec& spec, const BuildContext& ctx) {
  const std::int64_t hidden = ctx.tokens * spec.d_model * ctx.element_bytes;
  TransientTracker& temps = draft.backward_temps();
  if (has_dropout(spec)) {
    draft.backward(dropout_backward("final_dropout_bwd", spec.d_model, ctx));
    temps.allocate(hidden);
    temps.release(hidden);
  }
  append_norm_backward(draft, "final_norm", t5_norm(ctx), spec.d_model, ctx, 0);
  temps.allocate(hidden);  // the norm's input gradient
  temps.release(hidden);   // the norm's input gradient is the layer's input gradient
  temps.release(hidden);
}

Layer build_encoder_final(const TransformerSpec& spec, const BuildContext& enc) {
  LayerDraft draft("encoder.final_norm", LayerKind::kUnwrapped, {spec.d_model});
  const std::int64_t hidden = enc.tokens * spec.d_model * enc.element_bytes;
  final_norm_forward(draft, spec, enc);
  draft.save(hidden);  // the encoder output, kept by every decoder cross-attention k and v
  draft.backward_temps().allocate(hidden);
  final_norm_backward(draft, spec, enc);
  return draft.finish(-1);
}

Layer build_head(const TransformerSpec& spec, const BuildContext& dec) {
  const std::int64_t d = spec.d_model;
  const std::int64_t hidden = dec.tokens * d * dec.element_bytes;
  const std::int64_t logits = dec.tokens * spec.vocab * dec.element_bytes;
  const LinearDims lm_head{d, spec.vocab, false};
  LayerDraft draft("head", LayerKind::kHead, t5_head_parameters(spec));
  TransientTracker& fwd = draft.forward_temps();
  final_norm_forward(draft, spec, dec);
  if (spec.tied_embeddings) {
    // T5ForConditionalGeneration.forward: sequence_output * model_dim**-0.5 before the tied head
    // (Mesh TensorFlow's rescaling); a scalar multiply saves nothing.
    fwd.allocate(hidden);
    draft.forward(unary_forward("lm_head_rescale", d, dec));
    fwd.release(hidden);
  }
  draft.save(hidden);  // the lm_head input
  draft.forward(linear_forward("lm_head", lm_head, dec));
  fwd.allocate(logits);
  // CrossEntropyLoss(lm_logits, labels) on the logits as computed (bf16 under FSDP
  // MixedPrecision, no upcast in HF T5): log_softmax saves its output, nll_loss the targets.
  draft.forward(memory_bound_kernel(
      "log_softmax", log_softmax_forward_passes(spec.vocab, dec.element_bytes) * logits, dec));
  draft.save(logits);
  fwd.release(logits);
  draft.forward(memory_bound_kernel(
      "nll_loss", dec.tokens * (kIndexBytes + dec.element_bytes) + kStatBytes, dec));
  draft.save(dec.tokens * kIndexBytes);

  TransientTracker& bwd = draft.backward_temps();
  draft.backward(memory_bound_kernel("nll_loss_bwd",
                                     logits + dec.tokens * (kIndexBytes + dec.element_bytes), dec));
  bwd.allocate(logits);
  draft.backward(memory_bound_kernel(
      "log_softmax_bwd", log_softmax_backward_passes(spec.vocab, dec.element_bytes) * logits, dec));
  bwd.allocate(logits);
  bwd.release(logits);
  append_linear_backward(draft, "lm_head", lm_head, dec);
  bwd.allocate(hidden);
  bwd.release(logits);
  if (spec.tied_embeddings) {
    draft.backward(unary_backward("lm_head_rescale_bwd", d, dec));
    bwd.allocate(hidden);
    bwd.release(hidden);
  }
  final_norm_backward(draft, spec, dec);
  return draft.finish(-1);
}

}  // namespace

std::vector<std::int64_t> t5_head_parameters(const TransformerSpec& spec) {
  // The decoder's final_layer_norm weight, lm_head unless tied to the shared table.
  if (spec.tied_embeddings) return {spec.d_model};
  return {spec.d_model, spec.vocab * spec.d_model};
}

std::int64_t t5_parameter_count(const TransformerSpec& spec) {
  const auto block = [&](bool decoder, bool first) {
    return total_numel(t5_block_parameters(spec, decoder, first));
  };
  const std::int64_t encoder = block(false, true) + (spec.n_layers - 1) * block(false, false);
  const std::int64_t decoder = block(true, true) + (spec.n_decoder_layers - 1) * block(true, false);
  return spec.vocab * spec.d_model + encoder + spec.d_model + decoder +
         total_numel(t5_head_parameters(spec));
}

Workload build_t5_workload(const TransformerSpec& spec, const WorkloadOptions& options) {
  const BuildContext enc = make_context(options);
  WorkloadOptions decoder_options = options;
  decoder_options.seq_len = options.decoder_seq_len > 0 ? options.decoder_seq_len : options.seq_len;
  const BuildContext dec = make_context(decoder_options);
  Workload w;
  w.layers.reserve(static_cast<std::size_t>(spec.n_layers + spec.n_decoder_layers) + 4);
  w.layers.push_back(build_lookup(spec, enc, "embedding", {spec.vocab * spec.d_model}, 0,
                                  /*adds_to_earlier_gradient=*/true));
  // Blocks after the first are identical but for their name: build one, copy it.
  const auto add_stack = [&](bool decoder, std::int64_t count) {
    w.layers.push_back(build_t5_block(spec, enc, dec, decoder, 0));
    if (count < 2) return;
    const Layer later = build_t5_block(spec, enc, dec, decoder, 1);
    for (std::int64_t i = 1; i < count; ++i) {
      w.layers.push_back(later);
      w.layers.back().name =
          std::string(decoder ? "decoder" : "encoder") + ".blocks." + std::to_string(i);
    }
  };
  add_stack(false, spec.n_layers);
  w.layers.push_back(build_encoder_final(spec, enc));
  w.layers.push_back(build_lookup(spec, dec, "decoder.embedding", {},
                                  enc.tokens * spec.d_model * enc.element_bytes,
                                  /*adds_to_earlier_gradient=*/spec.tied_embeddings));
  add_stack(true, spec.n_decoder_layers);
  w.layers.push_back(build_head(spec, dec));
  for (const Layer& layer : w.layers) w.total_numel += layer.numel;
  return w;
}

}  // namespace fsdpsim::models::detail
