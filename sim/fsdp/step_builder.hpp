// What every per-rank step program needs, whatever the parallelism: pricing kernels, copies,
// host transfers and collectives on the cluster; the CPU cost of hooks; the forward and backward
// of one layer with its activations and activation checkpointing; the optimizer step.
// The FSDP1, FSDP2 and DDP schedules are written on top of it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/cost_model.hpp"
#include "models/op_checkpoint_policy.hpp"
#include "sim/engine/program_builder.hpp"
#include "sim/fsdp/fsdp_units.hpp"
#include "sim/fsdp/schedule.hpp"
#include "sim/memory/memory_category.hpp"

namespace fsdpsim::fsdp {

// A process group: an NCCL communicator (its own internal stream, hence a channel) over ranks.
struct ProcessGroup {
  engine::ChannelId channel = engine::kNoChannel;
  hardware::CommGroup ranks;
};

// How a schedule's gradients are clipped by norm (training.clip_grad_norm): the groups the local
// norm is all-reduced over (none for replicated gradients), and torch.nn.utils' foreach kernels
// rather than FSDP1's per-tensor loop.
struct GradientClipping {
  std::vector<ProcessGroup> reduce_over;
  bool foreach = false;
};

// How one layer's activations are kept for backward.
enum class CheckpointMode : std::uint8_t {
  kSave,           // autograd saves everything
  kWholeLayer,     // checkpoint_wrapper: keep the input, re-run the forward in backward
  kAttentionCore,  // keep all but the attention core's tensors, re-run the core in backward
  kOpPolicy,       // keep the input and the outputs the op policy saves, re-run the other kernels
};

// Whether backward re-runs the layer's forward from its first kernel (its modules' forward hooks
// and autocast's weight casts fire again), whatever the recompute skips.
constexpr bool reruns_forward(CheckpointMode mode) {
  return mode == CheckpointMode::kWholeLayer || mode == CheckpointMode::kOpPolicy;
}

// Called around each kernel that forward_layer and backward_layer launch, for runtimes whose hooks
// fire per module inside a layer (DeepSpeed ZeRO-3 fetches each linear's weight before it runs).
class KernelHooks {
 public:
  virtual ~KernelHooks() = default;
  virtual void before_kernel(std::size_t layer, const models::NamedKernel& kernel, Phase phase) = 0;
  virtual void after_kernel(std::size_t layer, const models::NamedKernel& kernel, Phase phase) = 0;
};

class StepBuilder {
 public:
  explicit StepBuilder(const ScheduleInput& input);

  [[nodiscard]] engine::ProgramBuilder& program() { return b_; }
  [[nodiscard]] engine::StreamId compute() const { return compute_; }
  engine::StreamId add_stream(std::string name) { return b_.add_stream(std::move(name)); }
  // A communicator over groups of `size` ranks `stride` apart (process_groups.hpp).
  ProcessGroup add_process_group(std::string name, std::int32_t size, std::int32_t stride);
  // Hybrid sharding (HYBRID_SHARD, _HYBRID_SHARD_ZERO2; FSDP2's 2-D mesh): shard inside groups,
  // replicate across them.
  [[nodiscard]] bool hybrid() const;
  // Ranks a parameter is sharded over: the shard group of a hybrid strategy (default the GPUs of
  // a node, PyTorch's intra-node group), else the world.
  [[nodiscard]] std::int32_t shard_group_size() const;
  // The communicator of the shard group, and for hybrid strategies the one of the replicate
  // group (the ranks at the same position in every shard group); ProcessGroup{} otherwise.
  ProcessGroup add_shard_group();
  ProcessGroup add_replicate_group();

  // A memory-bound kernel (cast, copy, accumulation) moving `bytes` (read + write).
  engine::OpId copy(std::string_view name, engine::StreamId stream, Bytes bytes, Phase phase,
                    std::int32_t group);
  // A device-to-device cudaMemcpyAsync moving `bytes` (read + write) on a copy engine, beside
  // the SMs: PyTorch's copy_ between contiguous tensors of one dtype. Priced as the copy kernel.
  engine::OpId device_memcpy(std::string_view name, engine::StreamId stream, Bytes bytes,
                             Phase phase, std::int32_t group);
  // A multi_tensor_apply kernel (a foreach or fused optimizer op) moving `bytes`.
  engine::OpId multi_tensor(std::string_view name, engine::StreamId stream, Bytes bytes,
                            Phase phase, std::int32_t group);
  // A host <-> device copy of `bytes` over PCIe (pinned memory, non_blocking).
  engine::OpId host_transfer(std::string_view name, engine::StreamId stream, Bytes bytes,
                             Phase phase, std::int32_t group);
  engine::OpId collective(std::string_view name, hardware::Collective op, engine::StreamId stream,
                          const ProcessGroup& pg, Bytes bytes, Phase phase, std::int32_t group);
  // CPU time of a Python hook: a fixed part, plus per-parameter work (views set or cleared).
  void hook(std::string_view name, std::int32_t parameter_tensors);

  engine::TensorId allocate(std::string_view name, Bytes size, engine::StreamId stream,
                            memory::MemoryCategory category);
  void free(engine::TensorId tensor, engine::EventRef until = {}) { b_.free(tensor, until); }
  // A layer's transient tensors (models::Layer::*_transient_tensors), each its own block, all
  // under one name; freed in reverse order.
  using TransientIds = std::vector<engine::TensorId>;
  TransientIds allocate_transients(const std::string& name, const std::vector<Bytes>& tensors);
  void free_transients(const TransientIds& ids);

  // Hooks to call around every kernel of forward_layer and backward_layer (none by default).
  void set_kernel_hooks(KernelHooks* hooks) { kernel_hooks_ = hooks; }
  // For a runtime whose unsharded weights are tensors autocast caches the casts of (FSDP2's
  // nn.Parameters; models/autocast_weight_casts.hpp): forward_layer keeps the cast copies
  // (models::Layer::autocast_weight_copies) of a layer whose saved tensors autograd does not hold
  // on the device (recomputed or offloaded) until leave_autocast. Off by default: the copies live
  // as long as autograd saves them.
  void cache_autocast_casts() { caches_autocast_casts_ = true; }
  // The forward has left torch.autocast, whose exit at nesting 0 clears the cache
  // (autocast_mode.py __exit__, clear_autocast_cache): the copies only the cache held go.
  void leave_autocast();
  [[nodiscard]] CheckpointMode checkpoint_mode(std::size_t layer) const;
  // What autograd keeps of the layer's forward for its backward, under its checkpoint mode.
  [[nodiscard]] Bytes saved_bytes(std::size_t layer) const;
  // training.offload_activations: a block's saved tensors live on the host between its forward
  // and its backward.
  [[nodiscard]] bool offloads_activations(std::size_t layer) const;
  // What autograd keeps of one layer's forward, a block per saved tensor
  // (models::Layer::saved_tensors) or one for them all.
  using SavedIds = std::vector<engine::TensorId>;
  // Runs the layer's forward kernels on the compute stream; returns the tensors holding what
  // autograd keeps for its backward (none when the layer offloads them to the host).
  SavedIds forward_layer(std::size_t layer, std::int32_t group);
  // Re-runs what checkpointing dropped, then the gradient kernels; frees `saved` (and, offloaded,
  // the copy back from the host).
  void backward_layer(std::size_t layer, std::int32_t group, const SavedIds& saved);

  // The training's optimizer step (AdamW as training.optimizer_impl says, or SGD) over tensors
  // of `numels` elements each in training.param_storage_dtype, on the compute stream
  // (optimizer_step.cpp). Each op's group is its entry's index (the unit); an entry of 0
  // elements (a unit without parameters) has no tensor for the optimizer, and launches nothing.
  // `parameter_numels[i]`, where given, splits entry i into the parameters the optimizer sees one
  // by one (FSDP2's and DDP's tensors per parameter; FSDP1's FlatParameter is one): the for-loop
  // implementation runs its kernels, and holds its temporaries, per parameter.
  void gpu_optimizer(const std::vector<std::pair<std::string, std::int64_t>>& numels,
                     const std::vector<std::vector<std::int64_t>>& parameter_numels = {});
  // Bytes of `passes` reads and writes over `numel` elements of the parameters' storage dtype.
  [[nodiscard]] Bytes optimizer_passes(std::int64_t passes, std::int64_t numel) const;
  // The same optimizer on the host (CPU offload): the per-tensor loop (_single_tensor_*).
  void cpu_optimizer(std::int64_t numel);
  // The node's DRAM bandwidth shared by its gpus_per_node training processes.
  [[nodiscard]] BytesPerSec host_bandwidth_per_rank() const;
  // clip_grad_norm_ over per-unit gradients of `numels` elements (gradient_clipping.cpp): the
  // local norm, its all-reduce, and the scaling; on the GPU, or on the host for offloaded
  // gradients (the caller has synchronized with the GPU). Entries of 0 elements, as above.
  void clip_gradients(const std::vector<std::pair<std::string, std::int64_t>>& numels,
                      const GradientClipping& how, bool on_host);
  // The optimizer step over per-unit tensors of `numels` elements, after clipping them as `how`
  // says when training.clip_grad_norm: with CPU offload the CPU first synchronizes with the GPU
  // (_post_backward_final_callback) and clips and steps on the host, else the GPU does.
  void optimizer_step(const std::vector<std::pair<std::string, std::int64_t>>& numels,
                      const GradientClipping& how,
                      const std::vector<std::vector<std::int64_t>>& parameter_numels = {});

  [[nodiscard]] Flops model_flops() const { return model_flops_; }
  [[nodiscard]] Bytes inter_node_bytes() const { return inter_node_bytes_; }
  // Runs input().steps training steps into `out`, the last one measured: each calls
  // micro_batch(sync) once per micro-batch (sync: gradients are reduced, i.e. always, or only on
  // the last micro-batch under no_sync), then optimizer_step().
  template <typename MicroBatch, typename OptimizerStep>
  void run_steps(Schedule& out, MicroBatch micro_batch, OptimizerStep optimizer_step) {
    const TrainingConfig& t = in_.training;
    out.micro_batches = t.global_batch / (t.micro_batch * in_.cluster.world_size());
    std::int64_t first_ops = 0;  // what the first micro-batch (with its step's start) issued
    for (std::int32_t step = 0; step < in_.steps; ++step) {
      begin_step(out);
      for (std::int64_t mb = 0; mb < out.micro_batches; ++mb) {
        if (t.host_sync == HostSync::kMicroBatch) host_waits_for_compute("input.to(device)");
        micro_batch(!t.no_sync || mb == out.micro_batches - 1);
        if (step != 0 || mb > 1) continue;
        // The simulation's size, from the first micro-batch and, once there is one, the second
        // (it accumulates gradients, the first does not): refused before the rest is built.
        const auto ops = static_cast<std::int64_t>(b_.program().ops.size());
        if (mb == 0) {
          first_ops = ops;
          // Every micro-batch issues about what the first did (the optimizer step adds a little).
          b_.reserve_repeats(static_cast<std::size_t>(out.micro_batches * in_.steps) + 1);
        }
        if (mb == 1 || out.micro_batches == 1)
          refuse_past_op_bound(first_ops, mb == 1 ? ops - first_ops : 0, out.micro_batches);
      }
      optimizer_step();
      if (t.host_sync == HostSync::kStep) host_waits_for_compute("loss.item()");
    }
  }
  // Throws StepSizeError (step_size_bound.hpp) when the first micro-batch's `first` ops and
  // `each_later` for each of the others, in each of input().steps steps, would pass
  // kMaxSimulatedOps.
  void refuse_past_op_bound(std::int64_t first, std::int64_t each_later,
                            std::int64_t micro_batches) const;
  // finish() for FSDP: the units, and the memory alive before a step: fp32 parameter shards
  // (4 B per element) and the optimizer's state, unless offloaded to the host. Gradient shards
  // are made in backward and freed by zero_grad(set_to_none=True), so they belong to the program.
  void finish_sharded(Schedule& out, const std::vector<FsdpUnit>& units);
  // Moves the program and the measured step's counts into `out`, and adds the module buffers
  // (models::Layer::buffers) to the memory alive before a step.
  void finish(Schedule& out);
  // The dtype every rank keeps the module buffers in: DDP's fp32 modules, DeepSpeed's fp16 (or
  // bf16) ones (Module.half() casts floating buffers with the parameters), FSDP's
  // param_storage_dtype (model.to(dtype) likewise) unless FSDP1's buffer_dtype recasts them.
  [[nodiscard]] Dtype buffer_dtype() const;
  [[nodiscard]] const ScheduleInput& input() const { return in_; }
  [[nodiscard]] const models::Workload& workload() const { return w_; }
  engine::Program take() { return b_.take(); }

 private:
  // Allocates, named `name`, what autograd keeps of the layer's forward under its checkpoint mode.
  SavedIds allocate_saved(std::size_t layer, const std::string& name);
  void begin_step(Schedule& schedule);
  // The CPU waits for everything issued to the compute stream so far, as a blocking copy_, an
  // `.item()` or a stream synchronize on the current stream makes it: the training loop's waits
  // (TrainingConfig::host_sync; the optimizer and the end of each backward have joined FSDP's
  // streams to it) and the runtime's own.
  void host_waits_for_compute(std::string_view reason);
  // The time of a memory-bound kernel moving `bytes` (read + write), which copy and
  // device_memcpy both take.
  [[nodiscard]] Seconds memory_bound_time(Bytes bytes) const;
  // An op of `kind` (a device copy, or a host transfer) moving `bytes` in `duration` (copy,
  // multi_tensor, host_transfer).
  engine::OpId byte_mover(std::string_view name, engine::StreamId stream, Bytes bytes, Phase phase,
                          std::int32_t group, Seconds duration,
                          engine::OpKind kind = engine::OpKind::kCopy);
  // Runs forward kernels [begin, end) of `layer`, but those `skip` marks (one flag per forward
  // kernel; null: none).
  void run_forward_kernels(std::size_t layer, std::size_t begin, std::size_t end, Phase phase,
                           std::int32_t group, const std::vector<std::uint8_t>* skip = nullptr);
  // A kernel's device time alone and while a collective holds NCCL's SMs (contended_duration).
  struct KernelDurations {
    SimTime alone;
    SimTime sharing_sms;
  };
  // The same, a range error naming the kernel: `name` (a callable) is built only then.
  template <typename Name>
  [[nodiscard]] KernelDurations price(const Name& name, const Kernel& kernel) const {
    try {
      return price(kernel);
    } catch (const SimTimeRangeError& e) {
      throw SimTimeRangeError(std::string(name()) + ": " + e.what());
    }
  }
  [[nodiscard]] KernelDurations price(const Kernel& kernel) const;
  // The layers' kernels priced once each (forward_durations_[layer][i] for l.forward[i]), which
  // the step launches again in every block and micro-batch; empty under a calibration profile,
  // whose usage counters count every kernel priced (the "costs" line of `fsdpsim run`).
  void price_layer_kernels();
  // Launches kernel k of `layer` on the compute stream, named "layer.pass.kernel", between the
  // kernel hooks' calls; `durations` from price_layer_kernels, or null to price it now.
  void hooked_kernel(std::size_t layer, const char* pass, const models::NamedKernel& k,
                     const KernelDurations* durations, Phase phase, std::int32_t group);

  const ScheduleInput& in_;
  const models::Workload& w_;
  engine::ProgramBuilder b_;
  engine::StreamId compute_;
  SimTime launch_cost_;
  std::vector<std::vector<KernelDurations>> forward_durations_;
  std::vector<std::vector<KernelDurations>> backward_durations_;
  std::vector<std::int32_t> block_number_;  // per layer: index among blocks, -1 otherwise
  // Per layer: how many of its forward kernels a whole-layer recompute runs.
  std::vector<std::size_t> recompute_end_;
  // Per layer under activation_checkpointing selective_op: what the op policy saves (blocks only;
  // empty otherwise).
  std::vector<models::OpCheckpointPlan> op_plans_;
  Flops model_flops_{0.0};
  Flops hardware_flops_{0.0};  // every kernel as executed, recompute included
  Bytes inter_node_bytes_{0};
  KernelHooks* kernel_hooks_ = nullptr;
  // The model output the training loop holds (models::Layer::loop_kept_output), from the last
  // forward that made one; the next such forward frees it once it has returned its own.
  std::optional<engine::TensorId> loop_kept_output_;
  bool caches_autocast_casts_ = false;
  std::vector<engine::TensorId> autocast_cache_;  // the copies only the cache holds
  std::string kernel_name_;  // hooked_kernel()'s "layer.pass.kernel", reused: no allocation each
};

inline Bytes elements(std::int64_t numel, Dtype dtype) { return Bytes(numel * dtype_bytes(dtype)); }

}  // namespace fsdpsim::fsdp
