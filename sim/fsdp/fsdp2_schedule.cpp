// FSDP2 (per-parameter DTensor sharding, fully_shard) event by event, after
// torch/distributed/fsdp/_fully_shard/: _fsdp_param_group.py (unshard, wait_for_unshard,
// reshard, pre_backward, post_backward, _backward_prefetch), _fsdp_collectives.py
// (foreach_all_gather, foreach_all_gather_copy_out, foreach_reduce), _fsdp_state.py (root
// pre-forward, post-backward final callback).
//
// Differences from FSDP1 that change the schedule:
// - No record_stream: a buffer used on another stream is freed only after the consuming streams
//   waited for an event, so frees are stream-ordered and memory is released deterministically.
// - Four streams: all-gather copy-in, all-gather, reduce-scatter, all-reduce (HSDP).
// - Forward prefetch is implicit: the next all-gather runs on its own streams, which wait for the
//   copy-out event of the unit before the one computing (each unit's all-gather output is kept
//   until the next unit's copy-out, AllGatherState). No rate limiter, no CPU synchronization.
// - Backward prefetch is explicit, one unit ahead in reverse post-forward order.
// - Each reduce-scatter's input is kept until the next unit's reduction waits for it
//   (ReduceScatterState).
// - With torchao's float8 all-gather (fsdp.float8_all_gather), each Float8Linear weight's shard is
//   cast to float8 on the copy-in stream before the all-gather (its fsdp_pre_all_gather, eager
//   PyTorch in FSDP's hook), and the gathered and unsharded weights take one byte per element.
#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "models/linear_modules.hpp"
#include "sim/fsdp/float8_all_gather.hpp"
#include "sim/fsdp/fsdp_units.hpp"
#include "sim/fsdp/gradient_divide.hpp"
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

struct UnitState {
  bool all_gathered = false;  // an all-gather result waits for its copy-out
  TensorId all_gather_output = 0;
  EventRef all_gather_done;
  bool unsharded = false;  // per-parameter unsharded tensors present
  std::vector<TensorId> unsharded_params;
  bool post_forward_shard = false;  // reshard_after_forward = k: the k-way shard kept
  std::vector<TensorId> post_forward_params;
  EventRef post_forward_resharded;    // its copy done (FSDPParamGroup._reshard_after_forward_event)
  std::vector<TensorId> grads;        // unsharded gradients (autograd, param_dtype), per layer
  std::vector<TensorId> accumulated;  // unsharded_accumulated_grad (set_requires_gradient_sync)
  bool has_accumulated = false;
  struct ShardedGrad {
    bool present = false;  // sharded_param.grad is set (on the host under CPU offload)
    TensorId tensor = 0;   // the sharded gradient on the GPU (none under CPU offload)
  };
  std::vector<ShardedGrad> sharded_grads;  // per GradientPart
};

// The parameters of a unit that one post-backward reduces: all of them, but in the head's unit
// under a chunked loss, where the LM head's gradient is reduced after the loss's last chunk and
// the final norm's in backward (FSDPParamGroup.post_backward reduces the parameters that have a
// gradient: fsdp_params_with_grad).
struct GradientPart {
  std::string name;  // of its ops: the unit's, or "<unit>.lm_head"
  std::int64_t numel = 0;
  std::int64_t padded_numel = 0;  // a multiple of the shard group, as the unit's (fsdp_units.cpp)
  std::int64_t shard_numel = 0;
  std::vector<Bytes> accumulated;  // the gradients kept in reduce_dtype under no_sync
};
constexpr std::size_t kLossPart = 1;  // the chunked loss's LM head, in the head's unit

// The sizes of a unit's tensors that FSDP2 keeps per parameter (Fsdp2Step::unit_tensors).
struct UnitTensors {
  std::vector<Bytes> unsharded;      // the unsharded copies, in param_dtype
  std::vector<std::int64_t> numels;  // each one's elements in param_dtype (float8 weights aside)
  std::vector<Bytes> post_forward;   // this rank's 1/k of each (k = reshard_after_forward > 1)
  std::vector<Bytes> accumulated;    // the gradients kept in reduce_dtype under no_sync
};

struct HeldBuffer {  // AllGatherState / ReduceScatterState
  TensorId tensor = 0;
  EventRef event;
};

class Fsdp2Step final : private UnitHooks {
 public:
  explicit Fsdp2Step(const ScheduleInput& input)
      : in_(input),
        f_(input.fsdp),
        s_(input),
        hsdp_(s_.hybrid()),
        shard_size_(s_.shard_group_size()),
        units_(make_units(s_.workload(), f_, shard_size_)),
        state_(units_.size()),
        copy_in_(s_.add_stream("all_gather_copy_in")),
        all_gather_(s_.add_stream("all_gather")),
        reduce_scatter_(s_.add_stream("reduce_scatter")),
        all_reduce_(hsdp_ ? s_.add_stream("all_reduce") : reduce_scatter_),
        shard_pg_(s_.add_shard_group()),
        replicate_pg_(s_.add_replicate_group()),
        float8_(float8_weights(s_.workload(), units_, f_.float8_all_gather)) {
    // The unsharded parameters are nn.Parameters (FSDPParam._unsharded_param): autocast caches
    // their casts (models/autocast_weight_casts.hpp).
    s_.cache_autocast_casts();
    for (std::size_t u = 0; u < units_.size(); ++u) {
      unit_bytes_.push_back(unit_bytes(units_[u], float8_[u], f_.param_dtype));
      unit_tensors_.push_back(unit_tensors(u));
      gradient_parts_.push_back(gradient_parts(u));
      state_[u].sharded_grads.resize(gradient_parts_[u].size());
    }
    for (const models::Layer& l : s_.workload().layers) {
      std::vector<Bytes>& sizes = layer_gradients_.emplace_back();
      for (const std::int64_t n : layer_gradient_numels(l, tied_numel_))
        sizes.push_back(elements(n, f_.param_dtype));
    }
    // One communicator per post-forward group size a unit reshards to.
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!units_[u].holds_parameters()) continue;
      const std::int32_t k = reshard_after_forward(u);
      if (k > 1 && !post_forward_pgs_.contains(k)) {
        post_forward_pgs_.emplace(
            k, s_.add_process_group(fmt::format("nccl:post_forward:{}", k), k, 1));
      }
    }
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
  std::int32_t g(std::size_t u) const { return static_cast<std::int32_t>(u); }

  // FSDP2 keeps its per-parameter state in a tensor per parameter (FSDPParam): the unsharded copy
  // (init_all_gather_outputs, alloc_storage at each unshard, resize_(0) at each reshard), the
  // post-forward shard (to_sharded_post_forward) and the gradient kept in reduce_dtype under
  // no_sync (to_accumulated_grad_if_needed). One tensor each for the unit where its parameters
  // are not itemized (unit_parameter_numels), or where float8 weights are gathered in float8
  // beside the rest in param_dtype.
  UnitTensors unit_tensors(std::size_t u) const {
    const UnitBytes& bytes = unit_bytes_[u];
    const std::int32_t k = reshard_after_forward(u);
    const Dtype rd = f_.reduce_dtype;
    const std::vector<std::int64_t> numels = bytes.float8_numel > 0
                                                 ? std::vector<std::int64_t>{}
                                                 : unit_parameter_numels(units_[u], s_.workload());
    UnitTensors out;
    out.numels = numels;
    if (numels.empty()) {
      out.unsharded = {bytes.gathered(1)};
      out.numels = {bytes.high_numel};
      if (k > 1) out.post_forward = {bytes.shard(k)};
      out.accumulated = {elements(units_[u].numel, rd)};
      return out;
    }
    for (const std::int64_t n : numels) {
      out.unsharded.push_back(elements(n, f_.param_dtype));
      if (k > 1) out.post_forward.push_back(elements((n + k - 1) / k, f_.param_dtype));
      out.accumulated.push_back(elements(n, rd));
    }
    return out;
  }

  // The unit's parameters as its post-backwards reduce them: all at once, or in the head's unit
  // under a chunked loss the final norm's, then (kLossPart) the LM head's.
  std::vector<GradientPart> gradient_parts(std::size_t u) const {
    const FsdpUnit& unit = units_[u];
    GradientPart whole{unit.name, unit.numel, unit.padded_numel, unit.shard_numel,
                       unit_tensors_[u].accumulated};
    if (unit.layers.empty() ||
        s_.workload().layers[unit.layers.back()].kind != models::LayerKind::kChunkedLoss)
      return {whole};
    const models::Layer& last = s_.workload().layers[unit.layers.back()];
    const auto part = [&](std::string name, std::int64_t numel) {
      const std::int64_t shard = (numel + shard_size_ - 1) / shard_size_;
      return GradientPart{
          std::move(name), numel, shard * shard_size_, shard, {elements(numel, f_.reduce_dtype)}};
    };
    return {part(unit.name, unit.numel - last.numel), part(unit.name + ".lm_head", last.numel)};
  }

  // Whether unit u holds a chunked loss, whose wrapper turns gradient sync back on for the unit
  // after its loop (set_requires_gradient_sync(True, recurse=False)), whatever the micro-batch's.
  bool holds_chunked_loss(std::size_t u) const { return gradient_parts_[u].size() > kLossPart; }

  // Allocates a tensor of each size on the compute stream, appended to `into`.
  void allocate_each(const std::string& name, const std::vector<Bytes>& sizes,
                     MemoryCategory category, std::vector<TensorId>& into) {
    for (const Bytes b : sizes) into.push_back(s_.allocate(name, b, s_.compute(), category));
  }

  void free_all(std::vector<TensorId>& tensors) {
    for (const TensorId t : tensors) s_.free(t);
    tensors.clear();
  }

  void free_unsharded(UnitState& st) {
    free_all(st.unsharded_params);
    st.unsharded = false;
  }
  Phase phase() const { return in_backward_ ? Phase::kBackward : Phase::kForward; }
  std::size_t root() const { return units_.size() - 1; }
  // fully_shard(reshard_after_forward=...) per unit: the root's defaults to False (FSDPState's
  // lazy init: its parameters are needed again right away in backward), the last non-root
  // unit's to the others'.
  std::int32_t reshard_after_forward(std::size_t u) const {
    if (units_[u].is_root) return f_.root_reshard_after_forward;
    return u + 1 == root() ? f_.last_unit_reshard_after_forward.value_or(f_.reshard_after_forward)
                           : f_.reshard_after_forward;
  }

  // FSDPParamGroup.unshard: copy-in (cast to param_dtype into the all-gather buffer) in the
  // copy-in stream, all-gather in the all-gather stream. From the post-forward k-way shard the
  // all-gather runs over the k ranks that hold it.
  // A unit without an FSDPParamGroup has nothing to gather (_prefetch_unshard skips it).
  void unshard(std::size_t u) {
    UnitState& st = state_[u];
    if (st.all_gathered || st.unsharded || !units_[u].holds_parameters()) return;
    if (shard_size_ == 1) {
      // A one-GPU shard group gathers nothing: wait_for_unshard copies the shards in
      // (unshard_from_own_shards).
      st.all_gathered = true;
      return;
    }
    const FsdpUnit& unit = units_[u];
    const bool from_post_forward = st.post_forward_shard;
    const std::int64_t group = from_post_forward ? reshard_after_forward(u) : shard_size_;
    const std::int64_t shard = (unit.numel + group - 1) / group;
    const UnitBytes& bytes = unit_bytes_[u];
    const Bytes gathered = bytes.gathered(group);
    if (from_post_forward) {
      // The k-way shard was written on the compute stream: both all-gather streams wait for it
      // (_wait_all_gather_streams_on_event(_reshard_after_forward_event)).
      s_.program().wait_event(copy_in_, st.post_forward_resharded);
      s_.program().wait_event(all_gather_, st.post_forward_resharded);
    }
    st.all_gather_output = s_.allocate(unit.name + ".all_gather_output", gathered, copy_in_,
                                       MemoryCategory::kParameters);
    // The sharded parameters are in their storage dtype (FSDPParam.orig_dtype). Offloaded,
    // FSDPParam.all_gather_inputs first copies the shard to the device, into a tensor of its own.
    const Dtype storage = in_.training.param_storage_dtype;
    std::optional<TensorId> on_device;
    if (f_.cpu_offload && !from_post_forward) {
      on_device = s_.allocate(unit.name + ".h2d_shard", elements(shard, storage), copy_in_,
                              MemoryCategory::kParameters);
      s_.host_transfer(unit.name + ".h2d_shard", copy_in_, elements(shard, storage), phase(), g(u));
    }
    // FSDPParam.param_dtype is None where it equals the storage dtype (init_dtype_attrs). Where
    // it is not, the shards are cast into param_dtype memory of their own before
    // all_gather_copy_in copies them into the all-gather input: two passes, the cast's buffer
    // alive between them. _get_param_all_gather_inputs casts them all into one buffer
    // (torch._foreach_copy_ into flat_foreach_copy_input), for the post-forward shards too;
    // offloaded, FSDPParam.all_gather_inputs casts each (_to_dtype_if_needed), and the
    // post-forward shards, already in param_dtype on the device, go as they are. The float8
    // weights (fsdp_pre_all_gather) are cast by cast_float8_shards and copied as they are.
    const std::int64_t high = (bytes.high_numel + group - 1) / group;
    const Bytes float8_copy = 2 * elements((bytes.float8_numel + group - 1) / group, Dtype::kFp8);
    const Dtype held = from_post_forward ? f_.param_dtype : storage;  // the shards' dtype
    if (!from_post_forward) cast_float8_shards(u, group, copy_in_);   // fsdp_pre_all_gather
    if (f_.param_dtype != storage && !(f_.cpu_offload && from_post_forward)) {
      const Bytes cast = elements(high, f_.param_dtype);
      const TensorId input = s_.allocate(unit.name + ".all_gather_cast_input", cast, copy_in_,
                                         MemoryCategory::kParameters);
      s_.copy(unit.name + ".all_gather_cast", copy_in_, elements(high, held) + cast, phase(), g(u));
      s_.copy(unit.name + ".all_gather_copy_in", copy_in_, 2 * cast + float8_copy, phase(), g(u));
      s_.free(input);
    } else {
      s_.copy(unit.name + ".all_gather_copy_in", copy_in_,
              elements(high, held) + elements(high, f_.param_dtype) + float8_copy, phase(), g(u));
    }
    if (on_device) s_.free(*on_device);
    s_.program().wait_stream(all_gather_, copy_in_);
    s_.collective(unit.name + ".all_gather", Collective::kAllGather, all_gather_,
                  from_post_forward ? post_forward_pgs_.at(reshard_after_forward(u)) : shard_pg_,
                  gathered, phase(), g(u));
    st.all_gather_done = s_.program().record_event(all_gather_);
    st.all_gathered = true;
  }

  // AllGatherState's release: the all-gather streams wait for the held result's copy-out, then
  // its buffer is freed. Nothing when no result is held.
  void release_previous_all_gather() {
    if (!previous_all_gather_) return;
    s_.program().wait_event(copy_in_, previous_all_gather_->event);
    s_.program().wait_event(all_gather_, previous_all_gather_->event);
    s_.free(previous_all_gather_->tensor);
    previous_all_gather_.reset();
  }

  // FSDPParamGroup.wait_for_unshard: in forward, free the previous unit's all-gather output once
  // its copy-out is done; copy-out into the per-parameter tensors on the compute stream.
  void wait_for_unshard(std::size_t u) {
    UnitState& st = state_[u];
    if (!st.all_gathered) return;
    if (shard_size_ == 1) {
      unshard_from_own_shards(u);
      return;
    }
    const FsdpUnit& unit = units_[u];
    if (!in_backward_) release_previous_all_gather();
    s_.program().wait_event(s_.compute(), st.all_gather_done);
    const UnitBytes& bytes = unit_bytes_[u];
    allocate_each(unit.name + ".unsharded_params", unit_tensors_[u].unsharded,
                  MemoryCategory::kParameters, st.unsharded_params);
    s_.copy(unit.name + ".all_gather_copy_out", s_.compute(),
            bytes.gathered(shard_size_) + bytes.gathered(1), phase(), g(u));
    if (st.post_forward_shard) {
      free_all(st.post_forward_params);
      st.post_forward_shard = false;
    }
    const EventRef copied = s_.program().record_event(s_.compute());
    if (!in_backward_) {
      previous_all_gather_ = HeldBuffer{st.all_gather_output, copied};
    } else {
      s_.program().wait_event(copy_in_, copied);
      s_.program().wait_event(all_gather_, copied);
      s_.free(st.all_gather_output);
    }
    st.all_gathered = false;
    st.unsharded = true;
  }

  // FSDPParamGroup.unshard and wait_for_unshard where the shard group is one GPU (PyTorch 2.9 on,
  // pytorch/pytorch#160135): no all-gather and no all-gather buffer. For each parameter in turn,
  // on the compute stream: FSDPParam.all_gather_inputs makes its input (the shard moved to the
  // device when offloaded, then cast to param_dtype where that differs: a new tensor each), the
  // unsharded tensor is allocated (alloc_storage) and the input copied into it. The previous
  // parameter's input goes when the loop's variable takes the next one, the last when the method
  // returns. A float8 weight's input is its fsdp_pre_all_gather cast.
  void unshard_from_own_shards(std::size_t u) {
    const FsdpUnit& unit = units_[u];
    UnitState& st = state_[u];
    const UnitBytes& bytes = unit_bytes_[u];
    const Dtype storage = in_.training.param_storage_dtype;
    const StreamId compute = s_.compute();
    const std::vector<Bytes>& unsharded = unit_tensors_[u].unsharded;
    const std::vector<std::int64_t>& numels = unit_tensors_[u].numels;
    // An offloaded shard's copy on the device, moved there on the compute stream.
    const auto to_device = [&](const std::string& name, Bytes size) {
      const TensorId t = s_.allocate(name, size, compute, MemoryCategory::kParameters);
      s_.host_transfer(name, compute, size, phase(), g(u));
      return t;
    };
    std::optional<TensorId> previous_input;
    for (std::size_t i = 0; i < numels.size(); ++i) {
      const std::int64_t n = numels[i];
      std::optional<TensorId> input;
      if (f_.cpu_offload) input = to_device(unit.name + ".h2d_shard", elements(n, storage));
      if (f_.param_dtype != storage) {
        const TensorId cast =
            s_.allocate(unit.name + ".param_dtype_shard", elements(n, f_.param_dtype), compute,
                        MemoryCategory::kParameters);
        s_.copy(unit.name + ".to_param_dtype", compute,
                elements(n, storage) + elements(n, f_.param_dtype), phase(), g(u));
        if (input) s_.free(*input);
        input = cast;
      }
      if (previous_input) s_.free(*previous_input);
      previous_input = input;
      st.unsharded_params.push_back(s_.allocate(unit.name + ".unsharded_params", unsharded[i],
                                                compute, MemoryCategory::kParameters));
      s_.copy(unit.name + ".copy_shard", compute, 2 * elements(n, f_.param_dtype), phase(), g(u));
    }
    if (bytes.float8_numel > 0) {
      // Offloaded, all_gather_inputs moves each float8 weight's shard to the device before its
      // fsdp_pre_all_gather cast.
      std::optional<TensorId> on_device;
      if (f_.cpu_offload) {
        on_device =
            to_device(unit.name + ".h2d_float8_shards", elements(bytes.float8_numel, storage));
      }
      cast_float8_shards(u, 1, compute);
      s_.copy(unit.name + ".copy_float8_shards", compute,
              2 * elements(bytes.float8_numel, Dtype::kFp8), phase(), g(u));
      if (on_device) s_.free(*on_device);
    }
    if (previous_input) s_.free(*previous_input);
    st.all_gathered = false;
    st.unsharded = true;
  }

  void pre_forward(std::size_t u) override {
    s_.hook(units_[u].name + ".pre_forward", units_[u].parameter_tensors);
    if (units_[u].is_root) {
      // The root's pre-forward: the all-gather streams wait for the optimizer step.
      s_.program().wait_stream(copy_in_, s_.compute());
      s_.program().wait_stream(all_gather_, s_.compute());
    }
    unshard(u);
    wait_for_unshard(u);
    if (f_.forward_prefetch) {  // set_modules_to_forward_prefetch(the next n units)
      const std::size_t next = units_[u].is_root ? 0 : u + 1;
      const auto n = static_cast<std::size_t>(f_.forward_prefetch_modules);
      for (std::size_t v = next; v < std::min(next + n, root()); ++v) unshard(v);
    }
  }

  void post_forward(std::size_t u) override {
    s_.hook(units_[u].name + ".post_forward", units_[u].parameter_tensors);
    // FSDPState._post_forward of the root: free the last all-gather result once its copy-out is
    // done.
    if (units_[u].is_root) release_previous_all_gather();
    const std::int32_t k = reshard_after_forward(u);
    UnitState& st = state_[u];
    if (k == 0 || !st.unsharded) return;
    if (k > 1) {
      // FSDPParam.to_sharded_post_forward: keep this rank's 1/k of the unsharded parameters (of
      // the float8 weights' gathered bytes too: all_gather_outputs[0].narrow(...).clone()).
      const Bytes shard = unit_bytes_[u].shard(k);
      allocate_each(units_[u].name + ".post_forward_shard", unit_tensors_[u].post_forward,
                    MemoryCategory::kParameters, st.post_forward_params);
      s_.copy(units_[u].name + ".post_forward_reshard", s_.compute(), 2 * shard, Phase::kForward,
              g(u));
      st.post_forward_resharded = s_.program().record_event(s_.compute());
      st.post_forward_shard = true;
    }
    free_unsharded(st);
  }

  // FSDPState._pre_backward: FSDPParamGroup.pre_backward, none without a parameter group.
  void pre_backward(std::size_t u) override {
    s_.hook(units_[u].name + ".pre_backward", units_[u].parameter_tensors);
    if (!units_[u].holds_parameters()) return;
    unshard(u);
    wait_for_unshard(u);
    // _backward_prefetch: the unit before this one in post-forward order (always: nothing turns
    // FSDP2's default backward prefetch off), or the n before it that
    // set_modules_to_backward_prefetch lists; the order holds parameter groups only
    // (FSDPParamGroup.post_forward appends to comm_ctx.post_forward_order).
    auto n = static_cast<std::size_t>(f_.backward_prefetch_modules);
    for (std::size_t v = u; v > 0 && n > 0;) {
      if (units_[--v].holds_parameters()) {
        unshard(v);
        --n;
      }
    }
  }

  // Autograd makes each parameter's gradient when its layer's backward computes it (no
  // FlatParameter to concat into): the root's LM head gradient at the start of backward, its
  // embedding gradient at the end, unless the head is tied to the embedding's table, whose
  // gradient the head's backward then makes first.
  //
  // Under no_sync with reduce_dtype equal to param_dtype, to_accumulated_grad_if_needed left each
  // unsharded parameter's .grad in place, so the next backward's AccumulateGrad adds every new
  // gradient into it as autograd makes it (variable_grad += new_grad, torch/csrc/autograd/
  // functions/accumulate_grad.h), and frees it: one parameter's gradient in flight at a time,
  // here the layer's largest, held through its backward, and the adds after it.
  void pre_backward_layer(std::size_t u, std::size_t layer) override {
    const std::vector<Bytes>& sizes = layer_gradients_[layer];
    if (sizes.empty()) return;
    const std::string& name = s_.workload().layers[layer].name;
    if (adds_in_place(u)) {
      state_[u].grads.push_back(s_.allocate(name + ".param_grad_in_flight",
                                            *std::max_element(sizes.begin(), sizes.end()),
                                            s_.compute(), MemoryCategory::kGradients));
      return;
    }
    allocate_each(name + ".param_grads", sizes, MemoryCategory::kGradients, state_[u].grads);
  }

  void post_backward_layer(std::size_t u, std::size_t layer) override {
    if (!adds_in_place(u) || layer_gradients_[layer].empty()) return;
    const models::Layer& l = s_.workload().layers[layer];
    for (const Bytes b : layer_gradients_[layer])
      s_.copy(l.name + ".accumulate_grad", s_.compute(), 3 * b, Phase::kBackward, g(u));
    // The head's share of a tied table's gradient waits in autograd until the lookup's is added
    // in the embedding's backward (the same unit's), which frees it, or post_backward does.
    if (tied_numel_ > 0 && l.kind == models::LayerKind::kHead) return;
    free_all(state_[u].grads);
  }

  // Whether AccumulateGrad adds unit u's new gradients into the ones kept under no_sync.
  bool adds_in_place(std::size_t u) const {
    return state_[u].has_accumulated && f_.reduce_dtype == f_.param_dtype;
  }

  // torchtitan's ChunkedLossWrapper on the head's unit (lm_head, an FSDPModule of
  // fully_shard([norm, output])): reshard after forward and after backward turned off for its
  // loop, gradient sync off but for the last chunk, then lm_head.unshard(), which gathers the
  // unit again only if its forward resharded it (policy "always"); its all-gather result is
  // freed once copied out, as the root's post-forward does with the last one.
  void begin_chunked_loss(std::size_t u) override {
    unshard(u);
    wait_for_unshard(u);
    release_previous_all_gather();
  }

  // lm_head(h_chunk): FSDPState._pre_forward (the group's pre_forward finds it unsharded and
  // registers its post-backward on the chunk). The group's post-forward does not run: `norm`, the
  // group's other module, does not run again, so the per-module hook only casts the output.
  void chunk_forward(std::size_t u) override {
    s_.hook(units_[u].name + ".pre_forward", units_[u].parameter_tensors);
  }

  // The post-backward the chunk's backward fires (RegisterPostBackwardFunction on h_chunk): the
  // LM head's gradient kept unsharded in reduce_dtype (to_accumulated_grad_if_needed, then
  // accumulate_unsharded_grad_if_needed) until the last chunk reduces it; no reshard. No
  // pre-backward: the group's pre-backward hook is on the model's output, which the chunks detach.
  void chunk_backward(std::size_t u, bool last) override {
    reduce(u, kLossPart, last, /*reshard=*/false);
  }

  // lm_head.reshard() after the loop: the decoder's backward gathers the unit again for the
  // norm's backward (its pre-backward hook, on the model's output).
  void end_chunked_loss(std::size_t u) override {
    if (state_[u].unsharded) free_unsharded(state_[u]);
  }

  // FSDPParamGroup.post_backward (RegisterPostBackwardFunction): none without a parameter group.
  // An embedding's own unit (wrap_embedding_and_head) registers none, its input, the token ids,
  // needing no gradient: the final callback runs it, right after the lookup's backward, the last.
  void post_backward(std::size_t u) override {
    if (!units_[u].holds_parameters()) return;
    reduce(u, 0, sync_gradients_ || holds_chunked_loss(u), /*reshard=*/true);
  }

  // FSDPParamGroup.post_backward over the gradients of `part` of unit u: reshard (unless the
  // unit is kept unsharded through backward), then keep the gradients unsharded (no `sync`) or
  // reduce-scatter them.
  void reduce(std::size_t u, std::size_t part, bool sync, bool reshard) {
    const FsdpUnit& unit = units_[u];
    const GradientPart& p = gradient_parts_[u][part];
    UnitState& st = state_[u];
    UnitState::ShardedGrad& sharded = st.sharded_grads[part];
    s_.hook(unit.name + ".post_backward", unit.parameter_tensors);
    if (reshard && st.unsharded) free_unsharded(st);  // reshard_after_backward (default True)
    const Dtype rd = f_.reduce_dtype;
    const bool had_accumulated = st.has_accumulated;
    std::vector<TensorId> grads = std::move(st.grads);
    st.grads.clear();
    if (had_accumulated) {
      // accumulate_unsharded_grad_if_needed adds the new gradient into the one kept in
      // reduce_dtype; in param_dtype AccumulateGrad has added them already (post_backward_layer).
      if (rd != f_.param_dtype) {
        s_.copy(p.name + ".accumulate_unsharded_grad", s_.compute(),
                elements(p.numel, f_.param_dtype) + 2 * elements(p.numel, rd), Phase::kBackward,
                g(u));
      }
      free_all(grads);
      grads = std::move(st.accumulated);
      st.accumulated.clear();
    }
    if (!sync) {
      if (!had_accumulated && rd != f_.param_dtype) {
        // FSDPParam.to_accumulated_grad_if_needed: keep the gradient in reduce_dtype.
        allocate_each(p.name + ".accumulated_grad", p.accumulated, MemoryCategory::kGradients,
                      st.accumulated);
        s_.copy(p.name + ".grad_to_reduce_dtype", s_.compute(),
                elements(p.numel, f_.param_dtype) + elements(p.numel, rd), Phase::kBackward, g(u));
        free_all(grads);
      } else {
        // Already in reduce_dtype: the sum above, or a gradient made in it.
        st.accumulated = std::move(grads);
      }
      st.has_accumulated = true;
      return;
    }
    st.has_accumulated = false;
    // post_backward: wait for the previous reduce-scatter before reusing its input's memory.
    if (previous_reduce_scatter_) {
      s_.program().wait_event(s_.compute(), previous_reduce_scatter_->event);
      s_.free(previous_reduce_scatter_->tensor);
      previous_reduce_scatter_.reset();
    }
    // foreach_reduce: chunk-cat the gradients into the reduce-scatter input (reduce_dtype) on the
    // compute stream, free the gradients, reduce-scatter in the reduce-scatter stream.
    const TensorId input =
        s_.allocate(p.name + ".reduce_scatter_input", elements(p.padded_numel, rd), s_.compute(),
                    MemoryCategory::kCommunication);
    s_.copy(p.name + ".reduce_scatter_copy_in", s_.compute(),
            elements(p.numel, had_accumulated ? rd : f_.param_dtype) + elements(p.padded_numel, rd),
            Phase::kBackward, g(u));
    free_all(grads);
    s_.program().wait_stream(reduce_scatter_, s_.compute());
    // foreach_reduce, after the reduction: grad_output is the reduce-scatter output cast to the
    // parameters' storage dtype (_to_dtype_if_needed: a new tensor only when the dtypes differ),
    // and each sharded .grad a view of it, set the first time and added to after that.
    const Dtype storage = in_.training.param_storage_dtype;
    const bool cast = rd != storage;
    const bool accumulate = sharded.present;
    // Without a cast or an earlier gradient, the output itself is kept as the gradient.
    const bool output_is_grad = !cast && !accumulate && !f_.cpu_offload;
    const TensorId output =
        s_.allocate(p.name + ".reduce_scatter_output", elements(p.shard_numel, rd), reduce_scatter_,
                    output_is_grad ? MemoryCategory::kGradients : MemoryCategory::kCommunication);
    // _get_gradient_divide_factors: fp32 and bf16 reductions average in NCCL (ReduceOp.AVG, no
    // kernel); an fp16 one sums, with _div_if_needed in place before it on the reduce-scatter
    // stream and after the last reduction on the post-reduce stream.
    const bool divides = rd != Dtype::kFp32 && rd != Dtype::kBf16;
    if (divides && predivide_ > 1) {
      s_.copy(p.name + ".grad_predivide", reduce_scatter_, 2 * elements(p.padded_numel, rd),
              Phase::kBackward, g(u));
    }
    if (shard_size_ == 1) {
      // A one-GPU shard group reduces nothing: reduce_output.copy_(reduce_scatter_input)
      // (PyTorch 2.9 on, pytorch/pytorch#162021), flat tensors of one dtype: a cudaMemcpyAsync.
      s_.device_memcpy(p.name + ".reduce_scatter_copy", reduce_scatter_,
                       2 * elements(p.padded_numel, rd), Phase::kBackward, g(u));
    } else {
      s_.collective(p.name + ".reduce_scatter", Collective::kReduceScatter, reduce_scatter_,
                    shard_pg_, elements(p.padded_numel, rd), Phase::kBackward, g(u));
    }
    const EventRef scattered = s_.program().record_event(reduce_scatter_);
    StreamId post_reduce = reduce_scatter_;
    if (hsdp_) {
      s_.program().wait_stream(all_reduce_, reduce_scatter_);
      s_.collective(p.name + ".all_reduce", Collective::kAllReduce, all_reduce_, replicate_pg_,
                    elements(p.shard_numel, rd), Phase::kBackward, g(u));
      post_reduce = all_reduce_;
    }
    // With HSDP, FSDPParamGroup._all_reduce_state keeps the all-reduce input (the reduce-scatter
    // output) until the end of backward (PR #140044: the next unit's reduce-scatter must not
    // reuse its block while this all-reduce may still run), whatever becomes of the gradient.
    const auto drop_output = [&](TensorId t) {
      if (hsdp_ && t == output) {
        held_all_reduce_inputs_.push_back(output);
      } else {
        s_.free(t);
      }
    };
    if (divides && in_.cluster.world_size() > predivide_) {
      s_.copy(p.name + ".grad_postdivide", post_reduce, 2 * elements(p.shard_numel, rd),
              Phase::kBackward, g(u));
    }
    TensorId grad_output = output;
    if (cast) {
      grad_output = s_.allocate(p.name + ".grad_output", elements(p.shard_numel, storage),
                                post_reduce, MemoryCategory::kGradients);
      s_.copy(p.name + ".grad_to_storage_dtype", post_reduce,
              elements(p.shard_numel, rd) + elements(p.shard_numel, storage), Phase::kBackward,
              g(u));
      drop_output(output);
    }
    const Bytes shard_bytes = elements(p.shard_numel, storage);
    if (f_.cpu_offload) {
      // new_sharded_grad.to("cpu"): the GPU tensor is dropped at once (later work on its stream
      // runs after the copy). Non-blocking into pinned memory for a first gradient, whose event
      // the CPU waits for before the optimizer; blocking when there is one to add to on the
      // host, so the CPU waits for the copy, then adds (read both, write one).
      s_.host_transfer(p.name + ".d2h_grad", post_reduce, shard_bytes, Phase::kBackward, g(u));
      if (!accumulate) grad_offload_event_ = s_.program().record_event(post_reduce);
      if (accumulate) {
        s_.program().cpu_synchronize(s_.program().record_event(post_reduce),
                                     p.name + ".d2h_grad (blocking)");
        const std::string work = p.name + ".accumulate_grad_on_host";
        s_.program().cpu_work(work,
                              to_sim_time(work, 3.0 * shard_bytes / s_.host_bandwidth_per_rank()));
      }
      drop_output(grad_output);
    } else if (accumulate) {
      // grad._local_tensor += new_sharded_grad on the post-reduce stream.
      s_.copy(p.name + ".accumulate_grad", post_reduce, 3 * shard_bytes, Phase::kBackward, g(u));
      drop_output(grad_output);
    } else {
      sharded.tensor = grad_output;
    }
    sharded.present = true;
    previous_reduce_scatter_ = HeldBuffer{input, scattered};
  }

  // WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather for each float8 weight of unit u, on
  // `stream` (the copy-in stream, under which foreach_all_gather runs the pre-all-gather hooks;
  // the compute stream where a one-GPU shard group gathers nothing), eager:
  // without precomputed scales hp_tensor_to_float8_dynamic(reduce_amax=True) takes the shard's
  // amax (torch.max(torch.abs(x))), all-reduces it with MAX (dist.all_reduce, which the copy-in
  // stream then waits for) and turns it into a scale (amax_to_scale); then
  // hp_tensor_and_scale_to_float8 casts: x.to(float32) * scale, clamp to the e4m3 range,
  // .to(float8_e4m3fn) (torchao float8_training_tensor.py, _ToFloat8ConstrFunc; to_fp8_saturated).
  // The all-reduce runs on the shard group's communicator, behind its all-gathers. The fp32
  // temporaries are one weight's shard each and are not allocated here.
  void cast_float8_shards(std::size_t u, std::int64_t group, StreamId stream) {
    const Dtype storage = in_.training.param_storage_dtype;
    const std::int64_t e = dtype_bytes(storage);
    const std::int64_t fp32 = dtype_bytes(Dtype::kFp32);
    const std::int64_t fp8 = dtype_bytes(Dtype::kFp8);
    std::size_t i = 0;
    for (const std::int64_t numel : float8_[u].numels) {
      const std::int64_t shard = (numel + group - 1) / group;
      const std::string name = fmt::format("{}.float8_weight{}", units_[u].name, i++);
      if (!f_.precompute_float8_scale) {
        s_.copy(name + ".abs", stream, Bytes(2 * e * shard), phase(), g(u));
        s_.copy(name + ".amax", stream, Bytes(e * shard + kFloat8ScaleBytes), phase(), g(u));
        s_.collective(name + ".amax_all_reduce", Collective::kAllReduce, stream, shard_pg_,
                      Bytes(kFloat8ScaleBytes), phase(), g(u));
        s_.copy(name + ".amax_to_scale", stream, Bytes(2 * kFloat8ScaleBytes), phase(), g(u));
      }
      if (storage != Dtype::kFp32)
        s_.copy(name + ".to_fp32", stream, Bytes((e + fp32) * shard), phase(), g(u));
      // Each pass reads its input and writes its output.
      s_.copy(name + ".scale", stream, Bytes(2 * fp32 * shard + kFloat8ScaleBytes), phase(), g(u));
      s_.copy(name + ".clamp", stream, Bytes(2 * fp32 * shard), phase(), g(u));
      s_.copy(name + ".to_float8", stream, Bytes((fp32 + fp8) * shard), phase(), g(u));
    }
  }

  // torchao precompute_float8_dynamic_scale_for_fsdp after the optimizer step: the local amax of
  // every float8 weight shard (torch._foreach_norm(weights, ord=inf)), stacked, made replicate
  // by one MAX all-reduce over the shard group (DTensor's redistribution of the clamp), and the
  // scales computed from it; each weight's scale is then a view of the result.
  void precompute_float8_scales() {
    const Dtype storage = in_.training.param_storage_dtype;
    std::int64_t weights = 0;
    std::int64_t shards = 0;
    for (const Float8Weights& w : float8_) {
      weights += static_cast<std::int64_t>(w.numels.size());
      for (const std::int64_t numel : w.numels) shards += (numel + shard_size_ - 1) / shard_size_;
    }
    if (weights == 0) return;
    const Bytes amaxes(weights * kFloat8ScaleBytes);
    const engine::StreamId compute = s_.compute();
    s_.multi_tensor("float8_scales.foreach_norm", compute, elements(shards, storage) + amaxes,
                    Phase::kOptimizer, -1);
    s_.copy("float8_scales.stack", compute, 2 * amaxes, Phase::kOptimizer, -1);
    s_.collective("float8_scales.amax_all_reduce", Collective::kAllReduce, compute, shard_pg_,
                  amaxes, Phase::kOptimizer, -1);
    s_.copy("float8_scales.clamp", compute, 2 * amaxes, Phase::kOptimizer, -1);
    s_.copy("float8_scales.scale", compute, 2 * amaxes, Phase::kOptimizer, -1);
  }

  void micro_batch() {
    run_micro_batch(s_, units_, *this, in_backward_, RootPostBackward::kInTheFinalCallback);
    // The root's post-backward final callback: the compute stream waits for the reductions.
    s_.program().wait_stream(s_.compute(), reduce_scatter_);
    s_.program().wait_stream(s_.compute(), all_reduce_);
    if (previous_reduce_scatter_) {
      s_.free(previous_reduce_scatter_->tensor);
      previous_reduce_scatter_.reset();
    }
    // FSDPParamGroup.finalize_backward: each group's all-reduce state is dropped, and under CPU
    // offload the CPU blocks on each non-blocking gradient copy's grad_offload_event (the last
    // one recorded covers the others: they share one stream).
    for (const TensorId t : held_all_reduce_inputs_) s_.free(t);
    held_all_reduce_inputs_.clear();
    if (grad_offload_event_) {
      s_.program().cpu_synchronize(*grad_offload_event_, "grad_offload_event.synchronize");
      grad_offload_event_.reset();
    }
  }

  void optimizer_step() {
    std::vector<std::pair<std::string, std::int64_t>> tensors;
    // Each parameter's shard (its dim 0 split over the shard group), where the unit itemizes them.
    std::vector<std::vector<std::int64_t>> parameter_shards;
    for (const FsdpUnit& u : units_) {
      tensors.emplace_back(u.name, u.shard_numel);
      std::vector<std::int64_t>& shards = parameter_shards.emplace_back();
      for (const std::int64_t n : unit_parameter_numels(u, s_.workload()))
        shards.push_back((n + shard_size_ - 1) / shard_size_);
    }
    s_.optimizer_step(tensors, GradientClipping{{shard_pg_}, /*foreach=*/true}, parameter_shards);
    if (f_.precompute_float8_scale) precompute_float8_scales();
    for (UnitState& st : state_) {
      // zero_grad(set_to_none=True): FSDP2 never calls record_stream, so the block goes back at
      // once to the pool of the stream foreach_reduce made it on, whose next reduce-scatter waits
      // for the compute stream anyway (FSDPParamGroup.post_backward via foreach_reduce:
      // reduce_scatter_stream.wait_stream(current_stream)).
      for (UnitState::ShardedGrad& grad : st.sharded_grads) {
        if (grad.present && !f_.cpu_offload) s_.free(grad.tensor);
        grad.present = false;
      }
    }
  }

  const ScheduleInput& in_;
  const FsdpConfig& f_;
  StepBuilder s_;
  bool hsdp_;
  std::int32_t shard_size_;
  std::vector<FsdpUnit> units_;
  std::vector<UnitState> state_;
  StreamId copy_in_;
  StreamId all_gather_;
  StreamId reduce_scatter_;
  StreamId all_reduce_;
  ProcessGroup shard_pg_;
  ProcessGroup replicate_pg_;
  std::map<std::int32_t, ProcessGroup> post_forward_pgs_;  // by group size
  std::vector<Float8Weights> float8_;  // by unit; empty lists without fsdp.float8_all_gather
  std::vector<UnitBytes> unit_bytes_;  // by unit: its parameters by the dtype they are gathered in
  std::vector<UnitTensors> unit_tensors_;                  // by unit
  std::vector<std::vector<GradientPart>> gradient_parts_;  // by unit
  std::vector<std::vector<Bytes>> layer_gradients_;  // by layer: the gradients its backward makes
  std::int64_t tied_numel_ = models::tied_weight_numel(s_.workload());
  // The fp16 reduction's divisor before it (the data-parallel world: every rank, HSDP too).
  std::int64_t predivide_ = gradient_predivide_factor(in_.cluster.world_size());
  std::optional<HeldBuffer> previous_all_gather_;
  std::optional<HeldBuffer> previous_reduce_scatter_;
  std::vector<TensorId> held_all_reduce_inputs_;  // HSDP: until the end of backward
  bool sync_gradients_ = true;
  // The last non-blocking gradient copy to the host of this backward (CPU offload), if any.
  std::optional<EventRef> grad_offload_event_;
  bool in_backward_ = false;
};

}  // namespace

Schedule build_fsdp2_schedule(const ScheduleInput& input) {
  // Nested fully_shard on linears would need the kernel hooks FSDP1's schedule installs.
  if (input.fsdp.wrap_policy == WrapPolicy::kBlockAndLinear)
    throw std::invalid_argument("fsdp2 schedule: wrap policy block_and_linear is FSDP1's");
  return Fsdp2Step(input).build();
}

}  // namespace fsdpsim::fsdp
