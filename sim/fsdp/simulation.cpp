#include "sim/fsdp/simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "hardware/calibrated_curves.hpp"
#include "sim/engine/executor.hpp"
#include "sim/engine/rank_waits.hpp"

namespace fsdpsim::fsdp {
namespace {

struct Interval {
  SimTime begin;
  SimTime end;
};

// What an edge starts or ends: a compute-stream kernel, a collective or the CPU's host work.
enum class Track : std::uint8_t { kCompute, kCommunication, kHostWork };

// One op's or host work's start (+1) or end (-1) for the sweep below.
struct Edge {
  SimTime time;
  int delta;
  Track track;
  Phase phase;  // read for compute edges only
};

bool edge_before(const Edge& a, const Edge& b) {
  return a.time != b.time ? a.time < b.time : a.delta < b.delta;
}

// The start and end edges of the step's compute and communication ops and of the CPU's host
// work, in time order (ends before starts at one instant). A stream runs its ops one after
// another in issue order (executor.hpp), and the CPU its steps, so each stream's edges and the
// CPU's come sorted already: merging the runs costs O(edges x log streams) where sorting all
// edges cost O(edges x log edges), 2.7 % of a `validate` run's CPU samples
// (reports/performance.md). The step's ops start at `first_op`, its CPU steps at
// `first_cpu_step`; the sweep clamps what still runs outside the step's window.
std::vector<Edge> sorted_edges(const engine::Program& program, const engine::Timeline& timeline,
                               engine::OpId first_op, std::size_t first_cpu_step) {
  engine::StreamId streams = 0;
  for (std::size_t i = first_op; i < program.ops.size(); ++i)
    streams = std::max(streams, static_cast<engine::StreamId>(program.ops[i].stream + 1));
  // One run per stream, then the CPU's.
  const std::size_t runs = std::size_t{streams} + 1;
  std::vector<std::size_t> run_size(runs, 0);
  for (std::size_t i = first_op; i < program.ops.size(); ++i) run_size[program.ops[i].stream] += 2;
  // Host work: the CPU's own work and the caching allocator's device calls (cudaFree and
  // cudaMalloc of a retry, after the device is idle), during which the GPU waits on the CPU. Most
  // allocations take no time and no edge.
  const auto host_work = [&program, &timeline](std::size_t i) {
    const engine::CpuStepKind kind = program.cpu[i].kind;
    return (kind == engine::CpuStepKind::kWork || kind == engine::CpuStepKind::kAlloc) &&
           timeline.cpu[i].end != timeline.cpu[i].start;
  };
  for (std::size_t i = first_cpu_step; i < program.cpu.size(); ++i)
    if (host_work(i)) run_size[streams] += 2;
  std::vector<std::size_t> run_begin(runs + 1, 0);
  for (std::size_t s = 0; s < runs; ++s) run_begin[s + 1] = run_begin[s] + run_size[s];
  std::vector<std::size_t> run_end(run_begin.begin(), run_begin.end() - 1);

  std::vector<Edge> edges(run_begin.back());
  for (std::size_t i = first_op; i < program.ops.size(); ++i) {
    const engine::Op& op = program.ops[i];
    const engine::OpTiming& t = timeline.ops[i];
    if (t.end == t.start) continue;
    // A collective issued on the compute stream (clip_grad_norm's all-reduce, DeepSpeed's
    // overflow check) is communication, as explain counts it: busy, and exposed when it runs.
    const bool comm = op.kind == engine::OpKind::kCommunication;
    const bool compute = op.stream == kComputeStream && !comm;
    if (!compute && !comm) continue;
    const Track track = compute ? Track::kCompute : Track::kCommunication;
    std::size_t& end = run_end[op.stream];
    edges[end++] = {t.start, +1, track, static_cast<Phase>(op.phase)};
    edges[end++] = {t.end, -1, track, static_cast<Phase>(op.phase)};
  }
  for (std::size_t i = first_cpu_step; i < program.cpu.size(); ++i) {
    const engine::CpuStepTiming& t = timeline.cpu[i];
    if (!host_work(i)) continue;
    std::size_t& end = run_end[streams];
    edges[end++] = {t.start, +1, Track::kHostWork, Phase::kForward};
    edges[end++] = {t.end, -1, Track::kHostWork, Phase::kForward};
  }
  // Close the gaps the skipped ops left, then merge neighbouring runs until one is left.
  std::vector<std::size_t> bounds{0};
  std::size_t kept = 0;
  for (std::size_t s = 0; s < runs; ++s) {
    kept = static_cast<std::size_t>(
        std::move(edges.begin() + static_cast<std::ptrdiff_t>(run_begin[s]),
                  edges.begin() + static_cast<std::ptrdiff_t>(run_end[s]),
                  edges.begin() + static_cast<std::ptrdiff_t>(kept)) -
        edges.begin());
    if (kept != bounds.back()) bounds.push_back(kept);
  }
  edges.resize(kept);
  const auto at = [&edges](std::size_t k) {
    return edges.begin() + static_cast<std::ptrdiff_t>(k);
  };
  for (std::size_t r = 0; r + 1 < bounds.size(); ++r) {
    if (!std::is_sorted(at(bounds[r]), at(bounds[r + 1]), edge_before))
      throw std::logic_error("fsdp: a stream's ops did not run in issue order (executor bug)");
  }
  while (bounds.size() > 2) {
    std::vector<std::size_t> merged{0};
    for (std::size_t r = 0; r + 1 < bounds.size(); r += 2) {
      const std::size_t last = std::min(r + 2, bounds.size() - 1);
      std::inplace_merge(at(bounds[r]), at(bounds[r + 1]), at(bounds[last]), edge_before);
      merged.push_back(bounds[last]);
    }
    bounds = std::move(merged);
  }
  return edges;
}

// Sweeps the intervals once: for each elementary segment, is compute running (and of which
// phase), else a collective, else host work? Sums the wall time into the breakdown.
StepBreakdown breakdown_of(const engine::Program& program, const engine::Timeline& timeline,
                           engine::OpId first_op, std::size_t first_cpu_step, SimTime step_start,
                           SimTime step_end) {
  const std::vector<Edge> edges = sorted_edges(program, timeline, first_op, first_cpu_step);
  StepBreakdown b;
  int compute_running = 0;
  int comm_running = 0;
  int host_work_running = 0;
  Phase compute_phase = Phase::kForward;
  SimTime last = step_start;
  for (const Edge& e : edges) {
    // An op of this step may start before the step does (issued while the previous step's last
    // op ran, or on a rank that finished that step early): only the step's window counts.
    const SimTime time = std::clamp(e.time, step_start, step_end);
    const Seconds span = to_seconds(time - last);
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
    } else if (host_work_running > 0) {
      b.host_work += span;
    } else {
      b.idle += span;
    }
    if (comm_running > 0) b.communication_busy += span;
    last = time;
    switch (e.track) {
      case Track::kCompute:
        compute_running += e.delta;
        if (e.delta > 0) compute_phase = e.phase;
        break;
      case Track::kCommunication:
        comm_running += e.delta;
        break;
      case Track::kHostWork:
        host_work_running += e.delta;
        break;
    }
  }
  b.idle += to_seconds(step_end - last);
  return b;
}

// The memory model of every simulated rank: the step's baseline, the allocator and its device
// calls (a calibration profile's measured lines, else the preset's).
memory::MemoryModelOptions memory_options_for(const ScheduleInput& input, const Schedule& schedule,
                                              const SimulationOptions& options) {
  const hardware::GpuSpec& gpu = input.cluster.gpu;
  memory::MemoryModelOptions m;
  m.baseline = schedule.baseline;
  m.record_samples = options.record_memory;
  m.allocator = options.allocator;
  const hardware::AllocationCosts& calls =
      gpu.calibration != nullptr && gpu.calibration->allocation_costs()
          ? *gpu.calibration->allocation_costs()
          : input.cluster.allocator_calls;
  constexpr double kPsPerSecond = 1e12;
  constexpr double kBytesPerGib = static_cast<double>(1LL << 30);
  m.malloc_call_cost = to_sim_time(calls.malloc.fixed);
  m.free_call_cost = to_sim_time(calls.free.fixed);
  m.malloc_ps_per_byte = calls.malloc.per_gib.value() * kPsPerSecond / kBytesPerGib;
  m.free_ps_per_byte = calls.free.per_gib.value() * kPsPerSecond / kBytesPerGib;
  m.measure_from = schedule.measured_first_tensor;
  return m;
}

// The measured step starts when the previous one ends: its last GPU op, or its last host work
// where that runs later (a CPU optimizer step under CPU offload ends the step on the host).
SimTime measured_step_start(const Schedule& schedule, const engine::Timeline& timeline) {
  SimTime start;
  for (engine::OpId op = 0; op < schedule.measured_first_op; ++op)
    start = std::max(start, timeline.ops[op].end);
  for (std::size_t step = 0; step < schedule.measured_first_cpu_step; ++step)
    start = std::max(start, timeline.cpu[step].end);
  return start;
}

// One rank's memory numbers and out-of-memory verdict into `r`.
void fill_memory(StepResult& r, const engine::Program& program, const memory::MemoryModel& memory) {
  r.memory = memory.stats();
  r.reserved = memory.reserved();
  r.models_reserved = memory.models_reserved();
  if (!program.tensors.empty())
    r.peak_tensor = program.names[program.tensors[r.memory.peak_tensor].name];
  r.out_of_memory = false;
  r.oom_reason.clear();
  if (r.models_reserved && r.reserved.out_of_memory) {
    r.out_of_memory = true;
    const std::optional<engine::TensorId> tensor = r.reserved.oom_tensor;
    r.oom_reason =
        tensor && *tensor < program.tensors.size()
            ? fmt::format("allocating {}: {}", program.names[program.tensors[*tensor].name],
                          r.reserved.oom_message)
            : r.reserved.oom_message;  // the state held from before the step
  } else if (!r.models_reserved && r.memory.peak_active > r.usable_memory) {
    r.out_of_memory = true;
    r.oom_reason =
        fmt::format("peak active {:.2f} GiB > {:.2f} GiB usable, reached allocating {}",
                    to_gib(r.memory.peak_active), to_gib(r.usable_memory), r.peak_tensor);
  }
}

// hardware.stragglers: one representative per class of alike ranks (engine/rank_classes.hpp).
// Returns the job's step window; fills the per-class results, the breakdown of the largest class
// and the memory (figures, timeline, allocations) of the class needing the most.
std::pair<SimTime, SimTime> simulate_ranks(const ScheduleInput& input,
                                           const memory::MemoryModelOptions& memory_options,
                                           SimulationOutput& out) {
  const engine::Program& program = out.schedule.program;
  const hardware::ClusterSpec& cluster = input.cluster;
  std::vector<engine::RankSpeed> speed(static_cast<std::size_t>(cluster.world_size()));
  for (const hardware::Straggler& s : cluster.stragglers)
    speed.at(static_cast<std::size_t>(s.rank)) = engine::RankSpeed{s.compute_speed, s.host_speed};
  const engine::RankClasses classes = engine::rank_classes(speed, program.channel_groups);
  if (classes.count() > kMaxRankClasses) {
    throw RankClassesError("the stragglers make " + std::to_string(classes.count()) +
                           " classes of ranks that behave alike, each simulated on its own; at "
                           "most " +
                           std::to_string(kMaxRankClasses) + " are: use fewer distinct speeds");
  }
  if (classes.count() * program.ops.size() > kMaxRankClassOps) {
    throw RankClassesError(
        "the stragglers make " + std::to_string(classes.count()) +
        " classes of ranks that behave alike, each replaying the step's " +
        std::to_string(program.ops.size()) + " ops on its own; at most " +
        std::to_string(kMaxRankClassOps) +
        " class-ops are simulated: use fewer distinct speeds or fewer micro-batches per step");
  }
  std::vector<std::unique_ptr<memory::MemoryModel>> models;
  std::vector<engine::MemoryObserver*> observers;
  for (std::size_t k = 0; k < classes.count(); ++k) {
    models.push_back(std::make_unique<memory::MemoryModel>(memory_options));
    observers.push_back(models.back().get());
  }
  std::vector<engine::Timeline> timelines = engine::execute_ranks(program, classes, observers);

  SimTime start;
  SimTime end;
  for (const engine::Timeline& t : timelines) {
    start = std::max(start, measured_step_start(out.schedule, t));
    end = std::max(end, t.makespan);
  }
  StepResult& r = out.result;
  std::size_t largest = 0;
  std::size_t neediest = 0;
  // Out of memory first, then the most reserved (or active, without the allocator) memory.
  const auto need = [&](std::size_t k) {
    const memory::MemoryModel& m = *models[k];
    const Bytes peak = m.models_reserved() ? m.reserved().peak_reserved : m.stats().peak_active;
    return std::make_pair(r.rank_classes[k].out_of_memory, peak.value());
  };
  const std::vector<SimTime> waits =
      engine::rank_waits(program, classes, timelines, out.schedule.measured_first_op, start, end);
  for (std::size_t k = 0; k < classes.count(); ++k) {
    RankClassResult c;
    c.first_rank = classes.representative[k];
    c.waits_for_others = to_seconds(waits[k]);
    c.ranks = classes.size[k];
    c.compute_speed = classes.speed[k].compute;
    c.host_speed = classes.speed[k].host;
    c.breakdown = breakdown_of(program, timelines[k], out.schedule.measured_first_op,
                               out.schedule.measured_first_cpu_step, start, end);
    c.peak_allocated = models[k]->stats().peak_allocated;
    // Without the allocator model, its lower bound, as StepResult::reported_peak_reserved.
    c.peak_reserved = models[k]->models_reserved() ? models[k]->reserved().peak_reserved
                                                   : models[k]->stats().peak_active;
    StepResult one;
    one.usable_memory = r.usable_memory;
    fill_memory(one, program, *models[k]);
    c.out_of_memory = one.out_of_memory;
    r.rank_classes.push_back(c);
    if (classes.size[k] > classes.size[largest]) largest = k;
    if (need(k) > need(neediest)) neediest = k;
  }
  r.breakdown = r.rank_classes[largest].breakdown;
  r.breakdown_rank = classes.representative[largest];
  r.memory_rank = classes.representative[neediest];
  fill_memory(r, program, *models[neediest]);
  // The memory timeline and allocations are those of the class the memory figures describe.
  if (memory_options.record_samples) {
    out.memory_samples = models[neediest]->samples();
    out.tensor_events = models[neediest]->tensor_events();
  }
  out.memory_measured_start = models[neediest]->measured_since();
  out.timeline = timelines[largest];
  out.rank_timelines = std::move(timelines);
  return {start, end};
}

}  // namespace

SimulationOutput simulate_step(const ScheduleInput& input, const SimulationOptions& options) {
  SimulationOutput out;
  ScheduleInput steps = input;
  steps.steps = options.warm_up || options.allocator ? 2 : 1;
  out.schedule = build_schedule(steps);
  const engine::Program& program = out.schedule.program;
  const hardware::GpuSpec& gpu = input.cluster.gpu;
  const memory::MemoryModelOptions memory_options =
      memory_options_for(input, out.schedule, options);
  StepResult& r = out.result;
  // What the allocator may hold (allocator.memory_fraction can lower it), else the device's.
  r.usable_memory = options.allocator ? options.allocator->capacity : gpu.usable_memory();
  SimTime step_start;
  SimTime step_end;
  if (input.cluster.stragglers.empty()) {
    memory::MemoryModel memory(memory_options);
    out.timeline = engine::execute(program, &memory);
    step_start = measured_step_start(out.schedule, out.timeline);
    step_end = out.timeline.makespan;
    r.breakdown = breakdown_of(program, out.timeline, out.schedule.measured_first_op,
                               out.schedule.measured_first_cpu_step, step_start, step_end);
    fill_memory(r, program, memory);
    if (options.record_memory) {
      out.memory_samples = memory.samples();
      out.tensor_events = memory.tensor_events();
    }
    out.memory_measured_start = memory.measured_since();
  } else {
    std::tie(step_start, step_end) = simulate_ranks(input, memory_options, out);
  }

  out.measured_start = step_start;
  out.measured_end = step_end;
  const TrainingConfig& t = input.training;
  r.step_time = to_seconds(step_end - step_start);
  r.micro_batches = out.schedule.micro_batches;
  r.tokens_per_step_per_gpu = r.micro_batches * t.micro_batch * t.seq_len;
  r.tokens_per_s_per_gpu = static_cast<double>(r.tokens_per_step_per_gpu) / r.step_time.value();
  r.model_tflops_per_gpu = out.schedule.model_flops.value() / r.step_time.value() / 1e12;
  r.hardware_tflops_per_gpu = out.schedule.hardware_flops.value() / r.step_time.value() / 1e12;
  const double peak_tflops = gpu.peak(t.gemm_peak_dtype(input.fsdp.param_dtype)).value() / 1e12;
  r.mfu = r.model_tflops_per_gpu / peak_tflops;
  r.hfu = r.hardware_tflops_per_gpu / peak_tflops;
  r.op_count = static_cast<std::int64_t>(program.ops.size());
  r.event_count = static_cast<std::int64_t>(program.ops.size() + program.cpu.size());
  return out;
}

}  // namespace fsdpsim::fsdp
