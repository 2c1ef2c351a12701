#include "sim/app/explain_diagnosis.hpp"

#include <fmt/format.h>

namespace fsdpsim::app {
namespace {

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

}  // namespace

std::string diagnose(const DiagnosisInput& in) {
  const double compute = ratio(in.compute, in.step_time);
  const double exposed = ratio(in.exposed_communication, in.step_time);
  const double idle = ratio(in.idle, in.step_time);
  const double critical_cpu = ratio(in.critical_cpu_launch + in.critical_cpu_host, in.step_time);
  if (critical_cpu >= kCpuBoundCriticalCpu && idle >= kCpuBoundIdle) {
    const bool launches = in.critical_cpu_launch >= in.critical_cpu_host;
    return fmt::format(
        "CPU-bound: the GPU idles {} waiting for {} ({} of the critical path on the CPU)",
        percent(idle), launches ? "kernel launches" : "host work", percent(critical_cpu));
  }
  if (exposed >= kCommBoundExposed) {
    if (in.top_exposed_collective.empty()) {
      return fmt::format("communication-bound: {} of the step exposed", percent(exposed));
    }
    const std::string collectives =
        in.also_exposed_collective.empty()
            ? in.top_exposed_collective
            : fmt::format("{} and {}", in.top_exposed_collective, in.also_exposed_collective);
    // The share is the whole step's exposed communication, every phase's, not the phase's.
    return fmt::format(
        "communication-bound: {} is {} bound on the {}; exposed communication in all phases: {} "
        "of the step",
        in.top_exposed_phase, collectives,
        in.top_exposed_inter_node ? "inter-node link" : "intra-node link (NVLink)",
        percent(exposed));
  }
  if (compute >= kComputeBound) {
    return fmt::format("compute-bound: {} of the step on the compute stream; {}", percent(compute),
                       exposed < kFullyOverlapped
                           ? std::string("communication fully overlapped")
                           : fmt::format("{} exposed communication", percent(exposed)));
  }
  return fmt::format("mixed: {} on the compute stream, {} exposed communication, {} idle",
                     percent(compute), percent(exposed), percent(idle));
}

}  // namespace fsdpsim::app
