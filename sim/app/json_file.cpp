#include "sim/app/json_file.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <system_error>

#include "sim/app/config_error.hpp"

namespace fsdpsim::app {

namespace fs = std::filesystem;

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path.string(), "", "cannot open the file (does it exist?)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json read_json_file(const fs::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Locate the byte offset as line:column for the message.
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    if (const auto colon = what.rfind(": "); colon != std::string::npos)
      what = what.substr(colon + 2);
    throw ConfigError(path.string(), "",
                      fmt::format("malformed JSON at line {}, column {}: {}", line, column, what));
  }
}

void write_output(const std::string& path, const std::string& content) {
  if (path == "-") {
    std::cout << content;
    std::cout.flush();
    return;
  }
  const fs::path target(path);
  // (fmt rather than operator+: GCC 12 -O3 raises a false -Wrestrict on the latter, GCC PR105329.)
  const fs::path temporary =
      target.parent_path() / fmt::format(".{}.tmp", target.filename().string());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      throw ConfigError(fmt::format("cannot write {} (does the folder exist and is it writable?)",
                                    temporary.string()));
    out << content;
    out.flush();
    if (!out)
      throw ConfigError(fmt::format("cannot write {} (does the folder exist and is it writable?)",
                                    temporary.string()));
  }
  std::error_code ec;
  fs::rename(temporary, target, ec);
  if (ec) {
    fs::remove(temporary, ec);
    throw ConfigError(fmt::format("cannot move the output into place at {}", target.string()));
  }
}

}  // namespace fsdpsim::app
