// One entry of a `custom` model's layer list: a unit described only by what it costs per sample
// (one micro-batch element), for models fsdpsim has no family for (vision, recommenders, ...).
// A plain aggregate, validated with the model (transformer_spec.hpp), then immutable.
#pragma once

#include <cstdint>
#include <string>

namespace fsdpsim::models {

struct CustomLayerSpec {
  std::string name;
  std::int64_t count = 1;   // identical copies in a row, named "<name>.0", "<name>.1"...
  std::int64_t params = 0;  // parameters of one copy
  // nn.Parameters of one copy (FSDP's per-parameter work); a scenario that leaves it out gets
  // min(params, 2), a weight and a bias (sim/app/model_json.cpp).
  std::int32_t parameter_tensors = 0;
  // GEMM-class work (convolutions, matmuls) of one copy for one sample. Backward is 2x forward
  // unless given: one product for the input gradient, one for the weight gradient (Kaplan et al.
  // 2020, "Scaling Laws for Neural Language Models", Sec. 2.1: C ~ 6N per token = 2N + 4N).
  double forward_flops_per_sample = 0.0;
  double backward_flops_per_sample = 0.0;
  // HBM traffic of the memory-bound kernels (norms, activations, pooling) of one copy, forward;
  // backward moves twice as much (reads the gradient and the saved input, writes the gradient).
  std::int64_t memory_bytes_per_sample = 0;
  std::int64_t saved_activation_bytes_per_sample = 0;  // kept by autograd until its backward
  std::int64_t output_bytes_per_sample = 0;     // what the next unit keeps under checkpointing
  std::int64_t transient_bytes_per_sample = 0;  // workspace alive inside its forward/backward
  // Launches per forward (backward: twice as many); a scenario that leaves it out gets 2.
  std::int32_t kernels = 1;
  bool fsdp_unit = true;  // false: left to the root unit, never checkpointed (stems, heads)
};

}  // namespace fsdpsim::models
