#include <algorithm>
#include <stdexcept>
#include <utility>

#include <gtest/gtest.h>

#include "hardware/cost_model.hpp"
#include "hardware/roofline.hpp"
#include "kernel_builders.hpp"
#include "preset_loader.hpp"

namespace fsdpsim::hardware {
namespace {

using testing::attention_kernel;
using testing::gemm_kernel;
using testing::memory_kernel;

TEST(KernelTime, MemoryBoundKernelStreamsAtAchievableBandwidth) {
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  const Seconds t = kernel_time(gpu, memory_kernel(gib(1.0)));
  EXPECT_DOUBLE_EQ(t.value(), static_cast<double>(kBytesPerGiB) / (4800e9 * 0.87));
}

TEST(KernelTime, NormKernelsStreamAtTheirPassesShareOfBandwidth) {
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  Kernel k = memory_kernel(Bytes(kBytesPerGiB));
  const double bandwidth = 4800e9;
  const NormEfficiencies& norm = gpu.norm_memory_efficiency;
  for (const auto& [pass, share] :
       {std::pair{NormPass::kNone, gpu.memory_efficiency},
        std::pair{NormPass::kLayerNormForward, norm.layer_norm_forward},
        std::pair{NormPass::kRmsNormForward, norm.rms_norm_forward},
        std::pair{NormPass::kInputGrad, norm.input_grad},
        std::pair{NormPass::kLayerNormWeightGrad, norm.layer_norm_weight_grad},
        std::pair{NormPass::kRmsNormWeightGrad, norm.rms_norm_weight_grad}}) {
    k.norm = pass;
    EXPECT_DOUBLE_EQ(kernel_time(gpu, k).value(),
                     static_cast<double>(kBytesPerGiB) / (bandwidth * share));
  }
  // PyTorch's LayerNorm forward runs at less than half a streaming kernel's rate on an H200.
  EXPECT_LT(norm.layer_norm_forward, gpu.memory_efficiency / 2.0);
}

TEST(KernelTime, EmptyKernelIsNotFree) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  EXPECT_EQ(kernel_time(gpu, memory_kernel(Bytes(0))), kMinKernelDuration);
  EXPECT_EQ(kernel_time(gpu, memory_kernel(Bytes(1024))), kMinKernelDuration);
}

TEST(KernelTime, AttentionForwardRunsAtForwardEfficiency) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  const Kernel kernel = attention_kernel(8, 32, 4096, 128, /*backward=*/false);
  const double at_4096 = 4096.0 / (4096.0 + gpu.attention_forward_seq_half);
  const double expected =
      kernel.flops.value() / (gpu.peak(Dtype::kBf16).value() * gpu.attention_forward_efficiency *
                              at_4096 * gpu.attention_sustained_fraction);
  EXPECT_DOUBLE_EQ(kernel_time(gpu, kernel).value(), expected);
}

TEST(KernelTime, AttentionBackwardRunsAtBackwardEfficiency) {
  const GpuSpec gpu = testing::load_preset("h100-sxm-80gb").gpu;
  const Kernel forward = attention_kernel(8, 32, 4096, 128, false);
  const Kernel backward = attention_kernel(8, 32, 4096, 128, true);
  const double at_4096 = 4096.0 / (4096.0 + gpu.attention_backward_seq_half);
  const double expected =
      backward.flops.value() / (gpu.peak(Dtype::kBf16).value() * gpu.attention_backward_efficiency *
                                at_4096 * gpu.attention_sustained_fraction);
  EXPECT_DOUBLE_EQ(kernel_time(gpu, backward).value(), expected);
  // 2.5x the FLOPs at a lower efficiency.
  EXPECT_GT(ratio(kernel_time(gpu, backward), kernel_time(gpu, forward)), 2.5);
}

TEST(KernelTime, AttentionLosesItsOwnSustainedFractionNotTheGemms) {
  // Held at the power limit, an H200's attention kept its short-run rates while its GEMMs lost
  // 17 % (gpu_spec.hpp): the two fractions are separate, and each moves only its own kernels.
  GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  const Kernel attention = attention_kernel(8, 32, 8192, 128, /*backward=*/true);
  const Kernel gemm = gemm_kernel(8192, 8192, 8192);
  const Seconds attention_before = kernel_time(gpu, attention);
  const Seconds gemm_before = kernel_time(gpu, gemm);
  gpu.sustained_compute_fraction /= 2.0;
  EXPECT_DOUBLE_EQ(kernel_time(gpu, attention).value(), attention_before.value());
  EXPECT_DOUBLE_EQ(kernel_time(gpu, gemm).value(), 2.0 * gemm_before.value());
  gpu.attention_sustained_fraction /= 2.0;
  EXPECT_DOUBLE_EQ(kernel_time(gpu, attention).value(), 2.0 * attention_before.value());
}

// Seconds per FLOP of a long causal forward at this head dim, on this kernel.
double seconds_per_flop(const GpuSpec& gpu, std::int64_t head_dim, FlashKernel flash) {
  Kernel k = attention_kernel(4, 32, 8192, head_dim, /*backward=*/false);
  k.attention.kernel = flash;
  return kernel_time(gpu, k).value() / k.flops.value();
}

TEST(KernelTime, SmallerHeadDimsPayTheSoftmaxShareOfTheirTime) {
  // Half the matmul work per score element for the same softmax work: at head dim 64 a FLOP
  // costs 1 + share of one at 128 (an H200 measured 1.10-1.13 for FlashAttention-2, 1.19-1.35
  // for cuDNN).
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  EXPECT_DOUBLE_EQ(seconds_per_flop(gpu, 64, FlashKernel::kFlash2) /
                       seconds_per_flop(gpu, 128, FlashKernel::kFlash2),
                   1.0 + gpu.attention_softmax_share);
  EXPECT_DOUBLE_EQ(seconds_per_flop(gpu, 64, FlashKernel::kCudnn) /
                       seconds_per_flop(gpu, 128, FlashKernel::kCudnn),
                   1.0 + gpu.cudnn_attention_softmax_share);
}

TEST(KernelTime, AHeadDimBetweenKernelSizesCostsTheNextSize) {
  // Head dim 80 runs the head-dim-96 kernel on padded tiles: the same time for fewer FLOPs.
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  for (const FlashKernel flash : {FlashKernel::kFlash2, FlashKernel::kCudnn}) {
    Kernel at_80 = attention_kernel(4, 32, 8192, 80, false);
    Kernel at_96 = attention_kernel(4, 32, 8192, 96, false);
    at_80.attention.kernel = at_96.attention.kernel = flash;
    EXPECT_DOUBLE_EQ(kernel_time(gpu, at_80).value(), kernel_time(gpu, at_96).value());
  }
}

TEST(KernelTime, UnmeasuredFlashKernelsHaveNoHeadDimTerm) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-40gb").gpu;
  for (const FlashKernel flash : {FlashKernel::kFlash1, FlashKernel::kTriton}) {
    EXPECT_DOUBLE_EQ(seconds_per_flop(gpu, 64, flash), seconds_per_flop(gpu, 128, flash));
  }
}

TEST(KernelTime, AttentionReachesHalfItsEfficiencyAtSeqHalf) {
  GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  gpu.attention_forward_seq_half = 1000.0;
  // Per FLOP, a 1000-token sequence runs at half the rate of one long enough to ignore the term;
  // at 3000 tokens, at three quarters.
  const auto seconds_per_flop = [&](std::int64_t seq) {
    const Kernel k = attention_kernel(1, 32, seq, 128, false);
    return kernel_time(gpu, k).value() / k.flops.value();
  };
  gpu.attention_forward_seq_half = 0.0;
  const double long_limit = seconds_per_flop(1000);
  gpu.attention_forward_seq_half = 1000.0;
  EXPECT_DOUBLE_EQ(seconds_per_flop(1000), 2.0 * long_limit);
  EXPECT_DOUBLE_EQ(seconds_per_flop(3000), long_limit / 0.75);
}

TEST(KernelTime, ShortAttentionIsMemoryBoundWithoutTheSequenceTerm) {
  // The roofline's memory side, isolated: without seq_half a 16-token sequence's few FLOPs take
  // less time than streaming its q, k, v and o.
  GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  gpu.attention_forward_seq_half = 0.0;
  Kernel kernel = attention_kernel(64, 32, 16, 128, false);  // 16-token sequences
  const double streaming = static_cast<double>(kernel.bytes.value()) / (4800e9 * 0.87);
  EXPECT_DOUBLE_EQ(kernel_time(gpu, kernel).value(), std::max(streaming, 2.5e-6));
}

TEST(KernelTime, NegativeWorkIsABug) {
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  EXPECT_THROW(kernel_time(gpu, memory_kernel(Bytes(-1))), std::logic_error);
}

TEST(KernelTime, OlderFlashKernelsRunAtHalfTheFlashAttention2Rate) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  for (const std::int64_t seq : {512, 2048}) {
    Kernel kernel = attention_kernel(8, 32, seq, 128, /*backward=*/true);
    const double flash2 = kernel_time(gpu, kernel).value();
    for (const FlashKernel older : {FlashKernel::kFlash1, FlashKernel::kTriton}) {
      kernel.attention.kernel = older;
      EXPECT_DOUBLE_EQ(kernel_time(gpu, kernel).value(), 2.0 * flash2) << seq;
    }
  }
}

// Past 2,048 tokens flash-attn 1.x keeps its 2,048-token rate: four times the FLOPs (twice the
// sequence) take four times as long, while FlashAttention-2 and the Triton port, whose
// efficiency still rises with length, take less than that.
TEST(KernelTime, Flash1StopsGainingWithSequenceLengthPast2048Tokens) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  for (const bool backward : {false, true}) {
    const auto ratio = [&](FlashKernel k, std::int64_t seq) {
      Kernel shorter = attention_kernel(8, 32, seq, 128, backward);
      Kernel longer = attention_kernel(8, 32, 2 * seq, 128, backward);
      shorter.attention.kernel = k;
      longer.attention.kernel = k;
      return kernel_time(gpu, longer).value() / kernel_time(gpu, shorter).value();
    };
    EXPECT_DOUBLE_EQ(ratio(FlashKernel::kFlash1, 2048), 4.0) << backward;
    EXPECT_DOUBLE_EQ(ratio(FlashKernel::kFlash1, 8192), 4.0) << backward;
    EXPECT_LT(ratio(FlashKernel::kFlash1, 1024), 4.0) << backward;
    EXPECT_LT(ratio(FlashKernel::kFlash2, 2048), 4.0) << backward;
    EXPECT_LT(ratio(FlashKernel::kTriton, 2048), 4.0) << backward;
  }
}

TEST(KernelTime, CudnnAttentionRunsAtItsPresetSpeedupPerPass) {
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  for (const bool backward : {false, true}) {
    Kernel kernel = attention_kernel(8, 32, 8192, 128, backward);
    const double flash2 = kernel_time(gpu, kernel).value();
    kernel.attention.kernel = FlashKernel::kCudnn;
    const double speedup = backward ? 1.6 : 1.7;  // configs/hardware/h200-sxm-141gb.json
    EXPECT_DOUBLE_EQ(kernel_time(gpu, kernel).value(), flash2 / speedup) << backward;
  }
}

// A speedup no GPU has (10x FlashAttention-2 at 0.35 of peak) is capped at the dtype's peak: no
// kernel runs faster, and MFU could otherwise pass 100 %.
TEST(KernelTime, AttentionNeverRunsAboveItsDtypesPeak) {
  GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  gpu.cudnn_attention_forward_speedup = 10.0;
  Kernel kernel = attention_kernel(8, 32, 8192, 128, /*backward=*/false);
  kernel.attention.kernel = FlashKernel::kCudnn;
  EXPECT_DOUBLE_EQ(kernel_time(gpu, kernel).value(),
                   kernel.flops.value() / gpu.peak(kernel.dtype).value());
}

}  // namespace
}  // namespace fsdpsim::hardware
