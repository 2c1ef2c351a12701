// Typed parallelism and training configuration, named after PyTorch's arguments
// (torch/distributed/fsdp/api.py, fully_sharded_data_parallel.py, _fully_shard/_fully_shard.py,
// torch/nn/parallel/distributed.py). Plain aggregates: the app fills and validates them from JSON;
// nothing here parses strings.
#pragma once

#include <cstdint>
#include <optional>

#include "sim/units/dtype.hpp"
#include "sim/units/op_shapes.hpp"

namespace fsdpsim::fsdp {

enum class Parallelism : std::uint8_t {
  kFsdp,
  kDdp,  // torch.nn.parallel.DistributedDataParallel: full replicas, bucketed all-reduce
  // DeepSpeed ZeRO stage 3 as DeepSpeed 0.3.12-0.4.0 ran it (2021): per-parameter all-gathers
  // under full-device synchronizes (sim/fsdp/deepspeed_zero3_schedule.cpp).
  kDeepSpeedZero3,
};

// The zero_optimization settings of DeepSpeed ZeRO-3 that shape its step, with the defaults of
// deepspeed/runtime/zero/constants.py (v0.3.13). Sizes are in elements.
struct DeepSpeedZero3Config {
  std::int64_t param_persistence_threshold = 100'000;  // stage3_param_persistence_threshold
  std::int64_t prefetch_bucket_size = 50'000'000;      // stage3_prefetch_bucket_size
  std::int64_t max_live_parameters = 1'000'000'000;    // stage3_max_live_parameters
  std::int64_t max_reuse_distance = 1'000'000'000;     // stage3_max_reuse_distance
  std::int64_t reduce_bucket_size = 500'000'000;       // reduce_bucket_size
  // contiguous_gradients (stage 3's default in 0.3.13, ZERO3_OPTIMIZATION_CONTIGUOUS_GRADIENTS_
  // DEFAULT, is false): each gradient is copied into one of two reduce_bucket_size buffers and
  // reduce-scattered parameter by parameter, instead of the buckets being all-reduced.
  bool contiguous_gradients = false;
  // The model code registers its token embedding, which the LM head reuses, as an external
  // parameter of the whole model (deepspeed.zero.register_external_parameter, as DeepSpeedExamples'
  // Megatron-LM-v1.1.5-ZeRO3 port did from 2021-03-08 to 2021-04-18): gathered when the model's
  // forward starts and kept until the step ends. Not a zero_optimization key.
  bool register_external_embedding = false;
};

// torch.distributed.fsdp.ShardingStrategy.
enum class ShardingStrategy : std::uint8_t {
  kFullShard,         // params, grads, optimizer sharded; params freed after forward
  kShardGradOp,       // params kept unsharded from forward to backward (ZeRO-2)
  kNoShard,           // DDP-like: all-reduce of gradients
  kHybridShard,       // FULL_SHARD inside a shard group, all-reduce across replicas
  kHybridShardZero2,  // SHARD_GRAD_OP inside a shard group, all-reduce across replicas
};

// torch.distributed.fsdp.BackwardPrefetch; kNone is `backward_prefetch=None`.
enum class BackwardPrefetch : std::uint8_t { kBackwardPre, kBackwardPost, kNone };

enum class ActivationCheckpointing : std::uint8_t {
  kNone,
  kFull,       // checkpoint_wrapper around every transformer block
  kSelective,  // checkpoint_wrapper around every n-th block (checkpoint_every_n_blocks)
  kAttention,  // op-level: only the attention core is recomputed (selective recomputation)
  // op-level, torchtitan's selective_ac_option "op": every block keeps its input, every other
  // mm's output and SDPA's output, and recomputes the rest (models/op_checkpoint_policy.hpp)
  kSelectiveOp,
};

enum class Optimizer : std::uint8_t {
  kAdamW,  // torch.optim.AdamW (implementation: OptimizerImpl), states in the parameters' dtype
  kSgd,    // torch.optim.SGD with its defaults (momentum 0): no state
};

// How torch.optim.AdamW runs on CUDA tensors (torch/optim/adamw.py, adamw()): foreach=None and
// fused=None pick _multi_tensor_adamw (_default_to_fused_or_foreach); fused=True picks
// _fused_adamw; foreach=False picks _single_tensor_adamw.
enum class OptimizerImpl : std::uint8_t {
  kForeach,  // _foreach_* kernels over all tensors; _foreach_sqrt makes a temporary of them all
  kFused,    // torch._fused_adamw_: one multi-tensor kernel, no temporaries
  kForLoop,  // per tensor, the same kernels as foreach; sqrt / div temporaries of one tensor
};

// Optimizer state bytes per parameter whose states are `state`: AdamW's exp_avg and exp_avg_sq
// are torch.zeros_like(param) (torch/optim/adamw.py, AdamW._init_group), so they take the
// parameters' dtype unless created beforehand (TrainingConfig::optimizer_state_dtype); SGD has
// none.
constexpr std::int64_t optimizer_state_bytes_per_parameter(Optimizer o, Dtype state) {
  return o == Optimizer::kAdamW ? 2 * dtype_bytes(state) : 0;
}

// How blocks are grouped into FSDP units (auto_wrap_policy / fully_shard calls).
enum class WrapPolicy : std::uint8_t {
  kPerBlock,      // transformer_auto_wrap_policy: one unit per block (default)
  kEveryNBlocks,  // one unit per `blocks_per_unit` consecutive blocks
  kWholeModel,    // no auto-wrap: the root is the only unit
  // ModuleWrapPolicy({Block, nn.Linear}) (FSDP1): each nn.Linear of a block is a unit nested in
  // its block's unit, which keeps the block's other parameters (norms).
  kBlockAndLinear,
};

struct FsdpConfig {
  std::int32_t version = 1;  // 1: FlatParameter FSDP; 2: per-parameter DTensor fully_shard
  ShardingStrategy sharding_strategy = ShardingStrategy::kFullShard;
  // Ranks one parameter is sharded over for hybrid strategies (0 = GPUs per node, PyTorch's
  // default intra-node group). Equals the world size for the other strategies.
  std::int32_t shard_group_size = 0;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kBackwardPre;  // PyTorch default
  bool forward_prefetch = false;                                        // PyTorch default
  // FSDP2's explicit prefetch lists: how many units ahead each unit's pre-forward
  // (set_modules_to_forward_prefetch, with forward_prefetch) and pre-backward
  // (set_modules_to_backward_prefetch; FSDP2's default prefetch is the one next) all-gather.
  std::int32_t forward_prefetch_modules = 1;
  std::int32_t backward_prefetch_modules = 1;
  bool limit_all_gathers = true;  // PyTorch default
  // _limiter_utils.py: _FreeEventQueue._max_num_inflight_all_gathers = 2 ("empirically chosen").
  std::int32_t max_inflight_all_gathers = 2;
  // FSDP2 reshard_after_forward: 1 = True (reshard to the shard group), 0 = False (keep),
  // k > 1 = reshard to groups of k ranks (the backward all-gather stays inside them).
  std::int32_t reshard_after_forward = 1;
  // The same for two units FSDP2 lets a user set apart: the last non-root unit in forward order
  // (torchtitan's default policy kept its last transformer block until July 2025, and keeps
  // [norm, output] since, wrap_embedding_and_head: FSDP would prefetch it again right away for
  // backward), and the root, which FSDP2 keeps unsharded unless its
  // reshard_after_forward is given explicitly (FSDPState._lazy_init resets its
  // post_forward_mesh_info only while _auto_reshard_after_forward). nullopt: the last unit
  // takes reshard_after_forward.
  std::optional<std::int32_t> last_unit_reshard_after_forward;
  std::int32_t root_reshard_after_forward = 0;
  // MixedPrecision(param_dtype, reduce_dtype); reduce_dtype defaults to param_dtype in PyTorch.
  Dtype param_dtype = Dtype::kBf16;
  Dtype reduce_dtype = Dtype::kBf16;
  // FSDP1 only: MixedPrecision.buffer_dtype, the dtype the root's lazy init casts every module
  // buffer to (_cast_buffers_to_dtype_and_device, torch/distributed/fsdp/_runtime_utils.py).
  // nullopt is PyTorch's None: buffers keep the module's dtype. FSDP2 moves buffers to the
  // device and leaves their dtype alone. (A root unit owning no parameters would cast them back
  // before each forward, _root_pre_forward; every model with buffers here has a root that owns
  // its embedding and head.)
  std::optional<Dtype> buffer_dtype;
  // DDP only: DistributedDataParallel(broadcast_buffers), PyTorch's default true.
  bool ddp_broadcast_buffers = true;
  // DDP only: DistributedDataParallel(gradient_as_bucket_view), PyTorch's default false.
  bool ddp_gradient_as_bucket_view = false;
  bool cpu_offload = false;  // CPUOffload(offload_params=True)
  // FSDP2 with torchao float8 linears: each Float8Linear weight's shard is cast to float8 before
  // the all-gather, which then moves one byte per element, and the linears use the gathered
  // float8 weight without casting it again (torchao Float8LinearConfig
  // enable_fsdp_float8_all_gather, WeightWithDynamicFloat8CastTensor; torchtitan
  // --float8.enable_fsdp_float8_all_gather).
  bool float8_all_gather = false;
  // With it, every weight's scale comes from one amax all-reduce after each optimizer step
  // (torchao precompute_float8_dynamic_scale_for_fsdp) instead of one all-reduce per weight at
  // each all-gather (hp_tensor_to_float8_dynamic with reduce_amax).
  bool precompute_float8_scale = false;
  WrapPolicy wrap_policy = WrapPolicy::kPerBlock;
  std::int32_t blocks_per_unit = 1;  // for kEveryNBlocks
  // FSDP2 with an untied embedding: the embedding layer (gpt's learned position table with the
  // tokens', where fully_shard(tok_embeddings) would leave it to the root) and the final norm with
  // the LM head are units of their own beside the blocks', as torchtitan's apply_fsdp shards them
  // since torchtitan#1094 (July 2025: fully_shard(model.tok_embeddings), fully_shard([model.norm,
  // model.output])), leaving the root nothing to hold. false: the root holds them (the auto-wrap
  // policies, fully_shard of the blocks and the model only).
  bool wrap_embedding_and_head = false;
  // DDP only: DistributedDataParallel(bucket_cap_mb). nullopt is PyTorch's None: 25 MiB buckets
  // after a first one of 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES); a value given caps every
  // bucket, the first too (DistributedDataParallel.__init__'s bucket_bytes_cap_default).
  std::optional<double> ddp_bucket_cap_mb;
  // DeepSpeed ZeRO-3 only.
  DeepSpeedZero3Config deepspeed;
};

// Where the training loop's host waits for the GPU (a CPU read of a GPU value, or a blocking
// host-to-device copy: copy_kernel_cuda with non_blocking=False calls memcpy_and_sync, which
// synchronizes the current stream, aten/src/ATen/native/cuda/Copy.cu). Until it waits, the CPU
// runs ahead, and the caching allocator hands out blocks at the CPU's pace: a CPU that enters
// the next step while the GPU still runs this one finds the blocks freed by the backward's last
// units still in use (their record_stream events pending) and takes new segments.
enum class HostSync : std::uint8_t {
  // Once per step, after the optimizer: `loss.item()` and the blocking `.to(rank)` of the batch
  // in PyTorch's FSDP example (pytorch/examples distributed/FSDP/utils/train_utils.py),
  // Composer's `loss.cpu().item()` and sample-count all-reduce read after every batch
  // (composer/trainer/trainer.py, _train_loop), torchtitan's blocking input copy
  // (torchtitan/trainer.py) with one micro-batch per step.
  kStep,
  // Before each micro-batch's forward: torchtitan copies each accumulation step's inputs with
  // a blocking `.to(self.device)` right before its forward.
  kMicroBatch,
  // Never: pinned batches copied with non_blocking=True and the loss read only at log steps
  // (nanoGPT's train.py), so the CPU carries its lead from step to step.
  kNone,
};

struct TrainingConfig {
  Parallelism parallelism = Parallelism::kFsdp;
  std::int64_t global_batch = 0;     // sequences per optimizer step, all ranks together
  std::int64_t micro_batch = 1;      // sequences per rank per forward/backward
  std::int64_t seq_len = 0;          // encoder-decoder models: the encoder's
  std::int64_t decoder_seq_len = 0;  // encoder-decoder models (t5): decoder's; 0 = seq_len
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::kNone;
  std::int32_t checkpoint_every_n_blocks = 2;  // for kSelective
  // A whole block's recompute stops once every tensor its backward saved is back
  // (models::Layer::recompute_early_stop_kernel): non-reentrant torch.utils.checkpoint from
  // PyTorch 2.1 on (set_checkpoint_early_stop, default on), which checkpoint_wrapper,
  // apply_activation_checkpointing and torchtitan use. false: the reentrant checkpoint, PyTorch
  // before 2.1, or DeepSpeed's checkpointing, which re-run the whole block.
  bool checkpoint_early_stop = true;
  Optimizer optimizer = Optimizer::kAdamW;
  OptimizerImpl optimizer_impl = OptimizerImpl::kForeach;  // AdamW on the GPU only
  bool flash_attention = true;
  FlashKernel flash_kernel = FlashKernel::kFlash2;  // which fused kernel, when flash_attention
  LossKernel loss = LossKernel::kCrossEntropyFp32;  // the loss kernels (models/head_layer.cpp)
  // How the RMSNorms run (models/eager_rms_norm.hpp); nullopt: as the model family's code does.
  std::optional<RmsNormKernel> rms_norm;
  // Whether the training loop holds the logits until its next forward (models/head_layer.cpp).
  LogitsKeptByLoop logits_kept_by_loop = LogitsKeptByLoop::kNone;
  // torchtitan's ChunkedLossWrapper with this many chunks (models::WorkloadOptions::loss_chunks;
  // FSDP2 with wrap_embedding_and_head, whose head unit the wrapper drives). 0: no chunking.
  std::int32_t loss_chunks = 0;
  // torch.autocast(dtype=...) around forward: the math dtype of GEMMs and activations when it
  // differs from the parameters' (e.g. Composer's DEFAULT precision: fp32 FSDP parameters,
  // bf16 autocast). nullopt: compute in MixedPrecision.param_dtype.
  std::optional<Dtype> autocast_dtype;

  [[nodiscard]] Dtype compute_dtype(Dtype param_dtype) const {
    return autocast_dtype.value_or(param_dtype);
  }
  // Gradient accumulation inside `with model.no_sync()` (FSDP2: set_requires_gradient_sync):
  // gradients stay unsharded until the last micro-batch reduces them.
  bool no_sync = false;
  // clip_grad_norm_ before each optimizer step (sim/fsdp/gradient_clipping.cpp).
  bool clip_grad_norm = false;
  // Where the loop's host waits for the GPU.
  HostSync host_sync = HostSync::kStep;
  // Each block's saved activations (its input, under activation checkpointing) kept in pinned
  // host memory between forward and backward: offload_wrapper / save_on_cpu(pin_memory=True).
  bool offload_activations = false;
  // The fused attention runs on unpadded tokens (models::WorkloadOptions::unpad_attention).
  bool unpad_attention = false;
  // The dtype the model's parameters are stored in when fully_shard runs (`model.to(dtype)`
  // first gives "pure bf16" training): FSDPParam.orig_dtype
  // (torch/distributed/fsdp/_fully_shard/_fsdp_param.py, init_dtype_attrs), the dtype of the
  // sharded parameters, of the sharded gradients (foreach_reduce casts the reduce-scatter output
  // to orig_dtype, _fsdp_collectives.py) and of AdamW's states unless optimizer_state_dtype says
  // otherwise. fp32 keeps fp32 master weights.
  Dtype param_storage_dtype = Dtype::kFp32;
  // AdamW's exp_avg and exp_avg_sq in bf16 beside fp32 parameters and gradients: torchtitan's
  // optimizer.implementation "fused_opt_states_bf16" (torchtitan#2732, April 2026), a step
  // pre-hook that creates the states in bf16 before AdamW's lazy init, whose fused CUDA kernel
  // then takes its mixed-precision path (FusedAdamMathFunctorMP). nullopt: the parameters' dtype.
  std::optional<Dtype> optimizer_state_dtype;
  [[nodiscard]] Dtype state_dtype() const {
    return optimizer_state_dtype.value_or(param_storage_dtype);
  }
  // The linears' GEMM dtype when set: fp8 = torchao float8 linears (models/float8_linear.hpp);
  // any other value equals the compute dtype (the app checks). nullopt: the compute dtype.
  std::optional<Dtype> matmul_dtype;
  // Whose float8 linears, with matmul_dtype fp8.
  Float8LinearImpl float8_linear = Float8LinearImpl::kTorchao;
  // torch.compile of each transformer block (models/compile_fusion.hpp).
  bool compiled = false;
  // torch.backends.cuda.matmul.allow_tf32 (torch.set_float32_matmul_precision("high")): fp32
  // GEMMs run on the TF32 tensor cores; no effect when the compute dtype is not fp32. PyTorch's
  // default was True up to 1.11 and is False from 1.12 ("TF32 on Ampere", CUDA semantics notes).
  bool allow_tf32 = false;
  // The dtype whose tensor-core peak the GEMMs run at, and MFU is measured against: fp8 with
  // float8 linears (as llm-foundry's benchmark tables divide fp8 runs by the 1979 TFLOP/s fp8
  // peak; against the compute dtype's peak a float8 step could exceed 100 %), TF32 for fp32
  // compute under allow_tf32, else the compute dtype.
  [[nodiscard]] Dtype gemm_peak_dtype(Dtype param_dtype) const {
    if (matmul_dtype == Dtype::kFp8) return Dtype::kFp8;
    return gemm_math_dtype(compute_dtype(param_dtype), allow_tf32);
  }

  [[nodiscard]] bool float8_linears() const { return matmul_dtype == Dtype::kFp8; }
};

}  // namespace fsdpsim::fsdp
