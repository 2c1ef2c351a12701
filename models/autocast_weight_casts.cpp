#include "models/autocast_weight_casts.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

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

void add_autocast_weight_casts(Layer& layer, std::int64_t stored_bytes,
                               std::int64_t compute_bytes) {
  if (!(stored_bytes > compute_bytes && compute_bytes > 0)) {
    throw std::invalid_argument("add_autocast_weight_casts: the stored weights must be wider");
  }
  const std::int64_t per_element = stored_bytes + compute_bytes;  // read one, write the other
  std::vector<NamedKernel> forward;
  std::size_t attention_begin = 0;
  std::size_t attention_end = 0;
  std::int64_t saved = 0;
  for (std::size_t i = 0; i <= layer.forward.size(); ++i) {
    if (i == layer.attention_forward_begin) attention_begin = forward.size();
    if (i == layer.attention_forward_end) attention_end = forward.size();
    if (i == layer.forward.size()) break;
    const NamedKernel& k = layer.forward[i];
    if (k.linear == LinearPass::kForward) {
      const std::int64_t n = weight_numel(k);
      forward.push_back(cast_kernel(k.name + "_weight_cast", n * per_element, k.kernel.dtype));
      saved += n * compute_bytes;
    }
    forward.push_back(k);
  }
  std::vector<NamedKernel> backward;
  std::int64_t largest_gradient = 0;
  for (const NamedKernel& k : layer.backward) {
    backward.push_back(k);
    if (k.linear == LinearPass::kWeightGrad) {
      const std::int64_t n = weight_numel(k);
      std::string name = k.name;
      if (const auto suffix = name.rfind("_wgrad"); suffix != std::string::npos) {
        name.erase(suffix);
      }
      backward.push_back(cast_kernel(name + "_weight_grad_cast", n * per_element, k.kernel.dtype));
      largest_gradient = std::max(largest_gradient, n * compute_bytes);
    }
  }
  layer.forward = std::move(forward);
  layer.backward = std::move(backward);
  layer.attention_forward_begin = attention_begin;
  layer.attention_forward_end = attention_end;
  layer.saved_activations = layer.saved_activations + Bytes(saved);
  layer.backward_transient_peak = layer.backward_transient_peak + Bytes(largest_gradient);
}

}  // namespace fsdpsim::models
