#include "sim/fsdp/fsdp_units.hpp"

#include <stdexcept>

#include "models/linear_modules.hpp"

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

// A unit for each linear of `layer` (its weight and bias), in forward order, taken out of
// `owner`, the unit that holds the rest of the layer.
void add_linears(std::vector<FsdpUnit>& units, const models::Workload& workload, std::size_t layer,
                 FsdpUnit& owner) {
  const models::Layer& l = workload.layers[layer];
  for (const models::LinearModule& linear : models::linear_modules(l)) {
    FsdpUnit u;
    u.name = l.name + "." + linear.name;
    u.layers.push_back(layer);
    u.linear_module = linear.name;
    u.numel = linear.weight_numel + linear.bias_numel;
    u.parameter_tensors = linear.bias_numel > 0 ? 2 : 1;
    owner.numel -= u.numel;
    owner.parameter_tensors -= u.parameter_tensors;
    owner.nested_linear_numel += u.numel;
    units.push_back(std::move(u));
  }
  if (owner.numel < 0 || owner.parameter_tensors < 0) {
    throw std::logic_error("make_units: the linears of " + l.name +
                           " hold more parameters than the layer");
  }
}

// The units of each linear of block `layer`, then the block's unit with the rest of its
// parameters, in the order their forwards return.
void add_block_and_linears(std::vector<FsdpUnit>& units, const models::Workload& workload,
                           std::size_t layer) {
  FsdpUnit rest;
  rest.name = workload.layers[layer].name;
  add_layer(rest, workload, layer);
  add_linears(units, workload, layer, rest);
  units.push_back(std::move(rest));
}

}  // namespace

std::vector<FsdpUnit> make_units(const models::Workload& workload, const FsdpConfig& fsdp,
                                 std::int64_t shard_group_size) {
  const WrapPolicy policy = fsdp.wrap_policy;
  // A tied table is the embedding's and the head's at once: torchtitan then puts both in one unit
  // it keeps like the root (scenario_json refuses the option there).
  if (fsdp.wrap_embedding_and_head && models::tied_weight_numel(workload) > 0)
    throw std::invalid_argument("make_units: wrap_embedding_and_head needs an untied head");
  std::vector<FsdpUnit> units;
  FsdpUnit root;
  root.name = "root";
  root.is_root = true;
  const std::int32_t per_unit = policy == WrapPolicy::kEveryNBlocks ? fsdp.blocks_per_unit : 1;
  std::int32_t in_current = 0;
  // ModuleWrapPolicy({Block, nn.Linear}) wraps the LM head's nn.Linear too, unless it is tied
  // to the embedding's table, which a unit of its own would take from the root's lookup.
  const bool wrap_head_linear =
      policy == WrapPolicy::kBlockAndLinear && models::tied_weight_numel(workload) == 0;
  for (std::size_t i = 0; i < workload.layers.size(); ++i) {
    const models::Layer& layer = workload.layers[i];
    if (layer.kind == models::LayerKind::kChunkedLoss) {
      // ChunkedLossWrapper's lm_head is fully_shard([norm, output])'s: the head's unit.
      if (!fsdp.wrap_embedding_and_head || units.empty())
        throw std::invalid_argument("make_units: a chunked loss needs wrap_embedding_and_head");
      add_layer(units.back(), workload, i);
      continue;
    }
    if (fsdp.wrap_embedding_and_head &&
        (layer.kind == models::LayerKind::kEmbedding || layer.kind == models::LayerKind::kHead)) {
      units.emplace_back().name = layer.name;
      add_layer(units.back(), workload, i);
      in_current = 0;
      continue;
    }
    if (layer.kind != models::LayerKind::kBlock || policy == WrapPolicy::kWholeModel) {
      add_layer(root, workload, i);
      if (wrap_head_linear && layer.kind == models::LayerKind::kHead)
        add_linears(units, workload, i, root);
      continue;
    }
    if (policy == WrapPolicy::kBlockAndLinear) {
      add_block_and_linears(units, workload, i);
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
    const models::Layer& last_layer = workload.layers[u.layers.back()];
    if (u.layers.size() > 1 && last_layer.kind == models::LayerKind::kBlock) {
      // "blocks.4-7", "decoder.blocks.4-7"
      const std::string& last = last_layer.name;
      u.name += '-';
      u.name += last.substr(last.rfind('.') + 1);
    }
    pad(u, shard_group_size);
  }
  pad(root, shard_group_size);
  units.push_back(root);
  return units;
}

std::int64_t unit_count_before_root(std::int64_t blocks, const FsdpConfig& fsdp) {
  const std::int64_t ends = fsdp.wrap_embedding_and_head ? 2 : 0;  // the embedding's, the head's
  if (fsdp.wrap_policy == WrapPolicy::kWholeModel) return ends;
  const std::int64_t per_unit =
      fsdp.wrap_policy == WrapPolicy::kEveryNBlocks ? fsdp.blocks_per_unit : 1;
  return (blocks + per_unit - 1) / per_unit + ends;
}

std::vector<std::size_t> unit_of_layer(const std::vector<FsdpUnit>& units, std::size_t layers) {
  std::vector<std::size_t> owner(layers, 0);
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (!units[u].linear_module.empty()) continue;
    for (std::size_t layer : units[u].layers) owner[layer] = u;
  }
  return owner;
}

std::int64_t layer_gradient_numel(const models::Layer& layer, std::int64_t tied_numel) {
  if (layer.kind == models::LayerKind::kHead) return layer.numel + tied_numel;
  if (layer.kind == models::LayerKind::kEmbedding) return layer.numel - tied_numel;
  return layer.numel;
}

std::vector<std::int64_t> layer_gradient_numels(const models::Layer& layer,
                                                std::int64_t tied_numel) {
  const std::vector<std::int64_t>& own = layer.parameter_numels;
  const bool tied_first = !own.empty() && own.front() == tied_numel;
  if (own.empty() ||
      (tied_numel > 0 && layer.kind == models::LayerKind::kEmbedding && !tied_first)) {
    const std::int64_t numel = layer_gradient_numel(layer, tied_numel);
    return numel > 0 ? std::vector<std::int64_t>{numel} : std::vector<std::int64_t>{};
  }
  std::vector<std::int64_t> out = own;
  if (tied_numel > 0 && layer.kind == models::LayerKind::kHead) out.push_back(tied_numel);
  if (tied_numel > 0 && layer.kind == models::LayerKind::kEmbedding) out.erase(out.begin());
  return out;
}

std::vector<std::int64_t> unit_parameter_numels(const FsdpUnit& unit,
                                                const models::Workload& workload) {
  if (!wraps_whole_layers(unit, workload) || unit.nested_linear_numel > 0) return {};
  std::vector<std::int64_t> out;
  for (const std::size_t l : unit.layers) {
    const models::Layer& layer = workload.layers[l];
    if (layer.numel > 0 && layer.parameter_numels.empty()) return {};
    out.insert(out.end(), layer.parameter_numels.begin(), layer.parameter_numels.end());
  }
  return out;
}

bool wraps_whole_layers(const FsdpUnit& unit, const models::Workload& workload) {
  if (!unit.linear_module.empty()) return false;
  std::int64_t numel = 0;
  for (const std::size_t layer : unit.layers) numel += workload.layers[layer].numel;
  return numel == unit.numel + unit.nested_linear_numel;
}

}  // namespace fsdpsim::fsdp
