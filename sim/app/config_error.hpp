// Bad input: names the file, the JSON path, what was expected and what was found (STYLE.md,
// "Errors: three kinds"). main() maps it to exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace fsdpsim::app {

class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& file, const std::string& json_path, const std::string& message)
      : std::runtime_error(format(file, json_path, message)) {}
  explicit ConfigError(const std::string& message) : std::runtime_error(message) {}

 private:
  static std::string format(const std::string& file, const std::string& json_path,
                            const std::string& message) {
    std::string where = file;
    if (!json_path.empty()) where += (where.empty() ? "" : ": ") + json_path;
    return where.empty() ? message : where + ": " + message;
  }
};

}  // namespace fsdpsim::app
