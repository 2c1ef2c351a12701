// The harness's own device code (kernels.cu, compiled by nvcc): an empty kernel for the launch
// cost, a fill that gives GEMM operands finite, non-zero values, and the spinning kernel of a
// stream gate (stream_gate.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace fsdpsim::harness {

// Launches one empty kernel (1 block, 1 thread) on `stream`.
cudaError_t launch_empty_kernel(cudaStream_t stream);

// Fills `count` elements of `element_bytes` (1, 2 or 4) with base | (hash(i) & mask): with the
// exponent bits in `base` and mantissa bits in `mask`, every element is a finite value in [1, 2).
cudaError_t fill_pattern(void* data, std::size_t count, int element_bytes, std::uint32_t base,
                         std::uint32_t mask, cudaStream_t stream);

// Launches one kernel (1 block, 1 thread) on `stream` that spins until words[0] reaches
// `ticket` (compared modulo 2^32), or `timeout_ns` pass; then it sets words[1] to 1.
// `words` is mapped host memory the host writes while the kernel runs.
cudaError_t launch_gate_kernel(std::uint32_t* words, std::uint32_t ticket, std::uint64_t timeout_ns,
                               cudaStream_t stream);

}  // namespace fsdpsim::harness
