#include "sim/engine/name_table.hpp"

#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

namespace fsdpsim::engine {
namespace {

// A name's hash, 8 bytes at a time: names are ~30-60 bytes, and libstdc++'s std::hash (murmur)
// took 6 % of a simulation's instructions here (callgrind). Each word is folded in by a
// multiply; the splitmix64 finalizer (Steele, Lea and Flood, OOPSLA 2014) then spreads the bits
// over the low ones that pick the slot.
std::size_t name_hash(std::string_view name) {
  constexpr std::uint64_t kOdd = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio
  std::uint64_t h = name.size() * kOdd;
  std::size_t i = 0;
  for (; i + 8 <= name.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, name.data() + i, 8);
    h = (h ^ word) * kOdd;
  }
  std::uint64_t tail = 0;
  if (i < name.size()) std::memcpy(&tail, name.data() + i, name.size() - i);
  h = (h ^ tail) * kOdd;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
  return static_cast<std::size_t>(h ^ (h >> 31));
}

}  // namespace

NameTable::NameTable(std::initializer_list<std::string_view> names) {
  for (const std::string_view name : names) intern(name);
}

std::uint32_t NameTable::intern(std::string_view name) {
  const std::size_t hash = name_hash(name);
  // At most half full, so a probe ends at an empty slot.
  if (2 * (ends_.size() + 1) > slots_.size()) grow_slots();
  const std::size_t mask = slots_.size() - 1;
  std::size_t slot = hash & mask;
  for (; slots_[slot] != kEmptySlot; slot = (slot + 1) & mask) {
    const std::uint32_t index = slots_[slot];
    if (hashes_[index] == hash && (*this)[index] == name) return index;
  }
  if (name.size() > std::numeric_limits<std::uint32_t>::max() - chars_.size()) {
    throw std::length_error("engine: a program's names exceed 4 GiB");
  }
  if (ends_.size() >= kEmptySlot) {
    throw std::length_error("engine: a program has more than 2^32 - 1 distinct names");
  }
  const auto index = static_cast<std::uint32_t>(ends_.size());
  chars_.append(name);
  ends_.push_back(static_cast<std::uint32_t>(chars_.size()));
  hashes_.push_back(hash);
  slots_[slot] = index;
  return index;
}

void NameTable::grow_slots() {
  std::vector<std::uint32_t> slots(slots_.empty() ? 64 : 2 * slots_.size(), kEmptySlot);
  const std::size_t mask = slots.size() - 1;
  for (std::uint32_t index = 0; index < ends_.size(); ++index) {
    std::size_t slot = hashes_[index] & mask;
    while (slots[slot] != kEmptySlot) slot = (slot + 1) & mask;
    slots[slot] = index;
  }
  slots_ = std::move(slots);
}

}  // namespace fsdpsim::engine
