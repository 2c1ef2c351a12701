#include "models/linear_modules.hpp"

namespace fsdpsim::models {

std::vector<LinearModule> linear_modules(const Layer& layer) {
  std::vector<LinearModule> out;
  for (const NamedKernel& k : layer.forward) {
    if (k.linear != LinearPass::kForward) continue;
    LinearModule m;
    m.name = k.linear_module;
    m.weight_numel = k.kernel.gemm.n * k.kernel.gemm.k;
    m.bias_numel = k.linear_bias ? k.kernel.gemm.n : 0;
    m.float8 = k.kernel.dtype == Dtype::kFp8;
    out.push_back(std::move(m));
  }
  return out;
}

std::int64_t tied_weight_numel(const Workload& workload) {
  for (const Layer& layer : workload.layers) {
    for (const LinearModule& linear : linear_modules(layer)) {
      if (linear.weight_numel + linear.bias_numel > layer.numel) return linear.weight_numel;
    }
  }
  return 0;
}

}  // namespace fsdpsim::models
