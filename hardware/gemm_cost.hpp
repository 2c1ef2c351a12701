// GEMM cost: roofline with tile and wave quantization (NVIDIA, "Matrix Multiplication
// Background User's Guide", docs.nvidia.com/deeplearning/performance/
// dl-performance-matrix-multiplication, sections "Tile Quantization" and "Wave Quantization").
// kernel_time() (cost_model.hpp) is the entry point; these pieces are public so that tests and
// calibration tools can check each factor on its own. All O(1).
#pragma once

#include <cstdint>
#include <optional>

#include "hardware/gpu_spec.hpp"
#include "sim/units/dtype.hpp"
#include "sim/units/op_shapes.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::hardware {

// Output tile (rows x columns of C) that one thread block computes.
struct GemmTile {
  std::int64_t m = 0;
  std::int64_t n = 0;
};

// The representative cuBLAS tile for a math dtype: 256x128 for the 16-bit and 8-bit tensor-core
// types (the tile of the User's Guide's A100 wave example; one such block per SM), 128x128 for
// fp32 / tf32 (CUTLASS's default threadblock shape for SIMT SGEMM and sm80 TF32 tensor ops).
// cuBLAS picks among many tiles per shape; calibrated curves (calibrate/) replace this choice.
GemmTile representative_gemm_tile(Dtype dtype);

// The tile the model launches for `shape`: the representative tile, except that a dimension
// smaller than the tile gets the next power of two >= it (at least kGemmMinTileDim) -- cuBLAS
// has narrow-tile and GEMV kernels for skinny products, and only shrinking below-tile dimensions
// keeps the wave quantization of larger GEMMs intact.
GemmTile launched_gemm_tile(const GemmShape& shape, Dtype dtype);

// Smallest tile edge: the tensor-core MMA instruction's m16 (PTX mma.m16n8k16).
inline constexpr std::int64_t kGemmMinTileDim = 16;

// Useful fraction of the SM-time a GEMM's grid occupies:
//   useful outputs m*n*batch / (waves * sm_count * Tm * Tn),
// with (Tm, Tn) = launched_gemm_tile(), tiles = ceil(m/Tm) * ceil(n/Tn) * batch and
// waves = ceil(tiles / sm_count). This is tile
// quantization (edge tiles compute padding) times wave quantization (the last wave leaves SMs
// idle). 1 when both divide evenly; 1 for an empty shape (nothing to quantize).
double gemm_quantization_efficiency(const GpuSpec& gpu, const GemmShape& shape, Dtype dtype);

// A grid of fewer output tiles than SMs whose reduction is deep enough to share out: cuBLAS then
// splits k across the SMs (split-K; stream-K kernels on Hopper), each SM running part of some
// tile's k-loop, and the partial tiles are summed (gemm_cost.cpp). tile_efficiency is the
// useful fraction of the tiles (their padding), depth each SM's share of the reduction, fixup
// the fp32 partial tiles written and read back.
struct SplitK {
  double tile_efficiency = 1.0;
  std::int64_t depth = 0;
  Bytes fixup{0};
};
// Smallest share of the reduction per SM (k * tiles / sm_count) at which the split is priced.
inline constexpr std::int64_t kSplitKMinDepth = 512;
// The split `shape` runs as, or nullopt: the GPU's cuBLAS does not split (GpuSpec::gemm_split_k),
// the grid fills the SMs, or its k is too shallow.
std::optional<SplitK> split_k(const GpuSpec& gpu, const GemmShape& shape, Dtype dtype);

// Fraction of the main-loop rate reached with reduction depth k: k / (k + kGemmPipelineFillK).
double gemm_depth_efficiency(std::int64_t k);

// Reduction depth whose worth of main-loop time each output tile loses to filling and draining
// its software pipeline (see gemm_cost.cpp for the argument).
inline constexpr std::int64_t kGemmPipelineFillK = 32;

// GEMM time without the kernel floor: max(compute, memory) with
//   compute = flops / (peak(dtype) * gemm_efficiency * quantization * depth efficiency),
//   memory  = bytes / (hbm_bandwidth * memory_efficiency);
// under split_k, compute = flops / (peak * gemm_efficiency * tile efficiency * depth efficiency
// of each SM's share) + the fixup's bytes at the memory rate.
// Throws std::logic_error when the GPU has no peak for kernel.dtype.
Seconds gemm_time(const GpuSpec& gpu, const Kernel& kernel);

}  // namespace fsdpsim::hardware
