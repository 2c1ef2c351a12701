// Shapes of the kernels a workload runs: the vocabulary between models/ (which produce them)
// and hardware/ (which prices them). Neither layer depends on the other.
#pragma once

#include <cstdint>

#include "sim/units/dtype.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim {

// C[m,n] = A[m,k] * B[k,n], `batch` independent products. FLOPs = 2*m*n*k*batch.
struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
};

// A GEMM's FLOPs: 2 x m x n x k per matrix product (a multiply and an add each).
inline double gemm_flops(const GemmShape& s) {
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) *
         static_cast<double>(s.batch);
}

// Which fused-attention kernel runs (hardware/kernel_time.cpp prices each against
// FlashAttention-2).
enum class FlashKernel : std::uint8_t {
  kFlash2,  // flash-attn 2.x, PyTorch SDPA's flash backend (Dao 2023)
  kFlash1,  // flash-attn 0.x/1.x CUDA kernels (Dao et al. 2022)
  kTriton,  // flash-attn's Triton port (flash_attn/flash_attn_triton.py; llm-foundry attn_impl
            // triton)
  kCudnn,   // cuDNN's fused attention, PyTorch SDPA's CUDNN_ATTENTION backend (its default on
            // sm90/sm100 from torch 2.11: aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
            // check_prefer_cudnn_attention, cuDNN > 9.15)
};

// How the loss turns the LM head's logits into a scalar (models/head_layer.cpp).
enum class LossKernel : std::uint8_t {
  kCrossEntropyFp32,   // F.cross_entropy on logits upcast to fp32 (pred.float(), or autocast)
  kCrossEntropy,       // F.cross_entropy on the compute-dtype logits: no fp32 [T, V] tensor
  kFusedCrossEntropy,  // flash-attn's xentropy kernel (flash_attn/losses/cross_entropy.py)
  // F.cross_entropy(pred.float()) under torch.compile (torchtitan's build_cross_entropy_loss with
  // training.compile, 2025): Inductor's kernels keep and write what the fused kernel does.
  kCompiledCrossEntropy,
};

// How an RMSNorm runs (models/eager_rms_norm.hpp).
enum class RmsNormKernel : std::uint8_t {
  kFused,  // one kernel per pass: nn.RMSNorm since its 2025 fused kernel, apex FusedRMSNorm,
           // Triton kernels
  kEager,  // the reference Python op by op: HF LlamaRMSNorm and T5LayerNorm, torchtitan's and
           // fms's RMSNorm modules, nn.RMSNorm before that kernel
};

// Whose float8 linears run (models/float8_linear.hpp).
enum class Float8LinearImpl : std::uint8_t {
  kTorchao,  // torchao Float8Linear: fused casts in a compiled block, torchao's Python op by op
             // without torch.compile
  kTransformerEngine,  // NVIDIA TransformerEngine's te.Linear (llm-foundry's fp8): its casts are
                       // fused CUDA kernels, compiled or not
};

// Whether the training loop keeps a reference to the model's output, the logits, after the loss
// has read them: until the next forward returns and the name is bound to the new output
// (models/head_layer.cpp).
enum class LogitsKeptByLoop : std::uint8_t {
  kNone,          // dropped once the loss has read them (`del pred`, loss inside forward)
  kComputeDtype,  // the model returns them in the compute dtype and the loop keeps them
                  // (Composer's state.outputs, which llm-foundry trains with)
  kFp32,          // the model returns them upcast (`self.output(h).float()`) and the loop keeps
                  // them (torchtitan's train.py before `del pred`)
};

// Scaled dot-product attention over `batch` sequences. FLOPs are counted for the two matmuls
// (QK^T and PV); `causal` halves them (FlashAttention skips fully masked tiles).
struct AttentionShape {
  std::int64_t batch = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t seq_q = 0;
  std::int64_t seq_kv = 0;
  std::int64_t head_dim = 0;
  bool causal = true;
  bool fused = true;      // FlashAttention-style kernel (no s x s matrix in memory)
  bool backward = false;  // the backward kernel (dQ, dK, dV), priced separately
  FlashKernel kernel = FlashKernel::kFlash2;  // when fused
};

enum class KernelKind : std::uint8_t {
  kGemm,         // cuBLAS(Lt) matrix product: roofline with wave quantization
  kAttention,    // fused attention kernel (flash); unfused attention is GEMMs + memory-bound ops
  kMemoryBound,  // elementwise / normalization / softmax / copies: bytes over HBM bandwidth
};

// PyTorch's normalization kernels (aten/src/ATen/native/cuda/layer_norm_kernel.cu; RMSNorm runs
// the same kernels without the mean): each pass reaches its own share of HBM bandwidth
// (GpuSpec::norm_memory_efficiency). kNone: any other memory-bound kernel, a Triton kernel of
// torch.compile included.
enum class NormPass : std::uint8_t {
  kNone,
  kLayerNormForward,     // vectorized_layer_norm_kernel: x -> y, mean, rstd
  kRmsNormForward,       // the same kernel without the mean
  kInputGrad,            // layer_norm_grad_input_kernel: dy, x, stats, weight -> dx
  kLayerNormWeightGrad,  // GammaBetaBackward: a column reduction of dy and x -> dgamma, dbeta
  kRmsNormWeightGrad,    // the same without dbeta
};

// One GPU kernel of a workload: what it is, its exact FLOPs and HBM traffic.
struct Kernel {
  KernelKind kind = KernelKind::kMemoryBound;
  Dtype dtype = Dtype::kBf16;  // math dtype for GEMMs and attention
  GemmShape gemm{};            // valid when kind == kGemm
  AttentionShape attention{};  // valid when kind == kAttention
  Flops flops{0.0};
  Bytes bytes{0};                   // HBM bytes read + written
  NormPass norm = NormPass::kNone;  // with kMemoryBound: which normalization kernel, if one
};

// A GEMM of `shape` in `dtype`: FLOPs = 2*m*n*k*batch, and the compulsory traffic of reading A
// and B and writing C once.
inline Kernel gemm_kernel(GemmShape shape, Dtype dtype) {
  Kernel k;
  k.kind = KernelKind::kGemm;
  k.dtype = dtype;
  k.gemm = shape;
  k.flops = Flops(gemm_flops(shape));
  k.bytes = Bytes((shape.m * shape.k + shape.k * shape.n + shape.m * shape.n) * shape.batch *
                  dtype_bytes(dtype));
  return k;
}

}  // namespace fsdpsim
