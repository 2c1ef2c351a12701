// kernel_time(): one GPU kernel's duration, by kind.
//
// - GEMM: gemm_cost.cpp (roofline with tile/wave quantization).
// - Fused attention: FLOPs at the FlashAttention efficiency of the pass (forward or backward;
//   Dao, "FlashAttention-2", 2023, Sec. 4.1: the backward pass reaches a lower fraction of peak
//   than the forward), or HBM-bound if its bytes say so (roofline).
// - Memory-bound kernels (elementwise, norms, softmax, copies): bytes over achievable HBM
//   bandwidth.
// Every kernel lasts at least kMinKernelDuration (roofline.hpp).
#include <algorithm>
#include <stdexcept>

#include "hardware/calibrated_curves.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/gemm_cost.hpp"
#include "hardware/roofline.hpp"

namespace fsdpsim::hardware {
namespace {

Seconds attention_time(const GpuSpec& gpu, const Kernel& kernel) {
  const double efficiency = kernel.attention.backward ? gpu.attention_backward_efficiency
                                                      : gpu.attention_forward_efficiency;
  const Seconds compute = compute_time(gpu, kernel.flops, kernel.dtype, efficiency);
  return std::max(compute, memory_time(gpu, kernel.bytes));
}

Seconds unfloored_kernel_time(const GpuSpec& gpu, const Kernel& kernel) {
  switch (kernel.kind) {
    case KernelKind::kGemm:
      return gemm_time(gpu, kernel);
    case KernelKind::kAttention:
      return attention_time(gpu, kernel);
    case KernelKind::kMemoryBound:
      return memory_time(gpu, kernel.bytes);
  }
  throw std::logic_error("hardware: kernel_time got an unknown KernelKind");
}

}  // namespace

Seconds kernel_time(const GpuSpec& gpu, const Kernel& kernel) {
  if (kernel.flops.value() < 0.0 || kernel.bytes.value() < 0) {
    throw std::logic_error("hardware: kernel_time got a kernel with negative FLOPs or bytes");
  }
  // Measured GEMMs first (calibrated_curves.hpp), the roofline for what they do not cover.
  if (const auto measured = calibrated_gemm_time(gpu, kernel)) {
    return std::max(*measured, kMinKernelDuration);
  }
  return std::max(unfloored_kernel_time(gpu, kernel), kMinKernelDuration);
}

Seconds kernel_time_sharing_sms(const GpuSpec& gpu, const Kernel& kernel, std::int32_t sms_taken) {
  if (gpu.calibration != nullptr) {
    // The model's slowdown on a calibration-free copy; a measured GEMM takes its measured
    // slowdown, or the model's ratio (not counted again: kernel_time() counted this kernel).
    GpuSpec model = gpu;
    model.calibration = nullptr;
    const Seconds model_sharing = kernel_time_sharing_sms(model, kernel, sms_taken);
    const auto measured = sms_taken <= 0
                              ? gpu.calibration->gemm_time(model, kernel)
                              : gpu.calibration->gemm_time_sharing(
                                    model, kernel, kernel_time(model, kernel), model_sharing);
    return measured ? std::max(*measured, kMinKernelDuration) : model_sharing;
  }
  if (sms_taken <= 0 || kernel.kind == KernelKind::kMemoryBound) return kernel_time(gpu, kernel);
  if (sms_taken >= gpu.sm_count) {
    throw std::logic_error("hardware: kernel_time_sharing_sms with no SM left for the kernel");
  }
  GpuSpec shared = gpu;
  shared.sm_count = gpu.sm_count - sms_taken;
  const double left = static_cast<double>(shared.sm_count) / static_cast<double>(gpu.sm_count);
  for (FlopsPerSec& peak : shared.peak_dense) peak = peak * left;
  return kernel_time(shared, kernel);
}

}  // namespace fsdpsim::hardware
