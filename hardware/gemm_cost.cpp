// GEMM roofline with tile, wave and pipeline-depth effects.
//
// Sources:
// - Tile and wave quantization: NVIDIA "Matrix Multiplication Background User's Guide"
//   (docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication), which
//   explains both with 256x128 tiles on an A100 (108 SMs, one such tile per SM at a time, so a
//   wave is 108 tiles). Combined, the grid runs `waves` rounds of one full tile per SM, so
//   compute time = waves * (time of one padded tile), i.e. the useful FLOPs divided by the
//   quantization efficiency below.
// - gemm_efficiency (per preset) is the fraction of the dense peak a large, evenly tiled GEMM
//   reaches; presets take it from measured maximum-achievable-matmul numbers (configs/hardware).
// - Pipeline depth: each thread block first loads (stages - 1) k-blocks of A and B before its
//   first MMA (CUTLASS sm80 bf16 256x128x32 uses 3 stages, so 2 k-blocks of 32) and writes its
//   tile after the last one. Only part of that overlaps with other blocks, so a tile loses on
//   the order of one k-block (32 of k) of main-loop time: efficiency k / (k + 32). This costs
//   < 2 % for k >= 1536, consistent with the maximum-achievable-matmul searches finding their
//   best shapes at k = 1536-2816 (stas00/ml-engineering compute/accelerator/README.md "Maximum
//   Achievable Matmul FLOPS comparison table"), and 20 % at k = 128, where GEMMs are in any case
//   usually memory-bound.
// - sustained_compute_fraction (gpu_spec.hpp): the rate a GEMM keeps inside a training step.
// - Skinny products: a dimension below the tile gets a narrower tile (launched_gemm_tile), so a
//   16 x 8192 x 8192 GEMM is priced as the memory-bound product it is rather than as 94 %
//   padding.
// - Split-K: a grid of fewer tiles than SMs would leave SMs idle for its whole k-loop; cuBLAS
//   instead splits the reduction (cublasLt's CUBLASLT_ALGO_CONFIG_SPLITK_NUM with its reduction
//   schemes; the stream-K kernels of CUTLASS 3's sm90 tile schedulers, which Hopper's cuBLAS
//   runs), so that every SM computes a share of some tile's k-loop, and sums the partial tiles,
//   each written and read back in fp32 (the fixup). Priced as one wave over all SMs with each
//   SM's share k * tiles / sm_count as its depth, plus the fixup's traffic. Evidence: the bf16
//   GEMMs of configs/calibration/h200-sxm-141gb-measured.json (cuBLASLt's heuristic choice, timed
//   on an H200): 32 tiles of 256x128 at k = 4096-32768 ran at 550-731 TFLOP/s where one tile
//   per SM would give 199, and 64 and 96 tiles likewise (703-821); over the 109 bf16 shapes the
//   mean absolute error of this model falls from 19 % to 8 % (largest 268 % to 30 %). Only
//   deep enough reductions split: 32 tiles at k = 1024 (248 of k per SM) ran unsplit, at
//   212 TFLOP/s, and at k = 4096 (993 per SM) split; kSplitKMinDepth lies between.
#include "hardware/gemm_cost.hpp"

#include <algorithm>

#include "hardware/roofline.hpp"

namespace fsdpsim::hardware {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Tile edge for a dimension of size `dim`: the representative edge, or the next power of two
// >= dim (>= kGemmMinTileDim) when dim is smaller.
std::int64_t tile_edge(std::int64_t representative, std::int64_t dim) {
  if (dim >= representative) return representative;
  std::int64_t edge = kGemmMinTileDim;
  while (edge < dim) edge *= 2;
  return std::min(edge, representative);
}

}  // namespace

GemmTile representative_gemm_tile(Dtype dtype) {
  switch (dtype) {
    case Dtype::kBf16:
    case Dtype::kFp16:
    case Dtype::kFp8:
      return GemmTile{256, 128};
    case Dtype::kFp32:
    case Dtype::kTf32:
      return GemmTile{128, 128};
  }
  return GemmTile{128, 128};
}

GemmTile launched_gemm_tile(const GemmShape& shape, Dtype dtype) {
  const GemmTile representative = representative_gemm_tile(dtype);
  return GemmTile{tile_edge(representative.m, shape.m), tile_edge(representative.n, shape.n)};
}

double gemm_quantization_efficiency(const GpuSpec& gpu, const GemmShape& shape, Dtype dtype) {
  if (shape.m <= 0 || shape.n <= 0 || shape.batch <= 0 || gpu.sm_count <= 0) return 1.0;
  const GemmTile tile = launched_gemm_tile(shape, dtype);
  const std::int64_t tiles = ceil_div(shape.m, tile.m) * ceil_div(shape.n, tile.n) * shape.batch;
  const std::int64_t waves = ceil_div(tiles, std::int64_t{gpu.sm_count});
  const double useful = static_cast<double>(shape.m) * static_cast<double>(shape.n) *
                        static_cast<double>(shape.batch);
  const double launched = static_cast<double>(waves) * static_cast<double>(gpu.sm_count) *
                          static_cast<double>(tile.m) * static_cast<double>(tile.n);
  return useful / launched;
}

std::optional<SplitK> split_k(const GpuSpec& gpu, const GemmShape& shape, Dtype dtype) {
  if (!gpu.gemm_split_k || shape.m <= 0 || shape.n <= 0 || shape.k <= 0 || shape.batch <= 0 ||
      gpu.sm_count <= 0)
    return std::nullopt;
  const GemmTile tile = launched_gemm_tile(shape, dtype);
  const std::int64_t tiles = ceil_div(shape.m, tile.m) * ceil_div(shape.n, tile.n) * shape.batch;
  const std::int64_t sms = gpu.sm_count;
  if (tiles >= sms) return std::nullopt;
  const std::int64_t depth = shape.k * tiles / sms;
  if (depth < kSplitKMinDepth) return std::nullopt;
  const double useful = static_cast<double>(shape.m) * static_cast<double>(shape.n) *
                        static_cast<double>(shape.batch);
  const double padded =
      static_cast<double>(tiles) * static_cast<double>(tile.m) * static_cast<double>(tile.n);
  constexpr std::int64_t kPartialBytes = 4;  // fp32 accumulators
  return SplitK{useful / padded, depth, Bytes(2 * sms * tile.m * tile.n * kPartialBytes)};
}

double gemm_depth_efficiency(std::int64_t k) {
  if (k <= 0) return 1.0;
  const auto depth = static_cast<double>(k);
  return depth / (depth + static_cast<double>(kGemmPipelineFillK));
}

Seconds gemm_time(const GpuSpec& gpu, const Kernel& kernel) {
  const double rate = gpu.gemm_efficiency * gpu.sustained_compute_fraction;
  Seconds compute{0.0};
  if (const std::optional<SplitK> split = split_k(gpu, kernel.gemm, kernel.dtype)) {
    compute = compute_time(gpu, kernel.flops, kernel.dtype,
                           rate * split->tile_efficiency * gemm_depth_efficiency(split->depth)) +
              memory_time(gpu, split->fixup);
  } else {
    compute = compute_time(gpu, kernel.flops, kernel.dtype,
                           rate * gemm_quantization_efficiency(gpu, kernel.gemm, kernel.dtype) *
                               gemm_depth_efficiency(kernel.gemm.k));
  }
  const Seconds memory = memory_time(gpu, kernel.bytes);
  return std::max(compute, memory);
}

}  // namespace fsdpsim::hardware
