// Gradient clipping by total norm before the optimizer step (training.clip_grad_norm), as
// llm-foundry/Composer (algorithms.gradient_clipping), torchtitan (training.max_norm) and most
// training loops run it. Two implementations, both in three phases -- the local norm, a reduction
// of it over the ranks that hold different shards, the scaling of every gradient:
//
// - FSDP1, FullyShardedDataParallel.clip_grad_norm_ (torch/distributed/fsdp/
//   fully_sharded_data_parallel.py) over the sharded gradients, one tensor at a time:
//   _get_grad_norm runs torch.linalg.vector_norm per gradient, then torch.stack and one more
//   vector_norm; `** norm_type`; dist.all_reduce over the FSDP process group; `** (1 / norm_type)`,
//   `max_norm / (total_norm + 1e-6)`, torch.clamp(max=1.0); then `grad.mul_(clip_coef_clamped)`
//   per gradient. With CPU offload the gradients are on the host: the norms and the scaling run
//   there, the norm goes to the GPU for the all-reduce and `.cpu()` waits for it.
// - torch.nn.utils.clip_grad_norm_ (FSDP2's DTensor gradients, DDP), foreach by default on CUDA
//   (torch/nn/utils/clip_grad.py, _get_total_norm and _clip_grads_with_norm_):
//   torch._foreach_norm, torch.stack + vector_norm; for DTensors the partial norm becomes
//   replicated by one all-reduce over the mesh dimension the gradients are sharded on
//   (torchtitan dist_utils.clip_grad_norm_: total_norm.full_tensor()); then the add, div and
//   clamp of the coefficient and torch._foreach_mul_. DDP's gradients are already identical on
//   every rank: no collective.
//
// The all-reduce is issued on the current stream (ProcessGroupNCCL: the NCCL stream waits for it,
// and the synchronous op makes it wait for the NCCL stream), so it runs in the compute stream's
// order; its communicator is the one the FSDP collectives use, hence ordered after them too.
#include <string>

#include "sim/fsdp/step_builder.hpp"

namespace fsdpsim::fsdp {

namespace {

// Scalar kernels around the all-reduce. FSDP1: stack, vector_norm, `** norm_type` before; `** (1 /
// norm_type)`, add, div, clamp after. torch.nn.utils: stack, vector_norm before; add, div,
// clamp after.
constexpr int kFsdp1ScalarKernelsBefore = 3;
constexpr int kFsdp1ScalarKernelsAfter = 4;
constexpr int kForeachScalarKernelsBefore = 2;
constexpr int kForeachScalarKernelsAfter = 3;
// A norm reads each gradient once; mul_ reads and writes it.
constexpr std::int64_t kNormPasses = 1;
constexpr std::int64_t kScalePasses = 2;

}  // namespace

void StepBuilder::clip_gradients(const std::vector<std::pair<std::string, std::int64_t>>& numels,
                                 const GradientClipping& how, bool on_host) {
  const Dtype grad_dtype = in_.training.param_storage_dtype;
  const Bytes norm_scalar = elements(1, Dtype::kFp32);
  const auto group = [](std::size_t i) { return static_cast<std::int32_t>(i); };
  const auto scalar_kernels = [&](const char* name, int count) {
    for (int k = 0; k < count; ++k)
      copy(name, compute_, norm_scalar, Phase::kOptimizer, group(numels.size() - 1));
  };
  const auto all_reduce_norm = [&] {
    for (const ProcessGroup& pg : how.reduce_over) {
      collective("clip_grad_norm.all_reduce", hardware::Collective::kAllReduce, compute_, pg,
                 norm_scalar, Phase::kOptimizer, group(numels.size() - 1));
    }
  };

  if (on_host) {
    const BytesPerSec per_rank = host_bandwidth_per_rank();
    std::int64_t total = 0;
    for (const auto& [name, numel] : numels) total += numel;
    b_.cpu_work("clip_grad_norm.cpu_norm",
                to_sim_time("clip_grad_norm.cpu_norm",
                            elements(kNormPasses * total, grad_dtype) / per_rank));
    host_transfer("clip_grad_norm.to_device", compute_, norm_scalar, Phase::kOptimizer,
                  group(numels.size() - 1));
    all_reduce_norm();
    host_waits_for_compute("clip_grad_norm.cpu");
    b_.cpu_work("clip_grad_norm.cpu_scale",
                to_sim_time("clip_grad_norm.cpu_scale",
                            elements(kScalePasses * total, grad_dtype) / per_rank));
    return;
  }

  // One kernel per gradient (FSDP1) or multi_tensor_apply launches over them (foreach).
  const auto per_gradient = [&](const char* op, std::int64_t passes) {
    for (std::size_t i = 0; i < numels.size(); ++i) {
      if (numels[i].second == 0) continue;
      const std::string name = numels[i].first + ".clip_grad_norm." + op;
      const Bytes bytes = elements(passes * numels[i].second, grad_dtype);
      if (how.foreach) {
        multi_tensor(name, compute_, bytes, Phase::kOptimizer, group(i));
      } else {
        copy(name, compute_, bytes, Phase::kOptimizer, group(i));
      }
    }
  };
  per_gradient("norm", kNormPasses);
  scalar_kernels("clip_grad_norm.total",
                 how.foreach ? kForeachScalarKernelsBefore : kFsdp1ScalarKernelsBefore);
  all_reduce_norm();
  scalar_kernels("clip_grad_norm.coefficient",
                 how.foreach ? kForeachScalarKernelsAfter : kFsdp1ScalarKernelsAfter);
  per_gradient("scale", kScalePasses);
}

}  // namespace fsdpsim::fsdp
