#include "sim/fsdp/unit_hooks.hpp"

#include <algorithm>

namespace fsdpsim::fsdp {

void run_micro_batch(StepBuilder& s, const std::vector<FsdpUnit>& units, UnitHooks& hooks,
                     bool& in_backward) {
  const std::size_t layers = s.workload().layers.size();
  const std::vector<std::size_t> owner = unit_of_layer(units, layers);
  std::vector<std::vector<engine::TensorId>> saved(units.size());  // per unit, forward order
  // The root unit (last) wraps the whole model: when every layer belongs to a child unit (a
  // custom model made only of FSDP units), its hooks still run first and last, as the root
  // FullyShardedDataParallel's forward and its post-backward final callback do.
  const std::size_t root = units.size() - 1;
  const bool layerless_root = units[root].layers.empty();
  in_backward = false;
  if (layerless_root) hooks.pre_forward(root);
  for (std::size_t layer = 0; layer < layers; ++layer) {
    const std::size_t u = owner[layer];
    if (layer == units[u].layers.front()) hooks.pre_forward(u);
    saved[u].push_back(s.forward_layer(layer, static_cast<std::int32_t>(u)));
    if (layer == units[u].layers.back()) hooks.post_forward(u);
  }
  if (layerless_root) hooks.post_forward(root);
  in_backward = true;
  if (layerless_root) hooks.pre_backward(root);
  for (std::size_t layer = layers; layer-- > 0;) {
    const std::size_t u = owner[layer];
    const std::vector<std::size_t>& unit_layers = units[u].layers;
    if (layer == unit_layers.back()) hooks.pre_backward(u);
    const auto position = static_cast<std::size_t>(
        std::find(unit_layers.begin(), unit_layers.end(), layer) - unit_layers.begin());
    hooks.pre_backward_layer(u, layer);
    s.backward_layer(layer, static_cast<std::int32_t>(u), saved[u][position]);
    hooks.post_backward_layer(u, layer);
    if (layer == unit_layers.front()) hooks.post_backward(u);
  }
  if (layerless_root) hooks.post_backward(root);
}

}  // namespace fsdpsim::fsdp
