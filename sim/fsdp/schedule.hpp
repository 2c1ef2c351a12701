// The per-rank program of one training step under FSDP1 (FlatParameter) FULL_SHARD, with the
// streams, events and CPU waits PyTorch uses (torch/distributed/fsdp/_runtime_utils.py), plus
// what the step's metrics need: FLOP totals and the memory alive before the step starts.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hardware/gpu_spec.hpp"
#include "models/workload.hpp"
#include "sim/engine/program.hpp"
#include "sim/fsdp/fsdp_config.hpp"
#include "sim/fsdp/fsdp_units.hpp"
#include "sim/memory/memory_category.hpp"

namespace fsdpsim::fsdp {

// Op::phase values used by this layer.
enum class Phase : std::uint8_t { kForward, kBackward, kRecompute, kOptimizer };

struct ScheduleInput {
  const models::Workload* workload = nullptr;
  hardware::ClusterSpec cluster;
  FsdpConfig fsdp;
  TrainingConfig training;
};

struct Schedule {
  engine::Program program;
  std::vector<FsdpUnit> units;
  std::int64_t micro_batches = 1;  // gradient accumulation steps
  // Memory alive when the step starts: fp32 parameter shards and optimizer states.
  std::array<Bytes, memory::kMemoryCategoryCount> baseline{};
  Flops model_flops{0.0};     // forward + backward of every micro-batch, no recompute
  Flops hardware_flops{0.0};  // model_flops + activation recompute
};

// Preconditions (the app validates): world divides global_batch / micro_batch, sizes positive.
Schedule build_schedule(const ScheduleInput& input);

}  // namespace fsdpsim::fsdp
