// `fsdpsim explain`'s analysis of one simulated step: its critical path, its communication per
// FSDP unit (exposed vs overlapped) and the diagnosis, plus text and JSON renderings.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/app/explain_critical_path.hpp"
#include "sim/app/explain_exposed_comm.hpp"
#include "sim/app/scenario.hpp"
#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::app {

// The column where the text report's values begin, after labels such as "diagnosis".
inline constexpr std::size_t kExplainLabelWidth = 16;

struct Explanation {
  std::string scenario;  // its name
  fsdp::StepResult result;
  CriticalPathSummary critical_path;
  ExposedCommunication communication;
  std::string diagnosis;
  // hardware.stragglers: the class of ranks the others wait for (the one that waits least for
  // them, RankClassResult::waits_for_others), which the rest of the report describes, and how
  // much longer the class that waits most waits; empty where ranks are alike or wait alike.
  struct Straggler {
    fsdp::RankClassResult ranks;
    Seconds others_wait{0.0};
  };
  std::optional<Straggler> straggler;
  // Ranks differ in speed but every class waits as long for the others: none sets the pace.
  bool ranks_wait_alike = false;
  // With a calibration profile: what it priced (calibration_usage_line, labelled for this
  // report's column, and calibration_usage_json); empty and null otherwise.
  std::string calibration_line;
  nlohmann::json calibration;
};

// Analyses the measured step of `output` (the last step of its program).
Explanation explain_step(const Scenario& scenario, const fsdp::SimulationOutput& output);

// The report people read: the diagnosis, where the time goes, the critical path by kind and its
// `top` heaviest (unit, kind) groups, and the `top` units with the most exposed communication
// (0 = all of them), with totals.
std::string explanation_text(const Explanation& explanation, std::size_t top);

// Schema fsdpsim.explain/1: every group and unit, unit-suffixed keys.
nlohmann::json explanation_json(const Explanation& explanation);

}  // namespace fsdpsim::app
