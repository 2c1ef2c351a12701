// How long each rank class of a multi-rank execution (executor.hpp, execute_ranks) waited for
// the others in a window of its timeline.
#pragma once

#include <vector>

#include "sim/engine/program.hpp"
#include "sim/engine/rank_classes.hpp"
#include "sim/engine/timeline.hpp"
#include "sim/units/sim_time.hpp"

namespace fsdpsim::engine {

// Per class, over [start, end) and the collectives from `first_op` on: the union of the times a
// collective of the class waited for its group (from its kernel's start here to the last class
// starting it, when its transfer starts; and from this class having moved its bytes to the
// last class having moved theirs, when it ends), plus `end` after the class's makespan (the
// others end later). Concurrent waits count once; compute may run meanwhile. `timelines` are
// execute_ranks's, in class order.
std::vector<SimTime> rank_waits(const Program& program, const RankClasses& classes,
                                const std::vector<Timeline>& timelines, OpId first_op,
                                SimTime start, SimTime end);

}  // namespace fsdpsim::engine
