#include "sim/fsdp/unit_hooks.hpp"

#include <algorithm>

namespace fsdpsim::fsdp {

void run_micro_batch(StepBuilder& s, const std::vector<FsdpUnit>& units, UnitHooks& hooks,
                     bool& in_backward, RootPostBackward root_post_backward) {
  const std::size_t layers = s.workload().layers.size();
  const std::vector<std::size_t> owner = unit_of_layer(units, layers);
  std::vector<std::vector<StepBuilder::SavedIds>> saved(units.size());  // per unit, forward order
  // The root unit (last) wraps the whole model, whichever layers it holds itself: its pre-forward
  // runs first and its post-forward last, as the root module's forward does, and its pre-backward
  // first, on the loss (FSDP1 `_root_pre_forward` and the pre-backward hook on the forward's
  // outputs, `_register_pre_backward_hooks`; FSDP2 `FSDPState._pre_forward` and
  // `_register_pre_backward_hook`).
  const std::size_t root = units.size() - 1;
  in_backward = false;
  hooks.pre_forward(root);
  for (std::size_t layer = 0; layer < layers; ++layer) {
    const std::size_t u = owner[layer];
    if (u != root && layer == units[u].layers.front()) hooks.pre_forward(u);
    saved[u].push_back(s.forward_layer(layer, static_cast<std::int32_t>(u)));
    if (u != root && layer == units[u].layers.back()) hooks.post_forward(u);
  }
  hooks.post_forward(root);
  // The loss is the head's: the training loop's forward, and its autocast region, end here.
  s.leave_autocast();
  in_backward = true;
  hooks.pre_backward(root);
  bool root_reduced = false;
  for (std::size_t layer = layers; layer-- > 0;) {
    const std::size_t u = owner[layer];
    const std::vector<std::size_t>& unit_layers = units[u].layers;
    if (u != root && layer == unit_layers.back()) hooks.pre_backward(u);
    const auto position = static_cast<std::size_t>(
        std::find(unit_layers.begin(), unit_layers.end(), layer) - unit_layers.begin());
    hooks.pre_backward_layer(u, layer);
    s.backward_layer(layer, static_cast<std::int32_t>(u), saved[u][position]);
    hooks.post_backward_layer(u, layer);
    const bool root_now = u == root && root_post_backward == RootPostBackward::kWhenItsGradIsReady;
    if (layer == unit_layers.front() && (u != root || root_now)) {
      hooks.post_backward(u);
      root_reduced = root_reduced || u == root;
    }
  }
  if (!root_reduced) hooks.post_backward(root);
}

}  // namespace fsdpsim::fsdp
