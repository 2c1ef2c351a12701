#include "sim/fsdp/fsdp_units.hpp"

namespace fsdpsim::fsdp {
namespace {

// _flat_param.py (FlatParamHandle._get_shard): the flat parameter is right-padded so that it
// splits into F equal chunks; each rank holds ceil(numel / F) elements. (FSDP2 pads each
// parameter's dim 0 instead; the total differs by at most a few rows, which we neglect.)
void pad(FsdpUnit& unit, std::int64_t shard_group_size) {
  unit.shard_numel = (unit.numel + shard_group_size - 1) / shard_group_size;
  unit.padded_numel = unit.shard_numel * shard_group_size;
}

void add_layer(FsdpUnit& unit, const models::Workload& workload, std::size_t layer) {
  unit.layers.push_back(layer);
  unit.numel += workload.layers[layer].numel;
  unit.parameter_tensors += workload.layers[layer].parameter_tensors;
}

}  // namespace

std::vector<FsdpUnit> make_units(const models::Workload& workload, WrapPolicy policy,
                                 std::int32_t blocks_per_unit, std::int64_t shard_group_size) {
  std::vector<FsdpUnit> units;
  FsdpUnit root;
  root.name = "root";
  root.is_root = true;
  const std::int32_t per_unit = policy == WrapPolicy::kEveryNBlocks ? blocks_per_unit : 1;
  std::int32_t in_current = 0;
  for (std::size_t i = 0; i < workload.layers.size(); ++i) {
    const models::Layer& layer = workload.layers[i];
    if (layer.kind != models::LayerKind::kBlock || policy == WrapPolicy::kWholeModel) {
      add_layer(root, workload, i);
      continue;
    }
    if (in_current == 0) {
      units.emplace_back();
      units.back().name = layer.name;
    }
    add_layer(units.back(), workload, i);
    if (++in_current == per_unit) in_current = 0;
  }
  for (FsdpUnit& u : units) {
    if (u.layers.size() > 1) {  // "blocks.4-7", "decoder.blocks.4-7"
      const std::string& last = workload.layers[u.layers.back()].name;
      u.name += '-';
      u.name += last.substr(last.rfind('.') + 1);
    }
    pad(u, shard_group_size);
  }
  pad(root, shard_group_size);
  units.push_back(root);
  return units;
}

std::vector<std::size_t> unit_of_layer(const std::vector<FsdpUnit>& units, std::size_t layers) {
  std::vector<std::size_t> owner(layers, 0);
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (std::size_t layer : units[u].layers) owner[layer] = u;
  }
  return owner;
}

}  // namespace fsdpsim::fsdp
