// The names of a program's ops, tensors and CPU steps, stored end to end in one buffer.
//
// A large model's step launches ~10^5 ops, and most names ("blocks.11.bwd.mlp.fc1.grad_input")
// are too long for std::string's small-string buffer: one heap string per name cost ~7 % of a
// simulation's CPU time in allocations, page faults and frees (perf, reports/performance.md).
// Here a name is a range of one growing buffer, so adding one is amortised O(1) with no
// allocation of its own, and a name reads as a std::string_view valid while the table lives
// unchanged (adding names may move the buffer).
#pragma once

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

  // Appends `name` and returns its index. Throws std::length_error past 4 GiB of names.
  std::uint32_t push_back(std::string_view name);

  [[nodiscard]] std::string_view operator[](std::size_t index) const {
    const std::uint32_t begin = index == 0 ? 0 : ends_[index - 1];
    return {chars_.data() + begin, ends_[index] - begin};
  }
  [[nodiscard]] std::size_t size() const { return ends_.size(); }
  [[nodiscard]] std::size_t characters() const { return chars_.size(); }
  // Room for `names` names of `characters` characters in all, so adding them moves nothing.
  void reserve(std::size_t names, std::size_t characters) {
    ends_.reserve(names);
    chars_.reserve(characters);
  }
  [[nodiscard]] bool empty() const { return ends_.empty(); }

 private:
  std::string chars_;
  std::vector<std::uint32_t> ends_;  // one past the last character of each name
};

}  // namespace fsdpsim::engine
