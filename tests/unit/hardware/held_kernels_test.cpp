// The H200 preset against kernels held for a minute at the GPU's 700 W power limit
// (configs/validation/measured-h200/kernels/sustained-*.json, measure_sustained_compute.py): what
// a long training run keeps of each kind of kernel is what the preset charges it. GEMMs lose
// sustained_compute_fraction (fitted on published runs, close to the held GEMMs' 0.83);
// attention loses attention_sustained_fraction (0.99, measured here).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cost_model.hpp"
#include "kernel_builders.hpp"
#include "preset_loader.hpp"

namespace fsdpsim::hardware {
namespace {

nlohmann::json held_run(const std::string& name) {
  std::ifstream in(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/measured-h200/kernels/" + name);
  return nlohmann::json::parse(in);
}

// The mean TFLOP/s of a held run's 5 s windows.
double held_tflops(const nlohmann::json& run) {
  double sum = 0.0;
  for (const auto& window : run.at("windows")) sum += window.at("tflops").get<double>();
  return sum / static_cast<double>(run.at("windows").size());
}

// fsdpsim's TFLOP/s for a causal attention forward and backward of the run's shape.
double predicted_attention_tflops(const GpuSpec& gpu, const nlohmann::json& run,
                                  FlashKernel kernel) {
  const auto shape = run.at("shape").get<std::vector<std::int64_t>>();
  double flops = 0.0;
  double seconds = 0.0;
  for (const bool backward : {false, true}) {
    Kernel k = testing::attention_kernel(shape[0], shape[1], shape[2], shape[3], backward);
    k.attention.kernel = kernel;
    flops += k.flops.value();
    seconds += kernel_time(gpu, k).value();
  }
  return flops / seconds / 1e12;
}

TEST(HeldKernels, HopperAttentionIsPricedAtItsRateHeldAtThePowerLimit) {
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  // FlashAttention-2 held 296-298 TFLOP/s, cuDNN 487-490.
  for (const auto& [file, kernel] : {std::pair{"sustained-flash.json", FlashKernel::kFlash2},
                                     std::pair{"sustained-cudnn.json", FlashKernel::kCudnn}}) {
    SCOPED_TRACE(file);
    const nlohmann::json run = held_run(file);
    EXPECT_NEAR(predicted_attention_tflops(gpu, run, kernel) / held_tflops(run), 1.0, 0.03);
  }
}

TEST(HeldKernels, GemmsArePricedNearTheirRateHeldAtThePowerLimit) {
  const GpuSpec gpu = testing::load_preset("h200-sxm-141gb").gpu;
  for (const char* file : {"sustained-gemm.json", "sustained-gemm-2026-12-04.json"}) {
    SCOPED_TRACE(file);
    const nlohmann::json run = held_run(file);
    const std::int64_t n = run.at("size").get<std::int64_t>();
    const Kernel k = testing::gemm_kernel(n, n, n);
    const double predicted = k.flops.value() / kernel_time(gpu, k).value() / 1e12;
    // 658-667 TFLOP/s held; the fitted fraction prices it a few per cent slower.
    EXPECT_NEAR(predicted / held_tflops(run), 1.0, 0.05);
  }
}

}  // namespace
}  // namespace fsdpsim::hardware
