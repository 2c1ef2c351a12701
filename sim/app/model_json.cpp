#include "sim/app/model_json.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <string>

#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/size_bounds.hpp"

namespace fsdpsim::app {
namespace {

void parse_transformer(JsonObjectReader& r, models::TransformerSpec& s) {
  s.n_layers = r.positive_int_at_most("n_layers", size_bounds::kLayers);
  s.d_model = r.positive_int_at_most("d_model", size_bounds::kWidth);
  s.n_heads = r.positive_int_at_most("n_heads", size_bounds::kHeads);
  s.n_kv_heads = r.positive_int_at_most("n_kv_heads", size_bounds::kHeads, s.n_heads);
  // gpt/mpt MLPs are 4x wide unless stated (Radford et al. 2019; MPT expansion_ratio 4).
  s.ffn_dim = s.family == models::ModelFamily::kLlama
                  ? r.positive_int_at_most("ffn_dim", size_bounds::kFfn)
                  : r.positive_int_at_most("ffn_dim", size_bounds::kFfn, 4 * s.d_model);
  s.vocab = r.positive_int_at_most("vocab", size_bounds::kVocab);
  s.max_seq_len = r.positive_int_at_most("max_seq_len", size_bounds::kSeq);
  s.tied_embeddings = r.boolean("tied_embeddings", s.family == models::ModelFamily::kMpt);
  s.causal_mask_buffer = r.boolean("causal_mask_buffer", false);
  if (s.causal_mask_buffer && s.family != models::ModelFamily::kGpt) {
    throw ConfigError(r.file(), r.path_of("causal_mask_buffer"),
                      "minGPT's per-block causal mask buffer: expected false (or no key) for a "
                      "model that is not family gpt");
  }
}

double number_or(JsonObjectReader& r, const std::string& key, double fallback) {
  return r.has(key) ? r.non_negative_number(key) : fallback;
}

// A custom layer's count, at most `max` (products with the micro-batch and the layer count must
// stay within 64 bits).
std::int64_t count_or(JsonObjectReader& r, const std::string& key, std::int64_t fallback,
                      std::int64_t max) {
  if (!r.has(key)) return fallback;
  const std::int64_t v = r.non_negative_int(key);
  if (v > max) {
    throw ConfigError(
        r.file(), r.path_of(key),
        fmt::format("expected a non-negative integer of at most {}, found {}", max, v));
  }
  return v;
}

// HF T5Config names, shortened to this file's vocabulary: num_layers -> n_layers, num_heads ->
// n_heads, d_ff -> ffn_dim, vocab_size -> vocab, tie_word_embeddings -> tied_embeddings. The
// defaults are T5Config's (transformers configuration_t5.py): num_decoder_layers = num_layers,
// d_kv 64 (whatever d_model / num_heads is), relative_attention_num_buckets 32, feed_forward_proj
// "relu", dropout_rate 0.1, tied.
void parse_t5(JsonObjectReader& r, models::TransformerSpec& s) {
  s.n_layers = r.positive_int_at_most("n_layers", size_bounds::kLayers);
  s.n_decoder_layers = r.positive_int_at_most("n_decoder_layers", size_bounds::kLayers, s.n_layers);
  s.d_model = r.positive_int_at_most("d_model", size_bounds::kWidth);
  s.n_heads = r.positive_int_at_most("n_heads", size_bounds::kHeads);
  s.n_kv_heads = s.n_heads;
  s.d_kv = r.positive_int_at_most("d_kv", size_bounds::kWidth, 64);
  s.ffn_dim = r.positive_int_at_most("ffn_dim", size_bounds::kFfn);
  s.vocab = r.positive_int_at_most("vocab", size_bounds::kVocab);
  s.relative_attention_num_buckets = r.positive_int_at_most(
      "relative_attention_num_buckets", size_bounds::kRelativeAttentionBuckets, 32);
  s.gated_ffn = r.choice("feed_forward_proj", {"relu", "gated-gelu"}, "relu") == "gated-gelu";
  s.tied_embeddings = r.boolean("tied_embeddings", true);
  s.dropout_rate = number_or(r, "dropout_rate", 0.1);
  if (s.dropout_rate >= 1.0) {
    throw ConfigError(r.file(), r.path_of("dropout_rate"),
                      fmt::format("expected a number in [0, 1), found {}", s.dropout_rate));
  }
}

models::CustomLayerSpec parse_custom_layer(const nlohmann::json& value, const std::string& file,
                                           const std::string& path) {
  JsonObjectReader r(value, file, path);
  (void)r.string("description", "");  // for the reader, as a scenario's is: text
  models::CustomLayerSpec l;
  l.name = r.name("name");
  l.count = r.positive_int_at_most("count", size_bounds::kLayers, 1);
  l.params = count_or(r, "params", 0, size_bounds::kCustomParams);
  // A weight and a bias (or a norm's weight and bias) unless stated; each holds a parameter.
  l.parameter_tensors = static_cast<std::int32_t>(
      count_or(r, "parameter_tensors", std::min<std::int64_t>(l.params, 2), 1 << 20));
  if (l.params > 0 && l.parameter_tensors == 0) {
    throw ConfigError(file, r.path_of("parameter_tensors"),
                      "expected a positive integer when params is positive, found 0");
  }
  if (l.params == 0 && l.parameter_tensors > 0) {
    throw ConfigError(file, r.path_of("parameter_tensors"),
                      fmt::format("expected 0 (or no key) when params is 0, found {}: tensors "
                                  "need parameters to hold",
                                  l.parameter_tensors));
  }
  if (l.parameter_tensors > l.params) {
    throw ConfigError(file, r.path_of("parameter_tensors"),
                      fmt::format("expected at most params ({}): each tensor holds at least one "
                                  "parameter, found {}",
                                  l.params, l.parameter_tensors));
  }
  const auto flops_or = [&](const char* key, double bound, double fallback) {
    return r.has(key) ? r.non_negative_number_at_most(key, bound) : fallback;
  };
  l.forward_flops_per_sample =
      flops_or("forward_flops_per_sample", size_bounds::kCustomForwardFlopsPerSample, 0.0);
  // Backward = 2x forward: input and weight gradients (Kaplan et al. 2020, Sec. 2.1).
  l.backward_flops_per_sample =
      flops_or("backward_flops_per_sample", size_bounds::kCustomBackwardFlopsPerSample,
               2.0 * l.forward_flops_per_sample);
  l.memory_bytes_per_sample =
      count_or(r, "memory_bytes_per_sample", 0, size_bounds::kCustomBytesPerSample);
  l.saved_activation_bytes_per_sample =
      count_or(r, "saved_activation_bytes_per_sample", 0, size_bounds::kCustomBytesPerSample);
  l.output_bytes_per_sample =
      count_or(r, "output_bytes_per_sample", 0, size_bounds::kCustomBytesPerSample);
  l.transient_bytes_per_sample =
      count_or(r, "transient_bytes_per_sample", 0, size_bounds::kCustomBytesPerSample);
  l.kernels = r.positive_int32("kernels", 2);
  l.fsdp_unit = r.boolean("fsdp_unit", true);
  r.finish();
  return l;
}

void parse_custom(JsonObjectReader& r, models::TransformerSpec& s) {
  const nlohmann::json* layers = r.child("layers");
  if (layers == nullptr)
    throw ConfigError(r.file(), r.path_of("layers"), "required key is missing");
  if (!layers->is_array() || layers->empty()) {
    throw ConfigError(
        r.file(), r.path_of("layers"),
        fmt::format("expected a non-empty array of layers, found {}", describe_json_type(*layers)));
  }
  std::int64_t kernels_per_forward = 0;
  // Units, their tensors and explain's rows are named after the layer, its copies "<name>.<i>"
  // (models/custom_family.cpp), beside FSDP's root unit: each name must be one unit's.
  std::map<std::string, std::size_t, std::less<>> unit_names;  // -> the layer that names it
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const std::string path = fmt::format("{}/{}", r.path_of("layers"), i);
    s.custom_layers.push_back(parse_custom_layer((*layers)[i], r.file(), path));
    const models::CustomLayerSpec& l = s.custom_layers.back();
    for (std::size_t j = 0; j + 1 < s.custom_layers.size(); ++j) {
      if (s.custom_layers[j].name == l.name) {
        throw ConfigError(r.file(), path + "/name",
                          fmt::format("\"{}\" names layers/{} too; each layer needs a name of "
                                      "its own (use count for repeats)",
                                      l.name, j));
      }
    }
    if (l.name == "root") {
      throw ConfigError(r.file(), path + "/name",
                        "\"root\" is the name of FSDP's root unit; choose another");
    }
    for (std::int64_t copy = 0; copy < l.count; ++copy) {
      std::string unit = l.count > 1 ? fmt::format("{}.{}", l.name, copy) : l.name;
      if (const auto it = unit_names.find(unit); it != unit_names.end()) {
        throw ConfigError(
            r.file(), path + "/name",
            fmt::format("layers/{} and layers/{} both name a unit \"{}\" (a layer with count N "
                        "names its copies <name>.0 to <name>.N-1); each unit needs a name of its "
                        "own",
                        it->second, i, unit));
      }
      unit_names.emplace(std::move(unit), i);
    }
    kernels_per_forward += l.count * std::int64_t{l.kernels};  // each term < 2^45: no overflow
    if (kernels_per_forward > size_bounds::kCustomKernelsPerForward) {
      throw ConfigError(
          r.file(), path,
          fmt::format("the layers up to this one launch {} kernels per forward (count x kernels); "
                      "expected at most {} in all",
                      kernels_per_forward, size_bounds::kCustomKernelsPerForward));
    }
  }
  if (std::all_of(s.custom_layers.begin(), s.custom_layers.end(),
                  [](const models::CustomLayerSpec& l) { return l.params == 0; })) {
    throw ConfigError(r.file(), r.path_of("layers"),
                      "expected a layer with params: a model of no parameters has nothing to "
                      "shard, gather or reduce");
  }
}

// `default_name`: the model's name when the JSON gives none (a preset's file stem, "inline" for
// a model described in the scenario itself).
models::TransformerSpec parse_spec(const nlohmann::json& value, const std::string& file,
                                   const std::string& path, const std::string& default_name) {
  JsonObjectReader r(value, file, path);
  r.schema_version(kModelPresetSchemaVersion, /*required=*/false);
  (void)r.string("source", "");  // for the reader, as a scenario's description is: text
  (void)r.string("description", "");
  models::TransformerSpec s;
  s.name = r.name("name", default_name);
  const std::string family = r.choice("family", {"gpt", "mpt", "llama", "t5", "custom"});
  s.family = family == "gpt"     ? models::ModelFamily::kGpt
             : family == "mpt"   ? models::ModelFamily::kMpt
             : family == "llama" ? models::ModelFamily::kLlama
             : family == "t5"    ? models::ModelFamily::kT5
                                 : models::ModelFamily::kCustom;
  if (s.family == models::ModelFamily::kT5) {
    parse_t5(r, s);
  } else if (s.family == models::ModelFamily::kCustom) {
    parse_custom(r, s);
  } else {
    parse_transformer(r, s);
  }
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
    return parse_preset("models", file, path, presets.unknown_key_hint(preset_file), [&] {
      return parse_spec(read_json_file(preset_file), preset_file.string(), "",
                        preset_file.stem().string());
    });
  }
  if (!value.is_object()) {
    throw ConfigError(
        file.string(), path,
        fmt::format("expected a preset name or path (a string) or an object, found {}",
                    describe_json_type(value)));
  }
  if (value.contains("preset")) {
    const nlohmann::json& reference = value.at("preset");
    if (!reference.is_string()) {
      throw ConfigError(
          file.string(), path + "/preset",
          fmt::format("expected a preset name or path, found {}", describe_json_type(reference)));
    }
    const auto preset_file =
        presets.resolve("models", reference.get<std::string>(), file, path + "/preset");
    nlohmann::json merged =
        parse_preset("models", file, path + "/preset", presets.unknown_key_hint(preset_file), [&] {
          nlohmann::json preset = read_json_file(preset_file);
          // The preset alone must be valid.
          parse_spec(preset, preset_file.string(), "", preset_file.stem().string());
          return preset;
        });
    for (const auto& [key, v] : value.items()) {
      // Overrides change a preset's sizes; another family is another model, not a variant.
      if (key == "family" && v != merged.value("family", nlohmann::json())) {
        throw ConfigError(file.string(), path + "/family",
                          fmt::format("expected {} (the family of preset {}) or no key, found {}: "
                                      "describe a model of another family in full, without "
                                      "\"preset\"",
                                      merged.value("family", nlohmann::json()).dump(),
                                      reference.get<std::string>(), v.dump()));
      }
      if (key != "preset") merged[key] = v;
    }
    return parse_spec(merged, file.string(), path, preset_file.stem().string());
  }
  return parse_spec(value, file.string(), path, "inline");
}

}  // namespace fsdpsim::app
