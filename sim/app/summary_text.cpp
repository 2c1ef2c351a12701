#include "sim/app/summary_text.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "models/workload.hpp"
#include "sim/app/calibration_json.hpp"
#include "sim/app/retries_text.hpp"

namespace fsdpsim::app {
namespace {

const char* family_name(models::ModelFamily f) {
  switch (f) {
    case models::ModelFamily::kGpt:
      return "gpt";
    case models::ModelFamily::kMpt:
      return "mpt";
    case models::ModelFamily::kLlama:
      return "llama";
    case models::ModelFamily::kT5:
      return "t5";
    case models::ModelFamily::kCustom:
      return "custom";
  }
  return "?";
}

// A parameter count at a scale that shows it: "8.03 B", "12.35 M" for a small model, where
// "0.01 B" would hide it, and the count itself below a million.
std::string parameters_text(std::int64_t count) {
  const auto n = static_cast<double>(count);
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{}", count);
}

std::string model_shape(const models::TransformerSpec& m) {
  if (m.family == models::ModelFamily::kT5) {
    return fmt::format("{} encoder + {} decoder layers, d_model {}", m.n_layers, m.n_decoder_layers,
                       m.d_model);
  }
  if (m.family == models::ModelFamily::kCustom) {
    std::int64_t layers = 0;
    for (const models::CustomLayerSpec& l : m.custom_layers) layers += l.count;
    return fmt::format("{} listed layers", layers);
  }
  return fmt::format("{} layer{}, d_model {}", m.n_layers, m.n_layers == 1 ? "" : "s", m.d_model);
}

const char* prefetch_name(fsdp::BackwardPrefetch p) {
  switch (p) {
    case fsdp::BackwardPrefetch::kBackwardPre:
      return "BACKWARD_PRE";
    case fsdp::BackwardPrefetch::kBackwardPost:
      return "BACKWARD_POST";
    case fsdp::BackwardPrefetch::kNone:
      return "none";
  }
  return "?";
}

const char* strategy_name(fsdp::ShardingStrategy st) {
  switch (st) {
    case fsdp::ShardingStrategy::kFullShard:
      return "FULL_SHARD";
    case fsdp::ShardingStrategy::kShardGradOp:
      return "SHARD_GRAD_OP";
    case fsdp::ShardingStrategy::kNoShard:
      return "NO_SHARD";
    case fsdp::ShardingStrategy::kHybridShard:
      return "HYBRID_SHARD";
    case fsdp::ShardingStrategy::kHybridShardZero2:
      return "_HYBRID_SHARD_ZERO2";
  }
  return "?";
}

const char* checkpointing_name(fsdp::ActivationCheckpointing ac) {
  switch (ac) {
    case fsdp::ActivationCheckpointing::kNone:
      return "none";
    case fsdp::ActivationCheckpointing::kFull:
      return "full";
    case fsdp::ActivationCheckpointing::kSelective:
      return "selective";
    case fsdp::ActivationCheckpointing::kAttention:
      return "attention";
    case fsdp::ActivationCheckpointing::kSelectiveOp:
      return "selective_op";
  }
  return "?";
}

std::string parallelism_line(const Scenario& s) {
  const fsdp::FsdpConfig& f = s.fsdp;
  if (s.training.parallelism == fsdp::Parallelism::kDdp) {
    const std::string buckets = f.ddp_bucket_cap_mb ? fmt::format("{} MiB", *f.ddp_bucket_cap_mb)
                                                    : std::string("25 MiB (the first 1 MiB)");
    // Only a model with buffers has anything to broadcast.
    const std::string buffers = !models::has_buffers(s.model) ? std::string()
                                : f.ddp_broadcast_buffers
                                    ? std::string(", buffers broadcast before synced forwards")
                                    : std::string(", buffers not broadcast");
    return fmt::format("ddp        buckets {}{}, autocast {}, all-reduce {}{}", buckets,
                       f.ddp_gradient_as_bucket_view ? " (.grad as their views)" : "",
                       dtype_name(f.param_dtype), dtype_name(f.reduce_dtype), buffers);
  }
  if (s.training.parallelism == fsdp::Parallelism::kDeepSpeedZero3) {
    const fsdp::DeepSpeedZero3Config& d = f.deepspeed;
    return fmt::format(
        "deepspeed  ZeRO-3 (DeepSpeed 0.3), {}, persistence threshold {}, prefetch bucket {}, "
        "max live {}, max reuse distance {}, reduce bucket {}{}",
        dtype_name(f.param_dtype), d.param_persistence_threshold, d.prefetch_bucket_size,
        d.max_live_parameters, d.max_reuse_distance, d.reduce_bucket_size,
        d.register_external_embedding ? ", embedding external to the model" : "");
  }
  const bool hybrid = f.sharding_strategy == fsdp::ShardingStrategy::kHybridShard ||
                      f.sharding_strategy == fsdp::ShardingStrategy::kHybridShardZero2;
  std::string line;
  if (f.version == 1) {
    // PyTorch runs NO_SHARD on one GPU (_init_core_state), whichever strategy was asked for.
    const bool one_gpu = s.hardware.cluster.world_size() == 1 &&
                         f.sharding_strategy != fsdp::ShardingStrategy::kNoShard;
    line = fmt::format("fsdp       v1, {}{}, backward_prefetch {}, limit_all_gathers {}",
                       strategy_name(f.sharding_strategy),
                       one_gpu  ? " (run as NO_SHARD on one GPU)"
                       : hybrid ? fmt::format(" (shard groups of {})", f.shard_group_size)
                                : "",
                       prefetch_name(f.backward_prefetch), f.limit_all_gathers ? "on" : "off");
  } else {
    // FSDP2 has no strategies: a mesh and reshard_after_forward (SHARD_GRAD_OP was read as
    // false), as fully_shard takes them.
    const auto raf = [](std::int32_t k) {
      return k == 0 ? std::string("false") : k == 1 ? std::string("true") : std::to_string(k);
    };
    // FSDP2 has no BackwardPrefetch either: it always prefetches backward_prefetch_modules.
    line = fmt::format(
        "fsdp       v2, {}, reshard_after_forward {}, backward prefetch {} module{} ahead",
        hybrid ? fmt::format("HSDP mesh (shard groups of {})", f.shard_group_size)
               : std::string("sharded over all GPUs"),
        raf(f.reshard_after_forward), f.backward_prefetch_modules,
        f.backward_prefetch_modules > 1 ? "s" : "");
    if (f.last_unit_reshard_after_forward.value_or(f.reshard_after_forward) !=
        f.reshard_after_forward)
      line += ", last unit's " + raf(*f.last_unit_reshard_after_forward);
    if (f.root_reshard_after_forward != 0) line += ", root's " + raf(f.root_reshard_after_forward);
    if (f.wrap_embedding_and_head) line += ", embedding and head units";
  }
  if (f.forward_prefetch) line += ", forward_prefetch";
  if (f.forward_prefetch && f.forward_prefetch_modules > 1)
    line += fmt::format(" ({} modules ahead)", f.forward_prefetch_modules);
  if (f.cpu_offload) line += ", cpu_offload";
  if (f.float8_all_gather)
    line += f.precompute_float8_scale ? ", float8 all-gather (precomputed scales)"
                                      : ", float8 all-gather";
  line +=
      fmt::format(", param {} / reduce {}", dtype_name(f.param_dtype), dtype_name(f.reduce_dtype));
  if (f.buffer_dtype) line += fmt::format(" / buffer {}", dtype_name(*f.buffer_dtype));
  return line;
}

std::string share(Seconds part, Seconds whole) {
  return fmt::format("{:9.3f} s  {:5.1f}%", part.value(), 100.0 * part.value() / whole.value());
}

}  // namespace

std::string summary_text(const Scenario& s, const fsdp::SimulationOutput& output) {
  const fsdp::StepResult& r = output.result;
  const auto& c = s.hardware.cluster;
  const auto& t = s.training;
  const fsdp::StepBreakdown& b = r.breakdown;
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line(fmt::format("scenario   {}{}", s.name, s.description.empty() ? "" : " — " + s.description));
  line(fmt::format("model      {} ({}): {} parameters, {}", s.model.name,
                   family_name(s.model.family), parameters_text(models::parameter_count(s.model)),
                   model_shape(s.model)));
  line(fmt::format("cluster    {} x {} ({} node{} x {} GPU{})", c.world_size(), c.gpu.name, c.nodes,
                   c.nodes == 1 ? "" : "s", c.gpus_per_node, c.gpus_per_node == 1 ? "" : "s"));
  line(fmt::format(
      "training   global batch {}, micro batch {} x {} accumulation, seq {}, checkpointing "
      "{}{}{}{}{}{}{}{}{}{}",
      t.global_batch, t.micro_batch, r.micro_batches,
      t.decoder_seq_len > 0 ? fmt::format("{} (decoder {})", t.seq_len, t.decoder_seq_len)
                            : fmt::format("{}", t.seq_len),
      checkpointing_name(t.activation_checkpointing),
      t.offload_activations ? ", activations offloaded to the host" : "",
      t.float8_linears() ? ", float8 linears" : "", t.compiled ? ", torch.compile" : "",
      t.clip_grad_norm ? ", gradient clipping" : "",
      t.unpad_attention ? ", unpadded attention" : "",
      t.optimizer_state_dtype ? ", bf16 AdamW states" : "",
      t.logits_kept_by_loop == LogitsKeptByLoop::kNone   ? ""
      : t.logits_kept_by_loop == LogitsKeptByLoop::kFp32 ? ", fp32 logits kept by the loop"
                                                         : ", logits kept by the loop",
      t.loss_chunks > 0 ? fmt::format(", loss in {} chunks", t.loss_chunks) : "",
      t.host_sync == fsdp::HostSync::kStep         ? ""
      : t.host_sync == fsdp::HostSync::kMicroBatch ? ", host waits for the GPU each micro-batch"
                                                   : ", host never waits for the GPU"));
  line(parallelism_line(s));
  if (c.gpu.calibration != nullptr) line(calibration_usage_line(c));
  line("");
  line(fmt::format("step time            {:.4f} s", r.step_time.value()));
  line(fmt::format("throughput           {:.1f} tokens/s/GPU  ({:.0f} tokens/s in all)",
                   r.tokens_per_s_per_gpu, r.tokens_per_s_per_gpu * c.world_size()));
  // Custom models count samples; tokens = samples x seq_len (seq_len 1: the same number).
  if (s.model.family == models::ModelFamily::kCustom) {
    const double samples = r.tokens_per_s_per_gpu / static_cast<double>(t.seq_len);
    line(fmt::format("                     {:.1f} samples/s/GPU  ({:.0f} samples/s in all)",
                     samples, samples * c.world_size()));
  }
  line(fmt::format("TFLOPS/GPU           model {:.1f}, hardware {:.1f}", r.model_tflops_per_gpu,
                   r.hardware_tflops_per_gpu));
  line(fmt::format("MFU / HFU            {:.1f}% / {:.1f}%  (dense {} peak {:.0f} TFLOP/s)",
                   100.0 * r.mfu, 100.0 * r.hfu, dtype_name(t.gemm_peak_dtype(s.fsdp.param_dtype)),
                   c.gpu.peak(t.gemm_peak_dtype(s.fsdp.param_dtype)).value() / 1e12));
  line("");
  line(
      "where the time goes (wall time: compute stream busy, else collective only, else host work, "
      "else idle)");
  line(fmt::format("  forward            {}", share(b.forward, r.step_time)));
  line(fmt::format("  backward           {}", share(b.backward, r.step_time)));
  if (b.recompute.value() > 0.0)
    line(fmt::format("  recompute          {}", share(b.recompute, r.step_time)));
  line(fmt::format("  optimizer          {}", share(b.optimizer, r.step_time)));
  line(fmt::format("  exposed comm       {}", share(b.exposed_communication, r.step_time)));
  if (b.host_work.value() > 0.0)
    line(fmt::format("  host work          {}", share(b.host_work, r.step_time)));
  line(fmt::format("  idle               {}", share(b.idle, r.step_time)));
  // The share of the collectives' busy time that compute hid: exposed comm is the rest.
  const double busy = b.communication_busy.value();
  const double hidden = busy > 0.0 ? 1.0 - b.exposed_communication.value() / busy : 0.0;
  line(fmt::format("  (collectives busy  {:9.3f} s in all, {:.0f}% of it overlapped with compute)",
                   busy, 100.0 * std::clamp(hidden, 0.0, 1.0)));
  if (!r.rank_classes.empty()) {
    line(fmt::format("  (rank {}, of the largest class below)", r.breakdown_rank));
    line("");
    line(
        "ranks (hardware.stragglers, node_speed_spread or the calibration's slowest ranks; ranks "
        "that behave alike are simulated once)");
    line(fmt::format(
        "  first rank  ranks  compute  host   compute busy  exposed comm  host work      idle  "
        "waits for others  peak {}",
        r.models_reserved ? "reserved" : "allocated"));
    for (const fsdp::RankClassResult& k : r.rank_classes) {
      const fsdp::StepBreakdown& kb = k.breakdown;
      line(fmt::format(
          "  {:10d}  {:5d}  {:7.2f}  {:4.2f}  {:10.3f} s  {:10.3f} s  {:7.3f} s  {:6.3f} s  "
          "{:14.3f} s  {:9.2f} GiB{}",
          k.first_rank, k.ranks, k.compute_speed, k.host_speed, kb.compute_busy().value(),
          kb.exposed_communication.value(), kb.host_work.value(), kb.idle.value(),
          k.waits_for_others.value(),
          to_gib(r.models_reserved ? k.peak_reserved : k.peak_allocated),
          k.out_of_memory ? "  OOM" : ""));
    }
  }
  line("");
  line(r.rank_classes.empty()
           ? "memory per GPU"
           : fmt::format("memory per GPU (rank {}, the one needing the most)", r.memory_rank));
  line(fmt::format("  peak allocated     {:7.2f} GiB", to_gib(r.memory.peak_allocated)));
  line(fmt::format("  peak active        {:7.2f} GiB", to_gib(r.memory.peak_active)));
  if (r.models_reserved) {
    line(fmt::format(
        "  peak reserved      {:7.2f} GiB  (caching allocator; at the busiest instant of that peak "
        "{:.2f} GiB of it was cached but unused; {})",
        to_gib(r.reserved.peak_reserved), to_gib(r.reserved.fragmentation_at_peak),
        cuda_malloc_retries(r.reserved.alloc_retries)));
  } else {
    line("  peak reserved      not modelled (allocator.enabled = false); at least the peak active");
  }
  line(fmt::format("  usable             {:7.2f} GiB", to_gib(r.usable_memory)));
  std::string categories;
  for (std::size_t i = 0; i < memory::kMemoryCategoryCount; ++i) {
    categories += fmt::format("{}{} {:.2f}", i == 0 ? "" : ", ",
                              memory::category_name(static_cast<memory::MemoryCategory>(i)),
                              to_gib(r.memory.peak_active_by_category[i]));
  }
  line(fmt::format("  at peak active (GiB) {}", categories));
  line("");
  line(r.out_of_memory
           ? fmt::format("status               OUT OF MEMORY: {}", r.oom_reason)
           : fmt::format("status               ok: fits ({:.1f} GiB to spare){}",
                         to_gib(r.usable_memory - r.reported_peak_reserved()),
                         r.reserved.alloc_retries == 0
                             ? std::string()
                             : fmt::format(" only with {} per step (see explain)",
                                           cuda_malloc_retries(r.reserved.alloc_retries))));
  return out;
}

}  // namespace fsdpsim::app
