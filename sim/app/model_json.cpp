#include "sim/app/model_json.hpp"

#include <fmt/format.h>

#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"

namespace fsdpsim::app {
namespace {

models::TransformerSpec parse_spec(const nlohmann::json& value, const std::string& file,
                                   const std::string& path) {
  JsonObjectReader r(value, file, path);
  r.ignore("schema_version");
  r.ignore("source");
  r.ignore("description");
  models::TransformerSpec s;
  s.name = r.string("name", "custom");
  const std::string family = r.choice("family", {"gpt", "mpt", "llama"}, "");
  s.family = family == "gpt"   ? models::ModelFamily::kGpt
             : family == "mpt" ? models::ModelFamily::kMpt
                               : models::ModelFamily::kLlama;
  s.n_layers = r.positive_int("n_layers");
  s.d_model = r.positive_int("d_model");
  s.n_heads = r.positive_int("n_heads");
  s.n_kv_heads = r.positive_int("n_kv_heads", s.n_heads);
  // gpt/mpt MLPs are 4x wide unless stated (Radford et al. 2019; MPT expansion_ratio 4).
  s.ffn_dim = s.family == models::ModelFamily::kLlama ? r.positive_int("ffn_dim")
                                                      : r.positive_int("ffn_dim", 4 * s.d_model);
  s.vocab = r.positive_int("vocab");
  s.max_seq_len = r.positive_int("max_seq_len");
  s.tied_embeddings = r.boolean("tied_embeddings", s.family == models::ModelFamily::kMpt);
  r.finish();
  if (const std::string problem = models::validate(s); !problem.empty()) {
    throw ConfigError(file, path, problem);
  }
  return s;
}

}  // namespace

models::TransformerSpec model_from_json(const nlohmann::json& value,
                                        const std::filesystem::path& file, const std::string& path,
                                        const PresetLocator& presets) {
  if (value.is_string()) {
    const auto preset_file = presets.resolve("models", value.get<std::string>(), file, path);
    return parse_spec(read_json_file(preset_file), preset_file.string(), "");
  }
  if (value.is_object() && value.contains("preset")) {
    const nlohmann::json& reference = value.at("preset");
    if (!reference.is_string()) {
      throw ConfigError(
          file.string(), path + "/preset",
          fmt::format("expected a preset name or path, found {}", describe_json_type(reference)));
    }
    const auto preset_file =
        presets.resolve("models", reference.get<std::string>(), file, path + "/preset");
    nlohmann::json merged = read_json_file(preset_file);
    parse_spec(merged, preset_file.string(), "");  // the preset alone must be valid
    for (const auto& [key, v] : value.items()) {
      if (key != "preset") merged[key] = v;
    }
    return parse_spec(merged, file.string(), path);
  }
  return parse_spec(value, file.string(), path);
}

}  // namespace fsdpsim::app
