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
    ops.push_back({std::string(p.names[p.ops[i].name]), out.timeline.ops[i], p.ops[i].launch_cost});
  }
  return ops;
}

// The measured step's ops whose name ends in `suffix`, in issue order, by the name before it.
inline std::vector<std::string> ops_ending_in(const SimulationOutput& out,
                                              const std::string& suffix) {
  std::vector<std::string> names;
  for (const Op& op : measured_ops(out)) {
    if (op.name.size() > suffix.size() &&
        op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(op.name.substr(0, op.name.size() - suffix.size()));
  }
  return names;
}

// How many of the measured step's ops end in `suffix`, by the name before it.
inline std::map<std::string, int> count_ops_ending_in(const SimulationOutput& out,
                                                      const std::string& suffix) {
  std::map<std::string, int> count;
  for (const std::string& name : ops_ending_in(out, suffix)) ++count[name];
  return count;
}

// The measured step's all-gathers in issue order, by the name before ".all_gather".
inline std::vector<std::string> all_gathers(const SimulationOutput& out) {
  return ops_ending_in(out, ".all_gather");
}

// How many times the measured step all-gathers each name.
inline std::map<std::string, int> gather_counts(const SimulationOutput& out) {
  return count_ops_ending_in(out, ".all_gather");
}

inline const Op& op_named(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

}  // namespace fsdpsim::fsdp::testing
