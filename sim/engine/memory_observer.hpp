// What the executor tells a memory model as the CPU thread allocates and frees tensors, and what
// the model can ask of the executor in return (PyTorch's allocator runs on the CPU: it can make
// the CPU wait for the GPU, and its device calls cost CPU time).
#pragma once

#include "sim/engine/program.hpp"
#include "sim/units/sim_time.hpp"

namespace fsdpsim::engine {

enum class AllocationStatus : std::uint8_t {
  kAllocated,
  // The allocator must free its cached blocks after every pending stream use has completed
  // (synchronize_and_free_events): block the CPU until every freed tensor awaiting a stream use
  // has been released, then allocate the same tensor again.
  kSynchronize,
  // The device is out of memory. The executor carries on (the tensor counts as allocated) so
  // that the result still describes the step; the model records where it happened.
  kOutOfMemory,
};

struct AllocationOutcome {
  AllocationStatus status = AllocationStatus::kAllocated;
  SimTime cpu_cost;  // CPU time of the allocator's device calls (cudaMalloc, cudaFree)
  // The allocator gave segments back with cudaFree, which waits for all work issued to the
  // device (CUDA's implicit synchronization): the CPU idles until the device does, then spends
  // cpu_cost.
  bool synchronizes_device = false;
  // Bit s: the allocator synchronized stream s (cudaStreamSynchronize before unmapping pages of
  // its expandable segment): the CPU idles until the stream has finished its issued work.
  std::uint64_t synchronized_streams = 0;
};

class MemoryObserver {
 public:
  virtual ~MemoryObserver() = default;
  // The CPU allocates `tensor` (PyTorch's allocator runs on the CPU at issue time).
  virtual AllocationOutcome on_allocate(SimTime time, TensorId tensor, const TensorInfo& info) = 0;
  // The CPU dropped the last reference: torch.cuda.memory_allocated() falls now. With
  // `release_pending` the block waits for a recorded stream use (record_stream).
  virtual void on_free(SimTime time, TensorId tensor, const TensorInfo& info,
                       bool release_pending) = 0;
  // The block can be reused: every stream recorded on it has passed the free. Called for every
  // free, at once or when the pending use completes.
  virtual void on_release(SimTime time, TensorId tensor, const TensorInfo& info) = 0;
};

}  // namespace fsdpsim::engine
