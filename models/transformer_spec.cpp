// validate(TransformerSpec): the one place a model spec is checked (STYLE.md: specs are validated
// once, then immutable). Messages name the field and the values so the app can attach the JSON
// path.
#include "models/transformer_spec.hpp"

#include <string>

namespace fsdpsim::models {
namespace {

std::string must_be_positive(const char* field, std::int64_t value) {
  return std::string(field) + " must be positive (got " + std::to_string(value) + ")";
}

bool uses_learned_positions(ModelFamily family) {
  return family == ModelFamily::kGpt || family == ModelFamily::kMpt;
}

std::string validate_t5(const TransformerSpec& spec) {
  if (spec.n_layers <= 0) return must_be_positive("n_layers", spec.n_layers);
  if (spec.n_decoder_layers <= 0)
    return must_be_positive("n_decoder_layers", spec.n_decoder_layers);
  if (spec.d_model <= 0) return must_be_positive("d_model", spec.d_model);
  if (spec.n_heads <= 0) return must_be_positive("n_heads", spec.n_heads);
  if (spec.d_kv <= 0) return must_be_positive("d_kv", spec.d_kv);
  if (spec.ffn_dim <= 0) return must_be_positive("ffn_dim", spec.ffn_dim);
  if (spec.vocab <= 0) return must_be_positive("vocab", spec.vocab);
  if (spec.relative_attention_num_buckets <= 0) {
    return must_be_positive("relative_attention_num_buckets", spec.relative_attention_num_buckets);
  }
  if (!(spec.dropout_rate >= 0.0 && spec.dropout_rate < 1.0)) {
    return "dropout_rate must be in [0, 1) (got " + std::to_string(spec.dropout_rate) + ")";
  }
  return {};
}

std::string validate_custom(const TransformerSpec& spec) {
  if (spec.custom_layers.empty()) return "layers must list at least one layer";
  for (std::size_t i = 0; i < spec.custom_layers.size(); ++i) {
    const CustomLayerSpec& l = spec.custom_layers[i];
    const std::string at = "layers/" + std::to_string(i) + "/";
    if (l.name.empty()) return at + "name must not be empty";
    if (l.count <= 0) return must_be_positive((at + "count").c_str(), l.count);
    if (l.kernels <= 0) return must_be_positive((at + "kernels").c_str(), l.kernels);
    if (l.params < 0 || l.parameter_tensors < 0 || l.memory_bytes_per_sample < 0 ||
        l.saved_activation_bytes_per_sample < 0 || l.output_bytes_per_sample < 0 ||
        l.transient_bytes_per_sample < 0 || !(l.forward_flops_per_sample >= 0.0) ||
        !(l.backward_flops_per_sample >= 0.0)) {
      return at + "sizes, FLOPs and bytes must not be negative";
    }
    if (l.params > 0 && l.parameter_tensors == 0) {
      return at + "parameter_tensors must be positive when params is";
    }
  }
  return {};
}

}  // namespace

std::string validate(const TransformerSpec& spec) {
  if (spec.causal_mask_buffer && spec.family != ModelFamily::kGpt) {
    return "causal_mask_buffer is minGPT's per-block mask buffer: family gpt only";
  }
  if (spec.family == ModelFamily::kT5) return validate_t5(spec);
  if (spec.family == ModelFamily::kCustom) return validate_custom(spec);
  if (spec.n_layers <= 0) return must_be_positive("n_layers", spec.n_layers);
  if (spec.d_model <= 0) return must_be_positive("d_model", spec.d_model);
  if (spec.n_heads <= 0) return must_be_positive("n_heads", spec.n_heads);
  if (spec.n_kv_heads <= 0) return must_be_positive("n_kv_heads", spec.n_kv_heads);
  if (spec.ffn_dim <= 0) return must_be_positive("ffn_dim", spec.ffn_dim);
  if (spec.vocab <= 0) return must_be_positive("vocab", spec.vocab);
  if (uses_learned_positions(spec.family) && spec.max_seq_len <= 0) {
    return must_be_positive("max_seq_len", spec.max_seq_len) +
           "; gpt and mpt size their learned position table with it";
  }
  if (spec.max_seq_len < 0) {
    return "max_seq_len must not be negative (got " + std::to_string(spec.max_seq_len) + ")";
  }
  if (spec.d_model % spec.n_heads != 0) {
    return "n_heads (" + std::to_string(spec.n_heads) + ") must divide d_model (" +
           std::to_string(spec.d_model) + ")";
  }
  if (spec.n_heads % spec.n_kv_heads != 0) {
    return "n_kv_heads (" + std::to_string(spec.n_kv_heads) + ") must divide n_heads (" +
           std::to_string(spec.n_heads) + ")";
  }
  return {};
}

}  // namespace fsdpsim::models
