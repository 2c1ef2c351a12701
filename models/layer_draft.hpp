// Internal to fsdpsim_models: the scratch state used while one Layer is assembled.
//
// A family builder emits kernels in execution order and, next to each, says which tensors it
// creates and frees. LayerDraft turns that into Layer's memory fields:
//  * save(bytes): one tensor autograd keeps for backward (counted once, even when several ops
//    save the same storage, e.g. the LayerNorm output that is the input of the QKV linear;
//    Layer::saved_tensors lists each call);
//  * forward_temps()/backward_temps(): tensors allocated and freed inside the layer (neither
//    saved, nor the layer's output in forward, nor its input gradient in backward); their
//    high-water mark is the layer's transient peak. Weight gradients belong to FSDP and are not
//    counted here; neither is the incoming gradient of the layer's output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/workload.hpp"

namespace fsdpsim::models::detail {

// Everything a layer builder needs from WorkloadOptions, with T = micro_batch * seq_len.
struct BuildContext {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t tokens = 0;         // T
  std::int64_t element_bytes = 0;  // e: bytes of one activation element in the compute dtype
  // r >= e: bytes of one residual-stream element (WorkloadOptions::residual_dtype).
  std::int64_t residual_bytes = 0;
  Dtype dtype = Dtype::kBf16;
  Dtype gemm_dtype = Dtype::kBf16;  // dtype, or TF32 for fp32 under allow_tf32
  bool flash_attention = true;
  FlashKernel flash_kernel = FlashKernel::kFlash2;
  bool unpad_attention = false;  // WorkloadOptions::unpad_attention
  LossKernel loss = LossKernel::kCrossEntropyFp32;
  std::optional<RmsNormKernel> rms_norm;  // WorkloadOptions::rms_norm
  LogitsKeptByLoop logits_kept_by_loop = LogitsKeptByLoop::kNone;
  std::int32_t loss_chunks = 0;  // WorkloadOptions::loss_chunks
  // torch.compile of the blocks: builders write the kernels Inductor generates where they differ
  // from eager's (models/llama_family.cpp); compile_fusion.cpp then fuses the remaining runs.
  bool compiled = false;
};

BuildContext make_context(const WorkloadOptions& options);

// Live temporaries and their high-water mark. Each allocate() is one tensor; release(bytes) frees
// the most recent live tensor of exactly that size, else that many bytes from the most recent
// tensors (a builder may free two tensors it allocated together, or part of one). Releasing
// more than is live is our bug.
class TransientTracker {
 public:
  void allocate(std::int64_t bytes);
  void release(std::int64_t bytes);
  [[nodiscard]] std::int64_t live() const { return live_; }
  [[nodiscard]] std::int64_t peak() const { return peak_; }
  // The tensors alive at the (first) peak, in allocation order.
  [[nodiscard]] const std::vector<std::int64_t>& peak_tensors() const { return peak_tensors_; }

 private:
  std::int64_t live_ = 0;
  std::int64_t peak_ = 0;
  std::vector<std::int64_t> tensors_;
  std::vector<std::int64_t> peak_tensors_;
};

class LayerDraft {
 public:
  LayerDraft(std::string name, LayerKind kind, std::int64_t numel, std::int32_t parameter_tensors);
  // A layer whose nn.Parameters are known one by one (Layer::parameter_numels).
  LayerDraft(std::string name, LayerKind kind, std::vector<std::int64_t> parameter_numels);

  void forward(NamedKernel kernel);
  void backward(NamedKernel kernel);
  void save(std::int64_t bytes);
  // save(bytes) of a linear's input that is a pointwise function of other saved tensors (a
  // norm's or an activation's output): Layer::rematerializable_saved.
  void save_rematerializable(std::int64_t bytes);
  // Of what was saved, `bytes` are the layer's input itself (Layer::saved_input).
  void note_input_saved(std::int64_t bytes) { layer_.saved_input = Bytes(bytes); }
  // Brackets the attention core's forward kernels; `output_bytes` is the core's output, saved
  // inside the bracket but kept by the output projection regardless, and `unsaved_input_bytes`
  // its inputs where the layer does not save them (Layer::attention_core_input).
  void begin_attention_core(std::int64_t unsaved_input_bytes);
  void end_attention_core(std::int64_t output_bytes);
  // The next forward kernel is where a non-reentrant checkpoint's early stop ends the recompute
  // (Layer::recompute_early_stop_kernel): everything from it on saves nothing backward reads.
  void stop_recompute_before_next_kernel() { stop_before_next_ = true; }
  // The last forward kernel wrote the model's output, `bytes`, which the training loop keeps
  // (Layer::loop_kept_output); the builder leaves it out of the transients.
  void loop_keeps_last_output(std::int64_t bytes);
  TransientTracker& forward_temps() { return forward_temps_; }
  TransientTracker& backward_temps() { return backward_temps_; }

  // Finishes the layer. `checkpointed_bytes` is what full activation checkpointing keeps (the
  // block input); pass a negative value for layers that are never checkpointed (embedding, head)
  // to make it equal to saved_activations. Every temporary must have been released.
  Layer finish(std::int64_t checkpointed_bytes);

 private:
  Layer layer_;
  std::int64_t saved_ = 0;
  std::int64_t rematerializable_ = 0;
  std::int64_t saved_at_attention_begin_ = 0;
  bool stop_before_next_ = false;
  TransientTracker forward_temps_;
  TransientTracker backward_temps_;
};

}  // namespace fsdpsim::models::detail
