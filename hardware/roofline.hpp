// Roofline building blocks shared by the kernel cost models: time for a kernel's FLOPs at a
// fraction of its dtype's peak, time for its HBM bytes at a fraction of HBM bandwidth, and the
// shortest time any kernel occupies a stream. Pure functions; O(1).
#pragma once

#include "hardware/gpu_spec.hpp"
#include "sim/units/dtype.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::hardware {

// Minimum duration of one kernel on a GPU stream, however little work it does, so zero-size
// kernels are not free. Source: NVIDIA's forum consensus (njuffa, "Too much time for kernel
// launch latency", forums.developer.nvidia.com/t/233645/3) puts back-to-back null-kernel
// launches at "about 3 microseconds" on recent hardware and software; part of that is the
// host-side launch, which the simulator charges separately (ClusterSpec::kernel_launch_overhead),
// so the device-side floor is taken a little below it.
inline constexpr Seconds kMinKernelDuration = microseconds(2.5);

// Dense peak of `gpu` for `dtype`. A dtype the GPU lacks (peak 0, e.g. fp8 on A100) is a
// precondition violation -- the app rejects such scenarios when it loads them -- so this throws
// std::logic_error rather than falling back to another dtype's peak.
FlopsPerSec required_peak(const GpuSpec& gpu, Dtype dtype);

// flops / (peak(dtype) * efficiency). `efficiency` in (0, 1].
Seconds compute_time(const GpuSpec& gpu, Flops flops, Dtype dtype, double efficiency);

// bytes / (hbm_bandwidth * memory_efficiency): a kernel streaming `bytes` (read + written)
// through HBM at the achievable fraction of the datasheet bandwidth.
Seconds memory_time(const GpuSpec& gpu, Bytes bytes);

// The same for PyTorch's multi_tensor_apply launches (foreach and fused optimizer kernels):
// bytes / (hbm_bandwidth * multi_tensor_memory_efficiency), at least kMinKernelDuration.
Seconds multi_tensor_time(const GpuSpec& gpu, Bytes bytes);

}  // namespace fsdpsim::hardware
