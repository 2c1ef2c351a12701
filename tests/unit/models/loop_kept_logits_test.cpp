// Logits the training loop keeps past the loss (WorkloadOptions::logits_kept_by_loop): the head
// hands the tensor to the step (Layer::loop_kept_output) and leaves it out of its own saved and
// transient bytes, so that nothing is counted twice. Sizes with T = 1024 tokens, V = 50000.
#include <gtest/gtest.h>

#include "models/workload.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

constexpr std::int64_t kB = 2, kS = 512, kH = 1024, kA = 16, kT = kB * kS, kV = 50000;

TransformerSpec mpt() { return testing::mpt_spec(2, kH, kA, kV, kS); }

WorkloadOptions options(LossKernel loss, LogitsKeptByLoop kept) {
  WorkloadOptions o = testing::options(kB, kS, true);
  o.loss = loss;
  o.logits_kept_by_loop = kept;
  return o;
}

const Layer& head(const Workload& w) { return w.layers.back(); }

TEST(LoopKeptLogits, NoneKeepsNothingPastTheLoss) {
  const Workload w =
      build_workload(mpt(), options(LossKernel::kCrossEntropyFp32, LogitsKeptByLoop::kNone));
  EXPECT_EQ(head(w).loop_kept_output.value(), 0);
  EXPECT_TRUE(head(w).loop_kept_output_kernel.empty());
}

// Composer: the bf16 logits the LM head writes outlive the fp32 upcast, which stays a
// temporary; the forward peak keeps only the fp32 copy (T*V*4), the bf16 one is the step's.
TEST(LoopKeptLogits, ComputeDtypeLogitsLeaveTheUpcastLossTemporaries) {
  const Workload plain =
      build_workload(mpt(), options(LossKernel::kCrossEntropyFp32, LogitsKeptByLoop::kNone));
  const Workload w = build_workload(
      mpt(), options(LossKernel::kCrossEntropyFp32, LogitsKeptByLoop::kComputeDtype));
  EXPECT_EQ(head(w).loop_kept_output.value(), kT * kV * 2);
  EXPECT_EQ(head(w).loop_kept_output_kernel, "lm_head");
  EXPECT_EQ(head(plain).forward_transient_peak().value(), kT * kV * (2 + 4));
  EXPECT_EQ(head(w).forward_transient_peak().value(), kT * kV * 4);
  EXPECT_EQ(head(w).saved_activations, head(plain).saved_activations);
  EXPECT_EQ(head(w).backward_transient_peak(), head(plain).backward_transient_peak());
}

// torchtitan's `pred = model(x)` is the upcast copy: the fp32 logits are kept, written by the
// cast kernel; the bf16 ones stay a temporary of the cast.
TEST(LoopKeptLogits, Fp32LogitsAreTheCastsOutput) {
  const Workload w =
      build_workload(mpt(), options(LossKernel::kCrossEntropyFp32, LogitsKeptByLoop::kFp32));
  EXPECT_EQ(head(w).loop_kept_output.value(), kT * kV * 4);
  EXPECT_EQ(head(w).loop_kept_output_kernel, "logits_to_fp32");
  EXPECT_EQ(head(w).forward_transient_peak().value(), kT * kV * 2);
}

// The fused loss saves the logits anyway; kept by the loop they leave the saved bytes.
TEST(LoopKeptLogits, FusedLossStopsSavingWhatTheLoopKeeps) {
  const Workload plain =
      build_workload(mpt(), options(LossKernel::kFusedCrossEntropy, LogitsKeptByLoop::kNone));
  const Workload w = build_workload(
      mpt(), options(LossKernel::kFusedCrossEntropy, LogitsKeptByLoop::kComputeDtype));
  EXPECT_EQ(head(plain).saved_activations.value() - head(w).saved_activations.value(), kT * kV * 2);
  EXPECT_EQ(head(w).loop_kept_output.value(), kT * kV * 2);
  EXPECT_EQ(head(w).forward_transient_peak().value(), 0);
}

// Without the upcast, log_softmax's input is the kept tensor and its output is saved: no [T, V]
// temporary is left.
TEST(LoopKeptLogits, PlainLossLeavesNoLogitsTemporary) {
  const Workload w =
      build_workload(mpt(), options(LossKernel::kCrossEntropy, LogitsKeptByLoop::kComputeDtype));
  EXPECT_EQ(head(w).forward_transient_peak().value(), 0);
  EXPECT_EQ(head(w).loop_kept_output.value(), kT * kV * 2);
}

TEST(LoopKeptLogits, OnlyDecoderHeadsAndTheUpcastQualify) {
  const WorkloadOptions fused_fp32 =
      options(LossKernel::kFusedCrossEntropy, LogitsKeptByLoop::kFp32);
  EXPECT_NE(validate(mpt(), fused_fp32).find("need the upcasting cross_entropy loss"),
            std::string::npos);
  EXPECT_THROW(build_workload(mpt(), fused_fp32), std::invalid_argument);
  TransformerSpec t5 = mpt();  // validate(spec, options) reads only the family here
  t5.family = ModelFamily::kT5;
  EXPECT_NE(validate(t5, options(LossKernel::kCrossEntropyFp32, LogitsKeptByLoop::kComputeDtype))
                .find("gpt, mpt and llama heads"),
            std::string::npos);
}

}  // namespace
}  // namespace fsdpsim::models
