#include "sim/app/json_file.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "sim/app/config_error.hpp"
#include "sim/app/json_reader.hpp"

namespace fsdpsim::app {

namespace fs = std::filesystem;

// Input files are scenarios, presets, profiles and tables: far below this.
constexpr std::uintmax_t kMaxInputBytes = std::uintmax_t{1} << 30;

std::string read_text_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found)
    throw ConfigError(path.string(), "", "cannot open the file (does it exist?)");
  if (ec) {  // a name too long, no permission to look into a folder on the way
    throw ConfigError(path.string(), "", fmt::format("cannot open the file: {}", ec.message()));
  }
  if (!fs::is_regular_file(status)) {
    throw ConfigError(path.string(), "",
                      "expected a regular file, found a folder, device or other special file");
  }
  if (const std::uintmax_t size = fs::file_size(path, ec); !ec && size > kMaxInputBytes) {
    throw ConfigError(path.string(), "",
                      fmt::format("expected an input file of at most 1 GiB, found {} bytes", size));
  }
  // read(2) rather than a stream, so that a failed read (EIO) is not taken for the file's end.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw ConfigError(path.string(), "",
                      fmt::format("cannot open the file: {}", std::strerror(errno)));
  }
  std::string text;
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  std::vector<char> chunk(kChunk);
  while (true) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw ConfigError(path.string(), "",
                        fmt::format("cannot read the file: {}", std::strerror(error)));
    }
    text.append(chunk.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  require_text(text, path.string());
  return text;
}

void require_option_text(const std::string& option, const std::string& text) {
  if (const auto c = find_control_character(text, "")) {
    throw ConfigError(fmt::format("{}: expected text, found the control character {} at byte {}",
                                  option, c->name, c->offset));
  }
}

void require_text(const std::string& text, const std::string& file) {
  const auto where = [&text](std::size_t offset) {
    const std::string_view before(text.data(), offset);
    const auto line = std::count(before.begin(), before.end(), '\n') + 1;
    const std::size_t line_start = before.rfind('\n');
    const std::size_t column =
        offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    return fmt::format("line {}, column {}", line, column);
  };
  if (const auto c = find_control_character(text, "\t\n\r")) {
    const bool nul = text[c->offset] == '\0';
    throw ConfigError(file, "",
                      fmt::format("expected text, found {} at {}",
                                  nul ? std::string("a NUL byte")
                                      : fmt::format("the control character {}", c->name),
                                  where(c->offset)));
  }
  // Text is UTF-8 (as JSON is): a byte of another encoding would reach the reports replaced, so
  // two different names could print the same.
  if (const auto bad = find_invalid_utf8(text)) {
    throw ConfigError(file, "",
                      fmt::format("expected UTF-8 text, found the byte 0x{:02X} at {}",
                                  static_cast<unsigned char>(text[*bad]), where(*bad)));
  }
}

namespace {

// The checks of every parsed JSON text, file or command-line value: a key given twice in one
// object (JSON parsers keep one of the two silently, nlohmann the last, so the other value would
// be dropped without a word), nesting deeper than kMaxJsonDepth, and a control character other
// than tab and line feed escaped in a key or string (find_control_character). A SAX pass of its
// own, before the text is parsed into a value: nlohmann's parser with a callback rescans the
// parent container at every object's end, which made an array of 300,000 objects take 27 s.
class JsonInputCheck final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit JsonInputCheck(std::string source) : source_(std::move(source)) {}

  bool null() override { return element(); }
  bool boolean(bool /*value*/) override { return element(); }
  bool number_integer(number_integer_t /*value*/) override { return element(); }
  bool number_unsigned(number_unsigned_t /*value*/) override { return element(); }
  bool number_float(number_float_t /*value*/, const string_t& /*text*/) override {
    return element();
  }
  bool binary(binary_t& /*value*/) override { return element(); }
  bool string(string_t& value) override {
    element();
    if (const auto c = find_control_character(value, "\t\n")) {
      throw ConfigError(source_, where(),
                        fmt::format("expected text, found the control character {} (escaped as "
                                    "\\u{}) at byte {} of the string",
                                    c->name, c->name.substr(2), c->offset));
    }
    return true;
  }
  bool start_object(std::size_t /*elements*/) override {
    element();
    enter(false);
    return true;
  }
  bool key(string_t& key) override {
    if (const auto c = find_control_character(key, "")) {
      // Named in the object that holds it, not at the key read before it.
      open_.back().keyed = false;
      throw ConfigError(source_, where(),
                        fmt::format("expected a key of text, found \"{}\" with the control "
                                    "character {}",
                                    escape_control_characters(key, ""), c->name));
    }
    Container& object = open_.back();
    object.key = key;
    object.keyed = true;
    if (!object.keys.insert(key).second) {
      throw ConfigError(source_, where(),
                        "key given twice in the same object; expected each key once");
    }
    return true;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    element();
    enter(true);
    return true;
  }
  bool end_array() override {
    open_.pop_back();
    return true;
  }
  // The parse itself reports syntax errors (with their position): here the text is only found
  // not to be JSON.
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  // An open array or object and where in it the reading is: the element's index, or the key.
  struct Container {
    bool array = false;
    std::int64_t index = -1;  // arrays: the element being read
    std::string key;          // objects: the current key ("" is a key too)
    bool keyed = false;       // objects: a key has been read
    std::set<std::string> keys;
  };

  // A value starts: in an array, the next element.
  bool element() {
    if (!open_.empty() && open_.back().array) ++open_.back().index;
    return true;
  }

  void enter(bool array) {
    if (static_cast<int>(open_.size()) >= kMaxJsonDepth) {
      throw ConfigError(source_, where(),
                        fmt::format("nested deeper than {} levels; no fsdpsim input nests more "
                                    "than a few",
                                    kMaxJsonDepth));
    }
    open_.push_back(Container{array, -1, {}, false, {}});
  }

  // The JSON pointer of the value being read.
  [[nodiscard]] std::string where() const {
    std::string out;
    for (const Container& c : open_) {
      if (c.array && c.index >= 0) out += "/" + std::to_string(c.index);
      if (!c.array && c.keyed) out += "/" + pointer_token(c.key);
    }
    return out;
  }

  std::string source_;
  std::vector<Container> open_;
};

// Runs the checks; false when `text` is not JSON (the parse then says where and why).
bool check_json_input(const std::string& text, const std::string& source) {
  JsonInputCheck check(source);
  return nlohmann::json::sax_parse(text, &check, nlohmann::json::input_format_t::json,
                                   /*strict=*/true);
}

}  // namespace

nlohmann::json parse_inline_value(const std::string& text, const std::string& origin) {
  if (check_json_input(text, origin)) {
    nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!value.is_discarded()) return value;
  }
  // A number beyond a double's range (1e400) is no string a key could mean.
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    (void)parsed;  // parsed again only to learn why the first parse refused the text
  } catch (const nlohmann::json::out_of_range&) {
    throw ConfigError(origin, "",
                      fmt::format("expected numbers within a double's range, found {}", text));
  } catch (const nlohmann::json::exception&) {
    // Not JSON: the text itself, as below.
  }
  if (const auto c = find_control_character(text, "\t\n")) {
    throw ConfigError(origin, "",
                      fmt::format("expected text, found the control character {} at byte {} "
                                  "of the value",
                                  c->name, c->offset));
  }
  if (const auto bad = find_invalid_utf8(text)) {
    throw ConfigError(
        origin, "",
        fmt::format("expected UTF-8 text, found the byte 0x{:02X} at byte {} of the value",
                    static_cast<unsigned char>(text[*bad]), *bad));
  }
  return text;
}

nlohmann::json read_json_file(const fs::path& path) {
  const std::string text = read_text_file(path);
  // The line and column (1-based) of byte `offset` of the text.
  const auto line_column = [&text](std::size_t offset) {
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return fmt::format("line {}, column {}", line, column);
  };
  try {
    (void)check_json_input(text, path.string());
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line L, column C: <why>";
    // keep <why>, which says what was expected and what was read. e.byte is 1-based.
    std::string what = e.what();
    if (const auto at = what.find("column"); at != std::string::npos) {
      if (const auto colon = what.find(": ", at); colon != std::string::npos)
        what = what.substr(colon + 2);
    }
    throw ConfigError(
        path.string(), "",
        fmt::format("malformed JSON at {}: {}", line_column(e.byte > 0 ? e.byte - 1 : 0), what));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double's range (1e400): nlohmann reports no position, but names the
    // number ("... parsing '1e400'"); its first occurrence as a whole token is where it is.
    std::string what = e.what();
    if (const auto bracket = what.find("] "); bracket != std::string::npos)
      what = what.substr(bracket + 2);
    std::string where;
    if (const auto open = what.find('\''), close = what.rfind('\'');
        open != std::string::npos && close > open) {
      const std::string number = what.substr(open + 1, close - open - 1);
      const auto is_number_char = [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '.' || ch == '-' ||
               ch == '+';
      };
      for (std::size_t at = text.find(number); at != std::string::npos && !number.empty();
           at = text.find(number, at + 1)) {
        const bool starts = at == 0 || !is_number_char(text[at - 1]);
        const std::size_t after = at + number.size();
        if (starts && (after == text.size() || !is_number_char(text[after]))) {
          where = " at " + line_column(at);
          break;
        }
      }
    }
    throw ConfigError(path.string(), "",
                      fmt::format("malformed JSON{}: expected numbers within a double's range, "
                                  "found {}",
                                  where, what));
  }
}

namespace {

// With the system's reason (errno after the failed open or write: "No such file or directory",
// "Permission denied", "File name too long", "No space left on device").
[[noreturn]] void cannot_write(const std::string& path) {
  const int error = errno;
  throw ConfigError(fmt::format(
      "cannot write {}: {}", path,
      error != 0 ? std::generic_category().message(error) : std::string("the stream failed")));
}

// The signals write_outputs holds back while it stages and moves files into place.
constexpr std::array<int, 3> kTerminationSignals = {SIGINT, SIGTERM, SIGHUP};

// Thrown while a streamed output is written when a termination signal is held back, waiting:
// write_outputs then discards what it staged and lets the signal through, rather than keep the
// user waiting for the rest of a file of gigabytes.
struct TerminationPending {};

void throw_if_termination_pending() {
  sigset_t pending;
  if (::sigpending(&pending) != 0) return;
  for (const int signal : kTerminationSignals) {
    if (sigismember(&pending, signal) != 1) continue;
    // A signal the process ignores (nohup's SIGHUP, a shell's background job's SIGINT) stays
    // pending while blocked (Linux keeps it), but is discarded once let through: no reason to
    // stop.
    struct sigaction action {};
    if (::sigaction(signal, nullptr, &action) == 0 && (action.sa_flags & SA_SIGINFO) == 0 &&
        action.sa_handler == SIG_IGN)
      continue;
    throw TerminationPending{};
  }
}

// Gives `put` the output's text: whole, or piece by piece as a streamed output writes it.
template <typename Put>
void put_content(const OutputFile& output, const Put& put) {
  if (!output.stream_content) {
    put(std::string_view(output.content));
    return;
  }
  output.stream_content([&put](std::string_view piece) {
    put(piece);
    throw_if_termination_pending();
  });
}

// Writes `output`'s text to `file` (a staged copy, or a device or FIFO in place).
void write_file(const fs::path& file, const OutputFile& output) {
  errno = 0;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) cannot_write(output.path);
  put_content(output, [&out, &output](std::string_view text) {
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) cannot_write(output.path);
  });
  out.flush();
  if (!out) cannot_write(output.path);
}

// The descriptor an output path names when it is one of this process's own streams: '-' and
// /dev/stdout are 1, /dev/stderr 2, /dev/fd/N and /proc/self/fd/N are N. Such an output is
// written to the descriptor as it stands, never opened again: an open of /dev/stdout reaches the
// file the shell redirected stdout to, and would truncate it (a '>>' log) or, being a regular
// file, have a staged copy renamed over it, losing what the command printed there.
std::optional<int> own_stream(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (const std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.size() <= prefix.size() || path.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = path.substr(prefix.size());
    // As the kernel names them: no sign, no leading zero ("/dev/fd/01" is no entry).
    constexpr std::size_t kMaxDigits = 9;
    if (digits.size() > kMaxDigits || (digits.size() > 1 && digits.front() == '0') ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    return std::stoi(digits);
  }
  return std::nullopt;
}

// Where a stream of our own writes, as a place to compare with the other outputs' and the
// inputs: the file the descriptor is open on (a shell redirect's), else the descriptor itself
// (a pipe, a terminal).
std::string stream_place(int fd) {
  struct stat st {};
  std::error_code ec;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const fs::path file = fs::read_symlink(fmt::format("/proc/self/fd/{}", fd), ec);
    if (!ec) return fs::weakly_canonical(file, ec).string();
  }
  return fmt::format("fd {}", fd);
}

// A pipe or socket takes a write only as fast as its reader reads.
bool may_block(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

// Writes `output`'s text to descriptor `fd` (after what std::cout and std::cerr hold, so that
// their text and this stay in order).
void write_stream(int fd, const OutputFile& output) {
  std::cout.flush();
  std::cerr.flush();
  if (fd == STDOUT_FILENO) {  // a failure shows when the command checks stdout on its way out
    put_content(output, [](std::string_view text) { std::cout << text; });
    std::cout.flush();
    return;
  }
  put_content(output, [fd, &output](std::string_view text) {
    std::size_t done = 0;
    while (done < text.size()) {
      errno = 0;
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) cannot_write(output.path);
      done += static_cast<std::size_t>(n);
    }
  });
}

struct Staged {
  const OutputFile* file = nullptr;
  fs::path target;
  fs::path temporary;  // empty: written in place (a device, a FIFO) or to a stream of our own
  std::optional<int> stream;  // own_stream(path): written to that descriptor, stdout last

  [[nodiscard]] bool to_stdout() const { return stream == STDOUT_FILENO; }
};

}  // namespace

// Where writing `path` puts the file, as one string per place: absolute first (a relative path
// whose file does not exist yet stays relative under weakly_canonical, and "o.json" and
// "./o.json" would count as two places), and through links, dangling ones included (a link to a
// file not written yet is written through: "t.link" -> "o.json" is "o.json").
std::string output_place(const std::string& path) {
  std::error_code ec;
  fs::path at = fs::absolute(path, ec);
  if (ec) return path;
  constexpr int kMaxLinks = 40;  // Linux's own limit on links followed (ELOOP)
  for (int hop = 0; hop < kMaxLinks && fs::is_symlink(fs::symlink_status(at, ec)); ++hop) {
    const fs::path named = fs::read_symlink(at, ec);
    if (ec) break;
    at = named.is_absolute() ? named : at.parent_path() / named;
  }
  const fs::path canonical = fs::weakly_canonical(at, ec);
  return ec ? at.lexically_normal().string() : canonical.string();
}

namespace {

// Holds Ctrl-C, SIGTERM and SIGHUP back while outputs are staged and moved into place, and lets
// them through when the scope ends: a signal then finds every output in place or every one
// discarded, and no temporary file behind (it would otherwise kill the process between them).
class DeferredTerminationSignals {
 public:
  DeferredTerminationSignals() {
    sigset_t deferred;
    sigemptyset(&deferred);
    for (const int signal : kTerminationSignals) sigaddset(&deferred, signal);
    pthread_sigmask(SIG_BLOCK, &deferred, &previous_);
  }
  ~DeferredTerminationSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  DeferredTerminationSignals(const DeferredTerminationSignals&) = delete;
  DeferredTerminationSignals& operator=(const DeferredTerminationSignals&) = delete;

 private:
  sigset_t previous_{};
};

}  // namespace

void check_outputs(const std::vector<std::string>& paths, const std::vector<fs::path>& inputs) {
  // Two outputs to one place (two '-', or one file by two names) would leave only the last.
  std::set<std::string> places;
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    std::error_code ec;
    const std::optional<int> stream = own_stream(path);
    if (stream && stream != STDOUT_FILENO && ::fcntl(*stream, F_GETFD) == -1)
      throw ConfigError(fmt::format("cannot write {}: the descriptor is not open", path));
    // A stream open on a file is that file (`--json - >> scenario.json` would append to it).
    const std::string place = stream ? stream_place(*stream) : output_place(path);
    for (const fs::path& input : inputs) {
      if (fs::equivalent(stream ? fs::path(place) : fs::path(path), input, ec)) {
        throw ConfigError(
            path, "",
            fmt::format("is {}; writing the output there would destroy it",
                        input.string() == path ? std::string("one of this command's inputs")
                                               : "the input " + input.string()));
      }
    }
    if (!places.insert(place).second) {
      throw ConfigError(path, "",
                        stream == STDOUT_FILENO
                            ? "is given for two outputs; stdout can take one"
                            : "is given for two outputs; each needs a file of its own");
    }
    if (stream) continue;
    const fs::file_status status = fs::status(path, ec);  // through symbolic links
    if (fs::is_directory(status))
      throw ConfigError(path, "", "is a folder; expected the path of a file to write");
    if (fs::exists(status) && !fs::is_regular_file(status)) continue;  // a device, a FIFO
    // A file its owner made read-only is not replaced, as a shell's redirect would not.
    if (fs::exists(status) && ::access(path.c_str(), W_OK) != 0) {
      throw ConfigError(fmt::format("cannot write {}: the file is not writable ({})", path,
                                    std::generic_category().message(errno)));
    }
    // The file is staged next to where it goes (through links, to the file they name; a
    // dangling link is written through in place): that folder must exist and take a new file.
    const fs::path target(place);
    const fs::path folder =
        target.parent_path().empty() ? fs::path(".") : fs::path(target.parent_path());
    if (!fs::is_directory(folder, ec)) {
      throw ConfigError(
          fmt::format("cannot write {}: the folder {} does not exist", path, folder.string()));
    }
    if (::access(folder.c_str(), W_OK | X_OK) != 0) {
      throw ConfigError(fmt::format("cannot write {}: the folder {} does not take new files ({})",
                                    path, folder.string(), std::generic_category().message(errno)));
    }
  }
}

namespace {

// Removes the staged copies of outputs `from` on.
void discard_staged(const std::vector<Staged>& staged, std::size_t from) {
  std::error_code ec;
  for (std::size_t i = from; i < staged.size(); ++i) {
    if (!staged[i].temporary.empty()) fs::remove(staged[i].temporary, ec);
  }
}

// write_outputs once its checks are done: stages every file in `staged`, then publishes them.
void stage_and_publish(const std::vector<OutputFile>& files, std::vector<Staged>& staged) {
  for (const OutputFile& file : files) {
    Staged s;
    s.file = &file;
    s.stream = own_stream(file.path);
    if (!s.stream) {
      std::error_code ec;
      const fs::path path(file.path);
      const fs::file_status status = fs::status(path, ec);  // through symbolic links
      if (fs::is_directory(status)) {
        discard_staged(staged, 0);
        throw ConfigError(file.path, "", "is a folder; expected the path of a file to write");
      }
      // A regular file is replaced by renaming a staged copy over it, next to the file a link
      // names rather than over the link; a device, FIFO or dangling link is written in place
      // (an open through it), as a shell redirect would.
      const bool in_place = fs::exists(status) ? !fs::is_regular_file(status)
                                               : fs::is_symlink(fs::symlink_status(path, ec));
      s.target = fs::exists(status) && !in_place ? fs::canonical(path, ec) : path;
      if (ec) s.target = path;
      if (!in_place) {
        // A name of our own (pid, position), short whatever the target's length.
        s.temporary =
            s.target.parent_path() / fmt::format(".fsdpsim-{}-{}.tmp", ::getpid(), staged.size());
        try {
          write_file(s.temporary, file);
          // The file it replaces keeps its permissions: a private file stays private.
          if (fs::exists(status)) {
            fs::permissions(s.temporary, status.permissions(), fs::perm_options::replace);
          }
        } catch (...) {
          std::error_code ignored;
          fs::remove(s.temporary, ignored);
          discard_staged(staged, 0);
          throw;
        }
      }
    }
    staged.push_back(std::move(s));
  }
  // Publishing: first what is written in place and may fail (a full device, a FIFO's reader
  // gone, a descriptor of our own other than stdout), while every staged file can still be
  // discarded; then the renames into place; stdout last, so that nothing is printed for outputs
  // that did not land.
  for (const Staged& s : staged) {
    if (!s.temporary.empty() || s.to_stdout()) continue;
    try {
      if (s.stream) {
        write_stream(*s.stream, *s.file);
      } else {
        write_file(s.target, *s.file);
      }
    } catch (...) {
      discard_staged(staged, 0);
      throw;
    }
  }
  // A rename can still fail (a file made immutable, another user's file in a sticky folder):
  // the files already renamed into place are then put back as they were, from a hard link (or a
  // copy) of each file they replace, kept until every rename has succeeded.
  std::vector<fs::path> backups(staged.size());
  std::vector<bool> existed(staged.size(), false);
  const auto remove_backups = [&backups] {
    std::error_code ignored;
    for (const fs::path& b : backups) {
      if (!b.empty()) fs::remove(b, ignored);
    }
  };
  for (std::size_t i = 0; i < staged.size(); ++i) {
    const Staged& s = staged[i];
    std::error_code ec;
    if (s.temporary.empty() || !fs::exists(s.target, ec)) continue;
    existed[i] = true;
    fs::path backup = s.temporary;
    backup.replace_extension(".bak");
    fs::remove(backup, ec);
    fs::create_hard_link(s.target, backup, ec);
    if (ec) fs::copy_file(s.target, backup, fs::copy_options::overwrite_existing, ec);
    if (!ec) backups[i] = std::move(backup);
  }
  for (std::size_t i = 0; i < staged.size(); ++i) {
    const Staged& s = staged[i];
    if (s.temporary.empty()) continue;
    std::error_code ec;
    fs::rename(s.temporary, s.target, ec);
    if (ec) {
      for (std::size_t j = 0; j < i; ++j) {
        std::error_code ignored;
        if (staged[j].temporary.empty()) continue;
        if (!backups[j].empty()) {
          fs::rename(backups[j], staged[j].target, ignored);
        } else if (!existed[j]) {
          fs::remove(staged[j].target, ignored);
        }
      }
      discard_staged(staged, i);
      remove_backups();
      throw ConfigError(
          fmt::format("cannot move the output into place at {}: {}", s.file->path, ec.message()));
    }
  }
  remove_backups();
  for (const Staged& s : staged) {
    if (s.to_stdout()) write_stream(STDOUT_FILENO, *s.file);
  }
}

}  // namespace

void write_outputs(const std::vector<OutputFile>& files, const std::vector<fs::path>& inputs) {
  std::vector<std::string> paths;
  for (const OutputFile& file : files) paths.push_back(file.path);
  check_outputs(paths, inputs);
  // A FIFO's write waits for its reader as long as it takes: Ctrl-C must still get through.
  const bool may_wait = std::any_of(paths.begin(), paths.end(), [](const std::string& path) {
    std::error_code ec;
    const std::optional<int> stream = own_stream(path);
    if (stream) return *stream != STDOUT_FILENO && may_block(*stream);
    return fs::is_fifo(fs::status(path, ec));
  });
  std::optional<DeferredTerminationSignals> deferred;
  if (!may_wait) deferred.emplace();
  std::vector<Staged> staged;
  try {
    stage_and_publish(files, staged);
  } catch (const TerminationPending&) {
    discard_staged(staged, 0);
    deferred.reset();  // the signal is delivered here, and ends the process unless it is handled
    throw ConfigError("interrupted while writing the outputs");
  }
}

bool writes_stdout(const std::string& path) { return own_stream(path) == STDOUT_FILENO; }

bool writes_own_stream(const std::string& path) { return own_stream(path).has_value(); }

void write_output(const std::string& path, const std::string& content,
                  const std::vector<fs::path>& inputs) {
  write_outputs({OutputFile{path, content}}, inputs);
}

}  // namespace fsdpsim::app
