// DeviceCachingAllocator (c10/cuda/CUDACachingAllocator.cpp) as a data structure: blocks keyed
// by address, cached blocks in per-pool sets ordered like BlockComparatorSize. Function names
// follow PyTorch's so that each rule can be checked against its source. Giving cached memory
// back to the device is in cache_release.cpp, expandable segments in expandable_segment.cpp.
#include "sim/memory/caching_allocator.hpp"

#include <algorithm>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace fsdpsim::memory {
namespace {

constexpr std::int64_t kLowestAddress = std::numeric_limits<std::int64_t>::min();

// `calls`: the device calls of the malloc call so far.
MallocResult make_result(MallocStatus status, const MallocResult& calls) {
  MallocResult result = calls;
  result.status = status;
  return result;
}

double to_mib(Bytes b) {
  return static_cast<double>(b.value()) / static_cast<double>(kBytesPerMiB);
}

}  // namespace

std::string describe(const OutOfMemoryInfo& oom) {
  // The message of DeviceCachingAllocator::malloc's TORCH_CHECK_WITH(OutOfMemoryError, ...).
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << "CUDA out of memory. Tried to allocate "
      << to_mib(oom.allocation_size) << " MiB (request of " << oom.requested.value()
      << " B on stream " << oom.stream << "). The device has a capacity of " << to_mib(oom.capacity)
      << " MiB of which " << to_mib(oom.free) << " MiB is free. Of the allocated memory "
      << to_mib(oom.allocated) << " MiB is allocated by PyTorch, and "
      << to_mib(oom.reserved - oom.allocated)
      << " MiB is reserved by PyTorch but unallocated (largest cached block "
      << to_mib(oom.largest_cached_block) << " MiB).";
  return out.str();
}

CachingAllocator::CachingAllocator(const AllocatorConfig& config)
    : config_(config), max_split_size_(max_split_size(config)) {
  const std::string problems = validate(config);
  if (!problems.empty()) throw std::invalid_argument("AllocatorConfig: " + problems);
}

MallocResult CachingAllocator::malloc(Bytes size, StreamId stream) {
  // NativeCachingAllocator::allocate never calls malloc for 0 bytes.
  if (size.value() <= 0) throw std::invalid_argument("CachingAllocator::malloc: size must be > 0");
  calls_ = MallocResult{};
  if (awaiting_sync_) {
    if (awaiting_sync_->requested != size || awaiting_sync_->stream != stream) {
      throw std::logic_error("CachingAllocator::malloc: expected the request that needed a sync");
    }
    if (!awaiting_uses_.empty()) return make_result(MallocStatus::kNeedsSynchronize, calls_);
    const Request r = *awaiting_sync_;
    awaiting_sync_.reset();
    return finish_malloc(r);
  }
  Request r;
  r.requested = size;
  r.size = round_size(size);
  r.alloc_size = allocation_size(r.size);
  r.stream = stream;
  r.small = is_small_request(r.size);

  // DeviceCachingAllocator::malloc: a cached block of this stream and pool, else garbage
  // collection (if on), cudaMalloc, then release_available_cached_blocks and cudaMalloc again.
  std::optional<BlockIt> block = get_free_block(r);
  if (!block) {
    if (collects_garbage()) garbage_collect_cached_blocks();
    block = alloc_block(r, /*is_retry=*/false);
    if (!block && release_available_cached_blocks(r)) block = alloc_block(r, false);
  }
  if (!block) {
    // The last resort, release_cached_blocks, starts with synchronize_and_free_events.
    if (!awaiting_uses_.empty()) {
      awaiting_sync_ = r;
      return make_result(MallocStatus::kNeedsSynchronize, calls_);
    }
    return finish_malloc(r);
  }
  return allocated(alloc_found_block(*block, r));
}

MallocResult CachingAllocator::allocated(BlockIt it) const {
  MallocResult result = make_result(MallocStatus::kAllocated, calls_);
  result.address = it->first;
  result.size = it->second.size;
  return result;
}

MallocResult CachingAllocator::finish_malloc(const Request& r) {
  release_cached_blocks();
  const std::optional<BlockIt> block = alloc_block(r, /*is_retry=*/true);
  if (!block) return out_of_memory(r);
  return allocated(alloc_found_block(*block, r));
}

MallocResult CachingAllocator::out_of_memory(const Request& r) {
  ++stats_.num_ooms;
  MallocResult result = make_result(MallocStatus::kOutOfMemory, calls_);
  OutOfMemoryInfo& oom = result.oom;
  oom.requested = r.requested;
  oom.allocation_size = r.alloc_size;
  oom.stream = r.stream;
  oom.capacity = config_.capacity;
  oom.reserved = stats_.reserved_bytes.current;
  oom.free = config_.capacity - oom.reserved;
  oom.allocated = stats_.allocated_bytes.current;
  oom.largest_cached_block = largest_cached_block();
  return result;
}

std::optional<CachingAllocator::BlockIt> CachingAllocator::get_free_block(const Request& r) {
  Pool& pool = r.small ? small_ : large_;
  // get_free_block counts calls per pool only while garbage collection is on (block ages).
  if (collects_garbage()) ++pool.get_free_block_calls;
  auto it = pool.cached.lower_bound(SizeKey{r.stream, r.size.value(), kLowestAddress});
  if (it == pool.cached.end() || it->stream != r.stream) return std::nullopt;
  if (config_.expandable_segments) {
    // A block followed by unmapped pages counts as the size it can grow to, so best fit may
    // move on to a larger block that cannot grow.
    const auto expandable_size = [this](const SizeKey& k) {
      const std::optional<BlockIt> next = next_in_segment(blocks_.find(k.address));
      const bool grows = next && (*next)->second.state == State::kUnmapped;
      return k.size + (grows ? (*next)->second.size.value() : 0);
    };
    auto next = std::next(it);
    while (next != pool.cached.end() && next->stream == r.stream &&
           expandable_size(*next) < expandable_size(*it)) {
      it = next++;
    }
  }
  // Do not return an oversized block for a small request; an oversized request takes a
  // cached block only if it wastes less than kLargeBuffer (max_non_split_rounding_mb default).
  if (r.size < max_split_size_ && it->size >= max_split_size_.value()) return std::nullopt;
  if (r.size >= max_split_size_ && it->size >= r.size.value() + kLargeBuffer.value()) {
    return std::nullopt;
  }
  const BlockIt block = blocks_.find(it->address);
  erase_cached(block);
  return block;
}

std::optional<CachingAllocator::BlockIt> CachingAllocator::alloc_block(const Request& r,
                                                                       bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  // set_per_process_memory_fraction: the request's whole allocation size must fit under the
  // fraction before anything is mapped, even where an expandable segment would map less (pages
  // joining a cached block); without expandable segments `capacity` already holds the fraction.
  if (config_.allowed_maximum &&
      stats_.reserved_bytes.current + r.alloc_size > *config_.allowed_maximum) {
    return std::nullopt;
  }
  if (config_.expandable_segments) return try_allocate_expandable_block(r);
  // cudaMalloc fails when the device has no room for the segment.
  if (stats_.reserved_bytes.current + r.alloc_size > config_.capacity) return std::nullopt;
  Block segment;
  segment.size = r.alloc_size;
  segment.segment = next_address_;
  segment.stream = r.stream;
  segment.small = r.small;
  const BlockIt it = add_block(next_address_, segment);
  next_address_ += r.alloc_size.value();
  increase(stats_.segment, 1);
  increase(stats_.reserved_bytes, r.alloc_size);
  ++stats_.num_device_alloc;
  stats_.device_alloc_bytes += r.alloc_size;
  return it;
}

bool CachingAllocator::should_split(const Block& block, Bytes size) const {
  const Bytes remaining = block.size - size;
  if (block.small || config_.expandable_segments) return remaining >= kMinBlockSize;
  return size < max_split_size_ && remaining > kSmallSize;
}

CachingAllocator::BlockIt CachingAllocator::alloc_found_block(BlockIt it, const Request& r) {
  // alloc_found_block: the block takes the front of `it`, the remainder stays cached.
  const bool split = should_split(it->second, r.size);
  const bool already_split = is_split(it);
  Block& block = it->second;
  if (split) {
    Block remaining = block;
    remaining.size = block.size - r.size;
    remaining.state = State::kCached;
    block.size = r.size;
    insert_cached(add_block(it->first + r.size.value(), remaining));
    if (already_split && !block.expandable) {
      decrease(stats_.inactive_split_bytes, block.size);  // a cached piece shrinks
    } else if (!block.expandable) {
      increase(stats_.inactive_split_bytes, remaining.size);  // a new cached piece
      increase(stats_.inactive_split, 1);
    }
  } else if (already_split && !block.expandable) {
    decrease(stats_.inactive_split_bytes, block.size);
    decrease(stats_.inactive_split, 1);
  }
  block.state = State::kAllocated;
  block.requested = r.requested;
  increase(stats_.allocation, 1);
  increase(stats_.allocated_bytes, block.size);
  increase(stats_.active, 1);
  increase(stats_.active_bytes, block.size);
  increase(stats_.requested_bytes, block.requested);
  return it;
}

void CachingAllocator::free(std::int64_t address, bool has_pending_uses) {
  const BlockIt it = blocks_.find(address);
  if (it == blocks_.end() || it->second.state != State::kAllocated) {
    throw std::logic_error("CachingAllocator::free: no allocated block at " +
                           std::to_string(address));
  }
  decrease(stats_.allocation, 1);
  decrease(stats_.allocated_bytes, it->second.size);
  // DeviceCachingAllocator::free: with stream uses recorded, insert_events and keep the block
  // out of the pool until process_events sees them complete.
  if (has_pending_uses) {
    it->second.state = State::kAwaitingUses;
    awaiting_uses_.insert(address);
  } else {
    free_block(it);
  }
}

void CachingAllocator::complete_stream_use(std::int64_t address) {
  const BlockIt it = blocks_.find(address);
  if (it == blocks_.end() || it->second.state != State::kAwaitingUses) {
    throw std::logic_error("CachingAllocator::complete_stream_use: no block awaiting uses at " +
                           std::to_string(address));
  }
  awaiting_uses_.erase(address);
  free_block(it);
}

bool CachingAllocator::empty_cache() {
  // emptyCache -> release_cached_blocks, which synchronizes on the recorded uses first.
  if (!awaiting_uses_.empty()) return false;
  calls_ = MallocResult{};
  release_cached_blocks();
  return true;
}

void CachingAllocator::free_block(BlockIt it) {
  // free_block: coalesce with cached neighbours of the same segment (try_merge_blocks), cache.
  const Bytes original_size = it->second.size;
  const Bytes requested = it->second.requested;
  it->second.state = State::kCached;
  it->second.requested = Bytes(0);
  const std::optional<BlockIt> prev = prev_in_segment(it);
  const std::optional<BlockIt> next = next_in_segment(it);
  std::int64_t net_split_blocks = 0;
  Bytes net_split_bytes{0};
  for (const std::optional<BlockIt>& candidate : {prev, next}) {
    Bytes subsumed{0};
    it = try_merge_blocks(it, candidate, &subsumed);
    if (subsumed.value() > 0) {
      net_split_blocks -= 1;
      net_split_bytes -= subsumed;
    }
  }
  insert_cached(it);
  if (is_split(it)) {
    net_split_blocks += 1;
    net_split_bytes += it->second.size;
  }
  // inactive_split excludes expandable segments, whose empty pages can always be unmapped.
  if (!it->second.expandable) {
    stats_.inactive_split.current += net_split_blocks;
    stats_.inactive_split.peak =
        std::max(stats_.inactive_split.peak, stats_.inactive_split.current);
    increase(stats_.inactive_split_bytes, net_split_bytes);
  }
  decrease(stats_.active, 1);
  decrease(stats_.active_bytes, original_size);
  decrease(stats_.requested_bytes, requested);
}

CachingAllocator::BlockIt CachingAllocator::try_merge_blocks(BlockIt dst,
                                                             std::optional<BlockIt> src,
                                                             Bytes* subsumed) {
  // try_merge_blocks: merge only a neighbour that is cached (not allocated, no pending uses)
  // and mapped alike. `dst` is in no set while merging.
  *subsumed = Bytes(0);
  if (!src) return dst;
  const State wanted = dst->second.state == State::kUnmapped ? State::kUnmapped : State::kCached;
  if ((*src)->second.state != wanted) return dst;
  if (wanted == State::kCached) {
    erase_cached(*src);
  } else {
    erase_unmapped(*src);
  }
  *subsumed = (*src)->second.size;
  if ((*src)->first < dst->first) {  // [src dst]: the merged block starts at src
    Block merged = dst->second;
    merged.size += *subsumed;
    (*src)->second = merged;
    blocks_.erase(dst);
    return *src;
  }
  dst->second.size += *subsumed;
  blocks_.erase(*src);
  return dst;
}

Bytes CachingAllocator::largest_cached_block() const {
  std::int64_t largest = 0;
  for (const Pool* pool : {&small_, &large_}) {
    for (const SizeKey& key : pool->cached) largest = std::max(largest, key.size);
  }
  return Bytes(largest);
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  // DeviceCachingAllocator::snapshot: one entry per segment, or per contiguous mapped range of
  // an expandable segment; unmapped address space is not reported.
  std::vector<SegmentInfo> segments;
  bool open = false;
  std::int64_t open_segment = 0;
  for (const auto& [address, block] : blocks_) {
    if (block.state == State::kUnmapped) {
      open = false;
      continue;
    }
    if (!open || block.segment != open_segment) {
      SegmentInfo info;
      info.address = address;
      info.stream = block.stream;
      info.is_large = !block.small;
      info.is_expandable = block.expandable;
      segments.push_back(info);
      open = true;
      open_segment = block.segment;
    }
    SegmentInfo& segment = segments.back();
    BlockInfo info;
    info.address = address;
    info.size = block.size;
    info.requested_size = block.requested;
    info.allocated = block.state == State::kAllocated;
    info.active = info.allocated || block.state == State::kAwaitingUses;
    segment.total_size += block.size;
    if (info.allocated) segment.allocated_size += block.size;
    if (info.active) segment.active_size += block.size;
    segment.blocks.push_back(info);
  }
  return segments;
}

std::optional<CachingAllocator::BlockIt> CachingAllocator::prev_in_segment(BlockIt it) {
  if (it == blocks_.begin()) return std::nullopt;
  const BlockIt prev = std::prev(it);
  if (prev->second.segment != it->second.segment) return std::nullopt;
  return prev;
}

std::optional<CachingAllocator::BlockIt> CachingAllocator::next_in_segment(BlockIt it) {
  const BlockIt next = std::next(it);
  if (next == blocks_.end() || next->second.segment != it->second.segment) return std::nullopt;
  return next;
}

bool CachingAllocator::is_split(BlockIt it) {
  return prev_in_segment(it).has_value() || next_in_segment(it).has_value();
}

void CachingAllocator::insert_cached(BlockIt it) {
  Pool& pool = pool_of(it->second);
  it->second.gc_count_base = pool.get_free_block_calls;  // BlockPool::insert_into_blocks
  pool.cached.insert(SizeKey{it->second.stream, it->second.size.value(), it->first});
  if (!it->second.expandable && !is_split(it)) pool.whole_segments.insert(it->first);
}

void CachingAllocator::erase_cached(BlockIt it) {
  const SizeKey key{it->second.stream, it->second.size.value(), it->first};
  Pool& pool = pool_of(it->second);
  if (pool.cached.erase(key) != 1) throw std::logic_error("block not cached");
  pool.whole_segments.erase(it->first);
}

void CachingAllocator::insert_unmapped(BlockIt it) {
  pool_of(it->second).unmapped.insert(AddressKey{it->second.stream, it->first});
}

void CachingAllocator::erase_unmapped(BlockIt it) {
  const AddressKey key{it->second.stream, it->first};
  if (pool_of(it->second).unmapped.erase(key) != 1) throw std::logic_error("block not unmapped");
}

CachingAllocator::BlockIt CachingAllocator::add_block(std::int64_t address, const Block& block) {
  const auto [it, inserted] = blocks_.emplace(address, block);
  if (!inserted) throw std::logic_error("two blocks at address " + std::to_string(address));
  return it;
}

void CachingAllocator::increase(BytesStat& s, Bytes amount) {
  s.current += amount;
  s.peak = std::max(s.peak, s.current);
}

void CachingAllocator::increase(CountStat& s, std::int64_t amount) {
  s.current += amount;
  s.peak = std::max(s.peak, s.current);
}

}  // namespace fsdpsim::memory
