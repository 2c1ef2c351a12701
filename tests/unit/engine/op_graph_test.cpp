// OpGraph: cycles, the heaviest path of a weighted DAG, and the critical path of an executed
// program, on hand-made programs whose timelines are computed in the comments.
#include "sim/engine/op_graph.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "sim/engine/executor.hpp"
#include "sim/engine/program_builder.hpp"

namespace fsdpsim::engine {
namespace {

SimTime us(double v) { return to_sim_time(microseconds(v)); }

LaunchSpec spec(std::string_view name, StreamId stream, double duration_us, double launch_us) {
  LaunchSpec s;
  s.name = name;
  s.stream = stream;
  s.duration = us(duration_us);
  s.launch_cost = us(launch_us);
  return s;
}

struct Expected {
  CriticalStep::Kind kind;
  std::uint32_t index;
  double start_us;
  double end_us;
};

void expect_path(const CriticalPath& path, const std::vector<Expected>& expected) {
  ASSERT_EQ(path.steps.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(path.steps[i].kind, expected[i].kind);
    EXPECT_EQ(path.steps[i].index, expected[i].index);
    EXPECT_EQ(path.steps[i].start, us(expected[i].start_us));
    EXPECT_EQ(path.steps[i].end, us(expected[i].end_us));
  }
}

constexpr auto kOp = CriticalStep::Kind::kOp;
constexpr auto kCpu = CriticalStep::Kind::kCpu;

TEST(OpGraph, LongestPathSumsNodeWeightsAndBreaksTiesBySmallerId) {
  // 0 -> 1 -> 3 and 0 -> 2 -> 3, with 1 and 2 equally heavy; 4 stands alone.
  OpGraph g(5);
  g.add_edge(0, 1);
  g.add_edge(0, 2);
  g.add_edge(1, 3);
  g.add_edge(2, 3);
  const WeightedPath p = g.longest_path({us(1), us(5), us(5), us(2), us(7)});
  EXPECT_EQ(p.length, us(8));
  EXPECT_EQ(p.nodes, (std::vector<std::uint32_t>{0, 1, 3}));
  const WeightedPath heavier_branch = g.longest_path({us(1), us(5), us(6), us(2), us(7)});
  EXPECT_EQ(heavier_branch.nodes, (std::vector<std::uint32_t>{0, 2, 3}));
  EXPECT_EQ(heavier_branch.length, us(9));
  const WeightedPath lone = g.longest_path({us(1), us(1), us(1), us(1), us(7)});
  EXPECT_EQ(lone.nodes, (std::vector<std::uint32_t>{4}));
  EXPECT_TRUE(OpGraph(0).longest_path({}).nodes.empty());
}

TEST(OpGraph, FindsTheCycleBehindAnAcyclicPartAndASelfLoop) {
  // 0 -> 1 is fine; 2 -> 3 -> 2 is a cycle and 4, after it, is never reached by Kahn's order
  // either, but it is not on the cycle.
  OpGraph g(5);
  g.add_edge(0, 1);
  g.add_edge(2, 3);
  g.add_edge(3, 2);
  g.add_edge(3, 4);
  EXPECT_EQ(g.find_cycle(), (std::vector<std::uint32_t>{2, 3}));
  EXPECT_THROW((void)g.topological_order(), std::logic_error);

  OpGraph self(3);
  self.add_edge(0, 1);
  self.add_edge(1, 1);
  EXPECT_EQ(self.find_cycle(), (std::vector<std::uint32_t>{1}));
}

TEST(OpGraph, AnEdgeOutsideTheGraphIsOurBug) {
  OpGraph g(2);
  EXPECT_THROW(g.add_edge(0, 2), std::logic_error);
}

TEST(OpGraph, TopologicalOrderPutsEveryNodeAfterItsPredecessors) {
  // Edges added out of order, with a node (5) that nothing touches.
  OpGraph g(6);
  g.add_edge(4, 0);
  g.add_edge(3, 4);
  g.add_edge(1, 3);
  g.add_edge(2, 3);
  g.add_edge(1, 0);
  const std::vector<std::uint32_t> order = g.topological_order();
  ASSERT_EQ(order.size(), 6U);
  std::vector<std::size_t> position(6);
  for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  EXPECT_LT(position[4], position[0]);
  EXPECT_LT(position[3], position[4]);
  EXPECT_LT(position[1], position[3]);
  EXPECT_LT(position[2], position[3]);
  EXPECT_LT(position[1], position[0]);
}

TEST(CriticalPath, FollowsTheCollectiveAComputeOpWaitsFor) {
  // CPU: launch A (0-1), launch G (1-2), launch B (2-3), hook (3-5), launch C (5-6).
  // compute: A 1-11; comm: G 2-32; B waits for G: 32-37; C after B: 37-41. Makespan 41 us.
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const StreamId comm = b.add_stream("comm");
  const OpId a = b.launch(spec("A", compute, 10, 1));
  LaunchSpec gather = spec("G", comm, 30, 1);
  gather.kind = OpKind::kCommunication;
  const OpId g = b.launch(gather);
  b.wait_event(compute, b.record_event(comm));
  const OpId op_b = b.launch(spec("B", compute, 5, 1));
  b.cpu_work("hook", us(2));
  const OpId c = b.launch(spec("C", compute, 4, 1));
  ASSERT_EQ(a, 0U);
  ASSERT_EQ(g, 1U);
  const Timeline t = execute(b.program());
  ASSERT_EQ(t.makespan, us(41));
  const CriticalPath path = critical_path(b.program(), t);
  EXPECT_EQ(path.length, us(41));
  // launch A, launch G, G, B, C: 1 + 1 + 30 + 5 + 4 = 41.
  expect_path(
      path,
      {{kCpu, 0, 0, 1}, {kCpu, 1, 1, 2}, {kOp, g, 2, 32}, {kOp, op_b, 32, 37}, {kOp, c, 37, 41}});
}

TEST(CriticalPath, RunsThroughTheCpuWhenLaunchesAreSlowerThanKernels) {
  // Launches of 4 us, kernels of 1 us: a 4-5, b 8-9; the GPU waits for the CPU.
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  b.launch(spec("a", s, 1, 4));
  const OpId second = b.launch(spec("b", s, 1, 4));
  const Timeline t = execute(b.program());
  const CriticalPath path = critical_path(b.program(), t);
  EXPECT_EQ(path.length, us(9));
  expect_path(path, {{kCpu, 0, 0, 4}, {kCpu, 1, 4, 8}, {kOp, second, 8, 9}});
}

TEST(CriticalPath, ACpuWaitCarriesThePathFromTheGpuBackToTheCpu) {
  // launch X (0-1), X on comm 1-21, the CPU waits for X (until 21), launch Y (21-22), Y 22-25.
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const StreamId comm = b.add_stream("comm");
  const OpId x = b.launch(spec("X", comm, 20, 1));
  b.cpu_synchronize(EventRef{x}, "sync");
  const OpId y = b.launch(spec("Y", compute, 3, 1));
  const Timeline t = execute(b.program());
  const CriticalPath path = critical_path(b.program(), t);
  EXPECT_EQ(path.length, us(25));
  expect_path(
      path,
      {{kCpu, 0, 0, 1}, {kOp, x, 1, 21}, {kCpu, 1, 21, 21}, {kCpu, 2, 21, 22}, {kOp, y, 22, 25}});
}

TEST(CriticalPath, AFullLaunchQueueCarriesThePathFromTheGpuBackToTheCpu) {
  // One entry per stream, launches of 5 us, kernels of 10 us: launch a 0-5, a 5-15; b's launch
  // waits for a, 15-20; b 20-30.
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  const OpId first = b.launch(spec("a", s, 10, 5));
  const OpId second = b.launch(spec("b", s, 10, 5));
  Program program = b.take();
  program.launch_queue_depth = 1;
  const Timeline t = execute(program);
  const CriticalPath path = critical_path(program, t);
  EXPECT_EQ(path.length, us(30));
  expect_path(path,
              {{kCpu, 0, 0, 5}, {kOp, first, 5, 15}, {kCpu, 1, 15, 20}, {kOp, second, 20, 30}});
}

TEST(CriticalPath, ChannelOrderSerializesCollectivesOnDifferentStreams) {
  // Two collectives of one communicator on two streams: the second waits for the first.
  // launch AG (0-1) AG 1-11; launch RS (1-2) RS 11-16 (channel order), makespan 16.
  ProgramBuilder b;
  const StreamId ag_stream = b.add_stream("unshard");
  const StreamId rs_stream = b.add_stream("post_backward");
  const ChannelId nccl = b.add_channel("nccl");
  LaunchSpec ag = spec("AG", ag_stream, 10, 1);
  ag.channel = nccl;
  ag.kind = OpKind::kCommunication;
  LaunchSpec rs = spec("RS", rs_stream, 5, 1);
  rs.channel = nccl;
  rs.kind = OpKind::kCommunication;
  const OpId first = b.launch(ag);
  const OpId second = b.launch(rs);
  const Timeline t = execute(b.program());
  const CriticalPath path = critical_path(b.program(), t);
  EXPECT_EQ(path.length, us(16));
  expect_path(path, {{kCpu, 0, 0, 1}, {kOp, first, 1, 11}, {kOp, second, 11, 16}});
}

}  // namespace
}  // namespace fsdpsim::engine
