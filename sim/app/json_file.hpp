// Reading JSON files and writing output files atomically (temporary file + rename, so a reader
// never sees half a file and a failed run never leaves a truncated one).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace fsdpsim::app {

// The whole file as text; throws ConfigError naming the file when it cannot be opened.
std::string read_text_file(const std::filesystem::path& path);

// Parses a JSON file; throws ConfigError naming the file, line and column on a syntax error.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Writes `content` to `path` atomically; "-" writes to stdout. Throws ConfigError (exit code 2)
// naming the path when it cannot be written.
void write_output(const std::string& path, const std::string& content);

}  // namespace fsdpsim::app
