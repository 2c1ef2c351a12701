// JSON -> hardware::ClusterSpec. "hardware": {"preset": "a100-sxm-80gb", "nodes": 16,
// "gpu": {...}, "node": {...}} where "gpu" and "node" override the preset's keys.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "hardware/gpu_spec.hpp"
#include "sim/app/preset_paths.hpp"

namespace fsdpsim::app {

// The schema_version of the preset files (configs/hardware/*.json) this fsdpsim reads.
inline constexpr int kHardwarePresetSchemaVersion = 1;

struct HardwareConfig {
  std::string preset;  // the preset name or path, empty when fully inline
  hardware::ClusterSpec cluster;
};

HardwareConfig hardware_from_json(const nlohmann::json& value, const std::filesystem::path& file,
                                  const std::string& path, const PresetLocator& presets);

}  // namespace fsdpsim::app
