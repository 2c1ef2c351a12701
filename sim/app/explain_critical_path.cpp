#include "sim/app/explain_critical_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "sim/app/op_labels.hpp"

namespace fsdpsim::app {
namespace {

struct Label {
  std::int32_t group = -1;  // unit index, -1 for none
  std::string kind;
};

// Unit of a host-work step: the longest group name that prefixes its name at a '.'.
// The unit a host step belongs to by its name ("blocks.3.post_backward_hook"), else the step's
// own first word ("optimizer" for optimizer.cpu_adamw, a CPU optimizer's step), added to `groups`.
std::int32_t group_of_host_work(std::string_view name, std::vector<std::string>& groups) {
  std::int32_t best = -1;
  std::size_t best_length = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string& unit = groups[g];
    if (unit.size() > best_length && name.size() > unit.size() &&
        name.compare(0, unit.size(), unit) == 0 && name[unit.size()] == '.') {
      best = static_cast<std::int32_t>(g);
      best_length = unit.size();
    }
  }
  if (best >= 0) return best;
  const std::string_view word = name.substr(0, name.find('.'));
  if (word.empty()) return -1;
  const auto known = std::find(groups.begin(), groups.end(), word);
  if (known != groups.end()) return static_cast<std::int32_t>(known - groups.begin());
  groups.emplace_back(word);
  return static_cast<std::int32_t>(groups.size() - 1);
}

Label label_of_op(const engine::Program& program, engine::OpId op) {
  const engine::Op& o = program.ops[op];
  Label label;
  label.group = o.group;
  switch (o.kind) {
    case engine::OpKind::kCommunication:
      label.kind =
          fmt::format("{} {}", phase_name(o.phase), collective_name(program.names[o.name]));
      break;
    case engine::OpKind::kCompute:
    case engine::OpKind::kCopy:
    case engine::OpKind::kCopyEngine:
    case engine::OpKind::kMarker:
      label.kind = fmt::format("{} {}", phase_name(o.phase), op_kind_name(o.kind));
      break;
  }
  return label;
}

struct Accumulated {
  SimTime time;
  std::int64_t steps = 0;
};

using Shares = std::map<std::pair<std::int32_t, std::string>, Accumulated>;

// Descending time; the map's (unit, kind) order among equal times.
std::vector<CriticalPathShare> sorted(const Shares& shares,
                                      const std::vector<std::string>& group_names, bool with_unit) {
  std::vector<CriticalPathShare> out;
  std::vector<SimTime> times;
  std::vector<std::size_t> order;
  for (const auto& [key, acc] : shares) {
    CriticalPathShare share;
    if (with_unit) share.unit = group_name(group_names, key.first);
    share.kind = key.second;
    share.time = to_seconds(acc.time);
    share.steps = acc.steps;
    order.push_back(out.size());
    out.push_back(std::move(share));
    times.push_back(acc.time);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return times[a] > times[b]; });
  std::vector<CriticalPathShare> result;
  result.reserve(out.size());
  for (const std::size_t i : order) result.push_back(std::move(out[i]));
  return result;
}

}  // namespace

CriticalPathSummary summarize_critical_path(const engine::Program& program,
                                            const engine::CriticalPath& path, SimTime step_start,
                                            const std::vector<std::string>& unit_names) {
  CriticalPathSummary summary;
  std::vector<std::string> group_names = unit_names;  // and the host steps' own words
  Shares by_kind;
  Shares by_unit_kind;
  SimTime length;
  SimTime gpu_compute;
  SimTime gpu_communication;
  SimTime cpu_launch;
  SimTime cpu_host;
  SimTime cpu_allocator;
  for (const engine::CriticalStep& step : path.steps) {
    const SimTime begin = std::max(step.start, step_start);
    if (step.end <= begin) continue;
    const SimTime time = step.end - begin;
    Label label;
    if (step.kind == engine::CriticalStep::Kind::kOp) {
      label = label_of_op(program, step.index);
      (program.ops[step.index].kind == engine::OpKind::kCommunication ? gpu_communication
                                                                      : gpu_compute) += time;
    } else {
      const engine::CpuStep& cpu = program.cpu[step.index];
      switch (cpu.kind) {
        case engine::CpuStepKind::kLaunch:
          label = {program.ops[cpu.target].group, "CPU launch"};
          cpu_launch += time;
          break;
        case engine::CpuStepKind::kAlloc:  // the unit whose tensor the allocation is for
          label = {group_of_host_work(program.names[program.tensors[cpu.target].name], group_names),
                   "CPU allocator"};
          cpu_host += time;
          cpu_allocator += time;
          break;
        case engine::CpuStepKind::kWork:
        case engine::CpuStepKind::kWait:
        case engine::CpuStepKind::kFree:
          label = {group_of_host_work(program.names[cpu.name], group_names), "CPU host work"};
          cpu_host += time;
          break;
      }
    }
    length += time;
    ++summary.steps;
    Accumulated& kind = by_kind[{-1, label.kind}];
    kind.time += time;
    ++kind.steps;
    Accumulated& unit_kind = by_unit_kind[{label.group, label.kind}];
    unit_kind.time += time;
    ++unit_kind.steps;
  }
  summary.length = to_seconds(length);
  summary.gpu_compute = to_seconds(gpu_compute);
  summary.gpu_communication = to_seconds(gpu_communication);
  summary.cpu_launch = to_seconds(cpu_launch);
  summary.cpu_host = to_seconds(cpu_host);
  summary.cpu_allocator = to_seconds(cpu_allocator);
  summary.by_kind = sorted(by_kind, group_names, false);
  summary.by_unit_kind = sorted(by_unit_kind, group_names, true);
  return summary;
}

}  // namespace fsdpsim::app
