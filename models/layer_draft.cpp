#include "models/layer_draft.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <utility>

namespace fsdpsim::models::detail {

BuildContext make_context(const WorkloadOptions& options) {
  BuildContext ctx;
  ctx.batch = options.micro_batch;
  ctx.seq = options.seq_len;
  ctx.tokens = options.micro_batch * options.seq_len;
  ctx.element_bytes = dtype_bytes(options.compute_dtype);
  ctx.dtype = options.compute_dtype;
  ctx.gemm_dtype = gemm_math_dtype(options.compute_dtype, options.allow_tf32);
  ctx.residual_bytes = std::max(ctx.element_bytes,
                                options.residual_dtype ? dtype_bytes(*options.residual_dtype) : 0);
  ctx.flash_attention = options.flash_attention;
  ctx.flash_kernel = options.flash_kernel;
  ctx.unpad_attention = options.unpad_attention;
  ctx.loss = options.loss;
  ctx.rms_norm = options.rms_norm;
  ctx.logits_kept_by_loop = options.logits_kept_by_loop;
  ctx.loss_chunks = options.loss_chunks;
  ctx.compiled = options.compiled;
  return ctx;
}

void TransientTracker::allocate(std::int64_t bytes) {
  if (bytes <= 0) return;
  live_ += bytes;
  tensors_.push_back(bytes);
  if (live_ > peak_) {
    peak_ = live_;
    peak_tensors_ = tensors_;
  }
}

void TransientTracker::release(std::int64_t bytes) {
  if (bytes > live_) {
    throw std::logic_error("models: a layer builder released " + std::to_string(bytes) +
                           " temporary bytes with only " + std::to_string(live_) + " live");
  }
  live_ -= bytes;
  if (const auto same = std::find(tensors_.rbegin(), tensors_.rend(), bytes);
      same != tensors_.rend()) {
    tensors_.erase(std::next(same).base());
    return;
  }
  while (bytes > 0) {
    std::int64_t& last = tensors_.back();
    const std::int64_t taken = std::min(last, bytes);
    last -= taken;
    bytes -= taken;
    if (last == 0) tensors_.pop_back();
  }
}

LayerDraft::LayerDraft(std::string name, LayerKind kind, std::int64_t numel,
                       std::int32_t parameter_tensors) {
  layer_.name = std::move(name);
  layer_.kind = kind;
  layer_.numel = numel;
  layer_.parameter_tensors = parameter_tensors;
}

LayerDraft::LayerDraft(std::string name, LayerKind kind, std::vector<std::int64_t> parameter_numels)
    : LayerDraft(std::move(name), kind, total_numel(parameter_numels),
                 static_cast<std::int32_t>(parameter_numels.size())) {
  layer_.parameter_numels = std::move(parameter_numels);
}

void LayerDraft::forward(NamedKernel kernel) {
  if (stop_before_next_) {
    layer_.recompute_early_stop_kernel = kernel.name;
    stop_before_next_ = false;
  }
  layer_.forward.push_back(std::move(kernel));
}

void LayerDraft::loop_keeps_last_output(std::int64_t bytes) {
  if (layer_.forward.empty()) {
    throw std::logic_error("models: loop_keeps_last_output before any forward kernel");
  }
  layer_.loop_kept_output = Bytes(bytes);
  layer_.loop_kept_output_kernel = layer_.forward.back().name;
}

void LayerDraft::backward(NamedKernel kernel) { layer_.backward.push_back(std::move(kernel)); }

void LayerDraft::save(std::int64_t bytes) {
  saved_ += bytes;
  if (bytes > 0) layer_.saved_tensors.push_back({Bytes(bytes), false});
}

void LayerDraft::save_rematerializable(std::int64_t bytes) {
  save(bytes);
  rematerializable_ += bytes;
  if (bytes > 0) layer_.saved_tensors.back().rematerializable = true;
}

void LayerDraft::begin_attention_core(std::int64_t unsaved_input_bytes) {
  layer_.attention_forward_begin = layer_.forward.size();
  layer_.attention_core_input = Bytes(unsaved_input_bytes);
  saved_at_attention_begin_ = saved_;
}

void LayerDraft::end_attention_core(std::int64_t output_bytes) {
  layer_.attention_forward_end = layer_.forward.size();
  layer_.attention_core_saved = Bytes(saved_ - saved_at_attention_begin_ - output_bytes);
}

Layer LayerDraft::finish(std::int64_t checkpointed_bytes) {
  if (forward_temps_.live() != 0 || backward_temps_.live() != 0) {
    throw std::logic_error("models: layer " + layer_.name + " leaks temporaries (forward " +
                           std::to_string(forward_temps_.live()) + " B, backward " +
                           std::to_string(backward_temps_.live()) + " B)");
  }
  layer_.saved_activations = Bytes(saved_);
  layer_.rematerializable_saved = Bytes(rematerializable_);
  layer_.saved_activations_checkpointed =
      Bytes(checkpointed_bytes < 0 ? saved_ : checkpointed_bytes);
  for (const std::int64_t t : forward_temps_.peak_tensors())
    add_transient(layer_, Pass::kForward, Bytes(t));
  for (const std::int64_t t : backward_temps_.peak_tensors())
    add_transient(layer_, Pass::kBackward, Bytes(t));
  return std::move(layer_);
}

}  // namespace fsdpsim::models::detail
