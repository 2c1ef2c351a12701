#include "sim/app/parallelism_json.hpp"

#include <array>
#include <limits>

#include <fmt/format.h>

#include "sim/app/config_error.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/size_bounds.hpp"
#include "sim/fsdp/process_groups.hpp"

namespace fsdpsim::app {
namespace {

using fsdp::ShardingStrategy;

Dtype dtype_key(JsonObjectReader& r, const std::string& key, const std::string& fallback) {
  return *parse_dtype(r.choice(key, {"bf16", "fp16", "fp32"}, fallback));
}

ShardingStrategy strategy_of(const std::string& name) {
  if (name == "SHARD_GRAD_OP") return ShardingStrategy::kShardGradOp;
  if (name == "NO_SHARD") return ShardingStrategy::kNoShard;
  if (name == "HYBRID_SHARD") return ShardingStrategy::kHybridShard;
  if (name == "_HYBRID_SHARD_ZERO2") return ShardingStrategy::kHybridShardZero2;
  return ShardingStrategy::kFullShard;
}

bool hybrid(ShardingStrategy s) {
  return s == ShardingStrategy::kHybridShard || s == ShardingStrategy::kHybridShardZero2;
}

// FSDP2's reshard_after_forward (or one of its per-unit variants, `key`): true (1), false (0), or
// an integer group size; `fallback` when absent. The integer 1 is false, as PyTorch reads it
// (_get_post_forward_mesh_info: "resharding parameters to world size 1", with a warning); the
// shard group's own size, true, is mapped where the group is known (parse_fsdp_section).
std::int32_t reshard_after_forward(JsonObjectReader& r, const std::string& file,
                                   const std::string& key, std::int32_t fallback) {
  const nlohmann::json* v = r.child(key);
  if (v == nullptr) return fallback;
  if (v->is_boolean()) return v->get<bool>() ? 1 : 0;
  if (const std::optional<std::int64_t> n = whole_number(*v);
      n && *n >= 1 && *n <= std::numeric_limits<std::int32_t>::max())
    return *n == 1 ? 0 : static_cast<std::int32_t>(*n);
  throw ConfigError(
      file, "/fsdp/" + key,
      fmt::format("expected true, false or a group size >= 1, found {}", describe_json_type(*v)));
}

void parse_fsdp_section(JsonObjectReader& r, const std::string& file, fsdp::FsdpConfig& f,
                        const hardware::ClusterSpec& cluster) {
  f.version = r.positive_int32("version", 1);
  if (f.version > 2)
    throw ConfigError(file, "/fsdp/version", fmt::format("expected 1 or 2, found {}", f.version));
  const bool v2 = f.version == 2;
  const std::string strategy =
      r.choice("sharding_strategy",
               {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"},
               "FULL_SHARD");
  f.sharding_strategy = strategy_of(strategy);
  const std::string prefetch =
      r.choice("backward_prefetch", {"BACKWARD_PRE", "BACKWARD_POST", "none"}, "BACKWARD_PRE");
  f.backward_prefetch = prefetch == "BACKWARD_PRE"    ? fsdp::BackwardPrefetch::kBackwardPre
                        : prefetch == "BACKWARD_POST" ? fsdp::BackwardPrefetch::kBackwardPost
                                                      : fsdp::BackwardPrefetch::kNone;
  f.forward_prefetch = r.boolean("forward_prefetch", false);
  f.forward_prefetch_modules = static_cast<std::int32_t>(
      r.positive_int_at_most("forward_prefetch_modules", size_bounds::kLayers, 1));
  f.backward_prefetch_modules = static_cast<std::int32_t>(
      r.positive_int_at_most("backward_prefetch_modules", size_bounds::kLayers, 1));
  const std::optional<bool> limiter = r.optional_boolean("limit_all_gathers");
  f.limit_all_gathers = limiter.value_or(!v2);
  f.max_inflight_all_gathers = r.positive_int32("max_inflight_all_gathers", 2);
  f.param_dtype = dtype_key(r, "param_dtype", "bf16");
  f.reduce_dtype = dtype_key(r, "reduce_dtype", std::string(dtype_name(f.param_dtype)));
  if (r.has("buffer_dtype")) {
    if (v2) {
      throw ConfigError(file, "/fsdp/buffer_dtype",
                        "is FSDP1's MixedPrecision.buffer_dtype; FSDP2's MixedPrecisionPolicy has "
                        "none and leaves buffers in the module's dtype");
    }
    f.buffer_dtype = dtype_key(r, "buffer_dtype", "fp32");
  }
  f.cpu_offload = r.boolean("cpu_offload", false);
  f.float8_all_gather = r.boolean("float8_all_gather", false);
  f.precompute_float8_scale = r.boolean("precompute_float8_scale", false);
  if (f.precompute_float8_scale && !f.float8_all_gather) {
    throw ConfigError(file, "/fsdp/precompute_float8_scale",
                      "precomputes the scales of a float8 all-gather, which float8_all_gather "
                      "false turns off; it would do nothing");
  }
  const std::string wrap = r.choice(
      "wrap_policy", {"transformer_block", "every_n_blocks", "whole_model", "block_and_linear"},
      "transformer_block");
  f.wrap_policy = wrap == "every_n_blocks"     ? fsdp::WrapPolicy::kEveryNBlocks
                  : wrap == "whole_model"      ? fsdp::WrapPolicy::kWholeModel
                  : wrap == "block_and_linear" ? fsdp::WrapPolicy::kBlockAndLinear
                                               : fsdp::WrapPolicy::kPerBlock;
  f.blocks_per_unit = r.positive_int32("blocks_per_unit", 2);
  if (r.has("blocks_per_unit") && f.wrap_policy != fsdp::WrapPolicy::kEveryNBlocks) {
    throw ConfigError(file, "/fsdp/blocks_per_unit",
                      fmt::format("sizes the units of wrap_policy every_n_blocks; with {} it would "
                                  "do nothing",
                                  wrap));
  }
  f.wrap_embedding_and_head = r.boolean("wrap_embedding_and_head", false);
  if (f.wrap_embedding_and_head && f.wrap_policy == fsdp::WrapPolicy::kWholeModel) {
    throw ConfigError(file, "/fsdp/wrap_embedding_and_head",
                      "gives the embedding and the head units of their own beside the blocks'; "
                      "wrap_policy whole_model wraps no module but the root");
  }
  f.shard_group_size = r.positive_int32("shard_group_size", cluster.gpus_per_node);
  // reshard_after_forward and its per-unit variants (FSDP2 only).
  const std::array<std::string, 3> raf_keys = {
      "reshard_after_forward", "last_unit_reshard_after_forward", "root_reshard_after_forward"};
  f.reshard_after_forward = reshard_after_forward(r, file, raf_keys[0], 1);
  if (r.has(raf_keys[1]))
    f.last_unit_reshard_after_forward = reshard_after_forward(r, file, raf_keys[1], 1);
  f.root_reshard_after_forward = reshard_after_forward(r, file, raf_keys[2], 0);
  // The value behind raf_keys[i] (0 for a last unit that follows the others).
  const auto raf_value = [&f](std::size_t i) {
    return i == 0   ? f.reshard_after_forward
           : i == 1 ? f.last_unit_reshard_after_forward.value_or(0)
                    : f.root_reshard_after_forward;
  };

  if (!hybrid(f.sharding_strategy) && r.has("shard_group_size") &&
      f.shard_group_size != cluster.world_size()) {
    throw ConfigError(
        file, "/fsdp/shard_group_size",
        fmt::format("{} {} over all {} GPUs; shard_group_size applies to HYBRID_SHARD and "
                    "_HYBRID_SHARD_ZERO2",
                    strategy,
                    f.sharding_strategy == fsdp::ShardingStrategy::kNoShard
                        ? "replicates the parameters"
                        : "shards",
                    cluster.world_size()));
  }
  if (hybrid(f.sharding_strategy)) {
    if (const std::string problem = fsdp::shard_group_problem(cluster, f.shard_group_size);
        !problem.empty()) {
      throw ConfigError(file, "/fsdp/shard_group_size", problem);
    }
    // FSDP1's _init_core_state makes a one-GPU shard group NO_SHARD, whose gradient all-reduce
    // (_reduce_grad_no_shard, over the shard group) then reaches no other replica.
    if (!v2 && f.shard_group_size == 1 && cluster.world_size() > 1) {
      throw ConfigError(
          file, r.has("shard_group_size") ? "/fsdp/shard_group_size" : "/fsdp/sharding_strategy",
          fmt::format("{} with shard groups of 1 GPU{}: FSDP1 runs each group as NO_SHARD, "
                      "whose gradient all-reduce stays inside the group, so the {} replicas are "
                      "never synchronized; use NO_SHARD, a shard group of 2 GPUs or more, or "
                      "FSDP2",
                      strategy, r.has("shard_group_size") ? "" : " (one GPU per node)",
                      cluster.world_size()));
    }
  }
  if (r.has("max_inflight_all_gathers") && !f.limit_all_gathers) {
    throw ConfigError(file, "/fsdp/max_inflight_all_gathers",
                      v2 ? "is the depth of FSDP1's rate limiter; FSDP2 has none, so it would do "
                           "nothing"
                         : "is the depth of the rate limiter, which limit_all_gathers false turns "
                           "off; it would do nothing");
  }
  if (!v2) {
    // NO_SHARD gathers nothing and never frees its parameters, so _reshard enqueues no free event
    // and the limiter never waits (torch/distributed/fsdp/_runtime_utils.py _reshard, _unshard).
    if (f.sharding_strategy == ShardingStrategy::kNoShard) {
      for (const char* key : {"max_inflight_all_gathers", "limit_all_gathers"}) {
        if (!r.has(key) || (key == std::string_view("limit_all_gathers") && !f.limit_all_gathers))
          continue;
        throw ConfigError(file, fmt::format("/fsdp/{}", key),
                          "sets the rate limiter, which waits for the frees of unsharded "
                          "parameters; NO_SHARD never frees them, so it would do nothing");
      }
    }
    for (const char* key : {"forward_prefetch_modules", "backward_prefetch_modules"}) {
      if (!r.has(key)) continue;
      throw ConfigError(file, fmt::format("/fsdp/{}", key),
                        fmt::format("FSDP1 prefetches one unit (forward_prefetch, "
                                    "backward_prefetch); {} is an FSDP2 (version 2) option",
                                    key));
    }
    if (f.float8_all_gather) {
      throw ConfigError(file, "/fsdp/float8_all_gather",
                        "torchao's float8 all-gather is an FSDP2 (version 2) extension "
                        "(fsdp_pre_all_gather / fsdp_post_all_gather); FSDP1 all-gathers its "
                        "FlatParameter in param_dtype");
    }
    if (f.wrap_embedding_and_head) {
      throw ConfigError(file, "/fsdp/wrap_embedding_and_head",
                        "groups the final norm and the LM head in one unit, as FSDP2's "
                        "fully_shard([norm, output]) does (torchtitan); FSDP1 wraps one module "
                        "per unit: use version 2");
    }
    for (const std::string& key : raf_keys) {
      if (!r.has(key)) continue;
      throw ConfigError(
          file, "/fsdp/" + key,
          fmt::format("FSDP1 derives it from sharding_strategy (SHARD_GRAD_OP keeps parameters "
                      "after forward); {} is an FSDP2 (version 2) option",
                      key));
    }
    return;
  }
  // FSDP2 (fully_shard): the strategies map onto reshard_after_forward and the device mesh.
  if (f.wrap_policy == fsdp::WrapPolicy::kBlockAndLinear) {
    throw ConfigError(file, "/fsdp/wrap_policy",
                      "block_and_linear (a unit per nn.Linear nested in its block's) is modelled "
                      "for FSDP1 (version 1) only");
  }
  if (f.sharding_strategy == ShardingStrategy::kNoShard) {
    throw ConfigError(
        file, "/fsdp/sharding_strategy",
        "FSDP2 has no NO_SHARD; use parallelism ddp (or replicate()) for full replicas");
  }
  // FSDPState._pre_backward: default_prefetch = len(_states_to_backward_prefetch) == 0, so even
  // set_modules_to_backward_prefetch([]) keeps the one-module prefetch; nothing turns it off.
  if (f.backward_prefetch != fsdp::BackwardPrefetch::kBackwardPre) {
    throw ConfigError(file, "/fsdp/backward_prefetch",
                      "FSDP2 always prefetches one module in backward, before the gradient "
                      "kernels (like BACKWARD_PRE): it has no BACKWARD_POST, and no setting turns "
                      "the prefetch off");
  }
  if (r.has("forward_prefetch_modules") && !f.forward_prefetch) {
    throw ConfigError(file, "/fsdp/forward_prefetch_modules",
                      "sizes the forward prefetch, which forward_prefetch false turns off; it "
                      "would do nothing");
  }
  if (limiter.has_value() && *limiter) {
    throw ConfigError(
        file, "/fsdp/limit_all_gathers",
        "FSDP2 has no rate limiter: its all-gather buffers are freed by stream events instead");
  }
  const bool zero2 = f.sharding_strategy == ShardingStrategy::kShardGradOp ||
                     f.sharding_strategy == ShardingStrategy::kHybridShardZero2;
  if (zero2) {
    // The strategy sets the blocks' reshard_after_forward to false; the root keeps its own.
    for (std::size_t i = 0; i < 2; ++i) {
      if (r.has(raf_keys[i]) && raf_value(i) != 0) {
        throw ConfigError(file, "/fsdp/" + raf_keys[i],
                          fmt::format("{} keeps parameters after forward; it contradicts {}",
                                      strategy, raf_keys[i]));
      }
    }
    f.reshard_after_forward = 0;
  }
  if (f.sharding_strategy == ShardingStrategy::kHybridShardZero2)
    f.sharding_strategy = ShardingStrategy::kHybridShard;
  if (f.sharding_strategy == ShardingStrategy::kShardGradOp)
    f.sharding_strategy = ShardingStrategy::kFullShard;
  const std::int32_t shard =
      hybrid(f.sharding_strategy) ? f.shard_group_size : cluster.world_size();
  // The shard group's own size reshards to the whole group: true, as PyTorch maps it.
  for (std::int32_t* value : {&f.reshard_after_forward, &f.root_reshard_after_forward}) {
    if (*value == shard && shard > 1) *value = 1;
  }
  if (f.last_unit_reshard_after_forward == shard && shard > 1)
    f.last_unit_reshard_after_forward = 1;
  for (std::size_t i = 0; i < raf_keys.size(); ++i) {
    const std::int32_t k = raf_value(i);
    if (k > 1 && (shard % k != 0 || k >= shard || !fsdp::shard_group_problem(cluster, k).empty())) {
      const std::string& key = raf_keys[i];
      throw ConfigError(file, "/fsdp/" + key,
                        fmt::format("{}={} must be a divisor of the shard group ({} ranks; {} "
                                    "itself is true) that tiles the {}-GPU nodes",
                                    key, k, shard, shard, cluster.gpus_per_node));
    }
  }
}

}  // namespace

fsdp::TrainingConfig training_from_json(const nlohmann::json& value, const std::string& file,
                                        fsdp::Parallelism parallelism) {
  JsonObjectReader r(value, file, "/training");
  fsdp::TrainingConfig t;
  t.parallelism = parallelism;
  t.global_batch = r.positive_int("global_batch");
  // Bounded so that a micro-batch's byte counts fit 64 bits (size_bounds.hpp).
  using size_bounds::kSeq;
  using size_bounds::kTokens;
  t.micro_batch = r.positive_int_at_most("micro_batch", kTokens, 1);
  t.seq_len = r.positive_int_at_most("seq_len", kSeq);
  // Checked against the model family by the scenario (t5 only).
  t.decoder_seq_len = r.positive_int_at_most("decoder_seq_len", kSeq, 0);
  if (t.micro_batch * std::max(t.seq_len, t.decoder_seq_len) > kTokens) {
    throw ConfigError(
        file, "/training/micro_batch",
        fmt::format("expected micro_batch x seq_len of at most {} tokens, found {} x {}", kTokens,
                    t.micro_batch, std::max(t.seq_len, t.decoder_seq_len)));
  }
  const std::string ac =
      r.choice("activation_checkpointing",
               {"none", "full", "selective", "selective_op", "attention"}, "none");
  t.activation_checkpointing = ac == "full"           ? fsdp::ActivationCheckpointing::kFull
                               : ac == "selective"    ? fsdp::ActivationCheckpointing::kSelective
                               : ac == "selective_op" ? fsdp::ActivationCheckpointing::kSelectiveOp
                               : ac == "attention"    ? fsdp::ActivationCheckpointing::kAttention
                                                      : fsdp::ActivationCheckpointing::kNone;
  t.checkpoint_every_n_blocks = r.positive_int32("checkpoint_every_n_blocks", 2);
  if (r.has("checkpoint_every_n_blocks") &&
      t.activation_checkpointing != fsdp::ActivationCheckpointing::kSelective) {
    throw ConfigError(file, "/training/checkpoint_every_n_blocks",
                      fmt::format("picks the blocks activation_checkpointing selective wraps; "
                                  "with {} it would do nothing",
                                  ac));
  }
  if (r.has("checkpoint_early_stop") && (ac == "none" || ac == "attention")) {
    throw ConfigError(file, "/training/checkpoint_early_stop",
                      fmt::format("stops a whole block's recompute early; with "
                                  "activation_checkpointing {} no block is recomputed whole, so "
                                  "it would do nothing",
                                  ac));
  }
  // DeepSpeed checkpoints with its own reentrant implementation, which re-runs whole blocks.
  const bool deepspeed = parallelism == fsdp::Parallelism::kDeepSpeedZero3;
  if (deepspeed && t.activation_checkpointing == fsdp::ActivationCheckpointing::kSelectiveOp) {
    throw ConfigError(file, "/training/activation_checkpointing",
                      "expected none, full, selective or attention with parallelism "
                      "deepspeed_zero3, found selective_op: an op policy needs PyTorch's "
                      "non-reentrant checkpoint, and DeepSpeed's is reentrant");
  }
  t.checkpoint_early_stop = r.boolean("checkpoint_early_stop", !deepspeed);
  if (deepspeed && t.checkpoint_early_stop) {
    throw ConfigError(file, "/training/checkpoint_early_stop",
                      "expected false or absent with parallelism deepspeed_zero3, found true: "
                      "DeepSpeed's activation checkpointing is reentrant and re-runs whole "
                      "blocks");
  }
  t.optimizer = r.choice("optimizer", {"adamw", "sgd"}, "adamw") == "sgd" ? fsdp::Optimizer::kSgd
                                                                          : fsdp::Optimizer::kAdamW;
  const std::string impl = r.choice("optimizer_impl", {"foreach", "fused", "for_loop"}, "foreach");
  t.optimizer_impl = impl == "fused"      ? fsdp::OptimizerImpl::kFused
                     : impl == "for_loop" ? fsdp::OptimizerImpl::kForLoop
                                          : fsdp::OptimizerImpl::kForeach;
  t.flash_attention = r.boolean("flash_attention", true);
  if (r.has("flash_kernel")) {
    if (!t.flash_attention) {
      throw ConfigError(file, "/training/flash_kernel",
                        "flash_kernel needs flash_attention true (unfused attention runs no "
                        "fused kernel)");
    }
    const std::string kernel =
        r.choice("flash_kernel", {"flash2", "flash1", "triton", "cudnn"}, "flash2");
    t.flash_kernel = kernel == "flash1"   ? FlashKernel::kFlash1
                     : kernel == "triton" ? FlashKernel::kTriton
                     : kernel == "cudnn"  ? FlashKernel::kCudnn
                                          : FlashKernel::kFlash2;
  }
  const std::string loss = r.choice(
      "loss",
      {"cross_entropy", "cross_entropy_no_upcast", "fused_cross_entropy", "compiled_cross_entropy"},
      "cross_entropy");
  t.loss = loss == "fused_cross_entropy"       ? LossKernel::kFusedCrossEntropy
           : loss == "compiled_cross_entropy"  ? LossKernel::kCompiledCrossEntropy
           : loss == "cross_entropy_no_upcast" ? LossKernel::kCrossEntropy
                                               : LossKernel::kCrossEntropyFp32;
  if (r.has("rms_norm")) {
    t.rms_norm = r.choice("rms_norm", {"fused", "eager"}) == "eager" ? RmsNormKernel::kEager
                                                                     : RmsNormKernel::kFused;
  }
  const std::string kept =
      r.choice("logits_kept_by_loop", {"none", "compute_dtype", "fp32"}, "none");
  t.logits_kept_by_loop = kept == "compute_dtype" ? LogitsKeptByLoop::kComputeDtype
                          : kept == "fp32"        ? LogitsKeptByLoop::kFp32
                                                  : LogitsKeptByLoop::kNone;
  if (t.logits_kept_by_loop == LogitsKeptByLoop::kFp32 && t.loss != LossKernel::kCrossEntropyFp32) {
    throw ConfigError(file, "/training/logits_kept_by_loop",
                      fmt::format("fp32 needs loss cross_entropy (the upcast makes the fp32 "
                                  "logits), found loss {}",
                                  loss));
  }
  if (r.has("loss_chunks")) {
    t.loss_chunks = static_cast<std::int32_t>(r.positive_int_at_most("loss_chunks", kTokens));
    const std::int64_t tokens = t.micro_batch * t.seq_len;
    if (tokens % t.loss_chunks != 0) {
      throw ConfigError(file, "/training/loss_chunks",
                        fmt::format("expected a divisor of the micro-batch's {} tokens "
                                    "(micro_batch x seq_len; ChunkedLossWrapper splits them into "
                                    "equal chunks), found {}",
                                    tokens, t.loss_chunks));
    }
    if (t.logits_kept_by_loop != LogitsKeptByLoop::kNone) {
      throw ConfigError(file, "/training/loss_chunks",
                        fmt::format("the chunked loss makes the logits inside the loss, chunk by "
                                    "chunk, so the training loop has none to keep; found "
                                    "logits_kept_by_loop {}",
                                    kept));
    }
  }
  const std::string sync = r.choice("host_sync", {"step", "micro_batch", "none"}, "step");
  t.host_sync = sync == "micro_batch" ? fsdp::HostSync::kMicroBatch
                : sync == "none"      ? fsdp::HostSync::kNone
                                      : fsdp::HostSync::kStep;
  t.no_sync = r.boolean("no_sync", false);
  t.clip_grad_norm = r.boolean("clip_grad_norm", false);
  t.offload_activations = r.boolean("offload_activations", false);
  t.unpad_attention = r.boolean("unpad_attention", false);
  if (t.unpad_attention && !t.flash_attention) {
    throw ConfigError(file, "/training/unpad_attention",
                      "unpads the tokens around a fused attention kernel: needs flash_attention "
                      "true");
  }
  t.param_storage_dtype = dtype_key(r, "param_storage_dtype", "fp32");
  // The parameters' dtype, the states' default, is no setting (a sweep may name it); bf16 is
  // torchtitan's fused_opt_states_bf16, beside fp32 parameters, for the fused AdamW kernel's
  // mixed-precision path only (its config check refuses the rest).
  if (r.has("optimizer_state_dtype")) {
    const bool bf16 = r.choice("optimizer_state_dtype", {"bf16", "fp32"}) == "bf16";
    const Dtype stated = bf16 ? Dtype::kBf16 : Dtype::kFp32;
    if (stated != t.param_storage_dtype && t.param_storage_dtype != Dtype::kFp32) {
      throw ConfigError(file, "/training/optimizer_state_dtype",
                        fmt::format("expected {}, the parameters' dtype, which AdamW's states "
                                    "take, found {}: other states are modelled as bf16 beside "
                                    "fp32 parameters only (torchtitan's fused_opt_states_bf16)",
                                    dtype_name(t.param_storage_dtype), bf16 ? "bf16" : "fp32"));
    }
    if (bf16 && t.param_storage_dtype == Dtype::kFp32 &&
        (t.optimizer != fsdp::Optimizer::kAdamW ||
         t.optimizer_impl != fsdp::OptimizerImpl::kFused)) {
      throw ConfigError(file, "/training/optimizer_state_dtype",
                        "bf16 states beside fp32 parameters need AdamW's fused CUDA kernel "
                        "(FusedAdamMathFunctorMP; torchtitan's fused_opt_states_bf16): set "
                        "optimizer adamw and optimizer_impl fused");
    }
    if (stated != t.param_storage_dtype) t.optimizer_state_dtype = stated;
  }
  if (r.has("autocast_dtype")) t.autocast_dtype = dtype_key(r, "autocast_dtype", "bf16");
  if (r.has("matmul_dtype")) {
    t.matmul_dtype =
        *parse_dtype(r.choice("matmul_dtype", {"fp8", "bf16", "fp16", "fp32"}, "bf16"));
  }
  if (t.float8_linears() && deepspeed) {
    throw ConfigError(file, "/training/matmul_dtype",
                      "fp8 is not modelled for parallelism deepspeed_zero3: DeepSpeed 0.3 (2021) "
                      "predates float8 training (Transformer Engine, 2022; torchao, 2024)");
  }
  if (r.has("float8_linear")) {
    if (!t.float8_linears()) {
      throw ConfigError(file, "/training/float8_linear",
                        "float8_linear needs matmul_dtype fp8 (it says whose float8 linears run)");
    }
    t.float8_linear = r.choice("float8_linear", {"torchao", "transformer_engine"}, "torchao") ==
                              "transformer_engine"
                          ? Float8LinearImpl::kTransformerEngine
                          : Float8LinearImpl::kTorchao;
  }
  t.compiled = r.boolean("compiled", false);
  if (t.compiled && deepspeed) {
    throw ConfigError(file, "/training/compiled",
                      "not modelled for parallelism deepspeed_zero3: DeepSpeed 0.3 (2021) "
                      "predates torch.compile (PyTorch 2.0, 2023)");
  }
  if (t.compiled && r.has("checkpoint_early_stop")) {
    // compiled compiles each block around its checkpoint, torchtitan's order (apply_ac, then
    // apply_compile): the checkpoint is part of the compiled graph.
    throw ConfigError(file, "/training/checkpoint_early_stop",
                      "does nothing under torch.compile as modelled (each block compiled around "
                      "its checkpoint, torchtitan's order): the checkpoint becomes part of the "
                      "compiled graph, whose backward re-runs only what it reads, whatever the "
                      "eager checkpoint's early stop would do (leave it out: --set "
                      "training.checkpoint_early_stop=null)");
  }
  t.allow_tf32 = r.boolean("allow_tf32", false);
  r.finish();
  return t;
}

namespace {

// The mixed-precision dtypes DDP and DeepSpeed read from the fsdp section; any other key there is
// an error. An empty reduce_fallback defaults reduce_dtype to param_dtype.
void read_dtypes_only(const nlohmann::json& fsdp, const std::string& file,
                      const std::string& parallelism, const std::string& param_fallback,
                      const std::string& reduce_fallback, fsdp::FsdpConfig& f) {
  JsonObjectReader r(fsdp, file, "/fsdp");
  f.param_dtype = dtype_key(r, "param_dtype", param_fallback);
  f.reduce_dtype =
      dtype_key(r, "reduce_dtype",
                reduce_fallback.empty() ? std::string(dtype_name(f.param_dtype)) : reduce_fallback);
  for (const auto& [key, v] : fsdp.items()) {
    if (key != "param_dtype" && key != "reduce_dtype") {
      throw ConfigError(file, "/fsdp/" + key,
                        fmt::format("has no meaning with parallelism {} (only param_dtype, "
                                    "reduce_dtype)",
                                    parallelism));
    }
  }
}

// The `deepspeed` section: DeepSpeed's zero_optimization key names (constants.py).
fsdp::DeepSpeedZero3Config deepspeed_from_json(const nlohmann::json& value,
                                               const std::string& file) {
  JsonObjectReader r(value, file, "/deepspeed");
  r.choice("version", {"0.3"}, "0.3");
  fsdp::DeepSpeedZero3Config c;
  // Element counts: bounded as memory amounts are (size_bounds.hpp), so that a bucket's bytes
  // (x 2 for DeepSpeed's two contiguous-gradient buffers) stay within 64 bits.
  const auto elements = [&r](const std::string& key, std::int64_t fallback) {
    return r.positive_int_at_most(key, size_bounds::kMemoryBytes, fallback);
  };
  c.param_persistence_threshold =
      elements("stage3_param_persistence_threshold", c.param_persistence_threshold);
  c.prefetch_bucket_size = elements("stage3_prefetch_bucket_size", c.prefetch_bucket_size);
  c.max_live_parameters = elements("stage3_max_live_parameters", c.max_live_parameters);
  c.max_reuse_distance = elements("stage3_max_reuse_distance", c.max_reuse_distance);
  c.reduce_bucket_size = elements("reduce_bucket_size", c.reduce_bucket_size);
  c.contiguous_gradients = r.boolean("contiguous_gradients", c.contiguous_gradients);
  c.register_external_embedding =
      r.boolean("register_external_embedding", c.register_external_embedding);
  r.finish();
  return c;
}

}  // namespace

fsdp::FsdpConfig parallel_config_from_json(const nlohmann::json* fsdp, const nlohmann::json* ddp,
                                           const nlohmann::json* deepspeed, const std::string& file,
                                           fsdp::Parallelism parallelism,
                                           const hardware::ClusterSpec& cluster) {
  fsdp::FsdpConfig f;
  f.shard_group_size = cluster.gpus_per_node;
  if (parallelism != fsdp::Parallelism::kDdp && ddp != nullptr)
    throw ConfigError(file, "/ddp", "the ddp section needs \"parallelism\": \"ddp\"");
  if (parallelism != fsdp::Parallelism::kDeepSpeedZero3 && deepspeed != nullptr) {
    throw ConfigError(file, "/deepspeed",
                      "the deepspeed section needs \"parallelism\": \"deepspeed_zero3\"");
  }
  if (parallelism == fsdp::Parallelism::kDdp) {
    // DDP reads only the mixed-precision dtypes from the fsdp section (autocast, compress hook).
    f.reduce_dtype = Dtype::kFp32;
    if (fsdp != nullptr) read_dtypes_only(*fsdp, file, "ddp", "bf16", "fp32", f);
    if (ddp != nullptr) {
      JsonObjectReader r(*ddp, file, "/ddp");
      // Absent: DistributedDataParallel's default, None (FsdpConfig::ddp_bucket_cap_mb).
      if (r.has("bucket_cap_mb")) {
        f.ddp_bucket_cap_mb = r.positive_number_at_most(
            "bucket_cap_mb", static_cast<double>(size_bounds::kMemoryMiB));
      }
      f.ddp_broadcast_buffers = r.boolean("broadcast_buffers", true);
      f.ddp_gradient_as_bucket_view = r.boolean("gradient_as_bucket_view", false);
      r.finish();
    }
    return f;
  }
  if (parallelism == fsdp::Parallelism::kDeepSpeedZero3) {
    // fp16 (or bf16) modules: the parameters, their gradients and the all-reduce in that dtype.
    f.param_dtype = Dtype::kFp16;
    f.reduce_dtype = Dtype::kFp16;
    if (fsdp != nullptr) {
      read_dtypes_only(*fsdp, file, "deepspeed_zero3", "fp16", "", f);
      if (f.param_dtype == Dtype::kFp32 || f.reduce_dtype != f.param_dtype) {
        throw ConfigError(file, "/fsdp",
                          "DeepSpeed ZeRO-3 trains fp16 or bf16 modules and reduces gradients in "
                          "that dtype: param_dtype fp16 or bf16, reduce_dtype equal to it");
      }
    }
    if (deepspeed != nullptr) f.deepspeed = deepspeed_from_json(*deepspeed, file);
    return f;
  }
  if (fsdp == nullptr) return f;
  JsonObjectReader r(*fsdp, file, "/fsdp");
  parse_fsdp_section(r, file, f, cluster);
  r.finish();
  return f;
}

}  // namespace fsdpsim::app
