// The result JSON: stable, unit-suffixed keys (listed in README.md, after the first --json
// example) that scripts and checks rely on. Deterministic: the same scenario gives
// byte-identical output (no wall-clock values).
#pragma once

#include <nlohmann/json.hpp>

#include "sim/app/scenario.hpp"
#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::app {

inline constexpr const char* kResultSchema = "fsdpsim.result/1";

nlohmann::json result_to_json(const Scenario& scenario, const fsdp::SimulationOutput& output);

// The result's "breakdown" object (explain --json has the same): where the step's time goes.
nlohmann::json breakdown_json(const fsdp::StepBreakdown& breakdown);

// For the commands that simulate a scenario without judging its `expect` block (explain,
// calibrate plan, sweep): refuses, as check would, a block naming a key no result has. Throws
// ConfigError (evaluate_expectations); nothing happens without a block.
void refuse_unknown_expect_keys(const Scenario& scenario, const fsdp::SimulationOutput& output);

}  // namespace fsdpsim::app
