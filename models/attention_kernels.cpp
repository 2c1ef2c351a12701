// Attention kernels, FLOPs, bytes and saved tensors.
//
// Fused: one FlashAttention-2 kernel each way (Dao 2023, "FlashAttention-2", Sec. 3; PyTorch
// SDPA's flash backend). Forward FLOPs = 4*b*s^2*head_dim*heads for the two matmuls, halved for
// causal masking (fully masked tiles are skipped; the FA2 paper's benchmark convention).
// Backward = 2.5x forward: the FA2 paper counts 5 matmuls in backward vs 2 in forward.
// Saved: Q, K, V, O and the fp32 log-sum-exp [b, heads, s] (flash_api.cpp mha_fwd returns
// softmax_lse; SDPA saves it as logsumexp). No s x s matrix exists.
//
// Unpadded (WorkloadOptions::unpad_attention): flash-attn's bert_padding around the kernel, as
// its FlashAttention module runs when given a key_padding_mask -- two host reads of the mask's
// counts, a gather of Q, K, V rows before the kernel and a scatter of O's after; the reverse
// copies in backward.
//
// Unfused: what eager PyTorch runs for minGPT's CausalSelfAttention (and llm-foundry's / HF's
// torch attention paths): head-major copies of Q, K, V (torch.matmul reshapes transposed
// views, HF repeat_kv expands K/V to all heads), batched GEMM Q K^T, scale, causal masked_fill,
// softmax, optional dropout, batched GEMM P V, and the transpose(1, 2).contiguous() back to
// token-major. FLOPs count the full s x s products (the masked half is computed too).
// Saved activations follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", Sec. 4.1: Q, K, V, softmax output, dropout mask and dropout output
// (5*a*s^2*b bytes with fp16 and dropout), plus the s x s bool causal mask masked_fill keeps.
// Llama's eager attention (HF LlamaAttention, Meta's model.py) adds its causal mask instead and
// runs the softmax in fp32 (EagerSoftmax::kAdditiveMaskFp32): it saves the fp32 probabilities
// and their cast back, 6*a*s^2*b bytes, and no mask.
#include "models/attention_kernels.hpp"

#include <utility>

#include "models/kernel_factory.hpp"

namespace fsdpsim::models::detail {
namespace {

std::int64_t q_bytes(const AttentionDims& dims, const BuildContext& ctx) {
  return ctx.tokens * dims.heads * dims.head_dim * ctx.element_bytes;
}

std::int64_t lse_bytes(const AttentionDims& dims, const BuildContext& ctx) {
  return ctx.batch * dims.heads * ctx.seq * kStatBytes;
}

AttentionShape flash_shape(const AttentionDims& dims, const BuildContext& ctx, bool backward) {
  AttentionShape shape;
  shape.batch = ctx.batch;
  shape.heads = dims.heads;
  shape.kv_heads = dims.kv_heads;
  shape.seq_q = ctx.seq;
  shape.seq_kv = ctx.seq;
  shape.head_dim = dims.head_dim;
  shape.causal = true;
  shape.fused = true;
  shape.backward = backward;
  shape.kernel = ctx.flash_kernel;
  return shape;
}

double flash_forward_flops(const AttentionDims& dims, const BuildContext& ctx) {
  constexpr double kCausalFraction = 0.5;
  return 4.0 * static_cast<double>(ctx.batch) * static_cast<double>(ctx.seq) *
         static_cast<double>(ctx.seq) * static_cast<double>(dims.head_dim) *
         static_cast<double>(dims.heads) * kCausalFraction;
}

NamedKernel flash_kernel(const char* name, const AttentionDims& dims, const BuildContext& ctx,
                         bool backward, double flops, std::int64_t bytes) {
  Kernel k;
  k.kind = KernelKind::kAttention;
  k.dtype = ctx.dtype;
  k.attention = flash_shape(dims, ctx, backward);
  k.flops = Flops(flops);
  k.bytes = Bytes(bytes);
  return {name, k};
}

// flash-attn's bert_padding.unpad_input, run by its FlashAttention module when it is given a
// key_padding_mask: seqlens = mask.sum(-1); indices = torch.nonzero(mask.flatten()), whose output
// size the host must read; max_seqlen = seqlens.max().item(), read on the host again; then
// index_first_axis gathers the packed Q, K, V rows into a new tensor. The kernel saves that copy
// (the padded one dies with the layer's forward).
void unpad_attention_inputs(LayerDraft& draft, const AttentionDims& dims, const BuildContext& ctx) {
  constexpr std::int64_t kIndexBytes = 8;   // int64 indices (torch.nonzero)
  constexpr std::int64_t kSeqlenBytes = 4;  // mask.sum(dim=-1, dtype=torch.int32)
  // The mask read, its row sums and the indices of its set entries written.
  NamedKernel nonzero =
      memory_bound_kernel("attn_unpad_nonzero",
                          ctx.tokens * (kMaskBytes + kIndexBytes) + ctx.batch * kSeqlenBytes, ctx);
  nonzero.host_sync = true;
  nonzero.ends_fusion = true;
  draft.forward(std::move(nonzero));
  // The row sums read, their maximum written.
  NamedKernel max_seqlen =
      memory_bound_kernel("attn_unpad_max_seqlen", (ctx.batch + 1) * kSeqlenBytes, ctx);
  max_seqlen.host_sync = true;
  max_seqlen.ends_fusion = true;
  draft.forward(std::move(max_seqlen));
  draft.forward(memory_bound_kernel("attn_unpad_gather", 2 * qkv_bytes(dims, ctx), ctx));
  draft.forward_temps().allocate(qkv_bytes(dims, ctx));
}

void flash_forward(LayerDraft& draft, const AttentionDims& dims, const BuildContext& ctx) {
  const std::int64_t o = q_bytes(dims, ctx);
  if (ctx.unpad_attention) unpad_attention_inputs(draft, dims, ctx);
  // Reads Q, K, V; writes O and the log-sum-exp.
  NamedKernel forward = flash_kernel("attn", dims, ctx, false, flash_forward_flops(dims, ctx),
                                     qkv_bytes(dims, ctx) + o + lse_bytes(dims, ctx));
  forward.output_bytes = o + lse_bytes(dims, ctx);
  draft.forward(std::move(forward));
  draft.save(o);
  draft.save(lse_bytes(dims, ctx));
  if (ctx.unpad_attention) {
    // pad_input: zeros of the padded output, then index_put of the rows. The kernel keeps its
    // unpadded O for backward; the output projection saves the padded one.
    draft.forward(memory_bound_kernel("attn_pad", 3 * o, ctx));
    draft.save(o);
    draft.forward_temps().release(qkv_bytes(dims, ctx));
  }
}

void flash_backward(LayerDraft& draft, const AttentionDims& dims, const BuildContext& ctx) {
  constexpr double kBackwardToForward = 2.5;  // FA2 paper: 5 matmuls vs 2 (Sec. 4.1)
  const std::int64_t o = q_bytes(dims, ctx);
  const std::int64_t qkv = qkv_bytes(dims, ctx);
  TransientTracker& temps = draft.backward_temps();
  if (ctx.unpad_attention) {
    // pad_input's backward: dO's rows gathered into an unpadded copy.
    draft.backward(memory_bound_kernel("attn_pad_bwd", 2 * o, ctx));
    temps.allocate(o);
  }
  // Reads Q, K, V, O, dO and the log-sum-exp; writes dQ, dK, dV. Of its 5 matmuls one recomputes
  // the scores: model work is the 4 of a backward without recompute (twice the forward's).
  NamedKernel backward =
      flash_kernel("attn_bwd", dims, ctx, true, kBackwardToForward * flash_forward_flops(dims, ctx),
                   qkv + 2 * o + lse_bytes(dims, ctx) + qkv);
  backward.model_flops_fraction = 2.0 / kBackwardToForward;
  draft.backward(backward);
  // Workspace of flash-attn's mha_bwd (csrc/flash_attn/flash_api.cpp): dq_accum in fp32 and
  // softmax_d [b, heads, s] fp32; with GQA, dk_expanded/dv_expanded at full head count, summed
  // into dK/dV afterwards.
  std::int64_t workspace =
      ctx.tokens * dims.heads * dims.head_dim * kStatBytes + lse_bytes(dims, ctx);
  if (dims.kv_heads != dims.heads) workspace += 2 * o;
  temps.allocate(qkv);
  temps.allocate(workspace);
  temps.release(workspace);
  if (ctx.unpad_attention) {
    // index_first_axis's backward: zeros of the padded dQKV, then index_put of the rows.
    draft.backward(memory_bound_kernel("attn_unpad_bwd", 3 * qkv, ctx));
    temps.allocate(qkv);
    temps.release(o);  // the unpadded dO
  }
  temps.release(o);                             // dO
  if (ctx.unpad_attention) temps.release(qkv);  // the unpadded dQ, dK, dV
}

// The tensors of a softmax in fp32 over scores of the compute dtype: the scores' bytes, the fp32
// probabilities', and which conversions run (none in fp32; fp16's is fused into the softmax).
struct Fp32Softmax {
  std::int64_t scores = 0;
  std::int64_t probs32 = 0;
  bool narrow = false;          // the compute dtype is narrower than fp32
  bool converts_input = false;  // the scores are converted to fp32 before the softmax
};

Fp32Softmax fp32_softmax(const AttentionDims& dims, const BuildContext& ctx) {
  const std::int64_t elements = ctx.batch * dims.heads * ctx.seq * ctx.seq;
  const bool narrow = ctx.element_bytes < kStatBytes;
  return {elements * ctx.element_bytes, elements * kStatBytes, narrow,
          narrow && ctx.dtype != Dtype::kFp16};
}

// Softmax in fp32 over scores of the compute dtype (EagerSoftmax::kAdditiveMaskFp32), from the
// masked scores, a temporary, to the probabilities P V reads. HF's softmax(x, dtype=float32) on a
// bf16 x converts x first (ATen's softmax: input.toType(dtype), its fused half-to-float kernel
// being fp16's only), as Meta's scores.float() does; softmax saves its fp32 output, and
// .to(query dtype) makes the copy P V keeps (or, with dropout, dropout's input). In fp32 the two
// conversions are no-ops, and P V keeps softmax's own output.
void fp32_softmax_forward(LayerDraft& draft, const AttentionDims& dims, const BuildContext& ctx) {
  const auto [scores, probs32, narrow, converts_input] = fp32_softmax(dims, ctx);
  TransientTracker& temps = draft.forward_temps();
  std::int64_t input = scores;
  if (converts_input) {
    draft.forward(memory_bound_kernel("attn_scores_to_fp32", scores + probs32, ctx));
    temps.allocate(probs32);
    temps.release(scores);
    input = probs32;
  }
  draft.forward(memory_bound_kernel("attn_softmax", input + probs32, ctx));
  draft.save(probs32);  // softmax saves its (fp32) output
  temps.release(input);
  if (!narrow) {
    if (dims.dropout) temps.allocate(scores);  // dropout reads softmax's own output
    return;
  }
  draft.forward(memory_bound_kernel("attn_probs_to_dtype", probs32 + scores, ctx));
  if (dims.dropout) {
    temps.allocate(scores);  // dropout's input; its output is what P V keeps
  } else {
    draft.save(scores);  // the P V bmm keeps the cast probabilities
  }
}

// Its backward, from dP in the compute dtype to the scores' gradient: .to()'s backward makes dP
// fp32, softmax's reads it and the fp32 output and writes its input's dtype
// (_softmax_backward_data's input_dtype), and the conversion's backward casts that back.
void fp32_softmax_backward(LayerDraft& draft, const AttentionDims& dims, const BuildContext& ctx) {
  const auto [scores, probs32, narrow, converts_input] = fp32_softmax(dims, ctx);
  TransientTracker& temps = draft.backward_temps();
  const auto step = [&](const char* name, std::int64_t in, std::int64_t out, std::int64_t read) {
    draft.backward(memory_bound_kernel(name, read + out, ctx));
    temps.allocate(out);
    temps.release(in);
  };
  std::int64_t grad = scores;
  if (narrow) {
    step("attn_probs_to_dtype_bwd", scores, probs32, scores);
    grad = probs32;
  }
  const std::int64_t input = converts_input ? probs32 : scores;
  step("attn_softmax_bwd", grad, input, grad + probs32);
  if (converts_input) step("attn_scores_to_fp32_bwd", probs32, scores, probs32);
}

void naive_forward(LayerDraft& draft, const AttentionDims& dims, const BuildContext& ctx) {
  const std::int64_t bh = ctx.batch * dims.heads;
  const std::int64_t scores = bh * ctx.seq * ctx.seq * ctx.element_bytes;
  const std::int64_t mask = ctx.seq * ctx.seq * kMaskBytes;
  const std::int64_t head_major = 3 * q_bytes(dims, ctx);  // Q, K, V at full head count
  const std::int64_t o = q_bytes(dims, ctx);
  TransientTracker& temps = draft.forward_temps();

  draft.forward(memory_bound_kernel("attn_split_heads", qkv_bytes(dims, ctx) + head_major, ctx));
  // bmm saves its (copied) operands: Q, K for QK^T, V for PV.
  for (int i = 0; i < 3; ++i) draft.save(head_major / 3);
  temps.release(qkv_bytes(dims, ctx));

  draft.forward(
      causal_attention_gemm("attn_scores", GemmShape{ctx.seq, ctx.seq, dims.head_dim, bh}, ctx));
  temps.allocate(scores);
  draft.forward(memory_bound_kernel("attn_scale", 2 * scores, ctx));
  temps.allocate(scores);
  temps.release(scores);
  if (dims.eager_softmax == EagerSoftmax::kAdditiveMaskFp32) {
    // The [b, 1, s, s] causal mask in the compute dtype, broadcast over the heads.
    const std::int64_t additive = ctx.batch * ctx.seq * ctx.seq * ctx.element_bytes;
    draft.forward(memory_bound_kernel("attn_mask", 2 * scores + additive, ctx));
    temps.allocate(scores);
    temps.release(scores);
    fp32_softmax_forward(draft, dims, ctx);
  } else {
    draft.forward(memory_bound_kernel("attn_mask", 2 * scores + mask, ctx));
    draft.save(mask);
    temps.allocate(scores);
    temps.release(scores);
    draft.forward(memory_bound_kernel("attn_softmax", 2 * scores, ctx));
    draft.save(scores);  // softmax saves its output
    temps.release(scores);
  }
  if (dims.dropout) {
    const std::int64_t dropout_mask = bh * ctx.seq * ctx.seq * kMaskBytes;
    draft.forward(memory_bound_kernel("attn_dropout", 2 * scores + dropout_mask, ctx));
    draft.save(scores);        // native_dropout's output, which the PV bmm keeps
    draft.save(dropout_mask);  // and its mask
    if (dims.eager_softmax == EagerSoftmax::kAdditiveMaskFp32) temps.release(scores);
  }
  draft.forward(
      causal_attention_gemm("attn_pv", GemmShape{ctx.seq, dims.head_dim, ctx.seq, bh}, ctx));
  temps.allocate(o);
  draft.forward(memory_bound_kernel("attn_merge_heads", 2 * o, ctx));
  draft.save(o);
  temps.release(o);
}

void naive_backward(LayerDraft& draft, const AttentionDims& dims, const BuildContext& ctx) {
  const std::int64_t bh = ctx.batch * dims.heads;
  const std::int64_t scores = bh * ctx.seq * ctx.seq * ctx.element_bytes;
  const std::int64_t mask = ctx.seq * ctx.seq * kMaskBytes;
  const std::int64_t o = q_bytes(dims, ctx);
  TransientTracker& temps = draft.backward_temps();

  draft.backward(memory_bound_kernel("attn_merge_heads_bwd", 2 * o, ctx));
  temps.allocate(o);
  temps.release(o);  // the caller's dO
  // dP = dO V^T and dV = P^T dO.
  draft.backward(causal_attention_gemm("attn_pv_dgrad_probs",
                                       GemmShape{ctx.seq, ctx.seq, dims.head_dim, bh}, ctx));
  temps.allocate(scores);
  draft.backward(causal_attention_gemm("attn_pv_dgrad_v",
                                       GemmShape{ctx.seq, dims.head_dim, ctx.seq, bh}, ctx));
  temps.allocate(o);
  temps.release(o);  // head-major dO
  // Each elementwise step reads the incoming score gradient and writes a new one.
  auto score_step = [&](const char* name, std::int64_t bytes) {
    draft.backward(memory_bound_kernel(name, bytes, ctx));
    temps.allocate(scores);
    temps.release(scores);
  };
  if (dims.dropout)
    score_step("attn_dropout_bwd", 2 * scores + bh * ctx.seq * ctx.seq * kMaskBytes);
  if (dims.eager_softmax == EagerSoftmax::kAdditiveMaskFp32) {
    fp32_softmax_backward(draft, dims, ctx);  // the additive mask's backward is no kernel
  } else {
    score_step("attn_softmax_bwd", 3 * scores);  // reads dP and the softmax output
    score_step("attn_mask_bwd", 2 * scores + mask);
  }
  score_step("attn_scale_bwd", 2 * scores);
  // dQ = dS K and dK = dS^T Q.
  draft.backward(causal_attention_gemm("attn_scores_dgrad_q",
                                       GemmShape{ctx.seq, dims.head_dim, ctx.seq, bh}, ctx));
  temps.allocate(o);
  draft.backward(causal_attention_gemm("attn_scores_dgrad_k",
                                       GemmShape{ctx.seq, dims.head_dim, ctx.seq, bh}, ctx));
  temps.allocate(o);
  temps.release(scores);
  // Back to token-major; with GQA the repeated K/V head gradients are summed per kv head.
  draft.backward(memory_bound_kernel("attn_split_heads_bwd", 3 * o + qkv_bytes(dims, ctx), ctx));
  temps.allocate(qkv_bytes(dims, ctx));
  temps.release(3 * o);
}

}  // namespace

std::int64_t qkv_bytes(const AttentionDims& dims, const BuildContext& ctx) {
  return ctx.tokens * (dims.heads + 2 * dims.kv_heads) * dims.head_dim * ctx.element_bytes;
}

void append_attention_forward(LayerDraft& draft, const AttentionDims& dims,
                              const BuildContext& ctx) {
  draft.begin_attention_core(attention_saves_inputs(ctx) ? 0 : qkv_bytes(dims, ctx));
  if (ctx.flash_attention) {
    flash_forward(draft, dims, ctx);
  } else {
    naive_forward(draft, dims, ctx);
  }
  draft.end_attention_core(ctx.tokens * dims.heads * dims.head_dim * ctx.element_bytes);
}

void append_attention_backward(LayerDraft& draft, const AttentionDims& dims,
                               const BuildContext& ctx) {
  if (ctx.flash_attention) {
    flash_backward(draft, dims, ctx);
  } else {
    naive_backward(draft, dims, ctx);
  }
}

}  // namespace fsdpsim::models::detail
