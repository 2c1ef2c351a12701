// The GEMM phases: cuBLASLt matmuls on the scenario's shapes (--plan) and a generic grid, in
// each dtype the GPU has, alone and while an all-gather runs.
//
// Layout TN in cuBLAS's column-major terms (A stored k x m and transposed, B k x n): the
// x @ W^T of torch.nn.Linear. D = A B with alpha 1, beta 0; accumulation in fp32
// (CUBLAS_COMPUTE_32F; _FAST_TF32 for tf32); fp8 is e4m3 inputs with a bf16 output (cuBLASLt's
// fp8 matmul needs TN, compute capability 8.9+). The algorithm is cuBLASLt's first heuristic
// choice with a 32 MiB workspace (what the cuBLAS documentation, cublasSetWorkspace, recommends
// for Hopper and later; more than the 4 MiB it recommends for earlier GPUs).
// Timing: each repeat is `inner` back-to-back launches between two events (at least ~0.2 ms),
// median, min and max over repeats, on this process's first GPU.
#pragma once

#include <cstdint>
#include <functional>

#include "calibrate/harness/job.hpp"
#include "calibrate/harness/options.hpp"
#include "calibrate/harness/plan_file.hpp"
#include "calibrate/harness/results.hpp"

namespace fsdpsim::harness {

void measure_gemms(Job& job, const Options& options, const Plan& plan, Results& results,
                   const std::function<void()>& save);

// Re-times the plan's GEMMs (or the grid's cubes without a plan) that measure_gemms measured,
// while an all-gather of up to 256 MiB loops on the world communicator; fills
// GemmResult::under_nccl_us. Every rank runs the same collectives, so every rank must call it.
void measure_gemms_under_nccl(Job& job, const Options& options, const Plan& plan, Results& results,
                              const std::function<void()>& save);

// The "gpu-speed" phase: every local GPU holds kGpuSpeedShape's GEMM busy for kGpuSpeedHoldMs,
// all at once (as training keeps every GPU of a node busy, under the node's power and cooling),
// then times kGpuSpeedRepeats repeats of it; every rank's times reach rank 0 (Results::gpu_speed).
// Every rank must call it.
inline constexpr std::int64_t kGpuSpeedSide = 8192;  // m = n = k: ~1.1 TFLOP, milliseconds
inline constexpr double kGpuSpeedHoldMs = 3000.0;
inline constexpr int kGpuSpeedRepeats = 20;
inline constexpr double kGpuSpeedRepeatMs = 25.0;  // a timed repeat lasts at least this long
void measure_gpu_speed(Job& job, Results& results, const std::function<void()>& save);

}  // namespace fsdpsim::harness
