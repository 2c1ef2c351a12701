#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "models/workload.hpp"
#include "sim/app/allocator_json.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/expectations.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/model_json.hpp"
#include "sim/app/parallelism_json.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/size_bounds.hpp"
#include "sim/app/sweep_grid.hpp"
#include "sim/fsdp/fsdp_units.hpp"

namespace fsdpsim::app {
std::vector<std::string> override_key_segments(const std::string& key) {
  std::vector<std::string> parts = split_dotted_key(key);
  if (parts.size() <= 2 || (parts.front() != "expect" && parts.front() != "sweep")) return parts;
  // A key of these blocks is a dotted path itself; under expect it may end in a bound.
  const bool bound = parts.front() == "expect" && (parts.back() == "min" || parts.back() == "max");
  const auto last = parts.end() - (bound ? 1 : 0);
  std::string joined = parts[1];
  for (auto it = parts.begin() + 2; it != last; ++it) joined.append(".").append(*it);
  std::vector<std::string> grouped = {parts.front(), joined};
  if (bound) grouped.push_back(parts.back());
  return grouped;
}

std::string json_path_of_keys(const std::vector<std::string>& keys) {
  if (keys.empty()) return "/";
  std::string path;
  for (const std::string& k : keys) path.append("/").append(pointer_token(k));
  return path;
}

void apply_override(nlohmann::json& document, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(fmt::format(
        "--set \"{}\": expected KEY=VALUE, e.g. fsdp.backward_prefetch=none", assignment));
  }
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  for (const std::string& part : split_dotted_key(key)) {
    if (part.empty()) throw ConfigError(fmt::format("--set \"{}\": empty key segment", assignment));
  }
  const std::vector<std::string> parts = override_key_segments(key);
  // A bound misspelt at the end of an expect key would make it part of the result key, refused
  // only once the step is simulated.
  if (parts.size() == 2 && parts.front() == "expect" && parts[1].find('.') != std::string::npos) {
    const std::string tail = parts[1].substr(parts[1].rfind('.') + 1);
    for (const char* bound : {"min", "max"}) {
      if (edit_distance(tail, bound) == 1) {
        throw ConfigError(fmt::format(
            "--set \"{}\": \"{}\" ends in \"{}\", not a bound; did you mean {}? (a key of the "
            "expect block ends in .min or .max, or names a result key alone)",
            assignment, key, tail, bound));
      }
    }
  }
  nlohmann::json value = parse_inline_value(text, fmt::format("--set \"{}\"", assignment));
  nlohmann::json* node = &document;
  std::vector<std::string> above;  // the keys down to `node`
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    // Removing creates nothing: a key under a missing section is not there to remove.
    if (value.is_null() && !node->is_object()) return;
    if (node->is_null()) *node = nlohmann::json::object();
    if (node->is_string()) *node = nlohmann::json{{"preset", node->get<std::string>()}};
    if (!node->is_object()) {
      // The scenario's value where the key's parent should be: "/training" when the file has
      // "training": [], "/training/micro_batch" for training.micro_batch.x.
      throw ConfigError(
          fmt::format("--set \"{}\": {}: expected an object to set \"{}\" in, found {}", assignment,
                      json_path_of_keys(above), part, describe_json_type(*node)));
    }
    if (i + 1 == parts.size()) {
      // null removes the key, as in a JSON merge patch (RFC 7386): its default then holds.
      if (value.is_null()) {
        node->erase(part);
      } else {
        (*node)[part] = value;
      }
      return;
    }
    if (value.is_null() && !node->contains(part)) return;
    above.push_back(part);
    // A section the file sets to null is an error the loader reports; filling it in here would
    // make every other key of it silently its default.
    if (const auto it = node->find(part); it != node->end() && it->is_null()) {
      throw ConfigError(fmt::format(
          "--set \"{}\": \"{}\" is null in the scenario; expected an object to set a key in",
          assignment, fmt::join(above, ".")));
    }
    node = &(*node)[part];
  }
}

std::string json_path_of(const std::string& dotted_key) {
  return json_path_of_keys(override_key_segments(dotted_key));
}

bool error_names_key(const std::string& message, const std::string& key) {
  // apply_override's message quotes the assignment: "--set \"a.b.c=1\": /a/b: expected an object
  // to set \"c\" in, found ...".
  if (message.find(": expected an object to set \"") != std::string::npos)
    return message.find(fmt::format("\"{}=", key)) != std::string::npos;
  const std::string path = json_path_of(key);
  for (std::size_t end = 1; end <= path.size(); ++end) {
    if (end != path.size() && path[end] != '/') continue;
    if (message.find(fmt::format(": {}: unknown key", path.substr(0, end))) != std::string::npos)
      return true;
  }
  return false;
}

Scenario load_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                       const PresetLocator& presets, const std::vector<std::string>& origins) {
  return scenario_from_json(read_json_file(file), file, overrides, presets, origins);
}

namespace {

// FSDP2's last_unit_reshard_after_forward names a unit the model and wrap policy must have, the
// last before the root; when it is the only one, reshard_after_forward has none left to set.
void check_per_unit_reshard(const Scenario& s, const nlohmann::json* fsdp, const std::string& f) {
  if (fsdp == nullptr || !fsdp->is_object() || s.fsdp.version != 2 ||
      !fsdp->contains("last_unit_reshard_after_forward")) {
    return;
  }
  const bool whole_model = s.fsdp.wrap_policy == fsdp::WrapPolicy::kWholeModel;
  const std::int64_t units = fsdp::unit_count_before_root(models::block_count(s.model), s.fsdp);
  if (units == 0) {
    throw ConfigError(f, "/fsdp/last_unit_reshard_after_forward",
                      fmt::format("there is no unit before the root to set ({})",
                                  whole_model ? "wrap_policy whole_model"
                                              : s.model.name + " has no block to wrap"));
  }
  if (units == 1 && fsdp->contains("reshard_after_forward")) {
    throw ConfigError(f, "/fsdp/reshard_after_forward",
                      "the only unit before the root is the last one, which "
                      "last_unit_reshard_after_forward sets; reshard_after_forward would do "
                      "nothing");
  }
}

// fsdp.wrap_embedding_and_head takes a model with one token embedding and one LM head, untied.
void check_embedding_and_head_units(const Scenario& s, const nlohmann::json* fsdp,
                                    const std::string& f) {
  if (!s.fsdp.wrap_embedding_and_head) return;
  const models::ModelFamily family = s.model.family;
  if (family == models::ModelFamily::kT5 || family == models::ModelFamily::kCustom) {
    throw ConfigError(f, "/fsdp/wrap_embedding_and_head",
                      fmt::format("wraps a decoder's token embedding and its final norm with the "
                                  "LM head; {} is {}",
                                  s.model.name,
                                  family == models::ModelFamily::kT5
                                      ? "an encoder-decoder (t5) with an embedding for each"
                                      : "a custom model, whose units are its own"));
  }
  if (s.model.tied_embeddings) {
    // torchtitan's apply_fsdp (weight tying, torchtitan#2580): fully_shard([tok_embeddings, norm,
    // output]) with reshard_after_forward only under the "always" policy: one unit gathered as
    // the root's forward starts and kept to the end of backward, as the root is here.
    throw ConfigError(
        f, "/fsdp/wrap_embedding_and_head",
        fmt::format("{} ties its LM head to the embedding's table, so torchtitan puts both, with "
                    "the final norm, in one unit it keeps unsharded from forward to backward, as "
                    "the root holds them when wrap_embedding_and_head is false (torchtitan's "
                    "\"always\" policy, which reshards that unit, is the root's "
                    "reshard_after_forward true)",
                    s.model.name));
  }
  if (fsdp != nullptr && fsdp->contains("root_reshard_after_forward")) {
    throw ConfigError(f, "/fsdp/root_reshard_after_forward",
                      "with wrap_embedding_and_head the root holds no parameter to reshard (the "
                      "head's unit is the last unit: last_unit_reshard_after_forward)");
  }
}

// training.loss_chunks: torchtitan's ChunkedLossWrapper drives the LM head's FSDP2 unit, the
// head's of wrap_embedding_and_head (a model that check_embedding_and_head_units accepts), over
// weights in the compute dtype.
void check_chunked_loss(const Scenario& s, const std::string& f) {
  if (s.training.loss_chunks == 0) return;
  if (s.training.parallelism != fsdp::Parallelism::kFsdp || s.fsdp.version != 2 ||
      !s.fsdp.wrap_embedding_and_head) {
    throw ConfigError(f, "/training/loss_chunks",
                      "torchtitan's ChunkedLossWrapper is modelled with FSDP2 and torchtitan's "
                      "units, whose head unit ([norm, output]) it keeps unsharded over its chunks: "
                      "set parallelism fsdp, fsdp.version 2 and fsdp.wrap_embedding_and_head true");
  }
  if (s.training.compute_dtype(s.fsdp.param_dtype) != s.fsdp.param_dtype) {
    throw ConfigError(f, "/training/loss_chunks",
                      fmt::format("modelled with the weights in the compute dtype (torchtitan's "
                                  "MixedPrecisionPolicy, no autocast); found param_dtype {} under "
                                  "autocast_dtype {}",
                                  dtype_name(s.fsdp.param_dtype),
                                  dtype_name(s.training.compute_dtype(s.fsdp.param_dtype))));
  }
}

// The fused attention kernels run head dimensions that are multiples of 8, up to 256 for
// flash-attn 2 and SDPA's flash and cuDNN backends (sdp_utils.cpp check_head_dim_size_flash;
// flash-attn 2's README), up to 128 for flash-attn 1.x and its Triton port (their READMEs).
void check_flash_head_dim(const Scenario& s, const nlohmann::json& training, const std::string& f) {
  const models::ModelFamily family = s.model.family;
  if (!s.training.flash_attention || family == models::ModelFamily::kCustom ||
      family == models::ModelFamily::kT5 || s.model.n_heads <= 0) {
    return;
  }
  const std::int64_t head_dim = s.model.d_model / s.model.n_heads;
  const bool older = s.training.flash_kernel == FlashKernel::kFlash1 ||
                     s.training.flash_kernel == FlashKernel::kTriton;
  const std::int64_t most = older ? 128 : 256;
  if (head_dim % 8 == 0 && head_dim <= most) return;
  throw ConfigError(
      f, training.contains("flash_kernel") ? "/training/flash_kernel" : "/training/flash_attention",
      fmt::format("expected a head dimension the fused attention kernel runs, a multiple of 8 up "
                  "to {} ({}), found {} (d_model {} / {} heads); set training.flash_attention "
                  "false for the unfused attention",
                  most,
                  older ? "flash-attn 1.x and its Triton port"
                        : "flash-attn 2, SDPA's flash and cuDNN backends",
                  head_dim, s.model.d_model, s.model.n_heads));
}

// The scenario in `document`, every override applied.
Scenario parse_scenario(const nlohmann::json& document, const std::filesystem::path& file,
                        const PresetLocator& presets) {
  const std::string f = file.string();
  JsonObjectReader r(document, f, "");
  r.schema_version(kScenarioSchemaVersion, /*required=*/true);
  Scenario s;
  s.file = file;
  s.name = r.name("name", file.stem().string());
  s.description = r.string("description", "");
  const std::string parallelism_name =
      r.choice("parallelism", {"fsdp", "ddp", "deepspeed_zero3"}, "fsdp");
  const fsdp::Parallelism parallelism = parallelism_name == "ddp" ? fsdp::Parallelism::kDdp
                                        : parallelism_name == "deepspeed_zero3"
                                            ? fsdp::Parallelism::kDeepSpeedZero3
                                            : fsdp::Parallelism::kFsdp;
  s.model = model_from_json(r.require("model"), file, "/model", presets);
  s.hardware = hardware_from_json(r.require("hardware"), file, "/hardware", presets);
  const nlohmann::json* training = &r.require("training");
  // Before the training section's own checks, which would ask for flash_attention true.
  if (s.model.family == models::ModelFamily::kT5 && training->is_object() &&
      training->contains("flash_kernel")) {
    throw ConfigError(f, "/training/flash_kernel",
                      "picks a fused attention kernel; HF T5 attention is unfused (it adds a "
                      "relative position bias to the scores), so there is none to pick: drop the "
                      "key");
  }
  s.training = training_from_json(*training, f, parallelism);
  s.fsdp = parallel_config_from_json(r.child("fsdp"), r.child("ddp"), r.child("deepspeed"), f,
                                     parallelism, s.hardware.cluster);
  s.allocator = allocator_from_json(r.child("allocator"), f, s.hardware.cluster.gpu.usable_memory(),
                                    s.hardware.cluster.gpu.hbm);
  // Checked here, so that run and explain reject a malformed block as check and sweep do, in the
  // file's key order as sweep reads it (the first of two bad axes is the one both name).
  if (const nlohmann::json* expect = r.child("expect"))
    s.expectations = parse_expectations(*expect, file);
  if (const nlohmann::json* sweep = r.child("sweep"))
    (void)parse_sweep_block(*sweep, f, sweep_keys_in_file_order(file));
  r.finish();

  // Cross-section checks.
  const std::int64_t world = s.hardware.cluster.world_size();
  const std::int64_t per_step = s.training.micro_batch * world;
  if (s.training.global_batch % per_step != 0) {
    throw ConfigError(
        f, "/training/global_batch",
        fmt::format("global_batch {} is not a multiple of micro_batch {} x {} GPUs = {}",
                    s.training.global_batch, s.training.micro_batch, world, per_step));
  }
  if (s.training.global_batch / per_step > size_bounds::kMicroBatchesPerStep) {
    throw ConfigError(
        f, "/training/global_batch",
        fmt::format("global_batch {} is {} micro-batches of {} x {} GPUs per optimizer step; at "
                    "most {} are simulated",
                    s.training.global_batch, s.training.global_batch / per_step,
                    s.training.micro_batch, world, size_bounds::kMicroBatchesPerStep));
  }
  if (s.training.no_sync && s.training.global_batch == per_step) {
    throw ConfigError(
        f, "/training/no_sync",
        fmt::format("defers the gradient reduction to a step's last micro-batch; global_batch {} "
                    "is one micro-batch of {} x {} GPUs, so it would do nothing",
                    s.training.global_batch, s.training.micro_batch, world));
  }
  // FlatParamHandle.prepare_gradient_for_backward (torch/distributed/fsdp/_flat_param.py):
  // "Gradient accumulation outside `no_sync()` does not work with CPU offloading": the sharded
  // gradient already on the host is never saved for the post-backward's sum, so each
  // micro-batch's copy to the host replaces the last one's (test_fsdp_grad_acc.py tests offload
  // inside no_sync() only).
  if (s.training.parallelism == fsdp::Parallelism::kFsdp && s.fsdp.version == 1 &&
      s.fsdp.cpu_offload && s.training.global_batch > per_step && !s.training.no_sync) {
    throw ConfigError(
        f, "/fsdp/cpu_offload",
        fmt::format("FSDP1 with CPU offload cannot accumulate gradients across micro-batches "
                    "outside no_sync (PyTorch does not support it: the gradient already on the "
                    "host is not summed with the next); global_batch {} is {} micro-batches of "
                    "{} x {} GPUs: "
                    "set training.no_sync or one micro-batch per step",
                    s.training.global_batch, s.training.global_batch / per_step,
                    s.training.micro_batch, world));
  }
  std::int64_t layers = s.model.n_layers + s.model.n_decoder_layers;
  for (const models::CustomLayerSpec& l : s.model.custom_layers) layers += l.count;
  const std::int64_t micro_batches = s.training.global_batch / per_step;
  if (layers * micro_batches > size_bounds::kLayerPassesPerStep) {
    throw ConfigError(
        f, "/training/global_batch",
        fmt::format("{} layers x {} micro-batches per optimizer step = {} layer passes; at most {} "
                    "are simulated",
                    layers, micro_batches, layers * micro_batches,
                    size_bounds::kLayerPassesPerStep));
  }
  check_per_unit_reshard(s, r.child("fsdp"), f);
  check_embedding_and_head_units(s, r.child("fsdp"), f);
  check_chunked_loss(s, f);
  // The only module buffer fsdpsim models is gpt's causal mask (model.causal_mask_buffer,
  // models::has_buffers): on any other model the buffers' dtype and broadcast change nothing.
  if (!models::has_buffers(s.model)) {
    const auto refuse_if_given = [&](const char* section, const char* key, const char* what) {
      const nlohmann::json* parent = r.child(section);
      if (parent == nullptr || !parent->is_object() || !parent->contains(key)) return;
      throw ConfigError(
          f, fmt::format("/{}/{}", section, key),
          fmt::format("{} the model's buffers, and {} holds none that fsdpsim models (only gpt's "
                      "causal-mask buffer, model.causal_mask_buffer): it would change nothing",
                      what, s.model.name));
    };
    refuse_if_given("fsdp", "buffer_dtype", "sets the dtype of");
    refuse_if_given("ddp", "broadcast_buffers", "broadcasts");
  }
  if (s.training.decoder_seq_len > 0 && s.model.family != models::ModelFamily::kT5) {
    throw ConfigError(f, "/training/decoder_seq_len",
                      fmt::format("applies to encoder-decoder models (t5); {} has no decoder input",
                                  s.model.name));
  }
  if (s.model.family == models::ModelFamily::kT5 && s.training.flash_attention &&
      training->contains("flash_attention")) {
    throw ConfigError(f, "/training/flash_attention",
                      "HF T5 attention is unfused (it adds a relative position bias to the scores, "
                      "which FlashAttention does not take); drop the key or set it to false");
  }

  if (s.training.rms_norm && s.model.family != models::ModelFamily::kLlama &&
      s.model.family != models::ModelFamily::kT5) {
    throw ConfigError(f, "/training/rms_norm",
                      fmt::format("applies to models that normalize with RMSNorm (llama, t5); {} "
                                  "has none",
                                  s.model.name));
  }
  const bool custom = s.model.family == models::ModelFamily::kCustom;
  check_flash_head_dim(s, *training, f);
  for (const auto& [key, on] :
       {std::pair<const char*, bool>{"matmul_dtype", s.training.float8_linears()},
        {"compiled", s.training.compiled},
        {"unpad_attention", s.training.unpad_attention},
        {"loss", s.training.loss != LossKernel::kCrossEntropyFp32}}) {
    if (custom && on) {
      throw ConfigError(f, fmt::format("/training/{}", key),
                        "rewrites a model's own kernels; a custom model lists opaque units "
                        "(FLOPs and bytes), so it does not apply");
    }
  }
  if (custom) {
    // A custom model's units are opaque: no attention core, no nn.Linear to wrap or recompute.
    // flash_attention false (unfused, as a scenario written for minGPT says) asks for nothing.
    const bool asks_for_kernel =
        training->contains("flash_kernel") ||
        (training->contains("flash_attention") && training->at("flash_attention") == true);
    if (asks_for_kernel) {
      throw ConfigError(f,
                        training->contains("flash_kernel") ? "/training/flash_kernel"
                                                           : "/training/flash_attention",
                        "picks an attention kernel; a custom model lists opaque units (FLOPs "
                        "and bytes) with no attention of fsdpsim's, so it does not apply (leave "
                        "flash_kernel out and flash_attention out or false)");
    }
    if (s.training.activation_checkpointing == fsdp::ActivationCheckpointing::kAttention) {
      throw ConfigError(f, "/training/activation_checkpointing",
                        "attention recomputes the attention core of a block; a custom model's "
                        "units have none (full or selective recompute whole units)");
    }
    if (s.training.activation_checkpointing == fsdp::ActivationCheckpointing::kSelectiveOp) {
      throw ConfigError(f, "/training/activation_checkpointing",
                        "selective_op saves the outputs of a block's mm and attention ops; a "
                        "custom model's units are opaque, with none of their own (full or "
                        "selective recompute whole units)");
    }
    if (s.fsdp.wrap_policy == fsdp::WrapPolicy::kBlockAndLinear) {
      throw ConfigError(f, "/fsdp/wrap_policy",
                        "block_and_linear wraps each nn.Linear; a custom model's units are "
                        "opaque, with no linears of their own to wrap");
    }
    // Layers with fsdp_unit false stay in the root unit and are never checkpointed: with no
    // other layer, checkpointing and the wrap policy have no block to act on.
    const bool has_blocks = models::block_count(s.model) > 0;
    const nlohmann::json* fsdp_section = r.child("fsdp");
    if (!has_blocks &&
        s.training.activation_checkpointing != fsdp::ActivationCheckpointing::kNone) {
      throw ConfigError(f, "/training/activation_checkpointing",
                        "recomputes blocks (layers with fsdp_unit true); every layer of this "
                        "custom model has fsdp_unit false, so it would do nothing");
    }
    if (!has_blocks && fsdp_section != nullptr && fsdp_section->is_object() &&
        fsdp_section->contains("wrap_policy")) {
      throw ConfigError(f, "/fsdp/wrap_policy",
                        "groups blocks (layers with fsdp_unit true) into units; every layer of "
                        "this custom model has fsdp_unit false and stays in the root unit, so it "
                        "would do nothing");
    }
  }
  // selective checkpoints the n-th, 2n-th, ... block (StepBuilder::checkpoint_mode): past the
  // model's blocks it checkpoints none.
  if (const std::int64_t blocks = models::block_count(s.model);
      s.training.activation_checkpointing == fsdp::ActivationCheckpointing::kSelective &&
      blocks > 0 && s.training.checkpoint_every_n_blocks > blocks) {
    const bool given = training->contains("checkpoint_every_n_blocks");
    throw ConfigError(
        f, given ? "/training/checkpoint_every_n_blocks" : "/training/activation_checkpointing",
        fmt::format("selective checkpoints the blocks whose number (from 1) is a multiple of "
                    "{}{}; {} has {} block{}, so it would checkpoint none",
                    s.training.checkpoint_every_n_blocks,
                    given ? "" : " (checkpoint_every_n_blocks' default)", s.model.name, blocks,
                    blocks == 1 ? "" : "s"));
  }
  if (s.training.unpad_attention &&
      (s.training.compiled || s.model.family == models::ModelFamily::kT5)) {
    throw ConfigError(f, "/training/unpad_attention",
                      s.training.compiled
                          ? "not modelled under torch.compile (its host reads break the graph)"
                          : "HF T5 attention is unfused; there is no fused kernel to unpad around");
  }
  if (s.model.family == models::ModelFamily::kT5 &&
      s.training.loss != LossKernel::kCrossEntropyFp32) {
    throw ConfigError(f, "/training/loss",
                      "only cross_entropy is modelled for t5: the other losses are modelled for "
                      "the gpt, mpt and llama heads; HF T5 computes its loss with "
                      "nn.CrossEntropyLoss");
  }
  if ((custom || s.model.family == models::ModelFamily::kT5) &&
      s.training.logits_kept_by_loop != LogitsKeptByLoop::kNone) {
    throw ConfigError(f, "/training/logits_kept_by_loop",
                      fmt::format("logits kept by the training loop are modelled for the gpt, mpt "
                                  "and llama heads; {} is a {} model",
                                  s.model.name, custom ? "custom" : "t5"));
  }
  if (s.training.optimizer_state_dtype &&
      (s.training.parallelism != fsdp::Parallelism::kFsdp || s.fsdp.cpu_offload)) {
    throw ConfigError(f, "/training/optimizer_state_dtype",
                      s.fsdp.cpu_offload
                          ? "bf16 states run in AdamW's fused CUDA kernel; with cpu_offload the "
                            "host steps, so they are not modelled there"
                          : "bf16 optimizer states are modelled for FSDP (parallelism fsdp) only");
  }
  if (s.training.param_storage_dtype != Dtype::kFp32 &&
      s.training.parallelism != fsdp::Parallelism::kFsdp) {
    throw ConfigError(f, "/training/param_storage_dtype",
                      "parameters stored below fp32 are modelled for FSDP (parallelism fsdp) "
                      "only; DDP and DeepSpeed keep fp32 parameters here");
  }
  if (s.training.parallelism == fsdp::Parallelism::kDeepSpeedZero3) {
    for (const char* key : {"no_sync", "optimizer_impl"}) {
      if (training->contains(key)) {
        throw ConfigError(f, fmt::format("/training/{}", key),
                          "not modelled for parallelism deepspeed_zero3: DeepSpeed 0.3 reduces "
                          "gradients in every micro-batch and steps with its FusedAdam");
      }
    }
    if (training->contains("clip_grad_norm")) {
      throw ConfigError(f, "/training/clip_grad_norm",
                        "changes nothing for parallelism deepspeed_zero3: DeepSpeed 0.3 computes "
                        "the gradients' norm every step (stage3.py get_grad_norm_direct) and "
                        "clips within its unscale of the fp32 gradients; leave the key out");
    }
    if (s.fsdp.deepspeed.register_external_embedding && !s.model.tied_embeddings) {
      throw ConfigError(
          f, "/deepspeed/register_external_embedding",
          fmt::format("registers the token embedding that a tied LM head reuses; {} has an untied "
                      "head (model key tied_embeddings), so there is nothing to register",
                      s.model.name));
    }
  }
  const bool learned_positions =
      s.model.family == models::ModelFamily::kGpt || s.model.family == models::ModelFamily::kMpt;
  if (learned_positions && s.training.seq_len > s.model.max_seq_len) {
    throw ConfigError(
        f, "/training/seq_len",
        fmt::format("seq_len {} exceeds the model's learned position table (max_seq_len {})",
                    s.training.seq_len, s.model.max_seq_len));
  }
  const Dtype compute = s.training.compute_dtype(s.fsdp.param_dtype);
  // Autocast is modelled over weights wider than its dtype (models/autocast_weight_casts.hpp);
  // DDP's weights stay fp32 whatever param_dtype says (sim/app/simulate_scenario.cpp).
  const Dtype weights =
      s.training.parallelism == fsdp::Parallelism::kDdp ? Dtype::kFp32 : s.fsdp.param_dtype;
  if (compute != weights && dtype_bytes(compute) >= dtype_bytes(weights)) {
    throw ConfigError(
        f, "/training/autocast_dtype",
        fmt::format("expected a dtype narrower than the {} weights (fp32 weights under bf16 or "
                    "fp16 autocast, Composer's amp precisions) or {} itself, found {}: "
                    "autocast's casts of the weights to a dtype as wide or wider are not modelled",
                    dtype_name(weights), dtype_name(weights), dtype_name(compute)));
  }
  if (s.training.matmul_dtype && !s.training.float8_linears() &&
      *s.training.matmul_dtype != compute) {
    throw ConfigError(
        f, "/training/matmul_dtype",
        fmt::format("expected fp8 (float8 linears) or the compute dtype {}, found {}; "
                    "autocast_dtype sets the compute dtype",
                    dtype_name(compute), dtype_name(*s.training.matmul_dtype)));
  }
  if (s.fsdp.float8_all_gather && !s.training.float8_linears()) {
    throw ConfigError(f, "/fsdp/float8_all_gather",
                      "all-gathers the weights of float8 linears in float8; it needs "
                      "training.matmul_dtype fp8");
  }
  if (s.fsdp.float8_all_gather &&
      s.training.float8_linear == Float8LinearImpl::kTransformerEngine) {
    throw ConfigError(f, "/fsdp/float8_all_gather",
                      "expected false or absent with training.float8_linear transformer_engine: "
                      "the float8 all-gather is torchao's FSDP2 extension "
                      "(WeightWithDynamicFloat8CastTensor), which te.Linear's weights do not have");
  }
  // FSDPParam.all_gather_inputs raises NotImplementedError for a tensor with
  // fsdp_pre_all_gather (the float8 weights) in SHARDED_POST_FORWARD: no k-rank resharding.
  if (s.fsdp.float8_all_gather) {
    const std::pair<const char*, std::int32_t> resharding[] = {
        {"reshard_after_forward", s.fsdp.reshard_after_forward},
        {"last_unit_reshard_after_forward", s.fsdp.last_unit_reshard_after_forward.value_or(1)}};
    for (const auto& [key, k] : resharding) {
      if (k > 1) {
        throw ConfigError(f, fmt::format("/fsdp/{}", key),
                          fmt::format("expected true or false with fsdp.float8_all_gather, found "
                                      "{}: FSDP2 cannot all-gather float8 weights from a {}-rank "
                                      "post-forward shard (NotImplementedError in "
                                      "FSDPParam.all_gather_inputs)",
                                      k, k));
      }
    }
  }
  if (s.training.float8_linears() && s.hardware.cluster.gpu.peak(Dtype::kFp8).value() <= 0.0) {
    throw ConfigError(
        f, "/training/matmul_dtype",
        fmt::format("float8 linears need fp8 tensor cores, and {} has no fp8 peak "
                    "in its hardware description (hardware.gpu.peak_dense_tflops.fp8)",
                    s.hardware.cluster.gpu.name));
  }
  if (s.hardware.cluster.gpu.peak(compute).value() <= 0.0) {
    throw ConfigError(
        f, s.training.autocast_dtype ? "/training/autocast_dtype" : "/fsdp/param_dtype",
        fmt::format("{} has no {} peak in its hardware description "
                    "(/hardware/gpu/peak_dense_tflops/{}: 0)",
                    s.hardware.cluster.gpu.name, dtype_name(compute), dtype_name(compute)));
  }
  const Dtype gemm = s.training.gemm_peak_dtype(s.fsdp.param_dtype);
  if (s.hardware.cluster.gpu.peak(gemm).value() <= 0.0) {
    throw ConfigError(f, "/training/allow_tf32",
                      fmt::format("{} has no tf32 peak in its hardware description "
                                  "(hardware.gpu.peak_dense_tflops.tf32)",
                                  s.hardware.cluster.gpu.name));
  }
  return s;
}

// Whether `origin` (as for load_scenario) names a grid axis: "--grid", "--grid KEY1+KEY2" or
// "FILE: /sweep/NAME".
bool is_grid_axis(const std::string& origin) {
  return origin == "--grid" || origin.rfind("--grid ", 0) == 0 ||
         origin.find(": /sweep/") != std::string::npos;
}

// overrides[i] as the user gave it: "--set a.b=value", "--grid a.b=value", "--grid a.b+c=...:
// a.b=value" and "FILE: /sweep/a.b: a.b=value" (a tied or a sweep block's axis, and the one key
// of it), or "--calibration PATH" for an option of its own, which takes only the value; long
// values cut.
std::string described_override(const std::string& override_text, std::size_t i,
                               const std::vector<std::string>& origins) {
  const std::string origin = i < origins.size() ? origins[i] : std::string("--set");
  const bool names_key = origin == "--set" || is_grid_axis(origin);
  const std::string shown =
      names_key ? override_text : override_text.substr(override_text.find('=') + 1);
  constexpr std::size_t kShown = 80;
  const bool axis_named = origin != "--grid" && is_grid_axis(origin);
  return fmt::format("{}{}{}{}", origin, axis_named ? ": " : " ", shown.substr(0, kShown),
                     shown.size() > kShown ? "..." : "");
}

// --set KEY=null removes KEY, and where the scenario holds no KEY there is nothing to remove: right
// for a key left at its default, a silent no-op for a misspelt one. So the key is tried with a
// value, and one the loader does not know is refused as it would be were it set.
void refuse_removing_unknown_key(const nlohmann::json& document, const std::string& assignment,
                                 const std::filesystem::path& file, const PresetLocator& presets) {
  const std::string key = assignment.substr(0, assignment.find('='));
  nlohmann::json probe = document;
  try {
    apply_override(probe, key + "={}");
  } catch (const ConfigError&) {
    throw ConfigError(fmt::format(
        "--set \"{}\": nothing to remove, and {} is not a scenario key (it is inside a value that "
        "is not an object)",
        assignment, key));
  }
  try {
    (void)parse_scenario(probe, file, presets);
  } catch (const ConfigError& e) {
    if (!error_names_key(e.what(), key)) return;  // a known key that takes no object
    throw ConfigError(
        fmt::format("--set \"{}\": nothing to remove, and {} is not a scenario key ({})",
                    assignment, key, e.what()));
  }
}

}  // namespace

void check_overrides_kept(const std::vector<std::string>& overrides,
                          const std::vector<std::string>& origins) {
  const auto origin = [&](std::size_t i) {
    return i < origins.size() ? origins[i] : std::string("--set");
  };
  const auto key = [&](std::size_t i) { return overrides[i].substr(0, overrides[i].find('=')); };
  const auto is_axis = [&](std::size_t i) { return origin(i) != "--set"; };
  for (std::size_t later = 0; later < overrides.size(); ++later) {
    const std::string k = key(later);
    for (std::size_t earlier = 0; earlier < later; ++earlier) {
      const std::string lost = key(earlier);
      const bool inside =
          lost.size() > k.size() && lost.compare(0, k.size(), k) == 0 && lost[k.size()] == '.';
      const bool same = lost == k && is_axis(later) && !is_axis(earlier);
      if (!inside && !same) continue;
      const std::string what = described_override(overrides[earlier], earlier, origins);
      // The axis as the user wrote it: "--grid KEY" for one key given on the command line.
      const std::string axis = origin(later) == "--grid" ? "--grid " + k : origin(later);
      throw ConfigError(
          is_axis(later)
              ? fmt::format("{}: sets {} at every point, so {} would do nothing; {}", axis, k, what,
                            same ? "give one of them" : "put it in the grid's values")
              : fmt::format("{} {}: replaces the whole {}, so {} given before it would do "
                            "nothing; give that one after it",
                            origin(later), overrides[later], k, what));
    }
  }
}

Scenario scenario_from_json(nlohmann::json document, const std::filesystem::path& file,
                            const std::vector<std::string>& overrides, const PresetLocator& presets,
                            const std::vector<std::string>& origins) {
  if (!document.is_object()) {
    throw ConfigError(file.string(), "/",
                      fmt::format("expected an object, found {}", describe_json_type(document)));
  }
  check_overrides_kept(overrides, origins);
  // The scenario as written, kept for naming the --set options behind an error (below); a sweep's
  // points, whose errors are not explained so, copy nothing.
  const bool only_set = std::all_of(origins.begin(), origins.end(),
                                    [](const std::string& o) { return o == "--set"; });
  const nlohmann::json as_written = overrides.empty() || !only_set ? nlohmann::json() : document;
  // A --set KEY=null that finds no KEY (in the file or set by an earlier override) removes
  // nothing: checked once every override is in (refuse_removing_unknown_key).
  std::vector<std::size_t> removed_nothing;
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    const std::string& o = overrides[i];
    const bool set = i >= origins.size() || origins[i] == "--set";
    if (set &&
        parse_inline_value(o.substr(o.find('=') + 1), fmt::format("--set \"{}\"", o)).is_null() &&
        find_dotted_key(document, o.substr(0, o.find('='))) == nullptr) {
      removed_nothing.push_back(i);
    }
    apply_override(document, o);
  }
  for (const std::size_t i : removed_nothing)
    refuse_removing_unknown_key(document, overrides[i], file, presets);
  try {
    Scenario s = parse_scenario(document, file, presets);
    for (std::size_t i = 0; i < overrides.size(); ++i)
      s.overrides.push_back(described_override(overrides[i], i, origins));
    return s;
  } catch (const ConfigError& e) {
    // An error at a key an override set says where the value came from.
    const std::string what = e.what();
    const auto override_path = [&](std::size_t i) {
      return json_path_of(overrides[i].substr(0, overrides[i].find('=')));
    };
    // The last override of a key is the one that holds.
    for (std::size_t i = overrides.size(); i-- > 0;) {
      const std::string path = override_path(i);
      // ": /path:" leads a message about the value; ": /path)" ends one about the file it names;
      // an unknown key the override created may be one of its parents (--set bogus.x=1: /bogus).
      // An error inside a value the override gave (an object: --set 'model={...}') is its too.
      if (error_names_key(what, overrides[i].substr(0, overrides[i].find('='))) ||
          what.find(": " + path + ":") != std::string::npos ||
          what.find(": " + path + "/") != std::string::npos ||
          what.find(": " + path + ")") != std::string::npos) {
        throw ConfigError(fmt::format("{} (the value comes from {})", what,
                                      described_override(overrides[i], i, origins)));
      }
    }
    // Else one that names the override's key with its value, "(/path: value)", as the other
    // side of a bound between two keys.
    for (std::size_t i = overrides.size(); i-- > 0;) {
      const std::string path = override_path(i);
      if (what.find("(" + path + ":") != std::string::npos) {
        throw ConfigError(fmt::format("{} ({} comes from {})", what, path,
                                      described_override(overrides[i], i, origins)));
      }
    }
    // Else, where the scenario loads without the --set options, name those that break it: each
    // that does alone, or all of them where none does (--set fsdp.version=2 on a file whose
    // limit_all_gathers only FSDP1 has). Not for a sweep's points, whose reasons would each name
    // every axis's value.
    const auto loads = [&](const std::vector<std::string>& applied) {
      nlohmann::json candidate = as_written;
      try {
        for (const std::string& o : applied) apply_override(candidate, o);
        (void)parse_scenario(candidate, file, presets);
      } catch (const ConfigError&) {
        return false;
      }
      return true;
    };
    if (!overrides.empty() && only_set && loads({})) {
      std::vector<std::string> alone;
      for (std::size_t i = 0; i < overrides.size(); ++i) {
        if (!loads({overrides[i]})) alone.push_back(described_override(overrides[i], i, origins));
      }
      if (alone.empty()) {
        for (std::size_t i = 0; i < overrides.size(); ++i)
          alone.push_back(described_override(overrides[i], i, origins));
      }
      throw ConfigError(fmt::format("{} (valid without the overrides; not with {})", what,
                                    fmt::join(alone, ", ")));
    }
    throw;
  }
}

}  // namespace fsdpsim::app
