// FSDP1 (FlatParameter) event by event, after torch/distributed/fsdp/_runtime_utils.py
// (PyTorch 2.x): _root_pre_forward, _pre_forward_unshard, _unshard, _post_forward_reshard,
// _pre_backward_hook, _post_backward_hook, _reduce_grad, _reduce_grad_no_shard,
// _post_backward_final_callback; _limiter_utils.py for the rate limiter; _flat_param.py for
// pre_unshard / unshard / post_reshard; api.py for the strategies and prefetch modes.
#include <algorithm>
#include <deque>
#include <optional>
#include <stdexcept>

#include "models/linear_modules.hpp"
#include "sim/fsdp/fsdp_units.hpp"
#include "sim/fsdp/gradient_divide.hpp"
#include "sim/fsdp/process_groups.hpp"
#include "sim/fsdp/schedule_flavours.hpp"
#include "sim/fsdp/step_builder.hpp"
#include "sim/fsdp/unit_hooks.hpp"

namespace fsdpsim::fsdp {
namespace {

using engine::EventRef;
using engine::StreamId;
using engine::TensorId;
using hardware::Collective;
using memory::MemoryCategory;

// RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES in _runtime_utils.py.
bool reshards_after_forward(ShardingStrategy s) {
  return s == ShardingStrategy::kFullShard || s == ShardingStrategy::kHybridShard;
}

struct UnitState {
  bool unsharded = false;   // full parameters (or NO_SHARD's low-precision copy) present
  bool prefetched = false;  // FlatParamHandle._prefetched
  // FlatParamHandle._needs_pre_forward_unshard / _needs_pre_backward_unshard: prefetch targets
  // only units whose hook has not run yet in this pass (_get_handle_to_prefetch).
  bool needs_pre_forward_unshard = false;
  bool needs_pre_backward_unshard = false;
  TensorId full_param = 0;  // _full_param_padded, or NO_SHARD's _mp_shard
  bool has_full_param = false;
  // Per-parameter gradients before SplitWithSizesBackward's cat, as autograd makes them.
  std::vector<TensorId> grad_views;
  TensorId kept_grad = 0;  // unsharded gradient kept across no_sync micro-batches
  bool has_kept_grad = false;
  TensorId grad = 0;  // _saved_grad_shard, or NO_SHARD's full .grad (storage dtype)
  bool has_grad = false;
};

// A linear's unit whose hooks have fired on entry and not yet on exit: its forward (or
// recompute) kernels, or its gradient kernels, are being issued.
struct OpenLinear {
  std::size_t unit = 0;
  bool backward = false;
};

class Fsdp1Step final : private UnitHooks, private KernelHooks {
 public:
  explicit Fsdp1Step(const ScheduleInput& input)
      : in_(input),
        f_(input.fsdp),
        s_(input),
        // _init_core_state: a shard group of one GPU runs NO_SHARD, whatever the strategy.
        strategy_(s_.shard_group_size() == 1 ? ShardingStrategy::kNoShard : f_.sharding_strategy),
        shard_size_(s_.shard_group_size()),
        units_(make_units(s_.workload(), f_,
                          strategy_ == ShardingStrategy::kNoShard ? 1 : shard_size_)),
        state_(units_.size()),
        unshard_(s_.add_stream("unshard")),
        post_backward_(s_.add_stream("post_backward")),
        pre_unshard_(s_.add_stream("pre_unshard")),
        // _init_streams: the all-reduce stream exists only for hybrid strategies; otherwise
        // it is the default stream.
        all_reduce_(s_.hybrid() ? s_.add_stream("all_reduce") : s_.compute()),
        shard_pg_(s_.add_shard_group()),
        replicate_pg_(s_.add_replicate_group()) {
    index_units();
  }

  Schedule build() {
    Schedule out;
    s_.run_steps(
        out,
        [this](bool sync) {
          sync_gradients_ = sync;
          micro_batch();
        },
        [this] { optimizer_step(); });
    s_.finish_sharded(out, units_);
    return out;
  }

 private:
  std::size_t root() const { return units_.size() - 1; }
  bool sharded() const { return strategy_ != ShardingStrategy::kNoShard; }
  // The dtype of the FlatParameter: the module's own (training.param_storage_dtype; FSDP1
  // flattens the parameters as they are, _flat_param.py FlatParamHandle._init_flat_param_and_
  // metadata), which is also the dtype of its gradient shard and CPU copy.
  Dtype storage() const { return in_.training.param_storage_dtype; }
  // FlatParamHandle._uses_param_mixed_precision: only when the forward dtype differs from the
  // storage dtype is there an _mp_shard to cast into (a bf16 module under param_dtype bf16, or
  // with no MixedPrecision at all, gathers its shard as it is).
  bool mixed_precision() const { return f_.param_dtype != storage(); }
  std::int32_t g(std::size_t u) const { return static_cast<std::int32_t>(u); }
  Phase phase() const { return in_backward_ ? Phase::kBackward : Phase::kForward; }

  // The pre-forward order (_ExecOrderData.handles_pre_forward_order, what forward prefetch
  // follows): the root, then each block's unit before the units of its linears, of the units
  // that hold parameters (record_pre_forward records handles only). units_ is in post-forward
  // order, where a block's linears come first. Units of linears get their hooks from the
  // kernels (KernelHooks).
  void index_units() {
    std::vector<std::size_t> order;
    if (units_[root()].holds_parameters()) order.push_back(root());
    std::vector<std::size_t> linears;
    linear_units_.resize(s_.workload().layers.size());
    for (std::size_t u = 0; u < root(); ++u) {
      if (!units_[u].linear_module.empty()) {
        linears.push_back(u);
        linear_units_[units_[u].layers.front()].emplace_back(units_[u].linear_module, u);
        continue;
      }
      if (units_[u].holds_parameters()) order.push_back(u);
      order.insert(order.end(), linears.begin(), linears.end());
      linears.clear();
    }
    order.insert(order.end(), linears.begin(), linears.end());  // the root's: the LM head's
    next_pre_forward_.assign(units_.size(), std::nullopt);
    for (std::size_t i = 0; i + 1 < order.size(); ++i) next_pre_forward_[order[i]] = order[i + 1];
    if (std::any_of(units_.begin(), units_.end(),
                    [](const FsdpUnit& u) { return !u.linear_module.empty(); })) {
      s_.set_kernel_hooks(this);
    }
  }

  std::optional<std::size_t> linear_unit(std::size_t layer, const std::string& module) const {
    if (module.empty()) return std::nullopt;
    for (const auto& [name, u] : linear_units_[layer])
      if (name == module) return u;
    return std::nullopt;
  }

  // KernelHooks: a linear's unit is entered at the first kernel of its forward (or recompute),
  // or of its gradient, and left before the next kernel outside it, or when its layer ends.
  void before_kernel(std::size_t layer, const models::NamedKernel& k, Phase phase) override {
    const std::optional<std::size_t> u = linear_unit(layer, k.linear_module);
    const bool backward = phase == Phase::kBackward;
    if (open_linear_ && (open_linear_->unit != u || open_linear_->backward != backward)) {
      leave_linear();
    }
    if (!u || open_linear_) return;
    open_linear_ = OpenLinear{*u, backward};
    if (backward) {
      pre_backward(*u);
    } else {
      pre_forward(*u);
    }
  }

  void after_kernel(std::size_t /*layer*/, const models::NamedKernel& /*kernel*/,
                    Phase /*phase*/) override {}

  void leave_linear() {
    if (!open_linear_) return;
    const OpenLinear open = *open_linear_;
    open_linear_.reset();
    if (open.backward) {
      post_backward(open.unit);
    } else {
      post_forward(open.unit);
    }
  }

  // FlatParamHandle.pre_unshard: in the pre-unshard stream, H2D copy of the shard (storage
  // dtype) if offloaded, and the cast to param_dtype into _mp_shard. For NO_SHARD the low-precision
  // copy *is* the unsharded parameter; it lives until post_reshard. Returns whether an _mp_shard
  // was made (and must be freed after the all-gather).
  bool pre_unshard(std::size_t u, TensorId& mp_shard) {
    const FsdpUnit& unit = units_[u];
    const std::int64_t n = unit.shard_numel;
    if (!mixed_precision() && !f_.cpu_offload) return false;
    if (f_.cpu_offload) {
      // _local_shard.to(device, non_blocking=True): a storage-dtype copy on the GPU first
      // (without mixed precision it is the all-gather input itself: flat_param_to(device)).
      mp_shard = s_.allocate(unit.name + ".h2d_shard", elements(n, storage()), pre_unshard_,
                             MemoryCategory::kParameters);
      s_.host_transfer(unit.name + ".h2d_shard", pre_unshard_, elements(n, storage()), phase(),
                       g(u));
    }
    if (mixed_precision()) {
      const TensorId staged = mp_shard;
      mp_shard = s_.allocate(unit.name + "._mp_shard", elements(n, f_.param_dtype), pre_unshard_,
                             MemoryCategory::kParameters);
      s_.copy(unit.name + ".cast_shard", pre_unshard_,
              elements(n, storage()) + elements(n, f_.param_dtype), phase(), g(u));
      if (f_.cpu_offload) s_.free(staged);
    }
    s_.program().wait_stream(unshard_, pre_unshard_);
    return true;
  }

  // _unshard: pre_unshard, the rate limiter's CPU wait, the all-gather in the unshard stream.
  void unshard(std::size_t u) {
    UnitState& st = state_[u];
    const FsdpUnit& unit = units_[u];
    if (st.unsharded) {
      if (!sharded()) return;  // NO_SHARD never frees, so the limiter's queue stays empty
      // A unit still unsharded (the root in pre-backward, SHARD_GRAD_OP's kept units):
      // FlatParamHandle.unshard() gathers nothing, and pre_unshard() does nothing unless its
      // shard is offloaded with mixed precision, when it copies and casts the shard again;
      // _unshard still pops the limiter's queue.
      TensorId mp_shard = 0;
      const bool recast = f_.cpu_offload && mixed_precision() && pre_unshard(u, mp_shard);
      wait_for_rate_limiter();
      if (recast) s_.free(mp_shard, s_.program().record_event(unshard_));
      return;
    }
    TensorId mp_shard = 0;
    const bool has_mp_shard = pre_unshard(u, mp_shard);
    if (!sharded()) {
      // NO_SHARD: no collective; the low-precision copy is the unsharded parameter.
      st.unsharded = true;
      st.has_full_param = has_mp_shard;
      st.full_param = mp_shard;
      return;
    }
    wait_for_rate_limiter();
    st.full_param =
        s_.allocate(unit.name + "._full_param_padded", elements(unit.padded_numel, f_.param_dtype),
                    unshard_, MemoryCategory::kParameters);
    st.has_full_param = true;
    s_.collective(unit.name + ".all_gather", Collective::kAllGather, unshard_, shard_pg_,
                  elements(unit.padded_numel, f_.param_dtype), phase(), g(u));
    // FlatParamHandle.post_unshard frees _mp_shard with record_stream on the unshard stream.
    if (has_mp_shard) s_.free(mp_shard, s_.program().record_event(unshard_));
    st.unsharded = true;
  }

  // _FreeEventQueue.dequeue_if_needed + event.synchronize(): with the limiter and
  // max_inflight_all_gathers free events queued, the CPU blocks on the oldest.
  void wait_for_rate_limiter() {
    if (!f_.limit_all_gathers ||
        free_events_.size() < static_cast<std::size_t>(f_.max_inflight_all_gathers)) {
      return;
    }
    const EventRef oldest = free_events_.front();
    free_events_.pop_front();
    s_.program().cpu_synchronize(oldest, "rate_limiter");
  }

  // _reshard(free): record_stream(current) + storage resize to 0; with the limiter, a free
  // event recorded on the compute stream is enqueued. post_reshard frees NO_SHARD's copy.
  void reshard(std::size_t u, bool free_unsharded) {
    UnitState& st = state_[u];
    const EventRef compute_done = s_.program().record_event(s_.compute());
    if (sharded() && free_unsharded && st.unsharded) {
      s_.free(st.full_param, compute_done);
      st.has_full_param = false;
      st.unsharded = false;
      if (f_.limit_all_gathers) free_events_.push_back(compute_done);
    } else if (!sharded() && st.has_full_param) {
      s_.free(st.full_param, compute_done);
      st.has_full_param = false;
      st.unsharded = false;
    }
    // _runtime_utils._reshard: "Flat parameter freed or not, we always have to 'unshard' the
    // parameter upon next access": NO_SHARD's low-precision copy, freed just above, is cast
    // again in pre-backward even when forward prefetched it.
    st.prefetched = false;
  }

  // _prefetch_handle: the target is unsharded early only if its own hook of this pass has not
  // run yet and nothing prefetched it (_get_handle_to_prefetch); a target still unsharded pops
  // the limiter's queue all the same (_unshard).
  void prefetch(std::size_t target, bool backward) {
    UnitState& st = state_[target];
    const bool needed = backward ? st.needs_pre_backward_unshard : st.needs_pre_forward_unshard;
    if (!needed || st.prefetched) return;
    unshard(target);
    st.prefetched = true;
  }

  // Backward prefetch's target (_get_handle_to_prefetch): the unit before u in post-forward
  // order, which records handles only (_ExecOrderData.record_post_forward).
  void prefetch_before(std::size_t u) {
    while (u > 0) {
      if (units_[--u].holds_parameters()) {
        prefetch(u, true);
        return;
      }
    }
  }

  // _pre_forward: unshard unless prefetched, wait for it, then forward prefetch of the next unit
  // in pre-forward order (root first, then blocks).
  void pre_forward(std::size_t u) override {
    s_.hook(units_[u].name + ".pre_forward", units_[u].parameter_tensors);
    if (units_[u].is_root) {
      // _root_pre_forward: the unshard and pre-unshard streams wait for the default stream
      // (the previous optimizer step); with forward prefetch every unit is a target again.
      s_.program().wait_stream(unshard_, s_.compute());
      s_.program().wait_stream(pre_unshard_, s_.compute());
      if (f_.forward_prefetch) {
        for (UnitState& st : state_) {
          st.needs_pre_forward_unshard = true;
          st.prefetched = false;
        }
      }
    }
    // _pre_forward_unshard returns at once without a handle.
    if (!units_[u].holds_parameters()) return;
    if (!state_[u].prefetched) unshard(u);
    state_[u].needs_pre_forward_unshard = false;
    s_.program().wait_stream(s_.compute(), unshard_);
    if (f_.forward_prefetch && next_pre_forward_[u]) prefetch(*next_pre_forward_[u], false);
  }

  // _post_forward_reshard: free only for non-root units of FULL_SHARD and HYBRID_SHARD.
  void post_forward(std::size_t u) override {
    if (units_[u].linear_module.empty()) leave_linear();
    s_.hook(units_[u].name + ".post_forward", units_[u].parameter_tensors);
    if (!units_[u].holds_parameters()) return;  // _post_forward_reshard: no handle, no reshard
    reshard(u, !units_[u].is_root && reshards_after_forward(strategy_));
    // _register_pre_backward_hooks: its outputs require gradients, so its pre-backward unshards.
    state_[u].needs_pre_backward_unshard = true;
  }

  // _pre_backward_hook: unshard unless prefetched, wait, then BACKWARD_PRE prefetch of the unit
  // before this one in post-forward order (_get_handle_to_prefetch). Without a handle it returns
  // after queueing the root's final callback (micro_batch).
  void pre_backward(std::size_t u) override {
    s_.hook(units_[u].name + ".pre_backward", units_[u].parameter_tensors);
    if (!units_[u].holds_parameters()) return;
    if (state_[u].needs_pre_backward_unshard) {
      if (!state_[u].prefetched) unshard(u);
      s_.program().wait_stream(s_.compute(), unshard_);
    }
    // "to ensure that a mistargeted prefetch does not actually unshard these handles".
    state_[u].needs_pre_backward_unshard = false;
    if (f_.backward_prefetch == BackwardPrefetch::kBackwardPre) prefetch_before(u);
    // The unsharded gradient accumulates as per-parameter gradients (autograd, compute stream)
    // until SplitWithSizesBackward concatenates them into flat_param.grad: made layer by layer
    // (pre_backward_layer) where the unit wraps whole layers, else all at once here.
    if (!wraps_whole_layers(units_[u], s_.workload())) {
      state_[u].grad_views.push_back(s_.allocate(units_[u].name + ".grad_views",
                                                 elements(units_[u].numel, f_.param_dtype),
                                                 s_.compute(), MemoryCategory::kGradients));
    }
  }

  // Autograd makes a layer's parameter gradients when its backward computes them (the root's LM
  // head gradient at the start of backward, its untied embedding gradient at the end), one tensor
  // per parameter where the layer itemizes them (layer_gradient_numels), as each weight-gradient
  // GEMM makes its own. Linears with units of their own make theirs; the rest of such a layer is
  // taken as one tensor.
  void pre_backward_layer(std::size_t u, std::size_t layer) override {
    if (!wraps_whole_layers(units_[u], s_.workload())) return;
    const models::Layer& l = s_.workload().layers[layer];
    std::vector<std::int64_t> numels = layer_gradient_numels(l, tied_numel_);
    if (!linear_units_[layer].empty()) {
      std::int64_t rest = layer_gradient_numel(l, tied_numel_);
      for (const auto& [name, linear] : linear_units_[layer]) rest -= units_[linear].numel;
      numels = rest > 0 ? std::vector<std::int64_t>{rest} : std::vector<std::int64_t>{};
    }
    for (const std::int64_t numel : numels) {
      state_[u].grad_views.push_back(s_.allocate(l.name + ".grad_views",
                                                 elements(numel, f_.param_dtype), s_.compute(),
                                                 MemoryCategory::kGradients));
    }
  }

  // _post_backward_hook, registered on the FlatParameter's AccumulateGrad: none without a handle.
  void post_backward(std::size_t u) override {
    if (units_[u].linear_module.empty()) leave_linear();
    if (!units_[u].holds_parameters()) return;
    const FsdpUnit& unit = units_[u];
    UnitState& st = state_[u];
    s_.hook(unit.name + ".post_backward", unit.parameter_tensors);
    const TensorId flat_grad =
        s_.allocate(unit.name + ".flat_grad", elements(unit.numel, f_.param_dtype), s_.compute(),
                    MemoryCategory::kGradients);
    s_.copy(unit.name + ".grad_cat", s_.compute(), 2 * elements(unit.numel, f_.param_dtype),
            Phase::kBackward, g(u));
    for (const TensorId view : st.grad_views) s_.free(view);
    st.grad_views.clear();
    if (st.has_kept_grad) {
      // AccumulateGrad adds the new gradient into the one kept by no_sync.
      s_.copy(unit.name + ".accumulate_unsharded_grad", s_.compute(),
              3 * elements(unit.numel, f_.param_dtype), Phase::kBackward, g(u));
      s_.free(flat_grad);
    } else if (!sync_gradients_) {
      st.kept_grad = flat_grad;
      st.has_kept_grad = true;
    }
    // _post_backward_reshard: _should_free_in_backward (sharded, and syncing or a strategy that
    // reshards after forward), then BACKWARD_POST prefetch.
    reshard(u, sync_gradients_ || reshards_after_forward(strategy_));
    // The root's target is the last child unit: already gathered by its own pre-backward where
    // the root reduces at the end of backward, prefetched here where the root holds only layers
    // after it (a custom model's head), whose backward comes first.
    if (f_.backward_prefetch == BackwardPrefetch::kBackwardPost) prefetch_before(u);
    if (!sync_gradients_) return;  // inside no_sync: the unsharded gradient waits
    const TensorId grad = st.has_kept_grad ? st.kept_grad : flat_grad;
    reduce(u, grad);
    st.has_kept_grad = false;
  }

  // _reduce_grad / _reduce_grad_no_shard in the post-backward stream.
  void reduce(std::size_t u, TensorId unsharded_grad) {
    const FsdpUnit& unit = units_[u];
    UnitState& st = state_[u];
    const Dtype reduce_dtype = f_.reduce_dtype;
    s_.program().wait_stream(post_backward_, s_.compute());
    // flat_param.grad.to(reduce_dtype), then F.pad to a multiple of the shard group.
    TensorId input = unsharded_grad;
    const bool cast = reduce_dtype != f_.param_dtype || unit.padded_numel != unit.numel;
    // NO_SHARD reduces flat_param.grad in place, and the first reduction of a step leaves it
    // there as the gradient when it already has the FlatParameter's dtype.
    const bool reduced_is_grad = !sharded() && !st.has_grad && reduce_dtype == storage();
    if (cast) {
      input = s_.allocate(
          unit.name + ".reduce_input", elements(unit.padded_numel, reduce_dtype), post_backward_,
          reduced_is_grad ? MemoryCategory::kGradients : MemoryCategory::kCommunication);
      s_.copy(unit.name + ".grad_to_reduce_dtype", post_backward_,
              elements(unit.numel, f_.param_dtype) + elements(unit.padded_numel, reduce_dtype),
              Phase::kBackward, g(u));
    }
    // _div_if_needed(padded_unsharded_grad, _gradient_predivide_factor), in place.
    if (predivide_ > 1) {
      s_.copy(unit.name + ".grad_predivide", post_backward_,
              2 * elements(sharded() ? unit.padded_numel : unit.numel, reduce_dtype),
              Phase::kBackward, g(u));
    }
    StreamId accumulate_stream = post_backward_;
    const std::int64_t grad_numel = sharded() ? unit.shard_numel : unit.numel;
    if (!sharded()) {
      // _reduce_grad_no_shard: all-reduce flat_param.grad in place, then
      // _cast_grad_to_param_dtype (a new tensor of the FlatParameter's dtype where the reduction's
      // differs). The result is NO_SHARD's full .grad, kept until the optimizer step; a later
      // reduction of the step (gradient accumulation outside no_sync) is added to it.
      s_.collective(unit.name + ".all_reduce", Collective::kAllReduce, post_backward_, shard_pg_,
                    elements(unit.numel, reduce_dtype), Phase::kBackward, g(u));
      divide_after_reduction(u, post_backward_, grad_numel);
      if (reduced_is_grad) {
        st.grad = input;
      } else if (!st.has_grad) {
        st.grad = s_.allocate(unit.name + ".grad", elements(grad_numel, storage()), post_backward_,
                              MemoryCategory::kGradients);
        s_.copy(unit.name + ".grad_to_param_dtype", post_backward_,
                elements(grad_numel, reduce_dtype) + elements(grad_numel, storage()),
                Phase::kBackward, g(u));
      } else {
        s_.copy(unit.name + ".accumulate_grad", post_backward_,
                elements(grad_numel, reduce_dtype) + 3 * elements(grad_numel, storage()),
                Phase::kBackward, g(u));
      }
      st.has_grad = true;
      offload_grad(u, post_backward_, grad_numel);
      const EventRef reduced = s_.program().record_event(post_backward_);
      // Whichever of the autograd gradient and its cast did not become .grad is dropped.
      if (cast && input != st.grad) s_.free(input);
      if (unsharded_grad != st.grad) s_.free(unsharded_grad, reduced);
      return;
    }
    // _accumulate_sharded_grad: the reduce-scatter output, cast to the FlatParameter's dtype
    // (storage()) when it differs (_cast_grad_to_param_dtype), becomes _saved_grad_shard, or
    // is added to it from the second reduction of a step on.
    const bool to_storage = reduce_dtype != storage();
    const bool kept_as_grad = !to_storage && !st.has_grad;
    TensorId shard =
        s_.allocate(unit.name + (kept_as_grad ? "._saved_grad_shard" : ".reduce_scatter_output"),
                    elements(grad_numel, reduce_dtype), post_backward_,
                    kept_as_grad ? MemoryCategory::kGradients : MemoryCategory::kCommunication);
    s_.collective(unit.name + ".reduce_scatter", Collective::kReduceScatter, post_backward_,
                  shard_pg_, elements(unit.padded_numel, reduce_dtype), Phase::kBackward, g(u));
    if (s_.hybrid()) {
      // The replica all-reduce of the shard, in the all-reduce stream on the inter-node group.
      s_.program().wait_stream(all_reduce_, post_backward_);
      s_.collective(unit.name + ".all_reduce", Collective::kAllReduce, all_reduce_, replicate_pg_,
                    elements(grad_numel, reduce_dtype), Phase::kBackward, g(u));
      accumulate_stream = all_reduce_;
    }
    divide_after_reduction(u, accumulate_stream, grad_numel);
    // The shard handed to the all-reduce stream is record_stream'ed there (HSDP); a use on the
    // post-backward stream, where it was made, needs nothing (ProgramBuilder::free).
    const auto release = [&](TensorId t) {
      s_.free(t, s_.program().record_event(accumulate_stream));
    };
    if (to_storage) {
      const TensorId cast_shard =
          s_.allocate(unit.name + (st.has_grad ? ".grad_to_param_dtype" : "._saved_grad_shard"),
                      elements(grad_numel, storage()), accumulate_stream,
                      st.has_grad ? MemoryCategory::kCommunication : MemoryCategory::kGradients);
      s_.copy(unit.name + ".grad_to_param_dtype", accumulate_stream,
              elements(grad_numel, reduce_dtype) + elements(grad_numel, storage()),
              Phase::kBackward, g(u));
      release(shard);
      shard = cast_shard;
    }
    if (st.has_grad) {
      s_.copy(unit.name + ".accumulate_grad", accumulate_stream,
              3 * elements(grad_numel, storage()), Phase::kBackward, g(u));
      release(shard);
    } else {
      st.grad = shard;
      st.has_grad = true;
    }
    offload_grad(u, accumulate_stream, grad_numel);
    if (cast) s_.free(input);
    // _post_backward_hook: record_stream(autograd_computed_grad, post_backward) before it goes
    // out of scope. Its block is reusable once the post-backward stream's reduce-scatter is done,
    // whatever the all-reduce stream still does with the shard under hybrid sharding.
    s_.free(unsharded_grad, s_.program().record_event(post_backward_));
  }

  // _div_if_needed(grad, _gradient_postdivide_factor) after the last reduction, in place.
  void divide_after_reduction(std::size_t u, StreamId stream, std::int64_t numel) {
    if (in_.cluster.world_size() <= predivide_) return;  // a postdivide factor of 1
    s_.copy(units_[u].name + ".grad_postdivide", stream, 2 * elements(numel, f_.reduce_dtype),
            Phase::kBackward, g(u));
  }

  // _offload_grad: D2H into the pinned _cpu_grad, non-blocking only for sharded strategies
  // (`non_blocking = handle.uses_sharded_strategy and ...`): under NO_SHARD the CPU waits for it.
  void offload_grad(std::size_t u, StreamId stream, std::int64_t numel) {
    if (!f_.cpu_offload) return;
    s_.host_transfer(units_[u].name + ".d2h_grad", stream, elements(numel, storage()),
                     Phase::kBackward, g(u));
    if (!sharded()) {
      s_.program().cpu_synchronize(s_.program().record_event(stream), "blocking d2h_grad");
    }
  }

  void micro_batch() {
    run_micro_batch(s_, units_, *this, in_backward_, RootPostBackward::kWhenItsGradIsReady);
    for (UnitState& st : state_) {
      st.needs_pre_backward_unshard = false;
      st.prefetched = false;
    }
    // _post_backward_final_callback: the default stream waits for the post-backward and
    // all-reduce streams. With CPU offload, after every backward that reduced gradients, the CPU
    // synchronizes with it ("Wait for non-blocking GPU -> CPU sharded gradient copies ...
    // explicitly since CPU gradients do not automatically synchronize with the GPU",
    // torch/distributed/fsdp/_runtime_utils.py): it cannot run ahead into the next micro-batch.
    s_.program().wait_stream(s_.compute(), post_backward_);
    s_.program().wait_stream(s_.compute(), all_reduce_);
    if (f_.cpu_offload && sync_gradients_) {
      s_.program().cpu_synchronize(s_.program().record_event(s_.compute()),
                                   "offload_grads_synchronize");
      // _finalize_params -> prepare_gradient_for_optim: flat_param.grad becomes the host copy
      // and the GPU gradient (_saved_grad_shard, or NO_SHARD's .grad) is dropped.
      drop_gradients();
    }
  }

  void optimizer_step() {
    std::vector<std::pair<std::string, std::int64_t>> tensors;
    for (const FsdpUnit& u : units_)
      tensors.emplace_back(u.name, sharded() ? u.shard_numel : u.numel);
    // NO_SHARD's gradients are whole on every rank after the all-reduce: no norm to reduce.
    GradientClipping clipping;
    if (sharded()) clipping.reduce_over.push_back(shard_pg_);
    s_.optimizer_step(tensors, clipping);
    // zero_grad(set_to_none=True) frees the gradients. Nothing record_stream'ed them for the
    // compute stream that read them (_runtime_utils.py record_streams only the unsharded gradient
    // and, with HSDP, the reduce-scatter output; NO_SHARD's .grad, that unsharded gradient, was
    // used by the post-backward stream, which the final callback has waited for), so each block
    // goes back at once to the pool of the stream it was made on; that stream's next work waits
    // for the compute stream anyway (_post_backward_hook:
    // post_backward_stream.wait_stream(current_stream)).
    drop_gradients();
  }

  // Frees every unit's kept gradient (a shard, or NO_SHARD's whole .grad) on the CPU's timeline.
  void drop_gradients() {
    for (UnitState& st : state_) {
      if (st.has_grad) s_.free(st.grad);
      st.has_grad = false;
    }
  }

  const ScheduleInput& in_;
  const FsdpConfig& f_;
  StepBuilder s_;
  ShardingStrategy strategy_;
  std::int32_t shard_size_;
  std::vector<FsdpUnit> units_;
  std::vector<UnitState> state_;
  StreamId unshard_;
  StreamId post_backward_;
  StreamId pre_unshard_;
  StreamId all_reduce_;
  ProcessGroup shard_pg_;
  ProcessGroup replicate_pg_;
  std::deque<EventRef> free_events_;
  // The data-parallel world's gradient predivide factor (shard group x replicas, the world).
  std::int64_t predivide_ = gradient_predivide_factor(in_.cluster.world_size());
  std::vector<std::optional<std::size_t>> next_pre_forward_;
  // Per layer, the units of its linears by NamedKernel::linear_module.
  std::vector<std::vector<std::pair<std::string, std::size_t>>> linear_units_;
  std::optional<OpenLinear> open_linear_;
  std::int64_t tied_numel_ = models::tied_weight_numel(s_.workload());
  bool sync_gradients_ = true;
  bool in_backward_ = false;
};

}  // namespace

Schedule build_fsdp1_schedule(const ScheduleInput& input) {
  // fully_shard([norm, output]) groups two modules in one unit, which FSDP1's wrapping cannot.
  if (input.fsdp.wrap_embedding_and_head)
    throw std::invalid_argument("fsdp1 schedule: wrap_embedding_and_head is FSDP2's");
  return Fsdp1Step(input).build();
}

}  // namespace fsdpsim::fsdp
