// Giving cached memory back to the device (c10/cuda/CUDACachingAllocator.cpp): the steps of
// DeviceCachingAllocator::malloc's out-of-memory path (release_available_cached_blocks, then
// release_cached_blocks after synchronize_and_free_events, also behind emptyCache) and
// garbage_collect_cached_blocks.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "sim/memory/caching_allocator.hpp"

namespace fsdpsim::memory {

bool CachingAllocator::release_available_cached_blocks(const Request& r) {
  // release_available_cached_blocks: only with max_split_size_mb set; frees the smallest cached
  // oversize block of this stream and pool that covers the request, else oversize blocks from
  // the largest down until they add up to it. (PyTorch's release_block would reject expandable
  // blocks here; with expandable segments we skip this step.)
  if (!config_.max_split_size_mb || config_.expandable_segments) return false;
  Pool& pool = r.small ? small_ : large_;
  const Bytes key_size = std::max(r.size, max_split_size_);
  const std::int64_t lowest_address = std::numeric_limits<std::int64_t>::min();
  auto it = pool.cached.lower_bound(SizeKey{r.stream, key_size.value(), lowest_address});
  if (it != pool.cached.end() && it->stream == r.stream) {
    release_block(blocks_.find(it->address));
    return true;
  }
  if (it == pool.cached.begin()) return false;
  Bytes released{0};
  --it;  // the largest block of this stream, if any
  while (released < key_size && it->size >= max_split_size_.value() && it->stream == r.stream) {
    const std::int64_t address = it->address;
    released += Bytes(it->size);
    const bool first = it == pool.cached.begin();
    if (!first) --it;
    release_block(blocks_.find(address));
    if (first) break;
  }
  return released >= key_size;
}

void CachingAllocator::release_cached_blocks() {
  // release_cached_blocks: synchronize_and_free_events (the caller completed every recorded
  // use), then release_blocks on both pools: every unsplit cached segment of every stream.
  if (!awaiting_uses_.empty()) throw std::logic_error("release_cached_blocks with pending uses");
  ++stats_.num_sync_all_streams;
  release_blocks(large_);
  release_blocks(small_);
}

void CachingAllocator::release_blocks(Pool& pool) {
  if (!config_.expandable_segments) {
    const std::vector<std::int64_t> whole(pool.whole_segments.begin(), pool.whole_segments.end());
    for (const std::int64_t address : whole) release_block(blocks_.find(address));
    return;
  }
  std::vector<std::int64_t> to_unmap;
  for (auto key = pool.cached.begin(); key != pool.cached.end();) {
    const std::int64_t address = key->address;
    ++key;
    const BlockIt it = blocks_.find(address);
    if (it->second.expandable) {
      to_unmap.push_back(address);
    } else if (!is_split(it)) {
      release_block(it);
    }
  }
  // Expandable segments give back their empty pages, and the whole segment once all are.
  for (const std::int64_t address : to_unmap) {
    const std::optional<BlockIt> unmapped = unmap_block(blocks_.find(address));
    if (unmapped && !is_split(*unmapped)) {  // release_expandable_segment
      erase_unmapped(*unmapped);
      blocks_.erase(*unmapped);
    }
  }
}

void CachingAllocator::release_block(BlockIt it) {
  // release_block: cudaFree of a whole cached segment.
  if (it->second.expandable || is_split(it) || it->second.state != State::kCached) {
    throw std::logic_error("release_block of a block that is not a whole cached segment");
  }
  erase_cached(it);
  decrease(stats_.segment, 1);
  decrease(stats_.reserved_bytes, it->second.size);
  ++stats_.num_device_free;
  stats_.device_free_bytes += it->second.size;
  ++calls_.device_frees;
  ++calls_.segment_frees;
  blocks_.erase(it);
}

void CachingAllocator::garbage_collect_cached_blocks() {
  // garbage_collect_cached_blocks: above threshold * allowed_memory_maximum, free unsplit cached
  // blocks of the large pool whose age (get_free_block calls since cached) is at least the mean
  // age, until the excess is reclaimed. Expandable segments have no unsplit blocks to free.
  const auto gc_threshold = static_cast<std::int64_t>(
      config_.garbage_collection_threshold * static_cast<double>(config_.allowed_maximum->value()));
  const std::int64_t reserved = stats_.reserved_bytes.current.value();
  if (reserved <= gc_threshold || config_.expandable_segments) return;
  const std::int64_t target = reserved - gc_threshold;
  const auto age = [this](BlockIt it) {
    return large_.get_free_block_calls - it->second.gc_count_base;
  };
  std::int64_t total_age = 0;
  std::int64_t freeable = 0;
  for (const SizeKey& key : large_.cached) {
    const BlockIt it = blocks_.find(key.address);
    if (!is_split(it)) {
      total_age += age(it);
      ++freeable;
    }
  }
  std::int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    for (auto key = large_.cached.begin(); key != large_.cached.end();) {
      const BlockIt it = blocks_.find(key->address);
      ++key;
      if (!is_split(it) && static_cast<double>(age(it)) >= age_threshold) {
        freed = true;
        reclaimed += it->second.size.value();
        total_age -= age(it);
        --freeable;
        release_block(it);
      }
    }
  }
}

}  // namespace fsdpsim::memory
