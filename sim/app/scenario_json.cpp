#include <fmt/format.h>

#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/model_json.hpp"
#include "sim/app/scenario.hpp"

namespace fsdpsim::app {
namespace {

Dtype parse_dtype_key(JsonObjectReader& r, const std::string& key, const std::string& fallback) {
  const std::string name = r.choice(key, {"bf16", "fp16", "fp32"}, fallback);
  return *parse_dtype(name);
}

fsdp::TrainingConfig parse_training(const nlohmann::json& value, const std::string& file) {
  JsonObjectReader r(value, file, "/training");
  fsdp::TrainingConfig t;
  t.global_batch = r.positive_int("global_batch");
  t.micro_batch = r.positive_int("micro_batch", 1);
  t.seq_len = r.positive_int("seq_len");
  const std::string ac = r.choice("activation_checkpointing", {"none", "full"}, "none");
  t.activation_checkpointing =
      ac == "full" ? fsdp::ActivationCheckpointing::kFull : fsdp::ActivationCheckpointing::kNone;
  r.choice("optimizer", {"adamw"}, "adamw");
  t.optimizer = fsdp::Optimizer::kAdamW;
  t.flash_attention = r.boolean("flash_attention", true);
  r.finish();
  return t;
}

fsdp::FsdpConfig parse_fsdp(const nlohmann::json* value, const std::string& file) {
  fsdp::FsdpConfig f;
  if (value == nullptr) return f;
  JsonObjectReader r(*value, file, "/fsdp");
  const std::int64_t version = r.positive_int("version", 1);
  if (version != 1) {
    throw ConfigError(file, "/fsdp/version",
                      fmt::format("FSDP version {} is not modelled yet; this release models version 1 "
                                  "(FlatParameter)", version));
  }
  const std::string strategy = r.choice(
      "sharding_strategy", {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"},
      "FULL_SHARD");
  if (strategy != "FULL_SHARD") {
    throw ConfigError(file, "/fsdp/sharding_strategy",
                      fmt::format("{} is not modelled yet; this release models FULL_SHARD", strategy));
  }
  const std::string prefetch =
      r.choice("backward_prefetch", {"BACKWARD_PRE", "BACKWARD_POST", "none"}, "BACKWARD_PRE");
  f.backward_prefetch = prefetch == "BACKWARD_PRE"    ? fsdp::BackwardPrefetch::kBackwardPre
                        : prefetch == "BACKWARD_POST" ? fsdp::BackwardPrefetch::kBackwardPost
                                                      : fsdp::BackwardPrefetch::kNone;
  if (r.boolean("forward_prefetch", false)) {
    throw ConfigError(file, "/fsdp/forward_prefetch", "forward_prefetch=true is not modelled yet");
  }
  f.limit_all_gathers = r.boolean("limit_all_gathers", true);
  f.max_inflight_all_gathers = static_cast<std::int32_t>(r.positive_int("max_inflight_all_gathers", 2));
  f.param_dtype = parse_dtype_key(r, "param_dtype", "bf16");
  f.reduce_dtype = parse_dtype_key(r, "reduce_dtype", std::string(dtype_name(f.param_dtype)));
  r.finish();
  return f;
}

}  // namespace

void apply_override(nlohmann::json& document, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(fmt::format("--set \"{}\": expected KEY=VALUE, e.g. fsdp.backward_prefetch=none", assignment));
  }
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;
  nlohmann::json* node = &document;
  std::size_t begin = 0;
  while (true) {
    const auto dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (part.empty()) throw ConfigError(fmt::format("--set \"{}\": empty key segment", assignment));
    if (node->is_null()) *node = nlohmann::json::object();
    if (node->is_string()) *node = nlohmann::json{{"preset", node->get<std::string>()}};
    if (!node->is_object()) {
      throw ConfigError(fmt::format("--set \"{}\": \"{}\" is inside a value that is not an object", assignment, part));
    }
    if (dot == std::string::npos) {
      (*node)[part] = value;
      return;
    }
    node = &(*node)[part];
    begin = dot + 1;
  }
}

Scenario load_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                       const PresetLocator& presets) {
  nlohmann::json document = read_json_file(file);
  if (!document.is_object()) {
    throw ConfigError(file.string(), "/", fmt::format("expected an object, found {}", describe_json_type(document)));
  }
  for (const std::string& o : overrides) apply_override(document, o);
  const std::string f = file.string();
  JsonObjectReader r(document, f, "");
  if (r.positive_int("schema_version") != kScenarioSchemaVersion) {
    throw ConfigError(f, "/schema_version", fmt::format("this fsdpsim reads schema_version {}", kScenarioSchemaVersion));
  }
  Scenario s;
  s.file = file;
  s.name = r.string("name", file.stem().string());
  s.description = r.string("description", "");
  r.choice("parallelism", {"fsdp"}, "fsdp");
  const nlohmann::json* model = r.child("model");
  if (model == nullptr) throw ConfigError(f, "/model", "required key is missing");
  s.model = model_from_json(*model, file, "/model", presets);
  const nlohmann::json* hardware = r.child("hardware");
  if (hardware == nullptr) throw ConfigError(f, "/hardware", "required key is missing");
  s.hardware = hardware_from_json(*hardware, file, "/hardware", presets);
  const nlohmann::json* training = r.child("training");
  if (training == nullptr) throw ConfigError(f, "/training", "required key is missing");
  s.training = parse_training(*training, f);
  s.fsdp = parse_fsdp(r.child("fsdp"), f);
  r.finish();

  // Cross-section checks.
  const std::int64_t world = s.hardware.cluster.world_size();
  const std::int64_t per_step = s.training.micro_batch * world;
  if (s.training.global_batch % per_step != 0) {
    throw ConfigError(f, "/training/global_batch",
                      fmt::format("global_batch {} is not a multiple of micro_batch {} x {} GPUs = {}",
                                  s.training.global_batch, s.training.micro_batch, world, per_step));
  }
  if (s.model.family != models::ModelFamily::kLlama && s.training.seq_len > s.model.max_seq_len) {
    throw ConfigError(f, "/training/seq_len",
                      fmt::format("seq_len {} exceeds the model's learned position table (max_seq_len {})",
                                  s.training.seq_len, s.model.max_seq_len));
  }
  if (s.hardware.cluster.gpu.peak(s.fsdp.param_dtype).value() <= 0.0) {
    throw ConfigError(f, "/fsdp/param_dtype",
                      fmt::format("{} has no {} peak in its hardware description", s.hardware.cluster.gpu.name,
                                  dtype_name(s.fsdp.param_dtype)));
  }
  return s;
}

}  // namespace fsdpsim::app
