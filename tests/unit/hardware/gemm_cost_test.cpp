#include "hardware/gemm_cost.hpp"

#include <stdexcept>

#include <gtest/gtest.h>

#include "hardware/cost_model.hpp"
#include "hardware/roofline.hpp"
#include "kernel_builders.hpp"
#include "preset_loader.hpp"

namespace fsdpsim::hardware {
namespace {

using testing::gemm_kernel;

double seconds_per_flop(const GpuSpec& gpu, const Kernel& kernel) {
  return kernel_time(gpu, kernel).value() / kernel.flops.value();
}

TEST(GemmCost, LargeSquareBf16GemmRunsAtCalibratedEfficiencyLessItsTileOverheads) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  const Kernel kernel = gemm_kernel(8192, 8192, 8192);
  const double ideal =
      kernel.flops.value() /
      (gpu.peak(Dtype::kBf16).value() * gpu.gemm_efficiency * gpu.sustained_compute_fraction);
  // 2048 tiles in 19 waves of 108; each tile pays the pipeline fill and its epilogue.
  const double quantization = 2048.0 / (19.0 * 108.0);
  const double depth = 8192.0 / (8192.0 + 32.0 + gemm_epilogue_k(gpu, Dtype::kBf16));
  EXPECT_NEAR(kernel_time(gpu, kernel).value() / ideal, 1.0 / (quantization * depth), 1e-9);
  EXPECT_NEAR(kernel_time(gpu, kernel).value() / ideal, 1.0, 0.03);
}

TEST(GemmCost, H200Bf16MatmulMatchesWorkplaceMeasurement) {
  // bf16 8192^3 matmul measured at 769-798 TFLOP/s on an H200 (this workplace, 2026-11-04): a
  // micro-benchmark, so without the in-training derating.
  GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  gpu.sustained_compute_fraction = 1.0;
  const Kernel kernel = gemm_kernel(8192, 8192, 8192);
  const double tflops = kernel.flops.value() / kernel_time(gpu, kernel).value() / 1e12;
  EXPECT_GT(tflops, 769.0);
  EXPECT_LT(tflops, 798.0);
}

TEST(GemmCost, OneTileMoreThanAWaveIsSlowerPerFlop) {
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;  // 132 SMs, 256x128 bf16 tiles
  const Kernel full_wave = gemm_kernel(3072, 1408, 8192);          // 12 x 11 = 132 tiles: one wave
  const Kernel spill = gemm_kernel(1792, 2432, 8192);              // 7 x 19 = 133 tiles: two waves
  EXPECT_DOUBLE_EQ(gemm_quantization_efficiency(gpu, full_wave.gemm, Dtype::kBf16), 1.0);
  EXPECT_DOUBLE_EQ(gemm_quantization_efficiency(gpu, spill.gemm, Dtype::kBf16), 133.0 / 264.0);
  EXPECT_GT(seconds_per_flop(gpu, spill), 1.9 * seconds_per_flop(gpu, full_wave));
}

TEST(GemmCost, WaveQuantizationCountsBatchedTiles) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;  // 108 SMs
  EXPECT_DOUBLE_EQ(gemm_quantization_efficiency(gpu, GemmShape{256, 128, 4096, 108}, Dtype::kBf16),
                   1.0);
  EXPECT_DOUBLE_EQ(gemm_quantization_efficiency(gpu, GemmShape{256, 128, 4096, 109}, Dtype::kBf16),
                   109.0 / 216.0);
}

TEST(GemmCost, PartialEdgeTilesComputePadding) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  // 108 tiles of 256x128 exactly, then one more row: 12 -> 13 row tiles, 117 tiles, 2 waves.
  const double even = gemm_quantization_efficiency(gpu, GemmShape{3072, 1152, 4096}, Dtype::kBf16);
  const double ragged =
      gemm_quantization_efficiency(gpu, GemmShape{3073, 1152, 4096}, Dtype::kBf16);
  EXPECT_DOUBLE_EQ(even, 1.0);
  EXPECT_DOUBLE_EQ(ragged, 3073.0 * 1152.0 / (2.0 * 108.0 * 256.0 * 128.0));
}

TEST(GemmCost, Fp32UsesSmallerTiles) {
  EXPECT_EQ(representative_gemm_tile(Dtype::kBf16).m, 256);
  EXPECT_EQ(representative_gemm_tile(Dtype::kFp32).m, 128);
  EXPECT_EQ(representative_gemm_tile(Dtype::kTf32).n, 128);
}

TEST(GemmCost, DimensionsBelowTheTileGetANarrowerTile) {
  EXPECT_EQ(launched_gemm_tile(GemmShape{16, 8192, 8192}, Dtype::kBf16).m, 16);
  EXPECT_EQ(launched_gemm_tile(GemmShape{100, 64, 8192}, Dtype::kBf16).m, 128);
  EXPECT_EQ(launched_gemm_tile(GemmShape{100, 64, 8192}, Dtype::kBf16).n, 64);
  EXPECT_EQ(launched_gemm_tile(GemmShape{3, 3, 3}, Dtype::kBf16).m, kGemmMinTileDim);
  EXPECT_EQ(launched_gemm_tile(GemmShape{4096, 4096, 4096}, Dtype::kBf16).m, 256);
}

TEST(GemmCost, ShallowReductionCannotAmortizeThePipeline) {
  EXPECT_DOUBLE_EQ(gemm_depth_efficiency(128, 32.0), 0.8);
  EXPECT_DOUBLE_EQ(gemm_depth_efficiency(0, 32.0), 1.0);
  EXPECT_GT(gemm_depth_efficiency(2048, 32.0), 0.98);
  EXPECT_LT(gemm_depth_efficiency(64, 32.0), gemm_depth_efficiency(4096, 32.0));
}

TEST(GemmCost, EpilogueIsTheOutputStoreInMainLoopDepth) {
  // A100-80GB bf16: 2 B x 312 TFLOP/s x 0.87 x sustained / (2 x 2039 GB/s x 0.85).
  GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  gpu.sustained_compute_fraction = 1.0;
  EXPECT_NEAR(gemm_epilogue_k(gpu, Dtype::kBf16), 2.0 * 312e12 * 0.87 / (2.0 * 2039e9 * 0.85),
              1e-9);
  EXPECT_NEAR(gemm_epilogue_k(gpu, Dtype::kBf16), 156.6, 0.1);
  // A tf32 GEMM writes fp32, twice the bytes at 156 of bf16's 312 TFLOP/s: the same depth.
  EXPECT_EQ(gemm_output_bytes(Dtype::kTf32), 4);
  EXPECT_NEAR(gemm_epilogue_k(gpu, Dtype::kTf32), gemm_epilogue_k(gpu, Dtype::kBf16), 1e-9);
  // A fp8 GEMM writes bf16 at twice bf16's rate: twice the depth.
  EXPECT_EQ(gemm_output_bytes(Dtype::kFp8), 2);
  const GpuSpec h200 = testing::load_preset("h200-sxm-141gb").gpu;
  EXPECT_NEAR(gemm_epilogue_k(h200, Dtype::kFp8) / gemm_epilogue_k(h200, Dtype::kBf16),
              1979.0 / 989.0, 1e-9);
  // The sustained fraction slows the main loop, not the stores: the epilogue is worth less k.
  GpuSpec derated = gpu;
  derated.sustained_compute_fraction = 0.5;
  EXPECT_NEAR(gemm_epilogue_k(derated, Dtype::kBf16), 0.5 * gemm_epilogue_k(gpu, Dtype::kBf16),
              1e-9);
}

TEST(GemmCost, ShallowGemmsLoseToTheirEpilogue) {
  // The same FLOPs and a full grid, k = 512 against k = 8192: the shallow one pays its output
  // store against 16x less main loop per tile (H200 measured 1.35-1.38x slower per FLOP at
  // k = 512 than the fill-only model; configs/calibration/h200-sxm-141gb-measured.json).
  GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  gpu.sustained_compute_fraction = 1.0;
  const Kernel shallow = gemm_kernel(16384, 8192, 512);
  const Kernel deep = gemm_kernel(16384, 512, 8192);
  const double k_epi = gemm_epilogue_k(gpu, Dtype::kBf16);
  const auto per_flop = [&](const Kernel& k) {  // 1 / (quantization x depth efficiency)
    return 1.0 / (gemm_quantization_efficiency(gpu, k.gemm, Dtype::kBf16) *
                  gemm_depth_efficiency(k.gemm.k, 32.0 + k_epi));
  };
  const double expected = per_flop(shallow) / per_flop(deep);
  EXPECT_NEAR(seconds_per_flop(gpu, shallow) / seconds_per_flop(gpu, deep), expected, 1e-9);
  EXPECT_GT((512.0 + 32.0 + k_epi) / 512.0 / ((8192.0 + 32.0 + k_epi) / 8192.0), 1.3);
}

TEST(GemmCost, TinyGemmCostsTheKernelFloor) {
  const GpuSpec gpu = testing::load_preset("h100-sxm-80gb").gpu;
  EXPECT_EQ(kernel_time(gpu, gemm_kernel(64, 64, 64)), kMinKernelDuration);
  EXPECT_EQ(kernel_time(gpu, gemm_kernel(0, 64, 64)), kMinKernelDuration);
}

TEST(GemmCost, SkinnyGemmIsMemoryBound) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  const Kernel kernel = gemm_kernel(16, 8192, 8192);  // 16 FLOP per byte: far below the ridge
  const double streaming = static_cast<double>(kernel.bytes.value()) /
                           (gpu.hbm_bandwidth.value() * gpu.memory_efficiency);
  EXPECT_DOUBLE_EQ(kernel_time(gpu, kernel).value(), streaming);
}

TEST(GemmCost, Fp8RunsAtTheFp8PeakLessALongerEpilogue) {
  // Twice the main-loop rate writing the same bf16 output: the epilogue is worth twice the k.
  const GpuSpec gpu = testing::load_preset("h100-sxm-80gb").gpu;
  const Seconds bf16 = kernel_time(gpu, gemm_kernel(8192, 8192, 8192, Dtype::kBf16));
  const Seconds fp8 = kernel_time(gpu, gemm_kernel(8192, 8192, 8192, Dtype::kFp8));
  const auto depth = [&](Dtype d) {
    return gemm_depth_efficiency(8192, 32.0 + gemm_epilogue_k(gpu, d));
  };
  EXPECT_NEAR(ratio(bf16, fp8), 1979.0 / 989.0 * depth(Dtype::kFp8) / depth(Dtype::kBf16), 1e-9);
}

TEST(GemmCost, DtypeWithoutPeakIsAPreconditionViolation) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-40gb").gpu;  // no fp8 on Ampere
  EXPECT_THROW(kernel_time(gpu, gemm_kernel(4096, 4096, 4096, Dtype::kFp8)), std::logic_error);
  EXPECT_THROW(kernel_time(gpu, gemm_kernel(0, 0, 0, Dtype::kFp8)), std::logic_error);
}

}  // namespace
}  // namespace fsdpsim::hardware
