// One simulated training step: build the FSDP program, replay it, and turn the timeline into
// the numbers users ask for (step time, throughput, FLOP rates, where the time goes, memory).
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/engine/timeline.hpp"
#include "sim/fsdp/schedule.hpp"
#include "sim/memory/memory_model.hpp"

namespace fsdpsim::fsdp {

// Wall time of the step split by what the compute stream, the network and the CPU were doing.
struct StepBreakdown {
  Seconds forward{0.0};    // compute-stream busy with forward kernels (incl. casts, copies)
  Seconds backward{0.0};   // compute-stream busy with backward kernels
  Seconds recompute{0.0};  // compute-stream busy re-running checkpointed forwards
  Seconds optimizer{0.0};  // compute-stream busy with the optimizer step
  Seconds exposed_communication{0.0};  // a collective runs and the compute stream is idle
  // Neither compute nor communication while the CPU runs host work (engine CpuStepKind::kWork:
  // the offloaded optimizer step, clipping on the host, Python hooks' work).
  Seconds host_work{0.0};
  Seconds idle{0.0};                // none of the above (kernel launches, waits, latency)
  Seconds communication_busy{0.0};  // total time with a collective running

  // Wall time with a compute-stream kernel running, whatever its phase.
  [[nodiscard]] Seconds compute_busy() const { return forward + backward + recompute + optimizer; }
};

// One class of ranks that behaved alike (engine/rank_classes.hpp), when hardware.stragglers
// makes ranks differ: how it spent the job's step and what memory it needed.
struct RankClassResult {
  std::int32_t first_rank = 0;  // its lowest rank
  std::int32_t ranks = 0;       // how many ranks it stands for
  double compute_speed = 1.0;
  double host_speed = 1.0;
  StepBreakdown breakdown;  // over the job's step (waits for slower ranks are exposed or idle)
  // How long in the measured step this class's collectives waited for the other classes of
  // their groups, plus the step's end after this class's last work (engine::rank_waits). The
  // class the others wait for waits least.
  Seconds waits_for_others{0.0};
  Bytes peak_allocated{0};
  // Peak active when the allocator is not modelled: the lower bound StepResult reports then.
  Bytes peak_reserved{0};
  bool out_of_memory = false;
};

struct StepResult {
  Seconds step_time{0.0};
  std::int64_t micro_batches = 1;
  std::int64_t tokens_per_step_per_gpu = 0;
  double tokens_per_s_per_gpu = 0.0;
  double model_tflops_per_gpu = 0.0;
  double hardware_tflops_per_gpu = 0.0;
  double mfu = 0.0;  // model FLOP/s over the dense peak of the compute dtype
  double hfu = 0.0;  // hardware FLOP/s (with recompute) over the same peak
  StepBreakdown breakdown;
  memory::MemoryStats memory;
  memory::ReservedStats reserved;  // zero when the allocator is not modelled
  bool models_reserved = false;
  Bytes usable_memory{0};
  bool out_of_memory = false;
  std::string oom_reason;   // empty unless out_of_memory
  std::string peak_tensor;  // the allocation that reached the peak
  std::int64_t op_count = 0;
  std::int64_t event_count = 0;
  // With hardware.stragglers: every class of ranks, ascending by first rank (else empty). The
  // step time is the job's (from the last rank's end of the previous step to the last rank's end
  // of this one); the breakdown is that of the largest class (the first on ties); the memory
  // numbers, out-of-memory, the memory timeline and the allocations those of the class needing
  // the most memory.
  std::vector<RankClassResult> rank_classes;
  std::int32_t breakdown_rank = 0;  // first rank of the class the breakdown describes
  std::int32_t memory_rank = 0;     // first rank of the class the memory numbers describe

  // Peak reserved memory as reported: the caching allocator's, or without its model
  // (allocator.enabled = false) the lower bound, the peak of active memory.
  [[nodiscard]] Bytes reported_peak_reserved() const {
    return models_reserved ? reserved.peak_reserved : memory.peak_active;
  }
};

struct SimulationOutput {
  Schedule schedule;
  engine::Timeline timeline;  // of the rank the breakdown describes
  // hardware.stragglers: every class's timeline, in the order of result.rank_classes (else empty).
  std::vector<engine::Timeline> rank_timelines;
  std::vector<memory::MemorySample> memory_samples;  // only when asked for, warm-up step included
  std::vector<memory::TensorEvent> tensor_events;    // likewise, of program.tensors
  // The job's measured step, the window step_time spans: from the end of the last op of the
  // previous step on every rank to the end of the last rank's last op.
  SimTime measured_start;
  SimTime measured_end;
  // Where memory_samples of the measured step begin: the CPU time its first tensor was allocated,
  // which precedes measured_start by as far as the CPU runs ahead of the GPU.
  SimTime memory_measured_start;
  StepResult result;
};

struct SimulationOptions {
  bool record_memory = false;  // keep the memory timeline (traces, CSV)
  // The CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF); none: allocated/active only.
  std::optional<memory::AllocatorConfig> allocator;
  // One warm-up step before the measured one, so that the state carried between steps is the
  // steady state's: the allocator's cache, and the rate limiter's queue of free events (after a
  // step it holds events of the backward's last reshards, so a steady-state forward runs further
  // ahead than the first one). Always taken with the allocator; the commands always take it.
  // Without either, one cold step: the first iteration, whose timeline the unit tests check by
  // hand.
  bool warm_up = false;
};

// hardware.stragglers simulates one copy of the step per class of alike ranks: time and memory
// grow with their number, so past this many the simulation is refused (RankClassesError) rather
// than left to run for hours (1,024 classes: timings below).
inline constexpr std::size_t kMaxRankClasses = 1024;
// ... and with the classes times the ops each replays (a step of many micro-batches): 1,024
// classes of Llama-3.1-8B on 1,024 GPUs took 10 s and 0.6 GB at one micro-batch (4.4M
// class-ops), 39 s and 1.9 GB at 4 (16.1M), 100-139 s and 3.6 GB at 8 (31.8M), on a 2-core
// machine (/usr/bin/time, 2026-11), so the product is bounded at 2^24.
inline constexpr std::size_t kMaxRankClassOps = std::size_t{1} << 24;

class RankClassesError : public std::length_error {
 public:
  using std::length_error::length_error;
};

// Preconditions as for build_schedule (input.steps is set here).
SimulationOutput simulate_step(const ScheduleInput& input, const SimulationOptions& options);

}  // namespace fsdpsim::fsdp
