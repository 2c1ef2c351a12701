#include "hardware/gemm_cost.hpp"

#include <optional>
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

TEST(GemmCost, LargeSquareBf16GemmRunsAtCalibratedEfficiency) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-80gb").gpu;
  const Kernel kernel = gemm_kernel(8192, 8192, 8192);
  const double ideal =
      kernel.flops.value() /
      (gpu.peak(Dtype::kBf16).value() * gpu.gemm_efficiency * gpu.sustained_compute_fraction);
  EXPECT_NEAR(kernel_time(gpu, kernel).value() / ideal, 1.0, 0.01);
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

// Grids smaller than one wave split their k-loop across the SMs where the preset says cuBLAS
// does (configs/calibration/h200-sxm-141gb-measured.json, timed on an H200 without the in-training
// derating): 1024 x 1024 x 16384 (32 tiles of 256x128 on 132 SMs) measured 49.8 us, priced
// 34.4 GFLOP / (989 x 0.83 x 0.992 TFLOP/s) + 34.6 MB of fp32 partial tiles at 0.87 x 4.8 TB/s =
// 42.2 + 8.3 = 50.5 us, where one tile per SM would take 3.5 times as long; at k = 1024, 248 of
// k per SM, it does not split (measured 10.1 us, priced 11.1). The A100 presets do not split.
TEST(GemmCost, SmallGridsSplitTheirReductionWhereCublasDoes) {
  GpuSpec h200 = testing::load_preset("h200-sxm-141gb").gpu;
  h200.sustained_compute_fraction = 1.0;
  const Kernel deep = gemm_kernel(1024, 1024, 16384);
  const std::optional<SplitK> split = split_k(h200, deep.gemm, Dtype::kBf16);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->depth, 16384 * 32 / 132);
  EXPECT_DOUBLE_EQ(split->tile_efficiency, 1.0);
  EXPECT_EQ(split->fixup.value(), 2 * 132 * 256 * 128 * 4);
  EXPECT_NEAR(kernel_time(h200, deep).value() * 1e6, 50.5, 0.2);
  const Kernel shallow = gemm_kernel(1024, 1024, 1024);
  EXPECT_FALSE(split_k(h200, shallow.gemm, Dtype::kBf16).has_value());
  EXPECT_NEAR(kernel_time(h200, shallow).value() * 1e6, 11.1, 0.1);
  // A full wave and more keep one tile per SM.
  EXPECT_FALSE(split_k(h200, GemmShape{3072, 1408, 8192}, Dtype::kBf16).has_value());
  const GpuSpec a100 = testing::load_preset("a100-sxm-80gb").gpu;
  EXPECT_FALSE(split_k(a100, deep.gemm, Dtype::kBf16).has_value());
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
  EXPECT_DOUBLE_EQ(gemm_depth_efficiency(128), 0.8);
  EXPECT_GT(gemm_depth_efficiency(2048), 0.98);
  EXPECT_LT(gemm_depth_efficiency(64), gemm_depth_efficiency(4096));
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

TEST(GemmCost, Fp8RunsAtTheFp8Peak) {
  const GpuSpec gpu = testing::load_preset("h100-sxm-80gb").gpu;
  const Seconds bf16 = kernel_time(gpu, gemm_kernel(8192, 8192, 8192, Dtype::kBf16));
  const Seconds fp8 = kernel_time(gpu, gemm_kernel(8192, 8192, 8192, Dtype::kFp8));
  EXPECT_NEAR(ratio(bf16, fp8), 1979.0 / 989.0, 1e-9);
}

TEST(GemmCost, DtypeWithoutPeakIsAPreconditionViolation) {
  const GpuSpec gpu = testing::load_preset("a100-sxm-40gb").gpu;  // no fp8 on Ampere
  EXPECT_THROW(kernel_time(gpu, gemm_kernel(4096, 4096, 4096, Dtype::kFp8)), std::logic_error);
  EXPECT_THROW(kernel_time(gpu, gemm_kernel(0, 0, 0, Dtype::kFp8)), std::logic_error);
}

}  // namespace
}  // namespace fsdpsim::hardware
