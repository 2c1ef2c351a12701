// The program one rank runs, as the executor replays it: GPU ops on named streams, the CPU
// thread's issue sequence, and the tensors whose lifetimes follow that sequence.
//
// Data-oriented: flat vectors of small structs indexed by integer ids; dependency lists are
// ranges into one shared vector. The engine knows nothing about FSDP: `phase` and `group` are
// opaque tags that the layer building the program interprets.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sim/engine/name_table.hpp"
#include "sim/units/sim_time.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::engine {

using OpId = std::uint32_t;
using TensorId = std::uint32_t;
using StreamId = std::uint16_t;
using ChannelId = std::int32_t;
inline constexpr OpId kNoOp = std::numeric_limits<OpId>::max();
inline constexpr ChannelId kNoChannel = -1;

// What resources an op occupies. kCompute and kCopy ops run on the SMs, which the ones running
// at once share, each at 1/n of its rate; while any kCommunication op runs, kCompute ops progress
// at the rate of their contended_duration. kCommunication ops whose transfers cross the nodes'
// NICs at the same time share them (Op::network_time). kCopyEngine ops run on the copy engines,
// beside the SMs.
enum class OpKind : std::uint8_t {
  kCompute,
  kCommunication,
  kCopy,  // a device-to-device copy kernel (a cast, a pad, FSDP's copy-in)
  // A cudaMemcpyAsync, which a copy engine (DMA) moves without SMs: host-device over PCIe, or
  // device-to-device (PyTorch's copy_ between contiguous tensors of one dtype:
  // copy_device_to_device, aten/src/ATen/native/cuda/Copy.cu).
  kCopyEngine,
  kMarker,  // zero-length: an event recorded after cross-stream waits (cudaStreamWaitEvent)
};

struct Op {
  std::uint32_t name = 0;          // index into Program::names
  StreamId stream = 0;             // FIFO: starts after the previous op issued on this stream ends
  ChannelId channel = kNoChannel;  // optional second FIFO (an NCCL communicator's internal stream)
  OpKind kind = OpKind::kCompute;
  std::uint8_t phase = 0;   // opaque tag (e.g. forward / backward) for the builder's reports
  std::int32_t group = -1;  // opaque tag (e.g. the FSDP unit), -1 = none
  SimTime duration;         // device time once started, running alone
  // Device time if a communication op runs alongside it for its whole life (SMs shared with
  // NCCL kernels); zero means "not slowed". Partial overlap interpolates by progress.
  SimTime contended_duration;
  // For a collective: the part of `duration` spent moving bytes through the nodes' NICs at their
  // full rate (zero: it stays inside a node, or NVLink bounds it). While k such transfers run at
  // once that part progresses at 1/k of its rate.
  SimTime network_time;
  SimTime launch_cost;           // CPU time to issue it
  Flops flops{0.0};              // for FLOP accounting
  Bytes bytes{0};                // bytes moved (HBM traffic, or a collective's buffer)
  std::uint32_t deps_begin = 0;  // [deps_begin, deps_end) in Program::deps: cross-stream waits
  std::uint32_t deps_end = 0;
};

enum class CpuStepKind : std::uint8_t {
  kLaunch,  // issue `target` op (costs its launch_cost on the CPU)
  kWait,    // block until op `target` has finished (cudaEventSynchronize)
  kWork,    // host work of `duration` (Python hooks, optimizer on the CPU)
  kAlloc,   // tensor `target` is allocated (the caching allocator runs on the CPU)
  kFree,    // last reference to tensor `target` dropped; its block becomes reusable once op
            // `after_op` has finished (record_stream semantics), immediately if kNoOp
};

struct CpuStep {
  CpuStepKind kind = CpuStepKind::kLaunch;
  std::uint32_t target = 0;
  OpId after_op = kNoOp;
  std::uint32_t name = 0;  // for kWork / kWait: index into Program::names
  SimTime duration;        // for kWork
};

struct TensorInfo {
  std::uint32_t name = 0;  // index into Program::names
  Bytes size{0};
  StreamId stream = 0;        // the stream it is allocated on (per-stream allocator pools)
  std::uint8_t category = 0;  // opaque tag (parameters, gradients, activations, ...)
};

// Which ranks share one instance of a channel's communicator: groups of `size` ranks spaced
// `stride` apart (rank = group base + k * stride), the world's ranks numbered 0..world-1.
// size 0: every rank of the world.
struct RankGroups {
  std::int32_t size = 0;
  std::int32_t stride = 1;
};

// How many issued, unfinished ops one stream holds before the CPU's next launch on it blocks:
// CUDA queues a stream's work in a bounded buffer, and a launch into a full one waits until the
// stream's oldest entry completes. Measured at "about 1000 kernels" per stream, each of several
// streams holding its own, not configurable by cudaLimitDevRuntimePendingLaunchCount (NVIDIA
// Developer Forums, "CUDA stream are blocked when launch lots of kernels (>1000)", 2018, and
// Stack Overflow 53970187); OneFlow synchronizes its streams before 1024 queued kernels, past
// which "not only does this stream's launch become blocking" (Oneflow-Inc/oneflow PR #890).
// One op is one entry (a kernel, a copy, or a marker's event record or wait).
inline constexpr std::uint32_t kCudaLaunchQueueDepth = 1024;

struct Program {
  NameTable names;
  std::vector<std::string> stream_names;
  std::vector<std::string> channel_names;
  std::vector<RankGroups> channel_groups;  // parallel to channel_names
  std::vector<Op> ops;
  std::vector<OpId> deps;
  std::vector<CpuStep> cpu;
  std::vector<TensorInfo> tensors;
  std::uint32_t launch_queue_depth = kCudaLaunchQueueDepth;  // per stream, at least 1
};

}  // namespace fsdpsim::engine
