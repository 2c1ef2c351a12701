#include "sim/fsdp/step_builder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "hardware/collective_cost.hpp"
#include "hardware/roofline.hpp"
#include "sim/fsdp/process_groups.hpp"
#include "sim/fsdp/step_size_bound.hpp"

namespace fsdpsim::fsdp {

using engine::LaunchSpec;
using engine::OpId;
using engine::OpKind;
using engine::StreamId;
using engine::TensorId;
using memory::MemoryCategory;

namespace {

constexpr std::uint8_t tag(Phase p) { return static_cast<std::uint8_t>(p); }

// How many forward kernels re-run when a checkpoint recomputes the whole layer. With early stop
// the recompute ends at models::Layer::recompute_early_stop_kernel; a torchao Float8Linear GEMM
// runs inside an autograd.Function, whose ctx.save_for_backward packs after its forward, so that
// GEMM still runs and only what follows it is skipped. A stop kernel a rewrite removed (fused
// under torch.compile) leaves the whole forward.
std::size_t recompute_end(const models::Layer& l, bool early_stop) {
  if (!early_stop || l.recompute_early_stop_kernel.empty()) return l.forward.size();
  for (std::size_t i = 0; i < l.forward.size(); ++i) {
    if (l.forward[i].name == l.recompute_early_stop_kernel)
      return l.forward[i].kernel.dtype == Dtype::kFp8 ? i + 1 : i;
  }
  return l.forward.size();
}

}  // namespace

StepBuilder::StepBuilder(const ScheduleInput& input)
    : in_(input),
      w_(*input.workload),
      compute_(b_.add_stream("compute")),
      launch_cost_(to_sim_time(input.cluster.kernel_launch_overhead)) {
  if (compute_ != kComputeStream)
    throw std::logic_error("the compute stream must be created first");
  std::int32_t blocks = 0;
  // DeepSpeed checkpoints with its own reentrant checkpoint, which re-runs whole blocks. Under
  // torch.compile (each block compiled around its checkpoint, torchtitan's order: apply_ac, then
  // apply_compile), torch.utils.checkpoint lowers to the tag_activation_checkpoint op inlined into
  // the joint graph, and AOTAutograd's partitioner copies into the backward only the recomputed
  // nodes the backward reads (torch/_functorch/partitioners.py; pytorch/pytorch#192845 describes
  // the lowering): an early stop whatever the eager flag says. (DeepSpeed is never compiled.)
  const bool early_stop =
      in_.training.compiled || (in_.training.checkpoint_early_stop &&
                                in_.training.parallelism != Parallelism::kDeepSpeedZero3);
  for (const models::Layer& l : w_.layers) {
    block_number_.push_back(l.kind == models::LayerKind::kBlock ? blocks++ : -1);
    recompute_end_.push_back(recompute_end(l, early_stop));
  }
  if (in_.training.activation_checkpointing == ActivationCheckpointing::kSelectiveOp) {
    for (const models::Layer& l : w_.layers)
      op_plans_.push_back(models::torchtitan_op_checkpoint_plan(l));
  }
  price_layer_kernels();
}

void StepBuilder::begin_step(Schedule& schedule) {
  schedule.measured_first_op = static_cast<engine::OpId>(b_.program().ops.size());
  schedule.measured_first_cpu_step = b_.program().cpu.size();
  schedule.measured_first_tensor = static_cast<engine::TensorId>(b_.program().tensors.size());
  model_flops_ = Flops(0.0);
  hardware_flops_ = Flops(0.0);
  inter_node_bytes_ = Bytes(0);
}

void StepBuilder::host_waits_for_compute(std::string_view reason) {
  b_.cpu_synchronize(b_.record_event(compute_), reason);
}

void StepBuilder::finish_sharded(Schedule& out, const std::vector<FsdpUnit>& units) {
  std::int64_t shard_numel = 0;
  for (const FsdpUnit& u : units) shard_numel += u.shard_numel;
  if (!in_.fsdp.cpu_offload) {
    const Dtype storage = in_.training.param_storage_dtype;
    out.baseline[static_cast<std::size_t>(MemoryCategory::kParameters)] =
        elements(shard_numel, storage);
    out.baseline[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = Bytes(
        optimizer_state_bytes_per_parameter(in_.training.optimizer, in_.training.state_dtype()) *
        shard_numel);
  }
  out.units = units;
  finish(out);
}

bool StepBuilder::hybrid() const {
  return in_.fsdp.sharding_strategy == ShardingStrategy::kHybridShard ||
         in_.fsdp.sharding_strategy == ShardingStrategy::kHybridShardZero2;
}

std::int32_t StepBuilder::shard_group_size() const {
  if (!hybrid()) return in_.cluster.world_size();
  return in_.fsdp.shard_group_size > 0 ? in_.fsdp.shard_group_size : in_.cluster.gpus_per_node;
}

ProcessGroup StepBuilder::add_shard_group() {
  return add_process_group(hybrid() ? "nccl:shard" : "nccl:world", shard_group_size(), 1);
}

ProcessGroup StepBuilder::add_replicate_group() {
  if (!hybrid()) return ProcessGroup{};
  const std::int32_t shard = shard_group_size();
  return add_process_group("nccl:replicate", in_.cluster.world_size() / shard, shard);
}

Dtype StepBuilder::buffer_dtype() const {
  switch (in_.training.parallelism) {
    case Parallelism::kDdp:
      return Dtype::kFp32;
    case Parallelism::kDeepSpeedZero3:
      return in_.fsdp.param_dtype;
    case Parallelism::kFsdp:
      return in_.fsdp.buffer_dtype.value_or(in_.training.param_storage_dtype);
  }
  throw std::logic_error("fsdp: buffer_dtype got an unknown Parallelism");
}

void StepBuilder::finish(Schedule& out) {
  std::int64_t buffer_numel = 0;
  for (const models::Layer& l : w_.layers) {
    for (const std::int64_t n : l.buffers) buffer_numel += n;
  }
  out.baseline[static_cast<std::size_t>(MemoryCategory::kParameters)] +=
      elements(buffer_numel, buffer_dtype());
  out.model_flops = model_flops_;
  out.hardware_flops = hardware_flops_;
  out.inter_node_bytes = inter_node_bytes_;
  out.program = b_.take();
}

ProcessGroup StepBuilder::add_process_group(std::string name, std::int32_t size,
                                            std::int32_t stride) {
  return ProcessGroup{b_.add_channel(std::move(name), engine::RankGroups{size, stride}),
                      comm_group(in_.cluster, size, stride)};
}

StepBuilder::KernelDurations StepBuilder::price(const Kernel& kernel) const {
  // NCCL's channels take SMs from kernels that overlap a collective.
  return {to_sim_time(hardware::kernel_time(in_.cluster.gpu, kernel)),
          to_sim_time(hardware::kernel_time_sharing_sms(in_.cluster.gpu, kernel,
                                                        in_.cluster.nccl_channels))};
}

void StepBuilder::price_layer_kernels() {
  if (in_.cluster.gpu.calibration != nullptr) return;
  for (const models::Layer& l : w_.layers) {
    forward_durations_.emplace_back();
    for (const models::NamedKernel& k : l.forward)
      forward_durations_.back().push_back(
          price([&] { return l.name + ".fwd." + k.name; }, k.kernel));
    backward_durations_.emplace_back();
    for (const models::NamedKernel& k : l.backward)
      backward_durations_.back().push_back(
          price([&] { return l.name + ".bwd." + k.name; }, k.kernel));
  }
}

void StepBuilder::hooked_kernel(std::size_t layer, const char* pass, const models::NamedKernel& k,
                                const KernelDurations* durations, Phase phase, std::int32_t group) {
  if (kernel_hooks_ != nullptr) kernel_hooks_->before_kernel(layer, k, phase);
  kernel_name_.assign(w_.layers[layer].name)
      .append(1, '.')
      .append(pass)
      .append(1, '.')
      .append(k.name);
  const KernelDurations d =
      durations != nullptr ? *durations : price([&] { return kernel_name_; }, k.kernel);
  LaunchSpec spec;
  spec.name = kernel_name_;
  spec.stream = compute_;
  spec.kind = OpKind::kCompute;
  spec.phase = tag(phase);
  spec.group = group;
  spec.duration = d.alone;
  spec.contended_duration = d.sharing_sms;
  spec.launch_cost = launch_cost_;
  spec.flops = k.kernel.flops;
  spec.bytes = k.kernel.bytes;
  hardware_flops_ += k.kernel.flops;
  if (phase != Phase::kRecompute) model_flops_ += k.kernel.flops * k.model_flops_fraction;
  b_.launch(spec);
  if (k.host_sync) host_waits_for_compute(k.name);
  if (kernel_hooks_ != nullptr) kernel_hooks_->after_kernel(layer, k, phase);
}

OpId StepBuilder::copy(std::string_view name, StreamId stream, Bytes bytes, Phase phase,
                       std::int32_t group) {
  return byte_mover(name, stream, bytes, phase, group, memory_bound_time(bytes));
}

OpId StepBuilder::device_memcpy(std::string_view name, StreamId stream, Bytes bytes, Phase phase,
                                std::int32_t group) {
  return byte_mover(name, stream, bytes, phase, group, memory_bound_time(bytes),
                    OpKind::kCopyEngine);
}

Seconds StepBuilder::memory_bound_time(Bytes bytes) const {
  Kernel k;
  k.kind = KernelKind::kMemoryBound;
  k.bytes = bytes;
  return hardware::kernel_time(in_.cluster.gpu, k);
}

OpId StepBuilder::multi_tensor(std::string_view name, StreamId stream, Bytes bytes, Phase phase,
                               std::int32_t group) {
  return byte_mover(name, stream, bytes, phase, group,
                    hardware::multi_tensor_time(in_.cluster.gpu, bytes));
}

OpId StepBuilder::host_transfer(std::string_view name, StreamId stream, Bytes bytes, Phase phase,
                                std::int32_t group) {
  return byte_mover(name, stream, bytes, phase, group, bytes / in_.cluster.pcie_bandwidth,
                    OpKind::kCopyEngine);
}

OpId StepBuilder::byte_mover(std::string_view name, StreamId stream, Bytes bytes, Phase phase,
                             std::int32_t group, Seconds duration, OpKind kind) {
  LaunchSpec spec;
  spec.name = name;
  spec.stream = stream;
  spec.kind = kind;
  spec.phase = tag(phase);
  spec.group = group;
  spec.duration = to_sim_time(name, duration);
  spec.launch_cost = launch_cost_;
  spec.bytes = bytes;
  return b_.launch(spec);
}

OpId StepBuilder::collective(std::string_view name, hardware::Collective op, StreamId stream,
                             const ProcessGroup& pg, Bytes bytes, Phase phase, std::int32_t group) {
  LaunchSpec spec;
  spec.name = name;
  spec.stream = stream;
  spec.channel = pg.channel;
  spec.kind = OpKind::kCommunication;
  spec.phase = tag(phase);
  spec.group = group;
  spec.duration = to_sim_time(name, hardware::collective_time(in_.cluster, op, pg.ranks, bytes));
  spec.network_time =
      to_sim_time(name, hardware::collective_network_time(in_.cluster, op, pg.ranks, bytes));
  if (pg.ranks.ranks_per_node < pg.ranks.ranks) {
    // A ring laid out node by node crosses each node boundary once: a node's NICs carry one
    // rank's wire bytes, shared by its ranks of the group (hardware/collective_cost.cpp).
    inter_node_bytes_ += Bytes(static_cast<std::int64_t>(
        hardware::ring_wire_factor(op, pg.ranks.ranks) * static_cast<double>(bytes.value()) /
        static_cast<double>(pg.ranks.ranks_per_node)));
  }
  spec.launch_cost = launch_cost_;
  spec.bytes = bytes;
  return b_.launch(spec);
}

void StepBuilder::hook(std::string_view name, std::int32_t parameter_tensors) {
  const Seconds cost =
      in_.cluster.fsdp_hook_overhead + in_.cluster.fsdp_parameter_overhead * parameter_tensors;
  if (cost.value() > 0.0) b_.cpu_work(name, to_sim_time(name, cost));
}

TensorId StepBuilder::allocate(std::string_view name, Bytes size, StreamId stream,
                               MemoryCategory category) {
  return b_.allocate(name, size, stream, static_cast<std::uint8_t>(category));
}

StepBuilder::TransientIds StepBuilder::allocate_transients(const std::string& name,
                                                           const std::vector<Bytes>& tensors) {
  TransientIds ids;
  ids.reserve(tensors.size());
  for (const Bytes size : tensors)
    ids.push_back(allocate(name, size, compute_, MemoryCategory::kActivations));
  return ids;
}

void StepBuilder::free_transients(const TransientIds& ids) {
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) free(*it);
}

CheckpointMode StepBuilder::checkpoint_mode(std::size_t layer) const {
  const std::int32_t block = block_number_[layer];
  if (block < 0) return CheckpointMode::kSave;  // embedding and head are never wrapped
  switch (in_.training.activation_checkpointing) {
    case ActivationCheckpointing::kNone:
      return CheckpointMode::kSave;
    case ActivationCheckpointing::kFull:
      return CheckpointMode::kWholeLayer;
    case ActivationCheckpointing::kSelective:
      // Every n-th block: the n-th, the 2n-th, ... (the check_fn of torchtitan's per-layer
      // selective mode and of fms-fsdp's apply_fsdp_checkpointing counts blocks from 1 and wraps
      // those whose count is divisible by n; torchtitan/parallelisms/parallelize_llama.py
      // @395a52627, fms_fsdp/policies/ac_handler.py @5e522b4).
      return (block + 1) % in_.training.checkpoint_every_n_blocks == 0 ? CheckpointMode::kWholeLayer
                                                                       : CheckpointMode::kSave;
    case ActivationCheckpointing::kAttention:
      return CheckpointMode::kAttentionCore;
    case ActivationCheckpointing::kSelectiveOp:
      return CheckpointMode::kOpPolicy;
  }
  return CheckpointMode::kSave;
}

void StepBuilder::run_forward_kernels(std::size_t layer, std::size_t begin, std::size_t end,
                                      Phase phase, std::int32_t group,
                                      const std::vector<std::uint8_t>* skip) {
  const char* pass = phase == Phase::kRecompute ? "recompute" : "fwd";
  const models::Layer& l = w_.layers[layer];
  const KernelDurations* durations =
      forward_durations_.empty() ? nullptr : forward_durations_[layer].data();
  for (std::size_t i = begin; i < end; ++i) {
    if (skip != nullptr && (*skip)[i] != 0) {
      // The module still runs (its hooks fire); its op returns the saved output, no kernel.
      if (kernel_hooks_ != nullptr) {
        kernel_hooks_->before_kernel(layer, l.forward[i], phase);
        kernel_hooks_->after_kernel(layer, l.forward[i], phase);
      }
      continue;
    }
    hooked_kernel(layer, pass, l.forward[i], durations != nullptr ? durations + i : nullptr, phase,
                  group);
  }
}

Bytes StepBuilder::saved_bytes(std::size_t layer) const {
  const models::Layer& l = w_.layers[layer];
  switch (checkpoint_mode(layer)) {
    case CheckpointMode::kSave:
      return l.saved_activations;
    case CheckpointMode::kWholeLayer:
      return l.saved_activations_checkpointed;
    case CheckpointMode::kAttentionCore:
      return l.saved_activations - l.attention_core_saved + l.attention_core_input;
    case CheckpointMode::kOpPolicy:
      // The checkpoint's input, and the policy's cache of saved outputs.
      return l.saved_activations_checkpointed + op_plans_[layer].saved_bytes;
  }
  return l.saved_activations;
}

bool StepBuilder::offloads_activations(std::size_t layer) const {
  return in_.training.offload_activations && block_number_[layer] >= 0;
}

StepBuilder::SavedIds StepBuilder::allocate_saved(std::size_t layer, const std::string& name) {
  const models::Layer& l = w_.layers[layer];
  // A block's saved tensors are each a block of their own, as autograd keeps them (allocated
  // before its temporaries, where PyTorch interleaves the two). The embedding's and the head's
  // stay one block: the head's multi-GiB log-probabilities come after the loss's upcast logits in
  // PyTorch, an order this would reverse (tried: five published A100 runs that ran came out of
  // memory). So do a checkpointed layer's (its input, or the kept outputs of an op policy).
  SavedIds ids;
  if (checkpoint_mode(layer) == CheckpointMode::kSave && !l.saved_tensors.empty() &&
      l.kind == models::LayerKind::kBlock) {
    ids.reserve(l.saved_tensors.size());
    for (const models::SavedTensor& t : l.saved_tensors)
      ids.push_back(allocate(name, t.bytes, compute_, MemoryCategory::kActivations));
  } else {
    ids.push_back(allocate(name, saved_bytes(layer), compute_, MemoryCategory::kActivations));
  }
  return ids;
}

StepBuilder::SavedIds StepBuilder::forward_layer(std::size_t layer, std::int32_t group) {
  const models::Layer& l = w_.layers[layer];
  const Bytes saved = saved_bytes(layer);
  SavedIds kept = allocate_saved(layer, l.name + ".saved");
  std::optional<TensorId> output;
  std::size_t returned = 0;  // forward kernels [0, returned) make the output the loop keeps
  if (l.loop_kept_output > Bytes(0)) {
    output = allocate(l.name + ".output_kept_by_loop", l.loop_kept_output, compute_,
                      MemoryCategory::kActivations);
    const auto writer = std::find_if(
        l.forward.begin(), l.forward.end(),
        [&](const models::NamedKernel& k) { return k.name == l.loop_kept_output_kernel; });
    if (writer == l.forward.end()) {
      throw std::logic_error("fsdp: " + l.name + " has no forward kernel " +
                             l.loop_kept_output_kernel + " to write the output the loop keeps");
    }
    returned = static_cast<std::size_t>(writer - l.forward.begin()) + 1;
  }
  // Copies the autocast cache holds that autograd does not: a recomputed layer's, made as its
  // forward runs, or an offloaded one's, once its saved tensors have gone to the host.
  const bool cached = caches_autocast_casts_ && !l.autocast_weight_copies.empty();
  const auto keep_cast_copies = [&] {
    for (const Bytes b : l.autocast_weight_copies) {
      autocast_cache_.push_back(
          allocate(l.name + ".autocast_cache", b, compute_, MemoryCategory::kParameters));
    }
  };
  const bool recomputed = reruns_forward(checkpoint_mode(layer));
  if (cached && recomputed) keep_cast_copies();
  const TransientIds temps =
      allocate_transients(l.name + ".forward_temp", l.forward_transient_tensors);
  run_forward_kernels(layer, 0, returned, Phase::kForward, group);
  if (output) {
    // The model has returned; binding the loop's name to this output drops the previous one.
    if (loop_kept_output_) free(*loop_kept_output_);
    loop_kept_output_ = output;
  }
  run_forward_kernels(layer, returned, l.forward.size(), Phase::kForward, group);
  free_transients(temps);
  if (offloads_activations(layer)) {
    // torch.autograd.graph.save_on_cpu(pin_memory=True), what offload_wrapper runs the block
    // under: each saved tensor is copied into a new pinned host tensor with a blocking copy_
    // (the CPU waits for the stream), and the GPU copy is dropped.
    host_transfer(l.name + ".saved.to_host", compute_, saved, Phase::kForward, group);
    host_waits_for_compute("save_on_cpu");
    for (const TensorId t : kept) free(t);
    kept.clear();
    if (cached && !recomputed) keep_cast_copies();
  }
  return kept;
}

void StepBuilder::leave_autocast() {
  for (const TensorId t : autocast_cache_) free(t);
  autocast_cache_.clear();
}

void StepBuilder::backward_layer(std::size_t layer, std::int32_t group, const SavedIds& saved) {
  const models::Layer& l = w_.layers[layer];
  const CheckpointMode mode = checkpoint_mode(layer);
  SavedIds from_host;
  if (offloads_activations(layer)) {
    // save_on_cpu's unpack hook: tensor.to(device, non_blocking=True) for each saved tensor, on
    // the compute stream, when backward first reads them (the recompute, if any, starts there).
    const Bytes bytes = saved_bytes(layer);
    from_host = allocate_saved(layer, l.name + ".saved.from_host");
    host_transfer(l.name + ".saved.to_device", compute_, bytes, Phase::kBackward, group);
  }
  bool recomputed_any = false;
  TensorId recomputed = 0;
  if (mode != CheckpointMode::kSave) {
    // torch.utils.checkpoint re-runs the forward (or the checkpointed region) right before the
    // gradient kernels need its tensors, a whole layer up to where it may stop early. Under the
    // op policy the re-run skips the kernels whose saved outputs it returns, and what it makes is
    // taken as what autograd saves less what the policy kept. That is exact for the kept outputs
    // autograd also saves (a Llama block's attention output and w1's) and low by the others (wq's,
    // taken before RoPE, w2's, and wv's under GQA): 4-4.5 bf16 bytes per token and d_model of
    // the 13.5-15 a Llama block keeps. Subtracting nothing would be high by 9-11.
    const bool whole = reruns_forward(mode);
    const std::vector<std::uint8_t>* skip = nullptr;
    Bytes bytes = l.attention_core_saved;
    if (mode == CheckpointMode::kWholeLayer) bytes = l.saved_activations;
    if (mode == CheckpointMode::kOpPolicy) {
      skip = &op_plans_[layer].saved_output;
      bytes = l.saved_activations - op_plans_[layer].saved_bytes;
    }
    // The re-run forward saves the checkpoint's own input tensor, held since the forward.
    if (whole) bytes = std::max(Bytes(0), bytes - l.saved_input);
    recomputed = allocate(l.name + ".recomputed", bytes, compute_, MemoryCategory::kActivations);
    const TransientIds temps =
        allocate_transients(l.name + ".recompute_temp", l.forward_transient_tensors);
    run_forward_kernels(layer, whole ? 0 : l.attention_forward_begin,
                        whole ? recompute_end_[layer] : l.attention_forward_end, Phase::kRecompute,
                        group, skip);
    free_transients(temps);
    recomputed_any = true;
  }
  const TransientIds temps =
      allocate_transients(l.name + ".backward_temp", l.backward_transient_tensors);
  for (std::size_t i = 0; i < l.backward.size(); ++i) {
    hooked_kernel(layer, "bwd", l.backward[i],
                  backward_durations_.empty() ? nullptr : &backward_durations_[layer][i],
                  Phase::kBackward, group);
  }
  free_transients(temps);
  if (recomputed_any) free(recomputed);
  for (const TensorId t : from_host) free(t);
  for (const TensorId t : saved) free(t);
}

void StepBuilder::refuse_past_op_bound(std::int64_t first, std::int64_t each_later,
                                       std::int64_t micro_batches) const {
  if (micro_batches <= 0 || in_.steps <= 0) return;
  // Far inside 64 bits: a first micro-batch of the deepest model holds a few million ops, and a
  // step at most 1024 micro-batches (sim/app/size_bounds.hpp).
  const std::int64_t total = (first + each_later * (micro_batches - 1)) * in_.steps;
  if (total <= kMaxSimulatedOps) return;
  throw StepSizeError(fmt::format(
      "the simulation would hold about {} ops ({} in the first of a step's {} micro-batch{}{}, "
      "in {} step{}{}, each op simulated in turn); at most {} are: fewer micro-batches per step "
      "(a larger micro_batch or a smaller global_batch), fewer layers, or units of whole blocks "
      "(fsdp.wrap_policy)",
      total, first, micro_batches, micro_batches == 1 ? "" : "es",
      micro_batches == 1 ? "" : fmt::format(", {} in each other", each_later), in_.steps,
      in_.steps == 1 ? "" : "s", in_.steps == 2 ? ": a warm-up step and the measured one" : "",
      kMaxSimulatedOps));
}

}  // namespace fsdpsim::fsdp
