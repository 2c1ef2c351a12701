#include "sim/memory/memory_tracker.hpp"

namespace fsdpsim::memory {

MemoryTracker::MemoryTracker(const std::array<Bytes, kMemoryCategoryCount>& baseline,
                             bool record_samples)
    : active_by_category_(baseline), record_samples_(record_samples) {
  for (Bytes b : baseline) {
    allocated_ += b;
    active_ += b;
  }
  stats_.peak_allocated = allocated_;
  stats_.peak_active = active_;
  stats_.peak_active_by_category = active_by_category_;
  sample(SimTime{});
}

engine::AllocationOutcome MemoryTracker::on_allocate(SimTime time, engine::TensorId tensor,
                                                     const engine::TensorInfo& info) {
  allocated_ += info.size;
  active_ += info.size;
  active_by_category_[info.category] += info.size;
  if (allocated_ > stats_.peak_allocated) stats_.peak_allocated = allocated_;
  if (active_ > stats_.peak_active) {
    stats_.peak_active = active_;
    stats_.peak_active_time = time;
    stats_.peak_active_by_category = active_by_category_;
    stats_.peak_tensor = tensor;
  }
  sample(time);
  if (record_samples_) tensor_events_.push_back(TensorEvent{time, tensor, true});
  return {};
}

void MemoryTracker::on_free(SimTime time, engine::TensorId tensor, const engine::TensorInfo& info,
                            bool) {
  allocated_ -= info.size;
  sample(time);
  if (record_samples_) tensor_events_.push_back(TensorEvent{time, tensor, false});
}

void MemoryTracker::on_release(SimTime time, engine::TensorId, const engine::TensorInfo& info) {
  active_ -= info.size;
  active_by_category_[info.category] -= info.size;
  sample(time);
}

void MemoryTracker::set_reserved(SimTime time, Bytes reserved) {
  if (reserved == reserved_) return;
  reserved_ = reserved;
  sample(time);
}

void MemoryTracker::reset_peaks(SimTime time) {
  stats_.peak_allocated = allocated_;
  stats_.peak_active = active_;
  stats_.peak_active_time = time;
  stats_.peak_active_by_category = active_by_category_;
}

void MemoryTracker::sample(SimTime time) {
  if (!record_samples_) return;
  if (!samples_.empty() && samples_.back().time == time) {
    samples_.back().allocated = allocated_;
    samples_.back().active = active_;
    samples_.back().reserved = reserved_;
    return;
  }
  samples_.push_back(MemorySample{time, allocated_, active_, reserved_});
}

}  // namespace fsdpsim::memory
