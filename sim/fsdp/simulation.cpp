#include "sim/fsdp/simulation.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "hardware/calibrated_curves.hpp"
#include "sim/engine/executor.hpp"
#include "sim/engine/op_graph.hpp"

namespace fsdpsim::fsdp {
namespace {

struct Interval {
  SimTime begin;
  SimTime end;
};

// Sweeps the op intervals once: for each elementary segment, is compute running (and of which
// phase), is a collective running? Sums the wall time into the breakdown.
StepBreakdown breakdown_of(const engine::Program& program, const engine::Timeline& timeline,
                           engine::OpId first_op, SimTime step_start) {
  struct Edge {
    SimTime time;
    int delta;
    bool compute;
    Phase phase;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * program.ops.size());
  for (std::size_t i = first_op; i < program.ops.size(); ++i) {
    const engine::Op& op = program.ops[i];
    const engine::OpTiming& t = timeline.ops[i];
    if (t.end == t.start) continue;
    const bool compute = op.stream == kComputeStream;
    const bool comm = op.kind == engine::OpKind::kCommunication;
    if (!compute && !comm) continue;
    edges.push_back({t.start, +1, compute, static_cast<Phase>(op.phase)});
    edges.push_back({t.end, -1, compute, static_cast<Phase>(op.phase)});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.time != b.time ? a.time < b.time : a.delta < b.delta;
  });
  StepBreakdown b;
  int compute_running = 0;
  int comm_running = 0;
  Phase compute_phase = Phase::kForward;
  SimTime last = step_start;
  for (const Edge& e : edges) {
    const Seconds span = to_seconds(e.time - last);
    if (compute_running > 0) {
      switch (compute_phase) {
        case Phase::kForward:
          b.forward += span;
          break;
        case Phase::kBackward:
          b.backward += span;
          break;
        case Phase::kRecompute:
          b.recompute += span;
          break;
        case Phase::kOptimizer:
          b.optimizer += span;
          break;
      }
    } else if (comm_running > 0) {
      b.exposed_communication += span;
    } else {
      b.idle += span;
    }
    if (comm_running > 0) b.communication_busy += span;
    last = e.time;
    if (e.compute) {
      compute_running += e.delta;
      if (e.delta > 0) compute_phase = e.phase;
    } else {
      comm_running += e.delta;
    }
  }
  b.idle += to_seconds(timeline.makespan - last);
  return b;
}

}  // namespace

SimulationOutput simulate_step(const ScheduleInput& input, const SimulationOptions& options) {
  SimulationOutput out;
  ScheduleInput steps = input;
  steps.steps = options.allocator ? 2 : 1;
  out.schedule = build_schedule(steps);
  const engine::Program& program = out.schedule.program;
  engine::check_for_deadlock(program);
  const hardware::GpuSpec& gpu = input.cluster.gpu;
  memory::MemoryModelOptions memory_options;
  memory_options.baseline = out.schedule.baseline;
  memory_options.record_samples = options.record_memory;
  memory_options.allocator = options.allocator;
  // The allocator's device calls: a calibration profile's measured lines, else the preset's.
  const hardware::AllocationCosts& calls =
      gpu.calibration != nullptr && gpu.calibration->allocation_costs()
          ? *gpu.calibration->allocation_costs()
          : input.cluster.allocator_calls;
  constexpr double kPsPerSecond = 1e12;
  constexpr double kBytesPerGib = static_cast<double>(1LL << 30);
  memory_options.malloc_call_cost = to_sim_time(calls.malloc.fixed);
  memory_options.free_call_cost = to_sim_time(calls.free.fixed);
  memory_options.malloc_ps_per_byte = calls.malloc.per_gib.value() * kPsPerSecond / kBytesPerGib;
  memory_options.free_ps_per_byte = calls.free.per_gib.value() * kPsPerSecond / kBytesPerGib;
  memory_options.measure_from = out.schedule.measured_first_tensor;
  memory::MemoryModel memory(memory_options);
  out.timeline = engine::execute(program, &memory);

  // The measured step starts when the previous one's last op ends.
  SimTime step_start;
  for (engine::OpId op = 0; op < out.schedule.measured_first_op; ++op) {
    step_start = std::max(step_start, out.timeline.ops[op].end);
  }
  StepResult& r = out.result;
  const TrainingConfig& t = input.training;
  r.step_time = to_seconds(out.timeline.makespan - step_start);
  r.micro_batches = out.schedule.micro_batches;
  r.tokens_per_step_per_gpu = r.micro_batches * t.micro_batch * t.seq_len;
  r.tokens_per_s_per_gpu = static_cast<double>(r.tokens_per_step_per_gpu) / r.step_time.value();
  r.model_tflops_per_gpu = out.schedule.model_flops.value() / r.step_time.value() / 1e12;
  r.hardware_tflops_per_gpu = out.schedule.hardware_flops.value() / r.step_time.value() / 1e12;
  const double peak_tflops = gpu.peak(t.gemm_peak_dtype(input.fsdp.param_dtype)).value() / 1e12;
  r.mfu = r.model_tflops_per_gpu / peak_tflops;
  r.hfu = r.hardware_tflops_per_gpu / peak_tflops;
  r.breakdown = breakdown_of(program, out.timeline, out.schedule.measured_first_op, step_start);
  r.memory = memory.stats();
  r.reserved = memory.reserved();
  r.models_reserved = memory.models_reserved();
  r.usable_memory = gpu.usable_memory();
  if (!program.tensors.empty())
    r.peak_tensor = program.names[program.tensors[r.memory.peak_tensor].name];
  if (r.models_reserved && r.reserved.out_of_memory) {
    r.out_of_memory = true;
    const std::string where = r.reserved.oom_tensor < program.tensors.size()
                                  ? program.names[program.tensors[r.reserved.oom_tensor].name]
                                  : std::string("?");
    r.oom_reason = fmt::format("allocating {}: {}", where, r.reserved.oom_message);
  } else if (!r.models_reserved && r.memory.peak_active > r.usable_memory) {
    r.out_of_memory = true;
    r.oom_reason =
        fmt::format("peak active {:.2f} GiB > {:.2f} GiB usable, reached allocating {}",
                    to_gib(r.memory.peak_active), to_gib(r.usable_memory), r.peak_tensor);
  }
  r.op_count = static_cast<std::int64_t>(program.ops.size());
  r.event_count = static_cast<std::int64_t>(program.ops.size() + program.cpu.size());
  if (options.record_memory) out.memory_samples = memory.samples();
  return out;
}

}  // namespace fsdpsim::fsdp
