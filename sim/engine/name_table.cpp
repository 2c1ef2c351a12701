#include "sim/engine/name_table.hpp"

#include <limits>
#include <stdexcept>

namespace fsdpsim::engine {

NameTable::NameTable(std::initializer_list<std::string_view> names) {
  for (const std::string_view name : names) push_back(name);
}

std::uint32_t NameTable::push_back(std::string_view name) {
  if (name.size() > std::numeric_limits<std::uint32_t>::max() - chars_.size()) {
    throw std::length_error("engine: a program's names exceed 4 GiB");
  }
  if (ends_.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("engine: a program has more than 2^32 - 1 names");
  }
  chars_.append(name);
  ends_.push_back(static_cast<std::uint32_t>(chars_.size()));
  return static_cast<std::uint32_t>(ends_.size() - 1);
}

}  // namespace fsdpsim::engine
