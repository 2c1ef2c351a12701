// Checks of command-line values shared by the subcommands (CLI11 validators): a bad value is a
// usage error (exit 2) that says what was expected.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

namespace fsdpsim::app {

// A whole number >= 0 in decimal digits: CLI11 alone would take "" (as the default) and 0x10.
// `expected` names what the number counts, e.g. "a number of rows >= 0 (0 = all)".
inline CLI::Validator whole_number(const std::string& expected) {
  return CLI::Validator(
      [expected](const std::string& text) {
        std::int64_t n = 0;
        const auto r = std::from_chars(text.data(), text.data() + text.size(), n);
        const bool ok =
            !text.empty() && r.ec == std::errc{} && r.ptr == text.data() + text.size() && n >= 0;
        return ok ? std::string() : "expected " + expected + ", found \"" + text + "\"";
      },
      "N");
}

// A number of rows to show: a whole number >= 0 (0 = all).
inline CLI::Validator row_count() { return whole_number("a number of rows >= 0 (0 = all)"); }

// A path or a name that may not be empty (an empty one would silently do nothing).
inline CLI::Validator non_empty() {
  return CLI::Validator(
      [](const std::string& text) {
        return text.empty() ? std::string("expected a path or name, found an empty string")
                            : std::string();
      },
      "NON-EMPTY");
}

// A title: text with something to show (an empty or blank one would head a page with nothing).
inline CLI::Validator title_text() {
  return CLI::Validator(
      [](const std::string& text) {
        return text.find_first_not_of(" \t") == std::string::npos
                   ? "expected a title, found \"" + text + "\""
                   : std::string();
      },
      "NON-BLANK");
}

}  // namespace fsdpsim::app
