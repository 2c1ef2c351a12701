// `fsdpsim sweep ... --trace-row N --trace PATH`: the Chrome/Perfetto trace of one grid point,
// simulated again with the memory timeline recorded (sweep points themselves keep none).
#pragma once

#include <cstdint>
#include <string>

#include "sim/app/sweep_command.hpp"

namespace fsdpsim::app {

// Checks, before the sweep runs, that `row` is a point of the plan's grid (any shard) whose
// scenario loads. Throws ConfigError (exit code 2) naming the row and the reason otherwise.
void check_trace_row(const SweepPlan& plan, std::int64_t row);

// Simulates point `row` of the plan again and returns its trace JSON, for the sweep to write with
// its other outputs (all or none).
std::string sweep_point_trace(const SweepPlan& plan, std::int64_t row);

}  // namespace fsdpsim::app
