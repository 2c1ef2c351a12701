// Internal to fsdpsim_models: per-family parameter counts and layer builders, dispatched by
// workload.cpp. gpt_family.cpp serves kGpt and kMpt (same block; mpt without dropout and, as
// llm-foundry configures it, with a tied embedding); llama_family.cpp serves kLlama;
// t5_family.cpp kT5 and custom_family.cpp kCustom build the whole workload (their layer lists
// are not embedding + n_layers blocks + head).
// Preconditions: validate(spec) is empty and the context is positive.
#pragma once

#include <cstdint>
#include <vector>

#include "models/layer_draft.hpp"
#include "models/transformer_spec.hpp"
#include "models/workload.hpp"

namespace fsdpsim::models::detail {

// Each layer's nn.Parameters' elements, in registration order (Layer::parameter_numels).
std::vector<std::int64_t> gpt_embedding_parameters(const TransformerSpec& spec);
std::vector<std::int64_t> gpt_block_parameters(const TransformerSpec& spec);
std::vector<std::int64_t> gpt_head_parameters(const TransformerSpec& spec);
Layer build_gpt_embedding(const TransformerSpec& spec, const BuildContext& ctx);
Layer build_gpt_block(const TransformerSpec& spec, const BuildContext& ctx, std::int64_t index);
std::vector<Layer> build_gpt_head(const TransformerSpec& spec, const BuildContext& ctx);

std::vector<std::int64_t> llama_embedding_parameters(const TransformerSpec& spec);
std::vector<std::int64_t> llama_block_parameters(const TransformerSpec& spec);
std::vector<std::int64_t> llama_head_parameters(const TransformerSpec& spec);
Layer build_llama_embedding(const TransformerSpec& spec, const BuildContext& ctx);
Layer build_llama_block(const TransformerSpec& spec, const BuildContext& ctx, std::int64_t index);
std::vector<Layer> build_llama_head(const TransformerSpec& spec, const BuildContext& ctx);

std::vector<std::int64_t> t5_head_parameters(const TransformerSpec& spec);
std::int64_t t5_parameter_count(const TransformerSpec& spec);
Workload build_t5_workload(const TransformerSpec& spec, const WorkloadOptions& options);

std::int64_t custom_parameter_count(const TransformerSpec& spec);
Workload build_custom_workload(const TransformerSpec& spec, const WorkloadOptions& options);

}  // namespace fsdpsim::models::detail
