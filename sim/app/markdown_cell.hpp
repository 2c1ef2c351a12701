// Text placed in markdown: a table cell, where a '|' would end the cell and a line break the row,
// so the first is escaped and the second becomes a space; free text; code; a link target.
#pragma once

#include <algorithm>
#include <cctype>
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

// Text in a heading, a caption or an image's alt text: a line break becomes a space, and the
// characters that start links, images, code, emphasis, strikethrough, HTML, entities or headings
// are backslash-escaped (CommonMark: any ASCII punctuation may be). An underscore between two
// letters or digits stays as it is: it cannot open or close emphasis there (CommonMark,
// "Emphasis and strong emphasis", rules 2 and 3), so `micro_batch` reads as written.
inline std::string markdown_text(const std::string& text) {
  const auto alnum = [&text](std::size_t i) {
    return i < text.size() && std::isalnum(static_cast<unsigned char>(text[i])) != 0;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool inside_word = i > 0 && alnum(i - 1) && alnum(i + 1);
    if (c == '\\' || c == '`' || c == '*' || c == '[' || c == ']' || c == '<' || c == '>' ||
        c == '|' || c == '#' || c == '&' || c == '~' || (c == '_' && !inside_word)) {
      out += '\\';
    }
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out;
}

// `text` as an inline code span: fenced by one backquote more than its longest run of them,
// padded with spaces when it starts or ends with one (CommonMark, "Code spans").
inline std::string markdown_code(const std::string& text) {
  std::string flat = text;
  for (char& c : flat) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::size_t longest = 0;
  std::size_t run = 0;
  for (const char c : flat) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !flat.empty() && (flat.front() == '`' || flat.back() == '`');
  return fence + (pad ? " " : "") + flat + (pad ? " " : "") + fence;
}

// A link destination: in angle brackets when it holds spaces, parentheses or angle brackets,
// which would otherwise end or break it (CommonMark, "Links").
inline std::string markdown_link_target(const std::string& target) {
  if (target.find_first_of(" ()<>\n") == std::string::npos) return target;
  std::string out = "<";
  for (const char c : target) {
    if (c == '<' || c == '>') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + ">";
}

}  // namespace fsdpsim::app
