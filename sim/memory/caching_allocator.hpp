// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// DeviceCachingAllocator): how tensor allocations on streams turn into reserved memory,
// fragmentation, allocation retries and out-of-memory errors.
//
// A pure data structure: no engine, no time. The executor calls malloc() when the CPU
// allocates a tensor, free() when the CPU drops it, and complete_stream_use() when the GPU
// passes a block's recorded stream use (record_stream). Addresses are integers this class
// assigns (segments bump a counter), so every order is deterministic.
//
// Modelled (each rule cites its PyTorch function in the .cpp): size rounding and segment sizes,
// small / large pools, per-stream reuse, best fit (stream, size, address), splitting
// (should_split, max_split_size_mb), coalescing on free, deferred free of blocks with stream
// uses, the out-of-memory path (release_available_cached_blocks, then synchronize and
// release_cached_blocks, then one retry), garbage_collection_threshold, roundup_power2_divisions,
// expandable segments (one per stream and pool, mapped in 2 MiB / 20 MiB pages) and the
// aggregate ("all") statistics of torch.cuda.memory_stats(). The device is `capacity` bytes
// with no fragmentation of its own: cudaMalloc fails exactly when reserved + size > capacity.
// Streams are ordered by StreamId where PyTorch compares cudaStream_t values.
//
// The synchronize protocol: when only release_cached_blocks can make room and freed blocks
// still await stream uses, malloc returns kNeedsSynchronize and changes nothing further. The
// CPU must then wait until the GPU has passed every pending use (complete_stream_use for
// each) and call malloc again with the same request, which resumes at release_cached_blocks.
//
// Not modelled: CUDA graph private pools, free-memory callbacks, IPC, per-pool ("small_pool" /
// "large_pool") statistics, several recorded streams per freed block (one pending use each),
// max_non_split_rounding_mb (fixed at its default, kLargeBuffer), set_per_process_memory_fraction
// other than through `capacity`.
//
// Complexity: malloc, free and complete_stream_use are O(log n) in the number of blocks, except
// on the out-of-memory path (release_cached_blocks and garbage collection visit every cached
// block, as PyTorch does) and, with expandable segments, the scan for a segment with room.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/engine/program.hpp"
#include "sim/memory/allocator_config.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::memory {

using StreamId = engine::StreamId;

// A statistic as torch.cuda.memory_stats() reports it ("<name>.all.current" / ".peak").
struct BytesStat {
  Bytes current{0};
  Bytes peak{0};
};
struct CountStat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
};

// DeviceStats, aggregate over both pools; names as torch.cuda.memory_stats() keys.
struct AllocatorStats {
  BytesStat allocated_bytes;           // handed out and not yet freed by the CPU
  BytesStat active_bytes;              // allocated, or freed but awaiting recorded stream uses
  BytesStat reserved_bytes;            // obtained from the device (cudaMalloc'ed or mapped)
  BytesStat inactive_split_bytes;      // cached pieces of split segments (fragmentation)
  BytesStat requested_bytes;           // sizes as requested, before rounding
  CountStat allocation;                // blocks allocated
  CountStat active;                    // blocks active
  CountStat segment;                   // cudaMalloc'ed segments (expandable mappings not counted)
  CountStat inactive_split;            // cached pieces of split segments
  std::int64_t num_alloc_retries = 0;  // mallocs that freed every cached segment to retry
  std::int64_t num_ooms = 0;           // mallocs that failed
  std::int64_t num_sync_all_streams = 0;  // waits for all recorded stream uses
  std::int64_t num_device_alloc = 0;      // cudaMalloc / cuMemMap calls
  std::int64_t num_device_free = 0;       // cudaFree / cuMemUnmap calls
  Bytes device_alloc_bytes{0};            // their sizes, all together (not a torch stat)
  Bytes device_free_bytes{0};
};

// torch.cuda.memory_snapshot() entries, in address order.
struct BlockInfo {
  std::int64_t address = 0;
  Bytes size{0};
  Bytes requested_size{0};
  bool allocated = false;
  bool active = false;  // allocated, or freed and awaiting a recorded stream use
};
struct SegmentInfo {
  std::int64_t address = 0;
  StreamId stream = 0;
  bool is_large = false;
  bool is_expandable = false;  // then one SegmentInfo per contiguous mapped range
  Bytes total_size{0};
  Bytes allocated_size{0};
  Bytes active_size{0};
  std::vector<BlockInfo> blocks;
};

enum class MallocStatus : std::uint8_t {
  kAllocated,
  // Freeing every cached segment is the last resort, and PyTorch first waits for every
  // recorded stream use (synchronize_and_free_events): the CPU must wait until the GPU has
  // passed them all (complete_stream_use for each), then call malloc again with the same
  // request. Nothing was allocated.
  kNeedsSynchronize,
  kOutOfMemory,
};

// What PyTorch's "CUDA out of memory. Tried to allocate ..." message reports.
struct OutOfMemoryInfo {
  Bytes requested{0};        // the size asked for
  Bytes allocation_size{0};  // what the device was asked for ("Tried to allocate")
  StreamId stream = 0;
  Bytes capacity{0};
  Bytes free{0};  // capacity - reserved
  Bytes reserved{0};
  Bytes allocated{0};
  Bytes largest_cached_block{0};  // what is left cached: pieces of partly used segments
};

// A one-line message in PyTorch's words, with sizes in MiB.
std::string describe(const OutOfMemoryInfo& oom);

struct MallocResult {
  MallocStatus status = MallocStatus::kAllocated;
  std::int64_t address = -1;  // the block, when kAllocated
  Bytes size{0};              // its size: the request rounded, or a whole cached block
  // cudaFree / cuMemUnmap calls this call made.
  std::int32_t device_frees = 0;
  // Of them, cudaFree calls of whole segments (release_block), each of which synchronizes the
  // device (the CUDA runtime's cudaFree is synchronous).
  std::int32_t segment_frees = 0;
  // Bit s: pages of stream s's expandable segment were unmapped, which synchronizes that stream
  // first (ExpandableSegment::unmapHandles, cudaStreamSynchronize(stream_)); a stream past the
  // 64th counts as a segment free, the device synchronizing instead.
  std::uint64_t unmapped_streams = 0;
  OutOfMemoryInfo oom;  // when kOutOfMemory
};

class CachingAllocator {
 public:
  // Precondition: validate(config) is empty (else std::invalid_argument).
  explicit CachingAllocator(const AllocatorConfig& config);

  // DeviceCachingAllocator::malloc for `size` bytes (> 0) used by `stream`.
  MallocResult malloc(Bytes size, StreamId stream);
  // DeviceCachingAllocator::free of the block at `address`. With `has_pending_uses` (the block
  // was record_stream'ed on another stream whose work is still queued) the block stays active
  // and is not reusable until complete_stream_use(address).
  void free(std::int64_t address, bool has_pending_uses);
  // The recorded stream use of a freed block has completed on the GPU (process_events):
  // the block returns to its pool.
  void complete_stream_use(std::int64_t address);
  // torch.cuda.empty_cache(): frees every unsplit cached segment. False (and nothing done)
  // while stream uses are pending: PyTorch would synchronize first.
  bool empty_cache();

  [[nodiscard]] const AllocatorConfig& config() const { return config_; }
  [[nodiscard]] const AllocatorStats& stats() const { return stats_; }
  [[nodiscard]] std::size_t pending_stream_uses() const { return awaiting_uses_.size(); }
  [[nodiscard]] Bytes round_size(Bytes size) const { return memory::round_size(size, config_); }
  // The largest cached (free, mapped) block of any stream and pool (cacheInfo). O(n).
  [[nodiscard]] Bytes largest_cached_block() const;
  // Segments and blocks in address order (DeviceCachingAllocator::snapshot). O(n).
  [[nodiscard]] std::vector<SegmentInfo> snapshot() const;

 private:
  enum class State : std::uint8_t { kCached, kAllocated, kAwaitingUses, kUnmapped };
  struct Block {
    Bytes size{0};
    Bytes requested{0};
    std::int64_t segment = 0;  // the segment's first address: blocks of a segment tile it
    StreamId stream = 0;
    bool small = false;  // pool
    bool expandable = false;
    State state = State::kCached;
    std::int64_t gc_count_base = 0;  // the pool's get_free_block count when cached
  };
  using Blocks = std::map<std::int64_t, Block>;  // by address
  using BlockIt = Blocks::iterator;
  // BlockComparatorSize: best fit is the smallest block on the stream, then the lowest address.
  struct SizeKey {
    StreamId stream;
    std::int64_t size;
    std::int64_t address;
    friend auto operator<=>(const SizeKey&, const SizeKey&) = default;
  };
  // BlockComparatorAddress, for the unmapped parts of expandable segments.
  struct AddressKey {
    StreamId stream;
    std::int64_t address;
    friend auto operator<=>(const AddressKey&, const AddressKey&) = default;
  };
  struct Pool {
    std::set<SizeKey> cached;
    std::set<AddressKey> unmapped;
    std::int64_t get_free_block_calls = 0;
    // The cached blocks that are whole segments (unsplit, not expandable), by address: what
    // release_blocks frees. A cached block is whole or split from when it is cached until it is
    // taken out again (merging and splitting take blocks out first), so an out-of-memory run
    // that retries every allocation frees them without rescanning every cached fragment.
    std::set<std::int64_t> whole_segments;
  };
  struct Request {
    Bytes requested{0};
    Bytes size{0};        // rounded
    Bytes alloc_size{0};  // a new segment's size
    StreamId stream = 0;
    bool small = false;
  };

  // caching_allocator.cpp
  MallocResult finish_malloc(const Request& r);
  MallocResult allocated(BlockIt it) const;
  MallocResult out_of_memory(const Request& r);
  std::optional<BlockIt> get_free_block(const Request& r);
  std::optional<BlockIt> alloc_block(const Request& r, bool is_retry);
  BlockIt alloc_found_block(BlockIt block, const Request& r);
  bool should_split(const Block& block, Bytes size) const;
  void free_block(BlockIt block);
  BlockIt try_merge_blocks(BlockIt dst, std::optional<BlockIt> src, Bytes* subsumed);
  // cache_release.cpp
  bool release_available_cached_blocks(const Request& r);
  void release_cached_blocks();
  void release_blocks(Pool& pool);
  void release_block(BlockIt block);
  void garbage_collect_cached_blocks();
  // set_fraction && garbage_collection_threshold > 0 (AllocatorConfig::allowed_maximum).
  [[nodiscard]] bool collects_garbage() const {
    return config_.allowed_maximum && config_.garbage_collection_threshold > 0.0;
  }
  // expandable_segment.cpp
  std::optional<BlockIt> try_allocate_expandable_block(const Request& r);
  BlockIt find_expandable_block(const Request& r);
  std::optional<BlockIt> map_block(BlockIt block, Bytes size);
  std::optional<BlockIt> unmap_block(BlockIt block);
  [[nodiscard]] Bytes page_size(const Block& block) const;

  std::optional<BlockIt> prev_in_segment(BlockIt it);
  std::optional<BlockIt> next_in_segment(BlockIt it);
  bool is_split(BlockIt it);
  Pool& pool_of(const Block& block) { return block.small ? small_ : large_; }
  void insert_cached(BlockIt it);
  void erase_cached(BlockIt it);
  void insert_unmapped(BlockIt it);
  void erase_unmapped(BlockIt it);
  BlockIt add_block(std::int64_t address, const Block& block);
  static void increase(BytesStat& s, Bytes amount);
  static void increase(CountStat& s, std::int64_t amount);
  static void decrease(BytesStat& s, Bytes amount) { s.current -= amount; }
  static void decrease(CountStat& s, std::int64_t amount) { s.current -= amount; }

  AllocatorConfig config_;
  Bytes max_split_size_;
  Blocks blocks_;
  Pool small_;
  Pool large_;
  std::set<std::int64_t> awaiting_uses_;  // freed blocks awaiting a recorded stream use
  std::optional<Request> awaiting_sync_;  // the malloc that returned kNeedsSynchronize
  std::int64_t next_address_ = 0;         // where the next segment starts
  MallocResult calls_;                    // device calls of the current malloc call
  AllocatorStats stats_;
};

}  // namespace fsdpsim::memory
