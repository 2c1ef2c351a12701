// explanation_json (explain_step.hpp): `fsdpsim explain --json`, its numbers to six significant
// digits as `run --json` writes them.
#include <string>

#include "sim/app/explain_step.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/significant_digits.hpp"

namespace fsdpsim::app {
namespace {

double share(Seconds part, Seconds whole) { return whole.value() > 0.0 ? ratio(part, whole) : 0.0; }

nlohmann::json shares(const std::vector<CriticalPathShare>& list, Seconds length, bool with_unit) {
  nlohmann::json out = nlohmann::json::array();
  for (const CriticalPathShare& s : list) {
    nlohmann::json j = {{"kind", s.kind},
                        {"time_s", round6(s.time.value())},
                        {"share", round6(share(s.time, length))},
                        {"steps", s.steps}};
    if (with_unit) j["unit"] = s.unit;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

nlohmann::json explanation_json(const Explanation& e) {
  const fsdp::StepResult& r = e.result;
  const CriticalPathSummary& c = e.critical_path;
  nlohmann::json units = nlohmann::json::array();
  for (const UnitCommunication& u : e.communication.units) {
    units.push_back({{"unit", u.unit},
                     {"collectives", u.collectives},
                     {"busy_s", round6(u.busy.value())},
                     {"exposed_s", round6(u.exposed.value())},
                     {"overlapped_s", round6(u.overlapped().value())}});
  }
  nlohmann::json causes = nlohmann::json::array();
  for (const ExposedCause& cause : e.communication.causes) {
    causes.push_back({{"phase", cause.phase},
                      {"collective", cause.collective},
                      {"link", cause.inter_node ? "inter-node" : "intra-node"},
                      {"exposed_s", round6(cause.exposed.value())}});
  }
  // Null unless one class of ranks sets the pace (hardware.stragglers and the like).
  nlohmann::json straggler;
  if (e.straggler) {
    straggler = {{"first_rank", e.straggler->ranks.first_rank},
                 {"ranks", e.straggler->ranks.ranks},
                 {"compute_speed", e.straggler->ranks.compute_speed},
                 {"host_speed", e.straggler->ranks.host_speed},
                 {"others_wait_s", round6(e.straggler->others_wait.value())},
                 {"described_rank", r.breakdown_rank}};
  }
  nlohmann::json out = {
      {"schema", "fsdpsim.explain/1"},
      {"straggler", straggler},
      {"described_rank", r.breakdown_rank},
      {"scenario", e.scenario},
      {"status", r.out_of_memory ? "oom" : "ok"},
      {"step_time_s", round6(r.step_time.value())},
      {"diagnosis", e.diagnosis},
      {"calibration", e.calibration},
      {"alloc_retries", r.reserved.alloc_retries},
      {"breakdown", breakdown_json(r.breakdown)},
      {"critical_path",
       {{"length_s", round6(c.length.value())},
        {"steps", c.steps},
        {"gpu_compute_s", round6(c.gpu_compute.value())},
        {"gpu_communication_s", round6(c.gpu_communication.value())},
        {"cpu_launch_s", round6(c.cpu_launch.value())},
        {"cpu_host_s", round6(c.cpu_host.value())},
        {"cpu_allocator_s", round6(c.cpu_allocator.value())},
        {"by_kind", shares(c.by_kind, c.length, false)},
        {"by_unit_kind", shares(c.by_unit_kind, c.length, true)}}},
      {"communication",
       {{"busy_s", round6(e.communication.busy.value())},
        {"exposed_s", round6(e.communication.exposed.value())},
        {"busy_wall_s", round6(e.communication.busy_wall.value())},
        {"exposed_wall_s", round6(e.communication.exposed_wall.value())},
        {"units", std::move(units)},
        {"exposed_by_cause", std::move(causes)}}},
  };
  if (r.out_of_memory) out["oom_reason"] = r.oom_reason;  // as run --json gives it
  return out;
}

}  // namespace fsdpsim::app
