// kernel_time(): one GPU kernel's duration, by kind.
//
// - GEMM: gemm_cost.cpp (roofline with tile/wave quantization).
// - Fused attention: FLOPs at the FlashAttention-2 efficiency of the pass (forward or backward;
//   Dao, "FlashAttention-2", 2023, Sec. 4.1: the backward pass reaches a lower fraction of peak
//   than the forward) at the kernel's sequence length (GpuSpec::attention_*_seq_half), scaled for
//   other kernels (flash_kernel_speed) and head dims (head_dim_slowdown), or HBM-bound if its
//   bytes say so (roofline).
// - Memory-bound kernels (elementwise, norms, softmax, copies): bytes over achievable HBM
//   bandwidth, PyTorch's normalization kernels at their own share of it (NormPass).
// Every kernel lasts at least kMinKernelDuration (roofline.hpp).
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "hardware/calibrated_curves.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/gemm_cost.hpp"
#include "hardware/roofline.hpp"

namespace fsdpsim::hardware {
namespace {

// Speed of a fused-attention kernel relative to FlashAttention-2 on the same GPU.
// - flash-attn 1.x: FlashAttention-2 is "2x faster than FlashAttention" and FlashAttention
//   reached "only 25-40% of the theoretical maximum FLOPs/s" on A100 against FA2's 50-73%
//   (Dao 2023, abstract and Sec. 4.1) -> 0.5.
// - flash-attn's Triton port: "Triton forward is generally faster than CUDA forward, while
//   Triton backward is generally slower than CUDA backward. Overall Triton forward + backward is
//   slightly slower than CUDA forward + backward" (flash_attn/flash_attn_triton.py docstring,
//   CUDA = flash-attn 1.x at the time) -> the same 0.5, the resolution these sources allow.
// - cuDNN fused attention: a property of the GPU (its preset's cudnn_attention_*_speedup).
double flash_kernel_speed(const GpuSpec& gpu, FlashKernel kernel, bool backward) {
  switch (kernel) {
    case FlashKernel::kFlash2:
      return 1.0;
    case FlashKernel::kFlash1:
    case FlashKernel::kTriton:
      return 0.5;
    case FlashKernel::kCudnn:
      return backward ? gpu.cudnn_attention_backward_speedup : gpu.cudnn_attention_forward_speedup;
  }
  throw std::logic_error("hardware: unknown FlashKernel");
}

// flash-attn 1.x stops gaining with sequence length here. FlashAttention-2 writes each query
// block's output once, so its per-row-block costs amortize as sequences grow (seq_half).
// FlashAttention runs the key/value blocks in the outer loop and reads and writes every query
// block's O, l and m in the inner one (Dao et al. 2022, Algorithm 1, lines 8-13): its HBM
// traffic is Theta(N^2 d^2 / M) (ibid., Theorem 2), growing with the FLOPs, so longer sequences
// do not raise its efficiency. It keeps half of FlashAttention-2's rate up to 2,048 tokens, the
// training lengths at which the 2x and 25-40 % figures above were stated, and that rate beyond.
// The Triton port loops like FlashAttention-2 (one program per query block, O written once).
constexpr double kFlash1LongestGainingSeq = 2048.0;

// The fraction of the long-sequence efficiency a pass reaches at this kernel's key length
// (GpuSpec::attention_*_seq_half).
double sequence_fraction(const GpuSpec& gpu, const AttentionShape& a) {
  const double half = a.backward ? gpu.attention_backward_seq_half : gpu.attention_forward_seq_half;
  auto seq = static_cast<double>(a.seq_kv);
  if (a.kernel == FlashKernel::kFlash1) seq = std::min(seq, kFlash1LongestGainingSeq);
  return seq / (seq + half);
}

// The head dim the preset's attention rates were measured at (GpuSpec::attention_softmax_share).
constexpr std::int64_t kRateHeadDim = 128;
// Attention kernels are compiled for head dims in steps of 32 and run the smallest that holds
// the model's, computing the padding: flash-attn's flash_fwd_hdim{32,64,96,128,160,192,224,256}
// instantiations (csrc/flash_attn/src); on an H200 cuDNN's head dim 80 ran at 0.85-0.87 of its
// head dim 96 rate (80/96 = 0.83) and 112 at 0.89-0.91 of 128's (112/128 = 0.875)
// (configs/validation/measured-h200/kernels/attention-shapes.json).
constexpr std::int64_t kHeadDimStep = 32;

// The share of a head-dim-128 kernel's time that is softmax, not matmul. Measured for
// FlashAttention-2 and cuDNN (the presets cite it). flash-attn 1.x and the Triton kernel were
// not measured (neither runs on this project's torch 2.11 machine) and get none: their rate is
// FlashAttention-2's halved (flash_kernel_speed) whatever the head dim. With FlashAttention-2's
// share, the published A100 rows that run them at head dim 64 (mpt-125m, mpt-350m: 99 rows)
// are predicted further off (tokens/s MAPE 4.7 % and 8.1 % against 4.0 % and 5.9 %).
double softmax_share(const GpuSpec& gpu, FlashKernel kernel) {
  switch (kernel) {
    case FlashKernel::kFlash2:
      return gpu.attention_softmax_share;
    case FlashKernel::kCudnn:
      return gpu.cudnn_attention_softmax_share;
    case FlashKernel::kFlash1:
    case FlashKernel::kTriton:
      return 0.0;
  }
  throw std::logic_error("hardware: unknown FlashKernel");
}

// Time per FLOP at this head dim over that at 128. Per score element a kernel does matmul work
// proportional to its padded head dim and softmax work that is fixed, a share s of the time at
// 128: (padded / 128 x (1 - s) + s) / (head_dim / 128). FlashAttention-3 (Shah et al. 2024,
// Sec. 3.1): an H100 has 989 TFLOP/s of matmul but 3.9 TFLOP/s of exponentials, so at head dim
// 128 the exponentials alone take half as long as the matmuls unless overlapped with them.
double head_dim_slowdown(const GpuSpec& gpu, const AttentionShape& a) {
  if (a.head_dim <= 0) throw std::logic_error("hardware: attention kernel without a head dim");
  const double share = softmax_share(gpu, a.kernel);
  const auto padded =
      static_cast<double>((a.head_dim + kHeadDimStep - 1) / kHeadDimStep * kHeadDimStep);
  const double reference = static_cast<double>(kRateHeadDim);
  return (padded / reference * (1.0 - share) + share) /
         (static_cast<double>(a.head_dim) / reference);
}

// The product of the rates below can pass 1 only with a preset or --set far from any GPU (a
// cuDNN speedup of 10 over FlashAttention-2 at 0.35 of peak): no kernel runs above its dtype's
// peak, so it is capped there (MFU and HFU above 100 % otherwise).
Seconds attention_time(const GpuSpec& gpu, const Kernel& kernel) {
  const double efficiency = std::min(
      1.0, (kernel.attention.backward ? gpu.attention_backward_efficiency
                                      : gpu.attention_forward_efficiency) *
               sequence_fraction(gpu, kernel.attention) *
               flash_kernel_speed(gpu, kernel.attention.kernel, kernel.attention.backward) *
               gpu.attention_sustained_fraction / head_dim_slowdown(gpu, kernel.attention));
  const Seconds compute = compute_time(gpu, kernel.flops, kernel.dtype, efficiency);
  return std::max(compute, memory_time(gpu, kernel.bytes));
}

// A normalization kernel's share of HBM bandwidth (GpuSpec::norm_memory_efficiency); the
// streaming memory_efficiency for any other memory-bound kernel.
double memory_bound_efficiency(const GpuSpec& gpu, NormPass pass) {
  const NormEfficiencies& norm = gpu.norm_memory_efficiency;
  switch (pass) {
    case NormPass::kNone:
      return gpu.memory_efficiency;
    case NormPass::kLayerNormForward:
      return norm.layer_norm_forward;
    case NormPass::kRmsNormForward:
      return norm.rms_norm_forward;
    case NormPass::kInputGrad:
      return norm.input_grad;
    case NormPass::kLayerNormWeightGrad:
      return norm.layer_norm_weight_grad;
    case NormPass::kRmsNormWeightGrad:
      return norm.rms_norm_weight_grad;
  }
  throw std::logic_error("hardware: unknown NormPass");
}

Seconds unfloored_kernel_time(const GpuSpec& gpu, const Kernel& kernel) {
  switch (kernel.kind) {
    case KernelKind::kGemm:
      return gemm_time(gpu, kernel);
    case KernelKind::kAttention:
      return attention_time(gpu, kernel);
    case KernelKind::kMemoryBound:
      return kernel.bytes / (gpu.hbm_bandwidth * memory_bound_efficiency(gpu, kernel.norm));
  }
  throw std::logic_error("hardware: kernel_time got an unknown KernelKind");
}

}  // namespace

Seconds kernel_time(const GpuSpec& gpu, const Kernel& kernel) {
  if (kernel.flops.value() < 0.0 || kernel.bytes.value() < 0) {
    throw std::logic_error("hardware: kernel_time got a kernel with negative FLOPs or bytes");
  }
  // Measured GEMMs first (calibrated_curves.hpp), the roofline for what they do not cover.
  if (const auto measured = calibrated_gemm_time(gpu, kernel)) {
    return std::max(*measured / gpu.sustained_compute_fraction, kMinKernelDuration);
  }
  return std::max(unfloored_kernel_time(gpu, kernel), kMinKernelDuration);
}

Seconds kernel_time_sharing_sms(const GpuSpec& gpu, const Kernel& kernel, std::int32_t sms_taken) {
  if (gpu.calibration != nullptr) {
    // The model's slowdown on a calibration-free copy; a measured GEMM takes its measured
    // slowdown, or the model's ratio (not counted again: kernel_time() counted this kernel).
    GpuSpec model = gpu;
    model.calibration = nullptr;
    const Seconds model_sharing = kernel_time_sharing_sms(model, kernel, sms_taken);
    const auto measured = sms_taken <= 0
                              ? gpu.calibration->gemm_time(model, kernel)
                              : gpu.calibration->gemm_time_sharing(
                                    model, kernel, kernel_time(model, kernel), model_sharing);
    return measured ? std::max(*measured / gpu.sustained_compute_fraction, kMinKernelDuration)
                    : model_sharing;
  }
  if (sms_taken <= 0 || kernel.kind == KernelKind::kMemoryBound) return kernel_time(gpu, kernel);
  if (sms_taken >= gpu.sm_count) {
    throw std::logic_error("hardware: kernel_time_sharing_sms with no SM left for the kernel");
  }
  GpuSpec shared = gpu;
  shared.sm_count = gpu.sm_count - sms_taken;
  const double left = static_cast<double>(shared.sm_count) / static_cast<double>(gpu.sm_count);
  for (FlopsPerSec& peak : shared.peak_dense) peak = peak * left;
  return kernel_time(shared, kernel);
}

}  // namespace fsdpsim::hardware
