#include "sim/app/explain_diagnosis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

namespace fsdpsim::app {
namespace {

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

}  // namespace

void name_top_exposed(const std::vector<ExposedCause>& causes, DiagnosisInput& in) {
  if (causes.empty()) return;
  std::map<std::string, Seconds> phase_exposed;  // by name: max_element keeps the first of ties
  for (const ExposedCause& c : causes) phase_exposed[c.phase] += c.exposed;
  const std::string& phase =
      std::max_element(phase_exposed.begin(), phase_exposed.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; })
          ->first;
  const auto in_phase = [&](const ExposedCause& c) { return c.phase == phase; };
  const auto top = std::find_if(causes.begin(), causes.end(), in_phase);
  in.top_exposed_phase = top->phase;
  in.top_exposed_collective = top->collective;
  in.top_exposed_inter_node = top->inter_node;
  if (const auto next = std::find_if(std::next(top), causes.end(), in_phase);
      next != causes.end() && next->inter_node == top->inter_node &&
      next->exposed >= 0.5 * top->exposed) {
    in.also_exposed_collective = next->collective;
  }
}

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
  const std::string collectives =
      in.also_exposed_collective.empty()
          ? in.top_exposed_collective
          : fmt::format("{} and {}", in.top_exposed_collective, in.also_exposed_collective);
  const char* link = in.top_exposed_inter_node ? "inter-node link" : "intra-node link (NVLink)";
  // Compute first: a step kComputeBound (85%) or more on the compute stream is compute-bound,
  // whatever the rest of it is exposed.
  if (compute >= kComputeBound) {
    std::string communication =
        in.communicates ? "communication fully overlapped" : "no communication";
    if (exposed >= kCommBoundExposed && !in.top_exposed_collective.empty()) {
      communication = fmt::format("{} exposed communication, most of it {} {} on the {}",
                                  percent(exposed), in.top_exposed_phase, collectives, link);
    } else if (exposed >= kFullyOverlapped) {
      communication = fmt::format("{} exposed communication", percent(exposed));
    }
    return fmt::format("compute-bound: {} of the step on the compute stream; {}", percent(compute),
                       communication);
  }
  if (exposed >= kCommBoundExposed) {
    if (in.top_exposed_collective.empty()) {
      return fmt::format("communication-bound: {} of the step exposed", percent(exposed));
    }
    // The share is the whole step's exposed communication, every phase's, not the phase's.
    return fmt::format(
        "communication-bound: {} is {} bound on the {}; exposed communication in all phases: {} "
        "of the step",
        in.top_exposed_phase, collectives, link, percent(exposed));
  }
  return fmt::format("mixed: {} on the compute stream, {} exposed communication, {} idle",
                     percent(compute), percent(exposed), percent(idle));
}

}  // namespace fsdpsim::app
