#include "sim/fsdp/schedule.hpp"

#include <fmt/format.h>

#include <deque>
#include <stdexcept>

#include "hardware/cost_model.hpp"
#include "sim/engine/program_builder.hpp"
#include "sim/units/sim_time.hpp"

// FSDP1 FULL_SHARD, event by event, after torch/distributed/fsdp/_runtime_utils.py (PyTorch 2.x):
// _pre_forward_unshard, _post_forward_reshard, _pre_backward_hook, _post_backward_hook,
// _reduce_grad, _post_backward_final_callback; _limiter_utils.py for the rate limiter.
// See ../reference (fsdp_runtime.md sec. 2) in the design docs for the sequence.

namespace fsdpsim::fsdp {
namespace {

using engine::EventRef;
using engine::LaunchSpec;
using engine::OpId;
using engine::OpKind;
using engine::StreamId;
using engine::TensorId;
using memory::MemoryCategory;

constexpr std::uint8_t tag(MemoryCategory c) { return static_cast<std::uint8_t>(c); }
constexpr std::uint8_t tag(Phase p) { return static_cast<std::uint8_t>(p); }

Bytes elements(std::int64_t numel, Dtype dtype) { return Bytes(numel * dtype_bytes(dtype)); }

struct UnitState {
  TensorId full_param = 0;
  bool unsharded = false;
  bool prefetched = false;
  EventRef all_gather_done;
  TensorId grad_views = 0;       // per-parameter gradients before SplitWithSizesBackward's cat
  TensorId grad_shard = 0;       // _saved_grad_shard (fp32), alive until the optimizer step
  bool has_grad_shard = false;
  std::vector<TensorId> saved;   // activations saved for backward, per layer of the unit
};

class Fsdp1StepBuilder {
 public:
  explicit Fsdp1StepBuilder(const ScheduleInput& input)
      : in_(input),
        w_(*input.workload),
        world_(input.cluster.world_size()),
        units_(make_units(w_, world_)),
        state_(units_.size()),
        compute_(b_.add_stream("compute")),
        unshard_(b_.add_stream("unshard")),
        post_backward_(b_.add_stream("post_backward")),
        pre_unshard_(b_.add_stream("pre_unshard")),
        process_group_(b_.add_channel("nccl:world")),
        group_{world_, std::min(world_, input.cluster.gpus_per_node)},
        launch_cost_(to_sim_time(input.cluster.kernel_launch_overhead)) {}

  Schedule build() {
    const TrainingConfig& t = in_.training;
    Schedule s;
    s.micro_batches = t.global_batch / (t.micro_batch * world_);
    for (std::int64_t mb = 0; mb < s.micro_batches; ++mb) micro_batch();
    optimizer_step();
    std::int64_t shard_numel = 0;
    for (const FsdpUnit& u : units_) shard_numel += u.shard_numel;
    // Persistent per rank: fp32 parameter shards (4 B) and AdamW's exp_avg and exp_avg_sq (8 B).
    // The fp32 gradient shards are created during backward (_accumulate_sharded_grad) and freed by
    // zero_grad(set_to_none=True), so they are tensors of the program, not baseline.
    s.baseline[tag(MemoryCategory::kParameters)] = Bytes(4 * shard_numel);
    s.baseline[tag(MemoryCategory::kOptimizerState)] = Bytes(8 * shard_numel);
    s.model_flops = model_flops_;
    s.hardware_flops = model_flops_ + recompute_flops_;
    s.units = units_;
    s.program = b_.take();
    return s;
  }

 private:
  std::size_t root() const { return units_.size() - 1; }

  OpId kernel(const std::string& unit, const char* pass, const models::NamedKernel& k, Phase phase,
              std::int32_t group) {
    const Seconds duration = hardware::kernel_time(in_.cluster.gpu, k.kernel);
    LaunchSpec spec;
    const std::string name = fmt::format("{}.{}.{}", unit, pass, k.name);
    spec.name = name;
    spec.stream = compute_;
    spec.kind = OpKind::kCompute;
    spec.phase = tag(phase);
    spec.group = group;
    spec.duration = to_sim_time(duration);
    // NCCL's channels take SMs from kernels that overlap a collective.
    spec.contended_duration =
        to_sim_time(hardware::kernel_time_sharing_sms(in_.cluster.gpu, k.kernel, in_.cluster.nccl_channels));
    spec.launch_cost = launch_cost_;
    spec.flops = k.kernel.flops;
    spec.bytes = k.kernel.bytes;
    if (phase == Phase::kRecompute) {
      recompute_flops_ += k.kernel.flops;
    } else {
      model_flops_ += k.kernel.flops;
    }
    return b_.launch(spec);
  }

  // A memory-bound copy/cast kernel on `stream` moving `bytes` (read + write).
  OpId copy(const std::string& name, StreamId stream, Bytes bytes, Phase phase, std::int32_t group) {
    Kernel k;
    k.kind = KernelKind::kMemoryBound;
    k.bytes = bytes;
    LaunchSpec spec;
    spec.name = name;
    spec.stream = stream;
    spec.kind = OpKind::kCopy;
    spec.phase = tag(phase);
    spec.group = group;
    spec.duration = to_sim_time(hardware::kernel_time(in_.cluster.gpu, k));
    spec.launch_cost = launch_cost_;
    spec.bytes = bytes;
    return b_.launch(spec);
  }

  OpId collective(const std::string& name, hardware::Collective op, StreamId stream, Bytes bytes,
                  Phase phase, std::int32_t group) {
    LaunchSpec spec;
    spec.name = name;
    spec.stream = stream;
    spec.channel = process_group_;
    spec.kind = OpKind::kCommunication;
    spec.phase = tag(phase);
    spec.group = group;
    spec.duration = to_sim_time(hardware::collective_time(in_.cluster, op, group_, bytes));
    spec.launch_cost = launch_cost_;
    spec.bytes = bytes;
    return b_.launch(spec);
  }

  // _runtime_utils.py::_unshard: cast the fp32 shard to param_dtype in the pre-unshard stream,
  // rate-limit on the CPU, then all-gather into _full_param_padded in the unshard stream.
  void unshard(std::size_t u, Phase phase) {
    UnitState& st = state_[u];
    if (st.unsharded) return;
    const FsdpUnit& unit = units_[u];
    const auto g = static_cast<std::int32_t>(u);
    const Dtype param_dtype = in_.fsdp.param_dtype;
    bool has_mp_shard = false;
    TensorId mp_shard = 0;
    if (param_dtype != Dtype::kFp32) {  // FlatParamHandle.pre_unshard -> _use_low_precision_shard
      mp_shard = b_.allocate(unit.name + "._mp_shard", elements(unit.shard_numel, param_dtype),
                             pre_unshard_, tag(MemoryCategory::kParameters));
      copy(unit.name + ".cast_shard", pre_unshard_,
           elements(unit.shard_numel, Dtype::kFp32) + elements(unit.shard_numel, param_dtype), phase, g);
      b_.wait_stream(unshard_, pre_unshard_);
      has_mp_shard = true;
    }
    if (in_.fsdp.limit_all_gathers &&
        free_events_.size() >= static_cast<std::size_t>(in_.fsdp.max_inflight_all_gathers)) {
      // _FreeEventQueue.dequeue_if_needed + event.synchronize(): the CPU blocks.
      const EventRef oldest = free_events_.front();
      free_events_.pop_front();
      b_.cpu_synchronize(oldest, "rate_limiter");
    }
    st.full_param = b_.allocate(unit.name + "._full_param_padded",
                                elements(unit.padded_numel, param_dtype), unshard_,
                                tag(MemoryCategory::kParameters));
    collective(unit.name + ".all_gather", hardware::Collective::kAllGather, unshard_,
               elements(unit.padded_numel, param_dtype), phase, g);
    // FlatParamHandle.post_unshard frees _mp_shard with record_stream on the unshard stream.
    if (has_mp_shard) b_.free(mp_shard, b_.record_event(unshard_));
    st.all_gather_done = b_.record_event(unshard_);
    st.unsharded = true;
  }

  // _reshard with free=True: record_stream(current) + storage resize to 0; with the limiter, a
  // free event is recorded on the compute stream and enqueued.
  void reshard(std::size_t u) {
    UnitState& st = state_[u];
    const EventRef compute_done = b_.record_event(compute_);
    b_.free(st.full_param, compute_done);
    st.unsharded = false;
    st.prefetched = false;
    if (in_.fsdp.limit_all_gathers) free_events_.push_back(compute_done);
  }

  void forward_unit(std::size_t u) {
    // _pre_forward_unshard: unshard unless prefetched, then current_stream.wait_stream(unshard).
    unshard(u, Phase::kForward);
    b_.wait_stream(compute_, unshard_);
    for (std::size_t layer : units_[u].layers) {
      if (units_[u].is_root && w_.layers[layer].kind == models::LayerKind::kHead) continue;
      forward_layer(u, layer);
    }
    // _post_forward_reshard: the root is never resharded after forward (FULL_SHARD, non-root only).
    if (!units_[u].is_root) reshard(u);
  }

  void forward_layer(std::size_t u, std::size_t layer) {
    const models::Layer& l = w_.layers[layer];
    const bool checkpointed = checkpointed_layer(l);
    const Bytes saved = checkpointed ? l.saved_activations_checkpointed : l.saved_activations;
    state_[u].saved.push_back(
        b_.allocate(l.name + ".saved", saved, compute_, tag(MemoryCategory::kActivations)));
    const TensorId temp =
        b_.allocate(l.name + ".forward_temp", l.forward_transient_peak, compute_, tag(MemoryCategory::kActivations));
    for (const models::NamedKernel& k : l.forward) kernel(l.name, "fwd", k, Phase::kForward, static_cast<std::int32_t>(u));
    b_.free(temp);
  }

  bool checkpointed_layer(const models::Layer& l) const {
    return in_.training.activation_checkpointing == ActivationCheckpointing::kFull &&
           l.kind == models::LayerKind::kBlock;
  }

  // Backward of one layer: recompute its forward if checkpointed, then its gradient kernels.
  void backward_layer(std::size_t u, std::size_t layer, TensorId saved) {
    const models::Layer& l = w_.layers[layer];
    const auto g = static_cast<std::int32_t>(u);
    TensorId recomputed = 0;
    const bool checkpointed = checkpointed_layer(l);
    if (checkpointed) {
      recomputed = b_.allocate(l.name + ".recomputed", l.saved_activations, compute_,
                               tag(MemoryCategory::kActivations));
      const TensorId temp = b_.allocate(l.name + ".recompute_temp", l.forward_transient_peak, compute_,
                                        tag(MemoryCategory::kActivations));
      for (const models::NamedKernel& k : l.forward) kernel(l.name, "recompute", k, Phase::kRecompute, g);
      b_.free(temp);
    }
    const TensorId temp = b_.allocate(l.name + ".backward_temp", l.backward_transient_peak, compute_,
                                      tag(MemoryCategory::kActivations));
    for (const models::NamedKernel& k : l.backward) kernel(l.name, "bwd", k, Phase::kBackward, g);
    b_.free(temp);
    if (checkpointed) b_.free(recomputed);
    b_.free(saved);
  }

  // _get_handle_to_prefetch: the unit at post_forward_index - 1, if it still needs unsharding.
  void prefetch_backward(std::size_t u) {
    if (u == 0) return;
    const std::size_t target = u - 1;
    if (state_[target].unsharded) return;
    unshard(target, Phase::kBackward);
    state_[target].prefetched = true;
  }

  // _pre_backward_hook: unshard unless prefetched, wait for it, then BACKWARD_PRE prefetch.
  void pre_backward(std::size_t u) {
    if (!state_[u].prefetched) unshard(u, Phase::kBackward);
    b_.wait_stream(compute_, unshard_);
    if (in_.fsdp.backward_prefetch == BackwardPrefetch::kBackwardPre) prefetch_backward(u);
    // The unsharded gradient accumulates as per-parameter views (allocated by autograd in the
    // compute stream) until SplitWithSizesBackward concatenates them into the flat gradient.
    const FsdpUnit& unit = units_[u];
    state_[u].grad_views = b_.allocate(unit.name + ".grad_views", elements(unit.numel, in_.fsdp.param_dtype),
                                       compute_, tag(MemoryCategory::kGradients));
  }

  // _post_backward_hook: reshard, BACKWARD_POST prefetch, then reduce-scatter in the
  // post-backward stream (_reduce_grad) and accumulate into _saved_grad_shard.
  void post_backward(std::size_t u) {
    const FsdpUnit& unit = units_[u];
    UnitState& st = state_[u];
    const auto g = static_cast<std::int32_t>(u);
    const Dtype param_dtype = in_.fsdp.param_dtype;
    const Dtype reduce_dtype = in_.fsdp.reduce_dtype;
    // SplitWithSizesBackward: cat the per-parameter gradients into flat_param.grad.
    const TensorId flat_grad = b_.allocate(unit.name + ".flat_grad", elements(unit.numel, param_dtype),
                                           compute_, tag(MemoryCategory::kGradients));
    copy(unit.name + ".grad_cat", compute_, 2 * elements(unit.numel, param_dtype), Phase::kBackward, g);
    b_.free(st.grad_views);
    reshard(u);
    if (in_.fsdp.backward_prefetch == BackwardPrefetch::kBackwardPost) prefetch_backward(u);
    b_.wait_stream(post_backward_, compute_);
    // flat_param.grad.to(reduce_dtype), then F.pad to a multiple of the world size.
    TensorId reduce_input = flat_grad;
    bool separate_input = false;
    if (reduce_dtype != param_dtype || unit.padded_numel != unit.numel) {
      reduce_input = b_.allocate(unit.name + ".reduce_scatter_input", elements(unit.padded_numel, reduce_dtype),
                                 post_backward_, tag(MemoryCategory::kCommunication));
      copy(unit.name + ".grad_to_reduce_dtype", post_backward_,
           elements(unit.numel, param_dtype) + elements(unit.padded_numel, reduce_dtype), Phase::kBackward, g);
      separate_input = true;
    }
    const TensorId output = b_.allocate(unit.name + ".reduce_scatter_output",
                                        elements(unit.shard_numel, reduce_dtype), post_backward_,
                                        tag(MemoryCategory::kCommunication));
    collective(unit.name + ".reduce_scatter", hardware::Collective::kReduceScatter, post_backward_,
               elements(unit.padded_numel, reduce_dtype), Phase::kBackward, g);
    // _accumulate_sharded_grad: cast to the parameter dtype (fp32) and keep or add.
    if (!st.has_grad_shard) {
      st.grad_shard = b_.allocate(unit.name + "._saved_grad_shard", elements(unit.shard_numel, Dtype::kFp32),
                                  post_backward_, tag(MemoryCategory::kGradients));
      st.has_grad_shard = true;
    }
    copy(unit.name + ".accumulate_grad_shard", post_backward_,
         elements(unit.shard_numel, reduce_dtype) + 3 * elements(unit.shard_numel, Dtype::kFp32),
         Phase::kBackward, g);
    b_.free(output);
    if (separate_input) b_.free(reduce_input);
    // record_stream(autograd_computed_grad, post_backward) before it goes out of scope.
    b_.free(flat_grad, b_.record_event(post_backward_));
  }

  void micro_batch() {
    // Root pre-forward (_root_pre_forward): unshard streams wait for the default stream (optimizer).
    b_.wait_stream(unshard_, compute_);
    b_.wait_stream(pre_unshard_, compute_);
    const std::size_t r = root();
    // The root runs the embedding first; blocks follow; the root's head runs last.
    unshard(r, Phase::kForward);
    b_.wait_stream(compute_, unshard_);
    for (std::size_t layer : units_[r].layers) {
      if (w_.layers[layer].kind == models::LayerKind::kEmbedding) forward_layer(r, layer);
    }
    for (std::size_t u = 0; u < r; ++u) forward_unit(u);
    for (std::size_t layer : units_[r].layers) {
      if (w_.layers[layer].kind == models::LayerKind::kHead) forward_layer(r, layer);
    }
    // Backward: the root's pre-backward hook fires first (on the loss), then blocks in reverse.
    pre_backward(r);
    backward_root_layers(r, models::LayerKind::kHead);
    for (std::size_t u = r; u-- > 0;) {
      pre_backward(u);
      backward_layer(u, units_[u].layers.front(), state_[u].saved.front());
      state_[u].saved.clear();
      post_backward(u);
    }
    backward_root_layers(r, models::LayerKind::kEmbedding);
    state_[r].saved.clear();
    post_backward(r);
    // _post_backward_final_callback: the default stream waits for the post-backward stream.
    b_.wait_stream(compute_, post_backward_);
  }

  void backward_root_layers(std::size_t r, models::LayerKind kind) {
    const std::vector<std::size_t>& layers = units_[r].layers;
    for (std::size_t i = layers.size(); i-- > 0;) {
      if (w_.layers[layers[i]].kind == kind) backward_layer(r, layers[i], state_[r].saved[i]);
    }
  }

  // torch.optim.AdamW (foreach, the CUDA default): per FlatParameter shard it reads param, grad,
  // exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq (7 x 4 B per element), and
  // _foreach_sqrt(exp_avg_sqs) materializes one fp32 temporary the size of all shards
  // (torch/optim/adamw.py::_multi_tensor_adamw). zero_grad(set_to_none=True) then frees grads.
  void optimizer_step() {
    std::int64_t shard_numel = 0;
    for (const FsdpUnit& u : units_) shard_numel += u.shard_numel;
    const TensorId temp = b_.allocate("optimizer.exp_avg_sq_sqrt", elements(shard_numel, Dtype::kFp32), compute_,
                                      tag(MemoryCategory::kOptimizerState));
    for (std::size_t u = 0; u < units_.size(); ++u) {
      copy(units_[u].name + ".adamw", compute_, 7 * elements(units_[u].shard_numel, Dtype::kFp32),
           Phase::kOptimizer, static_cast<std::int32_t>(u));
    }
    b_.free(temp);
    for (UnitState& st : state_) {
      if (st.has_grad_shard) b_.free(st.grad_shard, b_.record_event(compute_));
    }
  }

  const ScheduleInput& in_;
  const models::Workload& w_;
  std::int32_t world_;
  std::vector<FsdpUnit> units_;
  std::vector<UnitState> state_;
  engine::ProgramBuilder b_;
  StreamId compute_;
  StreamId unshard_;
  StreamId post_backward_;
  StreamId pre_unshard_;
  engine::ChannelId process_group_;
  hardware::CommGroup group_;
  SimTime launch_cost_;
  std::deque<EventRef> free_events_;
  Flops model_flops_{0.0};
  Flops recompute_flops_{0.0};
};

}  // namespace

Schedule build_schedule(const ScheduleInput& input) {
  if (input.workload == nullptr) throw std::logic_error("build_schedule without a workload");
  return Fsdp1StepBuilder(input).build();
}

}  // namespace fsdpsim::fsdp
