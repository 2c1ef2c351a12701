#include "models/autocast_weight_casts.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "models/float8_linear.hpp"
#include "models/forward_rewrite.hpp"

namespace fsdpsim::models {
namespace {

// Elements of the weight a linear's GEMM reads: forward {m=T, n=out, k=in}, weight gradient
// {m=in, n=out, k=T} (models/kernel_factory.hpp).
std::int64_t weight_numel(const NamedKernel& k) {
  return k.linear == LinearPass::kForward ? k.kernel.gemm.n * k.kernel.gemm.k
                                          : k.kernel.gemm.m * k.kernel.gemm.n;
}

NamedKernel cast_kernel(std::string name, std::int64_t bytes, Dtype dtype) {
  NamedKernel k;
  k.name = std::move(name);
  k.kernel.kind = KernelKind::kMemoryBound;
  k.kernel.dtype = dtype;
  k.kernel.bytes = Bytes(bytes);
  return k;
}

}  // namespace

void add_autocast_weight_casts(Layer& layer, std::int64_t stored_bytes, std::int64_t compute_bytes,
                               bool float8_linears) {
  if (!(stored_bytes > compute_bytes && compute_bytes > 0)) {
    throw std::invalid_argument("add_autocast_weight_casts: the stored weights must be wider");
  }
  const std::int64_t per_element = stored_bytes + compute_bytes;  // read one, write the other
  std::int64_t saved = 0;
  detail::rewrite_forward(layer, [&](const NamedKernel& k, std::vector<NamedKernel>& out) {
    if (k.linear == LinearPass::kForward && !(float8_linears && becomes_float8(k))) {
      const std::int64_t n = weight_numel(k);
      out.push_back(cast_kernel(k.name + "_weight_cast", n * per_element, k.kernel.dtype));
      out.back().linear_module = k.linear_module;
      saved += n * compute_bytes;
      layer.saved_tensors.push_back({Bytes(n * compute_bytes), false});
      layer.autocast_weight_copies.push_back(Bytes(n * compute_bytes));
    }
    out.push_back(k);
  });
  std::vector<NamedKernel> backward;
  std::int64_t largest_gradient = 0;
  for (const NamedKernel& k : layer.backward) {
    backward.push_back(k);
    if (k.linear == LinearPass::kWeightGrad) {
      const std::int64_t n = weight_numel(k);
      backward.push_back(
          cast_kernel(k.linear_module + "_weight_grad_cast", n * per_element, k.kernel.dtype));
      backward.back().linear_module = k.linear_module;
      largest_gradient = std::max(largest_gradient, n * compute_bytes);
    }
  }
  layer.backward = std::move(backward);
  layer.saved_activations = layer.saved_activations + Bytes(saved);
  add_transient(layer, Pass::kBackward, Bytes(largest_gradient));
}

}  // namespace fsdpsim::models
