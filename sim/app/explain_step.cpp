#include "sim/app/explain_step.hpp"

#include <algorithm>

#include "sim/app/calibration_json.hpp"

#include "sim/app/explain_diagnosis.hpp"
#include "sim/app/op_labels.hpp"
#include "sim/engine/op_graph.hpp"

namespace fsdpsim::app {

Explanation explain_step(const Scenario& scenario, const fsdp::SimulationOutput& output) {
  const engine::Program& program = output.schedule.program;
  Explanation e;
  e.scenario = scenario.name;
  e.result = output.result;
  // With stragglers the report describes one class of ranks throughout: the one the others wait
  // for, which waits least for them (RankClassResult::waits_for_others; idle time is no measure:
  // a slow host leaves its own GPU idle while the others wait for it), so that its critical path
  // runs through what makes the job wait rather than through collectives waiting for it. Where no
  // class waits less than another, the largest class, as `run` describes.
  const engine::Timeline* timeline = &output.timeline;
  const auto& classes = output.result.rank_classes;
  if (classes.size() > 1) {
    const auto by_wait = [](const fsdp::RankClassResult& x, const fsdp::RankClassResult& y) {
      return x.waits_for_others < y.waits_for_others;
    };
    const auto least = std::min_element(classes.begin(), classes.end(), by_wait);
    const auto most = std::max_element(classes.begin(), classes.end(), by_wait);
    const Seconds others_wait = most->waits_for_others - least->waits_for_others;
    if (others_wait.value() > 0.0) {
      e.straggler = Explanation::Straggler{*least, others_wait};
      const auto k = static_cast<std::size_t>(least - classes.begin());
      timeline = &output.rank_timelines.at(k);
      e.result.breakdown = least->breakdown;
      e.result.breakdown_rank = least->first_rank;
    } else {
      e.ranks_wait_alike = true;
    }
  }
  const SimTime step_start = output.measured_start;
  const std::vector<std::string> groups = group_names(scenario, output.schedule);
  e.critical_path = summarize_critical_path(program, engine::critical_path(program, *timeline),
                                            step_start, groups);
  e.communication =
      exposed_communication(program, *timeline, output.schedule.measured_first_op, step_start,
                            groups, channels_crossing_nodes(scenario, program));
  const fsdp::StepBreakdown& b = e.result.breakdown;
  DiagnosisInput in;
  in.step_time = output.result.step_time;
  in.compute = b.compute_busy();
  in.exposed_communication = b.exposed_communication;
  in.idle = b.host_work + b.idle;  // the GPU idles while the CPU works too
  in.critical_cpu_launch = e.critical_path.cpu_launch;
  in.critical_cpu_host = e.critical_path.cpu_host;
  in.communicates = b.communication_busy.value() > 0.0;
  name_top_exposed(e.communication.causes, in);
  // Out of memory, the step cannot run: its timeline is what it would be if it fit.
  e.diagnosis =
      output.result.out_of_memory ? "out of memory; were it to fit, " + diagnose(in) : diagnose(in);
  if (const hardware::ClusterSpec& cluster = scenario.hardware.cluster;
      cluster.gpu.calibration != nullptr) {
    e.calibration_line = calibration_usage_line(cluster, kExplainLabelWidth);
    e.calibration = calibration_usage_json(cluster);
  }
  return e;
}

}  // namespace fsdpsim::app
