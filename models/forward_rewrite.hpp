// Internal to fsdpsim_models: rebuilds a layer's forward kernels one kernel at a time, for the
// passes that replace a kernel by several (models/float8_linear.hpp,
// models/autocast_weight_casts.hpp), keeping the attention core's range on the same kernels.
#pragma once

#include <utility>
#include <vector>

#include "models/workload.hpp"

namespace fsdpsim::models::detail {

// `emit(kernel, out)` appends what replaces `kernel` (the kernel itself, or several) to `out`.
template <class Emit>
void rewrite_forward(Layer& layer, Emit&& emit) {
  std::vector<NamedKernel> forward;
  std::size_t attention_begin = 0;
  std::size_t attention_end = 0;
  for (std::size_t i = 0; i <= layer.forward.size(); ++i) {
    if (i == layer.attention_forward_begin) attention_begin = forward.size();
    if (i == layer.attention_forward_end) attention_end = forward.size();
    if (i == layer.forward.size()) break;
    emit(layer.forward[i], forward);
  }
  layer.forward = std::move(forward);
  layer.attention_forward_begin = attention_begin;
  layer.attention_forward_end = attention_end;
}

}  // namespace fsdpsim::models::detail
