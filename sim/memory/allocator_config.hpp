// The caching allocator's settings (PYTORCH_CUDA_ALLOC_CONF, parsed by PyTorch in
// c10/core/AllocatorConfig.cpp) and its size rules (c10/cuda/CUDACachingAllocator.cpp).
// A typed, validated spec: nothing here parses strings; sim/app maps JSON keys onto it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/units/units.hpp"

namespace fsdpsim::memory {

// CUDACachingAllocator.cpp, constants at the top of the file (PyTorch's "MB" is MiB).
inline constexpr Bytes kMinBlockSize{512};                 // every size rounds up to 512 B
inline constexpr Bytes kSmallSize{kBytesPerMiB};           // largest "small pool" request
inline constexpr Bytes kSmallBuffer{2 * kBytesPerMiB};     // small requests share 2 MiB segments
inline constexpr Bytes kMinLargeAlloc{10 * kBytesPerMiB};  // below this, large requests get ...
inline constexpr Bytes kLargeBuffer{20 * kBytesPerMiB};    // ... a 20 MiB segment
inline constexpr Bytes kRoundLarge{2 * kBytesPerMiB};      // larger ones round up to 2 MiB

// AllocatorConfig::roundup_power2_divisions_: one entry per power-of-two interval from
// [1 MiB, 2 MiB) (index 0; smaller sizes use it too) to [32 GiB, ...) (index 15).
inline constexpr std::size_t kRoundupPower2Intervals = 16;

struct AllocatorConfig {
  // Bytes the allocator can obtain from the device (cudaMalloc / cuMemCreate fail past it):
  // usable HBM after the CUDA context and library workspaces (GpuSpec::usable_memory()).
  Bytes capacity{0};
  // The device's total memory (cudaDeviceProp::totalGlobalMem), which sizes an expandable
  // segment's address space; 0 = `capacity`.
  Bytes device_memory{0};
  // max_split_size_mb (MiB): cached blocks of at least this size are never split, and serve
  // only requests of at least this size. nullopt = unlimited (PyTorch's default). >= 20.
  std::optional<std::int64_t> max_split_size_mb;
  // expandable_segments:True: one segment per stream and pool that grows page by page.
  bool expandable_segments = false;
  // torch.cuda.set_per_process_memory_fraction: fraction x the device's total memory
  // (DeviceCachingAllocator::allowed_memory_maximum); a segment past it fails as a cudaMalloc
  // out of memory would, so `capacity` is already at most this. nullopt = never set.
  std::optional<Bytes> allowed_maximum;
  // garbage_collection_threshold: 0 = off; in (0, 1): when reserved memory exceeds this
  // fraction of `allowed_maximum`, a cache miss first frees the oldest unsplit cached blocks.
  // PyTorch collects only when a memory fraction was set (DeviceCachingAllocator::malloc:
  // set_fraction && threshold > 0), so without `allowed_maximum` it does nothing.
  double garbage_collection_threshold = 0.0;
  // roundup_power2_divisions per interval (see kRoundupPower2Intervals); 0 or 1 = off, else a
  // power of two: sizes round up to the next 1/N step between two powers of two.
  std::array<std::int32_t, kRoundupPower2Intervals> roundup_power2_divisions{};
};

// The same number of divisions for every interval (the PYTORCH_CUDA_ALLOC_CONF form
// "roundup_power2_divisions:4").
std::array<std::int32_t, kRoundupPower2Intervals> uniform_roundup_power2_divisions(
    std::int32_t divisions);

// One entry of the list form "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]": the divisions
// of the interval that starts at `start_mib` (a power of two, MiB), or, for ">" (nullopt), of
// every interval after the one the entry before it named.
struct RoundupPower2Entry {
  std::optional<std::int64_t> start_mib;
  std::int32_t divisions = 0;
};

// The divisions per interval the list form sets, as AcceleratorAllocatorConfig::
// parseRoundUpPower2Divisions (c10/core/AllocatorConfig.cpp) fills them: the interval of
// log2(start_mib), clamped to the table; the first entry's value also for every interval below
// it; ">" for every interval after the last one named; intervals no entry reaches stay 0 (off).
// Preconditions: each start_mib a power of two.
std::array<std::int32_t, kRoundupPower2Intervals> listed_roundup_power2_divisions(
    const std::vector<RoundupPower2Entry>& entries);

// Empty when `config` is consistent, else what is wrong (the checks of PyTorch's parser:
// max_split_size_mb >= 20, threshold in (0, 1), divisions 0 or a power of two; capacity > 0).
std::string validate(const AllocatorConfig& config);

// max_split_size_mb in bytes; "unlimited" is the largest Bytes value.
Bytes max_split_size(const AllocatorConfig& config);

// DeviceCachingAllocator::round_size: at least kMinBlockSize, then a multiple of 512 B, or the
// next power-of-two division when roundup_power2_divisions applies to the size's interval.
// Precondition: size > 0.
Bytes round_size(Bytes size, const AllocatorConfig& config);

// DeviceCachingAllocator::get_allocation_size: the segment cudaMalloc'ed for a rounded request
// that no cached block serves: 2 MiB for the small pool, 20 MiB below 10 MiB, else rounded up
// to a multiple of 2 MiB.
Bytes allocation_size(Bytes rounded_size);

// DeviceCachingAllocator::get_pool: requests up to kSmallSize use the small pool.
constexpr bool is_small_request(Bytes rounded_size) { return rounded_size <= kSmallSize; }

}  // namespace fsdpsim::memory
