#include "sim/app/explain_exposed_comm.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/app/op_labels.hpp"

namespace fsdpsim::app {
namespace {

struct Interval {
  SimTime begin;
  SimTime end;
};

// Sorted, disjoint, non-empty intervals covering the same time as `intervals`.
std::vector<Interval> merged(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (i.end <= i.begin) continue;
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// Time of [begin, end) covered by `busy` (sorted, disjoint).
SimTime covered(const std::vector<Interval>& busy, SimTime begin, SimTime end) {
  SimTime total;
  auto it = std::upper_bound(busy.begin(), busy.end(), begin,
                             [](SimTime t, const Interval& i) { return t < i.end; });
  for (; it != busy.end() && it->begin < end; ++it) {
    total += std::min(end, it->end) - std::max(begin, it->begin);
  }
  return total;
}

}  // namespace

ExposedCommunication exposed_communication(const engine::Program& program,
                                           const engine::Timeline& timeline, engine::OpId first_op,
                                           SimTime step_start,
                                           const std::vector<std::string>& group_names,
                                           const std::vector<bool>& channel_crosses_nodes,
                                           engine::StreamId compute_stream) {
  std::vector<Interval> compute;
  std::vector<Interval> communication;
  for (std::size_t i = first_op; i < program.ops.size(); ++i) {
    const engine::Op& op = program.ops[i];
    const Interval interval{std::max(timeline.ops[i].start, step_start), timeline.ops[i].end};
    if (op.kind == engine::OpKind::kCommunication) {
      communication.push_back(interval);
    } else if (op.stream == compute_stream) {
      compute.push_back(interval);
    }
  }
  const std::vector<Interval> compute_busy = merged(std::move(compute));

  struct UnitTotals {
    std::int64_t collectives = 0;
    SimTime busy;
    SimTime exposed;
  };
  std::map<std::int32_t, UnitTotals> units;  // -1 (none) sorts first; moved last below
  std::map<std::tuple<std::string, std::string, bool>, SimTime> causes;
  SimTime busy_total;
  SimTime exposed_total;
  for (std::size_t i = first_op; i < program.ops.size(); ++i) {
    const engine::Op& op = program.ops[i];
    if (op.kind != engine::OpKind::kCommunication) continue;
    const SimTime begin = std::max(timeline.ops[i].start, step_start);
    const SimTime end = std::max(begin, timeline.ops[i].end);
    const SimTime busy = end - begin;
    const SimTime exposed = busy - covered(compute_busy, begin, end);
    const std::int32_t group =
        op.group >= 0 && static_cast<std::size_t>(op.group) < group_names.size() ? op.group : -1;
    UnitTotals& u = units[group];
    ++u.collectives;
    u.busy += busy;
    u.exposed += exposed;
    busy_total += busy;
    exposed_total += exposed;
    const bool inter_node = op.channel != engine::kNoChannel &&
                            static_cast<std::size_t>(op.channel) < channel_crosses_nodes.size() &&
                            channel_crosses_nodes[static_cast<std::size_t>(op.channel)];
    if (exposed > SimTime{}) {
      causes[{phase_name(op.phase), collective_name(program.names[op.name]), inter_node}] +=
          exposed;
    }
  }

  ExposedCommunication out;
  for (const auto& [group, totals] : units) {
    if (group < 0) continue;
    out.units.push_back({group_name(group_names, group), totals.collectives,
                         to_seconds(totals.busy), to_seconds(totals.exposed)});
  }
  if (const auto none = units.find(-1); none != units.end()) {
    out.units.push_back({"-", none->second.collectives, to_seconds(none->second.busy),
                         to_seconds(none->second.exposed)});
  }
  for (const auto& [key, exposed] : causes) {
    out.causes.push_back(
        {std::get<0>(key), std::get<1>(key), std::get<2>(key), to_seconds(exposed)});
  }
  std::stable_sort(
      out.causes.begin(), out.causes.end(),
      [](const ExposedCause& a, const ExposedCause& b) { return a.exposed > b.exposed; });
  out.busy = to_seconds(busy_total);
  out.exposed = to_seconds(exposed_total);
  SimTime busy_wall;
  SimTime exposed_wall;
  for (const Interval& c : merged(std::move(communication))) {
    busy_wall += c.end - c.begin;
    exposed_wall += (c.end - c.begin) - covered(compute_busy, c.begin, c.end);
  }
  out.busy_wall = to_seconds(busy_wall);
  out.exposed_wall = to_seconds(exposed_wall);
  return out;
}

}  // namespace fsdpsim::app
