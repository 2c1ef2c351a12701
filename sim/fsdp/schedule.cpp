#include "sim/fsdp/schedule.hpp"

#include <stdexcept>

#include "sim/fsdp/schedule_flavours.hpp"

namespace fsdpsim::fsdp {

Schedule build_schedule(const ScheduleInput& input) {
  if (input.workload == nullptr) throw std::logic_error("build_schedule without a workload");
  if (input.training.parallelism == Parallelism::kDdp) return build_ddp_schedule(input);
  if (input.training.parallelism == Parallelism::kDeepSpeedZero3)
    return build_deepspeed_zero3_schedule(input);
  return input.fsdp.version == 2 ? build_fsdp2_schedule(input) : build_fsdp1_schedule(input);
}

}  // namespace fsdpsim::fsdp
