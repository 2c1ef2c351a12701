// The module hooks an FSDP runtime installs on each unit, and the walk of one micro-batch that
// fires them where PyTorch's module hooks fire: pre-forward before a unit's first layer,
// post-forward after its last; pre-backward before the backward of its last layer, post-backward
// after the backward of its first layer (a chunked loss's layer aside: the loss runs it). The root
// wraps the whole model: its pre-forward runs
// first, its post-forward last, its pre-backward at the very start of backward (on the loss),
// whichever layers it holds itself; its post-backward as RootPostBackward says.
#pragma once

#include <cstddef>
#include <vector>

#include "sim/fsdp/fsdp_units.hpp"
#include "sim/fsdp/step_builder.hpp"

namespace fsdpsim::fsdp {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void pre_forward(std::size_t unit) = 0;
  virtual void post_forward(std::size_t unit) = 0;
  virtual void pre_backward(std::size_t unit) = 0;
  virtual void post_backward(std::size_t unit) = 0;
  // Before the backward of each layer of `unit` (after pre_backward for its last layer): where
  // autograd makes that layer's parameter gradients, for a runtime that has no flat parameter.
  virtual void pre_backward_layer(std::size_t /*unit*/, std::size_t /*layer*/) {}
  // After the backward of each layer of `unit` (before post_backward for its first layer).
  virtual void post_backward_layer(std::size_t /*unit*/, std::size_t /*layer*/) {}
  // A chunked loss (models::LayerKind::kChunkedLoss, in `unit`, the head's): before its loop,
  // before each chunk's forward, after each chunk's backward (`last`: the loop's last chunk), and
  // after the loop. Only FSDP2 runs one (torchtitan's ChunkedLossWrapper drives fully_shard's
  // API); the others throw std::logic_error, the app having refused the setting.
  virtual void begin_chunked_loss(std::size_t unit);
  virtual void chunk_forward(std::size_t unit);
  virtual void chunk_backward(std::size_t unit, bool last);
  virtual void end_chunked_loss(std::size_t unit);
};

// When the root's post-backward runs. FSDP1 hooks its flat parameter's AccumulateGrad, which
// fires once the gradient of every parameter the root holds is made: after the backward of its
// first layer (`_register_post_backward_hook`). FSDP2 hooks the gradients of the root module's
// inputs, the token ids, which have none: its reduction runs in the final callback, at the very
// end (`FSDPState._root_post_backward_final_callback`). A root that holds the first layer (the
// embedding, unless fsdp.wrap_embedding_and_head gives it a unit of its own) reduces at the end
// either way.
enum class RootPostBackward { kWhenItsGradIsReady, kInTheFinalCallback };

// Forward then backward of every layer of the workload, each unit's layers tagged with its index.
// A chunked loss's layer runs between the two, once per chunk (run_micro_batch in
// unit_hooks.cpp), not in either walk. `in_backward` is false during the forward walk and the
// loss, true during the backward walk.
void run_micro_batch(StepBuilder& s, const std::vector<FsdpUnit>& units, UnitHooks& hooks,
                     bool& in_backward, RootPostBackward root_post_backward);

}  // namespace fsdpsim::fsdp
