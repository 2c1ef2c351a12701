// Sources for the rewrite described in compile_fusion.hpp:
//  * Fusion: TorchInductor lowers pointwise ops and reductions to Triton kernels and fuses a
//    producer with its consumers (vertical fusion), so a chain such as dropout -> residual add ->
//    LayerNorm, or a norm backward and the residual gradient accumulation, runs as one kernel that
//    reads the chain's inputs once and writes only the tensors used after it (Ansel et al.,
//    "PyTorch 2", ASPLOS 2024, Sec. 4-5; torch/_inductor/scheduler.py). Matmuls and
//    scaled_dot_product_attention are extern kernels Inductor calls, not fuses.
//  * What may not join: a full reduction's consumer over the same tensor (the reduction must
//    finish first) and nodes without common reads (torch/_inductor/config.py aggressive_fusion =
//    False) - the kernels that say ends_fusion.
//  * Saved tensors: AOTAutograd's min_cut_rematerialization_partition recomputes a forward value
//    in backward only when it is cheap and fusible there; with the defaults of
//    torch/_functorch/config.py it bans recomputing anything a non-fusible backward op reads
//    (ban_recompute_materialized_backward), reductions (ban_recompute_reductions), random ops and
//    matmul/attention outputs. A norm's or activation's output that feeds a bf16 linear is read by
//    the weight-gradient GEMM, so it stays saved; feeding a float8 linear, its only backward users
//    are the amax and cast of torchao's backward, so the partitioner saves the norm input (saved
//    anyway) and recomputes the output inside the cast kernels. Their reads are priced as before
//    (same size; a swiglu output recomputed from gate and up reads twice that, not modelled).
#include "models/compile_fusion.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fsdpsim::models {
namespace {

bool memory_bound(const NamedKernel& k) { return k.kernel.kind == KernelKind::kMemoryBound; }

// Inductor decomposes the normalizations into its own Triton reductions (no aten layer_norm
// kernel runs), so every kernel it emits streams at the ordinary rate (NormPass::kNone).
NamedKernel merge(std::vector<NamedKernel>& run) {
  NamedKernel fused = run.front();
  fused.kernel.norm = NormPass::kNone;
  if (run.size() == 1) return fused;
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < run.size(); ++i) {
    bytes += run[i].kernel.bytes.value();
    if (i > 0) {
      fused.name += '+';
      fused.name += run[i].name;
      // A kernel that fuses work of two modules runs inside neither's hooks alone.
      if (run[i].linear_module != fused.linear_module) fused.linear_module.clear();
    }
    // A handed-off output whose readers are in the run: no write, no read back.
    if (i + 1 < run.size()) bytes -= 2 * run[i].handoff_bytes;
  }
  fused.kernel.bytes = Bytes(bytes);
  fused.handoff_bytes = run.back().handoff_bytes;
  fused.ends_fusion = run.back().ends_fusion;
  return fused;
}

struct FusedKernels {
  std::vector<NamedKernel> kernels;
  // new_index[i]: index in `kernels` of the kernel that holds input kernel i; one more entry for
  // the end of the list.
  std::vector<std::size_t> new_index;
};

// Merges runs of memory-bound kernels; a run never continues across an index in `run_starts`.
FusedKernels fuse_runs(const std::vector<NamedKernel>& kernels,
                       const std::vector<std::size_t>& run_starts) {
  FusedKernels out;
  std::vector<NamedKernel> run;
  const auto flush = [&] {
    if (!run.empty()) out.kernels.push_back(merge(run));
    run.clear();
  };
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const NamedKernel& k = kernels[i];
    bool forced = false;
    for (const std::size_t start : run_starts) forced = forced || start == i;
    if (forced || !memory_bound(k) || (!run.empty() && run.back().ends_fusion)) flush();
    out.new_index.push_back(out.kernels.size());
    if (memory_bound(k)) {
      run.push_back(k);
    } else {
      out.kernels.push_back(k);
    }
  }
  flush();
  out.new_index.push_back(out.kernels.size());
  return out;
}

bool all_linears_float8(const Layer& layer) {
  bool any = false;
  for (const NamedKernel& k : layer.forward) {
    if (k.linear != LinearPass::kForward) continue;
    if (k.kernel.dtype != Dtype::kFp8) return false;
    any = true;
  }
  return any;
}

}  // namespace

void fuse_for_compile(Layer& layer) {
  if (all_linears_float8(layer)) {
    layer.saved_activations = layer.saved_activations - layer.rematerializable_saved;
    layer.rematerializable_saved = Bytes(0);
    std::erase_if(layer.saved_tensors, [](const SavedTensor& t) { return t.rematerializable; });
  }
  FusedKernels forward =
      fuse_runs(layer.forward, {layer.attention_forward_begin, layer.attention_forward_end});
  layer.attention_forward_begin = forward.new_index[layer.attention_forward_begin];
  layer.attention_forward_end = forward.new_index[layer.attention_forward_end];
  layer.forward = std::move(forward.kernels);
  layer.backward = fuse_runs(layer.backward, {}).kernels;
}

}  // namespace fsdpsim::models
