// The one-line diagnosis a performance engineer would give for a simulated step, from where its
// wall time went and what its critical path runs through, tested in this order:
//   "CPU-bound: the GPU idles 40.0% waiting for kernel launches (52.0% of the critical path on
//   the CPU)"
//   "compute-bound: 99.6% of the step on the compute stream; communication fully overlapped"
//   "compute-bound: 90.0% of the step on the compute stream; 8.0% exposed communication, most
//   of it backward all-gather on the inter-node link"
//   "communication-bound: backward is reduce-scatter and all-gather bound on the inter-node
//   link; exposed communication in all phases: 38.0% of the step"
//   "mixed: 62.0% on the compute stream, 2.0% exposed communication, 36.0% idle"
#pragma once

#include <string>
#include <vector>

#include "sim/app/explain_exposed_comm.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::app {

struct DiagnosisInput {
  Seconds step_time{0.0};
  Seconds compute{0.0};                // wall time with a compute-stream kernel running
  Seconds exposed_communication{0.0};  // wall time with only collectives running
  Seconds idle{0.0};                   // wall time with neither
  Seconds critical_cpu_launch{0.0};    // critical path through kernel launches
  Seconds critical_cpu_host{0.0};      // critical path through host work and the allocator
  bool communicates = true;            // false: the step runs no collective that takes time
  // The largest share of exposed collective time (explain_exposed_comm.hpp), if any.
  std::string top_exposed_phase;       // "backward"
  std::string top_exposed_collective;  // "all-gather"
  bool top_exposed_inter_node = false;
  // A second collective of the same phase and link with at least half the top one's exposed
  // time (e.g. all-gathers queued behind reduce-scatters on one communicator), else empty.
  std::string also_exposed_collective;
};

// Thresholds, as fractions of the step: the CPU bounds the step when the critical path spends
// this much in CPU work while the GPU idles at least kCpuBoundIdle of it; compute bounds it above
// kComputeBound on the compute stream (its largest exposed collectives named from
// kCommBoundExposed exposed); otherwise communication bounds it above kCommBoundExposed exposed;
// below kFullyOverlapped exposed, communication counts as fully overlapped.
inline constexpr double kCpuBoundCriticalCpu = 0.2;
inline constexpr double kCpuBoundIdle = 0.1;
inline constexpr double kCommBoundExposed = 0.05;
inline constexpr double kComputeBound = 0.85;
inline constexpr double kFullyOverlapped = 0.005;

// Sets the top_exposed_* and also_exposed_collective fields from `causes` (largest first): the
// phase with the most exposed time (ties: the first by name), then its largest cause and the
// next of that phase on the same link if it has at least half as much. A backward whose
// all-gathers and reduce-scatters are each exposed less than the forward's all-gathers can
// still hold more of the step.
void name_top_exposed(const std::vector<ExposedCause>& causes, DiagnosisInput& in);

// Precondition: step_time > 0.
std::string diagnose(const DiagnosisInput& input);

}  // namespace fsdpsim::app
