// The names of a program's ops, tensors and CPU steps, each stored once.
//
// A large model's step launches ~10^5 ops, and most names ("blocks.11.bwd.mlp.fc1.grad_input")
// are too long for std::string's small-string buffer: one heap string per name cost ~7 % of a
// simulation's CPU time in allocations, page faults and frees (perf, reports/performance.md).
// Here a name is a range of one growing buffer, and every micro-batch and step issues the same
// names again, so a name already in the table gets its first index back: the table grows with
// the distinct names (one micro-batch's), not with the ops. A name reads as a std::string_view
// valid while the table lives unchanged (adding names may move the buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace fsdpsim::engine {

class NameTable {
 public:
  NameTable() = default;
  NameTable(std::initializer_list<std::string_view> names);

  // The index of `name`, added if the table does not hold it yet. Throws std::length_error past
  // 4 GiB of names.
  std::uint32_t intern(std::string_view name);

  [[nodiscard]] std::string_view operator[](std::size_t index) const {
    const std::uint32_t begin = index == 0 ? 0 : ends_[index - 1];
    return {chars_.data() + begin, ends_[index] - begin};
  }
  // Distinct names held.
  [[nodiscard]] std::size_t size() const { return ends_.size(); }
  [[nodiscard]] bool empty() const { return ends_.empty(); }

 private:
  static constexpr std::uint32_t kEmptySlot = 0xFFFFFFFFU;
  void grow_slots();

  std::string chars_;
  std::vector<std::uint32_t> ends_;   // one past the last character of each name
  std::vector<std::size_t> hashes_;   // of each name
  std::vector<std::uint32_t> slots_;  // open addressing (linear probing): name index or empty
};

}  // namespace fsdpsim::engine
