// What the app tests share: running the fsdpsim binary (FSDPSIM_BINARY, set by CMake) as a user
// would, scratch folders, and small scenario files.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sim/app/config_error.hpp"
#include "sim/app/scenario.hpp"
#include "tests/unit/scratch_folder.hpp"

namespace fsdpsim::test_support {

struct Outcome {
  int exit_code = -1;  // -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

// A shell line run by /bin/sh, its stdout read (add 2>&1 for stderr too).
inline Outcome run_shell(const std::string& command) {
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

// `prefix` goes before the binary on the shell line (e.g. "env PATH=/nonexistent ").
inline Outcome run_fsdpsim(const std::string& arguments, const std::string& prefix = "") {
  return run_shell(prefix + std::string(FSDPSIM_BINARY) + " " + arguments + " 2>&1");
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A two-layer Llama-3.1-8B on `nodes` nodes of 8 H100 (16 sequences per node per step): a step
// simulates in well under a millisecond.
inline nlohmann::json tiny_llama_scenario(const std::string& name, int nodes = 1) {
  return {
      {"schema_version", 1},
      {"name", name},
      {"model", {{"preset", "llama-3.1-8b"}, {"n_layers", 2}}},
      {"hardware", {{"preset", "h100-sxm-80gb"}, {"nodes", nodes}}},
      {"training", {{"global_batch", 16 * nodes}, {"micro_batch", 1}, {"seq_len", 2048}}},
      {"fsdp", {{"backward_prefetch", "BACKWARD_PRE"}}},
  };
}

// Writes `document` with `patch` merged in (RFC 7386: null deletes a key) to dir/name.json.
inline std::filesystem::path write_scenario(const std::filesystem::path& dir,
                                            const std::string& name, nlohmann::json document,
                                            const nlohmann::json& patch) {
  document.merge_patch(patch);
  const std::filesystem::path p = dir / (name + ".json");
  std::ofstream(p) << document.dump(2);
  return p;
}

// The ConfigError message of loading `document` as scenario file `file`, or "accepted".
inline std::string scenario_error(const nlohmann::json& document, const std::string& file,
                                  const app::PresetLocator& presets) {
  try {
    app::scenario_from_json(document, file, {}, presets);
  } catch (const app::ConfigError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace fsdpsim::test_support
