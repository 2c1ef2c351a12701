#include "sim/fsdp/schedule.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/fsdp/schedule_flavours.hpp"

namespace fsdpsim::fsdp {

Schedule build_schedule(const ScheduleInput& input) {
  if (input.workload == nullptr) throw std::logic_error("build_schedule without a workload");
  // torchtitan's ChunkedLossWrapper drives fully_shard's API on the LM head's unit.
  const bool chunked_loss =
      std::any_of(input.workload->layers.begin(), input.workload->layers.end(),
                  [](const models::Layer& l) { return l.kind == models::LayerKind::kChunkedLoss; });
  if (chunked_loss &&
      !(input.training.parallelism == Parallelism::kFsdp && input.fsdp.version == 2))
    throw std::invalid_argument("build_schedule: a chunked loss is modelled for FSDP2 only");
  if (input.training.parallelism == Parallelism::kDdp) return build_ddp_schedule(input);
  if (input.training.parallelism == Parallelism::kDeepSpeedZero3)
    return build_deepspeed_zero3_schedule(input);
  return input.fsdp.version == 2 ? build_fsdp2_schedule(input) : build_fsdp1_schedule(input);
}

}  // namespace fsdpsim::fsdp
