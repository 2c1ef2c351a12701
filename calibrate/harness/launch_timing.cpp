#include "calibrate/harness/launch_timing.hpp"

#include <chrono>
#include <vector>

#include "calibrate/harness/kernels.hpp"

namespace fsdpsim::harness {

Spread time_kernel_launches(Job& job, Gpu& gpu) {
  const DeviceGuard guard;
  FSDPSIM_CUDA(cudaSetDevice(gpu.device));
  for (int i = 0; i < kLaunchesPerRepeat; ++i) FSDPSIM_CUDA(launch_empty_kernel(gpu.stream));
  job.wait("warming up kernel launches");
  std::vector<double> us;
  for (int r = 0; r < kLaunchRepeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunchesPerRepeat; ++i) FSDPSIM_CUDA(launch_empty_kernel(gpu.stream));
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    job.wait("timing kernel launches");
    us.push_back(s / kLaunchesPerRepeat * 1e6);
  }
  return spread_of(us);
}

}  // namespace fsdpsim::harness
