// The collective phases: size sweeps of all-gather, reduce-scatter and all-reduce on each group
// shape, and all-gather while a reduce-scatter runs on a twin communicator (interference).
//
// Timing: after a warm-up, each of --repeats repeats is a closed stream gate (stream_gate.hpp), a
// world barrier, a start event, `inner` launches and a stop event on the collective's stream,
// queued before the gate opens, so that the launches run back to back on the GPU whatever the
// host's enqueue rate (fsdpsim prices launches on the CPU's timeline). A repeat's time is the
// elapsed time over `inner`, and the slowest rank's time counts (a collective ends when its last
// rank ends). The profile keeps the median, min and max over repeats. nccl-tests reports another
// statistic: by default the mean over ranks (src/common.cu, `average` = 1) of host wall-clock time
// per iteration, its launches included unless run with -G (CUDA graphs). Sizes are the full
// buffer as nccl-tests prints them (the gathered output of an all-gather, the input of a
// reduce-scatter or all-reduce), rounded down to a multiple of ranks * element size.
#pragma once

#include <functional>

#include "calibrate/harness/job.hpp"
#include "calibrate/harness/options.hpp"
#include "calibrate/harness/plan_file.hpp"
#include "calibrate/harness/results.hpp"

namespace fsdpsim::harness {

// Appends one SeriesResult per (group, collective, dtype) to `results`, calling `save` after each.
void measure_collectives(Job& job, const Options& options, const Plan& plan, Results& results,
                         const std::function<void()>& save);

// Appends the interference series (concurrent_with set).
void measure_concurrent(Job& job, const Options& options, const Plan& plan, Results& results,
                        const std::function<void()>& save);

}  // namespace fsdpsim::harness
