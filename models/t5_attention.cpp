// T5 attention core kernels, FLOPs, bytes and saved tensors (t5_attention.hpp has the code).
// Saved tensors follow Korthikanti et al. 2022, Sec. 4.1, as attention_kernels.cpp's unfused
// path, with T5's differences: the softmax runs in fp32 and saves its fp32 output; the cast back
// (type_as) saves nothing; dropout saves its bool mask and the P@V bmm keeps the dropout output
// (or the cast output when there is no dropout); there is no causal masked_fill (the mask is in
// the additive bias) and no scaling kernel. Hardware FLOPs count the full seq_q x seq_kv
// products; model FLOPs half of them in the decoder's causal self-attention.
#include "models/t5_attention.hpp"

#include <string>

#include "models/kernel_factory.hpp"

namespace fsdpsim::models::detail {
namespace {

std::int64_t q_bytes(const T5AttentionDims& d, const BuildContext& ctx) {
  return ctx.batch * d.seq_q * d.heads * d.d_kv * ctx.element_bytes;
}

std::int64_t kv_bytes(const T5AttentionDims& d, const BuildContext& ctx) {
  return ctx.batch * d.seq_kv * d.heads * d.d_kv * ctx.element_bytes;
}

std::string name(const T5AttentionDims& d, const char* what) {
  return std::string(d.prefix) + "_" + what;
}

// A GEMM over the score matrix: half of it model work under a causal mask.
NamedKernel score_gemm(const T5AttentionDims& d, const char* what, GemmShape shape,
                       const BuildContext& ctx) {
  return d.causal ? causal_attention_gemm(name(d, what), shape, ctx)
                  : gemm_kernel(name(d, what), shape, ctx);
}

std::int64_t score_elements(const T5AttentionDims& d, const BuildContext& ctx) {
  return ctx.batch * d.heads * d.seq_q * d.seq_kv;
}

// Sizes every pass of the core needs: batch x heads, the scores in the compute dtype and in fp32,
// Q (and O), and K (and V).
struct CoreSizes {
  std::int64_t bh = 0;
  std::int64_t scores = 0;
  std::int64_t scores32 = 0;
  std::int64_t q = 0;
  std::int64_t kv = 0;
};

CoreSizes core_sizes(const T5AttentionDims& dims, const BuildContext& ctx) {
  return {ctx.batch * dims.heads, score_elements(dims, ctx) * ctx.element_bytes,
          score_elements(dims, ctx) * kStatBytes, q_bytes(dims, ctx), kv_bytes(dims, ctx)};
}

}  // namespace

std::int64_t t5_score_bytes(const T5AttentionDims& dims, const BuildContext& ctx) {
  return score_elements(dims, ctx) * ctx.element_bytes;
}

void append_t5_attention_forward(LayerDraft& draft, const T5AttentionDims& dims,
                                 const BuildContext& ctx) {
  const auto [bh, scores, scores32, q, kv] = core_sizes(dims, ctx);
  TransientTracker& temps = draft.forward_temps();

  draft.begin_attention_core(q + 2 * kv);  // the q, k and v projections' outputs
  draft.forward(memory_bound_kernel(name(dims, "split_heads"), 2 * (q + 2 * kv), ctx));
  // bmm saves its (copied) operands.
  draft.save(q);
  draft.save(kv);
  draft.save(kv);
  temps.release(q + 2 * kv);
  draft.forward(score_gemm(dims, "scores", GemmShape{dims.seq_q, dims.seq_kv, dims.d_kv, bh}, ctx));
  temps.allocate(scores);
  // In place: reads scores and the bias, writes scores; add saves nothing.
  // Each output up to the softmax's is read only by the next kernel (handed off: fused under
  // torch.compile, models/compile_fusion.hpp); the softmax's is saved, the probabilities' read
  // by the dropout or kept for the P@V bmm.
  draft.forward(
      handed_off(memory_bound_kernel(name(dims, "add_position_bias"), 3 * scores, ctx), scores));
  draft.forward(handed_off(
      memory_bound_kernel(name(dims, "scores_to_fp32"), scores + scores32, ctx), scores32));
  temps.allocate(scores32);
  temps.release(scores);
  draft.forward(memory_bound_kernel(name(dims, "softmax_fp32"), 2 * scores32, ctx));
  draft.save(scores32);  // softmax saves its (fp32) output
  temps.release(scores32);
  draft.forward(
      handed_off(memory_bound_kernel(name(dims, "probs_to_dtype"), scores32 + scores, ctx),
                 dims.dropout ? scores : 0));
  if (dims.dropout) {
    const std::int64_t mask = score_elements(dims, ctx) * kMaskBytes;
    temps.allocate(scores);
    draft.forward(memory_bound_kernel(name(dims, "dropout"), 2 * scores + mask, ctx));
    temps.release(scores);
    draft.save(mask);
  }
  draft.save(scores);  // the P@V bmm keeps its probability operand
  draft.forward(score_gemm(dims, "pv", GemmShape{dims.seq_q, dims.d_kv, dims.seq_kv, bh}, ctx));
  temps.allocate(q);
  draft.forward(memory_bound_kernel(name(dims, "merge_heads"), 2 * q, ctx));
  draft.save(q);
  temps.release(q);
  draft.end_attention_core(q);
}

void append_t5_attention_backward(LayerDraft& draft, const T5AttentionDims& dims,
                                  const BuildContext& ctx) {
  const auto [bh, scores, scores32, q, kv] = core_sizes(dims, ctx);
  TransientTracker& temps = draft.backward_temps();

  draft.backward(memory_bound_kernel(name(dims, "merge_heads_bwd"), 2 * q, ctx));
  temps.allocate(q);
  temps.release(q);  // the caller's d(o), now head-major
  // dP = dO V^T, dV = P^T dO.
  draft.backward(
      score_gemm(dims, "pv_dgrad_probs", GemmShape{dims.seq_q, dims.seq_kv, dims.d_kv, bh}, ctx));
  temps.allocate(scores);
  draft.backward(
      score_gemm(dims, "pv_dgrad_v", GemmShape{dims.seq_kv, dims.d_kv, dims.seq_q, bh}, ctx));
  temps.allocate(kv);
  temps.release(q);  // head-major d(o)
  if (dims.dropout) {
    const std::int64_t mask = score_elements(dims, ctx) * kMaskBytes;
    draft.backward(
        handed_off(memory_bound_kernel(name(dims, "dropout_bwd"), 2 * scores + mask, ctx), scores));
    temps.allocate(scores);
    temps.release(scores);
  }
  // The gradients up to the score GEMMs' input are each read only by the next kernel.
  draft.backward(handed_off(
      memory_bound_kernel(name(dims, "probs_to_dtype_bwd"), scores + scores32, ctx), scores32));
  temps.allocate(scores32);
  temps.release(scores);
  // Reads the gradient and the saved fp32 output, writes the fp32 score gradient.
  draft.backward(
      handed_off(memory_bound_kernel(name(dims, "softmax_fp32_bwd"), 3 * scores32, ctx), scores32));
  temps.allocate(scores32);
  temps.release(scores32);
  draft.backward(memory_bound_kernel(name(dims, "scores_to_fp32_bwd"), scores32 + scores, ctx));
  temps.allocate(scores);
  temps.release(scores32);
  if (dims.bias_needs_grad) {
    // The same gradient flows to the shared position bias, summed over the stack's blocks
    // (autograd input_buffer.cpp: one add per further contribution).
    draft.backward(memory_bound_kernel("position_bias_grad_accumulate", 3 * scores, ctx));
  }
  // dQ = dS K, dK = dS^T Q.
  draft.backward(
      score_gemm(dims, "scores_dgrad_q", GemmShape{dims.seq_q, dims.d_kv, dims.seq_kv, bh}, ctx));
  temps.allocate(q);
  draft.backward(
      score_gemm(dims, "scores_dgrad_k", GemmShape{dims.seq_kv, dims.d_kv, dims.seq_q, bh}, ctx));
  temps.allocate(kv);
  temps.release(scores);
  // Back to token-major: transpose copies of dq, dk, dv.
  draft.backward(memory_bound_kernel(name(dims, "split_heads_bwd"), 2 * (q + 2 * kv), ctx));
  temps.allocate(q + 2 * kv);
  temps.release(q + 2 * kv);
}

}  // namespace fsdpsim::models::detail
