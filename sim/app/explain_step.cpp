#include "sim/app/explain_step.hpp"

#include <algorithm>

#include "sim/app/calibration_json.hpp"

#include "sim/app/explain_diagnosis.hpp"
#include "sim/app/op_labels.hpp"
#include "sim/engine/op_graph.hpp"

namespace fsdpsim::app {

Explanation explain_step(const Scenario& scenario, const fsdp::SimulationOutput& output) {
  const engine::Program& program = output.schedule.program;
  const engine::Timeline& timeline = output.timeline;
  // The job's measured step, as simulate_step counts it. With stragglers the critical path is
  // that of the rank that ends last: the one the step waits for.
  const SimTime step_start = output.measured_start;
  const engine::Timeline* last = &timeline;
  for (const engine::Timeline& t : output.rank_timelines) {
    if (t.makespan > last->makespan) last = &t;
  }
  const std::vector<std::string> groups = group_names(scenario, output.schedule);
  Explanation e;
  e.scenario = scenario.name;
  e.result = output.result;
  e.critical_path =
      summarize_critical_path(program, engine::critical_path(program, *last), step_start, groups);
  e.communication =
      exposed_communication(program, timeline, output.schedule.measured_first_op, step_start,
                            groups, channels_crossing_nodes(scenario, program));
  const fsdp::StepBreakdown& b = output.result.breakdown;
  DiagnosisInput in;
  in.step_time = output.result.step_time;
  in.compute = b.compute_busy();
  in.exposed_communication = b.exposed_communication;
  in.idle = b.idle;
  in.critical_cpu_launch = e.critical_path.cpu_launch;
  in.critical_cpu_host = e.critical_path.cpu_host;
  name_top_exposed(e.communication.causes, in);
  // Out of memory, the step cannot run: its timeline is what it would be if it fit.
  e.diagnosis =
      output.result.out_of_memory ? "out of memory; were it to fit, " + diagnose(in) : diagnose(in);
  if (const hardware::ClusterSpec& cluster = scenario.hardware.cluster;
      cluster.gpu.calibration != nullptr) {
    e.calibration_line = calibration_usage_line(cluster, kExplainLabelWidth);
    e.calibration = calibration_usage_json(cluster);
  }
  // The class the others wait for waits least in collectives. (Idle time is no measure: a slow
  // host leaves its own GPU idle while the others wait for it.)
  const auto waits = [](const fsdp::RankClassResult& k) {
    return k.breakdown.exposed_communication;
  };
  const auto& classes = output.result.rank_classes;
  if (classes.size() > 1) {
    const auto by_wait = [&](const auto& x, const auto& y) { return waits(x) < waits(y); };
    const auto slowest = std::min_element(classes.begin(), classes.end(), by_wait);
    const auto most_waiting = std::max_element(classes.begin(), classes.end(), by_wait);
    e.straggler = Explanation::Straggler{*slowest, waits(*most_waiting) - waits(*slowest)};
  }
  return e;
}

}  // namespace fsdpsim::app
