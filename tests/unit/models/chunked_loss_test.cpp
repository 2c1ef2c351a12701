// torchtitan's ChunkedLossWrapper (WorkloadOptions::loss_chunks): the head becomes the final norm
// alone and a kChunkedLoss layer holds one chunk of the LM head and the loss. Sizes with
// T = 2 x 512 = 1024 tokens in 4 chunks of 256, d = 1024, V = 32000, bf16 activations.
#include <gtest/gtest.h>

#include "models/workload.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

constexpr std::int64_t kT = 1024, kChunk = 256, kD = 1024, kV = 32000;

TransformerSpec llama() {
  return testing::make_spec(ModelFamily::kLlama, 2, kD, 16, 8, 4096, kV, 4096);
}

WorkloadOptions options(std::int32_t chunks) {
  WorkloadOptions o = testing::options(2, 512, true);
  o.loss_chunks = chunks;
  return o;
}

double lm_head_flops(const Layer& l) {
  return testing::find_kernel(l.forward, "lm_head").kernel.flops.value() +
         testing::find_kernel(l.backward, "lm_head_dgrad").kernel.flops.value() +
         testing::find_kernel(l.backward, "lm_head_wgrad").kernel.flops.value();
}

std::vector<std::string> names(const std::vector<NamedKernel>& kernels) {
  std::vector<std::string> out;
  for (const NamedKernel& k : kernels) out.push_back(k.name);
  return out;
}

TEST(ChunkedLoss, TheHeadIsTheNormAndTheLossLayerOneChunk) {
  const Workload whole = build_workload(llama(), options(0));
  const Workload w = build_workload(llama(), options(4));
  ASSERT_EQ(w.layers.size(), whole.layers.size() + 1);
  EXPECT_EQ(w.total_numel, whole.total_numel);
  const Layer& head = w.layers[w.layers.size() - 2];
  const Layer& loss = w.layers.back();
  EXPECT_EQ(head.kind, LayerKind::kHead);
  EXPECT_EQ(head.parameter_numels, std::vector<std::int64_t>{kD});
  EXPECT_EQ(names(head.forward), std::vector<std::string>{"norm"});
  EXPECT_EQ(names(head.backward), (std::vector<std::string>{"norm_bwd", "norm_bwd_weight"}));
  // The norm saves what it saved before; the LM head's input and the loss's tensors are gone.
  EXPECT_EQ(head.saved_activations.value(),
            whole.layers.back().saved_activations.value() - kT * kD * 2 - kT * kV * 4 - kT * 8);

  EXPECT_EQ(loss.kind, LayerKind::kChunkedLoss);
  EXPECT_EQ(loss.name, "loss");
  EXPECT_EQ(loss.parameter_numels, std::vector<std::int64_t>{kV * kD});
  EXPECT_EQ(loss.loss_chunking.chunks, 4);
  EXPECT_EQ(loss.loss_chunking.hidden.value(), kT * kD * 2);
  EXPECT_EQ(loss.loss_chunking.gradient_buffer.value(), kT * kD * 4);
  EXPECT_EQ(names(loss.forward),
            (std::vector<std::string>{"lm_head", "logits_to_fp32", "log_softmax", "nll_loss"}));
  EXPECT_EQ(names(loss.backward),
            (std::vector<std::string>{"nll_loss_bwd", "log_softmax_bwd", "logits_to_fp32_bwd",
                                      "lm_head_dgrad", "lm_head_wgrad", "gradient_to_fp32",
                                      "gradient_accumulate"}));
  EXPECT_EQ(testing::find_kernel(loss.forward, "lm_head").kernel.gemm.m, kChunk);
}

// A chunk's tensors are a quarter of the whole loss's: the fp32 log-probabilities and the int64
// targets saved, the bf16 logits with their fp32 upcast in forward, two fp32 [T/4, V] gradients at
// once in backward. The four chunks run the LM head's FLOPs of the whole.
TEST(ChunkedLoss, EachChunkHoldsItsShareOfTheLogits) {
  const Workload whole = build_workload(llama(), options(0));
  const Workload w = build_workload(llama(), options(4));
  const Layer& loss = w.layers.back();
  EXPECT_EQ(loss.saved_activations.value(), kChunk * kV * 4 + kChunk * 8);
  EXPECT_EQ(loss.forward_transient_peak().value(), kChunk * kV * (2 + 4));
  EXPECT_EQ(loss.backward_transient_peak().value(), kChunk * kV * 8);
  EXPECT_EQ(whole.layers.back().backward_transient_peak().value(), kT * kV * 8);
  EXPECT_DOUBLE_EQ(4 * lm_head_flops(loss), lm_head_flops(whole.layers.back()));
  // GradAccumulator.add: the chunk's bf16 input gradient cast to fp32, then copied into the
  // buffer: 2 + 4 bytes, then 4 + 4, per element of [T/4, d].
  EXPECT_EQ(testing::find_kernel(loss.backward, "gradient_to_fp32").kernel.bytes.value(),
            kChunk * kD * 6);
  EXPECT_EQ(testing::find_kernel(loss.backward, "gradient_accumulate").kernel.bytes.value(),
            kChunk * kD * 8);
}

TEST(ChunkedLoss, ValidateNamesWhatCannotBeChunked) {
  EXPECT_EQ(validate(llama(), options(4)), "");
  EXPECT_NE(validate(llama(), options(3)).find("do not split into 3 equal chunks"),
            std::string::npos);
  EXPECT_NE(validate(llama(), options(-1)).find("must not be negative"), std::string::npos);
  WorkloadOptions kept = options(4);
  kept.logits_kept_by_loop = LogitsKeptByLoop::kComputeDtype;
  EXPECT_NE(validate(llama(), kept).find("no logits"), std::string::npos);
  WorkloadOptions wide = options(4);
  wide.residual_dtype = Dtype::kFp32;
  EXPECT_NE(validate(llama(), wide).find("weights in the compute dtype"), std::string::npos);
  EXPECT_NE(validate(testing::mpt_spec(2, kD, 16, kV, 4096), options(4)).find("untied"),
            std::string::npos);
  TransformerSpec t5 = llama();
  t5.family = ModelFamily::kT5;
  EXPECT_NE(validate(t5, options(4)).find("gpt, mpt and llama"), std::string::npos);
}

}  // namespace
}  // namespace fsdpsim::models
