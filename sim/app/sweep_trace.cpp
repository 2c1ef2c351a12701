#include "sim/app/sweep_trace.hpp"

#include <fmt/format.h>

#include "sim/app/config_error.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/trace_json.hpp"

namespace fsdpsim::app {
namespace {

Scenario point_scenario(const SweepPlan& plan, std::int64_t row) {
  try {
    return load_grid_point(plan, row);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format(
        "--trace-row {}: the point is skipped, its scenario is invalid: {}", row, e.what()));
  }
}

}  // namespace

void check_trace_row(const SweepPlan& plan, std::int64_t row) {
  if (row < 0 || row >= plan.total_points) {
    throw ConfigError(
        fmt::format("--trace-row {}: expected a point index from 0 to {} (the grid has {} points)",
                    row, plan.total_points - 1, plan.total_points));
  }
  // Each slice of a sharded sweep would otherwise write the same trace.
  if (const std::int64_t slice = plan.shard.slice_of(plan.axes, row); slice != plan.shard.k) {
    throw ConfigError(fmt::format(
        "--trace-row {}: the point is not in --shard {}/{}; give it to slice {}/{}, which runs it",
        row, plan.shard.k, plan.shard.n, slice, plan.shard.n));
  }
  point_scenario(plan, row);
}

std::string sweep_point_trace(const SweepPlan& plan, std::int64_t row) {
  return trace_json(simulate_scenario(point_scenario(plan, row), /*record_memory=*/true));
}

}  // namespace fsdpsim::app
