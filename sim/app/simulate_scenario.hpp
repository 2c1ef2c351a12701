// One scenario -> one simulated step: the model's workload, the schedule, the replay.
// The single entry point every command (run, sweeps, checks, benchmarks) goes through.
#pragma once

#include "sim/app/scenario.hpp"
#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::app {

// `record_memory` keeps the memory timeline (for traces).
fsdp::SimulationOutput simulate_scenario(const Scenario& scenario, bool record_memory);

}  // namespace fsdpsim::app
