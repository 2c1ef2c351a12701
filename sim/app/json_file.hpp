// Reading JSON files and writing output files atomically (temporary file + rename, so a reader
// never sees half a file and a failed run never leaves a truncated one).
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units/text_scan.hpp"  // find_control_character, find_invalid_utf8, escape_...

namespace fsdpsim::app {

// The whole file as text; throws ConfigError naming the file when it cannot be opened or is not
// text (require_text).
std::string read_text_file(const std::filesystem::path& path);

// Throws ConfigError naming `file` when `text` holds a NUL byte (it would end the text for a
// parser, which would then ignore whatever follows it), another control character than tab
// and line ends (an escape sequence would reach the terminal in messages and tables), or bytes
// that are not UTF-8.
void require_text(const std::string& text, const std::string& file);

// Throws ConfigError naming `option` ("--title") when a command-line text that fsdpsim writes
// into a file holds a control character (find_control_character).
void require_option_text(const std::string& option, const std::string& text);

// The deepest nesting of arrays and objects an input may have: scenarios nest a handful of
// levels. Deeper text (a hostile file) would exhaust the stack of the recursive JSON walkers.
inline constexpr int kMaxJsonDepth = 64;

// Parses a JSON file; throws ConfigError naming the file, line and column on a syntax error,
// and naming the JSON path where it nests deeper than kMaxJsonDepth.
nlohmann::json read_json_file(const std::filesystem::path& path);

// A command-line value (--set, --grid): its JSON if it parses as JSON, else the text itself as
// a string. Throws ConfigError naming `origin` and the JSON path where it nests deeper than
// kMaxJsonDepth or gives a key twice in one object, as read_json_file does.
nlohmann::json parse_inline_value(const std::string& text, const std::string& origin);

// Where an output streamed piece by piece (OutputFile::stream_content) puts each piece.
using TextSink = std::function<void(std::string_view)>;

struct OutputFile {
  std::string path;  // "-" = stdout
  std::string content;
  // For an output too large to hold whole (the trace of thousands of micro-batches): when set,
  // the output's text is what this writes into the sink it is given, piece by piece, as the file
  // is written; `content` is then unused.
  std::function<void(const TextSink&)> stream_content = nullptr;
};

// Writes every file or none: each is first written to a temporary file in its folder, and only
// when all are written are they renamed into place, so a reader never sees half a file and a
// failed run leaves the old files as they were. A symbolic link is written through to the file
// it names (as a shell redirect does); a device or FIFO (a pipe) is written in place, after the
// others are staged. A termination signal (Ctrl-C, SIGTERM, SIGHUP) that comes while a streamed
// output is written stops the writing: every staged file is discarded and the signal then takes
// its course. The process's own streams ('-', /dev/stdout, /dev/stderr, /dev/fd/N) are
// written to their descriptors as they stand (never reopened, truncated or replaced), stdout
// last; one open on a file counts as that file for the checks below. Throws
// ConfigError (exit code 2) naming the path when one cannot be written, and before writing anything
// when one is the same file as one of `inputs` (the files the command read: a scenario, a profile,
// a log), which it would destroy.
void write_outputs(const std::vector<OutputFile>& files,
                   const std::vector<std::filesystem::path>& inputs = {});

// What write_outputs checks before it writes, for a command to call before it computes: throws
// ConfigError naming the path when one is an input, two name one place, one is a folder, or a
// file's folder is missing or not writable. Empty paths (outputs not asked for) are skipped.
void check_outputs(const std::vector<std::string>& paths,
                   const std::vector<std::filesystem::path>& inputs = {});
// Where writing `path` puts the file, one string per place: absolute, through symbolic links
// (dangling ones too), normalized. Two paths of one place compare equal.
std::string output_place(const std::string& path);
// Whether writing `path` writes this process's stdout ('-', /dev/stdout, /dev/fd/1): the
// command then prints its summary for a person to stderr, keeping stdout that output alone.
bool writes_stdout(const std::string& path);
// Whether `path` is one of this process's own streams ('-', /dev/stdout, /dev/stderr, /dev/fd/N):
// it names no file to take a name from.
bool writes_own_stream(const std::string& path);

void write_output(const std::string& path, const std::string& content,
                  const std::vector<std::filesystem::path>& inputs = {});

}  // namespace fsdpsim::app
