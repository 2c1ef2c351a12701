// FSDP units (FlatParameters) of a workload under the default auto-wrap policy: one unit per
// transformer block, and the root unit holding what no block owns (embedding, final norm, LM
// head) — transformer_auto_wrap_policy in torch/distributed/fsdp/wrap.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/workload.hpp"

namespace fsdpsim::fsdp {

struct FsdpUnit {
  std::string name;                  // "root", "blocks.0", ...
  std::vector<std::size_t> layers;   // indices into Workload::layers, forward order
  std::int64_t numel = 0;            // parameters of the FlatParameter
  std::int64_t padded_numel = 0;     // right-padded to a multiple of the shard group (_flat_param.py)
  std::int64_t shard_numel = 0;      // padded_numel / world: torch.chunk gives ceil(numel / W)
  bool is_root = false;
};

// Units in post-forward order as FSDP records it: blocks in order, then the root (whose forward
// returns last). Precondition: world_size > 0.
std::vector<FsdpUnit> make_units(const models::Workload& workload, std::int64_t world_size);

}  // namespace fsdpsim::fsdp
