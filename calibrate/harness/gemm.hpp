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

}  // namespace fsdpsim::harness
