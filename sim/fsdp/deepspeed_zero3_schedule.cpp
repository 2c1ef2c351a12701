// DeepSpeed ZeRO stage 3 as DeepSpeed 0.3.12-0.4.0 ran it (2021: the ZeRO-3 that Narayanan et
// al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", 2021,
// Table 2, compare with), event by event, after deepspeed/runtime/zero/stage3.py
// (PartitionedParameterCoordinator, PrefetchCoordinator, FP16_DeepSpeedZeroOptimizer_Stage3) and
// deepspeed/runtime/zero/partition_parameters.py (_allgather_param, _allgather_params) at tag
// v0.3.13, with the zero_optimization defaults of constants.py (DeepSpeedZero3Config):
// - A parameter under stage3_param_persistence_threshold elements persists: whole on every rank,
//   never gathered in forward or backward; after each optimizer step _post_step re-gathers them
//   all with _allgather_params, which copies every rank's piece of every one of them in Python.
// - Every other parameter is all-gathered on its own when a module owning it runs (the forward,
//   recompute and backward pre-hooks' fetch_sub_module) by _allgather_param: torch.zeros of the
//   full parameter, torch.cuda.synchronize(), one narrow per rank into a list of views, and
//   torch.distributed.all_gather into that list, which ProcessGroupNCCL (PyTorch 1.8) runs as
//   one ncclAllGather into a flat buffer followed by one copy_ per rank.
// - fetch_sub_module then waits for every all-gather in flight and for the whole device
//   (_synchronize_communication: comm_stream.synchronize(), torch.cuda.synchronize()): the GPU
//   drains before each module whose parameters had to be gathered or were in flight.
// - Prefetch (prefetch_next_sub_modules, from the module trace of the first step): when nothing
//   is in flight and fewer than stage3_max_live_parameters elements are gathered, the next
//   parameters of the trace not yet gathered, up to stage3_prefetch_bucket_size elements (at
//   least one parameter).
// - Release (release_sub_module) after a module's forward or backward, unless the modules that
//   run before its next use hold fewer than stage3_max_reuse_distance elements (_keep_for_later);
//   releasing sets param.data to torch.ones(1).half().to(device), a blocking copy after which the
//   CPU has waited for the compute stream.
// - Gradients: each parameter's fp16 gradient joins an IPG bucket when its AccumulateGrad hook
//   fires; when the next would overflow reduce_bucket_size, the CPU waits for the previous bucket
//   (overlap_comm, stage 3's default: reduction_stream.synchronize()), keeps this rank's
//   partition of each of its gradients (partition_previous_reduced_grads), then reduces the
//   bucket on the reduction stream. Neither path makes the reduction stream wait for the compute
//   stream that made the gradients (the fetches' device synchronizes usually have).
//   With contiguous_gradients off (stage 3's default) the bucket is flattened, divided and
//   all-reduced (buffered_reduce_fallback, allreduce_and_copy). With it on, backward() allocates
//   two reduce_bucket_size buffers; each gradient up to that size is copied into the current one
//   on the compute stream (a larger one stays where it is, alone in its bucket); the reduction
//   divides the whole buffer (and a large gradient), then reduce-scatters each parameter on its
//   own (average_tensor with reduce_scatter, its default; partition_parameters.py
//   _reduce_scatter_gradient): a view and a narrow per rank from Python, and PyTorch 1.8's
//   ProcessGroupNCCL::reduce_scatter copies the list of per-rank inputs into a flat buffer, one
//   copy_ per rank, before ncclReduceScatter. The buffers go at the end of backward
//   (_release_ipg_buffers).
// - Step: the overflow check (x.float().sum() of every gradient partition, read on the host, and
//   an all-reduce of the flag), the gradient norm, an fp32 copy of the gradient partition,
//   unscaling, Adam on the fp32 partition (DeepSpeed's FusedAdam, one multi-tensor kernel), the
//   fp16 partition copied from it, and the persistent parameters' re-gather.
// Modules are the layers' linears (each fetches its weight before its GEMM) and, per layer, one
// module holding its other parameters (norms, embeddings, biases are persistent at any size that
// matters), hooked at the layer's start and end, so their gradients join the bucket when the
// layer's backward ends (in Megatron's layer each norm's comes between the linears'). A tied LM
// head reads the embedding's weight.
#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "hardware/cost_model.hpp"
#include "models/linear_modules.hpp"
#include "sim/fsdp/schedule_flavours.hpp"
#include "sim/fsdp/step_builder.hpp"

namespace fsdpsim::fsdp {
namespace {

using engine::EventRef;
using engine::LaunchSpec;
using engine::OpKind;
using engine::StreamId;
using engine::TensorId;
using hardware::Collective;
using memory::MemoryCategory;

// CPU time of one tensor view made from Python (narrow, view): a trivial op without autograd
// takes about 2 us from Python, half of it argument parsing (pytorch/pytorch#41383, ngimel).
constexpr Seconds kPythonViewOp = microseconds(2.0);
// DeepSpeed's FusedAdam (csrc/adam/multi_tensor_adam.cu): reads parameter, gradient and both
// moments, writes parameter and moments: 7 fp32 passes.
constexpr std::int64_t kFusedAdamPasses = 7;

struct Param {
  std::string name;
  std::size_t layer = 0;
  std::int64_t numel = 0;
  std::int64_t partition = 0;  // ds_tensor: ceil(numel / world)
  bool persistent = false;
  bool available = false;  // ZeroParamStatus.AVAILABLE (gathered)
  bool in_flight = false;  // ZeroParamStatus.INFLIGHT
  TensorId full = 0;
  TensorId grad = 0;
  bool has_grad = false;
  // contiguous_gradients: the gradient was copied into an IPG buffer and `grad` freed; .grad is
  // a view of the buffer.
  bool grad_in_buffer = false;
  // ds_active_sub_modules: modules between their pre- and post-hooks that use it. It is released
  // only when none is.
  std::int32_t active_modules = 0;
};

struct Module {
  std::string name;
  std::vector<std::size_t> params;
  std::int64_t numel = 0;  // every parameter it owns (what reuse distances count)
  bool owns_grads = true;  // false for a tied head or the model: the embedding owns that gradient
  std::optional<std::size_t> bias;  // a linear's bias, whose gradient comes before its GEMMs run
};

// One pre-hook call in the module trace (PrefetchCoordinator.sub_module_trace): the module, and
// the index of its next call (the trace's size if none).
struct Use {
  std::size_t module = 0;
  std::size_t next = 0;
};

struct LayerModules {
  std::optional<std::size_t> rest;  // the module of the layer's non-linear parameters
  std::unordered_map<std::string, std::size_t> linear;  // linear_module -> module
  std::vector<std::size_t> forward_linears;             // in forward order
  std::vector<std::size_t> backward_linears;            // in backward order
};

// The linear whose gradient GEMM `k` is, or empty: DeepSpeed's backward hooks bracket those.
const std::string& backward_linear_name(const models::NamedKernel& k) {
  static const std::string kNone;
  const bool gradient_gemm =
      k.linear == models::LinearPass::kInputGrad || k.linear == models::LinearPass::kWeightGrad;
  return gradient_gemm ? k.linear_module : kNone;
}

ScheduleInput with_fused_adam(const ScheduleInput& input) {
  ScheduleInput in = input;
  in.training.optimizer_impl = OptimizerImpl::kFused;
  return in;
}

class DeepSpeedZero3Step final : private KernelHooks {
 public:
  explicit DeepSpeedZero3Step(const ScheduleInput& input)
      : in_(with_fused_adam(input)),
        c_(in_.fsdp.deepspeed),
        dtype_(input.fsdp.param_dtype),
        s_(in_),
        world_size_(in_.cluster.world_size()),
        comm_(s_.add_stream("ds_comm")),
        reduction_(s_.add_stream("ds_reduction")),
        world_(s_.add_process_group("nccl:world", in_.cluster.world_size(), 1)) {
    make_modules();
    make_trace();
    last_call_.assign(modules_.size(), 0);
    s_.set_kernel_hooks(this);
  }

  Schedule build() {
    Schedule out;
    s_.run_steps(
        out, [this](bool) { micro_batch(); }, [this] { optimizer_step(); });
    std::int64_t partitions = 0;
    std::int64_t persistent = 0;
    for (const Param& p : params_) {
      partitions += p.partition;
      if (p.persistent) persistent += p.numel;
    }
    // fp16 partitions (ds_tensor), fp32 master partitions and the persistent parameters' full
    // copies; Adam's moments; grads_in_partition, allocated by the first reduction and kept.
    out.baseline[static_cast<std::size_t>(MemoryCategory::kParameters)] =
        elements(partitions, dtype_) + elements(partitions, Dtype::kFp32) +
        elements(persistent, dtype_);
    out.baseline[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = Bytes(
        optimizer_state_bytes_per_parameter(in_.training.optimizer, Dtype::kFp32) * partitions);
    out.baseline[static_cast<std::size_t>(MemoryCategory::kGradients)] =
        elements(partitions, dtype_);
    s_.finish(out);
    return out;
  }

 private:
  std::int32_t g(std::size_t layer) const { return static_cast<std::int32_t>(layer); }

  std::size_t add_param(const std::string& name, std::size_t layer, std::int64_t numel) {
    Param p;
    p.name = name;
    p.layer = layer;
    p.numel = numel;
    p.partition = (numel + world_size_ - 1) / world_size_;
    p.persistent = numel < c_.param_persistence_threshold;
    p.available = p.persistent;
    params_.push_back(std::move(p));
    return params_.size() - 1;
  }

  std::size_t add_module(std::string name, std::vector<std::size_t> params, bool owns_grads) {
    Module m;
    m.name = std::move(name);
    for (const std::size_t p : params) m.numel += params_[p].numel;
    m.params = std::move(params);
    m.owns_grads = owns_grads;
    modules_.push_back(std::move(m));
    return modules_.size() - 1;
  }

  // Each linear (models/linear_modules.hpp) owns its weight and bias. A linear whose weight its
  // layer cannot hold is tied to the token embedding's table (the LM head), which the embedding
  // layer holds beside its other parameter tensors; a layer's remaining elements are its other
  // tensors, in equal parts. With register_external_embedding the tied head is no module: it is
  // a function call in the model's forward, which owns the table as an external parameter.
  void make_modules() {
    const auto& layers = s_.workload().layers;
    layer_modules_.resize(layers.size());
    std::vector<std::vector<models::LinearModule>> linears;
    for (const models::Layer& l : layers) linears.push_back(models::linear_modules(l));
    const std::int64_t tied = models::tied_weight_numel(s_.workload());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const models::Layer& l = layers[i];
      LayerModules& lm = layer_modules_[i];
      std::int64_t left = l.numel;
      std::int32_t tensors_left = l.parameter_tensors;
      for (const models::LinearModule& linear : linears[i]) {
        const std::int64_t weight = linear.weight_numel;
        const std::int64_t bias = linear.bias_numel;
        std::vector<std::size_t> owned;
        const bool is_tied = weight + bias > left;
        if (is_tied) {
          if (!embedding_table_)
            throw std::logic_error("deepspeed zero3: tied weight without table");
          tied_head_ = std::make_pair(i, linear.name);
          if (c_.register_external_embedding) continue;
          owned.push_back(*embedding_table_);
        } else {
          owned.push_back(add_param(l.name + "." + linear.name + ".weight", i, weight));
          left -= weight;
          --tensors_left;
        }
        std::optional<std::size_t> bias_param;
        if (bias > 0) {
          bias_param = add_param(l.name + "." + linear.name + ".bias", i, bias);
          owned.push_back(*bias_param);
          left -= bias;
          --tensors_left;
        }
        const std::size_t m = add_module(l.name + "." + linear.name, owned, !is_tied);
        modules_[m].bias = bias_param;
        lm.linear[linear.name] = m;
        lm.forward_linears.push_back(m);
      }
      if (left > 0) {
        std::vector<std::size_t> owned;
        if (l.kind == models::LayerKind::kEmbedding && tied > 0 && left >= tied) {
          embedding_table_ = add_param(l.name + ".word_embeddings", i, tied);
          owned.push_back(*embedding_table_);
          left -= tied;
          --tensors_left;
        }
        const std::int64_t parts = left > 0 ? std::max<std::int32_t>(tensors_left, 1) : 0;
        for (std::int64_t t = 0; t < parts; ++t) {
          const std::int64_t numel =
              t + 1 < parts ? left / parts : left - (parts - 1) * (left / parts);
          owned.push_back(add_param(l.name + ".param" + std::to_string(t), i, numel));
        }
        lm.rest = add_module(l.name, owned, true);
      }
      for (const models::NamedKernel& k : l.backward) {
        const std::string& name = backward_linear_name(k);
        const auto it = lm.linear.find(name);
        if (it == lm.linear.end()) continue;
        if (std::find(lm.backward_linears.begin(), lm.backward_linears.end(), it->second) ==
            lm.backward_linears.end())
          lm.backward_linears.push_back(it->second);
      }
    }
    // register_external_parameter(model, word_embeddings.weight): the model's own hooks fetch
    // the table first in forward and first in backward.
    if (c_.register_external_embedding && embedding_table_)
      model_module_ = add_module("model", {*embedding_table_}, false);
  }

  // The pre-hook calls of one micro-batch in the order the walk below makes them, each with its
  // module's next call, and the elements of the calls before each (for reuse distances).
  void make_trace() {
    const auto& layers = s_.workload().layers;
    if (model_module_) trace_.push_back({*model_module_});
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const LayerModules& lm = layer_modules_[i];
      if (lm.rest) trace_.push_back({*lm.rest});
      for (const std::size_t m : lm.forward_linears) trace_.push_back({m});
    }
    if (model_module_) trace_.push_back({*model_module_});
    for (std::size_t i = layers.size(); i-- > 0;) {
      const LayerModules& lm = layer_modules_[i];
      if (lm.rest) trace_.push_back({*lm.rest});
      if (reruns_forward(s_.checkpoint_mode(i))) {
        for (const std::size_t m : lm.forward_linears) trace_.push_back({m});
      }
      for (const std::size_t m : lm.backward_linears) trace_.push_back({m});
    }
    std::vector<std::size_t> next(modules_.size(), trace_.size());
    for (std::size_t t = trace_.size(); t-- > 0;) {
      trace_[t].next = next[trace_[t].module];
      next[trace_[t].module] = t;
    }
    numel_before_.assign(trace_.size() + 1, 0);
    for (std::size_t t = 0; t < trace_.size(); ++t)
      numel_before_[t + 1] = numel_before_[t] + modules_[trace_[t].module].numel;
  }

  // _keep_for_later: the module is called again, and the calls from the current trace position
  // up to that call (get_reuse_distance_in_numel) hold fewer than max_reuse_distance elements.
  bool keep_for_later(std::size_t m) const {
    const std::size_t next = trace_[last_call_[m]].next;
    return next < trace_.size() &&
           numel_before_[next] - numel_before_[step_] < c_.max_reuse_distance;
  }

  void micro_batch() {
    const auto& layers = s_.workload().layers;
    step_ = 0;
    std::vector<StepBuilder::SavedIds> saved(layers.size());
    if (model_module_) pre_hook(*model_module_, Phase::kForward);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const LayerModules& lm = layer_modules_[i];
      if (lm.rest) pre_hook(*lm.rest, Phase::kForward);
      saved[i] = s_.forward_layer(i, g(i));
      if (lm.rest) post_hook(*lm.rest);
    }
    if (model_module_) post_hook(*model_module_);
    // FP16_DeepSpeedZeroOptimizer_Stage3.backward: the two IPG buffers (overlap_comm) before
    // loss.backward().
    if (c_.contiguous_gradients) {
      for (TensorId& buffer : ipg_buffers_) {
        buffer = s_.allocate("ipg_buffer", elements(c_.reduce_bucket_size, dtype_), s_.compute(),
                             MemoryCategory::kCommunication);
      }
    }
    // The model's pre-backward hook (on the loss) fires first; its post-backward never does, as
    // no input of the model requires a gradient (PostBackwardFunction on token ids).
    if (model_module_) pre_backward(*model_module_);
    for (std::size_t i = layers.size(); i-- > 0;) {
      const LayerModules& lm = layer_modules_[i];
      if (lm.rest) pre_backward(*lm.rest);
      s_.backward_layer(i, g(i), saved[i]);
      if (backward_module_) post_backward(*backward_module_, i);
      backward_module_.reset();
      if (lm.rest) post_backward(*lm.rest, i);
    }
    // FP16_DeepSpeedZeroOptimizer_Stage3.backward, after loss.backward():
    // _partition_all_parameters releases what was kept for a later use.
    for (Param& p : params_) {
      p.active_modules = 0;
      release(p);
    }
    // Then the engine's allreduce_gradients: independent_gradient_partition_epilogue, the last
    // bucket, then its partitions.
    reduce_ipg_grads();
    s_.program().cpu_synchronize(s_.program().record_event(reduction_),
                                 "reduction_stream.synchronize");
    partition_previous_reduced_grads();
    // _release_ipg_buffers.
    if (c_.contiguous_gradients) {
      for (const TensorId buffer : ipg_buffers_) s_.free(buffer);
    }
    if (step_ != trace_.size()) throw std::logic_error("deepspeed zero3: module trace mismatch");
  }

  // KernelHooks: a linear's forward (or recompute) GEMM runs between its module's pre- and
  // post-forward hooks; its backward kernels after its pre-backward hook.
  void before_kernel(std::size_t layer, const models::NamedKernel& k, Phase phase) override {
    const LayerModules& lm = layer_modules_[layer];
    if (k.linear == models::LinearPass::kForward) {
      // A tied head under register_external_embedding is no module.
      if (const auto it = lm.linear.find(k.linear_module); it != lm.linear.end())
        pre_hook(it->second, phase == Phase::kRecompute ? Phase::kBackward : phase);
      return;
    }
    if (phase == Phase::kBackward) tied_head_backward(layer, k);
    const auto it = lm.linear.find(backward_linear_name(k));
    if (phase != Phase::kBackward || it == lm.linear.end()) return;
    if (backward_module_ == it->second) return;
    if (backward_module_) post_backward(*backward_module_, layer);
    backward_module_ = it->second;
    pre_backward(it->second);
  }

  // The tied LM head's backward, the first of the step, makes the full fp16 gradient of the
  // embedding's table; autograd holds it until the lookup's gradient is added at the end of
  // backward, when the embedding module's hooks see it (pre_backward).
  void tied_head_backward(std::size_t layer, const models::NamedKernel& k) {
    if (!tied_head_ || tied_head_->first != layer || backward_linear_name(k) != tied_head_->second)
      return;
    Param& table = params_[*embedding_table_];
    if (table.has_grad) return;
    table.grad = s_.allocate(table.name + ".grad", elements(table.numel, dtype_), s_.compute(),
                             MemoryCategory::kGradients);
    table.has_grad = true;
  }

  void after_kernel(std::size_t layer, const models::NamedKernel& k, Phase /*phase*/) override {
    if (k.linear != models::LinearPass::kForward) return;
    const LayerModules& lm = layer_modules_[layer];
    if (const auto it = lm.linear.find(k.linear_module); it != lm.linear.end())
      post_hook(it->second);
  }

  // pre_sub_module_forward_function / pre_sub_module_backward_function.
  void pre_hook(std::size_t m, Phase phase) {
    const Module& module = modules_[m];
    if (step_ >= trace_.size() || trace_[step_].module != m)
      throw std::logic_error("deepspeed zero3: module trace mismatch at " + module.name);
    s_.hook(module.name + ".pre_hook", static_cast<std::int32_t>(module.params.size()));
    phase_ = phase;
    last_call_[m] = step_;
    for (const std::size_t p : module.params) ++params_[p].active_modules;
    fetch(module);
    prefetch();
    ++step_;
  }

  // post_sub_module_forward_function / post_sub_module_backward_function: release_sub_module.
  void post_hook(std::size_t m) {
    const Module& module = modules_[m];
    s_.hook(module.name + ".post_hook", static_cast<std::int32_t>(module.params.size()));
    const bool keep = keep_for_later(m);
    for (const std::size_t p : module.params) {
      Param& param = params_[p];
      --param.active_modules;
      if (param.active_modules == 0 && !keep) release(param);
    }
  }

  void pre_backward(std::size_t m) {
    // Autograd makes the module's gradients (AccumulateGrad) in its backward.
    if (modules_[m].owns_grads) {
      for (const std::size_t p : modules_[m].params) {
        Param& param = params_[p];
        if (param.has_grad) continue;  // the tied table's, made by the head (tied_head_backward)
        param.grad = s_.allocate(param.name + ".grad", elements(param.numel, dtype_), s_.compute(),
                                 MemoryCategory::kGradients);
        param.has_grad = true;
      }
    }
    pre_hook(m, Phase::kBackward);
    // A linear's bias gradient is ready before its GEMMs run: on Megatron's [s, b, h] inputs
    // PyTorch 1.8's F.linear is a matmul then add_(bias), or the bias is an output of the module
    // (skip_bias_add) added outside it, so the add's backward comes first and its AccumulateGrad
    // (sequence number UINT64_MAX, run as soon as it is ready,
    // torch/csrc/autograd/functions/accumulate_grad.cpp) reports the bias right after the
    // module's pre-backward fetch.
    const Module& module = modules_[m];
    if (module.owns_grads && module.bias) gradient_ready(*module.bias, params_[*module.bias].layer);
  }

  // The module's other gradients are ready (reduce_ready_partitions_and_remove_grads), then
  // post_sub_module_backward_function, which fires on the gradient of the module's input
  // (PostBackwardFunction, registered before the module's own ops and so run after their
  // AccumulateGrads).
  void post_backward(std::size_t m, std::size_t layer) {
    const Module& module = modules_[m];
    if (module.owns_grads) {
      for (const std::size_t p : module.params) {
        if (p != module.bias) gradient_ready(p, layer);
      }
    }
    post_hook(m);
  }

  // fetch_sub_module.
  void fetch(const Module& module) {
    bool wait = false;
    for (const std::size_t p : module.params) {
      Param& param = params_[p];
      if (param.persistent || param.available) continue;
      if (!param.in_flight) {
        all_gather(p);
        live_numel_ += param.numel;
      }
      wait = true;
    }
    if (wait) synchronize_communication();
  }

  // prefetch_next_sub_modules / get_params_to_prefetch.
  void prefetch() {
    if (!in_flight_.empty() || live_numel_ >= c_.max_live_parameters) return;
    std::int64_t total = 0;
    for (std::size_t t = step_; t < trace_.size() && total < c_.prefetch_bucket_size; ++t) {
      for (const std::size_t p : modules_[trace_[t].module].params) {
        Param& param = params_[p];
        if (param.persistent || param.available || param.in_flight) continue;
        all_gather(p);
        live_numel_ += param.numel;
        total += param.numel;
        if (total >= c_.prefetch_bucket_size) break;
      }
    }
  }

  // _synchronize_communication.
  void synchronize_communication() {
    for (const std::size_t p : in_flight_) {
      params_[p].in_flight = false;
      params_[p].available = true;
    }
    in_flight_.clear();
    s_.program().cpu_synchronize(s_.program().record_event(comm_), "comm_stream.synchronize");
    device_synchronize("torch.cuda.synchronize");
  }

  void device_synchronize(std::string_view reason) {
    for (const StreamId stream : {s_.compute(), comm_, reduction_})
      s_.program().cpu_synchronize(s_.program().record_event(stream), reason);
  }

  // _allgather_param.
  void all_gather(std::size_t p) {
    Param& param = params_[p];
    const Bytes full = elements(param.partition * world_size_, dtype_);
    const Bytes piece = elements(param.partition, dtype_);
    const std::int32_t group = g(param.layer);
    param.full = s_.allocate(param.name + ".full", full, comm_, MemoryCategory::kParameters);
    s_.copy(param.name + ".zeros", comm_, full, phase_, group);
    device_synchronize("_allgather_param");
    s_.program().cpu_work(param.name + ".rank_views",
                          to_sim_time(kPythonViewOp * static_cast<double>(world_size_)));
    s_.copy(param.name + ".copy_shard", comm_, 2 * piece, phase_, group);
    const TensorId flat =
        s_.allocate(param.name + ".flat", full, comm_, MemoryCategory::kCommunication);
    const engine::OpId gather = s_.collective(param.name + ".all_gather", Collective::kAllGather,
                                              comm_, world_, full, phase_, group);
    per_rank_copies(param.name + ".copy_out", comm_, piece, duration_of(gather), group);
    s_.free(flat, s_.program().record_event(comm_));
    param.in_flight = true;
    in_flight_.push_back(p);
  }

  // ProcessGroupNCCL::allgather's copy_ of each rank's piece out of the flat buffer, launched by
  // the CPU right after the collective: as one op whose launch costs the CPU `world` launches and
  // which ends when the last copy would. The copies cannot start before the collective ends, nor
  // run before they are launched: end = max(collective + world x copy, world x launch + copy)
  // after the collective's start, taken as its issue (exact for _allgather_param, whose CPU has
  // just synchronized; pass a zero collective for copies after no collective).
  // A launched op's device time (priced once: a second collective_time() would count the
  // collective again in a calibration's usage).
  Seconds duration_of(engine::OpId op) {
    return Seconds(s_.program().program().ops[op].duration.seconds());
  }

  void per_rank_copies(const std::string& name, StreamId stream, Bytes piece, Seconds collective,
                       std::int32_t group) {
    Kernel k;
    k.kind = KernelKind::kMemoryBound;
    k.bytes = 2 * piece;
    const double n = static_cast<double>(world_size_);
    const Seconds copy = hardware::kernel_time(in_.cluster.gpu, k);
    const Seconds launches = in_.cluster.kernel_launch_overhead * n;
    const Seconds end = std::max(collective + copy * n, launches + copy);
    launch_batch(name, stream, group, end - std::max(collective, launches), launches,
                 Bytes(2 * piece.value() * world_size_));
  }

  // One op standing for kernels the CPU launches back to back: `launch_cost` of CPU time, then
  // `duration` on `stream`.
  void launch_batch(const std::string& name, StreamId stream, std::int32_t group, Seconds duration,
                    Seconds launch_cost, Bytes bytes) {
    LaunchSpec spec;
    spec.name = name;
    spec.stream = stream;
    spec.kind = OpKind::kCopy;
    spec.phase = static_cast<std::uint8_t>(phase_);
    spec.group = group;
    spec.duration = to_sim_time(duration);
    spec.launch_cost = to_sim_time(launch_cost);
    spec.bytes = bytes;
    s_.program().launch(spec);
  }

  // Param.partition() (_partition_param): the gathered copy is dropped (no record_stream) and
  // `param.data = torch.ones(1).half().to(param.device)` replaces it: a blocking host-to-device
  // copy on the current (compute) stream, so the CPU waits for the kernels already queued there.
  void release(Param& param) {
    if (param.persistent || !param.available) return;
    s_.program().cpu_synchronize(s_.program().record_event(s_.compute()),
                                 "partition: ones(1).to(device)");
    s_.free(param.full);
    param.available = false;
    live_numel_ -= param.numel;
  }

  // reduce_independent_p_g_buckets_and_remove_grads.
  void gradient_ready(std::size_t p, std::size_t layer) {
    Param& param = params_[p];
    if (bucket_numel_ + param.numel > c_.reduce_bucket_size) reduce_ipg_grads();
    if (c_.contiguous_gradients && param.numel <= c_.reduce_bucket_size) {
      // new_grad_tensor.copy_(param.grad.view(-1)); param.grad.data = new_grad_tensor.data.
      s_.copy(param.name + ".grad_to_ipg_buffer", s_.compute(), 2 * elements(param.numel, dtype_),
              Phase::kBackward, g(layer));
      s_.free(param.grad);
      param.grad_in_buffer = true;
    }
    bucket_.push_back(p);
    bucket_numel_ += param.numel;
    bucket_layer_ = layer;
  }

  // reduce_ipg_grads (overlap_comm).
  void reduce_ipg_grads() {
    s_.program().cpu_synchronize(s_.program().record_event(reduction_),
                                 "reduction_stream.synchronize");
    partition_previous_reduced_grads();
    if (bucket_.empty()) return;
    if (c_.contiguous_gradients) {
      average_tensor();
    } else {
      all_reduce_bucket();
    }
    previous_ = bucket_;
    bucket_.clear();
    bucket_numel_ = 0;
  }

  // buffered_reduce_fallback -> allreduce_and_copy on the reduction stream: flatten, divide,
  // all-reduce, copy each gradient back.
  void all_reduce_bucket() {
    const std::int32_t group = g(bucket_layer_);
    const Bytes bytes = elements(bucket_numel_, dtype_);
    const TensorId flat =
        s_.allocate("ipg_bucket.flat", bytes, reduction_, MemoryCategory::kCommunication);
    s_.copy("ipg_bucket.flatten", reduction_, 2 * bytes, Phase::kBackward, group);
    s_.copy("ipg_bucket.div", reduction_, 2 * bytes, Phase::kBackward, group);
    s_.collective("ipg_bucket.all_reduce", Collective::kAllReduce, reduction_, world_, bytes,
                  Phase::kBackward, group);
    for (const std::size_t p : bucket_) {
      s_.copy(params_[p].name + ".grad_copy_back", reduction_,
              2 * elements(params_[p].numel, dtype_), Phase::kBackward, group);
    }
    s_.free(flat, s_.program().record_event(reduction_));
  }

  // average_tensor with reduce_scatter on the reduction stream: div_ of the whole IPG buffer
  // (however full) and of a gradient too large for it, then _reduce_scatter_gradients.
  void average_tensor() {
    const std::int32_t group = g(bucket_layer_);
    s_.copy("ipg_buffer.div", reduction_, 2 * elements(c_.reduce_bucket_size, dtype_),
            Phase::kBackward, group);
    for (const std::size_t p : bucket_) {
      if (params_[p].grad_in_buffer) continue;
      s_.copy(params_[p].name + ".grad_div", reduction_, 2 * elements(params_[p].numel, dtype_),
              Phase::kBackward, group);
    }
    for (const std::size_t p : bucket_) reduce_scatter_gradient(p, group);
  }

  // _reduce_scatter_gradient: for each rank, param.grad.view(-1).narrow(...), two Python ops,
  // where its piece lies inside the gradient, else torch.zeros of a piece (with the gradient's
  // tail copied in for the piece that straddles its end); then ProcessGroupNCCL::reduce_scatter
  // of that list: a flat input, one copy_ per rank into it, ncclReduceScatter into this rank's
  // piece of the gradient.
  void reduce_scatter_gradient(std::size_t p, std::int32_t group) {
    const Param& param = params_[p];
    const Bytes piece = elements(param.partition, dtype_);
    const Bytes full = elements(param.partition * world_size_, dtype_);
    const std::int64_t inside = param.numel / param.partition;
    const std::int64_t tail = param.numel - inside * param.partition;
    const std::int64_t zeroed = world_size_ - inside;
    s_.program().cpu_work(param.name + ".grad_rank_views",
                          to_sim_time(kPythonViewOp * 2.0 * static_cast<double>(inside)));
    TensorId zeros = 0;
    if (zeroed > 0) {
      // The zeroed pieces as one block (each is its own small allocation in PyTorch).
      zeros = s_.allocate(param.name + ".grad_zero_pieces", Bytes(piece.value() * zeroed),
                          reduction_, MemoryCategory::kCommunication);
      zero_fills(param.name + ".grad_zero_pieces", reduction_, piece, zeroed, group);
      if (tail > 0) {
        s_.copy(param.name + ".grad_tail", reduction_, 2 * elements(tail, dtype_), Phase::kBackward,
                group);
      }
    }
    const TensorId flat =
        s_.allocate(param.name + ".grad_flat", full, reduction_, MemoryCategory::kCommunication);
    per_rank_copies(param.name + ".grad_flatten", reduction_, piece, Seconds(0.0), group);
    s_.collective(param.name + ".reduce_scatter", Collective::kReduceScatter, reduction_, world_,
                  full, Phase::kBackward, group);
    const EventRef done = s_.program().record_event(reduction_);
    s_.free(flat, done);
    if (zeroed > 0) s_.free(zeros, done);
  }

  // `count` memory-bound kernels writing `bytes` each on `stream` (torch.zeros from Python): as
  // many eager-op launches of CPU time, and their device time.
  void zero_fills(const std::string& name, StreamId stream, Bytes bytes, std::int64_t count,
                  std::int32_t group) {
    Kernel k;
    k.kind = KernelKind::kMemoryBound;
    k.bytes = bytes;
    const double n = static_cast<double>(count);
    launch_batch(name, stream, group, hardware::kernel_time(in_.cluster.gpu, k) * n,
                 in_.cluster.kernel_launch_overhead * n, Bytes(bytes.value() * count));
  }

  // partition_previous_reduced_grads: this rank's piece of each reduced gradient into
  // grads_in_partition; the full gradient is dropped (a view of an IPG buffer frees nothing).
  void partition_previous_reduced_grads() {
    for (const std::size_t p : previous_) {
      Param& param = params_[p];
      s_.copy(param.name + ".grad_partition", reduction_, 2 * elements(param.partition, dtype_),
              Phase::kBackward, -1);
      if (param.has_grad && !param.grad_in_buffer)
        s_.free(param.grad, s_.program().record_event(reduction_));
      param.has_grad = false;
      param.grad_in_buffer = false;
    }
    previous_.clear();
  }

  void optimizer_step() {
    std::vector<std::pair<std::string, std::int64_t>> partitions;
    std::int64_t total = 0;
    for (const Param& p : params_) {
      partitions.emplace_back(p.name, p.partition);
      total += p.partition;
    }
    const StreamId compute = s_.compute();
    // has_overflow_partitioned_grads_serial: float(x.float().sum()) per gradient partition.
    for (const Param& p : params_) {
      s_.copy(p.name + ".overflow_check", compute,
              elements(p.partition, dtype_) + elements(2 * p.partition, Dtype::kFp32),
              Phase::kOptimizer, -1);
      s_.program().cpu_synchronize(s_.program().record_event(compute), "overflow_check.item");
    }
    s_.collective("overflow.all_reduce", Collective::kAllReduce, compute, world_, Bytes(1),
                  Phase::kOptimizer, -1);
    s_.program().cpu_synchronize(s_.program().record_event(compute), "overflow.item");
    // _get_norm_groups: the norm of every gradient partition, all-reduced.
    s_.clip_gradients(partitions, GradientClipping{{world_}, /*foreach=*/false}, false);
    // _prepare_fp32_grad_for_sub_group: the flat fp16 partition cast to an fp32 gradient.
    const TensorId fp32_grad = s_.allocate("optimizer.fp32_grad", elements(total, Dtype::kFp32),
                                           compute, MemoryCategory::kGradients);
    s_.copy("optimizer.fp32_grad_cast", compute,
            elements(total, dtype_) + elements(total, Dtype::kFp32), Phase::kOptimizer, -1);
    s_.copy("optimizer.unscale", compute, 2 * elements(total, Dtype::kFp32), Phase::kOptimizer, -1);
    if (in_.training.optimizer == Optimizer::kAdamW) {
      s_.multi_tensor("optimizer.fused_adam", compute,
                      elements(kFusedAdamPasses * total, Dtype::kFp32), Phase::kOptimizer, -1);
    } else {
      s_.gpu_optimizer({{"optimizer", total}});
    }
    s_.copy("optimizer.fp16_partition", compute,
            elements(total, Dtype::kFp32) + elements(total, dtype_), Phase::kOptimizer, -1);
    s_.free(fp32_grad);  // made and read on the compute stream
    gather_persistent();
  }

  // _post_step: _allgather_params over every persistent parameter: one all-gather of their
  // pieces (a narrow per rank, a copy_ per rank out of the flat buffer), then, per parameter and
  // per rank, two narrows, a view and a copy_ from Python.
  void gather_persistent() {
    std::int64_t pieces = 0;
    std::vector<std::size_t> persistent;
    for (std::size_t p = 0; p < params_.size(); ++p) {
      if (!params_[p].persistent) continue;
      persistent.push_back(p);
      pieces += params_[p].partition;
    }
    if (persistent.empty()) return;
    // Outside the coordinator's comm-stream context: everything runs on the current (compute)
    // stream, which the synchronous all_gather makes wait for NCCL; the CPU does not wait.
    const StreamId compute = s_.compute();
    const Bytes full = elements(pieces * world_size_, dtype_);
    const TensorId flat =
        s_.allocate("persistent.flat", full, compute, MemoryCategory::kCommunication);
    s_.program().cpu_work("persistent.rank_views",
                          to_sim_time(kPythonViewOp * static_cast<double>(world_size_)));
    phase_ = Phase::kOptimizer;
    const engine::OpId gather = s_.collective("persistent.all_gather", Collective::kAllGather,
                                              compute, world_, full, Phase::kOptimizer, -1);
    per_rank_copies("persistent.copy_out", compute, elements(pieces, dtype_), duration_of(gather),
                    -1);
    for (const std::size_t p : persistent) {
      s_.program().cpu_work(params_[p].name + ".rank_views",
                            to_sim_time(kPythonViewOp * 3.0 * static_cast<double>(world_size_)));
      per_rank_copies(params_[p].name + ".copy_pieces", compute,
                      elements(params_[p].partition, dtype_), Seconds(0.0), -1);
    }
    s_.free(flat);  // made and read on the compute stream
  }

  const ScheduleInput in_;
  const DeepSpeedZero3Config& c_;
  const Dtype dtype_;
  StepBuilder s_;
  const std::int64_t world_size_;
  StreamId comm_;
  StreamId reduction_;
  ProcessGroup world_;
  std::vector<Param> params_;
  std::vector<Module> modules_;
  std::vector<LayerModules> layer_modules_;
  std::optional<std::size_t> embedding_table_;  // the tied LM head's weight, if any
  // The tied LM head: its layer and linear (models::LinearModule::name).
  std::optional<std::pair<std::size_t, std::string>> tied_head_;
  std::optional<std::size_t> model_module_;  // the model, with register_external_embedding
  std::vector<Use> trace_;
  std::vector<std::int64_t> numel_before_;  // per trace position: elements of the calls before
  std::vector<std::size_t> last_call_;      // per module: its latest call's trace position
  std::size_t step_ = 0;                    // PrefetchCoordinator.step_id
  Phase phase_ = Phase::kForward;
  std::optional<std::size_t> backward_module_;  // the linear whose backward kernels are running
  std::vector<std::size_t> in_flight_;
  std::int64_t live_numel_ = 0;  // total_available_parameter_numel
  std::vector<std::size_t> bucket_;
  std::int64_t bucket_numel_ = 0;
  std::size_t bucket_layer_ = 0;
  std::vector<std::size_t> previous_;
  std::array<TensorId, 2> ipg_buffers_{};  // contiguous_gradients, during backward
};

}  // namespace

Schedule build_deepspeed_zero3_schedule(const ScheduleInput& input) {
  return DeepSpeedZero3Step(input).build();
}

}  // namespace fsdpsim::fsdp
