#include "sim/engine/program_builder.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace fsdpsim::engine {

StreamId ProgramBuilder::add_stream(std::string name) {
  program_.stream_names.push_back(std::move(name));
  last_op_on_stream_.push_back(kNoOp);
  pending_waits_.emplace_back();
  return static_cast<StreamId>(program_.stream_names.size() - 1);
}

ChannelId ProgramBuilder::add_channel(std::string name, RankGroups groups) {
  program_.channel_names.push_back(std::move(name));
  program_.channel_groups.push_back(groups);
  return static_cast<ChannelId>(program_.channel_names.size() - 1);
}

void ProgramBuilder::reserve_repeats(std::size_t times) {
  program_.ops.reserve(program_.ops.size() * times);
  program_.deps.reserve(program_.deps.size() * times);
  program_.cpu.reserve(program_.cpu.size() * times);
  program_.tensors.reserve(program_.tensors.size() * times);
  freed_.reserve(freed_.size() * times);
}

std::uint32_t ProgramBuilder::intern(std::string_view name) { return program_.names.intern(name); }

OpId ProgramBuilder::launch(const LaunchSpec& spec) {
  if (spec.stream >= last_op_on_stream_.size()) throw std::logic_error("launch on unknown stream");
  const auto id = static_cast<OpId>(program_.ops.size());
  if (spec.network_time > spec.duration ||
      (spec.network_time.picoseconds() > 0 && spec.kind != OpKind::kCommunication)) {
    throw std::logic_error("launch: network_time is part of a collective's duration");
  }
  Op op;
  op.name = intern(spec.name);
  op.stream = spec.stream;
  op.channel = spec.channel;
  op.kind = spec.kind;
  op.phase = spec.phase;
  op.group = spec.group;
  op.duration = spec.duration;
  op.contended_duration = spec.contended_duration;
  op.network_time = spec.network_time;
  op.launch_cost = spec.launch_cost;
  op.flops = spec.flops;
  op.bytes = spec.bytes;
  op.deps_begin = static_cast<std::uint32_t>(program_.deps.size());
  for (OpId dep : pending_waits_[spec.stream]) program_.deps.push_back(dep);
  op.deps_end = static_cast<std::uint32_t>(program_.deps.size());
  pending_waits_[spec.stream].clear();
  program_.ops.push_back(op);
  program_.cpu.push_back(CpuStep{CpuStepKind::kLaunch, id, kNoOp, 0, SimTime{}});
  last_op_on_stream_[spec.stream] = id;
  return id;
}

EventRef ProgramBuilder::record_event(StreamId stream) {
  if (!pending_waits_.at(stream).empty()) {
    LaunchSpec marker;
    marker.name = "stream_wait";
    marker.stream = stream;
    marker.kind = OpKind::kMarker;
    launch(marker);
  }
  return EventRef{last_op_on_stream_.at(stream)};
}

void ProgramBuilder::wait_event(StreamId stream, EventRef event) {
  if (event.op == kNoOp) return;
  // Waiting on work of the same stream is implied by FIFO order.
  if (program_.ops[event.op].stream == stream) return;
  pending_waits_.at(stream).push_back(event.op);
}

void ProgramBuilder::cpu_synchronize(EventRef event, std::string_view reason) {
  if (event.op == kNoOp) return;
  program_.cpu.push_back(CpuStep{CpuStepKind::kWait, event.op, kNoOp, intern(reason), SimTime{}});
}

void ProgramBuilder::cpu_work(std::string_view name, SimTime duration) {
  program_.cpu.push_back(CpuStep{CpuStepKind::kWork, 0, kNoOp, intern(name), duration});
}

TensorId ProgramBuilder::allocate(std::string_view name, Bytes size, StreamId stream,
                                  std::uint8_t category) {
  const auto id = static_cast<TensorId>(program_.tensors.size());
  program_.tensors.push_back(TensorInfo{intern(name), size, stream, category});
  program_.cpu.push_back(CpuStep{CpuStepKind::kAlloc, id, kNoOp, 0, SimTime{}});
  freed_.push_back(false);
  return id;
}

void ProgramBuilder::free(TensorId tensor, EventRef until) {
  if (freed_.at(tensor)) {
    throw std::logic_error("engine: " + std::string(program_.names[program_.tensors[tensor].name]) +
                           " is freed twice");
  }
  freed_[tensor] = true;
  // The caching allocator ignores a use recorded on the block's own stream (recordStream in
  // c10/cuda/CUDACachingAllocator.cpp: "ignore uses on the allocation stream, since those don't
  // require any special synchronization"): the block is reusable at once, in that stream's order.
  if (until.op != kNoOp && program_.ops[until.op].stream == program_.tensors[tensor].stream) {
    until = {};
  }
  program_.cpu.push_back(CpuStep{CpuStepKind::kFree, tensor, until.op, 0, SimTime{}});
}

}  // namespace fsdpsim::engine
