// The memory side of one simulated step: tensor lifetimes counted as PyTorch counts them
// (MemoryTracker) and, when configured, the CUDA caching allocator (CachingAllocator) that turns
// them into reserved memory, fragmentation, cudaMalloc retries (which stall the CPU until the GPU
// is idle) and out-of-memory.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/memory_observer.hpp"
#include "sim/memory/caching_allocator.hpp"
#include "sim/memory/memory_tracker.hpp"

namespace fsdpsim::memory {

struct MemoryModelOptions {
  // Memory alive before the program starts, per category; with an allocator it is allocated
  // first, one block per category on stream 0.
  std::array<Bytes, kMemoryCategoryCount> baseline{};
  bool record_samples = false;
  std::optional<AllocatorConfig> allocator;  // none: reserved memory is not modelled
  // CPU time of the allocator's device calls: per call, plus per byte of the segment.
  SimTime malloc_call_cost;  // cudaMalloc / cuMemMap
  SimTime free_call_cost;    // cudaFree / cuMemUnmap
  double malloc_ps_per_byte = 0.0;
  double free_ps_per_byte = 0.0;
  // Peaks restart when this tensor is allocated (the first tensor of the measured step; earlier
  // steps only warm the allocator's cache). 0: from the start.
  engine::TensorId measure_from = 0;
};

struct ReservedStats {
  Bytes peak_reserved{0};
  // Reserved - active (cached blocks free for reuse) at the busiest instant at which reserved
  // memory was at its peak: the least of reserved - active over the instants of peak_reserved.
  Bytes fragmentation_at_peak{0};
  std::int64_t alloc_retries = 0;  // num_alloc_retries during the measured step
  // The allocator's cudaMalloc and cudaFree calls (or expandable segments' maps and unmaps)
  // during the measured step: torch.cuda.memory_stats()'s num_device_alloc / num_device_free.
  std::int64_t device_allocs = 0;
  std::int64_t device_frees = 0;
  bool out_of_memory = false;
  // The tensor whose allocation failed first; empty when it was the state held before the step
  // (oom_message then names which).
  std::optional<engine::TensorId> oom_tensor;
  std::string oom_message;  // describe(OutOfMemoryInfo) of the first failure
  SimTime oom_time;         // when it failed (0: the state held from before the step)
};

class MemoryModel final : public engine::MemoryObserver {
 public:
  explicit MemoryModel(const MemoryModelOptions& options);

  engine::AllocationOutcome on_allocate(SimTime time, engine::TensorId tensor,
                                        const engine::TensorInfo& info) override;
  void on_free(SimTime time, engine::TensorId tensor, const engine::TensorInfo& info,
               bool release_pending) override;
  void on_release(SimTime time, engine::TensorId tensor, const engine::TensorInfo& info) override;

  [[nodiscard]] const MemoryStats& stats() const { return tracker_.stats(); }
  [[nodiscard]] const ReservedStats& reserved() const { return reserved_; }
  [[nodiscard]] bool models_reserved() const { return allocator_.has_value(); }
  [[nodiscard]] const std::vector<MemorySample>& samples() const { return tracker_.samples(); }
  [[nodiscard]] const std::vector<TensorEvent>& tensor_events() const {
    return tracker_.tensor_events();
  }
  // When the measured step's first tensor was allocated (its CPU time: a tensor is allocated when
  // the CPU issues the op that makes it, ahead of the GPU), where its memory samples begin.
  [[nodiscard]] SimTime measured_since() const { return measured_since_; }

 private:
  void note_reserved(SimTime time);
  void note_reserved_peak();
  void note_out_of_memory(SimTime time, std::string message);
  // The allocator's device calls so far, and the host time of those made since `before`.
  struct DeviceCalls {
    std::int64_t allocs = 0;
    std::int64_t frees = 0;
    Bytes alloc_bytes{0};
    Bytes free_bytes{0};
  };
  [[nodiscard]] DeviceCalls device_calls_so_far() const;
  [[nodiscard]] SimTime device_call_time(const DeviceCalls& before) const;

  MemoryModelOptions options_;
  MemoryTracker tracker_;
  std::optional<CachingAllocator> allocator_;
  std::vector<std::int64_t> address_;  // per tensor, -1 when not in the allocator
  std::vector<bool> pending_;          // per tensor: freed with a pending stream use
  // Per tensor, the block the allocator gave it: the request rounded up, or a whole cached block.
  // PyTorch's allocated and active statistics count these sizes (alloc_found_block adds
  // block->size; requested_bytes keeps the sizes asked for), so the tracker does too.
  std::vector<Bytes> block_size_;
  // `info` with the size of the block `tensor` occupies (the requested size without one).
  [[nodiscard]] engine::TensorInfo as_counted(engine::TensorId tensor,
                                              const engine::TensorInfo& info) const;
  // A malloc that needs a synchronize first: the device calls already made when it stopped
  // (release_available_cached_blocks' cudaFree), priced with the rest once it goes through.
  std::optional<DeviceCalls> calls_before_synchronize_;
  // ... and what those calls synchronize: the device (a cudaFree), streams (unmaps).
  bool freed_segment_before_synchronize_ = false;
  std::uint64_t unmapped_before_synchronize_ = 0;
  ReservedStats reserved_;
  std::int64_t retries_at_measure_ = 0;
  DeviceCalls calls_at_measure_;
  bool measuring_ = true;
  SimTime measured_since_;
};

}  // namespace fsdpsim::memory
