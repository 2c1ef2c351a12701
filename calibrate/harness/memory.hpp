// The memory phase on this process's first GPU: device-to-device copy bandwidth (bytes read +
// written per second, comparable with HBM bandwidth), pinned host-to-device and device-to-host
// bandwidth (cudaMemcpyAsync from cudaMallocHost memory), the host cost of one kernel launch, and
// of cudaMalloc and cudaFree by size (the caching allocator's device calls).
// Each is the median of 10 timed repeats after a warm-up (5 cudaMalloc/cudaFree pairs per size).
#pragma once

#include "calibrate/harness/job.hpp"
#include "calibrate/harness/results.hpp"

namespace fsdpsim::harness {

void measure_memory(Job& job, Results& results);

}  // namespace fsdpsim::harness
