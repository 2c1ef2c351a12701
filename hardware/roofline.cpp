// Roofline terms (Williams, Waterman, Patterson, "Roofline: an insightful visual performance
// model for multicore architectures", CACM 2009): a kernel takes at least its FLOPs over the
// achievable compute rate and at least its HBM bytes over the achievable bandwidth.
#include "hardware/roofline.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fsdpsim::hardware {

FlopsPerSec required_peak(const GpuSpec& gpu, Dtype dtype) {
  const FlopsPerSec peak = gpu.peak(dtype);
  if (!(peak.value() > 0.0)) {
    throw std::logic_error("hardware: GPU '" + gpu.name + "' has no " +
                           std::string(dtype_name(dtype)) +
                           " peak (0 FLOP/s); scenarios using this dtype must be rejected when "
                           "they are loaded");
  }
  return peak;
}

Seconds compute_time(const GpuSpec& gpu, Flops flops, Dtype dtype, double efficiency) {
  const FlopsPerSec peak = required_peak(gpu, dtype);  // checked even for an empty kernel
  if (flops.value() <= 0.0) return Seconds(0.0);
  return flops / (peak * efficiency);
}

Seconds memory_time(const GpuSpec& gpu, Bytes bytes) {
  if (bytes.value() <= 0) return Seconds(0.0);
  return bytes / (gpu.hbm_bandwidth * gpu.memory_efficiency);
}

Seconds multi_tensor_time(const GpuSpec& gpu, Bytes bytes) {
  return std::max(bytes / (gpu.hbm_bandwidth * gpu.multi_tensor_memory_efficiency),
                  kMinKernelDuration);
}

}  // namespace fsdpsim::hardware
