// parameter_count, validate(spec, options) and build_workload: dispatch to the family builders
// (gpt_family.cpp, llama_family.cpp) and assemble embedding, blocks and head in forward order;
// t5 and custom assemble their own layer lists (t5_family.cpp, custom_family.cpp). Then apply
// the float8 and torch.compile rewrites the options ask for.
#include "models/workload.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "models/autocast_weight_casts.hpp"
#include "models/compile_fusion.hpp"
#include "models/families.hpp"
#include "models/float8_linear.hpp"
#include "models/layer_draft.hpp"

namespace fsdpsim::models {
namespace {

bool is_llama(const TransformerSpec& spec) { return spec.family == ModelFamily::kLlama; }

// torch.compile applies to each transformer block (models/compile_fusion.hpp).
bool compiled(const WorkloadOptions& options, const Layer& layer) {
  return options.compiled && layer.kind == LayerKind::kBlock;
}

// The float8 and torch.compile rewrites of a built workload.
Workload rewritten(Workload workload, const WorkloadOptions& options) {
  const std::int64_t compute_bytes = dtype_bytes(options.compute_dtype);
  const std::int64_t stored_bytes =
      options.weight_dtype ? dtype_bytes(*options.weight_dtype) : compute_bytes;
  for (Layer& layer : workload.layers) {
    // torchtitan converts every nn.Linear but the LM head ("output") to Float8Linear
    // (torchtitan float8 converter: module_filter_fn skips fqn "output").
    const bool float8 = options.float8_linears && layer.kind != LayerKind::kHead &&
                        layer.kind != LayerKind::kChunkedLoss;
    const bool autocast_weights = stored_bytes > compute_bytes;
    if (autocast_weights) add_autocast_weight_casts(layer, stored_bytes, compute_bytes, float8);
    if (float8) {
      convert_linears_to_float8(
          layer,
          options.float8_all_gather ? Float8Weight::kAllGatheredInFloat8
                                    : Float8Weight::kCastAtEachUse,
          autocast_weights ? options.weight_dtype : std::nullopt,
          compiled(options, layer) || options.float8_linear == Float8LinearImpl::kTransformerEngine
              ? Float8Casts::kFused
              : Float8Casts::kEager);
    }
    if (compiled(options, layer)) {
      fuse_for_compile(layer);
      // torch.compile runs autocast inside the graph with the weight cache off (Dynamo/Inductor
      // disable it; pytorch/pytorch#165068's review).
      layer.autocast_weight_copies.clear();
    }
    // The step allocates the listed tensors where saved_activations is the total it copies to the
    // host or recomputes: the two must agree.
    if (!layer.saved_tensors.empty()) {
      Bytes listed{0};
      for (const SavedTensor& t : layer.saved_tensors) listed = listed + t.bytes;
      if (listed != layer.saved_activations) {
        throw std::logic_error("models: layer " + layer.name + " lists " +
                               std::to_string(listed.value()) + " saved bytes of " +
                               std::to_string(layer.saved_activations.value()));
      }
    }
  }
  return workload;
}

std::int64_t embedding_numel(const TransformerSpec& spec) {
  return total_numel(is_llama(spec) ? detail::llama_embedding_parameters(spec)
                                    : detail::gpt_embedding_parameters(spec));
}

std::int64_t block_numel(const TransformerSpec& spec) {
  return total_numel(is_llama(spec) ? detail::llama_block_parameters(spec)
                                    : detail::gpt_block_parameters(spec));
}

std::int64_t head_numel(const TransformerSpec& spec) {
  return total_numel(is_llama(spec) ? detail::llama_head_parameters(spec)
                                    : detail::gpt_head_parameters(spec));
}

}  // namespace

void add_transient(Layer& layer, Pass pass, Bytes bytes) {
  if (bytes.value() <= 0) return;
  (pass == Pass::kForward ? layer.forward_transient_tensors : layer.backward_transient_tensors)
      .push_back(bytes);
}

std::int64_t parameter_count(const TransformerSpec& spec) {
  if (spec.family == ModelFamily::kT5) return detail::t5_parameter_count(spec);
  if (spec.family == ModelFamily::kCustom) return detail::custom_parameter_count(spec);
  return embedding_numel(spec) + spec.n_layers * block_numel(spec) + head_numel(spec);
}

bool has_buffers(const TransformerSpec& spec) { return spec.causal_mask_buffer; }

std::int64_t block_count(const TransformerSpec& spec) {
  if (spec.family != ModelFamily::kCustom) return spec.n_layers + spec.n_decoder_layers;
  std::int64_t blocks = 0;
  for (const CustomLayerSpec& l : spec.custom_layers) blocks += l.fsdp_unit ? l.count : 0;
  return blocks;
}

std::string validate(const TransformerSpec& spec, const WorkloadOptions& options) {
  if (options.micro_batch <= 0) {
    return "micro_batch must be positive (got " + std::to_string(options.micro_batch) + ")";
  }
  if (options.seq_len <= 0) {
    return "seq_len must be positive (got " + std::to_string(options.seq_len) + ")";
  }
  if (options.decoder_seq_len < 0) {
    return "decoder_seq_len must not be negative (got " + std::to_string(options.decoder_seq_len) +
           ")";
  }
  if (options.decoder_seq_len > 0 && spec.family != ModelFamily::kT5) {
    return "decoder_seq_len applies to encoder-decoder models (t5) only";
  }
  if (options.float8_all_gather && !options.float8_linears) {
    return "a float8 all-gather sends the weights of float8 linears; there are none";
  }
  const bool other_loss = options.loss != LossKernel::kCrossEntropyFp32;
  if (spec.family == ModelFamily::kCustom &&
      (options.float8_linears || options.compiled || other_loss)) {
    return "float8 linears, torch.compile and the loss variants rewrite a model's own kernels; a "
           "custom model lists opaque units (FLOPs and bytes), so they do not apply";
  }
  if (spec.family == ModelFamily::kT5 && other_loss) {
    return "only the fp32 cross-entropy is modelled for t5 (HF T5's nn.CrossEntropyLoss); the "
           "other losses are modelled for the gpt, mpt and llama heads";
  }
  if (options.logits_kept_by_loop != LogitsKeptByLoop::kNone && spec.family != ModelFamily::kGpt &&
      spec.family != ModelFamily::kMpt && spec.family != ModelFamily::kLlama) {
    return "logits kept by the training loop are modelled for the gpt, mpt and llama heads";
  }
  if (options.logits_kept_by_loop == LogitsKeptByLoop::kFp32 &&
      options.loss != LossKernel::kCrossEntropyFp32) {
    return "fp32 logits kept by the training loop need the upcasting cross_entropy loss: the "
           "other losses make no fp32 logits";
  }
  if (options.loss_chunks < 0) {
    return "loss_chunks must not be negative (got " + std::to_string(options.loss_chunks) + ")";
  }
  if (options.loss_chunks > 0) {
    if (spec.family != ModelFamily::kGpt && spec.family != ModelFamily::kMpt &&
        spec.family != ModelFamily::kLlama) {
      return "a chunked loss is modelled for the gpt, mpt and llama heads";
    }
    if (spec.tied_embeddings) {
      return "a chunked loss is modelled for an untied LM head (torchtitan keeps a tied one with "
             "the embedding)";
    }
    if (options.logits_kept_by_loop != LogitsKeptByLoop::kNone) {
      return "a chunked loss makes no logits for the training loop to keep";
    }
    const bool wider_weights = options.residual_dtype && dtype_bytes(*options.residual_dtype) >
                                                             dtype_bytes(options.compute_dtype);
    if (wider_weights) {
      return "a chunked loss is modelled with the weights in the compute dtype (FSDP's "
             "param_dtype, no autocast over wider weights)";
    }
    const std::int64_t tokens = options.micro_batch * options.seq_len;
    if (tokens % options.loss_chunks != 0) {
      return "the " + std::to_string(tokens) + " tokens of a micro-batch do not split into " +
             std::to_string(options.loss_chunks) +
             " equal chunks (ChunkedLossWrapper checks that they do)";
    }
  }
  const bool learned_positions =
      spec.family == ModelFamily::kGpt || spec.family == ModelFamily::kMpt;
  if (learned_positions && options.seq_len > spec.max_seq_len) {
    return "seq_len (" + std::to_string(options.seq_len) + ") exceeds max_seq_len (" +
           std::to_string(spec.max_seq_len) + ") of " + spec.name +
           ": the learned position table has max_seq_len rows";
  }
  return {};
}

Workload build_workload(const TransformerSpec& spec, const WorkloadOptions& options) {
  std::string problem = validate(spec);
  if (problem.empty()) problem = validate(spec, options);
  if (!problem.empty()) throw std::invalid_argument("build_workload: " + problem);

  if (spec.family == ModelFamily::kT5) {
    return rewritten(detail::build_t5_workload(spec, options), options);
  }
  if (spec.family == ModelFamily::kCustom) return detail::build_custom_workload(spec, options);
  const detail::BuildContext ctx = detail::make_context(options);
  Workload workload;
  workload.layers.reserve(static_cast<std::size_t>(spec.n_layers) + 2);
  workload.layers.push_back(is_llama(spec) ? detail::build_llama_embedding(spec, ctx)
                                           : detail::build_gpt_embedding(spec, ctx));
  // Blocks are identical but for their name: build one, copy it.
  const Layer block = is_llama(spec) ? detail::build_llama_block(spec, ctx, 0)
                                     : detail::build_gpt_block(spec, ctx, 0);
  for (std::int64_t i = 0; i < spec.n_layers; ++i) {
    workload.layers.push_back(block);
    workload.layers.back().name = "blocks." + std::to_string(i);
  }
  for (Layer& head :
       is_llama(spec) ? detail::build_llama_head(spec, ctx) : detail::build_gpt_head(spec, ctx))
    workload.layers.push_back(std::move(head));
  for (const Layer& layer : workload.layers) workload.total_numel += layer.numel;
  return rewritten(std::move(workload), options);
}

}  // namespace fsdpsim::models
