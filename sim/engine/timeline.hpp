// What one execution of a Program produced: when each op was issued, started and ended, and
// what the CPU thread did when.
#pragma once

#include <vector>

#include "sim/engine/program.hpp"
#include "sim/units/sim_time.hpp"

namespace fsdpsim::engine {

struct OpTiming {
  SimTime issue;  // CPU finished launching it
  SimTime start;
  SimTime end;
};

struct CpuStepTiming {
  SimTime start;
  SimTime end;  // for kWait: when the CPU resumed
};

struct Timeline {
  std::vector<OpTiming> ops;       // indexed by OpId
  std::vector<CpuStepTiming> cpu;  // indexed like Program::cpu
  SimTime makespan;                // last GPU op end or CPU step end, whichever is later
  // execute_ranks only, indexed by OpId: when this rank had moved its share of each collective's
  // bytes; the collective ends (OpTiming::end) when the last rank of its group has. Empty from
  // execute(), where the two are one.
  std::vector<SimTime> transferred;
};

}  // namespace fsdpsim::engine
