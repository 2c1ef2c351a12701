// The shipped presets (configs/hardware/*.json) as ClusterSpecs, read by the app's loader, so
// that the cost-model tests run on exactly what users get. Bad files throw app::ConfigError.
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
