// A model turned into the work one rank does for one micro-batch: layers in forward order,
// each with its parameters, its kernels (forward, backward) and its activation memory.
//
// The FSDP schedule builder (sim/fsdp) groups layers into FSDP units and replays the kernels;
// the hardware layer prices each Kernel. Counts are exact (no 6N approximations).
#pragma once

#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "models/transformer_spec.hpp"
#include "sim/units/dtype.hpp"
#include "sim/units/op_shapes.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::models {

enum class LayerKind : std::uint8_t {
  kEmbedding,  // token (+ learned position) embedding
  kBlock,      // one transformer block
  kHead,       // final norm + LM head + cross-entropy loss
  // A layer the auto-wrap policy leaves to the root unit and activation checkpointing never
  // wraps: T5's encoder final norm, custom layers with fsdp_unit false.
  kUnwrapped,
  // One chunk of the LM head and its loss, which the training loop runs chunk by chunk after the
  // model's forward (WorkloadOptions::loss_chunks; Layer::loss_chunking): the head layer before
  // it is then the final norm alone.
  kChunkedLoss,
};

// Which product of an nn.Linear a GEMM kernel computes (models/kernel_factory.hpp sets it);
// the float8 pass (models/float8_linear.hpp) rewrites the kernels that carry it.
enum class LinearPass : std::uint8_t {
  kNone,        // not a linear's GEMM (attention bmm, memory-bound kernels, ...)
  kForward,     // Y = X W^T (+ bias: the cuBLAS epilogue, or float8's separate add)
  kInputGrad,   // dX = dY W
  kWeightGrad,  // dW = dY^T X
};

struct NamedKernel {
  std::string name;  // e.g. "qkv", "attn", "attn_out", "mlp_up", "gelu", "ln1", "lm_head"
  Kernel kernel;
  LinearPass linear = LinearPass::kNone;
  bool linear_bias = false;  // with kForward: the linear has a bias (a parameter of n elements)
  // The nn.Linear whose forward or backward this kernel runs in ("qkv", "mlp_up"): its GEMMs,
  // its bias kernels, float8 and autocast casts of its operands. Empty outside any linear. What
  // a module hook (an FSDP unit per linear, DeepSpeed's per-module fetch) brackets.
  std::string linear_module{};
  // Memory-bound kernels, for the torch.compile pass (models/compile_fusion.hpp): bytes of this
  // kernel's output that only the memory-bound kernels after it read, before the next GEMM or
  // attention kernel (a dropout output that only the residual add reads). Fused with them, that
  // output is neither written nor read back.
  std::int64_t handoff_bytes = 0;
  // True when the next kernel cannot join this one's fused kernel: it needs this kernel's full
  // reduction first (a float8 amax), or it shares no read with it (a bias gradient).
  bool ends_fusion = false;
  // The host reads this kernel's result (torch.nonzero sizing its output, .item()): the CPU waits
  // for the stream before it issues anything else.
  bool host_sync = false;
  // The share of this kernel's FLOPs that is model work (MFU's numerator): 0.5 for the attention
  // GEMMs an unfused causal attention runs over the whole s x s, whose masked half FlashAttention
  // skips (flash_forward_flops counts the same half), so that a model's FLOPs do not depend on
  // its attention kernel. Hardware FLOPs (HFU) count all of it.
  double model_flops_fraction = 1.0;
  // Bytes of the tensors the op returns, for an op-level checkpoint policy that keeps them
  // (models/op_checkpoint_policy.hpp): a linear's forward output (in the activations' dtype,
  // float8 linears included), a fused attention's output and log-sum-exp. 0 for other kernels.
  std::int64_t output_bytes = 0;
};

// One tensor autograd keeps between a layer's forward and its backward.
struct SavedTensor {
  Bytes bytes{0};
  // A linear's input that is a pointwise function of other saved tensors
  // (Layer::rematerializable_saved).
  bool rematerializable = false;
};

// torchtitan's chunked loss (torchtitan/components/loss.py: ChunkedCELoss, torchtitan#2937, April
// 2026; ChunkedLossWrapper since #3779, June 2026):
// the model's forward stops at the final norm (Decoder._skip_lm_head) and returns the hidden
// states [T, d]; the loss splits them into `chunks` equal runs of tokens along T and, for each,
// runs the LM head and the loss forward, then that chunk's backward at once (chunk_loss.backward()
// on a detached leaf), copying the chunk's hidden-state gradient, cast to fp32, into a
// GradAccumulator buffer; the buffer, cast back to the hidden states' dtype, is the gradient the
// decoder's backward then starts from. The layer of kind kChunkedLoss describes one chunk.
struct LossChunking {
  std::int32_t chunks = 0;   // 0: not a chunked loss
  Bytes hidden{0};           // the hidden states the chunks read, [T, d] in the compute dtype
  Bytes gradient_buffer{0};  // GradAccumulator's buffer: torch.zeros_like(hidden, fp32)
};

struct Layer {
  std::string name;  // "embedding", "blocks.0", ..., "head"
  LayerKind kind = LayerKind::kBlock;
  // Parameters owned by this layer (a tied weight is owned by the embedding).
  std::int64_t numel = 0;
  std::int32_t parameter_tensors = 0;  // nn.Parameters among them (FSDP's per-parameter CPU work)
  // Each nn.Parameter's elements, in registration order, where the family itemizes them (all but
  // custom, whose layer lists give only a count and a total): FSDP2 allocates each one's unsharded
  // copy and autograd each one's gradient on its own. Sums to numel.
  std::vector<std::int64_t> parameter_numels;
  std::vector<NamedKernel> forward;   // in execution order
  std::vector<NamedKernel> backward;  // in execution order (gradient kernels of this layer)
  // Bytes saved by autograd between this layer's forward and its backward, no checkpointing.
  Bytes saved_activations{0};
  // The tensors that make saved_activations, in the order the forward saves them, but autocast's
  // cast weights, which come last (empty where the family does not itemize them: custom layer
  // lists). The step allocates each tensor of a block on its own, as PyTorch does
  // (fsdp::StepBuilder::forward_layer).
  std::vector<SavedTensor> saved_tensors;
  // Bytes saved when this layer is wrapped in full activation checkpointing (its input only).
  Bytes saved_activations_checkpointed{0};
  // Part of saved_activations that is the layer's input itself, which its first norm saves: the
  // tensor a checkpoint of the layer keeps, and its recompute saves again without a copy (the
  // re-run forward reads the checkpoint's own input tensor, torch/utils/checkpoint.py). 0 where
  // no saved tensor is the input (the eager Llama RMSNorm over a narrower input saves its fp32
  // copy; custom layers).
  Bytes saved_input{0};
  // The copies torch.autocast makes of the weights its linears read, one per linear in forward
  // order (models/autocast_weight_casts.hpp; the last of saved_tensors). Where the weights are
  // tensors autocast caches the casts of, the cache holds these until the forward leaves
  // autocast, whether or not autograd saves them (fsdp::StepBuilder::cache_autocast_casts).
  // Empty without autocast casts, and in a compiled block: Dynamo traces with the cache off.
  std::vector<Bytes> autocast_weight_copies;
  // Largest extra memory alive at once while this layer's forward runs (temporaries freed inside
  // the layer), and while its backward runs (activation gradients, temporaries). Neither counts
  // saved activations, the layer's output (forward), the gradients of its output and input
  // (backward) or weight gradients (FSDP's); models/layer_draft.hpp has the bookkeeping.
  // Each peak is kept as the tensors alive at it, in allocation order; the step allocates each on
  // its own, so the caching allocator sees the block sizes PyTorch asks for (a 7.8 GiB fp32 logits
  // gradient can reuse the 7.8 GiB block of the forward's upcast logits; one 15.7 GiB block for
  // the whole backward peak could not).
  std::vector<Bytes> forward_transient_tensors;
  std::vector<Bytes> backward_transient_tensors;
  [[nodiscard]] Bytes forward_transient_peak() const {
    return std::accumulate(forward_transient_tensors.begin(), forward_transient_tensors.end(),
                           Bytes(0));
  }
  [[nodiscard]] Bytes backward_transient_peak() const {
    return std::accumulate(backward_transient_tensors.begin(), backward_transient_tensors.end(),
                           Bytes(0));
  }
  // The attention core (softmax(QK^T)V) inside `forward`: kernels [begin, end), and the bytes it
  // saves beyond its output (which the output projection keeps anyway). Selective activation
  // checkpointing of attention (Korthikanti et al. 2022, Sec. 4.3) drops these bytes and re-runs
  // these kernels in backward. Empty range for layers without attention.
  std::size_t attention_forward_begin = 0;
  std::size_t attention_forward_end = 0;
  Bytes attention_core_saved{0};
  // The core's inputs (Q, K, V as it receives them) where nothing outside the core saves them
  // (unfused attention copies them head-major inside the core and saves the copies): the
  // checkpoint keeps its inputs, so selective checkpointing saves these bytes instead
  // (Korthikanti et al. 2022, Sec. 4.3: 34*s*b*h per layer, Q, K and V among them). 0 where
  // the layer saves them anyway (a fused kernel's inputs).
  Bytes attention_core_input{0};
  // Part of saved_activations that is the input of a linear and a pointwise function of other
  // saved tensors (a norm's or an activation's output). With float8 linears under torch.compile
  // its only backward users are the float8 casts, which are fusible, so Inductor's partitioner
  // recomputes it instead of saving it (models/compile_fusion.hpp).
  Bytes rematerializable_saved{0};
  // Where a recompute of this whole layer may stop: the name of its first forward kernel that
  // PyTorch's non-reentrant checkpoint does not re-run when it stops early (PyTorch >= 2.1,
  // torch.utils.checkpoint.set_checkpoint_early_stop, on by default). The recompute stops as
  // soon as every tensor the backward saved has been recomputed (_StopRecomputationError,
  // torch/utils/checkpoint.py), so what follows the last op that saves one never runs: the block's
  // final linear, whose ATen mm packs its inputs before it runs, when no dropout follows it, and
  // the residual add. Empty: the recompute re-runs every kernel.
  std::string recompute_early_stop_kernel;
  // The model's output when the training loop keeps it (WorkloadOptions::logits_kept_by_loop;
  // head layer only): its bytes, counted in neither the saved activations nor the transients,
  // and the forward kernel that writes it, after which the model has returned it and the loop's
  // name lets go of the previous micro-batch's. 0 bytes: the loss frees the logits as it goes.
  Bytes loop_kept_output{0};
  std::string loop_kept_output_kernel;
  // Elements of each floating-point module buffer (register_buffer) this layer holds, e.g.
  // minGPT's causal mask. Buffers are not parameters: FSDP neither flattens nor shards them, so
  // every rank keeps them whole (in FSDP1's MixedPrecision.buffer_dtype when set), and DDP
  // broadcasts them from rank 0 before a forward (broadcast_buffers).
  std::vector<std::int64_t> buffers;
  // Kind kChunkedLoss only: how the step runs it (one chunk per forward and backward).
  LossChunking loss_chunking;
};

// The elements of a list of parameters (Layer::parameter_numels).
inline std::int64_t total_numel(const std::vector<std::int64_t>& parameter_numels) {
  return std::accumulate(parameter_numels.begin(), parameter_numels.end(), std::int64_t{0});
}

struct WorkloadOptions {
  std::int64_t micro_batch = 1;        // sequences per rank per micro-step
  std::int64_t seq_len = 0;            // tokens per sequence (t5: the encoder's)
  std::int64_t decoder_seq_len = 0;    // t5 decoder tokens per sequence; 0 = seq_len
  Dtype compute_dtype = Dtype::kBf16;  // activations and GEMM inputs
  bool flash_attention = true;         // fused attention kernel; false = unfused (scores in HBM)
  FlashKernel flash_kernel = FlashKernel::kFlash2;  // which fused kernel, when flash_attention
  // The loss kernels on the logits (models/head_layer.cpp).
  LossKernel loss = LossKernel::kCrossEntropyFp32;
  // How the RMSNorms run; nullopt: as the family's reference code runs them (llama: fused,
  // nn.RMSNorm with its 2025 fused kernel; t5: eager, HF T5LayerNorm). No effect on LayerNorm
  // families.
  std::optional<RmsNormKernel> rms_norm;
  // Whether the training loop keeps the logits past the loss (models/head_layer.cpp); gpt, mpt
  // and llama heads only.
  LogitsKeptByLoop logits_kept_by_loop = LogitsKeptByLoop::kNone;
  // torchtitan's ChunkedLossWrapper with this many chunks (Layer::loss_chunking): the head is
  // built as the final norm, then a kChunkedLoss layer for one chunk of micro_batch * seq_len /
  // loss_chunks tokens. 0: the LM head and the loss run in the head, on all tokens at once. gpt,
  // mpt and llama heads only, untied, with the weights in the compute dtype and no logits kept
  // by the loop (the loop never sees them).
  std::int32_t loss_chunks = 0;
  // torchao Float8Linear (tensorwise dynamic scaling) for every eligible linear but the LM head
  // (models/float8_linear.hpp). The GPU must have an fp8 rate; the app checks.
  bool float8_linears = false;
  // With float8_linears: whose they are (torchao's casts run fused only in a compiled block).
  Float8LinearImpl float8_linear = Float8LinearImpl::kTorchao;
  // With float8_linears: FSDP2 all-gathers their weights in float8, so the layers do not cast
  // them (models/float8_linear.hpp, Float8Weight::kAllGatheredInFloat8).
  bool float8_all_gather = false;
  // Dtype of the weights when forward runs (FSDP's param_dtype); when it is wider than
  // compute_dtype, autocast casts every linear's weight (models/autocast_weight_casts.hpp).
  // nullopt: the weights are in compute_dtype, or the caller prices the casts itself (DDP).
  std::optional<Dtype> weight_dtype;
  // Dtype of the weights the modules hold (FSDP's param_dtype; DDP's fp32 parameters). When it
  // is wider than compute_dtype (autocast over wider weights), the embedding's output and with it
  // the residual stream, the norms' inputs and outputs are in this dtype (gpt, mpt and llama
  // families: models/gpt_family.cpp, models/llama_family.cpp; t5 keeps the compute dtype).
  // nullopt: the compute dtype.
  std::optional<Dtype> residual_dtype;
  // torch.compile of every transformer block (models/compile_fusion.hpp).
  bool compiled = false;
  // The fused attention runs on unpadded tokens: flash-attn's bert_padding unpad_input before
  // the kernel and pad_input after it, as its FlashAttention module does when it is given a
  // key_padding_mask (models/attention_kernels.cpp). Only with flash_attention.
  bool unpad_attention = false;
  // fp32 GEMMs on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32); only when
  // compute_dtype is fp32.
  bool allow_tf32 = false;
};

struct Workload {
  // Forward order: embedding, blocks..., head (t5: embedding, encoder blocks, encoder final
  // norm, decoder embedding, decoder blocks, head; custom: the listed units).
  std::vector<Layer> layers;
  std::int64_t total_numel = 0;
};

// Exact parameter count of a spec (sum of Layer::numel), without building kernels.
std::int64_t parameter_count(const TransformerSpec& spec);

// Layers of kind kBlock a spec builds (those an auto-wrap policy makes units of), without
// building kernels: the blocks (t5: encoder and decoder), or a custom model's layers with
// fsdp_unit.
std::int64_t block_count(const TransformerSpec& spec);

// Whether the layers a spec builds hold module buffers (Layer::buffers), without building them.
bool has_buffers(const TransformerSpec& spec);

// One more tensor alive at a layer's forward or backward transient peak (no-op for 0 bytes).
enum class Pass : std::uint8_t { kForward, kBackward };
void add_transient(Layer& layer, Pass pass, Bytes bytes);

// Returns an empty string when `options` can run on `spec` (which must validate), else what is
// wrong: micro_batch and seq_len positive; for gpt/mpt, seq_len <= max_seq_len (the learned
// position table has max_seq_len rows; llm-foundry sets max_seq_len = seq_len for long runs);
// decoder_seq_len non-negative, and only for t5; loss_chunks as WorkloadOptions says. Custom models
// scale their per-sample sizes with micro_batch only: seq_len just converts samples to tokens (1
// for non-sequence models).
std::string validate(const TransformerSpec& spec, const WorkloadOptions& options);

// Builds the per-micro-batch workload. Preconditions: validate(spec) and validate(spec, options)
// are empty; throws std::invalid_argument with their message otherwise (a caller bug: the app
// validates first and reports against the JSON path).
Workload build_workload(const TransformerSpec& spec, const WorkloadOptions& options);

}  // namespace fsdpsim::models
