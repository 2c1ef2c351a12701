#include "sim/app/trace_json.hpp"

#include <nlohmann/json.hpp>

namespace fsdpsim::app {
namespace {

constexpr int kPid = 0;
constexpr int kCpuTid = 0;  // streams are tids 1..n

const char* phase_name(std::uint8_t phase) {
  switch (static_cast<fsdp::Phase>(phase)) {
    case fsdp::Phase::kForward: return "forward";
    case fsdp::Phase::kBackward: return "backward";
    case fsdp::Phase::kRecompute: return "recompute";
    case fsdp::Phase::kOptimizer: return "optimizer";
  }
  return "?";
}

const char* kind_name(engine::OpKind kind) {
  switch (kind) {
    case engine::OpKind::kCompute: return "compute";
    case engine::OpKind::kCommunication: return "communication";
    case engine::OpKind::kCopy: return "copy";
    case engine::OpKind::kMarker: return "marker";
  }
  return "?";
}

nlohmann::json thread_name(int tid, const std::string& name, int sort_index) {
  return {{"ph", "M"}, {"pid", kPid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", name}}},
          {"sort_index", sort_index}};
}

}  // namespace

std::string trace_json(const fsdp::SimulationOutput& output) {
  const engine::Program& p = output.schedule.program;
  const engine::Timeline& t = output.timeline;
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"}, {"pid", kPid}, {"name", "process_name"}, {"args", {{"name", "rank 0"}}}});
  events.push_back(thread_name(kCpuTid, "CPU thread", 0));
  for (std::size_t s = 0; s < p.stream_names.size(); ++s) {
    events.push_back(thread_name(static_cast<int>(s) + 1, "stream " + p.stream_names[s], static_cast<int>(s) + 1));
  }
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const engine::Op& op = p.ops[i];
    const engine::OpTiming& ot = t.ops[i];
    events.push_back({{"ph", "X"},
                      {"pid", kPid},
                      {"tid", op.stream + 1},
                      {"name", p.names[op.name]},
                      {"cat", kind_name(op.kind)},
                      {"ts", ot.start.microseconds()},
                      {"dur", (ot.end - ot.start).microseconds()},
                      {"args", {{"phase", phase_name(op.phase)}, {"issued_us", ot.issue.microseconds()}}}});
  }
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const engine::CpuStep& step = p.cpu[i];
    const engine::CpuStepTiming& ct = t.cpu[i];
    if (ct.end == ct.start) continue;
    std::string name;
    switch (step.kind) {
      case engine::CpuStepKind::kLaunch: name = "launch " + p.names[p.ops[step.target].name]; break;
      case engine::CpuStepKind::kWait: name = "wait: " + p.names[step.name]; break;
      case engine::CpuStepKind::kWork: name = p.names[step.name]; break;
      case engine::CpuStepKind::kAlloc:
      case engine::CpuStepKind::kFree: continue;
    }
    events.push_back({{"ph", "X"}, {"pid", kPid}, {"tid", kCpuTid}, {"name", name}, {"cat", "cpu"},
                      {"ts", ct.start.microseconds()}, {"dur", (ct.end - ct.start).microseconds()}});
  }
  for (const memory::MemorySample& m : output.memory_samples) {
    events.push_back({{"ph", "C"}, {"pid", kPid}, {"name", "memory (GiB)"}, {"ts", m.time.microseconds()},
                      {"args", {{"allocated", to_gib(m.allocated)}, {"active", to_gib(m.active)},
                                {"reserved", to_gib(m.reserved)}}}});
  }
  nlohmann::json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump() + "\n";
}

}  // namespace fsdpsim::app
