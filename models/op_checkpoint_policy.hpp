// torchtitan's per-op selective activation checkpointing ("op" SAC): which of a block's forward
// kernels keep their output from forward to backward, the rest being recomputed.
//
// torchtitan wraps each block in a non-reentrant checkpoint whose context_fn is a selective
// checkpoint policy (activation_checkpoint.mode "selective", selective_ac_option "op";
// torchtitan/models/llama3/parallelize_llama.py @e7c0cae and torchtitan/parallelisms/
// parallelize_llama.py @395a52627, _save_list and _get_custom_policy; the cuDNN, math and
// overrideable SDPA ops joined the list in torchtitan b39377f9f, December 2025, after torch made
// cuDNN attention SDPA's choice on Hopper). Under it every ATen op the block runs is seen by a
// TorchDispatchMode and:
//  * aten.mm is saved, except every second one: a counter per pass (forward, recompute) counts
//    the block's mm calls, and an even count is recomputed (wq saved, wk recomputed, wv saved,
//    wo recomputed, w1 saved, w3 recomputed, w2 saved in a Llama block);
//  * SDPA's flash, memory-efficient and cuDNN attention outputs are saved (output and
//    log-sum-exp);
//  * everything else is recomputed: norms, RoPE, activations, residual adds, casts.
// A torchao Float8Linear's matmul is aten.mm to the policy too: a dispatch mode runs before a
// tensor subclass's __torch_dispatch__, so the mode sees mm on Float8Tensors, which only below it
// become torch._scaled_mm; the bf16 output is what it keeps. (torchtitan's December 2024 table
// agrees: Llama 3.1 8B reserves 76.8 and 61.8 GiB with float8 and 77.0 and 62.0 without, where
// a policy that saved no float8 GEMM would free about a third of it.) An nn.Linear with a bias
// runs addmm, and flash-attn's own kernels and an unfused attention's bmm are other ops: none is
// in that list, so they are recomputed and do not advance the counter (torchtitan's list since
// March 2026, PyTorch's compute-intensive ops, would keep addmm and bmm too). The float8
// amax reductions, whose scalar results torchtitan also keeps (aten.max), are recomputed here.
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
  // What the saved outputs hold from the block's forward to its backward (their
  // NamedKernel::output_bytes).
  Bytes saved_bytes{0};
};

OpCheckpointPlan torchtitan_op_checkpoint_plan(const Layer& layer);

}  // namespace fsdpsim::models
