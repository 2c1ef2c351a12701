// The one-line diagnosis a performance engineer would give for a simulated step, from where its
// wall time went and what its critical path runs through:
//   "CPU-bound: the GPU idles 40.0% waiting for kernel launches (52.0% of the critical path on the
//   CPU)" "communication-bound: backward is all-gather bound on the inter-node link: 38.0% of the
//   step exposed" "communication-bound: backward is reduce-scatter and all-gather bound on the
//   inter-node link: ..." "compute-bound: 99.6% of the step on the compute stream; communication
//   fully overlapped" "mixed: 62.0% on the compute stream, 21.0% exposed communication, 17.0% idle"
#pragma once

#include <string>

#include "sim/units/units.hpp"

namespace fsdpsim::app {

struct DiagnosisInput {
  Seconds step_time{0.0};
  Seconds compute{0.0};                // wall time with a compute-stream kernel running
  Seconds exposed_communication{0.0};  // wall time with only collectives running
  Seconds idle{0.0};                   // wall time with neither
  Seconds critical_cpu_launch{0.0};    // critical path through kernel launches
  Seconds critical_cpu_host{0.0};      // critical path through host work and the allocator
  // The largest share of exposed collective time (explain_exposed_comm.hpp), if any.
  std::string top_exposed_phase;       // "backward"
  std::string top_exposed_collective;  // "all-gather"
  bool top_exposed_inter_node = false;
  // A second collective of the same phase and link with at least half the top one's exposed
  // time (e.g. all-gathers queued behind reduce-scatters on one communicator), else empty.
  std::string also_exposed_collective;
};

// Thresholds, as fractions of the step: the CPU bounds the step when the critical path spends
// this much in CPU work while the GPU idles at least kCpuBoundIdle of it; communication bounds
// it above kCommBoundExposed exposed; compute bounds it above kComputeBound on the compute
// stream; below kFullyOverlapped exposed, communication counts as fully overlapped.
inline constexpr double kCpuBoundCriticalCpu = 0.2;
inline constexpr double kCpuBoundIdle = 0.1;
inline constexpr double kCommBoundExposed = 0.05;
inline constexpr double kComputeBound = 0.85;
inline constexpr double kFullyOverlapped = 0.005;

// Precondition: step_time > 0.
std::string diagnose(const DiagnosisInput& input);

}  // namespace fsdpsim::app
