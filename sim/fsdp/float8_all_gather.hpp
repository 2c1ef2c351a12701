// What torchao's float8 all-gather (fsdp.float8_all_gather) changes in an FSDP2 unit's bytes:
// its Float8Linear weights are gathered, and kept unsharded, at one byte per element
// (WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather returns the float8 data of the shard;
// fsdp_post_all_gather wraps the gathered bytes as the weight), its other parameters in
// param_dtype as before.
#pragma once

#include <cstdint>
#include <vector>

#include "models/workload.hpp"
#include "sim/fsdp/fsdp_units.hpp"
#include "sim/units/dtype.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::fsdp {

// One fp32 amax or scale per weight (torchao: amax and scale are float32 scalars).
inline constexpr std::int64_t kFloat8ScaleBytes = 4;

// The elements of each Float8Linear weight of one unit, in forward order.
struct Float8Weights {
  std::vector<std::int64_t> numels;
};

// Per unit (in `units` order) its float8 weights when `all_gather` is on, else none: the
// weights of the linears whose forward GEMM runs in fp8 (models::LinearModule::float8).
std::vector<Float8Weights> float8_weights(const models::Workload& workload,
                                          const std::vector<FsdpUnit>& units, bool all_gather);

// A unit's parameters split by the dtype its all-gather moves them in.
struct UnitBytes {
  std::int64_t high_numel = 0;    // in param_dtype
  std::int64_t float8_numel = 0;  // in float8
  Dtype param_dtype = Dtype::kBf16;

  // Gathered over `group` ranks, each part right-padded to a multiple of the group (1: the
  // unsharded parameters).
  [[nodiscard]] Bytes gathered(std::int64_t group) const;
  // One rank's shard of them.
  [[nodiscard]] Bytes shard(std::int64_t group) const;
};

UnitBytes unit_bytes(const FsdpUnit& unit, const Float8Weights& float8, Dtype param_dtype);

}  // namespace fsdpsim::fsdp
