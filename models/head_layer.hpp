// Internal to fsdpsim_models: the head layer shared by every family: final norm, LM head GEMM
// and the cross-entropy loss, whole or in chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/kernel_factory.hpp"
#include "models/layer_draft.hpp"

namespace fsdpsim::models::detail {

struct HeadDims {
  std::string norm_name;  // "ln_f" (gpt, mpt) or "norm" (llama)
  NormKind norm = NormKind::kLayerNorm;
  std::int64_t d_model = 0;
  std::int64_t vocab = 0;
  // The nn.Parameters' elements: the final norm's, then the LM head weight's unless it is tied.
  std::vector<std::int64_t> parameters;
  // The final norm reads the residual stream in ctx.residual_bytes (gpt, mpt: gpt_family.cpp);
  // when that is wider than the compute dtype, autocast casts the norm's output for the LM head.
  bool residual_input = false;
};

// The head's layers in forward order: the head (final norm, LM head, loss), or under
// ctx.loss_chunks the final norm alone and one chunk of the LM head and the loss (a layer of kind
// kChunkedLoss, Layer::loss_chunking). Preconditions for chunks: an untied head (the LM head's
// weight is the last of dims.parameters), tokens divisible by loss_chunks.
std::vector<Layer> build_head_layers(const HeadDims& dims, const BuildContext& ctx);

// Full passes (a read or a write of the whole tensor each) that log_softmax makes over [T, vocab]
// logits of `element_bytes` per element, forward and backward (head_layer.cpp).
std::int64_t log_softmax_forward_passes(std::int64_t vocab, std::int64_t element_bytes);
std::int64_t log_softmax_backward_passes(std::int64_t vocab, std::int64_t element_bytes);

}  // namespace fsdpsim::models::detail
