// Typed description of a decoder-only transformer (STYLE.md: specs are plain aggregates,
// validated once, then immutable). JSON never reaches this layer: sim/app converts it.
#pragma once

#include <cstdint>
#include <string>

namespace fsdpsim::models {

enum class ModelFamily : std::uint8_t {
  kGpt,    // minGPT / Megatron GPT: biases, LayerNorm, learned positions, GELU MLP, untied head
  kMpt,    // MosaicML MPT as llm-foundry counts it: like gpt but with a tied embedding
  kLlama,  // RMSNorm, SwiGLU MLP, RoPE, grouped-query attention, untied embedding
};

struct TransformerSpec {
  std::string name;
  ModelFamily family = ModelFamily::kGpt;
  std::int64_t n_layers = 0;
  std::int64_t d_model = 0;
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;  // == n_heads unless grouped-query attention (llama)
  std::int64_t ffn_dim = 0;     // MLP hidden size (SwiGLU inner size for llama)
  std::int64_t vocab = 0;
  std::int64_t max_seq_len = 0;  // size of the learned position table (gpt, mpt); unused by llama
  bool tied_embeddings = false;  // mpt: true; gpt, llama: false (honoured for every family)
};

// Returns an empty string when the spec is consistent, else what is wrong (for the app to report
// against the JSON path). Checks positivity (max_seq_len only for gpt/mpt, which have a learned
// position table), d_model % n_heads, n_heads % n_kv_heads.
std::string validate(const TransformerSpec& spec);

}  // namespace fsdpsim::models
