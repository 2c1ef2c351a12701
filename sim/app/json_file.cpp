#include "sim/app/json_file.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <system_error>
#include <vector>

#include "sim/app/config_error.hpp"

namespace fsdpsim::app {

namespace fs = std::filesystem;

// Input files are scenarios, presets, profiles and tables: far below this.
constexpr std::uintmax_t kMaxInputBytes = std::uintmax_t{1} << 30;

std::string read_text_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw ConfigError(path.string(), "", "cannot open the file (does it exist?)");
  if (!fs::is_regular_file(status)) {
    throw ConfigError(path.string(), "",
                      "expected a regular file, found a folder, device or other special file");
  }
  if (const std::uintmax_t size = fs::file_size(path, ec); !ec && size > kMaxInputBytes) {
    throw ConfigError(path.string(), "",
                      fmt::format("expected an input file of at most 1 GiB, found {} bytes", size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path.string(), "", "cannot open the file (is it readable?)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

namespace {

// Rejects a key given twice in one object: JSON parsers keep one of the two silently (nlohmann
// the last), so the other value would be dropped without a word.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const fs::path& path) : path_(path) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
        objects_.emplace_back();
        break;
      case Event::object_end:
        objects_.pop_back();
        pointer_.resize(objects_.size());
        break;
      case Event::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        pointer_.resize(objects_.size());
        pointer_.back() = key;
        if (!objects_.back().insert(key).second) {
          std::string where;
          for (const std::string& k : pointer_) where += "/" + k;
          throw ConfigError(path_.string(), where,
                            "key given twice in the same object; expected each key once");
        }
        break;
      }
      default:
        break;
    }
    return true;
  }

 private:
  const fs::path& path_;
  std::vector<std::set<std::string>> objects_;
  std::vector<std::string> pointer_;  // the current key of each open object
};

}  // namespace

nlohmann::json read_json_file(const fs::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text, DuplicateKeyCheck(path));
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
    // e.what() reads "[json.exception.parse_error.101] parse error at line L, column C: <why>";
    // keep <why>, which says what was expected and what was read.
    std::string what = e.what();
    if (const auto at = what.find("column"); at != std::string::npos) {
      if (const auto colon = what.find(": ", at); colon != std::string::npos)
        what = what.substr(colon + 2);
    }
    throw ConfigError(path.string(), "",
                      fmt::format("malformed JSON at line {}, column {}: {}", line, column, what));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double's range (1e400): nlohmann reports no position.
    std::string what = e.what();
    if (const auto bracket = what.find("] "); bracket != std::string::npos)
      what = what.substr(bracket + 2);
    throw ConfigError(path.string(), "",
                      fmt::format("malformed JSON: expected numbers within a double's range, "
                                  "found {}",
                                  what));
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
