// What the executor tells a memory model as the CPU thread allocates and frees tensors.
// The engine only reports lifetimes; sim/memory turns them into statistics (and later into the
// caching allocator's reserved memory).
#pragma once

#include "sim/engine/program.hpp"
#include "sim/units/sim_time.hpp"

namespace fsdpsim::engine {

class MemoryObserver {
 public:
  virtual ~MemoryObserver() = default;
  // The CPU allocated `tensor` (PyTorch's allocator runs on the CPU at issue time).
  virtual void on_allocate(SimTime time, TensorId tensor, const TensorInfo& info) = 0;
  // The CPU dropped the last reference: torch.cuda.memory_allocated() falls now.
  virtual void on_free(SimTime time, TensorId tensor, const TensorInfo& info) = 0;
  // The block can be reused: every stream recorded on it has passed the free (record_stream).
  virtual void on_release(SimTime time, TensorId tensor, const TensorInfo& info) = 0;
};

}  // namespace fsdpsim::engine
