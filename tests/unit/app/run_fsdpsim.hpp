// Runs the fsdpsim binary (FSDPSIM_BINARY, set by CMake) as a user would, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace fsdpsim::test_support {

struct Outcome {
  int exit_code = -1;  // -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

// `prefix` goes before the binary on the shell line (e.g. "env PATH=/nonexistent ").
inline Outcome run_fsdpsim(const std::string& arguments, const std::string& prefix = "") {
  const std::string command = prefix + std::string(FSDPSIM_BINARY) + " " + arguments + " 2>&1";
  Outcome o;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return o;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) o.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

}  // namespace fsdpsim::test_support
