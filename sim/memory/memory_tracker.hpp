// Memory statistics from tensor lifetimes on the simulated timeline, as PyTorch's allocator
// counts them (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::free):
// - allocated: falls as soon as the CPU drops the last reference (memory_allocated()),
// - active: falls only once the block may be reused, i.e. after the streams recorded on it
//   with record_stream have passed the free (the "active_bytes" statistic).
// The caching-allocator model (reserved memory, fragmentation, retries) plugs in beside this
// tracker as another MemoryObserver.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/engine/memory_observer.hpp"
#include "sim/memory/memory_category.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::memory {

struct MemorySample {
  SimTime time;
  Bytes allocated;
  Bytes active;
  Bytes reserved;  // zero without an allocator model

  // What the outputs show as reserved: the allocator model's, or without one its lower bound,
  // the active memory (as the result's peak_mem_reserved_gib).
  [[nodiscard]] Bytes shown_reserved(bool models_reserved) const {
    return models_reserved ? reserved : active;
  }
};

// A tensor allocated or freed by the CPU, in program order: what PyTorch's memory history
// (torch.cuda.memory._record_memory_history) logs as "alloc" and "free_requested".
struct TensorEvent {
  SimTime time;
  engine::TensorId tensor = 0;
  bool allocated = false;  // else freed
};

struct MemoryStats {
  Bytes peak_allocated{0};
  Bytes peak_active{0};
  SimTime peak_active_time;
  // Active bytes per category at the moment of peak_active.
  std::array<Bytes, kMemoryCategoryCount> peak_active_by_category{};
  // The tensor whose allocation reached peak_active (index into Program::tensors).
  engine::TensorId peak_tensor = 0;
};

class MemoryTracker final : public engine::MemoryObserver {
 public:
  // `baseline` is memory alive before the program starts (e.g. sharded parameters and optimizer
  // state), per category. `record_samples` keeps a timeline for traces and CSV output, and every
  // tensor event.
  MemoryTracker(const std::array<Bytes, kMemoryCategoryCount>& baseline, bool record_samples);

  engine::AllocationOutcome on_allocate(SimTime time, engine::TensorId tensor,
                                        const engine::TensorInfo& info) override;
  void on_free(SimTime time, engine::TensorId tensor, const engine::TensorInfo& info,
               bool release_pending) override;
  void on_release(SimTime time, engine::TensorId tensor, const engine::TensorInfo& info) override;

  // Reserved memory as the allocator model reports it, for the samples.
  void set_reserved(SimTime time, Bytes reserved);
  // Starts the peaks again from the current values (torch.cuda.reset_peak_memory_stats).
  void reset_peaks(SimTime time);

  [[nodiscard]] const MemoryStats& stats() const { return stats_; }
  [[nodiscard]] const std::vector<MemorySample>& samples() const { return samples_; }
  [[nodiscard]] const std::vector<TensorEvent>& tensor_events() const { return tensor_events_; }

 private:
  void sample(SimTime time);

  std::array<Bytes, kMemoryCategoryCount> active_by_category_{};
  Bytes allocated_{0};
  Bytes active_{0};
  Bytes reserved_{0};
  MemoryStats stats_;
  bool record_samples_;
  std::vector<MemorySample> samples_;
  std::vector<TensorEvent> tensor_events_;
};

}  // namespace fsdpsim::memory
