#include "sim/app/allocator_json.hpp"

#include "sim/app/config_error.hpp"
#include "sim/app/json_reader.hpp"

namespace fsdpsim::app {

std::optional<memory::AllocatorConfig> allocator_from_json(const nlohmann::json* value,
                                                           const std::string& file,
                                                           Bytes capacity) {
  memory::AllocatorConfig config;
  config.capacity = capacity;
  if (value == nullptr) return config;
  JsonObjectReader r(*value, file, "/allocator");
  const bool enabled = r.boolean("enabled", true);
  if (r.has("max_split_size_mb")) config.max_split_size_mb = r.positive_int("max_split_size_mb");
  config.expandable_segments = r.boolean("expandable_segments", false);
  if (r.has("garbage_collection_threshold")) {
    config.garbage_collection_threshold = r.positive_number("garbage_collection_threshold");
  }
  if (r.has("roundup_power2_divisions")) {
    config.roundup_power2_divisions =
        memory::uniform_roundup_power2_divisions(r.positive_int32("roundup_power2_divisions"));
  }
  r.finish();
  if (const std::string problem = memory::validate(config); !problem.empty()) {
    throw ConfigError(file, "/allocator", problem);
  }
  if (!enabled) return std::nullopt;
  return config;
}

}  // namespace fsdpsim::app
