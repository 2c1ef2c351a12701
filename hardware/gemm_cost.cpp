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
// - Pipeline fill: each thread block first loads (stages - 1) k-blocks of A and B before its
//   first MMA (CUTLASS sm80 bf16 256x128x32 uses 3 stages, so 2 k-blocks of 32). Only part of
//   that overlaps with other blocks, so a tile loses on the order of one k-block (32 of k) of
//   main-loop time (kGemmPipelineFillK).
// - Epilogue: after its main loop a tile writes its output to global memory (CUTLASS,
//   media/docs/efficient_gemm.md, "Epilogue": the accumulators are staged through shared memory
//   and stored once the main loop has finished), while the SM's tensor cores wait. With every
//   SM doing the same, the stores share HBM: a tile's Tm*Tn*b output bytes take
//   Tm*Tn*b / (achievable HBM bandwidth / SMs), against 2*Tm*Tn*k / (achieved math rate / SMs)
//   for its main loop, so the epilogue is worth k_epi = b * rate / (2 * bandwidth) of k
//   (gemm_epilogue_k): 197 on an H200 in bf16, 157 on an A100-80GB (both at a sustained
//   fraction of 1). The reduction depth k thus
//   reaches k / (k + 32 + k_epi) of the main-loop rate. This project's H200 measurement
//   (configs/calibration/h200-sxm-141gb-measured.json, 217 cuBLASLt GEMMs) shows it: against
//   the model, large bf16 GEMMs of k = 512 ran 1.35-1.38x slower, k = 1024 1.03-1.22x and
//   k >= 4096 0.87-1.12x with the fill alone; with the epilogue, k = 512 runs at 0.99-1.01x of
//   the model. Over all 217 measured GEMMs the mean |ln(measured / model)| goes from 0.147 to
//   0.126 (`fsdpsim calibrate fit configs/calibration/h200-sxm-141gb-measured.json --against
//   h200-sxm-141gb`); what remains is mostly wave quantization of grids smaller than the GPU,
//   below.
// - No split-K: cuBLAS splits the reduction dimension of a GEMM whose output has too few tiles
//   to fill the GPU (CUTLASS media/docs/efficient_gemm.md, "Split K - reduction across
//   threadblocks"). On the H200 above, 2048 x 512 x 32768 (32 tiles for 132 SMs) ran at
//   731 TFLOP/s, 3.7x faster than this model's one partial wave, and modelling the split (each
//   slice's fp32 partials plus a reduction kernel, the fastest split taken) brings the mean
//   |ln| to 0.075. But it made both end-to-end checks worse, because it speeds up exactly the
//   weight gradients (d x d outputs over k = tokens) of small models: published rows
//   6.0 -> 6.7 % MAPE (mpt-125m +4 -> +10 %), this project's H200 runs 2.4 -> 2.9 %. The
//   weight-gradient kernels actually launched in a training step are the next thing to profile
//   on a GPU; until then the unsplit wave model stays.
// - sustained_compute_fraction (gpu_spec.hpp): the rate a GEMM keeps inside a training step.
// - Skinny products: a dimension below the tile gets a narrower tile (launched_gemm_tile), so a
//   16 x 8192 x 8192 GEMM is priced as the memory-bound product it is rather than as 94 %
//   padding.
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

std::int64_t gemm_output_bytes(Dtype dtype) {
  return dtype == Dtype::kFp8 ? dtype_bytes(Dtype::kBf16) : dtype_bytes(dtype);
}

double gemm_epilogue_k(const GpuSpec& gpu, Dtype dtype) {
  const double math_rate =
      required_peak(gpu, dtype).value() * gpu.gemm_efficiency * gpu.sustained_compute_fraction;
  const double store_rate = gpu.hbm_bandwidth.value() * gpu.memory_efficiency;
  return static_cast<double>(gemm_output_bytes(dtype)) * math_rate / (2.0 * store_rate);
}

double gemm_depth_efficiency(std::int64_t k, double overhead_k) {
  if (k <= 0) return 1.0;
  const auto depth = static_cast<double>(k);
  return depth / (depth + overhead_k);
}

Seconds gemm_time(const GpuSpec& gpu, const Kernel& kernel) {
  const double overhead_k =
      static_cast<double>(kGemmPipelineFillK) + gemm_epilogue_k(gpu, kernel.dtype);
  const double efficiency = gpu.gemm_efficiency * gpu.sustained_compute_fraction *
                            gemm_quantization_efficiency(gpu, kernel.gemm, kernel.dtype) *
                            gemm_depth_efficiency(kernel.gemm.k, overhead_k);
  const Seconds compute = compute_time(gpu, kernel.flops, kernel.dtype, efficiency);
  const Seconds memory = memory_time(gpu, kernel.bytes);
  return std::max(compute, memory);
}

}  // namespace fsdpsim::hardware
