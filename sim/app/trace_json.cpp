#include "sim/app/trace_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/app/json_text_writer.hpp"
#include "sim/app/op_labels.hpp"

namespace fsdpsim::app {
namespace {

constexpr int kCpuTid = 0;  // streams are tids 1..n

// The size of the pieces the trace is handed on in: large enough that the sink is called rarely,
// small enough to be nothing beside the simulation's own memory.
constexpr std::size_t kPieceBytes = std::size_t{1} << 20;

// The trace's text on its way to the sink: events are written into a buffer, handed on whenever
// it has grown past kPieceBytes.
class TraceText {
 public:
  explicit TraceText(const TextSink& sink) : sink_(sink) { text_.reserve(2 * kPieceBytes); }
  JsonTextWriter& writer() { return writer_; }
  // Called after each event: hands the text on once it is a piece's worth.
  void event_written() {
    if (text_.size() >= kPieceBytes) flush();
  }
  // Ends the trace's last line and hands on the rest of the text.
  void finish() {
    text_ += '\n';
    flush();
  }

 private:
  void flush() {
    sink_(text_);
    text_.clear();
  }

  const TextSink& sink_;
  std::string text_;
  JsonTextWriter writer_{text_};
};

// Room reserved for the whole trace's text (trace_json) per op and per memory sample: an op with
// its launch slice and arrows takes about 350 bytes (T5-11B at 32 micro-batches: 187 MB for 539k
// ops), a sample about 130. Reserving more than is written costs address space, not memory (the
// pages are never touched), and spares copying the text each time a growing string doubles: at its
// last doubling the old and the new buffer were both alive, half again the trace's size.
constexpr std::size_t kReservedBytesPerOp = 512;
constexpr std::size_t kReservedBytesPerSample = 192;

// Each event goes into the output text as it is made: a trace of many micro-batches has millions of
// events (a JSON tree of them took ten times the size of its text, 6.8 GB for a 0.75 GB trace).
// Every object's keys are written in the byte-wise order nlohmann's dump() sorts them in, so the
// text is what dumping the same events as nlohmann::json would give.

// A metadata ("M") event: `name` (process_name, thread_sort_index, ...) with its one argument,
// for a process (tid < 0) or one of its threads.
template <typename Value>
void metadata(JsonTextWriter& w, const char* name, const char* arg, const Value& value, int pid,
              int tid = -1) {
  w.begin_object();
  w.key("args").begin_object().field(arg, value).end_object();
  w.field("name", name).field("ph", "M").field("pid", pid);
  if (tid >= 0) w.field("tid", tid);
  w.end_object();
}

// Flow events bind to the slice that encloses their timestamp on their track ("s"; "f" with
// "bp": "e"). Place them just inside the slice (1 ns, or half of a shorter slice) so that the
// arrow leaves the end of the op waited on and enters the start of the waiting op, whatever
// order a viewer breaks ties in.
constexpr double kFlowInsetUs = 0.001;

double flow_inset_us(SimTime start, SimTime end) {
  return std::min((end - start).microseconds() / 2.0, kFlowInsetUs);
}

struct FlowWriter {
  TraceText& out;
  int pid;
  int& next_id;  // unique across the trace's processes

  void add(const char* name, int from_tid, double from_us, int to_tid, double to_us) {
    JsonTextWriter& events = out.writer();
    const int id = next_id++;
    events.begin_object().field("cat", "flow").field("id", id).field("name", name);
    events.field("ph", "s").field("pid", pid).field("tid", from_tid).field("ts", from_us);
    events.end_object();
    events.begin_object().field("bp", "e").field("cat", "flow").field("id", id).field("name", name);
    events.field("ph", "f").field("pid", pid).field("tid", to_tid).field("ts", to_us);
    events.end_object();
    out.event_written();
  }
};

// The op that released a zero-length marker (the predecessor on its stream or a dependency that
// ended when it did), following chains of markers; kNoOp when the CPU's issue released it.
engine::OpId through_markers(const engine::Program& p, const engine::Timeline& t,
                             const std::vector<engine::OpId>& previous_on_stream, engine::OpId op) {
  constexpr int kMaxChain = 16;
  for (int hop = 0; hop < kMaxChain && op != engine::kNoOp; ++hop) {
    const engine::Op& o = p.ops[op];
    if (o.kind != engine::OpKind::kMarker) return op;
    engine::OpId released_by = engine::kNoOp;
    const auto consider = [&](engine::OpId candidate) {
      if (candidate != engine::kNoOp && released_by == engine::kNoOp &&
          t.ops[candidate].end == t.ops[op].start) {
        released_by = candidate;
      }
    };
    for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d) consider(p.deps[d]);
    consider(previous_on_stream[op]);
    op = released_by;
  }
  return engine::kNoOp;
}

// Arrows for cross-stream waits (from the end of the op waited on to the start of the waiting
// op) and, where the CPU's launch is what an op waited for (it started when it was issued, after
// everything else it needed), from the launch slice to the op.
void add_flows(const engine::Program& p, const engine::Timeline& t, int pid, int& next_flow_id,
               TraceText& out) {
  std::vector<engine::OpId> previous_on_stream(p.ops.size(), engine::kNoOp);
  std::vector<engine::OpId> previous_on_channel(p.ops.size(), engine::kNoOp);
  std::vector<std::size_t> launch_step(p.ops.size(), p.cpu.size());
  {
    std::vector<engine::OpId> last_on_stream(p.stream_names.size(), engine::kNoOp);
    std::vector<engine::OpId> last_on_channel(p.channel_names.size(), engine::kNoOp);
    for (std::size_t i = 0; i < p.cpu.size(); ++i) {
      if (p.cpu[i].kind != engine::CpuStepKind::kLaunch) continue;
      const engine::OpId op = p.cpu[i].target;
      const engine::Op& o = p.ops[op];
      launch_step[op] = i;
      previous_on_stream[op] = std::exchange(last_on_stream[o.stream], op);
      if (o.channel != engine::kNoChannel) {
        previous_on_channel[op] =
            std::exchange(last_on_channel[static_cast<std::size_t>(o.channel)], op);
      }
    }
  }
  FlowWriter flows{out, pid, next_flow_id};
  for (engine::OpId op = 0; op < p.ops.size(); ++op) {
    const engine::Op& o = p.ops[op];
    if (o.kind == engine::OpKind::kMarker) continue;
    const engine::OpTiming& ot = t.ops[op];
    const double to_us = ot.start.microseconds() + flow_inset_us(ot.start, ot.end);
    SimTime ready_without_cpu;
    for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d) {
      ready_without_cpu = std::max(ready_without_cpu, t.ops[p.deps[d]].end);
      const engine::OpId from = through_markers(p, t, previous_on_stream, p.deps[d]);
      if (from == engine::kNoOp || p.ops[from].stream == o.stream) continue;
      const engine::OpTiming& ft = t.ops[from];
      flows.add("waits for", p.ops[from].stream + 1,
                ft.end.microseconds() - flow_inset_us(ft.start, ft.end), o.stream + 1, to_us);
    }
    for (const engine::OpId before : {previous_on_stream[op], previous_on_channel[op]}) {
      if (before != engine::kNoOp)
        ready_without_cpu = std::max(ready_without_cpu, t.ops[before].end);
    }
    const std::size_t launch = launch_step[op];
    if (launch < p.cpu.size() && ot.start == ot.issue && ready_without_cpu < ot.issue) {
      const engine::CpuStepTiming& lt = t.cpu[launch];
      if (lt.end == lt.start) continue;
      flows.add("launch", kCpuTid, lt.end.microseconds() - flow_inset_us(lt.start, lt.end),
                o.stream + 1, to_us);
    }
  }
}

// One rank's CPU thread and streams as process `pid` of the trace.
void add_rank(const engine::Program& p, const engine::Timeline& t, int pid, const std::string& name,
              int& next_flow_id, TraceText& out) {
  JsonTextWriter& events = out.writer();
  metadata(events, "process_name", "name", name, pid);
  metadata(events, "process_sort_index", "sort_index", pid, pid);
  metadata(events, "thread_name", "name", "CPU thread", pid, kCpuTid);
  metadata(events, "thread_sort_index", "sort_index", 0, pid, kCpuTid);
  for (std::size_t s = 0; s < p.stream_names.size(); ++s) {
    const int tid = static_cast<int>(s) + 1;
    metadata(events, "thread_name", "name", fmt::format("stream {}", p.stream_names[s]), pid, tid);
    metadata(events, "thread_sort_index", "sort_index", tid, pid, tid);
  }
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const engine::Op& op = p.ops[i];
    const engine::OpTiming& ot = t.ops[i];
    events.begin_object();
    events.key("args").begin_object();
    events.field("issued_us", ot.issue.microseconds());
    // A marker (a stream's wait on another) belongs to no phase of the step.
    if (op.kind != engine::OpKind::kMarker) events.field("phase", phase_name(op.phase));
    events.end_object();
    events.field("cat", op_kind_name(op.kind)).field("dur", (ot.end - ot.start).microseconds());
    events.field("name", p.names[op.name]).field("ph", "X").field("pid", pid);
    events.field("tid", static_cast<int>(op.stream) + 1).field("ts", ot.start.microseconds());
    events.end_object();
    out.event_written();
  }
  std::string step_name;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const engine::CpuStep& step = p.cpu[i];
    const engine::CpuStepTiming& ct = t.cpu[i];
    if (ct.end == ct.start) continue;
    step_name.clear();
    switch (step.kind) {
      case engine::CpuStepKind::kLaunch:
        fmt::format_to(std::back_inserter(step_name), "launch {}",
                       p.names[p.ops[step.target].name]);
        break;
      case engine::CpuStepKind::kWait:
        fmt::format_to(std::back_inserter(step_name), "wait: {}", p.names[step.name]);
        break;
      case engine::CpuStepKind::kWork:
        step_name = p.names[step.name];
        break;
      case engine::CpuStepKind::kAlloc:  // only its device calls take time (a retry's cudaFree)
        fmt::format_to(std::back_inserter(step_name), "caching allocator: device calls for {}",
                       p.names[p.tensors[step.target].name]);
        break;
      case engine::CpuStepKind::kFree:
        continue;
    }
    events.begin_object().field("cat", "cpu").field("dur", (ct.end - ct.start).microseconds());
    events.field("name", step_name).field("ph", "X").field("pid", pid).field("tid", kCpuTid);
    events.field("ts", ct.start.microseconds()).end_object();
    out.event_written();
  }
  add_flows(p, t, pid, next_flow_id, out);
}

}  // namespace

void write_trace_json(const fsdp::SimulationOutput& output, const TextSink& sink) {
  const engine::Program& p = output.schedule.program;
  const fsdp::StepResult& r = output.result;
  TraceText out(sink);
  JsonTextWriter& w = out.writer();
  w.begin_object().field("displayTimeUnit", "ms").key("traceEvents").begin_array();
  int next_flow_id = 1;
  int memory_pid = 0;
  if (output.rank_timelines.empty()) {
    add_rank(p, output.timeline, 0, "rank 0", next_flow_id, out);
  } else {
    // hardware.stragglers: a process per class of alike ranks, named by its first rank.
    for (std::size_t k = 0; k < output.rank_timelines.size(); ++k) {
      const fsdp::RankClassResult& c = r.rank_classes.at(k);
      const int pid = c.first_rank;
      add_rank(p, output.rank_timelines[k], pid,
               fmt::format("rank {} ({} rank{} alike; compute speed {:g}, host speed {:g})",
                           c.first_rank, c.ranks, c.ranks == 1 ? "" : "s", c.compute_speed,
                           c.host_speed),
               next_flow_id, out);
    }
    memory_pid = r.memory_rank;
  }
  for (const memory::MemorySample& m : output.memory_samples) {
    w.begin_object();
    w.key("args").begin_object().field("active", to_gib(m.active));
    w.field("allocated", to_gib(m.allocated))
        .field("reserved", to_gib(m.shown_reserved(r.models_reserved)))
        .end_object();
    w.field("name", "memory (GiB)").field("ph", "C").field("pid", memory_pid);
    w.field("ts", m.time.microseconds()).end_object();
    out.event_written();
  }
  // The warm-up step runs first; the step the results describe starts here.
  w.begin_object();
  w.key("args").begin_object().field("step_time_s", r.step_time.value()).end_object();
  w.field("name", "measured step begins").field("ph", "i").field("pid", memory_pid);
  w.field("s", "g").field("ts", output.measured_start.microseconds()).end_object();
  // Where the allocator failed: the memory counter's reserved holds still from there (the
  // allocator sees no later tensor), while allocated and active go on as if the device were
  // large enough.
  if (r.models_reserved && r.reserved.out_of_memory) {
    w.begin_object();
    w.key("args").begin_object().field("reason", r.oom_reason).end_object();
    w.field("name", "out of memory").field("ph", "i").field("pid", memory_pid);
    w.field("s", "g").field("ts", r.reserved.oom_time.microseconds()).end_object();
  }
  w.end_array().end_object();
  out.finish();
}

std::string trace_json(const fsdp::SimulationOutput& output) {
  std::string text;
  const std::size_t processes = std::max<std::size_t>(output.rank_timelines.size(), 1);
  text.reserve(processes * output.schedule.program.ops.size() * kReservedBytesPerOp +
               output.memory_samples.size() * kReservedBytesPerSample);
  write_trace_json(output, [&text](std::string_view piece) { text += piece; });
  return text;
}

}  // namespace fsdpsim::app
