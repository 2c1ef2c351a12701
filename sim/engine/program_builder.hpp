// Builds a Program with CUDA-like calls: launch an op on a stream, record an event on a
// stream, make a stream wait for an event, synchronize the CPU on an event, allocate and free
// tensors. By construction every dependency points at an op issued earlier.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/engine/program.hpp"

namespace fsdpsim::engine {

// A CUDA event: "all work issued on a stream so far" is the last op issued there.
struct EventRef {
  OpId op = kNoOp;  // kNoOp: nothing was pending, the event is already complete
};

struct LaunchSpec {
  std::string_view name;
  StreamId stream = 0;
  ChannelId channel = kNoChannel;
  OpKind kind = OpKind::kCompute;
  std::uint8_t phase = 0;
  std::int32_t group = -1;
  SimTime duration;
  SimTime contended_duration;  // zero: not slowed by concurrent communication
  SimTime network_time;        // a collective's time on the nodes' NICs (Op::network_time)
  SimTime launch_cost;
  Flops flops{0.0};
  Bytes bytes{0};
};

class ProgramBuilder {
 public:
  StreamId add_stream(std::string name);
  // A communicator: its ops run in issue order, and in a multi-rank execution (executor.hpp)
  // each of them waits for every rank of its group.
  ChannelId add_channel(std::string name, RankGroups groups = {});

  // Issues an op; it waits for every event its stream was told to wait for since the last op.
  OpId launch(const LaunchSpec& spec);
  // The event is reached when everything issued on the stream so far, including the streams it
  // was told to wait for, has finished (a zero-length marker op carries pending waits).
  EventRef record_event(StreamId stream);
  void wait_event(StreamId stream, EventRef event);
  // stream `waiter` waits for all work issued so far on `waitee` (torch Stream.wait_stream).
  void wait_stream(StreamId waiter, StreamId waitee) { wait_event(waiter, record_event(waitee)); }
  void cpu_synchronize(EventRef event, std::string_view reason);
  void cpu_work(std::string_view name, SimTime duration);
  TensorId allocate(std::string_view name, Bytes size, StreamId stream, std::uint8_t category);
  // Drops the last reference; the block is reusable once `until` completes (record_stream).
  // Freeing a tensor twice is a schedule bug (std::logic_error): the memory would drift.
  void free(TensorId tensor, EventRef until = {});

  // Reserves room for `times` times what the program holds now: a builder that is about to
  // repeat what it issued so far (the micro-batches of a step) grows its vectors once instead of
  // doubling them, which at the last doubling holds up to three times their size.
  void reserve_repeats(std::size_t times);

  [[nodiscard]] const Program& program() const { return program_; }
  Program take() { return std::move(program_); }

 private:
  std::uint32_t intern(std::string_view name);

  Program program_;
  std::vector<OpId> last_op_on_stream_;           // per stream, kNoOp if none
  std::vector<std::vector<OpId>> pending_waits_;  // per stream, consumed by the next launch
  std::vector<bool> freed_;                       // per tensor
};

}  // namespace fsdpsim::engine
