// Text placed in a markdown table cell: a '|' would end the cell and a line break the row, so
// the first is escaped and the second becomes a space.
#pragma once

#include <string>

namespace fsdpsim::app {

inline std::string markdown_cell(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out;
}

}  // namespace fsdpsim::app
