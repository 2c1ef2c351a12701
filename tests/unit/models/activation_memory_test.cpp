// Saved activations and transient peaks against closed forms. Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", Sec. 4.1: a fp16 GPT block
// with dropout and unfused attention saves s*b*h*(34 + 5*a*s/h) bytes. Our count adds what the
// paper leaves out: fp32 LayerNorm mean/rstd (2 LayerNorms * 2 * 4 bytes = 16 bytes per token)
// and the s x s bool causal mask of masked_fill.
#include <gtest/gtest.h>

#include "models/workload.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

constexpr std::int64_t kB = 2, kS = 512, kH = 1024, kA = 16, kT = kB * kS, kV = 50000;

TransformerSpec gpt() {
  return testing::make_spec(ModelFamily::kGpt, 2, kH, kA, kA, 4 * kH, kV, kS);
}
TransformerSpec mpt() { return testing::mpt_spec(2, kH, kA, kV, kS); }

std::int64_t saved(const Workload& w, std::size_t layer) {
  return w.layers[layer].saved_activations.value();
}

TEST(ActivationMemory, GptUnfusedBlockMatchesKorthikanti) {
  const Workload w = build_workload(gpt(), testing::options(kB, kS, false));
  EXPECT_EQ(saved(w, 1), kS * kB * kH * 34 + 5 * kA * kS * kS * kB + 16 * kT + kS * kS);
}

TEST(ActivationMemory, GptFlashBlockDropsTheSquareTermsForLogSumExp) {
  const Workload w = build_workload(gpt(), testing::options(kB, kS, true));
  EXPECT_EQ(saved(w, 1), kS * kB * kH * 34 + 16 * kT + kB * kA * kS * 4);
}

// Selective recomputation of the attention core (Korthikanti Sec. 4.3) keeps 34*s*b*h bytes
// per layer, fused or not: unfused, the checkpoint keeps its token-major Q, K, V inputs (6*s*b*h)
// in place of their head-major copies and the s x s terms; fused, the kernel's inputs are saved
// outside the core and only its log-sum-exp goes.
TEST(ActivationMemory, AttentionCheckpointingKeepsTheCoresInputs) {
  const auto selective = [](const Layer& l) {
    return (l.saved_activations - l.attention_core_saved + l.attention_core_input).value();
  };
  const Workload naive = build_workload(gpt(), testing::options(kB, kS, false));
  EXPECT_EQ(naive.layers[1].attention_core_input.value(), 6 * kS * kB * kH);
  EXPECT_EQ(selective(naive.layers[1]), kS * kB * kH * 34 + 16 * kT);
  const Workload flash = build_workload(gpt(), testing::options(kB, kS, true));
  EXPECT_EQ(flash.layers[1].attention_core_input.value(), 0);
  EXPECT_EQ(selective(flash.layers[1]), kS * kB * kH * 34 + 16 * kT);
}

TEST(ActivationMemory, MptSavesNoDropoutMasks) {
  const Workload flash = build_workload(mpt(), testing::options(kB, kS, true));
  EXPECT_EQ(saved(flash, 1), kS * kB * kH * 32 + 16 * kT + kB * kA * kS * 4);
  // Unfused: softmax output only (2*a*s^2*b), no dropout mask or dropout output.
  const Workload naive = build_workload(mpt(), testing::options(kB, kS, false));
  EXPECT_EQ(saved(naive, 1), kS * kB * kH * 32 + 2 * kA * kS * kS * kB + 16 * kT + kS * kS);
}

TEST(ActivationMemory, LlamaFlashBlockSavesNormsProjectionsAndSwigluInputs) {
  const TransformerSpec spec = testing::llama_3_1_8b();
  const std::int64_t b = 1, s = 4096, t = b * s, d = 4096, kv = 1024, f = 14336, e = 2;
  // Eager (torchtitan): x, n1, q_rot, K and V repeated to all heads, O, h, n2 (bf16); gate,
  // silu(gate), up, swiglu out; rstd x2 (fp32); lse (fp32).
  const Workload w = build_workload(spec, testing::options(b, s, true));
  EXPECT_EQ(saved(w, 1), e * (8 * t * d + 4 * t * f) + 2 * 4 * t + b * 32 * s * 4);
  // Compiled: K and V at kv width, silu recomputed in backward.
  WorkloadOptions compiled = testing::options(b, s, true);
  compiled.compiled = true;
  const Workload c = build_workload(spec, compiled);
  EXPECT_EQ(saved(c, 1), e * (6 * t * d + 2 * t * kv + 3 * t * f) + 2 * 4 * t + b * 32 * s * 4);
}

// Unfused Llama attention (HF LlamaAttention's eager path): the bf16 scores converted to fp32,
// softmax in fp32 saving its fp32 output, P V the bf16 cast (6*a*s^2*b bytes saved), the additive
// causal mask nothing. Against the flash block: the head-major Q, K and V copies replace the
// kernel's inputs (K and V at all 32 heads either way), the fp32 log-sum-exp goes.
TEST(ActivationMemory, LlamaUnfusedAttentionSavesFp32AndCastProbabilities) {
  const TransformerSpec spec = testing::llama_3_1_8b();
  const std::int64_t b = 1, s = 1024, a = 32;
  const Workload flash = build_workload(spec, testing::options(b, s, true));
  const Workload naive = build_workload(spec, testing::options(b, s, false));
  EXPECT_EQ(saved(naive, 1) - saved(flash, 1), 6 * a * s * s * b - b * a * s * 4);
  const std::vector<NamedKernel>& fwd = naive.layers[1].forward;
  const std::int64_t scores = b * a * s * s * 2;
  EXPECT_EQ(testing::find_kernel(fwd, "attn_scores_to_fp32").kernel.bytes.value(), 3 * scores);
  EXPECT_EQ(testing::find_kernel(fwd, "attn_softmax").kernel.bytes.value(), 4 * scores);
  EXPECT_EQ(testing::find_kernel(fwd, "attn_probs_to_dtype").kernel.bytes.value(), 3 * scores);
  const std::vector<NamedKernel>& bwd = naive.layers[1].backward;
  EXPECT_EQ(testing::find_kernel(bwd, "attn_probs_to_dtype_bwd").kernel.bytes.value(), 3 * scores);
  EXPECT_EQ(testing::find_kernel(bwd, "attn_softmax_bwd").kernel.bytes.value(), 6 * scores);
  EXPECT_EQ(testing::find_kernel(bwd, "attn_scores_to_fp32_bwd").kernel.bytes.value(), 3 * scores);
  EXPECT_THROW(testing::find_kernel(bwd, "attn_mask_bwd"), std::out_of_range);
}

// Each tensor autograd keeps is listed on its own, in the order the forward saves it (the step
// allocates each as PyTorch does): the eager Llama block's 15 of the closed form above.
TEST(ActivationMemory, LlamaBlockListsEachSavedTensor) {
  const std::int64_t b = 1, s = 4096, t = b * s, d = 4096, f = 14336, e = 2;
  const Workload w = build_workload(testing::llama_3_1_8b(), testing::options(b, s, true));
  std::vector<std::int64_t> bytes;
  std::vector<bool> rematerializable;
  for (const SavedTensor& tensor : w.layers[1].saved_tensors) {
    bytes.push_back(tensor.bytes.value());
    rematerializable.push_back(tensor.rematerializable);
  }
  const std::int64_t hidden = e * t * d, rstd = 4 * t, inner = e * t * f, lse = b * 32 * s * 4;
  // x and rstd, n1 (q, k and v's input), q, k, v (repeated to all heads), O and the
  // log-sum-exp, h and rstd, n2, gate, silu(gate), up, the SwiGLU output (down's input).
  EXPECT_EQ(bytes,
            (std::vector<std::int64_t>{hidden, rstd, hidden, hidden, hidden, hidden, hidden, lse,
                                       hidden, rstd, hidden, inner, inner, inner, inner}));
  EXPECT_EQ(rematerializable,
            (std::vector<bool>{false, false, true, false, false, false, false, false, false, false,
                               true, false, false, false, true}));
}

// The list adds up to saved_activations in every family, with or without FlashAttention,
// compiled or not, with float8 linears (whose compiled blocks recompute the rematerializable
// tensors) and under autocast over fp32 weights (which saves each linear's cast weight).
TEST(ActivationMemory, SavedTensorsAddUpToTheSavedActivations) {
  for (const TransformerSpec& spec : {gpt(), mpt(), testing::llama_3_1_8b()}) {
    for (const bool flash : {false, true}) {
      for (int variant = 0; variant < 6; ++variant) {
        WorkloadOptions options = testing::options(kB, kS, flash);
        options.compiled = variant % 2 == 1;
        options.float8_linears = variant / 2 == 1;
        if (variant / 2 == 2) {
          options.weight_dtype = Dtype::kFp32;
          options.residual_dtype = Dtype::kFp32;  // as the app sets both
        }
        const Workload w = build_workload(spec, options);
        for (const Layer& l : w.layers) {
          ASSERT_FALSE(l.saved_tensors.empty()) << l.name;
          std::int64_t sum = 0;
          for (const SavedTensor& tensor : l.saved_tensors) sum += tensor.bytes.value();
          EXPECT_EQ(sum, l.saved_activations.value()) << spec.name << " " << l.name;
        }
      }
    }
  }
}

// The checkpoint keeps the block input, and the block's first norm saves that same tensor
// (saved_input), which its recompute does not copy.
TEST(ActivationMemory, CheckpointedBlockKeepsOnlyItsInput) {
  for (const TransformerSpec& spec : {gpt(), mpt(), testing::llama_3_1_8b()}) {
    const Workload w = build_workload(spec, testing::options(kB, kS, true));
    for (std::size_t i = 1; i + 1 < w.layers.size(); ++i) {
      EXPECT_EQ(w.layers[i].saved_activations_checkpointed.value(), kT * spec.d_model * 2);
      EXPECT_EQ(w.layers[i].saved_input, w.layers[i].saved_activations_checkpointed);
    }
    EXPECT_EQ(w.layers.front().saved_input.value(), 0);
    EXPECT_EQ(w.layers.front().saved_activations_checkpointed, w.layers.front().saved_activations);
    EXPECT_EQ(w.layers.back().saved_activations_checkpointed, w.layers.back().saved_activations);
  }
}

TEST(ActivationMemory, CheckpointedInputScalesWithComputeDtype) {
  WorkloadOptions o = testing::options(kB, kS, true);
  o.compute_dtype = Dtype::kFp32;
  const Workload w = build_workload(mpt(), o);
  EXPECT_EQ(w.layers[1].saved_activations_checkpointed.value(), kT * kH * 4);
}

TEST(ActivationMemory, HeadSavesFp32LogProbabilities) {
  const Workload w = build_workload(gpt(), testing::options(kB, kS, true));
  // ln_f input + stats, lm_head input, fp32 log-softmax output [T, V], int64 targets.
  EXPECT_EQ(saved(w, 3), 2 * kT * kH * 2 + 8 * kT + 4 * kT * kV + 8 * kT);
}

TEST(ActivationMemory, EmbeddingSavesIndicesAndMinGptDropoutMask) {
  const Workload g = build_workload(gpt(), testing::options(kB, kS, true));
  EXPECT_EQ(saved(g, 0), 8 * kT + 8 * kS + kT * kH);
  const Workload m = build_workload(mpt(), testing::options(kB, kS, true));
  EXPECT_EQ(saved(m, 0), 8 * kT + 8 * kS);
  const Workload l = build_workload(testing::llama_3_1_8b(), testing::options(kB, kS, true));
  EXPECT_EQ(saved(l, 0), 8 * kT);
}

TEST(TransientPeak, UnfusedAttentionHoldsTwoScoreMatrices) {
  // GPT-175B shape, b=1, s=2048: scale reads the scores and writes a new b*a*s*s tensor.
  const std::int64_t s = 2048, d = 12288, a = 96;
  const TransformerSpec spec = testing::make_spec(ModelFamily::kGpt, 1, d, a, a, 4 * d, 50000, s);
  const Workload naive = build_workload(spec, testing::options(1, s, false));
  EXPECT_EQ(naive.layers[1].forward_transient_peak().value(), 2 * a * s * s * 2);
  const Workload flash = build_workload(spec, testing::options(1, s, true));
  // attn_out output and its dropout output.
  EXPECT_EQ(flash.layers[1].forward_transient_peak().value(), 2 * s * d * 2);
}

TEST(TransientPeak, MptBlockBackwardIsBoundByMlpActivationGradients) {
  const Workload w = build_workload(mpt(), testing::options(kB, kS, true));
  EXPECT_EQ(w.layers[1].forward_transient_peak().value(), kT * kH * 2);
  // gelu_bwd: d(gelu out) and d(gelu in), T*ffn each.
  EXPECT_EQ(w.layers[1].backward_transient_peak().value(), 2 * kT * 4 * kH * 2);
}

TEST(TransientPeak, HeadHoldsLogitsInBothPrecisions) {
  const Workload w = build_workload(mpt(), testing::options(kB, kS, true));
  EXPECT_EQ(w.layers.back().forward_transient_peak().value(), kT * kV * (2 + 4));
  // log_softmax_bwd: the fp32 gradient of the log-probabilities and of the logits.
  EXPECT_EQ(w.layers.back().backward_transient_peak().value(), 2 * kT * kV * 4);
}

// F.cross_entropy straight on the bf16 logits (no .float(), no autocast): log_softmax saves its
// bf16 output instead of the fp32 one (T*V*2 less); forward holds the logits next to that saved
// output (T*V*2 of temporaries), backward the gradients of the log-probabilities and of the
// logits (2 x T*V*2), all bf16.
TEST(TransientPeak, CrossEntropyWithoutUpcastKeepsComputeDtypeTensors) {
  WorkloadOptions no_upcast = testing::options(kB, kS, true);
  no_upcast.loss = LossKernel::kCrossEntropy;
  const Workload plain = build_workload(mpt(), testing::options(kB, kS, true));
  const Workload w = build_workload(mpt(), no_upcast);
  const Layer& head = w.layers.back();
  EXPECT_EQ(plain.layers.back().saved_activations.value() - head.saved_activations.value(),
            kT * kV * 4 - kT * kV * 2);
  EXPECT_EQ(head.forward_transient_peak().value(), kT * kV * 2);
  EXPECT_EQ(head.backward_transient_peak().value(), 2 * kT * kV * 2);
}

TEST(TransientPeak, FusedCrossEntropyKeepsOnlyComputeDtypeLogits) {
  WorkloadOptions fused = testing::options(kB, kS, true);
  fused.loss = LossKernel::kFusedCrossEntropy;
  const Workload plain = build_workload(mpt(), testing::options(kB, kS, true));
  const Workload w = build_workload(mpt(), fused);
  const Layer& head = w.layers.back();
  // Saved: the LM head input (bf16 T*d, as before), the bf16 logits, the int64 labels and the
  // fp32 log-sum-exp, instead of the fp32 log-probabilities and the labels.
  EXPECT_EQ(head.saved_activations.value() - plain.layers.back().saved_activations.value(),
            kT * kV * 2 + kT * 4 - kT * kV * 4);
  EXPECT_EQ(head.forward_transient_peak().value(), 0);
  // xentropy backward writes the bf16 logits gradient; lm_head dgrad then adds T*d.
  EXPECT_EQ(head.backward_transient_peak().value(), kT * kV * 2 + kT * kH * 2);
  EXPECT_EQ(head.forward[head.forward.size() - 1].name, "fused_cross_entropy");
}

// torchtitan's compiled loss (cross_entropy on the upcast logits under torch.compile) keeps and
// moves what the fused kernel does: the bf16 logits and per-token statistics, one forward
// reduction and one backward kernel, under names of its own.
TEST(TransientPeak, CompiledCrossEntropyKeepsWhatTheFusedKernelKeeps) {
  WorkloadOptions fused = testing::options(kB, kS, true);
  fused.loss = LossKernel::kFusedCrossEntropy;
  WorkloadOptions compiled = fused;
  compiled.loss = LossKernel::kCompiledCrossEntropy;
  const Layer f = build_workload(mpt(), fused).layers.back();
  const Layer c = build_workload(mpt(), compiled).layers.back();
  EXPECT_EQ(c.saved_activations, f.saved_activations);
  EXPECT_EQ(c.forward_transient_peak(), f.forward_transient_peak());
  EXPECT_EQ(c.backward_transient_peak(), f.backward_transient_peak());
  EXPECT_EQ(testing::find_kernel(c.forward, "compiled_cross_entropy").kernel.bytes,
            testing::find_kernel(f.forward, "fused_cross_entropy").kernel.bytes);
  EXPECT_EQ(testing::find_kernel(c.backward, "compiled_cross_entropy_bwd").kernel.bytes,
            testing::find_kernel(f.backward, "fused_cross_entropy_bwd").kernel.bytes);
}

TEST(ActivationMemory, Fp32WeightsUnderAutocastKeepTheResidualStreamInFp32) {
  // Composer's DEFAULT precision: fp32 weights, bf16 autocast. The embedding output, the
  // residual adds and the LayerNorms are fp32 (r = 4); the linears read bf16 casts (e = 2).
  WorkloadOptions options = testing::options(kB, kS, true);
  const Workload plain = build_workload(mpt(), options);
  options.residual_dtype = Dtype::kFp32;
  const Workload w = build_workload(mpt(), options);
  const Layer& block = w.layers[1];
  // ln1 and ln2 save their fp32 inputs instead of bf16 ones: 2 x T*d*(4 - 2) more.
  EXPECT_EQ(saved(w, 1) - saved(plain, 1), 2 * kT * kH * 2);
  EXPECT_EQ(block.saved_activations_checkpointed.value(), kT * kH * 4);  // the fp32 block input
  EXPECT_EQ(block.saved_input, block.saved_activations_checkpointed);    // ln1 saves that tensor
  // x_mid = x (fp32) + attn_out (bf16): reads 4 + 2, writes 4 bytes per element.
  EXPECT_EQ(testing::find_kernel(block.forward, "residual1").kernel.bytes.value(),
            kT * kH * (4 + 2 + 4));
  EXPECT_EQ(testing::find_kernel(block.forward, "qkv_input_cast").kernel.bytes.value(),
            kT * kH * (4 + 2));
  EXPECT_EQ(testing::find_kernel(block.backward, "mlp_out_grad_cast").kernel.bytes.value(),
            kT * kH * (4 + 2));
  EXPECT_EQ(testing::find_kernel(block.backward, "qkv_input_cast_bwd").kernel.bytes.value(),
            kT * kH * (2 + 4));
  // Forward: the fp32 norm output lives next to nothing else the plain block holds at its peak
  // (attn_out's output and x_mid's inputs are freed by then): T*d*4 > T*d*2.
  EXPECT_EQ(block.forward_transient_peak().value(), kT * kH * 4);
  // The head's final norm reads the fp32 stream and casts its output for the LM head.
  EXPECT_EQ(
      testing::find_kernel(w.layers.back().forward, "lm_head_input_cast").kernel.bytes.value(),
      kT * kH * (4 + 2));
  EXPECT_EQ(plain.layers[1].forward.size() + 2, block.forward.size());  // two input casts
}

// The same for Llama, whose q, k, v (and gate, up) are separate linears: each casts the fp32
// norm output itself (autocast caches only leaf tensors) and its mm saves its own bf16 copy.
// Per block, on top of the bf16 block's saved bytes: the two norm inputs in fp32 (2 x T*d*2)
// and four more bf16 copies (k, v, up beyond q and gate's: 3 x T*d*2; the plain block's one
// copy before q is q's), so 2 + 3 = 5 tensors of T*d*2 bytes: 10 T*d.
TEST(ActivationMemory, LlamaUnderAutocastCastsEachLinearsInputFromAnFp32Stream) {
  WorkloadOptions options = testing::options(kB, kS, true);
  const TransformerSpec spec = testing::llama_3_1_8b();
  const std::int64_t d = spec.d_model;
  const Workload plain = build_workload(spec, options);
  options.residual_dtype = Dtype::kFp32;
  const Workload w = build_workload(spec, options);
  const Layer& block = w.layers[1];
  EXPECT_EQ(saved(w, 1) - saved(plain, 1), 10 * kT * d);
  EXPECT_EQ(block.saved_activations_checkpointed.value(), kT * d * 4);
  for (const char* linear : {"q", "k", "v", "gate", "up"}) {
    const std::string name(linear);
    EXPECT_EQ(testing::find_kernel(block.forward, name + "_input_cast").kernel.bytes.value(),
              kT * d * (4 + 2));
    EXPECT_EQ(testing::find_kernel(block.backward, name + "_input_cast_bwd").kernel.bytes.value(),
              kT * d * (2 + 4));
  }
  for (const char* branch : {"attn", "mlp"}) {
    EXPECT_EQ(testing::find_kernel(block.backward, std::string(branch) + "_out_grad_cast")
                  .kernel.bytes.value(),
              kT * d * (4 + 2));
  }
  EXPECT_EQ(testing::find_kernel(block.forward, "residual2").kernel.bytes.value(),
            kT * d * (4 + 2 + 4));
  // The embedding writes the fp32 stream, and the head's final norm reads it.
  EXPECT_EQ(
      testing::find_kernel(w.layers.front().forward, "tok_embedding").kernel.bytes.value(),
      testing::find_kernel(plain.layers.front().forward, "tok_embedding").kernel.bytes.value() +
          2 * kT * d * 2);
  testing::find_kernel(w.layers.back().forward, "lm_head_input_cast");
  // Compiled, Inductor fuses the casts into the norms and keeps one copy for q, k and v: only
  // the norm inputs widen.
  options.compiled = true;
  const Workload compiled = build_workload(spec, options);
  options.residual_dtype.reset();
  const Workload compiled_plain = build_workload(spec, options);
  EXPECT_EQ(saved(compiled, 1) - saved(compiled_plain, 1), 4 * kT * d);
  EXPECT_EQ(compiled.layers[1].forward.size(), compiled_plain.layers[1].forward.size());
}

}  // namespace
}  // namespace fsdpsim::models
