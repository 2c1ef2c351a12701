// Where a non-reentrant checkpoint's early stop ends a block's recompute
// (Layer::recompute_early_stop_kernel): at the last linear when nothing after it saves a tensor
// (its ATen mm packs its inputs before it runs), or after the dropout whose mask is saved once it
// has run. The name survives the passes that rewrite the forward kernels.
#include <gtest/gtest.h>

#include <string>

#include "models/workload.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

using testing::find_kernel;

void expect_stop(const Workload& w, const std::string& kernel) {
  for (const Layer& l : w.layers) {
    if (l.kind != LayerKind::kBlock) {
      EXPECT_TRUE(l.recompute_early_stop_kernel.empty()) << l.name;
      continue;
    }
    EXPECT_EQ(l.recompute_early_stop_kernel, kernel) << l.name;
    EXPECT_NO_THROW((void)find_kernel(l.forward, kernel)) << l.name;
  }
}

TEST(RecomputeEarlyStop, MptStopsAtTheDownProjection) {
  expect_stop(build_workload(testing::mpt_spec(2, 64, 4, 128, 16), testing::options(1, 8)),
              "mlp_down");
}

// minGPT's residual dropout after mlp_down saves its mask once it has run: only the add is left.
TEST(RecomputeEarlyStop, GptWithDropoutStopsAtTheResidualAdd) {
  expect_stop(build_workload(testing::tiny_gpt(), testing::options(1, 8)), "residual2");
}

TEST(RecomputeEarlyStop, LlamaStopsAtTheDownProjection) {
  TransformerSpec spec = testing::llama_3_1_8b();
  spec.n_layers = 2;
  expect_stop(build_workload(spec, testing::options(1, 64)), "down");
}

// Autocast's weight cast, float8 and torch.compile keep the GEMM's name.
TEST(RecomputeEarlyStop, RewritesKeepTheStopKernel) {
  const TransformerSpec spec = testing::mpt_spec(2, 64, 4, 128, 16);
  WorkloadOptions options = testing::options(1, 8);
  options.weight_dtype = Dtype::kFp32;
  expect_stop(build_workload(spec, options), "mlp_down");
  options.weight_dtype.reset();
  options.float8_linears = true;
  const Workload fp8 = build_workload(spec, options);
  expect_stop(fp8, "mlp_down");
  EXPECT_EQ(find_kernel(fp8.layers[1].forward, "mlp_down").kernel.dtype, Dtype::kFp8);
  options.compiled = true;
  expect_stop(build_workload(spec, options), "mlp_down");
}

}  // namespace
}  // namespace fsdpsim::models
