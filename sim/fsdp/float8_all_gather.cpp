#include "sim/fsdp/float8_all_gather.hpp"

#include <numeric>
#include <stdexcept>

#include "models/linear_modules.hpp"

namespace fsdpsim::fsdp {
namespace {

std::int64_t ceil_div(std::int64_t n, std::int64_t d) { return (n + d - 1) / d; }

}  // namespace

std::vector<Float8Weights> float8_weights(const models::Workload& workload,
                                          const std::vector<FsdpUnit>& units, bool all_gather) {
  std::vector<Float8Weights> out(units.size());
  if (!all_gather) return out;
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (const std::size_t layer : units[u].layers) {
      for (const models::LinearModule& linear : models::linear_modules(workload.layers[layer])) {
        if (linear.float8) out[u].numels.push_back(linear.weight_numel);
      }
    }
  }
  return out;
}

Bytes UnitBytes::gathered(std::int64_t group) const {
  return Bytes(ceil_div(high_numel, group) * group * dtype_bytes(param_dtype) +
               ceil_div(float8_numel, group) * group * dtype_bytes(Dtype::kFp8));
}

Bytes UnitBytes::shard(std::int64_t group) const {
  return Bytes(ceil_div(high_numel, group) * dtype_bytes(param_dtype) +
               ceil_div(float8_numel, group) * dtype_bytes(Dtype::kFp8));
}

UnitBytes unit_bytes(const FsdpUnit& unit, const Float8Weights& float8, Dtype param_dtype) {
  UnitBytes b;
  b.float8_numel = std::accumulate(float8.numels.begin(), float8.numels.end(), std::int64_t{0});
  b.high_numel = unit.numel - b.float8_numel;
  if (b.high_numel < 0) {
    throw std::logic_error("unit_bytes: the float8 weights of " + unit.name +
                           " hold more parameters than the unit");
  }
  b.param_dtype = param_dtype;
  return b;
}

}  // namespace fsdpsim::fsdp
