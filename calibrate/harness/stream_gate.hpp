// A gate on a stream, closed while its timed work is queued. Without it a GPU runs each launch
// as soon as the host has queued it, so a timed window of kernels shorter than their launches
// measures the host's enqueue rate (one thread driving eight GPUs' NCCL groups, or
// cublasLtMatmul's host work), which fsdpsim already prices on the CPU's timeline
// (kernel_launch_overhead_us). nvbench blocks the stream with a spinning kernel for this reason
// (nvbench/blocking_kernel.cuh), and nccl-tests' CUDA-graph mode (-G) takes the same host time
// out of its timings.
//
// Use: close_gate(gate, stream); queue the events and launches to time; open_gate(gate). The
// events then bracket launches that run back to back. A closed gate also opens by itself after
// kGateTimeoutNs, so that a host blocked while it is closed (a full launch queue) cannot hang the
// run; gate_timed_out() says whether one did, i.e. whether a timing includes host time after all.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace fsdpsim::harness {

inline constexpr std::uint64_t kGateTimeoutNs = std::uint64_t{10} * 1000 * 1000 * 1000;  // 10 s

struct StreamGate {
  // Pinned host memory mapped into the GPU's address space: [0] the last ticket opened, [1] set
  // when a closed gate opened by its timeout.
  std::uint32_t* host = nullptr;
  std::uint32_t* device = nullptr;  // the same two words, as the GPU addresses them
  std::uint32_t ticket = 0;         // the last close queued
  int cuda_device = 0;              // the GPU whose streams it closes (current at create_gate)
};

// Allocates the gate's words for the current device's streams; destroy_gate() frees them.
void create_gate(StreamGate& gate);
void destroy_gate(StreamGate& gate) noexcept;

// Queues on `stream` (one of the gate's device's) a kernel that spins until open_gate() is
// called (or kGateTimeoutNs pass): the stream's later work starts only then. Launched on the
// gate's device whatever the current one: one process may drive every GPU of its node, and a
// kernel launch fails on a stream of a device that is not current.
void close_gate(StreamGate& gate, cudaStream_t stream);

// Lets every close queued so far end.
void open_gate(StreamGate& gate);

// Whether a close ended by its timeout since the last call.
bool gate_timed_out(StreamGate& gate);

// The profile's note for the timings of `what` behind a gate that opened by its timeout.
std::string gate_timeout_note(const std::string& what);

}  // namespace fsdpsim::harness
