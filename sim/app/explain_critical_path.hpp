// The critical path of the measured step, summed by what it runs through: by kind ("backward
// compute", "forward all-gather", "CPU launch", ...) and by FSDP unit and kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine/op_graph.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::app {

struct CriticalPathShare {
  std::string unit;  // the FSDP unit (or DDP layer); "-" when none; empty in by_kind
  std::string kind;  // "<phase> compute", "<phase> <collective>", "<phase> copy", "CPU launch",
                     // "CPU host work", "CPU allocator"
  Seconds time{0.0};
  std::int64_t steps = 0;  // ops and CPU steps of non-zero duration
};

struct CriticalPathSummary {
  Seconds length{0.0};  // from the step's start to its end: the step time
  std::int64_t steps = 0;
  Seconds gpu_compute{0.0};                     // compute and copy ops on the path
  Seconds gpu_communication{0.0};               // collectives on the path
  Seconds cpu_launch{0.0};                      // kernel launches on the path
  Seconds cpu_host{0.0};                        // host work and allocator time on the path
  Seconds cpu_allocator{0.0};                   // of which the allocator's device calls
  std::vector<CriticalPathShare> by_kind;       // descending time, then kind
  std::vector<CriticalPathShare> by_unit_kind;  // descending time, then unit order, then kind
};

// Sums `path` (engine::critical_path of the whole program) over [step_start, its end]: steps
// that straddle step_start count for their part after it. `unit_names` names Op::group values
// (op_labels.hpp); CPU host work takes the unit its name starts with ("blocks.3.pre_forward"),
// else its name's first word ("optimizer" for a CPU optimizer step, optimizer.cpu_adamw).
CriticalPathSummary summarize_critical_path(const engine::Program& program,
                                            const engine::CriticalPath& path, SimTime step_start,
                                            const std::vector<std::string>& unit_names);

}  // namespace fsdpsim::app
