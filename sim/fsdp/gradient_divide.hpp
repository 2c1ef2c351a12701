// How FSDP divides a gradient by the data-parallel world around its reduction when it does not
// let NCCL average: in two steps, so that fp16 (and FSDP1's bf16) sums stay in range.
#pragma once

#include <cstdint>

namespace fsdpsim::fsdp {

// The divisor applied before the reduction; world / it is applied after. The smallest power of
// two f with f >= world / f, stopping where f no longer divides the world: FSDP1's
// DefaultState._get_gradient_predivide_factor
// (torch/distributed/algorithms/_comm_hooks/default_hooks.py) and FSDP2's
// _get_gradient_divide_factors for fp16 (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py)
// compute the same. 1 at world 1; 2 then 1 at world 2; 4 then 2 at world 8.
std::int64_t gradient_predivide_factor(std::int64_t data_parallel_world);

}  // namespace fsdpsim::fsdp
