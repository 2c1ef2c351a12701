// The nn.Linear modules of a layer and their parameters, read off its forward GEMMs: what a
// per-module runtime (an FSDP unit per linear, DeepSpeed ZeRO-3's per-module fetch) sees.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/workload.hpp"

namespace fsdpsim::models {

struct LinearModule {
  std::string name;  // NamedKernel::linear_module of its kernels ("qkv", "mlp_up")
  // nn.Linear(in, out): the weight is out x in, the forward GEMM's n x k
  // (models/kernel_factory.hpp: Y[T,out] = X[T,in] W^T); the bias is out.
  std::int64_t weight_numel = 0;
  std::int64_t bias_numel = 0;
  bool float8 = false;  // a torchao Float8Linear: its forward GEMM runs in fp8
};

// The linears whose forward GEMM the layer runs, in forward order (a tied LM head included:
// the caller decides who owns a tied weight).
std::vector<LinearModule> linear_modules(const Layer& layer);

// The weight of a linear that its own layer's parameters cannot hold, a tied LM head reading the
// embedding's table (which Layer::numel counts with the embedding), or 0 when no layer has one.
std::int64_t tied_weight_numel(const Workload& workload);

}  // namespace fsdpsim::models
