// expandable_segments:True (c10/cuda/CUDACachingAllocator.cpp, Note [Expandable Segments],
// struct ExpandableSegment and DeviceCachingAllocator::find_expandable_block, map_block,
// try_allocate_expandable_block, unmap_block).
//
// What is modelled: per stream and pool, a segment reserves address space for capacity * 9/8
// (PyTorch: 1 1/8 of the GPU's memory) and maps physical pages of 2 MiB (small pool) or 20 MiB
// (large pool) at the lowest address where the request fits, merging with the cached block
// before it, so a segment stays one contiguous range and fragments only inside its pages.
// Mapping fails, mapping nothing, when reserved + pages > capacity (cuMemCreate out of memory).
// On the out-of-memory path, every fully empty page of a cached block is unmapped, and a
// segment with no page left is released. Not modelled: IPC sharing, peer access.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "sim/memory/caching_allocator.hpp"

namespace fsdpsim::memory {

Bytes CachingAllocator::page_size(const Block& block) const {
  // ExpandableSegment's segment_size_: kSmallBuffer for the small pool, kLargeBuffer otherwise.
  return block.small ? kSmallBuffer : kLargeBuffer;
}

std::optional<CachingAllocator::BlockIt> CachingAllocator::try_allocate_expandable_block(
    const Request& r) {
  // try_allocate_expandable_block: map pages until the candidate (a cached block followed by
  // unmapped space, or unmapped space) holds the rounded request. Pages mapped before a
  // failure stay mapped, as in PyTorch.
  BlockIt candidate = find_expandable_block(r);
  if (candidate->second.state == State::kUnmapped) {
    const std::optional<BlockIt> mapped =
        map_block(candidate, std::min(candidate->second.size, r.size));
    if (!mapped) return std::nullopt;
    candidate = *mapped;
  }
  while (candidate->second.size < r.size) {
    const Bytes remaining = r.size - candidate->second.size;
    const std::optional<BlockIt> next = next_in_segment(candidate);
    if (!next || (*next)->second.state != State::kUnmapped) {
      throw std::logic_error("expandable block not followed by unmapped space");
    }
    const std::optional<BlockIt> mapped =
        map_block(*next, std::min(remaining, (*next)->second.size));
    if (!mapped) return std::nullopt;
    candidate = *mapped;
  }
  erase_cached(candidate);
  return candidate;
}

CachingAllocator::BlockIt CachingAllocator::find_expandable_block(const Request& r) {
  // find_expandable_block: the lowest-address unmapped range of this stream and pool (with
  // the cached block just before it) that, with the cached or unmapped blocks after it, holds
  // the request; else a new segment whose address space is all unmapped.
  Pool& pool = r.small ? small_ : large_;
  const auto allocatable = [](const Block& b) {
    return b.state == State::kCached || b.state == State::kUnmapped;
  };
  const AddressKey first{r.stream, std::numeric_limits<std::int64_t>::min()};
  for (auto key = pool.unmapped.lower_bound(first);
       key != pool.unmapped.end() && key->stream == r.stream; ++key) {
    BlockIt candidate = blocks_.find(key->address);
    const std::optional<BlockIt> prev = prev_in_segment(candidate);
    if (prev && allocatable((*prev)->second)) candidate = *prev;
    Bytes room{0};
    std::optional<BlockIt> walk = candidate;
    while (room < r.size && walk && allocatable((*walk)->second)) {
      room += (*walk)->second.size;
      walk = next_in_segment(*walk);
    }
    if (room >= r.size) return candidate;
  }
  Block segment;
  segment.segment = next_address_;
  segment.stream = r.stream;
  segment.small = r.small;
  segment.expandable = true;
  segment.state = State::kUnmapped;
  const std::int64_t page = page_size(segment).value();
  // find_expandable_block: address space for 1 1/8 of the GPU's total memory (prop.totalGlobalMem
  // + totalGlobalMem / 8), not of what the process may use, so that pages unmapped early in the
  // segment can be mapped again at its end; the unmapped tail's size counts in get_free_block's
  // expandable_size best fit.
  const Bytes device = config_.device_memory.value() > 0 ? config_.device_memory : config_.capacity;
  const std::int64_t wanted = device.value() + device.value() / 8;
  segment.size = Bytes(page * ((wanted + page - 1) / page));
  const BlockIt it = add_block(next_address_, segment);
  next_address_ += segment.size.value();
  insert_unmapped(it);
  return it;
}

std::optional<CachingAllocator::BlockIt> CachingAllocator::map_block(BlockIt it, Bytes size) {
  // map_block: map the pages covering [address, address + size) of an unmapped block (which
  // starts on a page boundary), split off the rest as unmapped, merge with cached neighbours.
  const std::int64_t page = page_size(it->second).value();
  const std::int64_t offset = it->first - it->second.segment;
  const std::int64_t begin = offset / page;
  const std::int64_t end = (offset + size.value() + page - 1) / page;
  const Bytes mapped{(end - begin) * page};
  // ExpandableSegment::map: cuMemCreate out of memory releases the pages it made, maps none.
  if (stats_.reserved_bytes.current + mapped > config_.capacity) return std::nullopt;
  erase_unmapped(it);
  it->second.state = State::kCached;
  if (mapped < it->second.size) {
    Block rest = it->second;
    rest.size = it->second.size - mapped;
    rest.state = State::kUnmapped;
    it->second.size = mapped;
    insert_unmapped(add_block(it->first + mapped.value(), rest));
  }
  Bytes subsumed{0};
  it = try_merge_blocks(it, prev_in_segment(it), &subsumed);
  it = try_merge_blocks(it, next_in_segment(it), &subsumed);
  insert_cached(it);
  increase(stats_.reserved_bytes, mapped);
  ++stats_.num_device_alloc;
  stats_.device_alloc_bytes += mapped;
  return it;
}

std::optional<CachingAllocator::BlockIt> CachingAllocator::unmap_block(BlockIt it) {
  // unmap_block: unmap the fully empty pages inside a cached block; the partial pages before
  // and after stay cached. Returns the unmapped block, or nullopt if no page was empty.
  const Block block = it->second;
  const std::int64_t page = page_size(block).value();
  const std::int64_t offset = it->first - block.segment;
  const std::int64_t begin = (offset + page - 1) / page;
  const std::int64_t end = (offset + block.size.value()) / page;
  if (begin >= end) return std::nullopt;
  erase_cached(it);
  const std::int64_t unmapped_address = block.segment + begin * page;
  const Bytes unmapped_size{(end - begin) * page};
  const Bytes before{unmapped_address - it->first};
  const Bytes after = block.size - before - unmapped_size;
  if (before.value() > 0) {
    it->second.size = before;
    insert_cached(it);
  } else {
    blocks_.erase(it);
  }
  Block unmapped = block;
  unmapped.size = unmapped_size;
  unmapped.state = State::kUnmapped;
  BlockIt result = add_block(unmapped_address, unmapped);
  if (after.value() > 0) {
    Block rest = block;
    rest.size = after;
    insert_cached(add_block(unmapped_address + unmapped_size.value(), rest));
  }
  Bytes subsumed{0};
  result = try_merge_blocks(result, prev_in_segment(result), &subsumed);
  result = try_merge_blocks(result, next_in_segment(result), &subsumed);
  insert_unmapped(result);
  decrease(stats_.reserved_bytes, unmapped_size);
  ++stats_.num_device_free;
  stats_.device_free_bytes += unmapped_size;
  ++calls_.device_frees;
  if (const StreamId stream = block.stream; stream < 64) {
    calls_.unmapped_streams |= std::uint64_t{1} << stream;
  } else {
    ++calls_.segment_frees;
  }
  return result;
}

}  // namespace fsdpsim::memory
