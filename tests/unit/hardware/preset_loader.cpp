#include "preset_loader.hpp"

#include <algorithm>

#include "sim/app/hardware_json.hpp"

namespace fsdpsim::hardware::testing {

namespace fs = std::filesystem;

ClusterSpec load_preset_file(const fs::path& path, std::int32_t nodes) {
  // The app's own loader (sim/app/hardware_json.cpp), so the tests price exactly what users get.
  const app::PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  const nlohmann::json reference = {{"preset", path.string()}, {"nodes", nodes}};
  return app::hardware_from_json(reference, path, "/hardware", presets).cluster;
}

ClusterSpec load_preset(const std::string& name, std::int32_t nodes) {
  return load_preset_file(fs::path(FSDPSIM_CONFIGS_DIR) / "hardware" / (name + ".json"), nodes);
}

std::vector<fs::path> preset_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(FSDPSIM_CONFIGS_DIR) / "hardware")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace fsdpsim::hardware::testing
