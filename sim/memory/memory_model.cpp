#include "sim/memory/memory_model.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <utility>

namespace fsdpsim::memory {

MemoryModel::DeviceCalls MemoryModel::device_calls_so_far() const {
  const AllocatorStats& s = allocator_->stats();
  return {s.num_device_alloc, s.num_device_free, s.device_alloc_bytes, s.device_free_bytes};
}

SimTime MemoryModel::device_call_time(const DeviceCalls& before) const {
  const DeviceCalls after = device_calls_so_far();
  const auto ps = [](std::int64_t calls, SimTime per_call, Bytes bytes, double per_byte) {
    return calls * per_call.picoseconds() +
           std::llround(static_cast<double>(bytes.value()) * per_byte);
  };
  return SimTime::from_picoseconds(
      ps(after.allocs - before.allocs, options_.malloc_call_cost,
         after.alloc_bytes - before.alloc_bytes, options_.malloc_ps_per_byte) +
      ps(after.frees - before.frees, options_.free_call_cost, after.free_bytes - before.free_bytes,
         options_.free_ps_per_byte));
}

MemoryModel::MemoryModel(const MemoryModelOptions& options)
    : options_(options),
      tracker_(options.baseline, options.record_samples),
      measuring_(options.measure_from == 0) {
  if (!options.allocator) return;
  allocator_.emplace(*options.allocator);
  // Parameters and optimizer states were allocated before the step (model init, first step).
  for (std::size_t c = 0; c < options.baseline.size(); ++c) {
    const Bytes b = options.baseline[c];
    if (b.value() <= 0) continue;
    const MallocResult r = allocator_->malloc(b, 0);
    if (r.status != MallocStatus::kAllocated && !reserved_.out_of_memory) {
      // No tensor of the step failed: say which state did not fit.
      std::ostringstream what;
      what << std::fixed << std::setprecision(2) << "allocating the "
           << category_name(static_cast<MemoryCategory>(c)) << " held from before the step ("
           << to_gib(b) << " GiB, from model init and the first step): " << describe(r.oom);
      note_out_of_memory(SimTime{}, what.str());
    }
  }
  note_reserved(SimTime{});
}

void MemoryModel::note_reserved(SimTime time) {
  if (!allocator_) return;
  tracker_.set_reserved(time, allocator_->stats().reserved_bytes.current);
  // After a failure the allocator no longer sees the step's tensors (on_allocate): its reserved
  // peak and fragmentation stay those up to the failure. The warm-up step's peak is tracked too
  // (the measured step restarts it): a failure there reports the most reserved before it, as
  // torch.cuda.max_memory_reserved() would, which a cache flush just before the failure lowers.
  if (!reserved_.out_of_memory) note_reserved_peak();
}

void MemoryModel::note_reserved_peak() {
  // Reserved memory stays flat for long stretches (cached blocks are reused, nothing is given
  // back), so its peak is a plateau. The cached-but-unused memory of interest is the one at the
  // plateau's busiest instant, not at the instant the plateau was first reached (e.g. the start
  // of the measured step, when the warm-up step's blocks are all cached and idle).
  const AllocatorStats& s = allocator_->stats();
  const Bytes reserved = s.reserved_bytes.current;
  const Bytes unused = reserved - s.active_bytes.current;
  if (reserved > reserved_.peak_reserved ||
      (reserved == reserved_.peak_reserved && unused < reserved_.fragmentation_at_peak)) {
    reserved_.peak_reserved = reserved;
    reserved_.fragmentation_at_peak = unused;
  }
}

void MemoryModel::note_out_of_memory(SimTime time, std::string message) {
  note_reserved_peak();  // the allocator's state at the failure
  reserved_.out_of_memory = true;
  reserved_.oom_time = time;
  reserved_.oom_message = std::move(message);
}

engine::AllocationOutcome MemoryModel::on_allocate(SimTime time, engine::TensorId tensor,
                                                   const engine::TensorInfo& info) {
  if (!measuring_ && tensor == options_.measure_from) {
    measuring_ = true;
    measured_since_ = time;
    tracker_.reset_peaks(time);
    // Out of memory before the measured step: the allocator is no longer modelled, and the
    // figures stay the warm-up's up to its failure, as PyTorch's memory_stats() read after the
    // OutOfMemoryError has them (num_alloc_retries counts the failed retry: alloc_block with
    // isRetry, c10/cuda/CUDACachingAllocator.cpp).
    if (allocator_ && !reserved_.out_of_memory) {
      retries_at_measure_ = allocator_->stats().num_alloc_retries;
      calls_at_measure_ = device_calls_so_far();
      // torch.cuda.reset_peak_memory_stats at the step boundary: the peak restarts from what is
      // reserved now (resetPeakStats: peak = current), which a flush by the step's first
      // cudaMalloc does not lower.
      const AllocatorStats& now = allocator_->stats();
      reserved_.peak_reserved = now.reserved_bytes.current;
      reserved_.fragmentation_at_peak = now.reserved_bytes.current - now.active_bytes.current;
    }
  }
  if (address_.size() <= tensor) {
    address_.resize(tensor + 1, -1);
    pending_.resize(tensor + 1, false);
    block_size_.resize(tensor + 1, Bytes(0));
  }
  // Without a block (the allocator not modelled, or the step already out of memory), the
  // request; rounded as the allocator would round it once it is modelled.
  block_size_[tensor] =
      allocator_ && info.size.value() > 0 ? allocator_->round_size(info.size) : info.size;
  engine::AllocationOutcome outcome;
  // After the first failure the step can no longer run; it goes on as if the device had room, so
  // its time is that of the step on a large enough device rather than one freed cache, device
  // synchronize and failed cudaMalloc per later allocation (each would fail too: the failed
  // tensor was never placed, so the cache stays at capacity). The allocated and active peaks go
  // on counting: they say how much the step needs.
  if (allocator_ && info.size.value() > 0 && !reserved_.out_of_memory) {
    const DeviceCalls before = calls_before_synchronize_.value_or(device_calls_so_far());
    const MallocResult r = allocator_->malloc(info.size, info.stream);
    if (r.status == MallocStatus::kNeedsSynchronize) {
      calls_before_synchronize_ = before;
      freed_segment_before_synchronize_ = freed_segment_before_synchronize_ || r.segment_frees > 0;
      unmapped_before_synchronize_ |= r.unmapped_streams;
      return {engine::AllocationStatus::kSynchronize, SimTime{}};
    }
    calls_before_synchronize_.reset();
    if (r.status == MallocStatus::kOutOfMemory) {
      outcome.status = engine::AllocationStatus::kOutOfMemory;
      if (!reserved_.out_of_memory) {
        reserved_.oom_tensor = tensor;
        note_out_of_memory(time, describe(r.oom));
      }
    } else {
      address_[tensor] = r.address;
      block_size_[tensor] = r.size;
    }
    // release_block's cudaFree synchronizes the device (c10/cuda/CUDACachingAllocator.cpp,
    // DeviceCachingAllocator::release_block; CUDA Runtime API: cudaFree is synchronous); an
    // expandable segment's unmap synchronizes its own stream (ExpandableSegment::unmapHandles).
    outcome.synchronizes_device = r.segment_frees > 0 || freed_segment_before_synchronize_;
    outcome.synchronized_streams = r.unmapped_streams | unmapped_before_synchronize_;
    freed_segment_before_synchronize_ = false;
    unmapped_before_synchronize_ = 0;
    outcome.cpu_cost = device_call_time(before);
    reserved_.alloc_retries = allocator_->stats().num_alloc_retries - retries_at_measure_;
    const DeviceCalls now = device_calls_so_far();
    reserved_.device_allocs = now.allocs - calls_at_measure_.allocs;
    reserved_.device_frees = now.frees - calls_at_measure_.frees;
  }
  note_reserved(time);
  tracker_.on_allocate(time, tensor, as_counted(tensor, info));
  return outcome;
}

engine::TensorInfo MemoryModel::as_counted(engine::TensorId tensor,
                                           const engine::TensorInfo& info) const {
  engine::TensorInfo counted = info;
  counted.size = block_size_[tensor];
  return counted;
}

void MemoryModel::on_free(SimTime time, engine::TensorId tensor, const engine::TensorInfo& info,
                          bool release_pending) {
  if (allocator_ && address_[tensor] >= 0) {
    allocator_->free(address_[tensor], release_pending);
    pending_[tensor] = release_pending;
  }
  note_reserved(time);
  tracker_.on_free(time, tensor, as_counted(tensor, info), release_pending);
}

void MemoryModel::on_release(SimTime time, engine::TensorId tensor,
                             const engine::TensorInfo& info) {
  if (allocator_ && address_[tensor] >= 0 && pending_[tensor]) {
    allocator_->complete_stream_use(address_[tensor]);
    pending_[tensor] = false;
  }
  if (allocator_) address_[tensor] = -1;
  note_reserved(time);
  tracker_.on_release(time, tensor, as_counted(tensor, info));
}

}  // namespace fsdpsim::memory
