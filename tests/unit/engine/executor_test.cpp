#include "sim/engine/executor.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "sim/engine/op_graph.hpp"
#include "sim/engine/program_builder.hpp"
#include "sim/engine/rank_waits.hpp"

namespace fsdpsim::engine {
namespace {

SimTime us(double v) { return to_sim_time(microseconds(v)); }

LaunchSpec spec(std::string_view name, StreamId stream, double duration_us,
                double launch_us = 0.0) {
  LaunchSpec s;
  s.name = name;
  s.stream = stream;
  s.duration = us(duration_us);
  s.launch_cost = us(launch_us);
  return s;
}

// An op off the SMs (a collective's transfer): it runs beside kernels without sharing their SMs.
LaunchSpec collective(std::string_view name, StreamId stream, double duration_us) {
  LaunchSpec s = spec(name, stream, duration_us);
  s.kind = OpKind::kCommunication;
  return s;
}

class RecordingMemory final : public MemoryObserver {
 public:
  AllocationOutcome on_allocate(SimTime t, TensorId, const TensorInfo& info) override {
    log.push_back({t, +info.size.value()});
    return {};
  }
  void on_free(SimTime t, TensorId, const TensorInfo& info, bool) override {
    freed.push_back({t, info.size.value()});
  }
  void on_release(SimTime t, TensorId, const TensorInfo& info) override {
    log.push_back({t, -info.size.value()});
  }
  std::vector<std::pair<SimTime, std::int64_t>> log;
  std::vector<std::pair<SimTime, std::int64_t>> freed;
};

// A tensor freed twice is a schedule bug: the builder refuses it, naming the tensor, rather than
// letting the memory drift down by its size every step.
TEST(ProgramBuilder, FreeingATensorTwiceIsABug) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  const TensorId t = b.allocate("embedding.saved", Bytes(64), s, 0);
  b.free(t);
  try {
    b.free(t);
    ADD_FAILURE() << "a second free was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "engine: embedding.saved is freed twice");
  }
}

TEST(Executor, OpsOnOneStreamRunBackToBack) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  const OpId a = b.launch(spec("a", s, 10));
  const OpId c = b.launch(spec("b", s, 5));
  const Timeline t = execute(b.program());
  EXPECT_EQ(t.ops[a].start, us(0));
  EXPECT_EQ(t.ops[c].start, us(10));
  EXPECT_EQ(t.makespan, us(15));
}

TEST(Executor, OpCannotStartBeforeTheCpuIssuedIt) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  const OpId a = b.launch(spec("a", s, 1, 4));  // 4 us of launch, then 1 us of work
  const OpId c = b.launch(spec("b", s, 1, 4));
  const Timeline t = execute(b.program());
  EXPECT_EQ(t.ops[a].issue, us(4));
  EXPECT_EQ(t.ops[a].start, us(4));
  EXPECT_EQ(t.ops[c].start, us(8));  // CPU-bound: the GPU idles between kernels
  EXPECT_EQ(t.makespan, us(9));
}

TEST(Executor, StreamsRunConcurrentlyAndCrossStreamWaitsAreEvents) {
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const StreamId comm = b.add_stream("comm");
  const OpId gather = b.launch(collective("all_gather", comm, 30));
  const OpId other = b.launch(spec("independent", compute, 20));
  b.wait_stream(compute, comm);
  const OpId use = b.launch(spec("uses_gathered", compute, 10));
  const Timeline t = execute(b.program());
  EXPECT_EQ(t.ops[gather].start, us(0));
  EXPECT_EQ(t.ops[other].start, us(0));
  EXPECT_EQ(t.ops[use].start, us(30));
  EXPECT_EQ(t.makespan, us(40));
}

TEST(Executor, OpsOfOneChannelSerializeInIssueOrderAcrossStreams) {
  ProgramBuilder b;
  const StreamId s1 = b.add_stream("unshard");
  const StreamId s2 = b.add_stream("post_backward");
  const ChannelId pg = b.add_channel("pg");
  LaunchSpec rs = spec("reduce_scatter", s2, 50);
  rs.channel = pg;
  LaunchSpec ag = spec("all_gather", s1, 20);
  ag.channel = pg;
  const OpId first = b.launch(rs);
  const OpId second = b.launch(ag);
  const Timeline t = execute(b.program());
  EXPECT_EQ(t.ops[first].start, us(0));
  EXPECT_EQ(t.ops[second].start, us(50));
}

TEST(Executor, CpuBlocksOnAnEventUntilTheOpFinishes) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  b.launch(spec("long", s, 100));
  const EventRef done = b.record_event(s);
  b.cpu_synchronize(done, "sync");
  const OpId after = b.launch(spec("after", s, 1, 2));
  const Timeline t = execute(b.program());
  EXPECT_EQ(t.ops[after].issue, us(102));
  EXPECT_EQ(t.makespan, us(103));
}

TEST(Executor, CpuWorkDelaysLaterLaunches) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  b.cpu_work("hook", us(7));
  const OpId op = b.launch(spec("k", s, 1));
  EXPECT_EQ(execute(b.program()).ops[op].start, us(7));
}

// A block used on another stream (record_stream) is reusable once that stream passes the free;
// a use recorded on its own stream is ignored, as recordStream ignores it.
TEST(Executor, RecordStreamDelaysReleaseUntilTheStreamPassesTheFree) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  const StreamId comm = b.add_stream("comm");
  const TensorId x = b.allocate("x", Bytes(100), s, 0);
  b.launch(collective("uses_x", comm, 50));
  b.launch(spec("own_stream", s, 20));
  const TensorId own = b.allocate("own", Bytes(10), s, 0);
  b.free(own, b.record_event(s));
  b.free(x, b.record_event(comm));
  RecordingMemory memory;
  execute(b.program(), &memory);
  ASSERT_EQ(memory.freed.size(), 2u);
  EXPECT_EQ(memory.freed[1].first, us(0));  // the CPU dropped it right away
  ASSERT_EQ(memory.log.size(), 4u);
  EXPECT_EQ(memory.log[2], std::make_pair(us(0), std::int64_t{-10}));  // own stream: at once
  EXPECT_EQ(memory.log[3].first, us(50));  // reusable only once the kernel is done
  EXPECT_EQ(memory.log[3].second, -100);
}

TEST(Executor, ComputeSlowsWhileCommunicationRuns) {
  // A kernel of 100 us alone, 150 us if it shared the GPU with NCCL for its whole life. A
  // collective runs for its first 40 us: by then 40/150 of it is done, the remaining 11/15 run
  // at full speed: 40 + 73.333 us.
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const StreamId comm = b.add_stream("comm");
  LaunchSpec gather = spec("all_gather", comm, 40);
  gather.kind = OpKind::kCommunication;
  b.launch(gather);
  LaunchSpec gemm = spec("gemm", compute, 100);
  gemm.contended_duration = us(150);
  const OpId k = b.launch(gemm);
  const OpId after = b.launch(spec("after", compute, 10));
  const Timeline t = execute(b.program());
  EXPECT_EQ(t.ops[k].start, us(0));
  EXPECT_EQ(t.ops[k].end.picoseconds(), 113'333'333);
  EXPECT_EQ(t.ops[after].start, t.ops[k].end);
}

// Kernels and device copies on two streams time-share the SMs, each at half its rate: a 20 us
// GEMM and a 10 us cast on another stream, both from 0, have done 10 and 5 us of their work at
// 20 us, where the cast ends; the GEMM's last 10 us run alone, to 30. A cudaMemcpyAsync (a copy
// engine) beside the GEMM takes no SM time: the GEMM ends at 20 beside it.
TEST(Executor, KernelsOnTwoStreamsShareTheSms) {
  // The side op (10 us) and the GEMM (20 us alone, 40 beside a collective), both from 0, a
  // collective of `collective_us` beside them if > 0: the GEMM's and the side op's ends.
  const auto run = [](OpKind side_kind, double collective_us) {
    ProgramBuilder b;
    const StreamId compute = b.add_stream("compute");
    const StreamId side = b.add_stream("side");
    const StreamId comm = b.add_stream("comm");
    if (collective_us > 0) b.launch(collective("all_gather", comm, collective_us));
    LaunchSpec side_op = spec("side", side, 10);
    side_op.kind = side_kind;
    const OpId cast = b.launch(side_op);
    LaunchSpec gemm_op = spec("gemm", compute, 20);
    gemm_op.contended_duration = us(40);
    const OpId gemm = b.launch(gemm_op);
    const Timeline t = execute(b.program());
    return std::make_pair(t.ops[gemm].end, t.ops[cast].end);
  };
  EXPECT_EQ(run(OpKind::kCopy, 0), std::make_pair(us(30), us(20)));
  EXPECT_EQ(run(OpKind::kCompute, 0), std::make_pair(us(30), us(20)));
  EXPECT_EQ(run(OpKind::kCopyEngine, 0), std::make_pair(us(20), us(10)));
  // Beside a collective's SM use as well, the GEMM at its contended rate, halved: 0-20 the cast
  // ends at half rate and the GEMM does 20/80 of its work; 20-50 the other 60/80 at 40.
  EXPECT_EQ(run(OpKind::kCopy, 100).first, us(50));
}

TEST(Executor, ComputeStartedDuringCommunicationSpeedsUpWhenItEnds) {
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const StreamId comm = b.add_stream("comm");
  LaunchSpec reduce = spec("reduce_scatter", comm, 30);
  reduce.kind = OpKind::kCommunication;
  b.launch(reduce);
  LaunchSpec gemm = spec("gemm", compute, 60);
  gemm.contended_duration = us(90);
  const OpId k = b.launch(gemm);
  // 30 us at the contended rate do 1/3; the remaining 2/3 of 60 us take 40: ends at 70.
  EXPECT_EQ(execute(b.program()).ops[k].end, us(70));
}

// Two collectives of different communicators on the nodes' NICs at once share them: each is
// 10 us alone, 6 us of it on the NICs, so with two on the NICs each takes 16 us. A starts at 0,
// B at 5 (after a 5 us kernel): A does 5/10 alone, the other half at 16 us the whole -> 8 us,
// ending at 13; B has done 8/16 by then and finishes its half alone in 5 us, at 18. A
// collective inside a node (no NIC time) beside them keeps its 10 us.
struct SharedNicProgram {
  ProgramBuilder b;
  OpId a = 0;
  OpId c = 0;
  OpId inside = 0;
  explicit SharedNicProgram(double network_us) {
    const StreamId first = b.add_stream("nccl_a");
    const StreamId second = b.add_stream("nccl_b");
    const StreamId third = b.add_stream("nccl_node");
    const ChannelId world = b.add_channel("world");
    const ChannelId other = b.add_channel("other");
    const ChannelId node = b.add_channel("node");
    LaunchSpec collective = spec("A", first, 10);
    collective.kind = OpKind::kCommunication;
    collective.channel = world;
    collective.network_time = us(network_us);
    a = b.launch(collective);
    b.launch(spec("kernel", second, 5));
    collective.name = "B";
    collective.stream = second;
    collective.channel = other;
    c = b.launch(collective);
    collective.name = "inside";
    collective.stream = third;
    collective.channel = node;
    collective.network_time = SimTime{};
    inside = b.launch(collective);
  }
};

TEST(Executor, CollectivesOnTheNicsAtOnceShareThem) {
  SharedNicProgram p(6);
  const Timeline t = execute(p.b.program());
  EXPECT_EQ(t.ops[p.a].end, us(13));
  EXPECT_EQ(t.ops[p.c].start, us(5));
  EXPECT_EQ(t.ops[p.c].end, us(18));
  EXPECT_EQ(t.ops[p.inside].end, us(10));
  // Without NIC time they overlap freely.
  SharedNicProgram free(0);
  const Timeline alone = execute(free.b.program());
  EXPECT_EQ(alone.ops[free.a].end, us(10));
  EXPECT_EQ(alone.ops[free.c].end, us(15));
  // Every rank of a multi-rank execution sees the same sharing.
  const RankClasses classes = rank_classes(std::vector<RankSpeed>(4), p.b.program().channel_groups);
  const std::vector<Timeline> ranks = execute_ranks(p.b.program(), classes, {nullptr});
  ASSERT_EQ(ranks.size(), 1U);
  EXPECT_EQ(ranks[0].ops[p.a].end, us(13));
  EXPECT_EQ(ranks[0].ops[p.c].end, us(18));
  // The network time is a collective's, and part of its duration.
  ProgramBuilder bad;
  const StreamId s = bad.add_stream("compute");
  LaunchSpec kernel = spec("gemm", s, 10);
  kernel.network_time = us(1);
  EXPECT_THROW(bad.launch(kernel), std::logic_error);
  LaunchSpec longer = spec("all_gather", s, 10);
  longer.kind = OpKind::kCommunication;
  longer.network_time = us(11);
  EXPECT_THROW(bad.launch(longer), std::logic_error);
}

// An allocator that must free its cache first (cudaMalloc retry): the second request asks for
// the pending stream uses to complete, its retry succeeds after 5 us of cudaFree/cudaMalloc.
class RetryingMemory final : public MemoryObserver {
 public:
  AllocationOutcome on_allocate(SimTime t, TensorId, const TensorInfo&) override {
    calls.push_back(t);
    if (calls.size() == 2) return {AllocationStatus::kSynchronize, SimTime{}};
    return {AllocationStatus::kAllocated, calls.size() == 1 ? SimTime{} : us(5)};
  }
  void on_free(SimTime, TensorId, const TensorInfo&, bool) override {}
  void on_release(SimTime, TensorId, const TensorInfo&) override {}
  std::vector<SimTime> calls;
};

// "x" is used on the compute stream and freed after "short" (0-30 us); allocating "y" needs that
// use to pass (RetryingMemory), then "after" is launched. `other` runs on a second stream,
// launched before "x" is allocated (`first`) or right after "short".
struct RetryRun {
  Program program;
  Timeline t;
  OpId short_op = 0;
  OpId after = 0;
  std::vector<SimTime> calls;
};
RetryRun run_retry(const char* other, int other_us, bool first) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  const StreamId second = b.add_stream("other");
  if (first) b.launch(collective(other, second, other_us));
  const TensorId x = b.allocate("x", Bytes(1), second, 0);  // used, and recorded, on s
  RetryRun r;
  r.short_op = b.launch(spec("short", s, 30));
  if (!first) b.launch(collective(other, second, other_us));
  b.free(x, b.record_event(s));
  b.allocate("y", Bytes(1), s, 0);
  r.after = b.launch(spec("after", s, 1));
  RetryingMemory memory;
  r.program = b.program();
  r.t = execute(r.program, &memory);
  r.calls = memory.calls;
  return r;
}

// synchronize_and_free_events waits for the events of the blocks freed with pending stream uses,
// not for all work: "x" was freed after "short" (ends at 30 us); "long" on another stream runs on.
TEST(Executor, AllocatorRetryWaitsForThePendingStreamUsesOnly) {
  const RetryRun r = run_retry("long", 100, /*first=*/true);
  ASSERT_EQ(r.calls.size(), 3u);  // x, y (needs the sync), y again
  EXPECT_EQ(r.calls[2], r.t.ops[r.short_op].end);
  EXPECT_EQ(r.t.ops[r.short_op].end, us(30));
  EXPECT_EQ(r.t.ops[r.after].issue, us(35));
  // The critical path explains the wait by "short" alone; an edge from "long" (still running
  // at the retry) would make it longer than the step.
  EXPECT_EQ(critical_path(r.program, r.t).length, r.t.makespan);
}

// The last pending use ends at 30 us together with an op that releases nothing ("beside", after
// "short" in the event order): the CPU is woken once, and the retry's device calls still take
// their 5 us (a second wake at 30 us used to end them at once, issuing "after" at 30).
TEST(Executor, OpsEndingTogetherWakeARetryingAllocationOnce) {
  const RetryRun r = run_retry("beside", 30, /*first=*/false);
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(r.calls[2], r.t.ops[r.short_op].end);
  EXPECT_EQ(r.t.ops[r.after].issue, us(35));
  EXPECT_EQ(critical_path(r.program, r.t).length, r.t.makespan);
}

// An allocator whose device calls (5 us) synchronize the device (a cudaFree) or the streams of
// `streams` (an expandable segment's unmaps, cudaStreamSynchronize); the allocation is decided
// at once, then the CPU waits for what they synchronize.
class SynchronizingMemory final : public MemoryObserver {
 public:
  SynchronizingMemory(bool device, std::uint64_t streams) : device_(device), streams_(streams) {}
  AllocationOutcome on_allocate(SimTime t, TensorId, const TensorInfo&) override {
    calls.push_back(t);
    AllocationOutcome outcome{AllocationStatus::kAllocated, us(5)};
    outcome.synchronizes_device = device_;
    outcome.synchronized_streams = streams_;
    return outcome;
  }
  void on_free(SimTime, TensorId, const TensorInfo&, bool) override {}
  void on_release(SimTime, TensorId, const TensorInfo&) override {}
  std::vector<SimTime> calls;

 private:
  bool device_;
  std::uint64_t streams_;
};

// "long" runs 0-100 on the compute stream (0) and "short" 0-30 on "other" (1), then the CPU
// allocates on the compute stream and launches "after": when "after" issues.
SimTime after_issue(SynchronizingMemory& memory) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("compute");
  const StreamId other = b.add_stream("other");
  b.launch(spec("long", s, 100));
  b.launch(collective("short", other, 30));
  b.allocate("x", Bytes(1), s, 0);
  const OpId after = b.launch(spec("after", s, 1));
  return execute(b.program(), &memory).ops[after].issue;
}

TEST(Executor, ACudaFreeInAnAllocationWaitsForTheDeviceThenCostsItsTime) {
  SynchronizingMemory memory(/*device=*/true, 0);
  EXPECT_EQ(after_issue(memory), us(105));
  ASSERT_EQ(memory.calls.size(), 1u);
  EXPECT_EQ(memory.calls[0], us(0));
}

// Unmapping the other stream's segment waits for "short" (30), the device calls take 5 us,
// "after" issues at 35; unmapping the compute stream's, or both streams', waits for "long" (105).
TEST(Executor, AnUnmapWaitsForItsSegmentsStreamOnly) {
  SynchronizingMemory other(/*device=*/false, std::uint64_t{1} << 1);
  EXPECT_EQ(after_issue(other), us(35));
  SynchronizingMemory compute(/*device=*/false, std::uint64_t{1} << 0);
  EXPECT_EQ(after_issue(compute), us(105));
  SynchronizingMemory both(/*device=*/false, 0b11);
  EXPECT_EQ(after_issue(both), us(105));
}

TEST(Executor, WaitingOnAnOpIssuedLaterIsADeadlock) {
  Program p;
  p.names = {"a"};
  p.stream_names = {"s"};
  p.ops.push_back(Op{});
  p.cpu.push_back(CpuStep{CpuStepKind::kWait, 0, kNoOp, 0, SimTime{}});
  p.cpu.push_back(CpuStep{CpuStepKind::kLaunch, 0, kNoOp, 0, SimTime{}});
  EXPECT_THROW(execute(p), DeadlockError);
}

TEST(Executor, ALaunchIntoAFullStreamWaitsForItsOldestOp) {
  // Queues of 2 ops; launches of 1 us. a0 issued at 1 (runs 1-11), a1 at 2 (11-21); o goes to
  // another stream's queue at 3; a2 finds s holding 2 ops and waits for a0 (11), issues at 12
  // (runs 21-31); x is allocated then, not before; a3 waits for a1 (21), issues at 22 (31-41).
  ProgramBuilder b;
  const StreamId s = b.add_stream("s");
  const StreamId other = b.add_stream("t");
  const OpId a0 = b.launch(spec("a0", s, 10, 1));
  const OpId a1 = b.launch(spec("a1", s, 10, 1));
  LaunchSpec off_sms = collective("o", other, 5);
  off_sms.launch_cost = us(1);
  const OpId o = b.launch(off_sms);
  const OpId a2 = b.launch(spec("a2", s, 10, 1));
  b.allocate("x", Bytes(100), s, 0);
  const OpId a3 = b.launch(spec("a3", s, 10, 1));
  Program program = b.take();
  program.launch_queue_depth = 2;
  RecordingMemory memory;
  const Timeline t = execute(program, &memory);
  EXPECT_EQ(t.ops[a0].issue, us(1));
  EXPECT_EQ(t.ops[a1].issue, us(2));
  EXPECT_EQ(t.ops[o].issue, us(3));
  EXPECT_EQ(t.ops[a2].issue, us(12));
  EXPECT_EQ(t.ops[a2].start, us(21));
  ASSERT_EQ(memory.log.size(), 1u);
  EXPECT_EQ(memory.log[0].first, us(12));
  EXPECT_EQ(t.ops[a3].issue, us(22));
  EXPECT_EQ(t.ops[a3].end, us(41));
  EXPECT_EQ(t.makespan, us(41));
}

TEST(Executor, AFullQueueBehindAnOpWaitingForALaterLaunchIsADeadlock) {
  // a waits for b, which the CPU launches after a2; with one entry per stream, a2's launch waits
  // for a to finish: a cycle. With the default depth the same program runs.
  Program p;
  p.names = {"a", "a2", "b"};
  p.stream_names = {"s", "t"};
  Op a;
  a.name = 0;
  a.deps_begin = 0;
  a.deps_end = 1;
  Op a2;
  a2.name = 1;
  Op op_b;
  op_b.name = 2;
  op_b.stream = 1;
  p.ops = {a, a2, op_b};
  p.deps = {2};
  for (OpId op = 0; op < 3; ++op) {
    p.cpu.push_back(CpuStep{CpuStepKind::kLaunch, op, kNoOp, 0, SimTime{}});
  }
  EXPECT_NO_THROW(execute(p));
  p.launch_queue_depth = 1;
  try {
    execute(p);
    FAIL() << "expected a deadlock";
  } catch (const DeadlockError& e) {
    EXPECT_NE(std::string(e.what()).find("cycle: 'a', 'a2', 'b'"), std::string::npos) << e.what();
  }
}

// An allocation whose cudaFree must wait for the device to be idle, while the device waits for
// an op the CPU launches only after it (a hand-built program: FSDP's never do this): the stall
// names the allocation and what it waits for, not "the CPU finished its program".
TEST(Executor, AStallInAnAllocationNamesIt) {
  Program p;
  p.names = {"a", "b", "x"};
  p.stream_names = {"s", "t"};
  Op a;
  a.name = 0;
  a.stream = 0;
  a.duration = us(1);
  a.deps_begin = 0;
  a.deps_end = 1;
  Op b;
  b.name = 1;
  b.stream = 1;
  b.duration = us(1);
  p.ops = {a, b};
  p.deps = {1};  // a waits for b
  p.tensors = {TensorInfo{2, Bytes(1), 0, 0}};
  p.cpu = {CpuStep{CpuStepKind::kLaunch, 0, kNoOp, 0, SimTime{}},
           CpuStep{CpuStepKind::kAlloc, 0, kNoOp, 0, SimTime{}},
           CpuStep{CpuStepKind::kLaunch, 1, kNoOp, 0, SimTime{}}};
  SynchronizingMemory memory(/*device=*/true, 0);
  try {
    execute(p, &memory);
    FAIL() << "expected a deadlock";
  } catch (const DeadlockError& e) {
    EXPECT_NE(std::string(e.what()).find("the CPU's allocation of 'x' waits for the device (or "
                                         "the streams) it synchronizes before its cudaFree to be "
                                         "idle"),
              std::string::npos)
        << e.what();
  }
}

// Without a memory observer an allocation takes no CPU time but ends where it starts, as every
// CPU step does (its end was left at 0, and the critical path refused the timeline).
TEST(Executor, AnAllocationWithoutAnObserverEndsWhereItStarts) {
  ProgramBuilder b;
  const StreamId s = b.add_stream("s");
  b.cpu_work("w", us(10));
  b.allocate("x", Bytes(1), s, 0);
  b.launch(spec("a", s, 5, 1));
  const Timeline t = execute(b.program());
  EXPECT_EQ(t.cpu[1].start, us(10));
  EXPECT_EQ(t.cpu[1].end, us(10));
  EXPECT_EQ(critical_path(b.program(), t).length, t.makespan);
}

TEST(OpGraph, ReportsTheOpsOfACycleAsADeadlock) {
  // Two ops that depend on each other (impossible through the builder, possible by hand).
  Program p;
  p.names = {"first", "second"};
  p.stream_names = {"a", "b"};
  Op first;
  first.name = 0;
  first.stream = 0;
  first.deps_begin = 0;
  first.deps_end = 1;
  Op second;
  second.name = 1;
  second.stream = 1;
  second.deps_begin = 1;
  second.deps_end = 2;
  p.ops = {first, second};
  p.deps = {1, 0};
  p.cpu = {CpuStep{CpuStepKind::kLaunch, 0, kNoOp, 0, SimTime{}},
           CpuStep{CpuStepKind::kLaunch, 1, kNoOp, 0, SimTime{}}};
  try {
    check_for_deadlock(p);
    FAIL() << "expected a deadlock";
  } catch (const DeadlockError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'first'"), std::string::npos) << what;
    EXPECT_NE(what.find("'second'"), std::string::npos) << what;
  }
  // Both executors stall on it and name the same cycle (they check only once stalled).
  const auto expect_cycle_named = [](const auto& run) {
    try {
      run();
      FAIL() << "expected a deadlock";
    } catch (const DeadlockError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("wait on each other in a cycle: 'first', 'second'"), std::string::npos)
          << what;
    }
  };
  expect_cycle_named([&] { execute(p); });
  const RankClasses classes = rank_classes(std::vector<RankSpeed>(2), {});
  expect_cycle_named([&] { execute_ranks(p, classes, {nullptr}); });
}

TEST(OpGraph, AcyclicProgramPassesAndHasATopologicalOrder) {
  OpGraph g(3);
  g.add_edge(0, 1);
  g.add_edge(1, 2);
  EXPECT_TRUE(g.find_cycle().empty());
  EXPECT_EQ(g.topological_order(), (std::vector<std::uint32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace fsdpsim::engine

namespace fsdpsim::engine {
namespace {

// compute: A (100 us); the world's communicator: C (10 us) after A; compute: B (50 us) after C.
struct CollectiveProgram {
  ProgramBuilder b;
  OpId a = 0;
  OpId c = 0;
  OpId d = 0;
  CollectiveProgram() {
    const StreamId compute = b.add_stream("compute");
    const StreamId nccl = b.add_stream("nccl");
    const ChannelId world = b.add_channel("world");
    a = b.launch(spec("A", compute, 100));
    b.wait_stream(nccl, compute);
    LaunchSpec collective = spec("C", nccl, 10);
    collective.kind = OpKind::kCommunication;
    collective.channel = world;
    c = b.launch(collective);
    b.wait_stream(compute, nccl);
    d = b.launch(spec("B", compute, 50));
  }
};

TEST(ExecuteRanks, ACollectiveWaitsForTheSlowestRankOfItsGroup) {
  CollectiveProgram p;
  std::vector<RankSpeed> speed(4);
  speed[2].compute = 0.5;  // rank 2's kernels take twice as long
  const RankClasses classes = rank_classes(speed, p.b.program().channel_groups);
  ASSERT_EQ(classes.count(), 2U);
  const std::vector<Timeline> t = execute_ranks(p.b.program(), classes, {nullptr, nullptr});
  // The fast ranks reach C at 100 us and wait; the slow one at 200 us; the transfer runs
  // 200-210 us on both; B then takes 50 us, or 100 us on the slow rank.
  EXPECT_EQ(t[0].ops[p.c].start, us(100));
  EXPECT_EQ(t[1].ops[p.c].start, us(200));
  EXPECT_EQ(t[0].ops[p.c].end, us(210));
  EXPECT_EQ(t[1].ops[p.c].end, us(210));
  EXPECT_EQ(t[0].makespan, us(260));
  EXPECT_EQ(t[1].makespan, us(310));
}

// A collective ends on all ranks of its group together, at the pace of the most loaded NIC.
// Rank 1 computes at half speed. "K" (10 us, 20 us on rank 1) leads both to "X", a collective of
// both ranks (10 us alone on the NICs, 20 us sharing them), and to "Y", one of each rank alone
// (15 us, 30 us sharing). X's transfer starts at 20 us, when rank 1 reaches it.
// Rank 0: Y runs alone from 10 us, 2/3 done at 20, then shares: it ends at 20 + 10 = 30 us; X
// is half done then and moves the rest alone by 35 us. Rank 1: Y and X share from 20 us; X
// ends at 40 us, Y then has 1/3 left alone: 45 us. X ends at 40 us on both ranks.
TEST(ExecuteRanks, ACollectiveEndsWhenItsSlowestRankHasMovedItsBytes) {
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const StreamId nccl_x = b.add_stream("nccl_x");
  const StreamId nccl_y = b.add_stream("nccl_y");
  const ChannelId both = b.add_channel("both");
  const ChannelId alone = b.add_channel("alone", RankGroups{1, 1});
  b.launch(spec("K", compute, 10));
  b.wait_stream(nccl_x, compute);
  b.wait_stream(nccl_y, compute);
  LaunchSpec collective = spec("X", nccl_x, 10);
  collective.kind = OpKind::kCommunication;
  collective.channel = both;
  collective.network_time = us(10);
  const OpId x = b.launch(collective);
  collective.name = "Y";
  collective.stream = nccl_y;
  collective.channel = alone;
  collective.duration = us(15);
  collective.network_time = us(15);
  const OpId y = b.launch(collective);
  std::vector<RankSpeed> speed(2);
  speed[1].compute = 0.5;
  const RankClasses classes = rank_classes(speed, b.program().channel_groups);
  ASSERT_EQ(classes.count(), 2U);
  const std::vector<Timeline> t = execute_ranks(b.program(), classes, {nullptr, nullptr});
  EXPECT_EQ(t[0].ops[y].end, us(30));
  EXPECT_EQ(t[1].ops[y].end, us(45));
  EXPECT_EQ(t[0].ops[x].start, us(10));
  EXPECT_EQ(t[1].ops[x].start, us(20));
  EXPECT_EQ(t[0].ops[x].end, us(40));
  EXPECT_EQ(t[1].ops[x].end, us(40));
  // Each rank's own bytes moved: rank 0 waits 5 us for rank 1's.
  EXPECT_EQ(t[0].transferred[x], us(35));
  EXPECT_EQ(t[1].transferred[x], us(40));
  // Rank 0 waited for rank 1 to start X (10-20 us), to finish moving its bytes (35-40 us) and
  // to end the step (rank 0's last work ends at 40 us, rank 1's at 45 us); rank 1 waited for
  // nobody. From 15 us on, rank 0's first wait counts from 15.
  EXPECT_EQ(rank_waits(b.program(), classes, t, 0, SimTime{}, us(45)),
            (std::vector<SimTime>{us(20), SimTime{}}));
  EXPECT_EQ(rank_waits(b.program(), classes, t, 0, us(15), us(45)),
            (std::vector<SimTime>{us(15), SimTime{}}));
}

TEST(ExecuteRanks, EqualRanksGiveTheSingleRankTimeline) {
  CollectiveProgram p;
  const RankClasses classes = rank_classes(std::vector<RankSpeed>(8), {RankGroups{}});
  const std::vector<Timeline> t = execute_ranks(p.b.program(), classes, {nullptr});
  const Timeline one = execute(p.b.program());
  ASSERT_EQ(t.size(), 1U);
  for (OpId op : {p.a, p.c, p.d}) {
    EXPECT_EQ(t[0].ops[op].start, one.ops[op].start);
    EXPECT_EQ(t[0].ops[op].end, one.ops[op].end);
  }
  EXPECT_EQ(t[0].makespan, one.makespan);
}

TEST(ExecuteRanks, GroupsOnlyWaitForTheirOwnMembers) {
  // Two groups of two (ranks 0-1, 2-3): rank 3 is slow, so only rank 2 waits for it.
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const ChannelId pairs = b.add_channel("pairs", RankGroups{2, 1});
  b.launch(spec("A", compute, 100));
  LaunchSpec collective = spec("C", compute, 10);
  collective.kind = OpKind::kCommunication;
  collective.channel = pairs;
  const OpId c = b.launch(collective);
  std::vector<RankSpeed> speed(4);
  speed[3].compute = 0.25;
  const RankClasses classes = rank_classes(speed, b.program().channel_groups);
  ASSERT_EQ(classes.count(), 3U);  // ranks 0-1, rank 2, rank 3
  const std::vector<Timeline> t = execute_ranks(b.program(), classes, {nullptr, nullptr, nullptr});
  EXPECT_EQ(t[0].ops[c].end, us(110));
  EXPECT_EQ(t[1].ops[c].end, us(410));
  EXPECT_EQ(t[2].ops[c].end, us(410));
}

TEST(ExecuteRanks, HostSpeedSlowsLaunchesAndHostWork) {
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const OpId a = b.launch(spec("a", compute, 1, 4));
  b.cpu_work("python", us(6));
  const OpId c = b.launch(spec("b", compute, 1, 4));
  std::vector<RankSpeed> speed(2);
  speed[1].host = 0.5;
  const RankClasses classes = rank_classes(speed, b.program().channel_groups);
  const std::vector<Timeline> t = execute_ranks(b.program(), classes, {nullptr, nullptr});
  EXPECT_EQ(t[0].ops[a].start, us(4));
  EXPECT_EQ(t[0].ops[c].start, us(14));  // 4 + 6 + 4
  EXPECT_EQ(t[1].ops[a].start, us(8));
  EXPECT_EQ(t[1].ops[c].start, us(28));  // 8 + 12 + 8
}

TEST(ExecuteRanks, EachRankHasItsOwnMemoryObserver) {
  ProgramBuilder b;
  const StreamId compute = b.add_stream("compute");
  const TensorId x = b.allocate("x", Bytes(64), compute, 0);
  b.launch(spec("a", compute, 10));
  b.free(x);
  std::vector<RankSpeed> speed(2);
  speed[1].compute = 0.5;
  const RankClasses classes = rank_classes(speed, b.program().channel_groups);
  RecordingMemory fast;
  RecordingMemory slow;
  execute_ranks(b.program(), classes, {&fast, &slow});
  EXPECT_EQ(fast.log.size(), 2U);
  EXPECT_EQ(slow.log.size(), 2U);
  EXPECT_THROW(execute_ranks(b.program(), classes, {&fast}), std::logic_error);
}

}  // namespace
}  // namespace fsdpsim::engine
