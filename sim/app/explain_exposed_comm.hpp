// Communication of the measured step per FSDP unit: how long each unit's collectives ran, and
// how much of that no compute-stream kernel overlapped (exposed) — from the timeline, so the
// contention of compute with NCCL and the order NCCL imposes are included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine/program.hpp"
#include "sim/engine/timeline.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::app {

struct UnitCommunication {
  std::string unit;  // "-" for collectives without a unit
  std::int64_t collectives = 0;
  Seconds busy{0.0};     // summed durations of its collectives
  Seconds exposed{0.0};  // of which no compute-stream kernel ran
  [[nodiscard]] Seconds overlapped() const { return busy - exposed; }
};

// Exposed collective time by what was exposed, for the diagnosis.
struct ExposedCause {
  std::string phase;        // "forward", "backward", ...
  std::string collective;   // "all-gather", "reduce-scatter", "all-reduce", ...
  bool inter_node = false;  // its communicator spans nodes
  Seconds exposed{0.0};
};

struct ExposedCommunication {
  std::vector<UnitCommunication> units;  // Op::group order, then "-" (if any)
  std::vector<ExposedCause> causes;      // descending exposed time (ties: phase, collective, link)
  Seconds busy{0.0};                     // sums over collectives (concurrent ones each count)
  Seconds exposed{0.0};
  // Wall time with a collective running (StepBreakdown::communication_busy), and of it the time
  // with no compute-stream kernel: the step's exposed communication
  // (StepBreakdown::exposed_communication).
  Seconds busy_wall{0.0};
  Seconds exposed_wall{0.0};
};

// Over the ops from `first_op` (the measured step) clipped to [step_start, ...]. Compute-stream
// kernels are the non-communication ops of `compute_stream` with non-zero duration.
// `group_names` names Op::group values; `channel_crosses_nodes` is indexed by ChannelId (a
// collective without a channel counts as intra-node). O(ops log ops).
ExposedCommunication exposed_communication(const engine::Program& program,
                                           const engine::Timeline& timeline, engine::OpId first_op,
                                           SimTime step_start,
                                           const std::vector<std::string>& group_names,
                                           const std::vector<bool>& channel_crosses_nodes,
                                           engine::StreamId compute_stream = 0);

}  // namespace fsdpsim::app
