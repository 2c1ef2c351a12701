// The foreach and fused kernels are multi_tensor_apply launches, priced at the GPU's
// multi_tensor_memory_efficiency (hardware/gpu_spec.hpp); the for-loop ones are ordinary
// elementwise kernels.
//
// The optimizer step: AdamW's three GPU implementations (torch/optim/adamw.py: _multi_tensor_adamw,
// _fused_adamw, _single_tensor_adamw), SGD, and the CPU optimizer of CPU offload. Each kernel is
// a memory-bound op whose bytes are the tensors it reads and writes, in the parameters' storage
// dtype (fp32 master weights, or bf16 after `model.to(torch.bfloat16)`), AdamW's states in
// theirs (TrainingConfig::state_dtype: bf16 beside fp32 parameters for the fused kernel's
// mixed-precision path); temporaries are
// allocated where PyTorch allocates them, so the optimizer's share of peak memory follows.
#include <fmt/format.h>

#include <array>
#include <string_view>

#include "sim/fsdp/step_builder.hpp"

namespace fsdpsim::fsdp {

using engine::TensorId;
using memory::MemoryCategory;

namespace {

// One elementwise kernel of AdamW's update: tensors read and written per element.
struct AdamwKernel {
  std::string_view name;
  std::int64_t passes;
};

// torch/optim/adamw.py, _multi_tensor_adamw and _single_tensor_adamw (weight_decay != 0,
// amsgrad=False, capturable=False), in order; both run the same math, as _foreach_* kernels over
// the tensor list or as per-tensor kernels. 21 passes per element.
constexpr std::size_t kSqrt = 4;  // the first kernel that writes the denominator temporary
constexpr std::array<AdamwKernel, 8> kAdamwKernels = {{
    {"weight_decay", 2},  // param.mul_(1 - lr * weight_decay): r1 w1
    {"lerp", 3},          // exp_avg.lerp_(grad, 1 - beta1): r2 w1
    {"mul", 2},           // exp_avg_sq.mul_(beta2): r1 w1
    {"addcmul", 4},       // exp_avg_sq.addcmul_(grad, grad, 1 - beta2): r3 w1
    {"sqrt", 2},          // exp_avg_sq.sqrt() into a temporary: r1 w1
    {"div", 2},           // / bias_correction2_sqrt: r1 w1 (for-loop: into a second temporary)
    {"add", 2},           // .add_(eps): r1 w1
    {"addcdiv", 4},       // param.addcdiv_(exp_avg, denom, -step_size): r3 w1
}};
// aten/src/ATen/native/cuda/fused_adamw_impl.cu (_fused_adamw_kernel_cuda_, through
// fused_adam_utils.cuh FusedAdamMathFunctor): reads param, grad, exp_avg, exp_avg_sq once and
// writes param, exp_avg, exp_avg_sq once; the denominator stays in registers. Three of the seven
// passes are over the parameter and its gradient, four over the states.
constexpr std::int64_t kFusedAdamwPasses = 7;
constexpr std::int64_t kFusedAdamwStatePasses = 4;
// On the host (CPU offload), torch's default is _single_tensor_adamw (foreach and fused default to
// CUDA tensors only: torch/optim/optimizer.py _default_to_fused_or_foreach), the kernels above,
// 21 passes; foreach=True runs the _foreach_* ops' per-tensor CPU fallback, the same 21. fused=True
// runs aten/src/ATen/native/cpu/FusedAdamKernel.cpp (pytorch/pytorch#123074, PyTorch 2.4), one
// vectorized pass over the same seven streams as the CUDA kernel: kFusedAdamwPasses.
constexpr std::int64_t kCpuAdamwPasses = 21;
// torch/optim/sgd.py without momentum: param.add_(grad, alpha=-lr), r2 w1 (any implementation).
constexpr std::int64_t kSgdPasses = 3;

}  // namespace

// Passes over the parameters' storage dtype: parameters and gradients, and AdamW's states but in
// the fused kernel, which reads and writes them in their own (TrainingConfig::state_dtype).
Bytes StepBuilder::optimizer_passes(std::int64_t passes, std::int64_t numel) const {
  return Bytes(passes * numel * dtype_bytes(in_.training.param_storage_dtype));
}

void StepBuilder::gpu_optimizer(const std::vector<std::pair<std::string, std::int64_t>>& numels,
                                const std::vector<std::vector<std::int64_t>>& parameter_numels) {
  const auto group = [](std::size_t i) { return static_cast<std::int32_t>(i); };
  // The for-loop implementation's tensors of entry i: its parameters where they are given, each
  // named apart, else the entry as one tensor.
  const auto loop_tensors = [&](std::size_t i) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    if (i >= parameter_numels.size() || parameter_numels[i].size() <= 1) {
      out.push_back(numels[i]);
      return out;
    }
    for (std::size_t p = 0; p < parameter_numels[i].size(); ++p)
      out.emplace_back(fmt::format("{}.param{}", numels[i].first, p), parameter_numels[i][p]);
    return out;
  };
  if (in_.training.optimizer == Optimizer::kSgd) {
    for (std::size_t i = 0; i < numels.size(); ++i) {
      if (numels[i].second == 0) continue;
      if (in_.training.optimizer_impl == OptimizerImpl::kForLoop) {
        for (const auto& [name, numel] : loop_tensors(i)) {
          copy(name + ".sgd", compute_, optimizer_passes(kSgdPasses, numel), Phase::kOptimizer,
               group(i));
        }
      } else {
        multi_tensor(numels[i].first + ".sgd", compute_,
                     optimizer_passes(kSgdPasses, numels[i].second), Phase::kOptimizer, group(i));
      }
    }
    return;
  }
  switch (in_.training.optimizer_impl) {
    case OptimizerImpl::kFused:
      for (std::size_t i = 0; i < numels.size(); ++i) {
        if (numels[i].second == 0) continue;
        // States in their own dtype (FusedAdamMathFunctorMP's mixed-precision path where it is
        // narrower than the parameters').
        const std::int64_t n = numels[i].second;
        const Bytes bytes = optimizer_passes(kFusedAdamwPasses - kFusedAdamwStatePasses, n) +
                            elements(kFusedAdamwStatePasses * n, in_.training.state_dtype());
        multi_tensor(numels[i].first + ".adamw", compute_, bytes, Phase::kOptimizer, group(i));
      }
      return;
    case OptimizerImpl::kForeach: {
      // Each _foreach_* op runs over every tensor before the next starts; _foreach_sqrt
      // allocates its outputs (one per tensor: all parameters' worth at once, each its own
      // block, here one per FSDP unit), and they live until the last _foreach_addcdiv_.
      std::vector<TensorId> temps;
      for (std::size_t k = 0; k < kAdamwKernels.size(); ++k) {
        if (k == kSqrt) {
          for (const auto& [name, numel] : numels) {
            if (numel == 0) continue;
            temps.push_back(allocate("optimizer.exp_avg_sq_sqrt",
                                     elements(numel, in_.training.param_storage_dtype), compute_,
                                     MemoryCategory::kOptimizerState));
          }
        }
        for (std::size_t i = 0; i < numels.size(); ++i) {
          if (numels[i].second == 0) continue;
          multi_tensor(numels[i].first + ".adamw." + std::string(kAdamwKernels[k].name), compute_,
                       optimizer_passes(kAdamwKernels[k].passes, numels[i].second),
                       Phase::kOptimizer, group(i));
        }
      }
      for (const TensorId t : temps) free(t);
      return;
    }
    case OptimizerImpl::kForLoop:
      // One tensor at a time (_single_tensor_adamw loops over the parameters):
      // `exp_avg_sq.sqrt() / bias_correction2_sqrt` holds the sqrt and the quotient at once; the
      // sqrt dies when the division returns, the quotient (denom) after addcdiv_.
      for (std::size_t i = 0; i < numels.size(); ++i) {
        if (numels[i].second == 0) continue;
        for (const auto& [name, numel] : loop_tensors(i)) {
          TensorId sqrt = 0;
          TensorId denom = 0;
          for (std::size_t k = 0; k < kAdamwKernels.size(); ++k) {
            if (k == kSqrt) {
              sqrt =
                  allocate(name + ".adamw.sqrt", elements(numel, in_.training.param_storage_dtype),
                           compute_, MemoryCategory::kOptimizerState);
            } else if (k == kSqrt + 1) {
              denom =
                  allocate(name + ".adamw.denom", elements(numel, in_.training.param_storage_dtype),
                           compute_, MemoryCategory::kOptimizerState);
            }
            copy(name + ".adamw." + std::string(kAdamwKernels[k].name), compute_,
                 optimizer_passes(kAdamwKernels[k].passes, numel), Phase::kOptimizer, group(i));
            if (k == kSqrt + 1) free(sqrt);
          }
          free(denom);
        }
      }
      return;
  }
}

void StepBuilder::optimizer_step(const std::vector<std::pair<std::string, std::int64_t>>& numels,
                                 const GradientClipping& how,
                                 const std::vector<std::vector<std::int64_t>>& parameter_numels) {
  const bool clip = in_.training.clip_grad_norm;
  if (!in_.fsdp.cpu_offload) {
    if (clip) clip_gradients(numels, how, /*on_host=*/false);
    gpu_optimizer(numels, parameter_numels);
    return;
  }
  host_waits_for_compute("offload_synchronize");
  if (clip) clip_gradients(numels, how, /*on_host=*/true);
  std::int64_t total = 0;
  for (const auto& [name, numel] : numels) total += numel;
  cpu_optimizer(total);
}

BytesPerSec StepBuilder::host_bandwidth_per_rank() const {
  return in_.cluster.host_memory_bandwidth / static_cast<double>(in_.cluster.gpus_per_node);
}

void StepBuilder::cpu_optimizer(std::int64_t numel) {
  const bool sgd = in_.training.optimizer == Optimizer::kSgd;
  const bool fused = in_.training.optimizer_impl == OptimizerImpl::kFused;
  const Bytes bytes = optimizer_passes(sgd     ? kSgdPasses
                                       : fused ? kFusedAdamwPasses
                                               : kCpuAdamwPasses,
                                       numel);
  const char* name = sgd     ? "optimizer.cpu_sgd"
                     : fused ? "optimizer.cpu_fused_adamw"
                             : "optimizer.cpu_adamw";
  b_.cpu_work(name, to_sim_time(name, bytes / host_bandwidth_per_rank()));
}

}  // namespace fsdpsim::fsdp
