// FSDP units (FlatParameters / fully_shard parameter groups) of a workload under a wrapping
// policy: blocks grouped one per unit (transformer_auto_wrap_policy in
// torch/distributed/fsdp/wrap.py), n per unit, or none; the root unit holds what no block unit
// owns (embedding, final norm, LM head — PyTorch's auto-wrap leaves them to the root).
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
};

// Units in post-forward order as FSDP records it: block units in order, then the root (whose
// forward returns last). Preconditions: shard_group_size > 0, blocks_per_unit > 0.
std::vector<FsdpUnit> make_units(const models::Workload& workload, WrapPolicy policy,
                                 std::int32_t blocks_per_unit, std::int64_t shard_group_size);

// For each of `layers` layers, the index of the unit that owns it.
std::vector<std::size_t> unit_of_layer(const std::vector<FsdpUnit>& units, std::size_t layers);

}  // namespace fsdpsim::fsdp
