#include "sim/engine/op_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>

// Boost.Graph 1.74's edge iterators trip GCC 12's -Wmaybe-uninitialized (a false positive inside
// boost::optional); silence it for these headers only. Clang has no such warning (nor group).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/strong_components.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "sim/engine/executor.hpp"

namespace fsdpsim::engine {

// Edges are collected in a flat list and turned into one compressed-sparse-row graph (two arrays)
// on the first query: every simulation checks its program for cycles, and an adjacency_list's
// per-node edge vectors and Tarjan's DFS cost about a third of a simulation's CPU time (perf on
// `fsdpsim validate`, reports/performance.md). The acyclicity check is Kahn's algorithm, linear
// with flat arrays; Boost's strong_components runs only to name the ops of a cycle.
struct OpGraph::Impl {
  using Graph = boost::compressed_sparse_row_graph<boost::directedS>;
  std::size_t nodes = 0;
  std::vector<std::pair<std::size_t, std::size_t>> edges;
  std::optional<Graph> csr;  // built from `edges` by graph(); dropped by add_edge

  const Graph& graph() {
    if (!csr) csr.emplace(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), nodes);
    return *csr;
  }

  // Kahn's algorithm: the nodes in a topological order, fewer than `nodes` if there is a cycle
  // (the nodes on or behind a cycle never reach in-degree 0).
  std::vector<std::uint32_t> kahn_order() {
    const Graph& g = graph();
    std::vector<std::uint32_t> in_degree(nodes, 0);
    for (const auto& e : edges) ++in_degree[e.second];
    std::vector<std::uint32_t> order;
    order.reserve(nodes);
    for (std::size_t v = 0; v < nodes; ++v) {
      if (in_degree[v] == 0) order.push_back(static_cast<std::uint32_t>(v));
    }
    for (std::size_t next = 0; next < order.size(); ++next) {
      auto [edge, edges_end] = boost::out_edges(Graph::vertex_descriptor{order[next]}, g);
      for (; edge != edges_end; ++edge) {
        const std::size_t v = boost::target(*edge, g);
        if (--in_degree[v] == 0) order.push_back(static_cast<std::uint32_t>(v));
      }
    }
    return order;
  }
};

OpGraph::OpGraph(std::size_t nodes) : impl_(std::make_unique<Impl>()) { impl_->nodes = nodes; }
OpGraph::~OpGraph() = default;
OpGraph::OpGraph(OpGraph&&) noexcept = default;
OpGraph& OpGraph::operator=(OpGraph&&) noexcept = default;

void OpGraph::add_edge(std::uint32_t from, std::uint32_t to) {
  if (from >= impl_->nodes || to >= impl_->nodes) {
    throw std::logic_error(
        fmt::format("OpGraph: edge {} -> {} in a graph of {} nodes", from, to, impl_->nodes));
  }
  impl_->edges.emplace_back(from, to);
  impl_->csr.reset();
}
std::size_t OpGraph::node_count() const { return impl_->nodes; }
std::size_t OpGraph::edge_count() const { return impl_->edges.size(); }

std::vector<std::uint32_t> OpGraph::find_cycle() const {
  const std::size_t n = node_count();
  if (impl_->kahn_order().size() == n) return {};
  const Impl::Graph& g = impl_->graph();
  std::vector<std::size_t> component(n);
  const std::size_t count = boost::strong_components(
      g, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, g)));
  std::vector<std::size_t> size(count, 0);
  for (std::size_t c : component) ++size[c];
  std::vector<bool> self_loop(n, false);  // a self-loop is a cycle of one
  for (const auto& [from, to] : impl_->edges) {
    if (from == to) self_loop[from] = true;
  }
  for (std::size_t v = 0; v < n; ++v) {
    if (size[component[v]] > 1 || self_loop[v]) {
      std::vector<std::uint32_t> nodes;
      for (std::size_t u = 0; u < n; ++u) {
        if (component[u] == component[v]) nodes.push_back(static_cast<std::uint32_t>(u));
      }
      return nodes;
    }
  }
  throw std::logic_error("OpGraph: Kahn's algorithm found a cycle that strong_components did not");
}

std::vector<std::uint32_t> OpGraph::topological_order() const {
  std::vector<std::uint32_t> order = impl_->kahn_order();
  if (order.size() != node_count()) {
    throw std::logic_error("OpGraph::topological_order: the graph has a cycle");
  }
  return order;
}

WeightedPath OpGraph::longest_path(const std::vector<SimTime>& weights) const {
  const std::size_t n = node_count();
  if (weights.size() != n) {
    throw std::logic_error(fmt::format("longest_path: {} weights for {} nodes", weights.size(), n));
  }
  if (n == 0) return {};
  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::vector<SimTime> heaviest(weights);  // heaviest path ending at each node
  std::vector<std::uint32_t> predecessor(n, kNone);
  const Impl::Graph& g = impl_->graph();
  for (const std::uint32_t u : topological_order()) {
    auto [edge, edges_end] = boost::out_edges(Impl::Graph::vertex_descriptor{u}, g);
    for (; edge != edges_end; ++edge) {
      const auto v = static_cast<std::uint32_t>(boost::target(*edge, g));
      const SimTime through_u = heaviest[u] + weights[v];
      const bool better =
          through_u > heaviest[v] ||
          (through_u == heaviest[v] && (predecessor[v] == kNone || u < predecessor[v]));
      if (better) {
        heaviest[v] = through_u;
        predecessor[v] = u;
      }
    }
  }
  std::uint32_t last = 0;
  for (std::uint32_t v = 1; v < n; ++v) {
    if (heaviest[v] > heaviest[last]) last = v;
  }
  WeightedPath path;
  path.length = heaviest[last];
  for (std::uint32_t v = last; v != kNone; v = predecessor[v]) path.nodes.push_back(v);
  std::reverse(path.nodes.begin(), path.nodes.end());
  return path;
}

namespace {

// Records `op` as launched on its stream (`launched`: that stream's ops in launch order) and
// returns the op whose finish made room for it in the stream's launch queue, kNoOp if the
// queue had room: the stream runs its ops in order, so that op is the one launched
// Program::launch_queue_depth launches earlier.
OpId make_room_for(std::vector<OpId>& launched, OpId op, const Program& program) {
  launched.push_back(op);
  if (launched.size() <= program.launch_queue_depth) return kNoOp;
  return launched[launched.size() - 1 - program.launch_queue_depth];
}

}  // namespace

void check_for_deadlock(const Program& program) {
  const auto n = static_cast<std::uint32_t>(program.ops.size());
  const auto issued = [](OpId op) { return 2 * op; };
  const auto finished = [](OpId op) { return 2 * op + 1; };
  OpGraph graph(2 * static_cast<std::size_t>(n));
  std::vector<OpId> last_on_stream(program.stream_names.size(), kNoOp);
  std::vector<OpId> last_on_channel(program.channel_names.size(), kNoOp);
  OpId last_launched = kNoOp;
  std::vector<OpId> waits_before_next_launch;
  std::vector<std::vector<OpId>> launched_on_stream(program.stream_names.size());
  for (const CpuStep& step : program.cpu) {
    if (step.kind == CpuStepKind::kWait) {
      waits_before_next_launch.push_back(step.target);
      continue;
    }
    if (step.kind != CpuStepKind::kLaunch) continue;
    const OpId op = step.target;
    const Op& o = program.ops.at(op);
    graph.add_edge(issued(op), finished(op));
    if (last_launched != kNoOp) graph.add_edge(issued(last_launched), issued(op));
    for (OpId waited : waits_before_next_launch) graph.add_edge(finished(waited), issued(op));
    waits_before_next_launch.clear();
    if (const OpId oldest = make_room_for(launched_on_stream.at(o.stream), op, program);
        oldest != kNoOp) {
      graph.add_edge(finished(oldest), issued(op));
    }
    for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d) {
      graph.add_edge(finished(program.deps.at(d)), finished(op));
    }
    if (last_on_stream.at(o.stream) != kNoOp)
      graph.add_edge(finished(last_on_stream[o.stream]), finished(op));
    last_on_stream[o.stream] = op;
    if (o.channel != kNoChannel) {
      OpId& prev = last_on_channel.at(static_cast<std::size_t>(o.channel));
      if (prev != kNoOp) graph.add_edge(finished(prev), finished(op));
      prev = op;
    }
    last_launched = op;
  }
  const std::vector<std::uint32_t> cycle = graph.find_cycle();
  if (cycle.empty()) return;
  std::vector<OpId> ops;
  for (std::uint32_t node : cycle) ops.push_back(node / 2);
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  std::string names;
  for (std::size_t i = 0; i < ops.size() && i < 12; ++i) {
    names += fmt::format("{}'{}'", i == 0 ? "" : ", ", program.names[program.ops[ops[i]].name]);
  }
  throw DeadlockError(fmt::format("deadlock: {} ops wait on each other in a cycle: {}{}",
                                  ops.size(), names, ops.size() > 12 ? ", ..." : ""));
}

CriticalPath critical_path(const Program& program, const Timeline& timeline) {
  const auto n_ops = static_cast<std::uint32_t>(program.ops.size());
  const auto cpu_node = [n_ops](std::size_t step) {
    return n_ops + static_cast<std::uint32_t>(step);
  };
  OpGraph graph(program.ops.size() + program.cpu.size());
  std::vector<SimTime> weights(graph.node_count());
  std::vector<OpId> last_on_stream(program.stream_names.size(), kNoOp);
  std::vector<OpId> last_on_channel(program.channel_names.size(), kNoOp);
  std::vector<std::vector<OpId>> launched_on_stream(program.stream_names.size());
  // Launched ops by end time, earliest first, for allocations that wait for the device: an op
  // that ended before a waiting allocation's window can be in no later one (the windows move
  // forward with the CPU), so each op is looked at about once.
  using EndingOp = std::pair<SimTime, OpId>;
  std::priority_queue<EndingOp, std::vector<EndingOp>, std::greater<>> launched;
  for (std::size_t i = 0; i < program.cpu.size(); ++i) {
    const CpuStep& step = program.cpu[i];
    const CpuStepTiming& timing = timeline.cpu.at(i);
    const SimTime previous_end = i == 0 ? SimTime{} : timeline.cpu[i - 1].end;
    if (i > 0) graph.add_edge(cpu_node(i - 1), cpu_node(i));
    switch (step.kind) {
      case CpuStepKind::kLaunch: {
        weights[cpu_node(i)] = timing.end - timing.start;
        const OpId op = step.target;
        const Op& o = program.ops.at(op);
        weights[op] = timeline.ops.at(op).end - timeline.ops[op].start;
        graph.add_edge(cpu_node(i), op);
        if (const OpId oldest = make_room_for(launched_on_stream.at(o.stream), op, program);
            oldest != kNoOp) {
          graph.add_edge(oldest, cpu_node(i));
        }
        for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d)
          graph.add_edge(program.deps.at(d), op);
        if (last_on_stream.at(o.stream) != kNoOp) graph.add_edge(last_on_stream[o.stream], op);
        last_on_stream[o.stream] = op;
        if (o.channel != kNoChannel) {
          OpId& prev = last_on_channel.at(static_cast<std::size_t>(o.channel));
          if (prev != kNoOp) graph.add_edge(prev, op);
          prev = op;
        }
        launched.emplace(timeline.ops[op].end, op);
        break;
      }
      case CpuStepKind::kWait:
        graph.add_edge(step.target, cpu_node(i));
        break;
      case CpuStepKind::kWork:
        weights[cpu_node(i)] = timing.end - timing.start;
        break;
      case CpuStepKind::kAlloc:
        // The executor records the start of an allocation that had to wait for ops (pending
        // stream uses, every op for a cudaFree, a stream's for an unmap) when the last awaited
        // op finished: the ops that ended during the wait precede it (any stream's: each ended
        // before the allocation started, so no path through them is longer than the wait's).
        weights[cpu_node(i)] = timing.end - timing.start;
        if (timing.start > previous_end) {
          while (!launched.empty() && launched.top().first <= previous_end) launched.pop();
          while (!launched.empty() && launched.top().first <= timing.start) {
            graph.add_edge(launched.top().second, cpu_node(i));
            launched.pop();
          }
        }
        break;
      case CpuStepKind::kFree:
        break;
    }
  }
  const WeightedPath heaviest = graph.longest_path(weights);
  CriticalPath path;
  path.length = heaviest.length;
  if (path.length != timeline.makespan) {
    throw std::logic_error(
        fmt::format("critical path of {:.6f} us, makespan {:.6f} us: the timeline does not follow "
                    "the executor's rules",
                    path.length.microseconds(), timeline.makespan.microseconds()));
  }
  for (const std::uint32_t node : heaviest.nodes) {
    CriticalStep step;
    if (node < n_ops) {
      step.kind = CriticalStep::Kind::kOp;
      step.index = node;
      step.start = timeline.ops[node].start;
      step.end = timeline.ops[node].end;
    } else {
      step.kind = CriticalStep::Kind::kCpu;
      step.index = node - n_ops;
      step.end = timeline.cpu[step.index].end;
      step.start = step.end - weights[node];
    }
    path.steps.push_back(step);
  }
  return path;
}

}  // namespace fsdpsim::engine
