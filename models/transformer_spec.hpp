// Typed description of a model: a transformer (decoder-only gpt/mpt/llama, encoder-decoder t5)
// or a user-listed layer list (custom). STYLE.md: specs are plain aggregates, validated once,
// then immutable. JSON never reaches this layer: sim/app converts it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/custom_layer_spec.hpp"

namespace fsdpsim::models {

enum class ModelFamily : std::uint8_t {
  kGpt,     // minGPT / Megatron GPT: biases, LayerNorm, learned positions, GELU MLP, untied head
  kMpt,     // MosaicML MPT as llm-foundry counts it: like gpt but with a tied embedding
  kLlama,   // RMSNorm, SwiGLU MLP, RoPE, grouped-query attention, untied embedding
  kT5,      // HF T5ForConditionalGeneration: encoder-decoder, relative position bias, T5LayerNorm
  kCustom,  // a list of units with per-sample FLOPs and bytes (custom_layer_spec.hpp)
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
  bool tied_embeddings = false;  // mpt, t5 v1.0: true; gpt, llama, t5 v1.1: false
  // gpt only: each block's attention registers a max_seq_len x max_seq_len causal mask as a
  // module buffer, as minGPT's CausalSelfAttention does (register_buffer of
  // torch.tril(torch.ones(block_size, block_size)), fp32 at construction; karpathy/minGPT
  // mingpt/model.py). Megatron GPT builds its mask per batch instead: false.
  bool causal_mask_buffer = false;

  // t5 only (HF T5Config names in comments). n_layers is the encoder's num_layers.
  std::int64_t n_decoder_layers = 0;  // num_decoder_layers
  std::int64_t d_kv = 0;              // d_kv: q, k, v, o are d_model x (n_heads * d_kv)
  std::int64_t relative_attention_num_buckets = 0;
  bool gated_ffn = false;     // feed_forward_proj "gated-gelu" (v1.1) instead of "relu" (v1.0)
  double dropout_rate = 0.0;  // dropout_rate; 0 emits no dropout kernels

  // custom only: the units in forward order (n_layers, d_model, ... stay 0).
  std::vector<CustomLayerSpec> custom_layers;
};

// Returns an empty string when the spec is consistent, else what is wrong (for the app to report
// against the JSON path). Checks causal_mask_buffer only on gpt, positivity (max_seq_len only for
// gpt/mpt, which have a learned position table), d_model % n_heads, n_heads % n_kv_heads (gpt, mpt,
// llama); the t5 fields; for custom, a non-empty layer list of non-negative sizes
// ("custom_layers/3: ..." prefixes name the offending entry).
std::string validate(const TransformerSpec& spec);

}  // namespace fsdpsim::models
