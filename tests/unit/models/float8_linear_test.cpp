// The float8 rewrite of linears, checked on paper on one tiny linear (T = 32 tokens, 16 -> 32
// features, bias, bf16), and in a whole workload.
#include "models/float8_linear.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/kernel_factory.hpp"
#include "models/layer_draft.hpp"
#include "models/linear_modules.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

using testing::find_kernel;

// One nn.Linear(in, out, bias) of a block, forward and backward, as the families emit it.
Layer one_linear(std::int64_t in, std::int64_t out) {
  const detail::BuildContext ctx = detail::make_context(testing::options(2, 16));  // T = 32
  detail::LayerDraft draft("blocks.0", LayerKind::kBlock, in * out + out, 2);
  draft.forward(detail::linear_forward("fc", {in, out, true}, ctx));
  detail::append_linear_backward(draft, "fc", {in, out, true}, ctx);
  return draft.finish(-1);
}

std::vector<std::string> names(const std::vector<NamedKernel>& kernels) {
  std::vector<std::string> out;
  for (const NamedKernel& k : kernels) out.push_back(k.name);
  return out;
}

std::int64_t bytes(const std::vector<NamedKernel>& kernels, const std::string& name) {
  return find_kernel(kernels, name).kernel.bytes.value();
}

TEST(Float8Linear, ForwardCastsInputAndWeightThenRunsAnFp8Gemm) {
  Layer layer = one_linear(16, 32);
  convert_linears_to_float8(layer);
  const std::vector<std::string> expected = {
      "fc_amax_input", "fc_cast_input", "fc_amax_weight", "fc_cast_weight", "fc", "fc_bias"};
  EXPECT_EQ(names(layer.forward), expected);
  // X = 32 x 16 = 512 elements, W = 32 x 16 = 512, Y = 32 x 32 = 1024; bf16 = 2 bytes.
  EXPECT_EQ(bytes(layer.forward, "fc_amax_input"), 2 * 512 + 4);        // read X, write amax
  EXPECT_EQ(bytes(layer.forward, "fc_cast_input"), 2 * 512 + 4 + 512);  // read X, scale; write
  EXPECT_EQ(bytes(layer.forward, "fc_amax_weight"), 2 * 512 + 4);
  EXPECT_EQ(bytes(layer.forward, "fc_cast_weight"), 2 * 512 + 4 + 512);
  const NamedKernel& gemm = find_kernel(layer.forward, "fc");
  EXPECT_EQ(gemm.kernel.dtype, Dtype::kFp8);
  EXPECT_EQ(gemm.kernel.flops.value(), 2.0 * 32 * 32 * 16);
  EXPECT_EQ(gemm.kernel.bytes.value(), 512 + 512 + 2 * 1024);          // fp8 X and W, bf16 Y
  EXPECT_EQ(bytes(layer.forward, "fc_bias"), 2 * (1024 + 32 + 1024));  // Y + bias -> Y
  EXPECT_TRUE(find_kernel(layer.forward, "fc_amax_input").ends_fusion);
  EXPECT_FALSE(find_kernel(layer.forward, "fc_bias").ends_fusion);
}

TEST(Float8Linear, BackwardCastsGradOutputInBothLayoutsAndRecastsWeightAndInput) {
  Layer layer = one_linear(16, 32);
  const Bytes saved = layer.saved_activations;
  const Bytes forward_peak = layer.forward_transient_peak();
  const Bytes backward_peak = layer.backward_transient_peak();
  convert_linears_to_float8(layer);
  const std::vector<std::string> expected = {"fc_amax_grad_output",
                                             "fc_cast_grad_output",
                                             "fc_amax_weight_bwd",
                                             "fc_cast_weight_bwd",
                                             "fc_dgrad",
                                             "fc_amax_input_bwd",
                                             "fc_cast_input_bwd",
                                             "fc_wgrad",
                                             "fc_bgrad"};
  EXPECT_EQ(names(layer.backward), expected);
  EXPECT_EQ(bytes(layer.backward, "fc_amax_grad_output"), 2 * 1024 + 4);
  EXPECT_EQ(bytes(layer.backward, "fc_cast_grad_output"), 2 * 1024 + 4 + 2 * 1024);
  EXPECT_EQ(bytes(layer.backward, "fc_amax_weight_bwd"), 2 * 512 + 4);
  EXPECT_EQ(bytes(layer.backward, "fc_cast_weight_bwd"), 2 * 512 + 4 + 512);
  EXPECT_EQ(bytes(layer.backward, "fc_dgrad"), 1024 + 512 + 2 * 512);  // fp8 dY, W; bf16 dX
  EXPECT_EQ(bytes(layer.backward, "fc_amax_input_bwd"), 2 * 512 + 4);
  EXPECT_EQ(bytes(layer.backward, "fc_cast_input_bwd"), 2 * 512 + 4 + 512);
  EXPECT_EQ(bytes(layer.backward, "fc_wgrad"), 1024 + 512 + 2 * 512);  // fp8 dY^T, X; bf16 dW
  EXPECT_EQ(find_kernel(layer.backward, "fc_wgrad").kernel.dtype, Dtype::kFp8);
  EXPECT_EQ(bytes(layer.backward, "fc_bgrad"), 2 * (1024 + 32));  // unchanged, bf16
  // torchao saves the bf16 input: nothing saved changes. The fp8 operands are transients: X and
  // W at the forward GEMM; dY in two layouts and W^T at the dgrad GEMM (more than dY^T + X^T).
  EXPECT_EQ(layer.saved_activations, saved);
  EXPECT_EQ(layer.forward_transient_peak().value(), forward_peak.value() + 512 + 512);
  EXPECT_EQ(layer.backward_transient_peak().value(), backward_peak.value() + 2 * 1024 + 512);
}

// With FSDP2's float8 all-gather the weight arrives in float8 (the unsharded parameter): no
// weight cast in forward or backward.
TEST(Float8Linear, AWeightAllGatheredInFloat8IsNeverCast) {
  Layer layer = one_linear(16, 32);
  const Bytes forward_peak = layer.forward_transient_peak();
  const Bytes backward_peak = layer.backward_transient_peak();
  convert_linears_to_float8(layer, Float8Weight::kAllGatheredInFloat8);
  const std::vector<std::string> forward = {"fc_amax_input", "fc_cast_input", "fc", "fc_bias"};
  EXPECT_EQ(names(layer.forward), forward);
  // The gathered W [out, in] is row-major where the dgrad GEMM reads it as B, and no cast is
  // there to write it transposed: torchao's preprocess_addmm copies it (512 bytes read and
  // written).
  const std::vector<std::string> backward = {"fc_amax_grad_output",
                                             "fc_cast_grad_output",
                                             "fc_contiguous_weight",
                                             "fc_dgrad",
                                             "fc_amax_input_bwd",
                                             "fc_cast_input_bwd",
                                             "fc_wgrad",
                                             "fc_bgrad"};
  EXPECT_EQ(names(layer.backward), backward);
  // The GEMMs still read an fp8 W: 512 elements at one byte.
  EXPECT_EQ(bytes(layer.forward, "fc"), 512 + 512 + 2 * 1024);
  EXPECT_EQ(bytes(layer.backward, "fc_dgrad"), 1024 + 512 + 2 * 512);
  EXPECT_EQ(bytes(layer.backward, "fc_contiguous_weight"), 2 * 512);
  // Transients: the fp8 X at the forward GEMM; dY in two layouts and the W copy at the dgrad
  // GEMM.
  EXPECT_EQ(layer.forward_transient_peak().value(), forward_peak.value() + 512);
  EXPECT_EQ(layer.backward_transient_peak().value(), backward_peak.value() + 2 * 1024 + 512);
  // The linear reads as a float8 one to whoever sizes its weight (FSDP's all-gather).
  ASSERT_EQ(linear_modules(layer).size(), 1u);
  EXPECT_TRUE(linear_modules(layer).front().float8);
  EXPECT_EQ(linear_modules(layer).front().weight_numel, 512);
}

// Eager (no torch.compile): each cast is torchao's Python op by op, abs, max, five scalar
// kernels for the scale, to(fp32), mul, clamp, to(fp8); dY is cast twice (no CSE), and the fp8
// W, dY^T and X are copied into the layout torch._scaled_mm reads. X = 512 elements: to(fp32)
// reads 2 and writes 4 bytes an element, the scale and the clamp read and write 4, to(fp8)
// reads 4 and writes 1; their fp32 temporaries (the scaled tensor and its clamped copy, 8 bytes
// an element) are transients beside the fp8 operands.
TEST(Float8Linear, EagerCastsAreTorchaosOpsOneByOne) {
  Layer layer = one_linear(16, 32);
  const Bytes forward_peak = layer.forward_transient_peak();
  convert_linears_to_float8(layer, Float8Weight::kCastAtEachUse, std::nullopt, Float8Casts::kEager);
  const std::vector<std::string> input_cast = {"fc_abs_input",
                                               "fc_amax_input",
                                               "fc_amax_to_fp64_input",
                                               "fc_amax_clamp_input",
                                               "fc_amax_reciprocal_input",
                                               "fc_scale_mul_input",
                                               "fc_scale_to_fp32_input",
                                               "fc_to_fp32_input",
                                               "fc_scale_input",
                                               "fc_clamp_input",
                                               "fc_to_float8_input"};
  const std::vector<std::string> forward = names(layer.forward);
  ASSERT_EQ(forward.size(), 2 * input_cast.size() + 2);  // input, weight, GEMM, bias
  EXPECT_EQ(std::vector<std::string>(forward.begin(), forward.begin() + 11), input_cast);
  EXPECT_EQ(bytes(layer.forward, "fc_abs_input"), 2 * 2 * 512);
  EXPECT_EQ(bytes(layer.forward, "fc_to_fp32_input"), (2 + 4) * 512);
  EXPECT_EQ(bytes(layer.forward, "fc_scale_input"), 2 * 4 * 512 + 4);
  EXPECT_EQ(bytes(layer.forward, "fc_clamp_input"), 2 * 4 * 512);
  EXPECT_EQ(bytes(layer.forward, "fc_to_float8_input"), (4 + 1) * 512);
  EXPECT_EQ(layer.forward_transient_peak().value(), forward_peak.value() + 512 + 512 + 8 * 512);
  // Backward: dY in two casts, W and X again, and the three layout copies.
  std::size_t abs_kernels = 0;
  for (const NamedKernel& k : layer.backward) abs_kernels += k.name.starts_with("fc_abs_") ? 1 : 0;
  EXPECT_EQ(abs_kernels, 4u);
  EXPECT_NO_THROW(find_kernel(layer.backward, "fc_abs_grad_output_t"));
  EXPECT_EQ(bytes(layer.backward, "fc_contiguous_weight"), 2 * 512);
  EXPECT_EQ(bytes(layer.backward, "fc_contiguous_grad_output_t"), 2 * 1024);
  EXPECT_EQ(bytes(layer.backward, "fc_contiguous_input"), 2 * 512);
  EXPECT_EQ(bytes(layer.backward, "fc_dgrad"), 1024 + 512 + 2 * 512);  // the GEMMs as compiled
}

TEST(Float8Linear, LinearsWithADimensionNotDivisibleBy16StayInBf16) {
  EXPECT_FALSE(float8_eligible(24, 32));
  EXPECT_TRUE(float8_eligible(16, 48));
  Layer layer = one_linear(24, 32);
  convert_linears_to_float8(layer);
  ASSERT_EQ(layer.forward.size(), 1u);
  EXPECT_EQ(layer.forward[0].kernel.dtype, Dtype::kBf16);
  EXPECT_FALSE(linear_modules(layer).front().float8);
}

TEST(Float8Linear, WorkloadConvertsBlockLinearsButNotTheLmHead) {
  TransformerSpec spec = testing::tiny_gpt();
  spec.vocab = 128;  // an eligible LM head shape, still left in bf16
  WorkloadOptions options = testing::options(1, 8);
  const Workload bf16 = build_workload(spec, options);
  options.float8_linears = true;
  const Workload fp8 = build_workload(spec, options);
  const Layer& block = fp8.layers[1];
  for (const char* linear : {"qkv", "attn_out", "mlp_up", "mlp_down"}) {
    EXPECT_EQ(find_kernel(block.forward, linear).kernel.dtype, Dtype::kFp8) << linear;
  }
  EXPECT_EQ(find_kernel(fp8.layers.back().forward, "lm_head").kernel.dtype, Dtype::kBf16);
  EXPECT_EQ(fp8.layers.back().forward.size(), bf16.layers.back().forward.size());
  // The attention core still brackets the attention kernel.
  ASSERT_EQ(block.attention_forward_end - block.attention_forward_begin, 1u);
  EXPECT_EQ(block.forward[block.attention_forward_begin].name, "attn");
  EXPECT_EQ(block.saved_activations, bf16.layers[1].saved_activations);
}

// torchao's casts run fused only in a compiled block; TransformerEngine's are fused kernels
// whether or not the block is compiled.
TEST(Float8Linear, TheCastsAreEagerOnlyForTorchaoWithoutCompile) {
  WorkloadOptions options = testing::options(1, 8);
  options.float8_linears = true;
  const auto eager = [&](const WorkloadOptions& o) {
    const Workload w = build_workload(testing::tiny_gpt(), o);
    const Layer& block = w.layers[1];
    return std::any_of(block.forward.begin(), block.forward.end(),
                       [](const NamedKernel& k) { return k.name == "qkv_abs_input"; });
  };
  EXPECT_TRUE(eager(options));
  options.float8_linear = Float8LinearImpl::kTransformerEngine;
  EXPECT_FALSE(eager(options));
  options.float8_linear = Float8LinearImpl::kTorchao;
  options.compiled = true;
  EXPECT_FALSE(eager(options));
}

}  // namespace
}  // namespace fsdpsim::models
