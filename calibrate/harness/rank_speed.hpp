// The "rank-speed" phase: how fast every rank of the job runs next to rank 0, whose GEMM timings
// the profile holds. GPUs of one model differ in speed under sustained load, by how their clocks
// settle under the power and temperature limits (Sinha et al., "Not All GPUs Are Created Equal",
// SC22, arXiv 2208.11035: 8 % average performance variation, up to 22 %, across the same-model
// GPUs of five large clusters), and hosts differ in how fast they launch work; a synchronous job
// runs at its slowest rank's pace, since every collective waits for it.
//
// Each rank times kernel launches on its host (idle GPUs, a queue that never fills), then every
// GPU times one GEMM short, as the "gemm" phase times its shapes, and then runs it held, all at
// once (gemm.hpp, time_held_gemm: as training keeps every GPU of a node busy, under the node's
// power and cooling); every rank's times reach rank 0 (Results::rank_speeds). Held over short is
// what a GPU keeps of a GEMM benchmark's rate under sustained load (an H200 at its 700 W limit:
// 0.83-0.84, reports/h200-measured.md, "Kernels held at the power limit").
#pragma once

#include <functional>

#include "calibrate/harness/job.hpp"
#include "calibrate/harness/options.hpp"
#include "calibrate/harness/results.hpp"

namespace fsdpsim::harness {

// Every rank must call it.
void measure_rank_speeds(Job& job, const Options& options, Results& results,
                         const std::function<void()>& save);

}  // namespace fsdpsim::harness
