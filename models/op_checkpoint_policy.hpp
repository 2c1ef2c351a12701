// torchtitan's per-op selective activation checkpointing ("op" SAC): which of a block's forward
// kernels keep their output from forward to backward, the rest being recomputed.
//
// torchtitan wraps each block in a non-reentrant checkpoint whose context_fn is a selective
// checkpoint policy (activation_checkpoint.mode "selective", selective_ac_option "op";
// torchtitan/models/llama3/parallelize_llama.py @e7c0cae and torchtitan/parallelisms/
// parallelize_llama.py @395a52627, _save_list and _get_custom_policy). Under it every ATen op the
// block runs is seen by a TorchDispatchMode and:
//  * aten.mm is saved, except every second one: a counter per pass (forward, recompute) counts
//    the block's mm calls, and an even count is recomputed (wq saved, wk recomputed, wv saved,
//    wo recomputed, w1 saved, w3 recomputed, w2 saved in a Llama block);
//  * SDPA's flash and memory-efficient attention outputs are saved (output and log-sum-exp);
//  * everything else is recomputed: norms, RoPE, activations, residual adds, casts.
// Only ATen's mm counts. An nn.Linear with a bias runs addmm, torchao's Float8Linear runs
// _scaled_mm, and cuDNN's SDPA, flash-attn's own kernels and an unfused attention's bmm are other
// ops: none is in the list, so they are recomputed and do not advance the counter.
#pragma once

#include <cstdint>
#include <vector>

#include "models/workload.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::models {

struct OpCheckpointPlan {
  // One per forward kernel of the layer: 1 = the policy saves its output (the recompute returns
  // the saved tensor and does not run the kernel), 0 = recomputed.
  std::vector<std::uint8_t> saved_output;
  // What the saved outputs hold from the block's forward to its backward: each saved mm's [m, n]
  // output and each saved attention's output and fp32 log-sum-exp.
  Bytes saved_bytes{0};
};

OpCheckpointPlan torchtitan_op_checkpoint_plan(const Layer& layer);

}  // namespace fsdpsim::models
