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

}  // namespace

std::string validate(const TransformerSpec& spec) {
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
