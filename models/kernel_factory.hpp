// Internal to fsdpsim_models: the kernels every family is made of, with their exact FLOPs and
// HBM bytes. Conventions (T = tokens in the micro-batch, e = compute-dtype bytes):
//  * GEMMs (cuBLAS): C[m,n] = A[m,k] B[k,n] per batch; FLOPs = 2*m*n*k*batch; bytes = each
//    operand read once and C written once, (m*k + k*n + m*n)*batch*e (the roofline's compulsory
//    traffic; tiling re-reads are the hardware cost model's business).
//  * Memory-bound kernels carry flops = 0: they are priced by bytes, and every MFU/HFU
//    definition in configs/validation/README.md excludes norms and activations.
//    Their bytes are what the PyTorch kernel reads plus what it writes.
#pragma once

#include <cstdint>
#include <string>

#include "models/layer_draft.hpp"

namespace fsdpsim::models::detail {

// Bytes of fp32 statistics (LayerNorm mean/rstd, RMSNorm rstd, log-sum-exp): PyTorch keeps
// them in the accumulation type, float, for bf16/fp16 inputs (aten/src/ATen/native/layer_norm.cpp).
inline constexpr std::int64_t kStatBytes = 4;
// Bytes of an int64 index (token ids, targets, positions).
inline constexpr std::int64_t kIndexBytes = 8;
// Bytes of one dropout / mask element: PyTorch stores dropout masks as bool
// (aten/src/ATen/native/Dropout.cpp, native_dropout returns a bool mask).
inline constexpr std::int64_t kMaskBytes = 1;

NamedKernel gemm_kernel(std::string name, GemmShape shape, const BuildContext& ctx);
// A GEMM of an unfused causal attention, which runs over the whole s x s though the causal mask
// makes half of it no model work (NamedKernel::model_flops_fraction; README, "Model FLOPs").
NamedKernel causal_attention_gemm(std::string name, GemmShape shape, const BuildContext& ctx);
NamedKernel memory_bound_kernel(std::string name, std::int64_t bytes, const BuildContext& ctx);
// GEMM-class work of unknown shape (custom models: convolutions, matmuls): a kGemm kernel with a
// zero shape, so the hardware prices it at the GPU's gemm_efficiency without tile/wave
// quantization or the pipeline-fill term (hardware/gemm_cost.cpp returns 1 for them) and no
// calibrated GEMM matches it. It carries no HBM bytes: memory-bound work is a separate kernel.
NamedKernel opaque_compute_kernel(std::string name, double flops, const BuildContext& ctx);

// nn.Linear(in, out) applied to T tokens.
struct LinearDims {
  std::int64_t in = 0;
  std::int64_t out = 0;
  bool bias = false;
};

// Forward: GEMM {m=T, n=out, k=in}; the bias add is fused into the cuBLAS epilogue (addmm).
// The GEMMs of a linear carry their LinearPass.
NamedKernel linear_forward(std::string name, LinearDims dims, const BuildContext& ctx);
// Backward (torch/csrc/autograd/FunctionsManual.cpp, addmm/mm backward): dgrad GEMM
// {m=T, n=in, k=out} named <name>_dgrad, wgrad GEMM {m=in, n=out, k=T} named <name>_wgrad, and
// when there is a bias a column-sum reduction <name>_bgrad reading T*out, writing out.
void append_linear_backward(LayerDraft& draft, const std::string& name, LinearDims dims,
                            const BuildContext& ctx);

enum class NormKind : std::uint8_t {
  kLayerNorm,       // weight + bias, saves mean and rstd
  kRmsNorm,         // weight only, saves rstd
  kEagerRmsNorm,    // the Llama reference RMSNorm run op by op (models/eager_rms_norm.hpp)
  kEagerT5RmsNorm,  // HF T5LayerNorm run op by op (models/eager_rms_norm.hpp)
};

// Norm over the last dimension `width` of T tokens. kLayerNorm and kRmsNorm as PyTorch's fused
// kernels run it (aten/src/ATen/native/cuda/layer_norm_kernel.cu; RMSNorm the same kernels
// without the mean, as nn.RMSNorm with its 2025 fused kernel, apex's FusedRMSNorm and torchtitan's
// Triton fused_rmsnorm do): one kernel forward, two backward, each priced at its own share of HBM
// bandwidth (NormPass). Forward saves the input and the fp32 statistics; the output is saved by
// whichever op consumes it (the caller). The eager kinds run models/eager_rms_norm.cpp's kernels
// under the same bookkeeping. Returns the bytes of the tensor it saves that is its input `x`
// itself (0 where it saves only a copy: the eager Llama form's fp32 upcast of a narrower x).
std::int64_t append_norm_forward(LayerDraft& draft, const std::string& name, NormKind kind,
                                 std::int64_t width, const BuildContext& ctx);
// <name>_bwd, the input gradient: reads dy, x, stats, weight; writes dx (handed off to the
// memory-bound kernels after it when dx_handoff > 0, NamedKernel::handoff_bytes; eager kinds,
// which no compiled region holds, hand nothing off). Then
// <name>_bwd_weight, a column reduction that reads dy and x again and writes the weight (and
// bias) gradients (layer_norm_backward_cuda launches GammaBetaBackward after the dx kernel).
void append_norm_backward(LayerDraft& draft, const std::string& name, NormKind kind,
                          std::int64_t width, const BuildContext& ctx, std::int64_t dx_handoff);

// `kernel` with NamedKernel::handoff_bytes = output_bytes: its output is read only by the
// memory-bound kernels that follow it before the next GEMM or attention kernel.
NamedKernel handed_off(NamedKernel kernel, std::int64_t output_bytes);

// The context of the residual stream: element_bytes = residual_bytes (gpt_family.cpp).
BuildContext residual_context(const BuildContext& ctx);
// A dtype cast of T*width elements from `from_bytes` to `to_bytes` per element (autocast's
// cast of a linear's input, or the backward of such a cast): reads one, writes the other.
NamedKernel cast_kernel(std::string name, std::int64_t width, std::int64_t from_bytes,
                        std::int64_t to_bytes, const BuildContext& ctx);
// x + y where x (and the sum) is in the residual dtype and y in the compute dtype (type
// promotion): reads r + e, writes r bytes per element. Equals add_kernel when r == e.
NamedKernel residual_add_kernel(std::string name, std::int64_t width, const BuildContext& ctx);

// out = a + b over T*width elements (residual add forward, or autograd's accumulation of two
// gradients of one tensor, torch/csrc/autograd/input_buffer.cpp): reads 2, writes 1.
NamedKernel add_kernel(std::string name, std::int64_t width, const BuildContext& ctx);
// Dropout over T*width elements: forward writes the output and a bool mask; backward reads the
// gradient and the mask and writes the input gradient.
NamedKernel dropout_forward(std::string name, std::int64_t width, const BuildContext& ctx);
NamedKernel dropout_backward(std::string name, std::int64_t width, const BuildContext& ctx);
// nn.Embedding's backward, embedding_dense_backward_cuda then embedding_backward_cuda_kernel
// (aten/src/ATen/native/cuda/Embedding.cu, EmbeddingBackwardKernel.cu), for `lookups` ids into a
// table of rows x width whose gradient has ctx.element_bytes per element:
//  * <name>_grad_zero: grad_weight = at::zeros({rows, width}), the whole table written once
//    whatever the ids (a tied or large-vocabulary table costs its vocab x d here);
//  * <name>_bwd: the ids sorted (with their positions), the gradient rows summed per partial
//    segment into an fp32 buffer (acc_type, lookups x width x 4 B, a backward temporary), then
//    those sums added and scattered into their rows: reads the ids twice and the gradient once,
//    writes and reads the fp32 partials, writes the rows;
//  * <name>_grad_accumulate, when `adds_to_earlier_gradient`: another use of the table already
//    produced its gradient (a tied LM head, T5's other lookup), and autograd sums the two
//    (InputBuffer::accumulate, torch/csrc/autograd/input_buffer.cpp): reads both, writes one.
void append_embedding_backward(LayerDraft& draft, const std::string& name, std::int64_t rows,
                               std::int64_t width, std::int64_t lookups,
                               bool adds_to_earlier_gradient, const BuildContext& ctx);
// Unary elementwise op over T*width elements (GELU): forward reads x, writes y; backward reads
// dy and x, writes dx.
NamedKernel unary_forward(std::string name, std::int64_t width, const BuildContext& ctx);
NamedKernel unary_backward(std::string name, std::int64_t width, const BuildContext& ctx);

}  // namespace fsdpsim::models::detail
