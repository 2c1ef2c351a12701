// The host's cost of one kernel launch: empty kernels launched on an idle GPU's stream, timed on
// the host, in repeats each waited for, so that CUDA's launch queue (about a thousand entries)
// never fills: a host blocked on a full queue would time the GPU's drain rate instead.
#pragma once

#include "calibrate/harness/job.hpp"
#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {

inline constexpr int kLaunchRepeats = 20;
inline constexpr int kLaunchesPerRepeat = 500;  // under CUDA's 1,024-entry launch queue

// Host microseconds per launch on `gpu`'s stream over kLaunchRepeats repeats, after a warm-up.
Spread time_kernel_launches(Job& job, Gpu& gpu);

}  // namespace fsdpsim::harness
