// torch.compile (TorchInductor) applied to one transformer block, as a rewrite of its kernels.
// torchtitan compiles each TransformerBlock on its own (apply_compile in
// torchtitan/models/llama3/infra/parallelize.py: torch.compile(transformer_block,
// fullgraph=True)); embedding, final norm, LM head and loss stay eager, so workload.cpp applies
// this to LayerKind::kBlock layers only.
//
// What changes (each point cites its source in compile_fusion.cpp):
//  * GEMMs and attention stay extern kernels (cuBLAS, FlashAttention), unchanged.
//  * Each maximal run of consecutive memory-bound kernels becomes one Triton kernel (named
//    their names joined by "+"), except after a kernel that ends_fusion, and streams at the
//    ordinary rate, normalizations included (Inductor writes its own). A kernel's
//    handoff_bytes (an output only its successors in the run read) are neither written nor read
//    back: the fused kernel's bytes are the run's bytes minus twice each handed-off output.
//    Fewer kernels also mean fewer launches on the CPU thread (one per kernel in sim/fsdp).
//  * Saved activations: when every linear of the block is float8 (models/float8_linear.hpp), a
//    linear's input whose backward users are then only the (fusible) float8 casts is recomputed
//    by Inductor's min-cut partitioner rather than saved: Layer::rematerializable_saved is dropped
//    from saved_activations. Otherwise nothing saved changes.
// Attention-core indices are kept pointing at the same kernels (runs never cross them).
#pragma once

#include "models/workload.hpp"

namespace fsdpsim::models {

void fuse_for_compile(Layer& layer);

}  // namespace fsdpsim::models
