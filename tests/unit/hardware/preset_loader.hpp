// Test-side reader of configs/hardware/*.json into a ClusterSpec, so that the cost-model tests
// run on the shipped presets. Strict: unknown or missing keys throw std::runtime_error naming
// the file and the JSON path. (The app's own loader lives in sim/app.)
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "hardware/gpu_spec.hpp"

namespace fsdpsim::hardware::testing {

// configs/hardware/<name>.json as a cluster of `nodes` nodes.
ClusterSpec load_preset(const std::string& name, std::int32_t nodes = 1);
ClusterSpec load_preset_file(const std::filesystem::path& path, std::int32_t nodes = 1);

// Every *.json under configs/hardware, sorted.
std::vector<std::filesystem::path> preset_files();

}  // namespace fsdpsim::hardware::testing
