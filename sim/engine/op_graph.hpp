// A directed graph of "must happen before" relations between events of a program, with Boost.Graph
// underneath and our own ids on top (STYLE.md: Boost stays behind OpGraph).
//
// check_for_deadlock() builds it from a Program: each op has an "issued" and a "finished" node;
// edges are the CUDA and CPU rules (an op finishes after it is issued, after its dependencies,
// after its stream and channel predecessors; the CPU issues in order and a wait delays every
// later launch). A cycle is a deadlock and is reported with the ops involved.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/engine/program.hpp"

namespace fsdpsim::engine {

class OpGraph {
 public:
  explicit OpGraph(std::size_t nodes);
  ~OpGraph();
  OpGraph(OpGraph&&) noexcept;
  OpGraph& operator=(OpGraph&&) noexcept;

  void add_edge(std::uint32_t from, std::uint32_t to);
  [[nodiscard]] std::size_t node_count() const;
  [[nodiscard]] std::size_t edge_count() const;
  // The nodes of one cycle's strongly connected component, empty if the graph is acyclic.
  [[nodiscard]] std::vector<std::uint32_t> find_cycle() const;
  // A topological order. Precondition: acyclic.
  [[nodiscard]] std::vector<std::uint32_t> topological_order() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Throws DeadlockError (executor.hpp) naming the ops on a cycle, if any.
void check_for_deadlock(const Program& program);

}  // namespace fsdpsim::engine
