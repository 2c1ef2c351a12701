#include "sim/fsdp/fsdp_units.hpp"

namespace fsdpsim::fsdp {
namespace {

// _flat_param.py (FlatParamHandle._get_shard): the flat parameter is right-padded so that it
// splits into `world` equal chunks; each rank holds ceil(numel / world) elements.
void pad(FsdpUnit& unit, std::int64_t world) {
  unit.shard_numel = (unit.numel + world - 1) / world;
  unit.padded_numel = unit.shard_numel * world;
}

}  // namespace

std::vector<FsdpUnit> make_units(const models::Workload& workload, std::int64_t world_size) {
  std::vector<FsdpUnit> units;
  FsdpUnit root{"root", {}, 0, 0, 0, true};
  for (std::size_t i = 0; i < workload.layers.size(); ++i) {
    const models::Layer& layer = workload.layers[i];
    if (layer.kind == models::LayerKind::kBlock) {
      units.push_back(FsdpUnit{layer.name, {i}, layer.numel, 0, 0, false});
      pad(units.back(), world_size);
    } else {
      root.layers.push_back(i);
      root.numel += layer.numel;
    }
  }
  pad(root, world_size);
  units.push_back(root);
  return units;
}

}  // namespace fsdpsim::fsdp
