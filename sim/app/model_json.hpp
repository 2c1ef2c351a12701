// JSON -> models::TransformerSpec. A model is a preset name, or an object with an optional
// "preset" whose other keys override the preset's, or a complete inline spec. The keys depend on
// "family": gpt/mpt/llama, t5 (HF T5Config's fields) or custom (a "layers" list); see
// configs/models/README.md.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "models/transformer_spec.hpp"
#include "sim/app/preset_paths.hpp"

namespace fsdpsim::app {

// The schema_version of the preset files (configs/models/*.json) this fsdpsim reads.
inline constexpr int kModelPresetSchemaVersion = 1;

models::TransformerSpec model_from_json(const nlohmann::json& value,
                                        const std::filesystem::path& file, const std::string& path,
                                        const PresetLocator& presets);

}  // namespace fsdpsim::app
