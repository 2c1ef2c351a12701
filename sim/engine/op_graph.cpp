#include "sim/engine/op_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

// Boost.Graph 1.74's edge iterators trip GCC 12's -Wmaybe-uninitialized (a false positive inside
// boost::optional); silence it for these headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/topological_sort.hpp>
#pragma GCC diagnostic pop

#include "sim/engine/executor.hpp"

namespace fsdpsim::engine {

struct OpGraph::Impl {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph graph;
};

OpGraph::OpGraph(std::size_t nodes) : impl_(std::make_unique<Impl>()) {
  impl_->graph = Impl::Graph(nodes);
}
OpGraph::~OpGraph() = default;
OpGraph::OpGraph(OpGraph&&) noexcept = default;
OpGraph& OpGraph::operator=(OpGraph&&) noexcept = default;

void OpGraph::add_edge(std::uint32_t from, std::uint32_t to) { boost::add_edge(from, to, impl_->graph); }
std::size_t OpGraph::node_count() const { return boost::num_vertices(impl_->graph); }
std::size_t OpGraph::edge_count() const { return boost::num_edges(impl_->graph); }

std::vector<std::uint32_t> OpGraph::find_cycle() const {
  const std::size_t n = node_count();
  std::vector<std::size_t> component(n);
  const std::size_t count = boost::strong_components(
      impl_->graph, boost::make_iterator_property_map(component.begin(),
                                                      boost::get(boost::vertex_index, impl_->graph)));
  std::vector<std::size_t> size(count, 0);
  for (std::size_t c : component) ++size[c];
  for (std::size_t v = 0; v < n; ++v) {
    // A self-loop is a cycle of one.
    const bool self_loop = boost::edge(v, v, impl_->graph).second;
    if (size[component[v]] > 1 || self_loop) {
      std::vector<std::uint32_t> nodes;
      for (std::size_t u = 0; u < n; ++u) {
        if (component[u] == component[v]) nodes.push_back(static_cast<std::uint32_t>(u));
      }
      return nodes;
    }
  }
  return {};
}

std::vector<std::uint32_t> OpGraph::topological_order() const {
  std::vector<std::size_t> reversed;
  boost::topological_sort(impl_->graph, std::back_inserter(reversed));
  std::vector<std::uint32_t> order(reversed.rbegin(), reversed.rend());
  return order;
}

void check_for_deadlock(const Program& program) {
  const auto n = static_cast<std::uint32_t>(program.ops.size());
  const auto issued = [](OpId op) { return 2 * op; };
  const auto finished = [](OpId op) { return 2 * op + 1; };
  OpGraph graph(2 * static_cast<std::size_t>(n));
  std::vector<OpId> last_on_stream(program.stream_names.size(), kNoOp);
  std::vector<OpId> last_on_channel(program.channel_names.size(), kNoOp);
  OpId last_launched = kNoOp;
  std::vector<OpId> waits_before_next_launch;
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
    for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d) {
      graph.add_edge(finished(program.deps.at(d)), finished(op));
    }
    if (last_on_stream.at(o.stream) != kNoOp) graph.add_edge(finished(last_on_stream[o.stream]), finished(op));
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
  throw DeadlockError(fmt::format("deadlock: {} ops wait on each other in a cycle: {}{}", ops.size(),
                                  names, ops.size() > 12 ? ", ..." : ""));
}

}  // namespace fsdpsim::engine
