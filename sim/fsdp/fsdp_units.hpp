// FSDP units (FlatParameters / fully_shard parameter groups) of a workload under a wrapping
// policy: blocks grouped one per unit (transformer_auto_wrap_policy in
// torch/distributed/fsdp/wrap.py), n per unit, none, or each block's linears in units of their
// own nested in the block's (ModuleWrapPolicy({Block, nn.Linear})); the root unit holds what no
// block unit owns (embedding, final norm, LM head — PyTorch's auto-wrap leaves them to the root)
// unless the embedding and the head are units of their own (FsdpConfig::wrap_embedding_and_head).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/workload.hpp"
#include "sim/fsdp/fsdp_config.hpp"

namespace fsdpsim::fsdp {

struct FsdpUnit {
  std::string name;                 // "root", "blocks.0", "blocks.0-3", ...
  std::vector<std::size_t> layers;  // indices into Workload::layers, forward order
  std::int64_t numel = 0;           // parameters of the unit
  std::int32_t parameter_tensors = 0;
  std::int64_t padded_numel = 0;  // right-padded to a multiple of the shard group (_flat_param.py)
  std::int64_t shard_numel = 0;   // padded_numel / shard group: torch.chunk gives ceil(numel / F)
  bool is_root = false;
  // The nn.Linear this unit wraps (NamedKernel::linear_module), inside its one layer; its hooks
  // fire around that linear's kernels, not the layer's. Empty: the unit wraps whole layers.
  std::string linear_module;
  // Parameters of its layers that units of their own hold: the linears of a block, or the LM
  // head's, wrapped by ModuleWrapPolicy({Block, nn.Linear}).
  std::int64_t nested_linear_numel = 0;

  // Whether FSDP manages parameters here: it makes a FlatParamHandle (FSDP1) or an
  // FSDPParamGroup (FSDP2) only for a module that holds parameters of its own
  // (_init_param_handle_from_params returns on an empty list,
  // torch/distributed/fsdp/_init_utils.py; fully_shard's `if params:`,
  // torch/distributed/fsdp/_fully_shard/_fully_shard.py). Without one the unit's forward and
  // pre-backward hooks still run (the root's lazy init and stream waits among them), but nothing is
  // gathered, freed, reduced, prefetched or stepped, and the unit is in neither execution order
  // that prefetching follows.
  bool holds_parameters() const { return numel > 0; }
};

// Units in post-forward order as FSDP records it under fsdp's wrap_policy, blocks_per_unit and
// wrap_embedding_and_head: (wrap_embedding_and_head) the embedding's unit, block units in order,
// each after the units of its linears, then (block_and_linear, untied) the LM head's linear or
// (wrap_embedding_and_head) the head's unit, then the root (whose forward returns last).
// A chunked loss's layer (models::LayerKind::kChunkedLoss) is in the head's unit, with the final
// norm, as torchtitan's fully_shard([norm, output]) has it.
// Preconditions: shard_group_size > 0, blocks_per_unit > 0; wrap_embedding_and_head only with an
// untied head, and wherever there is a chunked loss.
std::vector<FsdpUnit> make_units(const models::Workload& workload, const FsdpConfig& fsdp,
                                 std::int64_t shard_group_size);

// How many units besides the root make_units builds for `blocks` block layers
// (models::block_count) under fsdp's wrap_policy, when it wraps whole blocks (not
// kBlockAndLinear), blocks_per_unit and wrap_embedding_and_head, without building the workload.
// Precondition: blocks_per_unit > 0.
std::int64_t unit_count_before_root(std::int64_t blocks, const FsdpConfig& fsdp);

// The parameters whose gradients autograd makes when `layer`'s backward runs: its own, with a
// tied LM head's table (tied_numel, models::tied_weight_numel) counted at the head, whose backward
// makes that gradient first, and not at the embedding that owns it.
std::int64_t layer_gradient_numel(const models::Layer& layer, std::int64_t tied_numel);

// The same gradients one tensor per parameter, as autograd allocates them, where the layer
// itemizes its parameters (models::Layer::parameter_numels; the tied table is the embedding's
// first); else one tensor of layer_gradient_numel elements. Empty when there is no gradient.
std::vector<std::int64_t> layer_gradient_numels(const models::Layer& layer,
                                                std::int64_t tied_numel);

// The elements of each parameter `unit` holds, in order, when it wraps whole layers that all
// itemize their parameters; else empty (the unit's parameters taken as one tensor).
std::vector<std::int64_t> unit_parameter_numels(const FsdpUnit& unit,
                                                const models::Workload& workload);

// Whether `unit` holds the parameters of its layers, but for those of linears wrapped in units of
// their own (FsdpUnit::nested_linear_numel): not a linear's unit.
bool wraps_whole_layers(const FsdpUnit& unit, const models::Workload& workload);

// For each of `layers` layers, the index of the unit that wraps it whole (a linear's unit wraps
// part of its layer).
std::vector<std::size_t> unit_of_layer(const std::vector<FsdpUnit>& units, std::size_t layers);

}  // namespace fsdpsim::fsdp
