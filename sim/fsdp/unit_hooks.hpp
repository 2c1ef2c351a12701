// The module hooks an FSDP runtime installs on each unit, and the walk of one micro-batch that
// fires them where PyTorch's module hooks fire: pre-forward before a unit's first layer,
// post-forward after its last; pre-backward before the backward of its last layer (the root's at
// the very start of backward, on the loss), post-backward after the backward of its first layer
// (the root's at the very end, after the embedding).
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
};

// Forward then backward of every layer of the workload, each unit's layers tagged with its index.
// `in_backward` is false during the forward walk and true during the backward walk.
void run_micro_batch(StepBuilder& s, const std::vector<FsdpUnit>& units, UnitHooks& hooks,
                     bool& in_backward);

}  // namespace fsdpsim::fsdp
