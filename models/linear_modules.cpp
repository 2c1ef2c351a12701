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
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace fsdpsim::models
