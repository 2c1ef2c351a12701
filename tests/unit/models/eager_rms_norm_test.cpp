// The reference RMSNorm run op by op (models/eager_rms_norm.hpp) against a hand count: Llama 3.1
// 8B, one sequence of 16 tokens in bf16, so x = 16 x 4096 x 2 B = 131072 B, its fp32 copy
// x32 = 262144 B, a row of fp32 statistics 64 B and the weight 8192 B.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/workload.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

constexpr std::int64_t kX = 16 * 4096 * 2;
constexpr std::int64_t kX32 = 16 * 4096 * 4;
constexpr std::int64_t kRow = 16 * 4;
constexpr std::int64_t kWeight = 4096 * 2;

WorkloadOptions eager_options() {
  WorkloadOptions o = testing::options(1, 16);
  o.rms_norm = RmsNormKernel::kEager;
  return o;
}

struct NamedBytes {
  std::string name;
  std::int64_t bytes = 0;
  bool operator==(const NamedBytes&) const = default;
};

// The kernels whose names start with `prefix`, in order.
std::vector<NamedBytes> kernels_of(const std::vector<NamedKernel>& kernels,
                                   const std::string& prefix) {
  std::vector<NamedBytes> out;
  for (const NamedKernel& k : kernels) {
    if (k.name.rfind(prefix, 0) == 0) out.push_back({k.name, k.kernel.bytes.value()});
  }
  return out;
}

void PrintTo(const NamedBytes& k, std::ostream* os) { *os << k.name << " " << k.bytes; }

TEST(EagerRmsNorm, ForwardRunsEachLineOfTheReferenceModule) {
  // x.float(); pow(2); mean(-1); + eps; rsqrt; x32 * r; type_as(x); weight * y: each a kernel
  // reading its inputs and writing its output.
  const Workload w = build_workload(testing::llama_3_1_8b(), eager_options());
  const std::vector<NamedBytes> expected = {
      {"rmsnorm1_to_fp32", kX + kX32}, {"rmsnorm1_pow", 2 * kX32},
      {"rmsnorm1_mean", kX32 + kRow},  {"rmsnorm1_add_eps", 2 * kRow},
      {"rmsnorm1_rsqrt", 2 * kRow},    {"rmsnorm1_mul", 2 * kX32 + kRow},
      {"rmsnorm1_type_as", kX32 + kX}, {"rmsnorm1_weight", 2 * kX + kWeight}};
  EXPECT_EQ(kernels_of(w.layers[1].forward, "rmsnorm1"), expected);
  std::int64_t forward = 0;
  for (const NamedBytes& k : expected) forward += k.bytes;
  EXPECT_EQ(forward - kWeight - 6 * kRow, 36 * (kX / 2));  // 36 bytes per element
}

TEST(EagerRmsNorm, BackwardRunsAutogradsFormulasKernelByKernel) {
  // derivatives.yaml / FunctionsManual.cpp, last op first: weight * y (dy * y over every token,
  // then summed to the weight's shape; dy * weight), type_as, the multiply (g * r; g * x32 summed
  // over the row), rsqrt (-0.5 * grad * result.pow(3)), mean (expanded, divided), pow(2)
  // (grad * (2 * x32.pow(1)), pow by 1 a copy), then autograd's sum of the two gradients of x32
  // and the cast back to bf16.
  const Workload w = build_workload(testing::llama_3_1_8b(), eager_options());
  const std::vector<NamedBytes> expected = {{"rmsnorm1_weight_wgrad_mul", 3 * kX},
                                            {"rmsnorm1_weight_dgrad", 2 * kX + kWeight},
                                            {"rmsnorm1_weight_wgrad_sum", kX + kWeight},
                                            {"rmsnorm1_type_as_bwd", kX + kX32},
                                            {"rmsnorm1_mul_dgrad_x", 2 * kX32 + kRow},
                                            {"rmsnorm1_mul_dgrad_rsqrt_mul", 3 * kX32},
                                            {"rmsnorm1_mul_dgrad_rsqrt_sum", kX32 + kRow},
                                            {"rmsnorm1_rsqrt_bwd_scale", 2 * kRow},
                                            {"rmsnorm1_rsqrt_bwd_pow", 2 * kRow},
                                            {"rmsnorm1_rsqrt_bwd_mul", 3 * kRow},
                                            {"rmsnorm1_mean_bwd", kRow + kX32},
                                            {"rmsnorm1_pow_bwd_copy", 2 * kX32},
                                            {"rmsnorm1_pow_bwd_scale", 2 * kX32},
                                            {"rmsnorm1_pow_bwd_mul", 3 * kX32},
                                            {"rmsnorm1_grad_sum", 3 * kX32},
                                            {"rmsnorm1_to_fp32_bwd", kX32 + kX}};
  EXPECT_EQ(kernels_of(w.layers[1].backward, "rmsnorm1"), expected);
  // 92 bytes per element (kX / 2 elements), forward 36: against the fused kernel's 10 and 4.
  std::int64_t backward = 0;
  for (const NamedBytes& k : expected) backward += k.bytes;
  EXPECT_EQ(backward - 2 * kWeight - 10 * kRow, 92 * (kX / 2));
}

TEST(EagerRmsNorm, KeepsTheFp32CopyWhereTheFusedKernelKeepsTheInput) {
  // Fused: x and the rstd row. Eager: x32, r and the normalized y (bf16): x32 more per norm,
  // two norms a block, one in the head.
  const Workload fused = build_workload(testing::llama_3_1_8b(), testing::options(1, 16));
  const Workload eager = build_workload(testing::llama_3_1_8b(), eager_options());
  EXPECT_EQ(eager.layers[1].saved_activations.value() - fused.layers[1].saved_activations.value(),
            2 * kX32);
  // The fused kernel saves the block input itself, the eager form only its fp32 copy.
  EXPECT_EQ(fused.layers[1].saved_input.value(), kX);
  EXPECT_EQ(eager.layers[1].saved_input.value(), 0);
  EXPECT_EQ(
      eager.layers.back().saved_activations.value() - fused.layers.back().saved_activations.value(),
      kX32);
}

TEST(EagerRmsNorm, CompiledBlocksFuseTheirNormsButTheFinalNormStaysEager) {
  // torchtitan compiles each block: Inductor writes its own norm whatever the module's code;
  // the final norm runs outside the compiled blocks, as the module runs it.
  WorkloadOptions fused = testing::options(1, 16);
  fused.compiled = true;
  WorkloadOptions eager = eager_options();
  eager.compiled = true;
  const Workload f = build_workload(testing::llama_3_1_8b(), fused);
  const Workload e = build_workload(testing::llama_3_1_8b(), eager);
  EXPECT_EQ(kernels_of(e.layers[1].forward, ""), kernels_of(f.layers[1].forward, ""));
  EXPECT_EQ(kernels_of(e.layers[1].backward, ""), kernels_of(f.layers[1].backward, ""));
  EXPECT_EQ(kernels_of(e.layers.back().forward, "norm_").size(), 8U);
  EXPECT_TRUE(kernels_of(f.layers.back().forward, "norm_").empty());
}

TEST(EagerRmsNorm, Fp32ComputeRunsNoCasts) {
  // In fp32, x.float() and type_as return their input: six forward kernels, fourteen backward.
  WorkloadOptions o = eager_options();
  o.compute_dtype = Dtype::kFp32;
  const Workload w = build_workload(testing::llama_3_1_8b(), o);
  EXPECT_EQ(kernels_of(w.layers[1].forward, "rmsnorm1").size(), 6U);
  EXPECT_EQ(kernels_of(w.layers[1].backward, "rmsnorm1").size(), 14U);
  // x.float() is x: pow saves the block input itself.
  EXPECT_EQ(w.layers[1].saved_input, w.layers[1].saved_activations_checkpointed);
}

}  // namespace
}  // namespace fsdpsim::models
