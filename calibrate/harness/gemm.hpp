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
#include <string>
#include <vector>

#include "calibrate/harness/job.hpp"
#include "calibrate/harness/options.hpp"
#include "calibrate/harness/plan_file.hpp"
#include "calibrate/harness/results.hpp"
#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {

void measure_gemms(Job& job, const Options& options, const Plan& plan, Results& results,
                   const std::function<void()>& save);

// Re-times the plan's GEMMs (or the grid's cubes without a plan) that measure_gemms measured,
// while an all-gather of up to 256 MiB loops on the world communicator; fills
// GemmResult::under_nccl_us. Every rank runs the same collectives, so every rank must call it.
void measure_gemms_under_nccl(Job& job, const Options& options, const Plan& plan, Results& results,
                              const std::function<void()>& save);

// One square GEMM (side^3, bf16; fp16 before compute capability 8.0) on every local GPU at once:
// each GPU runs it back to back for `hold_ms`, then `repeats` timed repeats of at least
// `repeat_ms` each. Before the hold, each local GPU in turn times it short, as the "gemm" phase
// times its shapes (`short_warmup` launches, then up to `short_repeats` repeats of at least
// 0.2 ms): held over short is the share of a GEMM benchmark's rate the GPU keeps under sustained
// load.
// Per-launch microseconds per local GPU (gpus() order).
struct HeldGemmPlan {
  std::int64_t side = 8192;
  double hold_ms = 3000.0;
  int repeats = 20;  // at most kMaxRepeats
  double repeat_ms = 25.0;
  int short_warmup = 5;    // the "gemm" phase's --warmup
  int short_repeats = 20;  // the "gemm" phase's --repeats, at most kMaxRepeats
};
struct HeldGemm {
  std::string dtype;
  std::vector<Spread> per_local_gpu;
  std::vector<Spread> short_per_local_gpu;
};
HeldGemm time_held_gemm(Job& job, const HeldGemmPlan& plan);

}  // namespace fsdpsim::harness
