#include "sim/app/trace_json.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim/app/op_labels.hpp"

namespace fsdpsim::app {
namespace {

constexpr int kCpuTid = 0;  // streams are tids 1..n

// The trace's event array, written out event by event: a trace of many micro-batches has
// millions of events, and holding them all as one JSON tree took ten times the size of its text
// (6.8 GB for a 0.75 GB trace).
class EventWriter {
 public:
  explicit EventWriter(std::string& out) : out_(out) {}
  void push_back(const nlohmann::json& event) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += event.dump();
  }

 private:
  std::string& out_;
  bool first_ = true;
};

nlohmann::json thread_name(int pid, int tid, const std::string& name) {
  return {
      {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", name}}}};
}

nlohmann::json thread_sort_index(int pid, int tid, int sort_index) {
  return {{"ph", "M"},
          {"pid", pid},
          {"tid", tid},
          {"name", "thread_sort_index"},
          {"args", {{"sort_index", sort_index}}}};
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
  EventWriter& events;
  int pid;
  int& next_id;  // unique across the trace's processes

  void add(const char* name, int from_tid, double from_us, int to_tid, double to_us) {
    const int id = next_id++;
    events.push_back({{"ph", "s"},
                      {"pid", pid},
                      {"tid", from_tid},
                      {"ts", from_us},
                      {"id", id},
                      {"name", name},
                      {"cat", "flow"}});
    events.push_back({{"ph", "f"},
                      {"bp", "e"},
                      {"pid", pid},
                      {"tid", to_tid},
                      {"ts", to_us},
                      {"id", id},
                      {"name", name},
                      {"cat", "flow"}});
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
               EventWriter& events) {
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
  FlowWriter flows{events, pid, next_flow_id};
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
              int& next_flow_id, EventWriter& events) {
  events.push_back(
      {{"ph", "M"}, {"pid", pid}, {"name", "process_name"}, {"args", {{"name", name}}}});
  events.push_back(
      {{"ph", "M"}, {"pid", pid}, {"name", "process_sort_index"}, {"args", {{"sort_index", pid}}}});
  events.push_back(thread_name(pid, kCpuTid, "CPU thread"));
  events.push_back(thread_sort_index(pid, kCpuTid, 0));
  for (std::size_t s = 0; s < p.stream_names.size(); ++s) {
    const int tid = static_cast<int>(s) + 1;
    events.push_back(thread_name(pid, tid, fmt::format("stream {}", p.stream_names[s])));
    events.push_back(thread_sort_index(pid, tid, tid));
  }
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const engine::Op& op = p.ops[i];
    const engine::OpTiming& ot = t.ops[i];
    events.push_back(
        {{"ph", "X"},
         {"pid", pid},
         {"tid", op.stream + 1},
         {"name", p.names[op.name]},
         {"cat", op_kind_name(op.kind)},
         {"ts", ot.start.microseconds()},
         {"dur", (ot.end - ot.start).microseconds()},
         {"args", {{"phase", phase_name(op.phase)}, {"issued_us", ot.issue.microseconds()}}}});
  }
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const engine::CpuStep& step = p.cpu[i];
    const engine::CpuStepTiming& ct = t.cpu[i];
    if (ct.end == ct.start) continue;
    std::string step_name;
    switch (step.kind) {
      case engine::CpuStepKind::kLaunch:
        step_name = fmt::format("launch {}", p.names[p.ops[step.target].name]);
        break;
      case engine::CpuStepKind::kWait:
        step_name = fmt::format("wait: {}", p.names[step.name]);
        break;
      case engine::CpuStepKind::kWork:
        step_name = p.names[step.name];
        break;
      case engine::CpuStepKind::kAlloc:
      case engine::CpuStepKind::kFree:
        continue;
    }
    events.push_back({{"ph", "X"},
                      {"pid", pid},
                      {"tid", kCpuTid},
                      {"name", step_name},
                      {"cat", "cpu"},
                      {"ts", ct.start.microseconds()},
                      {"dur", (ct.end - ct.start).microseconds()}});
  }
  add_flows(p, t, pid, next_flow_id, events);
}

}  // namespace

std::string trace_json(const fsdp::SimulationOutput& output) {
  const engine::Program& p = output.schedule.program;
  const fsdp::StepResult& r = output.result;
  // {"displayTimeUnit": ..., "traceEvents": [...]}: keys in the order nlohmann's dump sorts them.
  std::string text = R"({"displayTimeUnit":"ms","traceEvents":[)";
  EventWriter events(text);
  int next_flow_id = 1;
  int memory_pid = 0;
  if (output.rank_timelines.empty()) {
    add_rank(p, output.timeline, 0, "rank 0", next_flow_id, events);
  } else {
    // hardware.stragglers: a process per class of alike ranks, named by its first rank.
    for (std::size_t k = 0; k < output.rank_timelines.size(); ++k) {
      const fsdp::RankClassResult& c = r.rank_classes.at(k);
      const int pid = c.first_rank;
      add_rank(p, output.rank_timelines[k], pid,
               fmt::format("rank {} ({} rank{} alike; compute speed {:g}, host speed {:g})",
                           c.first_rank, c.ranks, c.ranks == 1 ? "" : "s", c.compute_speed,
                           c.host_speed),
               next_flow_id, events);
    }
    memory_pid = r.breakdown_rank;
  }
  for (const memory::MemorySample& m : output.memory_samples) {
    events.push_back({{"ph", "C"},
                      {"pid", memory_pid},
                      {"name", "memory (GiB)"},
                      {"ts", m.time.microseconds()},
                      {"args",
                       {{"allocated", to_gib(m.allocated)},
                        {"active", to_gib(m.active)},
                        {"reserved", to_gib(m.reserved)}}}});
  }
  // The warm-up step runs first; the step the results describe starts here.
  events.push_back({{"ph", "i"},
                    {"s", "g"},
                    {"pid", memory_pid},
                    {"name", "measured step begins"},
                    {"ts", output.measured_start.microseconds()},
                    {"args", {{"step_time_s", r.step_time.value()}}}});
  text += "]}\n";
  return text;
}

}  // namespace fsdpsim::app
