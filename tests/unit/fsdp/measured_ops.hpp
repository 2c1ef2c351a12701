// The measured step's ops of a simulated schedule, for tests that check what ran when.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::fsdp::testing {

struct Op {
  std::string name;
  engine::OpTiming timing;
  SimTime launch_cost;
};

// The measured step's ops, in issue order.
inline std::vector<Op> measured_ops(const SimulationOutput& out) {
  std::vector<Op> ops;
  const engine::Program& p = out.schedule.program;
  for (std::size_t i = out.schedule.measured_first_op; i < p.ops.size(); ++i) {
    ops.push_back({p.names[p.ops[i].name], out.timeline.ops[i], p.ops[i].launch_cost});
  }
  return ops;
}

// The measured step's all-gathers in issue order, by the name before ".all_gather".
inline std::vector<std::string> all_gathers(const SimulationOutput& out) {
  std::vector<std::string> names;
  for (const Op& op : measured_ops(out)) {
    const std::string suffix = ".all_gather";
    if (op.name.size() > suffix.size() &&
        op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(op.name.substr(0, op.name.size() - suffix.size()));
  }
  return names;
}

// How many times the measured step all-gathers each name.
inline std::map<std::string, int> gather_counts(const SimulationOutput& out) {
  std::map<std::string, int> count;
  for (const std::string& name : all_gathers(out)) ++count[name];
  return count;
}

inline const Op& op_named(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

}  // namespace fsdpsim::fsdp::testing
