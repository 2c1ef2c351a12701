// Kernels with exact FLOPs and HBM bytes, built the way models/ describes them.
#pragma once

#include <cstdint>

#include "sim/units/op_shapes.hpp"

namespace fsdpsim::hardware::testing {

// C[m,n] = A[m,k] B[k,n] (x batch): 2mnk FLOPs, A and B read once, C written once.
inline Kernel gemm_kernel(std::int64_t m, std::int64_t n, std::int64_t k,
                          Dtype dtype = Dtype::kBf16, std::int64_t batch = 1) {
  Kernel kernel;
  kernel.kind = KernelKind::kGemm;
  kernel.dtype = dtype;
  kernel.gemm = GemmShape{m, n, k, batch};
  kernel.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(k) * static_cast<double>(batch));
  kernel.bytes = Bytes(dtype_bytes(dtype) * (m * k + k * n + m * n) * batch);
  return kernel;
}

inline Kernel memory_kernel(Bytes bytes) {
  Kernel kernel;
  kernel.kind = KernelKind::kMemoryBound;
  kernel.bytes = bytes;
  return kernel;
}

// Causal flash attention: 4 * b * h * s^2 * d FLOPs for QK^T and PV, halved by the causal mask;
// the backward pass does 2.5x the forward matmul FLOPs (FlashAttention-2 paper, Sec. 4.1).
inline Kernel attention_kernel(std::int64_t batch, std::int64_t heads, std::int64_t seq,
                               std::int64_t head_dim, bool backward) {
  Kernel kernel;
  kernel.kind = KernelKind::kAttention;
  kernel.dtype = Dtype::kBf16;
  kernel.attention = AttentionShape{batch, heads, heads, seq, seq, head_dim, true, true, backward};
  const double forward = 4.0 * static_cast<double>(batch * heads) * static_cast<double>(seq) *
                         static_cast<double>(seq) * static_cast<double>(head_dim) / 2.0;
  kernel.flops = Flops(backward ? 2.5 * forward : forward);
  // Q, K, V, O (and dO, dQ, dK, dV backward) once each.
  kernel.bytes = Bytes((backward ? 8 : 4) * batch * heads * seq * head_dim * 2);
  return kernel;
}

}  // namespace fsdpsim::hardware::testing
