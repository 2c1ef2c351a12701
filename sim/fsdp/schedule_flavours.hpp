// Internal to sim/fsdp: one builder per runtime, dispatched by build_schedule().
#pragma once

#include "sim/fsdp/schedule.hpp"

namespace fsdpsim::fsdp {

Schedule build_fsdp1_schedule(const ScheduleInput& input);  // fsdp1_schedule.cpp
Schedule build_fsdp2_schedule(const ScheduleInput& input);  // fsdp2_schedule.cpp
Schedule build_ddp_schedule(const ScheduleInput& input);    // ddp_schedule.cpp
Schedule build_deepspeed_zero3_schedule(
    const ScheduleInput& input);  // deepspeed_zero3_schedule.cpp

}  // namespace fsdpsim::fsdp
