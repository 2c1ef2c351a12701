// The human-readable summary `fsdpsim run` prints.
#pragma once

#include <string>

#include "sim/app/scenario.hpp"
#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::app {

std::string summary_text(const Scenario& scenario, const fsdp::SimulationOutput& output);

}  // namespace fsdpsim::app
