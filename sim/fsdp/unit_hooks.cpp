#include "sim/fsdp/unit_hooks.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace fsdpsim::fsdp {
namespace {

[[noreturn]] void no_chunked_loss() {
  throw std::logic_error("fsdp: only the FSDP2 schedule runs a chunked loss");
}

bool walked(const models::Layer& layer) { return layer.kind != models::LayerKind::kChunkedLoss; }

// torchtitan's ChunkedLossWrapper.__call__ (torchtitan/components/loss.py) on the hidden states
// the model returned (`hidden`, which the loop's `pred` and the chunks, views of it, hold until
// the wrapper returns): a zero-filled fp32 GradAccumulator buffer, then for each chunk the LM
// head and the loss forward and, at once, their backward (chunk_loss.backward() on the detached
// chunk), with the FSDP calls the wrapper makes around them (the hooks). Returns the gradient of
// the hidden states, the buffer cast back to their dtype, which the decoder's backward starts from
// (_DecoderOutputGradientBackProp saves it).
engine::TensorId run_chunked_loss(StepBuilder& s, UnitHooks& hooks, std::size_t unit,
                                  std::size_t layer, engine::TensorId hidden) {
  const models::Layer& l = s.workload().layers[layer];
  const models::LossChunking& c = l.loss_chunking;
  const auto group = static_cast<std::int32_t>(unit);
  hooks.begin_chunked_loss(unit);
  const engine::TensorId buffer = s.allocate(l.name + ".gradient_buffer", c.gradient_buffer,
                                             s.compute(), memory::MemoryCategory::kActivations);
  s.copy(l.name + ".gradient_buffer_zero", s.compute(), c.gradient_buffer, Phase::kForward, group);
  for (std::int32_t chunk = 0; chunk < c.chunks; ++chunk) {
    hooks.chunk_forward(unit);
    const StepBuilder::SavedIds saved = s.forward_layer(layer, group);
    hooks.pre_backward_layer(unit, layer);
    s.backward_layer(layer, group, saved);
    hooks.post_backward_layer(unit, layer);
    hooks.chunk_backward(unit, chunk + 1 == c.chunks);
  }
  hooks.end_chunked_loss(unit);
  // grad_accumulator.result().to(hidden_states.dtype): the same tensor when that is fp32.
  engine::TensorId gradient = buffer;
  if (c.hidden != c.gradient_buffer) {
    gradient = s.allocate(l.name + ".hidden_gradient", c.hidden, s.compute(),
                          memory::MemoryCategory::kActivations);
    s.copy(l.name + ".gradient_to_hidden_dtype", s.compute(), c.gradient_buffer + c.hidden,
           Phase::kForward, group);
    s.free(buffer);  // the wrapper returns, its accumulator with it
  }
  s.free(hidden);  // the chunks go with the wrapper's frame, `pred` with the loop's `del pred`
  return gradient;
}

}  // namespace

void UnitHooks::begin_chunked_loss(std::size_t /*unit*/) { no_chunked_loss(); }
void UnitHooks::chunk_forward(std::size_t /*unit*/) { no_chunked_loss(); }
void UnitHooks::chunk_backward(std::size_t /*unit*/, bool /*last*/) { no_chunked_loss(); }
void UnitHooks::end_chunked_loss(std::size_t /*unit*/) { no_chunked_loss(); }

void run_micro_batch(StepBuilder& s, const std::vector<FsdpUnit>& units, UnitHooks& hooks,
                     bool& in_backward, RootPostBackward root_post_backward) {
  const std::vector<models::Layer>& layers = s.workload().layers;
  const std::vector<std::size_t> owner = unit_of_layer(units, layers.size());
  // Each unit's first and last layer that the model's forward and backward run.
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> first(units.size(), kNone);
  std::vector<std::size_t> last(units.size(), kNone);
  std::size_t chunked_loss = kNone;
  for (std::size_t layer = 0; layer < layers.size(); ++layer) {
    if (!walked(layers[layer])) {
      chunked_loss = layer;
      continue;
    }
    const std::size_t u = owner[layer];
    if (first[u] == kNone) first[u] = layer;
    last[u] = layer;
  }
  // The head layer before a chunked loss is the final norm, whose output the model returns.
  const std::size_t norm = chunked_loss == kNone ? kNone : chunked_loss - 1;
  std::vector<StepBuilder::SavedIds> saved(layers.size());
  // The root unit (last) wraps the whole model, whichever layers it holds itself: its pre-forward
  // runs first and its post-forward last, as the root module's forward does, and its pre-backward
  // first, on the loss (FSDP1 `_root_pre_forward` and the pre-backward hook on the forward's
  // outputs, `_register_pre_backward_hooks`; FSDP2 `FSDPState._pre_forward` and
  // `_register_pre_backward_hook`).
  const std::size_t root = units.size() - 1;
  in_backward = false;
  hooks.pre_forward(root);
  engine::TensorId hidden = 0;
  for (std::size_t layer = 0; layer < layers.size(); ++layer) {
    if (!walked(layers[layer])) continue;
    const std::size_t u = owner[layer];
    if (u != root && layer == first[u]) hooks.pre_forward(u);
    if (layer == norm) {
      hidden = s.allocate(layers[chunked_loss].name + ".hidden",
                          layers[chunked_loss].loss_chunking.hidden, s.compute(),
                          memory::MemoryCategory::kActivations);
    }
    saved[layer] = s.forward_layer(layer, static_cast<std::int32_t>(u));
    if (u != root && layer == last[u]) hooks.post_forward(u);
  }
  hooks.post_forward(root);
  // The loss is the head's: the training loop's forward, and its autocast region, end here.
  s.leave_autocast();
  engine::TensorId hidden_gradient = 0;
  if (chunked_loss != kNone)
    hidden_gradient = run_chunked_loss(s, hooks, owner[chunked_loss], chunked_loss, hidden);
  in_backward = true;
  hooks.pre_backward(root);
  bool root_reduced = false;
  for (std::size_t layer = layers.size(); layer-- > 0;) {
    if (!walked(layers[layer])) continue;
    const std::size_t u = owner[layer];
    if (u != root && layer == last[u]) hooks.pre_backward(u);
    hooks.pre_backward_layer(u, layer);
    s.backward_layer(layer, static_cast<std::int32_t>(u), saved[layer]);
    // Autograd lets go of the norm output's gradient once the norm's backward has read it.
    if (layer == norm) s.free(hidden_gradient);
    hooks.post_backward_layer(u, layer);
    const bool root_now = u == root && root_post_backward == RootPostBackward::kWhenItsGradIsReady;
    if (layer == first[u] && (u != root || root_now)) {
      hooks.post_backward(u);
      root_reduced = root_reduced || u == root;
    }
  }
  if (!root_reduced) hooks.post_backward(root);
}

}  // namespace fsdpsim::fsdp
