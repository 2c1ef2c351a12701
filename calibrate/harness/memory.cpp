#include "calibrate/harness/memory.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "calibrate/harness/launch_timing.hpp"
#include "calibrate/harness/progress.hpp"

namespace fsdpsim::harness {
namespace {

constexpr int kRepeats = 10;
constexpr std::int64_t kDeviceCopyBytes = std::int64_t{1} << 30;
constexpr std::int64_t kHostCopyBytes = std::int64_t{256} << 20;

// Median seconds of kRepeats copies of `bytes`, each timed by events on gpu.stream.
double time_copy(Job& job, Gpu& gpu, void* dst, const void* src, std::int64_t bytes,
                 cudaMemcpyKind kind, const char* what) {
  const auto n = static_cast<std::size_t>(bytes);
  FSDPSIM_CUDA(cudaMemcpyAsync(dst, src, n, kind, gpu.stream));  // warm-up
  for (int r = 0; r < kRepeats; ++r) {
    FSDPSIM_CUDA(cudaEventRecord(gpu.start[static_cast<std::size_t>(r)], gpu.stream));
    FSDPSIM_CUDA(cudaMemcpyAsync(dst, src, n, kind, gpu.stream));
    FSDPSIM_CUDA(cudaEventRecord(gpu.stop[static_cast<std::size_t>(r)], gpu.stream));
  }
  job.wait(what);
  std::vector<double> seconds;
  for (int r = 0; r < kRepeats; ++r) {
    float ms = 0.0F;
    FSDPSIM_CUDA(cudaEventElapsedTime(&ms, gpu.start[static_cast<std::size_t>(r)],
                                      gpu.stop[static_cast<std::size_t>(r)]));
    seconds.push_back(static_cast<double>(ms) * 1e-3);
  }
  return spread_of(seconds).median;
}

// The caching allocator's device calls by size: 2 MiB (its smallest large segment) times powers
// of 4 up to 8 GiB, or a quarter of the free memory. Each size: kAllocationRepeats cudaMalloc +
// cudaFree pairs on the idle device, each call timed on the host clock; the medians.
void time_allocations(Job& job, Results& results) {
  constexpr int kAllocationRepeats = 5;
  const std::int64_t largest = std::min(std::int64_t{8} << 30, job.free_memory() / 4);
  FSDPSIM_CUDA(cudaDeviceSynchronize());
  for (std::int64_t bytes = std::int64_t{2} << 20; bytes <= largest; bytes *= 4) {
    std::vector<double> malloc_s;
    std::vector<double> free_s;
    for (int r = 0; r < kAllocationRepeats; ++r) {
      void* p = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      FSDPSIM_CUDA(cudaMalloc(&p, static_cast<std::size_t>(bytes)));
      const auto t1 = std::chrono::steady_clock::now();
      FSDPSIM_CUDA(cudaFree(p));
      const auto t2 = std::chrono::steady_clock::now();
      malloc_s.push_back(std::chrono::duration<double>(t1 - t0).count());
      free_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    results.allocations.push_back(
        AllocationResult{bytes, spread_of(malloc_s).median * 1e6, spread_of(free_s).median * 1e6});
  }
}

}  // namespace

void measure_memory(Job& job, Results& results) {
  Gpu& gpu = job.gpus().front();
  FSDPSIM_CUDA(cudaSetDevice(gpu.device));
  progress_line(job.root(), "memory: device copy, pinned host copies, kernel launch", false);
  const std::int64_t device_bytes = std::min(kDeviceCopyBytes, job.free_memory() / 5);
  void* a = nullptr;
  void* b = nullptr;
  FSDPSIM_CUDA(cudaMalloc(&a, static_cast<std::size_t>(device_bytes)));
  FSDPSIM_CUDA(cudaMalloc(&b, static_cast<std::size_t>(device_bytes)));
  // On the timed stream and waited for: cudaMemset runs on the legacy default stream, which the
  // non-blocking stream the copies are timed on does not wait for.
  FSDPSIM_CUDA(cudaMemsetAsync(a, 1, static_cast<std::size_t>(device_bytes), gpu.stream));
  FSDPSIM_CUDA(cudaStreamSynchronize(gpu.stream));
  const double d2d =
      time_copy(job, gpu, b, a, device_bytes, cudaMemcpyDeviceToDevice, "timing device copies");
  results.device_copy_GBps = 2.0 * static_cast<double>(device_bytes) / d2d / 1e9;

  void* host = nullptr;
  FSDPSIM_CUDA(cudaMallocHost(&host, static_cast<std::size_t>(kHostCopyBytes)));
  const double h2d = time_copy(job, gpu, a, host, kHostCopyBytes, cudaMemcpyHostToDevice,
                               "timing host-to-device copies");
  const double d2h = time_copy(job, gpu, host, a, kHostCopyBytes, cudaMemcpyDeviceToHost,
                               "timing device-to-host copies");
  results.h2d_pinned_GBps = static_cast<double>(kHostCopyBytes) / h2d / 1e9;
  results.d2h_pinned_GBps = static_cast<double>(kHostCopyBytes) / d2h / 1e9;
  FSDPSIM_CUDA(cudaFreeHost(host));
  FSDPSIM_CUDA(cudaFree(a));
  FSDPSIM_CUDA(cudaFree(b));

  results.kernel_launch_us = time_kernel_launches(job, gpu).median;
  time_allocations(job, results);
  progress_line(
      job.root(),
      cat("memory: device copy ", static_cast<std::int64_t>(*results.device_copy_GBps),
          " GB/s, H2D ", static_cast<std::int64_t>(*results.h2d_pinned_GBps), " GB/s, D2H ",
          static_cast<std::int64_t>(*results.d2h_pinned_GBps), " GB/s, launch ",
          static_cast<double>(static_cast<std::int64_t>(*results.kernel_launch_us * 100)) / 100.0,
          " us"),
      true);
}

}  // namespace fsdpsim::harness
