// Size rules and validation of the caching allocator's settings. Sources:
// c10/cuda/CUDACachingAllocator.cpp (round_size, roundup_power2_next_division,
// get_allocation_size) and c10/core/AllocatorConfig.cpp (parse* checks, roundup_power2_divisions).
#include "sim/memory/allocator_config.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <sstream>

namespace fsdpsim::memory {
namespace {

// AllocatorConfig::roundup_power2_divisions(size): the interval index is floor(log2(size))
// minus log2(1 MiB), clamped to [0, kRoundupPower2Intervals - 1].
std::int64_t divisions_for(std::uint64_t size, const AllocatorConfig& config) {
  const int log_size = static_cast<int>(std::bit_width(size)) - 1;
  const int interval_start =
      static_cast<int>(std::bit_width(static_cast<std::uint64_t>(kBytesPerMiB))) - 1;
  const int index =
      std::clamp(log_size - interval_start, 0, static_cast<int>(kRoundupPower2Intervals) - 1);
  return config.roundup_power2_divisions[static_cast<std::size_t>(index)];
}

// DeviceCachingAllocator::roundup_power2_next_division: the next multiple of
// power2_floor(size) / divisions (e.g. 5 MiB + 1 with 4 divisions -> 6 MiB).
std::uint64_t roundup_power2_next_division(std::uint64_t size, std::uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  const std::uint64_t power2_floor = std::bit_floor(size);
  const std::uint64_t division = power2_floor >> (static_cast<int>(std::bit_width(divisions)) - 1);
  if (division == 0) return power2_floor << 1;
  const std::uint64_t floor = size & ~(division - 1);
  return floor == size ? size : floor + division;
}

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return multiple * ((value + multiple - 1) / multiple);
}

}  // namespace

std::array<std::int32_t, kRoundupPower2Intervals> uniform_roundup_power2_divisions(
    std::int32_t divisions) {
  std::array<std::int32_t, kRoundupPower2Intervals> all{};
  all.fill(divisions);
  return all;
}

std::array<std::int32_t, kRoundupPower2Intervals> listed_roundup_power2_divisions(
    const std::vector<RoundupPower2Entry>& entries) {
  std::array<std::int32_t, kRoundupPower2Intervals> out{};
  std::size_t last = 0;
  bool first = true;
  for (const RoundupPower2Entry& e : entries) {
    if (!e.start_mib) {
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(std::min(last + 1, out.size())),
                out.end(), e.divisions);
      continue;
    }
    const auto log =
        static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(*e.start_mib)) - 1);
    const std::size_t index = std::min(log, out.size() - 1);
    if (first)
      std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(index), e.divisions);
    first = false;
    out[index] = e.divisions;
    last = index;
  }
  return out;
}

std::string validate(const AllocatorConfig& config) {
  std::ostringstream out;
  const auto problem = [&out](const std::string& text) {
    if (out.tellp() > 0) out << "; ";
    out << text;
  };
  if (config.capacity.value() <= 0) {
    problem("capacity = " + std::to_string(config.capacity.value()) + " B (must be > 0)");
  }
  if (config.device_memory.value() != 0 && config.device_memory < config.capacity) {
    problem("device_memory = " + std::to_string(config.device_memory.value()) +
            " B is below capacity (the device holds what the allocator may use)");
  }
  if (config.allowed_maximum && config.allowed_maximum->value() <= 0) {
    problem("allowed_maximum = " + std::to_string(config.allowed_maximum->value()) +
            " B (must be > 0)");
  }
  if (config.allowed_maximum && config.capacity > *config.allowed_maximum) {
    problem("capacity exceeds allowed_maximum (the memory fraction caps it)");
  }
  // AllocatorConfig::parseMaxSplitSize: "max_split_size_mb too small, must be >= 20".
  const std::int64_t min_split_mb = kLargeBuffer.value() / kBytesPerMiB;
  if (config.max_split_size_mb &&
      (*config.max_split_size_mb < min_split_mb ||
       *config.max_split_size_mb > std::numeric_limits<std::int64_t>::max() / kBytesPerMiB)) {
    problem("max_split_size_mb = " + std::to_string(*config.max_split_size_mb) +
            " (must be >= " + std::to_string(min_split_mb) + ")");
  }
  // AllocatorConfig::parseGarbageCollectionThreshold: "set it in (0.0, 1.0)"; 0 means unset.
  const double t = config.garbage_collection_threshold;
  if (!(t == 0.0 || (t > 0.0 && t < 1.0))) {
    std::ostringstream v;
    v << t;
    problem("garbage_collection_threshold = " + v.str() + " (must be 0 = off or in (0, 1))");
  }
  // AllocatorConfig::parseRoundUpPower2Divisions: "the divisons has to be power of 2 or 0".
  for (std::size_t i = 0; i < config.roundup_power2_divisions.size(); ++i) {
    const std::int32_t d = config.roundup_power2_divisions[i];
    if (d < 0 || (d != 0 && !std::has_single_bit(static_cast<std::uint32_t>(d)))) {
      problem("roundup_power2_divisions[" + std::to_string(i) + "] = " + std::to_string(d) +
              " (must be 0 or a power of two)");
    }
  }
  return out.str();
}

Bytes max_split_size(const AllocatorConfig& config) {
  if (!config.max_split_size_mb) return Bytes(std::numeric_limits<std::int64_t>::max());
  return Bytes(*config.max_split_size_mb * kBytesPerMiB);
}

Bytes round_size(Bytes size, const AllocatorConfig& config) {
  const std::int64_t s = size.value();
  if (s < kMinBlockSize.value()) return kMinBlockSize;
  const std::int64_t divisions = divisions_for(static_cast<std::uint64_t>(s), config);
  if (divisions > 1 && s > kMinBlockSize.value() * divisions) {
    return Bytes(static_cast<std::int64_t>(roundup_power2_next_division(
        static_cast<std::uint64_t>(s), static_cast<std::uint64_t>(divisions))));
  }
  return Bytes(round_up(s, kMinBlockSize.value()));
}

Bytes allocation_size(Bytes rounded_size) {
  if (rounded_size <= kSmallSize) return kSmallBuffer;
  if (rounded_size < kMinLargeAlloc) return kLargeBuffer;
  return Bytes(round_up(rounded_size.value(), kRoundLarge.value()));
}

}  // namespace fsdpsim::memory
