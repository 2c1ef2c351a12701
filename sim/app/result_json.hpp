// The result JSON: stable, unit-suffixed keys (DESIGN.md "Contracts") that scripts and checks
// rely on. Deterministic: the same scenario gives byte-identical output (no wall-clock values).
#pragma once

#include <nlohmann/json.hpp>

#include "sim/app/scenario.hpp"
#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::app {

inline constexpr const char* kResultSchema = "fsdpsim.result/1";

nlohmann::json result_to_json(const Scenario& scenario, const fsdp::SimulationOutput& output);

}  // namespace fsdpsim::app
