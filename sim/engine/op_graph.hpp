// A directed graph of "must happen before" relations between events of a program, with Boost.Graph
// underneath and our own ids on top (STYLE.md: Boost stays behind OpGraph).
//
// check_for_deadlock() builds it from a Program: each op has an "issued" and a "finished" node;
// edges are the CUDA and CPU rules (an op finishes after it is issued, after its dependencies,
// after its stream and channel predecessors; the CPU issues in order and a wait delays every
// later launch). A cycle is a deadlock and is reported with the ops involved.
//
// critical_path() builds the same kind of graph from an executed program, one node per op and
// per CPU step weighted by the time it took, and walks its heaviest path: the chain of kernels,
// collectives, launches and host work that set the makespan.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/engine/program.hpp"
#include "sim/engine/timeline.hpp"

namespace fsdpsim::engine {

// A path through an OpGraph and its weight (the sum of its nodes' weights).
struct WeightedPath {
  std::vector<std::uint32_t> nodes;  // first to last
  SimTime length;
};

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
  // The heaviest path when a path weighs the sum of its nodes' weights (weights >= 0, one per
  // node). Ties are broken deterministically: a path that has a predecessor beats one that starts
  // at the node, then the predecessor with the smaller id wins; the path ends at the heaviest
  // node with the smallest id. Empty for an empty graph. Precondition: acyclic.
  // O(nodes + edges).
  [[nodiscard]] WeightedPath longest_path(const std::vector<SimTime>& weights) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Throws DeadlockError (executor.hpp) naming the ops on a cycle, if any.
void check_for_deadlock(const Program& program);

// One op or CPU step on a critical path, with the interval the timeline gives it.
struct CriticalStep {
  enum class Kind : std::uint8_t { kOp, kCpu };
  Kind kind = Kind::kOp;
  std::uint32_t index = 0;  // OpId for kOp, index into Program::cpu for kCpu
  SimTime start;
  SimTime end;
};

struct CriticalPath {
  std::vector<CriticalStep> steps;  // in time order; consecutive steps touch (end == next start)
  SimTime length;                   // == timeline.makespan
};

// The chain of ops and CPU steps that set timeline.makespan: the heaviest path of the DAG whose
// nodes are the ops (weight: end - start, so contention by communication is included) and the
// CPU steps (weight: the CPU time of a launch, host work or allocation; zero for waits and
// frees), and whose edges are the executor's rules: the CPU runs its steps in order, an op
// starts after its launch, its cross-stream dependencies, its predecessor on its stream and on
// its channel; a wait ends after its op; an allocation that synchronized the device ends after
// every op outstanding then. Because every start in the timeline is the latest end of its
// predecessors, the path is gap-free and its length is the makespan. Zero-weight steps (waits,
// frees, markers) are on the path where they carry it. Throws std::logic_error (our bug) if the
// timeline and the graph disagree. O(ops + cpu steps + deps) time, plus O(ops) per allocation
// that synchronized the device (a cudaMalloc retry; rare).
CriticalPath critical_path(const Program& program, const Timeline& timeline);

}  // namespace fsdpsim::engine
