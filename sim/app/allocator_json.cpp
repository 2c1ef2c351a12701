#include "sim/app/allocator_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/app/config_error.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/size_bounds.hpp"

namespace fsdpsim::app {
namespace {

bool power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The most divisions fsdpsim holds per interval: the largest power of two of an int32.
constexpr std::int64_t kMaxDivisions = std::int64_t{1} << 30;

// A division count PyTorch takes (a power of two; 0, off, in the list form) that fsdpsim holds.
bool divisions_ok(std::int64_t v, bool zero_allowed) {
  return (zero_allowed && v == 0) || (power_of_two(v) && v <= kMaxDivisions);
}

// A whole number of at most 18 digits (it fits 64 bits) at `text[pos]`, advancing `pos`; nullopt
// if none.
std::optional<std::int64_t> read_count(std::string_view text, std::size_t& pos) {
  const std::size_t start = pos;
  while (pos < text.size() && pos - start < 18 && text[pos] >= '0' && text[pos] <= '9') ++pos;
  if (pos == start || (pos < text.size() && text[pos] >= '0' && text[pos] <= '9'))
    return std::nullopt;
  std::int64_t v = 0;
  for (std::size_t i = start; i < pos; ++i) v = 10 * v + (text[i] - '0');
  return v;
}

// PYTORCH_CUDA_ALLOC_CONF's value, whitespace ignored as PyTorch's tokenizer ignores it: a number
// of divisions for every interval, or the list form "[256:1,512:2,1024:4,>:8]" (interval start in
// MiB, a power of two, or ">": divisions, 0 or a power of two). Returns what is wrong, or an empty
// string with `out` filled.
std::string parse_divisions(std::string text,
                            std::array<std::int32_t, memory::kRoundupPower2Intervals>& out) {
  std::erase_if(text, [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  const std::string power = fmt::format("a power of two up to {}", kMaxDivisions);
  if (text.empty() || text.front() != '[') {
    std::size_t pos = 0;
    const std::optional<std::int64_t> n = read_count(text, pos);
    if (!n || pos != text.size() || !divisions_ok(*n, /*zero_allowed=*/false))
      return fmt::format("{} or a list \"[MiB:divisions, ..., >:divisions]\"", power);
    out = memory::uniform_roundup_power2_divisions(static_cast<std::int32_t>(*n));
    return "";
  }
  if (text.back() != ']') return "a list in brackets, \"[MiB:divisions, ..., >:divisions]\"";
  std::vector<memory::RoundupPower2Entry> entries;
  std::size_t pos = 1;
  while (pos + 1 < text.size()) {
    memory::RoundupPower2Entry e;
    if (text[pos] == '>') {
      ++pos;
    } else {
      const std::optional<std::int64_t> start = read_count(text, pos);
      if (!start || !power_of_two(*start))
        return "each interval's start in MiB, a power of two, or \">\"";
      e.start_mib = start;
    }
    if (pos >= text.size() || text[pos] != ':') return "\":\" after each interval's start";
    ++pos;
    const std::optional<std::int64_t> divisions = read_count(text, pos);
    if (!divisions || !divisions_ok(*divisions, /*zero_allowed=*/true))
      return fmt::format("each interval's divisions, 0 (off) or {}", power);
    e.divisions = static_cast<std::int32_t>(*divisions);
    entries.push_back(e);
    if (pos + 1 < text.size() && text[pos++] != ',') return "\",\" between the entries";
  }
  // PyTorch takes "[]" and leaves every interval off, as no setting does.
  if (entries.empty()) return "at least one entry (\"[]\" is no setting: leave the key out)";
  out = memory::listed_roundup_power2_divisions(entries);
  return "";
}

}  // namespace

std::optional<memory::AllocatorConfig> allocator_from_json(const nlohmann::json* value,
                                                           const std::string& file, Bytes usable,
                                                           Bytes device_total) {
  memory::AllocatorConfig config;
  config.capacity = usable;
  config.device_memory = device_total;
  if (value == nullptr) return config;
  JsonObjectReader r(*value, file, "/allocator");
  const bool enabled = r.boolean("enabled", true);
  if (r.has("memory_fraction")) {
    // torch.cuda.set_per_process_memory_fraction: the allocator refuses to hold more than
    // fraction x the device's total memory (DeviceCachingAllocator::setMemoryFraction,
    // allowed_memory_maximum); a request past it fails like a cudaMalloc out of memory, through
    // the same free-the-cache-and-retry path.
    const double fraction = r.fraction("memory_fraction");
    if (!enabled) {
      throw ConfigError(file, "/allocator/memory_fraction",
                        "memory_fraction caps the caching allocator: it needs the allocator "
                        "model (\"enabled\": true), found \"enabled\": false");
    }
    // A fraction of 1 sets no maximum (setMemoryFraction: allowed_memory_maximum stays empty
    // unless fraction < 1), so it neither caps nor turns garbage collection on.
    if (fraction < 1.0) {
      config.allowed_maximum =
          Bytes{static_cast<std::int64_t>(fraction * static_cast<double>(device_total.value()))};
      // Below one 2 MiB segment (the small pool's, kSmallBuffer in CUDACachingAllocator.cpp) the
      // allocator could hold nothing at all.
      constexpr std::int64_t kSmallestSegment = std::int64_t{2} << 20;
      if (config.allowed_maximum->value() < kSmallestSegment) {
        throw ConfigError(
            file, "/allocator/memory_fraction",
            fmt::format("{:g} of the device's {} bytes leaves {} bytes: expected a "
                        "fraction that leaves the allocator at least one 2 MiB segment",
                        fraction, device_total.value(), config.allowed_maximum->value()));
      }
      config.capacity = std::min(usable, *config.allowed_maximum);
    }
  }
  if (r.has("max_split_size_mb")) {
    config.max_split_size_mb = r.positive_int_at_most("max_split_size_mb", size_bounds::kMemoryMiB);
    // AllocatorConfig::parseMaxSplitSize: "max_split_size_mb too small, must be >= 20" (one
    // kLargeBuffer).
    const std::int64_t min_split_mb = memory::kLargeBuffer.value() / kBytesPerMiB;
    if (*config.max_split_size_mb < min_split_mb) {
      throw ConfigError(
          file, "/allocator/max_split_size_mb",
          fmt::format("expected at least {} (PyTorch's parser refuses less), found {}",
                      min_split_mb, *config.max_split_size_mb));
    }
  }
  config.expandable_segments = r.boolean("expandable_segments", false);
  if (r.has("garbage_collection_threshold")) {
    // PyTorch's parser (CUDAAllocatorConfig::parseGarbageCollectionThreshold) refuses values
    // outside (0, 1).
    const nlohmann::json& v = *r.child("garbage_collection_threshold");
    if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() < 1.0)) {
      throw ConfigError(
          file, "/allocator/garbage_collection_threshold",
          fmt::format("expected a number in (0, 1), found {}", describe_json_type(v)));
    }
    config.garbage_collection_threshold = v.get<double>();
  }
  if (const nlohmann::json* v = r.child("roundup_power2_divisions"); v != nullptr) {
    // PyTorch's parser (parseRoundUpPower2Divisions) takes a power of two for every interval, or
    // per-interval divisions in brackets; a JSON number is the first form, a string either.
    const std::string key = "/allocator/roundup_power2_divisions";
    if (v->is_string()) {
      if (const std::string problem =
              parse_divisions(v->get<std::string>(), config.roundup_power2_divisions);
          !problem.empty()) {
        throw ConfigError(file, key,
                          fmt::format("expected {}, found \"{}\"", problem, v->get<std::string>()));
      }
    } else if (const std::optional<std::int64_t> n = whole_number(*v);
               n && divisions_ok(*n, /*zero_allowed=*/false)) {
      config.roundup_power2_divisions =
          memory::uniform_roundup_power2_divisions(static_cast<std::int32_t>(*n));
    } else {
      throw ConfigError(file, key,
                        fmt::format("expected a power of two (1, 2, 4, ...) up to {} or a list "
                                    "\"[MiB:divisions, ..., >:divisions]\", found {}",
                                    kMaxDivisions, describe_json_type(*v)));
    }
  }
  r.finish();
  if (!enabled) {
    // Every other key configures the model "enabled": false turns off (memory_fraction is
    // refused above with its own reason).
    for (const auto& [key, v] : value->items()) {
      if (key == "enabled") continue;
      throw ConfigError(file, "/allocator/" + key,
                        "configures the caching allocator model, which \"enabled\": false "
                        "turns off; it would do nothing");
    }
  }
  if (config.garbage_collection_threshold > 0.0 && config.expandable_segments) {
    // garbage_collect_cached_blocks frees unsplit cached blocks; an expandable segment's are
    // never freed that way (they are unmapped only by release_cached_blocks).
    throw ConfigError(file, "/allocator/garbage_collection_threshold",
                      "frees whole cached segments, and expandable_segments makes none: it "
                      "would do nothing");
  }
  if (config.garbage_collection_threshold > 0.0 && !config.allowed_maximum) {
    // CUDACachingAllocator.cpp: garbage_collect_cached_blocks runs only when set_fraction
    // (torch.cuda.set_per_process_memory_fraction) is set; PyTorch accepts the option silently.
    throw ConfigError(file, "/allocator/garbage_collection_threshold",
                      "PyTorch applies it only under a memory fraction below 1 "
                      "(set_per_process_memory_fraction): set memory_fraction too, or it would "
                      "do nothing");
  }
  if (const std::string problem = memory::validate(config); !problem.empty()) {
    throw ConfigError(file, "/allocator", problem);
  }
  if (!enabled) return std::nullopt;
  return config;
}

}  // namespace fsdpsim::app
