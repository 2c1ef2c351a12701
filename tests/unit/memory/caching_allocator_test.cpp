// Hand-written allocation sequences against PyTorch's CUDACachingAllocator rules; every segment,
// split, reuse and statistic below is computed on paper from c10/cuda/CUDACachingAllocator.cpp.
#include "sim/memory/caching_allocator.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace fsdpsim::memory {
namespace {

constexpr StreamId kCompute = 0;
constexpr StreamId kUnshard = 1;

std::int64_t mb(std::int64_t n) { return n * kBytesPerMiB; }
std::int64_t gb(std::int64_t n) { return n * kBytesPerGiB; }

AllocatorConfig with_capacity(std::int64_t bytes) {
  AllocatorConfig config;
  config.capacity = Bytes(bytes);
  return config;
}

// Allocates and expects success; returns the block's address.
std::int64_t alloc(CachingAllocator& a, std::int64_t bytes, StreamId stream) {
  const MallocResult r = a.malloc(Bytes(bytes), stream);
  EXPECT_EQ(r.status, MallocStatus::kAllocated) << bytes << " B on stream " << stream;
  return r.address;
}

// The snapshot as (address, size, allocated, active) per block, segments flattened.
struct B {
  std::int64_t address;
  std::int64_t size;
  bool allocated;
  bool active;
  friend bool operator==(const B&, const B&) = default;
};
std::vector<B> blocks_of(const SegmentInfo& s) {
  std::vector<B> out;
  for (const BlockInfo& b : s.blocks)
    out.push_back({b.address, b.size.value(), b.allocated, b.active});
  return out;
}

TEST(AllocatorConfig, RoundSizeIsAtLeastAndAMultipleOf512Bytes) {
  const AllocatorConfig c = with_capacity(gb(1));
  EXPECT_EQ(round_size(Bytes(1), c).value(), 512);
  EXPECT_EQ(round_size(Bytes(512), c).value(), 512);
  EXPECT_EQ(round_size(Bytes(513), c).value(), 1024);
  EXPECT_EQ(round_size(Bytes(mb(1) + 1), c).value(), mb(1) + 512);
}

TEST(AllocatorConfig, RoundupPower2DivisionsRoundToTheNextDivision) {
  AllocatorConfig c = with_capacity(gb(1));
  c.roundup_power2_divisions = uniform_roundup_power2_divisions(4);
  EXPECT_EQ(round_size(Bytes(mb(5) + 1), c).value(), mb(6));  // [4, 8) MiB in 1 MiB steps
  EXPECT_EQ(round_size(Bytes(mb(4)), c).value(), mb(4));      // powers of two stay
  EXPECT_EQ(round_size(Bytes(1200), c).value(), 1536);        // <= 512 * 4: plain rounding
  c.roundup_power2_divisions = {};
  c.roundup_power2_divisions[2] = 4;  // only [4 MiB, 8 MiB)
  EXPECT_EQ(round_size(Bytes(mb(5) + 1), c).value(), mb(6));
  EXPECT_EQ(round_size(Bytes(mb(17) + 1), c).value(), mb(17) + 512);
}

// PyTorch's list form, its documentation's example "[256:1,512:2,1024:4,>:8]": the first entry's
// 1 also below 256 MiB, 2 for [512 MiB, 1 GiB), 4 for [1, 2) GiB and 8 from 2 GiB on. Intervals no
// entry reaches stay off ("[4:2,64:4]" leaves [8, 64) MiB at 0); a start past the table's last
// interval is that interval.
TEST(AllocatorConfig, ListedRoundupPower2DivisionsFillTheIntervalsAsPyTorchDoes) {
  const auto listed = [](std::vector<RoundupPower2Entry> entries) {
    return listed_roundup_power2_divisions(entries);
  };
  const auto docs = listed({{256, 1}, {512, 2}, {1024, 4}, {std::nullopt, 8}});
  const std::array<std::int32_t, kRoundupPower2Intervals> expected = {1, 1, 1, 1, 1, 1, 1, 1,
                                                                      1, 2, 4, 8, 8, 8, 8, 8};
  EXPECT_EQ(docs, expected);
  const auto gap = listed({{4, 2}, {64, 4}});
  EXPECT_EQ(gap[0], 2);
  EXPECT_EQ(gap[2], 2);
  EXPECT_EQ(gap[3], 0);
  EXPECT_EQ(gap[6], 4);
  EXPECT_EQ(gap[7], 0);
  EXPECT_EQ(listed({{1 << 20, 2}})[kRoundupPower2Intervals - 1], 2);
  // ">" alone fills from the interval after [1, 2) MiB; before the first named entry it does not
  // take that entry's fill of the intervals below.
  const auto alone = listed({{std::nullopt, 4}});
  EXPECT_EQ(alone[0], 0);
  EXPECT_EQ(alone[1], 4);
  const auto first = listed({{std::nullopt, 4}, {256, 1}});
  EXPECT_EQ(first[0], 1);
  EXPECT_EQ(first[8], 1);
  EXPECT_EQ(first[9], 4);
  AllocatorConfig c = with_capacity(gb(4));
  c.roundup_power2_divisions = docs;
  EXPECT_EQ(round_size(Bytes(mb(600)), c).value(), mb(768));        // [512, 1024) MiB in halves
  EXPECT_EQ(round_size(Bytes(mb(1100)), c).value(), mb(1280));      // [1, 2) GiB in quarters
  EXPECT_EQ(round_size(Bytes(mb(5) + 1), c).value(), mb(5) + 512);  // one division: off
}

TEST(AllocatorConfig, AllocationSizeFollowsGetAllocationSize) {
  EXPECT_EQ(allocation_size(Bytes(mb(1))).value(), mb(2));         // small pool: 2 MiB
  EXPECT_EQ(allocation_size(Bytes(mb(1) + 512)).value(), mb(20));  // < 10 MiB: 20 MiB
  EXPECT_EQ(allocation_size(Bytes(mb(10) - 512)).value(), mb(20));
  EXPECT_EQ(allocation_size(Bytes(mb(10))).value(), mb(10));  // else 2 MiB multiples
  EXPECT_EQ(allocation_size(Bytes(mb(12))).value(), mb(12));
  EXPECT_EQ(allocation_size(Bytes(mb(21))).value(), mb(22));
}

TEST(AllocatorConfig, ValidateRejectsWhatPyTorchRejects) {
  AllocatorConfig c = with_capacity(gb(1));
  EXPECT_EQ(validate(c), "");
  c.max_split_size_mb = 19;
  c.garbage_collection_threshold = 1.0;
  c.roundup_power2_divisions[0] = 3;
  const std::string problems = validate(c);
  EXPECT_NE(problems.find("max_split_size_mb = 19 (must be >= 20)"), std::string::npos);
  EXPECT_NE(problems.find("garbage_collection_threshold = 1"), std::string::npos);
  EXPECT_NE(problems.find("roundup_power2_divisions[0] = 3"), std::string::npos);
  EXPECT_THROW(CachingAllocator{c}, std::invalid_argument);
  EXPECT_NE(validate(with_capacity(0)).find("capacity"), std::string::npos);
}

TEST(CachingAllocator, SmallAndLargeRequestsGetTheirSegmentSizes) {
  CachingAllocator a(with_capacity(gb(1)));
  // One stream each, so no request can reuse another's segment.
  EXPECT_EQ(alloc(a, mb(1), 0), 0);                     // small pool: 2 MiB segment, split
  EXPECT_EQ(alloc(a, mb(1) + 1, 1), mb(2));             // 20 MiB segment, split
  EXPECT_EQ(alloc(a, mb(12), 2), mb(22));               // 12 MiB segment, exact
  const MallocResult big = a.malloc(Bytes(mb(21)), 3);  // 22 MiB segment, 1 MiB left: no split
  EXPECT_EQ(big.address, mb(34));
  EXPECT_EQ(big.size.value(), mb(22));
  const std::vector<SegmentInfo> s = a.snapshot();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_FALSE(s[0].is_large);
  EXPECT_EQ(blocks_of(s[0]),
            (std::vector<B>{{0, mb(1), true, true}, {mb(1), mb(1), false, false}}));
  EXPECT_TRUE(s[1].is_large);
  EXPECT_EQ(s[1].total_size.value(), mb(20));
  EXPECT_EQ(s[1].blocks[0].size.value(), mb(1) + 512);
  EXPECT_EQ(s[1].blocks[0].requested_size.value(), mb(1) + 1);
  EXPECT_EQ(s[2].total_size.value(), mb(12));
  EXPECT_EQ(s[3].total_size.value(), mb(22));
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.reserved_bytes.current.value(), mb(56));
  EXPECT_EQ(st.allocated_bytes.current.value(), mb(36) + 512);
  EXPECT_EQ(st.requested_bytes.current.value(), mb(35) + 1);
  EXPECT_EQ(st.segment.current, 4);
  EXPECT_EQ(st.inactive_split_bytes.current.value(), mb(1) + mb(19) - 512);
  EXPECT_EQ(st.inactive_split.current, 2);
}

TEST(CachingAllocator, TwoSmallLargeAllocationsShareOneSegmentAndCoalesceOnFree) {
  CachingAllocator a(with_capacity(gb(1)));
  const std::int64_t x = alloc(a, mb(4), kCompute);
  const std::int64_t y = alloc(a, mb(4), kCompute);  // the 16 MiB remainder, split again
  EXPECT_EQ(x, 0);
  EXPECT_EQ(y, mb(4));
  ASSERT_EQ(a.snapshot().size(), 1u);
  EXPECT_EQ(blocks_of(a.snapshot()[0]), (std::vector<B>{{0, mb(4), true, true},
                                                        {mb(4), mb(4), true, true},
                                                        {mb(8), mb(12), false, false}}));
  EXPECT_EQ(a.stats().inactive_split_bytes.current.value(), mb(12));
  a.free(x, false);  // a second cached piece
  EXPECT_EQ(a.stats().inactive_split_bytes.current.value(), mb(16));
  EXPECT_EQ(a.stats().inactive_split.current, 2);
  a.free(y, false);  // merges with both neighbours: one free 20 MiB block
  EXPECT_EQ(blocks_of(a.snapshot()[0]), (std::vector<B>{{0, mb(20), false, false}}));
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.inactive_split_bytes.current.value(), 0);
  EXPECT_EQ(st.inactive_split.current, 0);
  EXPECT_EQ(st.allocated_bytes.current.value(), 0);
  EXPECT_EQ(st.allocated_bytes.peak.value(), mb(8));
  EXPECT_EQ(st.reserved_bytes.current.value(), mb(20));
  EXPECT_EQ(st.segment.current, 1);
  EXPECT_EQ(st.num_device_alloc, 1);
}

TEST(CachingAllocator, BestFitTakesTheSmallestFittingBlockThenTheLowestAddress) {
  CachingAllocator a(with_capacity(gb(1)));
  const std::int64_t s30 = alloc(a, mb(30), kCompute);  // segments of 30, 12, 16, 12 MiB
  const std::int64_t s12 = alloc(a, mb(12), kCompute);
  const std::int64_t s16 = alloc(a, mb(16), kCompute);
  const std::int64_t s12b = alloc(a, mb(12), kCompute);
  for (const std::int64_t x : {s30, s16, s12b, s12}) a.free(x, false);
  const MallocResult r11 = a.malloc(Bytes(mb(11)), kCompute);
  EXPECT_EQ(r11.address, mb(30));       // the 12 MiB block at the lower address
  EXPECT_EQ(r11.size.value(), mb(12));  // 1 MiB left is not > kSmallSize: not split
  const MallocResult r14 = a.malloc(Bytes(mb(14)), kCompute);
  EXPECT_EQ(r14.address, mb(42));  // 16 MiB block, split: 2 MiB stays cached
  EXPECT_EQ(r14.size.value(), mb(14));
  EXPECT_EQ(alloc(a, mb(2), kCompute), mb(56));  // the 2 MiB piece before the 12 MiB block
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(70));
  EXPECT_EQ(a.stats().segment.current, 4);
}

TEST(CachingAllocator, ABlockIsReusedOnlyByItsOwnStream) {
  CachingAllocator a(with_capacity(gb(1)));
  const std::int64_t x = alloc(a, mb(4), kCompute);
  a.free(x, false);
  EXPECT_EQ(alloc(a, mb(4), kUnshard), mb(20));  // a new segment for the other stream
  EXPECT_EQ(alloc(a, mb(4), kCompute), 0);       // the cached block, on its stream
  EXPECT_EQ(a.stats().segment.current, 2);
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(40));
}

TEST(CachingAllocator, AFreedBlockWithPendingUsesIsReusedOnlyAfterTheUseCompletes) {
  CachingAllocator a(with_capacity(gb(1)));
  const std::int64_t x = alloc(a, mb(4), kCompute);
  a.free(x, /*has_pending_uses=*/true);
  EXPECT_EQ(a.stats().allocated_bytes.current.value(), 0);
  EXPECT_EQ(a.stats().active_bytes.current.value(), mb(4));
  EXPECT_EQ(a.pending_stream_uses(), 1u);
  EXPECT_EQ(alloc(a, mb(4), kCompute), mb(4));  // not x: it is still in use on the GPU
  EXPECT_EQ(blocks_of(a.snapshot()[0]), (std::vector<B>{{0, mb(4), false, true},
                                                        {mb(4), mb(4), true, true},
                                                        {mb(8), mb(12), false, false}}));
  a.complete_stream_use(x);
  EXPECT_EQ(a.stats().active_bytes.current.value(), mb(4));
  EXPECT_EQ(alloc(a, mb(4), kCompute), 0);  // best fit: x (4 MiB) before the 12 MiB piece
}

TEST(CachingAllocator, EmptyCacheWaitsForPendingUsesThenFreesUnsplitSegments) {
  CachingAllocator a(with_capacity(gb(1)));
  const std::int64_t x = alloc(a, mb(30), kCompute);
  const std::int64_t y = alloc(a, mb(4), kCompute);
  a.free(x, true);
  EXPECT_FALSE(a.empty_cache());
  a.complete_stream_use(x);
  EXPECT_TRUE(a.empty_cache());  // x's segment goes; y's (split, in use) stays
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(20));
  EXPECT_EQ(a.stats().num_device_free, 1);
  a.free(y, false);
}

// FSDP paper Sec. 3.4: all-gathered parameters are allocated on the unshard stream and used by
// the compute stream (record_stream). A CPU running ahead frees them while the compute stream
// still uses them, so the next all-gather cannot reuse the block and cudaMallocs another.
TEST(CachingAllocator, CrossStreamFreesWithoutRateLimitGrowReservedPerInFlightBuffer) {
  CachingAllocator a(with_capacity(gb(80)));
  std::vector<std::int64_t> in_flight;
  for (int unit = 0; unit < 4; ++unit) {
    const std::int64_t x = alloc(a, gb(3), kUnshard);
    EXPECT_EQ(x, gb(3) * unit);            // a new 3 GiB segment every time
    a.free(x, /*has_pending_uses=*/true);  // the compute stream has not run this unit yet
    in_flight.push_back(x);
  }
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), gb(12));
  EXPECT_EQ(a.stats().segment.current, 4);
  EXPECT_EQ(a.stats().active_bytes.peak.value(), gb(12));
  EXPECT_EQ(a.stats().allocated_bytes.peak.value(), gb(3));
  for (const std::int64_t x : in_flight) a.complete_stream_use(x);
  // Activations on the compute stream never reuse the unshard stream's cached 12 GiB.
  EXPECT_EQ(alloc(a, gb(3), kCompute), gb(12));
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), gb(15));
}

TEST(CachingAllocator, RateLimitedCrossStreamFreesKeepTwoSegments) {
  CachingAllocator a(with_capacity(gb(80)));
  // limit_all_gathers: at most two all-gather outputs in flight; before the third, the CPU
  // waits for the oldest free event, so its use completes and the block is back in the pool.
  std::vector<std::int64_t> in_flight{alloc(a, gb(3), kUnshard)};
  for (int unit = 1; unit < 6; ++unit) {
    if (in_flight.size() == 2) {
      a.complete_stream_use(in_flight.front());
      in_flight.erase(in_flight.begin());
    }
    const std::int64_t x = alloc(a, gb(3), kUnshard);
    EXPECT_EQ(x, unit % 2 == 0 ? 0 : gb(3));
    a.free(in_flight.back(), /*has_pending_uses=*/true);
    in_flight.push_back(x);
  }
  EXPECT_EQ(a.stats().reserved_bytes.peak.value(), gb(6));
  EXPECT_EQ(a.stats().num_device_alloc, 2);
  EXPECT_EQ(alloc(a, gb(3), kCompute), gb(6));  // still its own segment
}

TEST(CachingAllocator, FreeingAnotherStreamsCacheFirstWaitsForPendingUses) {
  CachingAllocator a(with_capacity(gb(10)));
  std::vector<std::int64_t> unshard;
  for (int i = 0; i < 3; ++i) unshard.push_back(alloc(a, gb(3), kUnshard));
  for (const std::int64_t x : unshard) a.free(x, true);
  // 9 GiB reserved, 1 GiB free: only freeing the unshard stream's segments makes room, and
  // release_cached_blocks synchronizes on the recorded uses first.
  EXPECT_EQ(a.malloc(Bytes(gb(3)), kCompute).status, MallocStatus::kNeedsSynchronize);
  EXPECT_EQ(a.malloc(Bytes(gb(3)), kCompute).status, MallocStatus::kNeedsSynchronize);
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), gb(9));
  for (const std::int64_t x : unshard) a.complete_stream_use(x);
  const MallocResult r = a.malloc(Bytes(gb(3)), kCompute);
  EXPECT_EQ(r.status, MallocStatus::kAllocated);
  EXPECT_EQ(r.address, gb(9));
  EXPECT_EQ(r.device_frees, 3);
  EXPECT_EQ(r.segment_frees, 3);  // cudaFree of whole segments: each synchronizes the device
  EXPECT_EQ(r.unmapped_streams, 0U);
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_sync_all_streams, 1);
  EXPECT_EQ(st.num_device_free, 3);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(st.reserved_bytes.current.value(), gb(3));
  EXPECT_EQ(st.reserved_bytes.peak.value(), gb(9));
  EXPECT_EQ(st.segment.current, 1);
}

// The limiter-off retry pattern (FSDP paper Sec. 3.4) replayed by hand: a CPU that runs ahead of
// the GPU frees every all-gather output while its compute-stream use is still queued, so no block
// comes back until the allocator synchronizes. DeviceCachingAllocator::malloc: get_free_block
// fails (the blocks await events), alloc_block fails once 5 x 2 GiB fill the 10 GiB, and
// release_cached_blocks -> synchronize_and_free_events waits for every recorded use, then
// release_blocks cudaFrees the 5 unsplit segments and alloc_block(isRetry) cudaMallocs again.
// The cache then refills from empty: with room for n blocks, N run-ahead all-gathers retry
// floor((N - 1) / n) times. Here n = 5, N = 12: retries after units 5 and 10, no more.
TEST(CachingAllocator, RunAheadCrossStreamFreesRetryOncePerCacheFill) {
  CachingAllocator a(with_capacity(gb(10)));
  std::vector<std::int64_t> awaiting;
  std::vector<int> retried_at;
  for (int unit = 0; unit < 12; ++unit) {
    MallocResult r = a.malloc(Bytes(gb(2)), kUnshard);
    if (r.status == MallocStatus::kNeedsSynchronize) {
      // The CPU blocks until the GPU has passed every recorded use (cudaEventSynchronize).
      for (const std::int64_t x : awaiting) a.complete_stream_use(x);
      awaiting.clear();
      r = a.malloc(Bytes(gb(2)), kUnshard);
      retried_at.push_back(unit);
      EXPECT_EQ(r.device_frees, 5) << unit;  // every cached segment, of every stream
    }
    ASSERT_EQ(r.status, MallocStatus::kAllocated) << unit;
    a.free(r.address, /*has_pending_uses=*/true);
    awaiting.push_back(r.address);
  }
  EXPECT_EQ(retried_at, (std::vector<int>{5, 10}));
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.num_alloc_retries, 2);
  EXPECT_EQ(st.num_sync_all_streams, 2);
  EXPECT_EQ(st.num_device_alloc, 12);  // no block was ever reused
  EXPECT_EQ(st.num_device_free, 10);
  EXPECT_EQ(st.reserved_bytes.peak.value(), gb(10));
  EXPECT_EQ(st.reserved_bytes.current.value(), gb(4));  // units 10 and 11
}

// The same twelve all-gathers when the GPU keeps up: the use of unit k - 2 has completed when
// unit k is allocated (process_events at the top of malloc returns the block to the unshard
// pool), so best fit reuses it and the cache never fills.
TEST(CachingAllocator, CrossStreamFreesThatCompleteBeforeTheNextMallocAreReused) {
  CachingAllocator a(with_capacity(gb(10)));
  std::vector<std::int64_t> awaiting;
  for (int unit = 0; unit < 12; ++unit) {
    if (awaiting.size() == 2) {
      a.complete_stream_use(awaiting.front());
      awaiting.erase(awaiting.begin());
    }
    const std::int64_t x = alloc(a, gb(2), kUnshard);
    a.free(x, /*has_pending_uses=*/true);
    awaiting.push_back(x);
  }
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  EXPECT_EQ(a.stats().num_device_alloc, 2);  // two buffers alternate, as with the limiter
  EXPECT_EQ(a.stats().reserved_bytes.peak.value(), gb(4));
}

// release_cached_blocks does not look for a block again after synchronize_and_free_events: the
// block of exactly the requested size and stream that the synchronization returned is cudaFreed
// with the rest, and the retry cudaMallocs a new segment (DeviceCachingAllocator::malloc calls
// alloc_block(params, true, ...) straight after release_cached_blocks).
TEST(CachingAllocator, ARetryFreesTheBlockItsSynchronizationReturnedAndMallocsAgain) {
  CachingAllocator a(with_capacity(gb(5)));
  const std::int64_t x = alloc(a, gb(2), kUnshard);
  const std::int64_t y = alloc(a, gb(2), kCompute);
  a.free(x, /*has_pending_uses=*/true);
  EXPECT_EQ(a.malloc(Bytes(gb(2)), kUnshard).status, MallocStatus::kNeedsSynchronize);
  a.complete_stream_use(x);
  const MallocResult r = a.malloc(Bytes(gb(2)), kUnshard);
  ASSERT_EQ(r.status, MallocStatus::kAllocated);
  EXPECT_EQ(r.address, gb(4));  // a new segment, not x
  EXPECT_EQ(r.device_frees, 1);
  EXPECT_EQ(a.stats().num_device_alloc, 3);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  a.free(y, false);
}

TEST(CachingAllocator, CachedSegmentsWithoutPendingUsesAreFreedWithoutWaiting) {
  CachingAllocator a(with_capacity(gb(10)));
  std::vector<std::int64_t> unshard;
  for (int i = 0; i < 3; ++i) unshard.push_back(alloc(a, gb(3), kUnshard));
  for (const std::int64_t x : unshard) a.free(x, false);
  const MallocResult r = a.malloc(Bytes(gb(3)), kCompute);
  EXPECT_EQ(r.status, MallocStatus::kAllocated);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), gb(3));
}

TEST(CachingAllocator, ARequestLargerThanCapacityIsOutOfMemoryWithTheNumbers) {
  CachingAllocator a(with_capacity(gb(10)));
  alloc(a, gb(1), kCompute);
  const MallocResult r = a.malloc(Bytes(gb(12)), kCompute);
  ASSERT_EQ(r.status, MallocStatus::kOutOfMemory);
  EXPECT_EQ(r.oom.requested.value(), gb(12));
  EXPECT_EQ(r.oom.allocation_size.value(), gb(12));
  EXPECT_EQ(r.oom.capacity.value(), gb(10));
  EXPECT_EQ(r.oom.reserved.value(), gb(1));
  EXPECT_EQ(r.oom.allocated.value(), gb(1));
  EXPECT_EQ(r.oom.free.value(), gb(9));
  EXPECT_EQ(r.oom.largest_cached_block.value(), 0);
  EXPECT_EQ(a.stats().num_ooms, 1);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);  // PyTorch counts the last, failed, attempt
  EXPECT_NE(describe(r.oom).find("Tried to allocate 12288.00 MiB"), std::string::npos);
  EXPECT_NE(describe(r.oom).find("9216.00 MiB is free"), std::string::npos);
}

TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksWholeAndForLargeRequests) {
  AllocatorConfig c = with_capacity(gb(1));
  c.max_split_size_mb = 40;
  CachingAllocator a(c);
  a.free(alloc(a, mb(100), kCompute), false);      // an oversize cached block at 0
  EXPECT_EQ(alloc(a, mb(4), kCompute), mb(100));   // not split from it: a new 20 MiB segment
  EXPECT_EQ(alloc(a, mb(70), kCompute), mb(120));  // would waste >= 20 MiB: a new segment
  const MallocResult r = a.malloc(Bytes(mb(90)), kCompute);  // wastes 10 MiB: taken whole
  EXPECT_EQ(r.address, 0);
  EXPECT_EQ(r.size.value(), mb(100));
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(190));
  EXPECT_EQ(a.stats().allocated_bytes.current.value(), mb(174));
}

TEST(CachingAllocator, ReleaseAvailableCachedBlocksFreesAnOversizeBlockWithoutSynchronizing) {
  AllocatorConfig c = with_capacity(mb(150));
  c.max_split_size_mb = 40;
  CachingAllocator a(c);
  a.free(alloc(a, mb(100), kCompute), false);
  a.free(alloc(a, mb(20), kUnshard), true);  // a pending use elsewhere
  const MallocResult r = a.malloc(Bytes(mb(60)), kCompute);
  EXPECT_EQ(r.status, MallocStatus::kAllocated);  // freeing the 100 MiB block was enough
  EXPECT_EQ(r.device_frees, 1);
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  EXPECT_EQ(a.stats().num_sync_all_streams, 0);
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(80));
}

// With a memory fraction (set_per_process_memory_fraction) capping the allocator at 100 MiB.
TEST(CachingAllocator, GarbageCollectionFreesTheOldestCachedBlocksAboveTheThreshold) {
  AllocatorConfig c = with_capacity(mb(100));
  c.allowed_maximum = Bytes(mb(100));
  c.garbage_collection_threshold = 0.5;
  CachingAllocator a(c);
  a.free(alloc(a, mb(30), kCompute), false);  // cached after 1 get_free_block call
  a.free(alloc(a, mb(40), kCompute), false);  // cached after 2
  // Third call: ages 2 and 1, mean 1.5; 70 MiB reserved > 50 MiB: the 30 MiB block goes.
  EXPECT_EQ(alloc(a, mb(50), kCompute), mb(70));
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(90));
  EXPECT_EQ(a.stats().num_device_free, 1);
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  ASSERT_EQ(a.snapshot().size(), 2u);
  EXPECT_EQ(a.snapshot()[0].address, mb(30));

  // Without the fraction the threshold does nothing, as in PyTorch (DeviceCachingAllocator::
  // malloc collects only when set_fraction): the retry path frees both cached blocks.
  c.allowed_maximum.reset();
  CachingAllocator no_gc(c);
  no_gc.free(alloc(no_gc, mb(30), kCompute), false);
  no_gc.free(alloc(no_gc, mb(40), kCompute), false);
  alloc(no_gc, mb(50), kCompute);
  EXPECT_EQ(no_gc.stats().num_alloc_retries, 1);
  EXPECT_EQ(no_gc.stats().reserved_bytes.current.value(), mb(50));
}

// A memory fraction caps what the allocator may reserve below what the device has: past it the
// allocation fails as a cudaMalloc out of memory would, through the same retry path.
TEST(CachingAllocator, MemoryFractionCapsTheSegmentsLikeTheDevicesCapacity) {
  AllocatorConfig c = with_capacity(mb(60));
  c.allowed_maximum = Bytes(mb(60));  // a 100 MiB device at fraction 0.6
  CachingAllocator a(c);
  a.free(alloc(a, mb(40), kUnshard), false);
  alloc(a, mb(30), kCompute);  // 40 + 30 > 60: the other stream's cached 40 MiB goes
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(30));
  EXPECT_EQ(a.malloc(Bytes(mb(40)), kUnshard).status, MallocStatus::kOutOfMemory);

  c.allowed_maximum = Bytes(mb(50));  // capacity above the fraction's maximum: inconsistent
  EXPECT_NE(validate(c).find("capacity exceeds allowed_maximum"), std::string::npos);
}

// Under a memory fraction, alloc_block checks the request's whole allocation size against it
// before an expandable segment maps anything: 60 MiB cached and mapped plus a 70 MiB request
// passes 100 MiB, although growing the cached block would map only one more 20 MiB page. The
// cached pages are unmapped and the request retried; without the fraction it grows in place.
TEST(CachingAllocator, MemoryFractionChecksTheWholeRequestBeforeMappingPages) {
  const auto run = [](bool fraction) {
    AllocatorConfig c = with_capacity(mb(100));
    c.expandable_segments = true;
    if (fraction) c.allowed_maximum = Bytes(mb(100));
    CachingAllocator a(c);
    a.free(alloc(a, mb(60), kCompute), false);
    alloc(a, mb(70), kCompute);
    return a.stats();
  };
  const AllocatorStats in_place = run(false);
  EXPECT_EQ(in_place.num_alloc_retries, 0);
  EXPECT_EQ(in_place.reserved_bytes.current.value(), mb(80));
  const AllocatorStats capped = run(true);
  EXPECT_EQ(capped.num_alloc_retries, 1);
  EXPECT_EQ(capped.reserved_bytes.current.value(), mb(80));  // unmapped, then 4 pages again
}

// Two 40 MiB tensors, freed, then two 30 MiB and one 20 MiB: with fixed segments the 10 MiB
// remainders cannot combine; one expandable segment keeps them contiguous.
TEST(CachingAllocator, ExpandableSegmentsAvoidTheFragmentationThatRunsOutOfMemory) {
  const auto run = [](bool expandable) {
    AllocatorConfig c = with_capacity(mb(90));
    c.expandable_segments = expandable;
    CachingAllocator a(c);
    const std::int64_t x = alloc(a, mb(40), kCompute);
    const std::int64_t y = alloc(a, mb(40), kCompute);
    a.free(x, false);
    a.free(y, false);
    EXPECT_EQ(alloc(a, mb(30), kCompute), 0);
    EXPECT_EQ(alloc(a, mb(30), kCompute), expandable ? mb(30) : mb(40));
    return std::pair{a.malloc(Bytes(mb(20)), kCompute), a};
  };
  const auto [fixed, fixed_allocator] = run(false);
  ASSERT_EQ(fixed.status, MallocStatus::kOutOfMemory);
  EXPECT_EQ(fixed.oom.reserved.value(), mb(80));
  EXPECT_EQ(fixed.oom.allocated.value(), mb(60));
  EXPECT_EQ(fixed.oom.largest_cached_block.value(), mb(10));
  EXPECT_EQ(fixed_allocator.stats().inactive_split_bytes.current.value(), mb(20));

  const auto [grown, grown_allocator] = run(true);
  ASSERT_EQ(grown.status, MallocStatus::kAllocated);
  EXPECT_EQ(grown.address, mb(60));
  const AllocatorStats& st = grown_allocator.stats();
  EXPECT_EQ(st.reserved_bytes.current.value(), mb(80));  // 4 pages of 20 MiB
  EXPECT_EQ(st.num_device_alloc, 2);
  EXPECT_EQ(st.segment.current, 0);  // PyTorch counts cudaMalloc segments only
  EXPECT_EQ(st.inactive_split_bytes.current.value(), 0);
  const std::vector<SegmentInfo> s = grown_allocator.snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].is_expandable);
  EXPECT_EQ(blocks_of(s[0]), (std::vector<B>{{0, mb(30), true, true},
                                             {mb(30), mb(30), true, true},
                                             {mb(60), mb(20), true, true}}));
}

TEST(CachingAllocator, ExpandableSegmentsUnmapEmptyPagesForAnotherStream) {
  AllocatorConfig c = with_capacity(mb(100));
  c.expandable_segments = true;
  CachingAllocator a(c);
  a.free(alloc(a, mb(60), kCompute), false);  // 3 pages mapped, cached on the compute stream
  // The unshard stream's own segment starts after the compute segment's 120 MiB of address
  // space (6 pages cover capacity * 9/8); mapping 3 pages needs the compute pages unmapped.
  const MallocResult r = a.malloc(Bytes(mb(60)), kUnshard);
  ASSERT_EQ(r.status, MallocStatus::kAllocated);
  EXPECT_EQ(r.address, mb(120));
  EXPECT_EQ(r.device_frees, 1);
  // An unmap, not a cudaFree: it synchronizes the compute stream, whose segment it was.
  EXPECT_EQ(r.segment_frees, 0);
  EXPECT_EQ(r.unmapped_streams, std::uint64_t{1} << kCompute);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().reserved_bytes.current.value(), mb(60));
  const std::vector<SegmentInfo> s = a.snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].stream, kUnshard);
}

// The address space of an expandable segment is 9/8 of the device's total memory, not of what
// the process may use (find_expandable_block): its unmapped tail counts in the best fit
// (get_free_block's expandable_size), so a small request goes to a cached block that cannot grow
// as far as the segment's last one can.
TEST(CachingAllocator, AnExpandableSegmentSpansNineEighthsOfTheDevice) {
  const auto first_fit_of_five = [](std::int64_t device) {
    AllocatorConfig c = with_capacity(mb(100));
    c.expandable_segments = true;
    c.device_memory = Bytes(device);
    CachingAllocator a(c);
    const std::int64_t first = alloc(a, mb(30), kCompute);
    EXPECT_EQ(alloc(a, mb(10), kCompute), mb(30));
    EXPECT_EQ(alloc(a, mb(50), kCompute), mb(40));  // maps pages to 100 MiB: [90, 100) cached
    a.free(first, false);
    return alloc(a, mb(5), kCompute);
  };
  // 1000 MiB of device: a tail of 1025 MiB makes [90, 100) "larger" than [0, 30).
  EXPECT_EQ(first_fit_of_five(mb(1000)), 0);
  // Sized from the 100 MiB the process may use, the tail is one page and [90, 100) fits best.
  EXPECT_EQ(first_fit_of_five(mb(100)), mb(90));
  AllocatorConfig below = with_capacity(mb(100));
  below.device_memory = Bytes(mb(50));
  EXPECT_NE(validate(below).find("device_memory"), std::string::npos);
}

// What the snapshot shows must add up to the statistics, and cached neighbours are coalesced.
void expect_consistent(const CachingAllocator& a) {
  std::int64_t reserved = 0, allocated = 0, active = 0, inactive_split = 0;
  for (const SegmentInfo& s : a.snapshot()) {
    reserved += s.total_size.value();
    allocated += s.allocated_size.value();
    active += s.active_size.value();
    for (std::size_t i = 0; i < s.blocks.size(); ++i) {
      const bool cached = !s.blocks[i].active;
      if (cached && s.blocks.size() > 1 && !s.is_expandable)
        inactive_split += s.blocks[i].size.value();
      if (i > 0) {
        ASSERT_FALSE(cached && !s.blocks[i - 1].active) << "uncoalesced at " << s.blocks[i].address;
      }
    }
  }
  const AllocatorStats& st = a.stats();
  EXPECT_EQ(st.reserved_bytes.current.value(), reserved);
  EXPECT_EQ(st.allocated_bytes.current.value(), allocated);
  EXPECT_EQ(st.active_bytes.current.value(), active);
  EXPECT_EQ(st.inactive_split_bytes.current.value(), inactive_split);
  EXPECT_LE(reserved, a.config().capacity.value());
}

TEST(CachingAllocator, RandomSequencesKeepStatisticsConsistentWithTheSnapshot) {
  std::uint64_t state = 12345;  // our own generator: the same sequence on every platform
  const auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int variant = 0; variant < 4; ++variant) {
    AllocatorConfig c = with_capacity(mb(400));
    if (variant == 1) c.max_split_size_mb = 24;
    if (variant == 2) c.expandable_segments = true;
    if (variant == 3) {
      c.allowed_maximum = c.capacity;
      c.garbage_collection_threshold = 0.6;
    }
    CachingAllocator a(c);
    std::vector<std::int64_t> live;
    std::vector<std::int64_t> pending;
    for (int step = 0; step < 3000; ++step) {
      const std::uint64_t op = next(10);
      if (op < 5) {
        const std::int64_t size =
            next(2) == 0 ? 1 + static_cast<std::int64_t>(next(static_cast<std::uint64_t>(mb(1))))
                         : 1 + static_cast<std::int64_t>(next(static_cast<std::uint64_t>(mb(48))));
        const auto stream = static_cast<StreamId>(next(2));
        MallocResult r = a.malloc(Bytes(size), stream);
        if (r.status == MallocStatus::kNeedsSynchronize) {
          for (const std::int64_t x : pending) a.complete_stream_use(x);
          pending.clear();
          r = a.malloc(Bytes(size), stream);
        }
        ASSERT_NE(r.status, MallocStatus::kNeedsSynchronize);
        if (r.status == MallocStatus::kAllocated) live.push_back(r.address);
      } else if (op < 9 && !live.empty()) {
        const std::size_t i = next(live.size());
        const bool uses = next(3) == 0;
        a.free(live[i], uses);
        if (uses) pending.push_back(live[i]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (!pending.empty()) {
        a.complete_stream_use(pending.front());
        pending.erase(pending.begin());
      }
      expect_consistent(a);
      if (testing::Test::HasFailure()) return;
    }
    EXPECT_GT(a.stats().num_alloc_retries, 0) << "variant " << variant;
  }
}

TEST(CachingAllocator, MisuseIsAnInternalError) {
  CachingAllocator a(with_capacity(gb(10)));
  EXPECT_THROW(a.malloc(Bytes(0), kCompute), std::invalid_argument);
  EXPECT_THROW(a.free(12345, false), std::logic_error);
  const std::int64_t x = alloc(a, gb(6), kUnshard);
  EXPECT_THROW(a.complete_stream_use(x), std::logic_error);  // not freed with pending uses
  a.free(x, true);
  EXPECT_EQ(a.malloc(Bytes(gb(6)), kCompute).status, MallocStatus::kNeedsSynchronize);
  EXPECT_THROW(a.malloc(Bytes(gb(1)), kCompute), std::logic_error);  // not the same request
}

}  // namespace
}  // namespace fsdpsim::memory
