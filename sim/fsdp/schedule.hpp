// The per-rank program of one training step (FSDP1, FSDP2 or DDP), with the streams, events and
// CPU waits PyTorch uses, plus what the step's metrics need: FLOP totals and the memory alive
// before the step starts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hardware/gpu_spec.hpp"
#include "models/workload.hpp"
#include "sim/engine/program.hpp"
#include "sim/fsdp/fsdp_config.hpp"
#include "sim/fsdp/fsdp_units.hpp"
#include "sim/memory/memory_category.hpp"

namespace fsdpsim::fsdp {

// Every schedule creates the compute (default) stream first.
inline constexpr engine::StreamId kComputeStream = 0;

// Op::phase values used by this layer.
enum class Phase : std::uint8_t { kForward, kBackward, kRecompute, kOptimizer };

struct ScheduleInput {
  const models::Workload* workload = nullptr;
  hardware::ClusterSpec cluster;
  FsdpConfig fsdp;
  TrainingConfig training;
  // Training steps in the program; the last one is measured, the earlier ones warm up state that
  // carries over between steps (the caching allocator's cache, the rate limiter's queue).
  std::int32_t steps = 1;
};

struct Schedule {
  engine::Program program;
  std::vector<FsdpUnit> units;
  std::int64_t micro_batches = 1;  // gradient accumulation steps
  // Memory alive when the step starts: fp32 parameter shards and optimizer states.
  std::array<Bytes, memory::kMemoryCategoryCount> baseline{};
  // Forward + backward of every micro-batch of one step, no recompute, the masked half of an
  // unfused causal attention left out (NamedKernel::model_flops_fraction).
  Flops model_flops{0.0};
  Flops hardware_flops{0.0};  // every kernel as executed, activation recompute included
  // Bytes that cross nodes per GPU: the NIC traffic of its node divided by the node's ranks of
  // each group. A ring over a group spanning nodes crosses each node boundary once, so a node
  // sends one rank's wire bytes ((n-1)/n of the buffer for all-gather and reduce-scatter,
  // 2(n-1)/n for all-reduce) per collective, shared by its r ranks of the group.
  Bytes inter_node_bytes{0};
  // Where the measured (last) step starts in the program.
  engine::OpId measured_first_op = 0;
  std::size_t measured_first_cpu_step = 0;  // index into Program::cpu
  engine::TensorId measured_first_tensor = 0;
};

// Preconditions (the app validates): world divides global_batch / micro_batch, sizes positive,
// the shard group tiles the cluster (shard_group_problem), FSDP2 options only with version 2;
// throws std::invalid_argument for a chunked loss (models::LayerKind::kChunkedLoss) with any
// runtime but FSDP2.
Schedule build_schedule(const ScheduleInput& input);

}  // namespace fsdpsim::fsdp
