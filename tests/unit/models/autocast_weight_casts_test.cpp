// Autocast weight casts, checked on paper on one tiny linear (T = 32 tokens, 16 -> 32 features,
// bias, bf16 GEMMs over fp32 weights: 512 weight elements).
#include "models/autocast_weight_casts.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/float8_linear.hpp"
#include "models/kernel_factory.hpp"
#include "models/layer_draft.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

Layer one_linear() {
  const detail::BuildContext ctx = detail::make_context(testing::options(2, 16));  // T = 32
  detail::LayerDraft draft("blocks.0", LayerKind::kBlock, 16 * 32 + 32, 2);
  draft.forward(detail::linear_forward("fc", {16, 32, true}, ctx));
  detail::append_linear_backward(draft, "fc", {16, 32, true}, ctx);
  return draft.finish(-1);
}

std::vector<std::string> names(const std::vector<NamedKernel>& kernels) {
  std::vector<std::string> out;
  for (const NamedKernel& k : kernels) out.push_back(k.name);
  return out;
}

TEST(AutocastWeightCasts, EveryLinearCastsItsWeightAndItsWeightGradient) {
  const Layer before = one_linear();
  Layer layer = before;
  add_autocast_weight_casts(layer, 4, 2);
  EXPECT_EQ(names(layer.forward), (std::vector<std::string>{"fc_weight_cast", "fc"}));
  EXPECT_EQ(names(layer.backward),
            (std::vector<std::string>{"fc_dgrad", "fc_wgrad", "fc_weight_grad_cast", "fc_bgrad"}));
  // Reads 512 fp32 elements, writes 512 bf16 ones (and back in backward): 512 x 6 bytes.
  EXPECT_EQ(layer.forward[0].kernel.bytes.value(), 512 * 6);
  EXPECT_EQ(layer.forward[0].kernel.kind, KernelKind::kMemoryBound);
  EXPECT_EQ(layer.backward[2].kernel.bytes.value(), 512 * 6);
  // mm saves the bf16 copy for the input gradient; the bf16 weight gradient is a transient.
  EXPECT_EQ(layer.saved_activations.value() - before.saved_activations.value(), 512 * 2);
  EXPECT_EQ(layer.autocast_weight_copies, std::vector<Bytes>{Bytes(512 * 2)});
  EXPECT_EQ(layer.saved_activations_checkpointed, before.saved_activations_checkpointed);
  EXPECT_EQ(layer.backward_transient_peak().value() - before.backward_transient_peak().value(),
            512 * 2);
}

TEST(AutocastWeightCasts, FsdpWithFp32ParametersUnderBf16AutocastCastsEveryLinear) {
  const TransformerSpec spec = testing::mpt_spec(2, 64, 4, 128, 16);
  WorkloadOptions options = testing::options(1, 16);
  const Workload plain = build_workload(spec, options);
  options.weight_dtype = Dtype::kFp32;
  const Workload cast = build_workload(spec, options);
  // qkv, attn_out, mlp_up and mlp_down in each block; the tied LM head in the head.
  std::size_t casts = 0;
  for (const Layer& l : cast.layers) {
    for (const NamedKernel& k : l.forward) casts += k.name.ends_with("_weight_cast") ? 1 : 0;
  }
  EXPECT_EQ(casts, 2 * 4 + 1);
  EXPECT_EQ(cast.layers[1].autocast_weight_copies.size(), 4u);
  // A compiled block runs autocast inside its graph, where the weight cache is off.
  options.compiled = true;
  EXPECT_TRUE(build_workload(spec, options).layers[1].autocast_weight_copies.empty());
  options.compiled = false;
  options.weight_dtype = Dtype::kBf16;  // same as the compute dtype: nothing to cast
  EXPECT_EQ(build_workload(spec, options).layers[1].forward.size(), plain.layers[1].forward.size());
}

// Float8Linear under autocast over fp32 weights casts only its input to bf16; the weight goes
// from fp32 straight to float8 (its amax and cast read 4 bytes an element) and no bf16 copy is
// made or saved. Its weight gradient is still cast back to fp32.
TEST(AutocastWeightCasts, Float8LinearsCastTheirFp32WeightsStraightToFloat8) {
  const Layer before = one_linear();
  Layer layer = before;
  add_autocast_weight_casts(layer, 4, 2, /*float8_linears=*/true);
  convert_linears_to_float8(layer, Float8Weight::kCastAtEachUse, Dtype::kFp32);
  for (const NamedKernel& k : layer.forward) EXPECT_FALSE(k.name.ends_with("_weight_cast"));
  EXPECT_EQ(layer.saved_activations, before.saved_activations);
  EXPECT_EQ(testing::find_kernel(layer.forward, "fc_amax_weight").kernel.bytes.value(),
            512 * 4 + 4);
  EXPECT_EQ(testing::find_kernel(layer.forward, "fc_cast_weight").kernel.bytes.value(),
            512 * 4 + 4 + 512);
  EXPECT_EQ(testing::find_kernel(layer.backward, "fc_amax_weight_bwd").kernel.bytes.value(),
            512 * 4 + 4);
  EXPECT_EQ(testing::find_kernel(layer.forward, "fc_amax_input").kernel.bytes.value(),
            512 * 2 + 4);  // the input is cast to bf16 first: read in bf16
  EXPECT_EQ(testing::find_kernel(layer.backward, "fc_weight_grad_cast").kernel.bytes.value(),
            512 * 6);
}

}  // namespace
}  // namespace fsdpsim::models
