// Test helper: specs and lookups shared by the models tests.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/transformer_spec.hpp"
#include "models/workload.hpp"

namespace fsdpsim::models::testing {

inline TransformerSpec make_spec(ModelFamily family, std::int64_t layers, std::int64_t d,
                                 std::int64_t heads, std::int64_t kv_heads, std::int64_t ffn,
                                 std::int64_t vocab, std::int64_t max_seq_len) {
  TransformerSpec spec;
  spec.name = "test";
  spec.family = family;
  spec.n_layers = layers;
  spec.d_model = d;
  spec.n_heads = heads;
  spec.n_kv_heads = kv_heads;
  spec.ffn_dim = ffn;
  spec.vocab = vocab;
  spec.max_seq_len = max_seq_len;
  spec.tied_embeddings = family == ModelFamily::kMpt;
  return spec;
}

// MPT as llm-foundry's benchmark yamls build it: ffn = 4d, tied embedding, learned positions.
inline TransformerSpec mpt_spec(std::int64_t layers, std::int64_t d, std::int64_t heads,
                                std::int64_t vocab, std::int64_t max_seq_len) {
  return make_spec(ModelFamily::kMpt, layers, d, heads, heads, 4 * d, vocab, max_seq_len);
}

// The hand-checkable model: 2 layers, d = 64, 4 heads of 16, ffn 256, vocab 100, 8 positions.
inline TransformerSpec tiny_gpt() { return make_spec(ModelFamily::kGpt, 2, 64, 4, 4, 256, 100, 8); }

inline TransformerSpec llama_3_1_8b() {
  return make_spec(ModelFamily::kLlama, 32, 4096, 32, 8, 14336, 128256, 131072);
}

inline WorkloadOptions options(std::int64_t batch, std::int64_t seq, bool flash = true) {
  WorkloadOptions o;
  o.micro_batch = batch;
  o.seq_len = seq;
  o.compute_dtype = Dtype::kBf16;
  o.flash_attention = flash;
  return o;
}

inline const NamedKernel& find_kernel(const std::vector<NamedKernel>& kernels,
                                      const std::string& name) {
  for (const NamedKernel& k : kernels) {
    if (k.name == name) return k;
  }
  throw std::out_of_range("no kernel named " + name);
}

inline double total_flops(const std::vector<NamedKernel>& kernels) {
  double sum = 0.0;
  for (const NamedKernel& k : kernels) sum += k.kernel.flops.value();
  return sum;
}

}  // namespace fsdpsim::models::testing
