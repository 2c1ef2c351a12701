// Head layer: final norm -> LM head -> cross-entropy, forward and backward.
//
// The LM head is a GEMM {m=T, n=V, k=d} whether or not its weight is tied to the embedding
// (tying changes who owns the parameter, not the FLOPs). The loss follows what training code
// runs: torchtitan calls cross_entropy(pred.float(), ...) and autocast (Composer/llm-foundry,
// minGPT under torch.autocast) runs log_softmax in fp32, so the logits are upcast to fp32 and
// F.cross_entropy = log_softmax + nll_loss (aten/src/ATen/native/LossNLL.cpp). Autograd keeps
// the fp32 log-probabilities [T, V] (log_softmax saves its result) and the int64 targets; the
// upcast and nll_loss save nothing large. This fp32 [T, V] tensor is what makes large-vocab
// heads (llama-3, V = 128256) heavy in memory.
//
// llm-foundry's MPT instead defaults to loss_fn 'fused_crossentropy', flash-attn's
// CrossEntropyLoss (flash_attn/losses/cross_entropy.py, the apex xentropy CUDA kernel): one
// forward kernel reads the logits in their own dtype and writes the per-token loss and
// log-sum-exp (fp32); the autograd Function saves the logits, the log-sum-exp and the labels;
// one backward kernel reads them and the loss gradient and writes the logits gradient in the
// logits' dtype (inplace_backward=False, the default). No fp32 [T, V] tensor exists.
//
// torchtitan from 2025 compiles its loss, F.cross_entropy(pred.flatten(0, 1).float(), labels),
// when it compiles the model (torchtitan/components/loss.py build_cross_entropy_loss @e7c0cae).
// AOTAutograd's min-cut partitioner then keeps the graph's input, the bf16 logits, and the
// per-token reductions rather than the fp32 log-probabilities, since the upcast and the
// log-softmax are pointwise around those reductions and cheap to recompute, and Inductor fuses
// upcast, log-softmax and NLL into a forward reduction over each row and their backward into one
// kernel writing the gradient in the logits' dtype: the fused kernel's tensors and traffic, which
// it is priced and sized as, under kernel names of its own.
//
// Training code that neither upcasts nor autocasts (KempnerForge's scripts/train.py:
// F.cross_entropy(logits.view(-1, V), labels) on the bf16 output of a bf16 model) runs the same
// log_softmax + nll_loss on the compute-dtype logits: log_softmax writes and saves its output in
// the input's dtype (aten/src/ATen/native/cuda/SoftMax.cu, log_softmax_cuda_out: fp32
// accumulation, output in the input dtype), nll_loss_backward zero-fills a gradient like its
// input, and _log_softmax_backward_data writes the logits gradient in the input dtype. Three
// compute-dtype [T, V] tensors at once instead of three fp32 ones.
//
// What the loss reads, the model's output, outlives it when the training loop keeps a reference
// (training.logits_kept_by_loop): Composer's trainer stores `self.state.outputs =
// self.state.model(self.state.batch)` and only rebinds it at the next micro-batch's forward
// (composer/trainer/trainer.py, _train_microbatch), so llm-foundry's compute-dtype logits stay
// through the backward, the optimizer step and the next forward; torchtitan's train.py held the
// upcast `pred` the same way until it added `del pred` before backward. The step allocates that
// tensor (sim/fsdp/step_builder.cpp), not the loss.
//
// torchtitan's chunked loss (WorkloadOptions::loss_chunks; torchtitan/components/loss.py:
// ChunkedCELoss, torchtitan#2937, April 2026, the default of its Llama 3 configs; since #3779,
// June 2026, ChunkedLossWrapper, the default of its llama3, deepseek_v3 and gpt_oss configs) takes
// the LM head and the loss out of the model: the head layer is the final norm alone, and a layer
// of kind kChunkedLoss is one chunk of tokens through the LM head, the loss and their backward,
// which the step runs once per chunk between the forward and the backward (Layer::loss_chunking).
// Each chunk's logits are 1/chunks of the whole, so the [T, V] tensors above shrink with them.
#include "models/head_layer.hpp"

namespace fsdpsim::models::detail {
namespace {

// A softmax row of `vocab` elements of `element_bytes` that host_softmax's shared-memory kernels
// (cunn_SoftMaxForwardSmem, cunn_SoftMaxBackwardSmem) take: `dim_size < max_elements_per_smem`,
// the 48 KiB of sharedMemPerBlock less the block's reduction scratch (1024 threads / 32 per warp
// x a 4-byte accumulator), over the element size, and `dim_size % ILP == 0`, ILP = 16 bytes
// (sizeof(float4)) over the element size (aten/src/ATen/native/cuda/SoftMax.cu, host_softmax and
// host_softmax_backward).
constexpr std::int64_t kSoftmaxSharedMemoryBytes = 48 * 1024 - 1024 / 32 * 4;
constexpr std::int64_t kSoftmaxVectorBytes = 16;
// The forward's register kernel (cunn_SoftMaxForwardReg) takes rows for which
// potential_register_count(dim_size, block.x) = ceil(dim_size / block.x) < 10, with at most 1024
// threads a block (SoftMaxForward_getBlockSize): 9 elements a thread. The backward has no such
// kernel.
constexpr std::int64_t kSoftmaxRegisterElements = 9 * 1024;

bool softmax_row_in_shared_memory(std::int64_t vocab, std::int64_t element_bytes) {
  return vocab * element_bytes < kSoftmaxSharedMemoryBytes &&
         vocab % (kSoftmaxVectorBytes / element_bytes) == 0;
}

}  // namespace

// A row either kernel above holds is read once; a longer one goes through cunn_SoftMaxForward,
// which reads the row for its max, again for the sum of exponentials and a third time to write the
// output, and cunn_SoftMaxBackward, which reads the incoming gradient for its sum and again with
// the output to write the input gradient. Every vocabulary of the shipped models (32000 and up)
// takes the long path, in bf16 and fp32 alike.
std::int64_t log_softmax_forward_passes(std::int64_t vocab, std::int64_t element_bytes) {
  const bool once =
      vocab <= kSoftmaxRegisterElements || softmax_row_in_shared_memory(vocab, element_bytes);
  return once ? 2 : 4;
}

std::int64_t log_softmax_backward_passes(std::int64_t vocab, std::int64_t element_bytes) {
  return softmax_row_in_shared_memory(vocab, element_bytes) ? 3 : 4;
}

namespace {

// The final norm's context: the residual stream's where the norm reads it
// (HeadDims::residual_input).
BuildContext norm_context(const HeadDims& dims, const BuildContext& ctx) {
  return dims.residual_input ? residual_context(ctx) : ctx;
}

// The backward that follows every loss: the LM head's GEMMs consume the logits gradient
// (`logits_gradient` bytes, allocated by the loss's backward), then the final norm's.
Layer finish_head(LayerDraft& draft, const HeadDims& dims, const BuildContext& ctx,
                  std::int64_t logits_gradient) {
  const BuildContext norm_ctx = norm_context(dims, ctx);
  const std::int64_t hidden = ctx.tokens * dims.d_model * ctx.element_bytes;
  TransientTracker& bwd = draft.backward_temps();
  append_linear_backward(draft, "lm_head", {dims.d_model, dims.vocab, false}, ctx);
  bwd.allocate(hidden);  // gradient of the norm output, in the compute dtype
  bwd.release(logits_gradient);
  std::int64_t norm_output_gradient = hidden;
  if (norm_ctx.element_bytes != ctx.element_bytes) {
    draft.backward(cast_kernel("lm_head_input_cast_bwd", dims.d_model, ctx.element_bytes,
                               norm_ctx.element_bytes, ctx));
    norm_output_gradient = ctx.tokens * dims.d_model * norm_ctx.element_bytes;
    bwd.allocate(norm_output_gradient);
    bwd.release(hidden);
  }
  append_norm_backward(draft, dims.norm_name, dims.norm, dims.d_model, norm_ctx, 0);
  // The norm's input gradient is the layer's output gradient.
  bwd.release(norm_output_gradient);
  return draft.finish(-1);
}

// The final norm's forward, and autocast's cast of its output for the LM head where the residual
// stream is wider than the compute dtype.
void append_head_norm_forward(LayerDraft& draft, const HeadDims& dims, const BuildContext& ctx) {
  const BuildContext norm_ctx = norm_context(dims, ctx);
  append_norm_forward(draft, dims.norm_name, dims.norm, dims.d_model, norm_ctx);
  if (norm_ctx.element_bytes != ctx.element_bytes) {
    // layer_norm runs on autocast's fp32 list; F.linear casts its output (autocast_mode.cpp).
    const std::int64_t wide = ctx.tokens * dims.d_model * norm_ctx.element_bytes;
    TransientTracker& fwd = draft.forward_temps();
    fwd.allocate(wide);
    draft.forward(cast_kernel("lm_head_input_cast", dims.d_model, norm_ctx.element_bytes,
                              ctx.element_bytes, ctx));
    fwd.release(wide);
  }
}

// The LM head's forward over ctx.tokens tokens, the loss's forward and the loss's backward;
// returns the bytes of the logits gradient that backward leaves allocated for the LM head's.
std::int64_t append_lm_head_and_loss(LayerDraft& draft, const HeadDims& dims,
                                     const BuildContext& ctx) {
  const std::int64_t t = ctx.tokens;
  const std::int64_t logits = t * dims.vocab * ctx.element_bytes;
  const std::int64_t logits_fp32 = t * dims.vocab * kStatBytes;
  TransientTracker& fwd = draft.forward_temps();
  draft.forward(linear_forward("lm_head", {dims.d_model, dims.vocab, false}, ctx));
  // A loop that keeps the compute-dtype logits holds the LM head's output; the step allocates
  // it (Layer::loop_kept_output), so it is no temporary here.
  const bool loop_keeps_logits = ctx.logits_kept_by_loop == LogitsKeptByLoop::kComputeDtype;
  const std::int64_t logits_temporary = loop_keeps_logits ? 0 : logits;
  if (loop_keeps_logits) draft.loop_keeps_last_output(logits);
  if (ctx.loss == LossKernel::kFusedCrossEntropy || ctx.loss == LossKernel::kCompiledCrossEntropy) {
    const std::string name = ctx.loss == LossKernel::kFusedCrossEntropy ? "fused_cross_entropy"
                                                                        : "compiled_cross_entropy";
    const std::int64_t per_token = t * (kIndexBytes + 2 * kStatBytes);  // labels, loss, lse
    draft.forward(memory_bound_kernel(name, logits + per_token, ctx));
    // Logits (unless the loop keeps them anyway), labels, log-sum-exp.
    draft.save(logits_temporary + t * (kIndexBytes + kStatBytes));
    TransientTracker& bwd = draft.backward_temps();
    draft.backward(memory_bound_kernel(name + "_bwd", 2 * logits + per_token, ctx));
    bwd.allocate(logits);
    return logits;
  }
  if (ctx.loss == LossKernel::kCrossEntropy) {
    fwd.allocate(logits_temporary);
    draft.forward(memory_bound_kernel(
        "log_softmax", log_softmax_forward_passes(dims.vocab, ctx.element_bytes) * logits, ctx));
    draft.save(logits);             // log_softmax saves its output, in the logits' dtype
    fwd.release(logits_temporary);  // nothing saves the logits themselves
    draft.forward(
        memory_bound_kernel("nll_loss", t * (kIndexBytes + kStatBytes) + kStatBytes, ctx));
    draft.save(t * kIndexBytes);  // targets
    TransientTracker& bwd = draft.backward_temps();
    draft.backward(
        memory_bound_kernel("nll_loss_bwd", logits + t * (kIndexBytes + kStatBytes), ctx));
    bwd.allocate(logits);  // gradient of the log-probabilities
    draft.backward(memory_bound_kernel(
        "log_softmax_bwd", log_softmax_backward_passes(dims.vocab, ctx.element_bytes) * logits,
        ctx));
    bwd.allocate(logits);  // gradient of the logits
    bwd.release(logits);
    return logits;
  }
  fwd.allocate(logits_temporary);
  draft.forward(memory_bound_kernel("logits_to_fp32", logits + logits_fp32, ctx));
  // torchtitan's model returns the upcast logits (`self.output(h).float()`).
  const bool loop_keeps_fp32 = ctx.logits_kept_by_loop == LogitsKeptByLoop::kFp32;
  const std::int64_t logits_fp32_temporary = loop_keeps_fp32 ? 0 : logits_fp32;
  if (loop_keeps_fp32) draft.loop_keeps_last_output(logits_fp32);
  fwd.allocate(logits_fp32_temporary);
  fwd.release(logits_temporary);
  draft.forward(memory_bound_kernel(
      "log_softmax", log_softmax_forward_passes(dims.vocab, kStatBytes) * logits_fp32, ctx));
  draft.save(logits_fp32);  // log_softmax saves its output
  fwd.release(logits_fp32_temporary);
  // nll_loss gathers one log-probability per token: reads targets and T values, writes a scalar.
  draft.forward(memory_bound_kernel("nll_loss", t * (kIndexBytes + kStatBytes) + kStatBytes, ctx));
  draft.save(t * kIndexBytes);  // targets

  TransientTracker& bwd = draft.backward_temps();
  // Gradient of the log-probabilities: a zero-filled [T, V] fp32 tensor with -1/T scattered in.
  draft.backward(
      memory_bound_kernel("nll_loss_bwd", logits_fp32 + t * (kIndexBytes + kStatBytes), ctx));
  bwd.allocate(logits_fp32);
  // Reads the gradient and the saved output, writes the logits gradient.
  draft.backward(memory_bound_kernel(
      "log_softmax_bwd", log_softmax_backward_passes(dims.vocab, kStatBytes) * logits_fp32, ctx));
  bwd.allocate(logits_fp32);
  bwd.release(logits_fp32);
  draft.backward(memory_bound_kernel("logits_to_fp32_bwd", logits_fp32 + logits, ctx));
  bwd.allocate(logits);
  bwd.release(logits_fp32);
  return logits;
}

// The final norm's parameters: all of dims.parameters but the last, the untied LM head's weight.
std::vector<std::int64_t> norm_parameters(const HeadDims& dims) {
  return {dims.parameters.begin(), dims.parameters.end() - 1};
}

// The head of a chunked loss: the final norm alone. Its output, the hidden states, is the model's
// output, which the loss reads (the step holds it: LossChunking::hidden); its backward starts
// from the gradient the chunks accumulated (the step holds that too).
Layer build_chunked_head_norm(const HeadDims& dims, const BuildContext& ctx) {
  LayerDraft draft("head", LayerKind::kHead, norm_parameters(dims));
  append_head_norm_forward(draft, dims, ctx);
  const BuildContext norm_ctx = norm_context(dims, ctx);
  append_norm_backward(draft, dims.norm_name, dims.norm, dims.d_model, norm_ctx, 0);
  return draft.finish(-1);
}

// One chunk of ChunkedLossWrapper's loop over ctx.tokens / loss_chunks tokens: lm_head(h_chunk)
// and the inner loss (CrossEntropyLoss: cross_entropy(pred.float(), ...), compiled or not), then
// chunk_loss.backward(): the loss's backward and the LM head's GEMMs, whose input gradient
// h_chunk.grad (compute dtype) GradAccumulator.add casts to fp32 (chunk_grad.to(self._buffer.
// dtype): a new tensor) and copies into its buffer's rows; `h_chunk.grad = None` frees it. The
// chunk's input is a view of the hidden states (torch.split along T, .contiguous() a no-op on
// dim 0), which the step holds for the whole loop, so the layer saves nothing for it.
Layer build_chunked_loss_layer(const HeadDims& dims, const BuildContext& ctx) {
  BuildContext chunk = ctx;
  chunk.tokens = ctx.tokens / ctx.loss_chunks;
  LayerDraft draft("loss", LayerKind::kChunkedLoss,
                   std::vector<std::int64_t>{dims.parameters.back()});
  const std::int64_t logits_gradient = append_lm_head_and_loss(draft, dims, chunk);
  TransientTracker& bwd = draft.backward_temps();
  append_linear_backward(draft, "lm_head", {dims.d_model, dims.vocab, false}, chunk);
  const std::int64_t chunk_gradient = chunk.tokens * dims.d_model * chunk.element_bytes;
  bwd.allocate(chunk_gradient);  // h_chunk.grad
  bwd.release(logits_gradient);
  const std::int64_t chunk_gradient_fp32 = chunk.tokens * dims.d_model * kStatBytes;
  if (chunk.element_bytes != kStatBytes) {
    draft.backward(
        cast_kernel("gradient_to_fp32", dims.d_model, chunk.element_bytes, kStatBytes, chunk));
    bwd.allocate(chunk_gradient_fp32);
  }
  // self._buffer[tuple(slices)] = chunk_grad: reads the chunk, writes the buffer's rows.
  draft.backward(memory_bound_kernel("gradient_accumulate", 2 * chunk_gradient_fp32, chunk));
  if (chunk.element_bytes != kStatBytes) bwd.release(chunk_gradient_fp32);
  bwd.release(chunk_gradient);
  Layer layer = draft.finish(-1);
  layer.loss_chunking.chunks = ctx.loss_chunks;
  layer.loss_chunking.hidden = Bytes(ctx.tokens * dims.d_model * ctx.element_bytes);
  layer.loss_chunking.gradient_buffer = Bytes(ctx.tokens * dims.d_model * kStatBytes);
  return layer;
}

}  // namespace

std::vector<Layer> build_head_layers(const HeadDims& dims, const BuildContext& ctx) {
  if (ctx.loss_chunks > 0) {
    return {build_chunked_head_norm(dims, ctx), build_chunked_loss_layer(dims, ctx)};
  }
  LayerDraft draft("head", LayerKind::kHead, dims.parameters);
  append_head_norm_forward(draft, dims, ctx);
  draft.save(ctx.tokens * dims.d_model * ctx.element_bytes);  // the LM head's input
  const std::int64_t logits_gradient = append_lm_head_and_loss(draft, dims, ctx);
  return {finish_head(draft, dims, ctx, logits_gradient)};
}

}  // namespace fsdpsim::models::detail
