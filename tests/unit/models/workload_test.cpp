#include "models/workload.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/head_layer.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

using testing::find_kernel;
using testing::total_flops;

std::vector<std::string> names(const std::vector<NamedKernel>& kernels) {
  std::vector<std::string> out;
  for (const NamedKernel& k : kernels) out.push_back(k.name);
  return out;
}

TEST(BuildWorkload, LaysOutEmbeddingBlocksAndHeadInForwardOrder) {
  const Workload w = build_workload(testing::tiny_gpt(), testing::options(1, 8));
  ASSERT_EQ(w.layers.size(), 4u);
  EXPECT_EQ(w.layers[0].name, "embedding");
  EXPECT_EQ(w.layers[0].kind, LayerKind::kEmbedding);
  EXPECT_EQ(w.layers[1].name, "blocks.0");
  EXPECT_EQ(w.layers[2].name, "blocks.1");
  EXPECT_EQ(w.layers[2].kind, LayerKind::kBlock);
  EXPECT_EQ(w.layers[3].name, "head");
  EXPECT_EQ(w.layers[3].kind, LayerKind::kHead);
  EXPECT_EQ(block_count(testing::tiny_gpt()), 2);
}

// Each layer lists its nn.Parameters one by one, in registration order (FSDP2 allocates each
// one's unsharded copy, autograd each one's gradient): Llama-3.1-8B's block is wq, wk, wv (1024
// wide: 8 KV heads of 128), wo, w1, w2, w3, then attention_norm and ffn_norm (torchtitan's
// TransformerBlock registers its norms after its attention and feed-forward); tiny_gpt's (d 64, ffn
// 256, vocab 100, 8 positions) has a weight and a bias per norm and linear, and its embedding
// wte and wpe. The lists sum to the layers' parameters.
TEST(BuildWorkload, LayersItemizeTheirParametersInRegistrationOrder) {
  const Workload llama = build_workload(testing::llama_3_1_8b(), testing::options(1, 8));
  const std::int64_t d = 4096;
  const std::int64_t kv = d * 1024;
  const std::int64_t ffn = d * 14336;
  EXPECT_EQ(llama.layers[0].parameter_numels, (std::vector<std::int64_t>{128256 * d}));
  EXPECT_EQ(llama.layers[1].parameter_numels,
            (std::vector<std::int64_t>{d * d, kv, kv, d * d, ffn, ffn, ffn, d, d}));
  EXPECT_EQ(llama.layers.back().parameter_numels, (std::vector<std::int64_t>{d, 128256 * d}));
  const Workload gpt = build_workload(testing::tiny_gpt(), testing::options(1, 8));
  EXPECT_EQ(gpt.layers[0].parameter_numels, (std::vector<std::int64_t>{100 * 64, 8 * 64}));
  EXPECT_EQ(gpt.layers[1].parameter_numels,
            (std::vector<std::int64_t>{64, 64, 64 * 192, 192, 64 * 64, 64, 64, 64, 64 * 256, 256,
                                       256 * 64, 64}));
  for (const Workload* w : {&llama, &gpt}) {
    for (const Layer& l : w->layers) {
      std::int64_t sum = 0;
      for (const std::int64_t n : l.parameter_numels) sum += n;
      EXPECT_EQ(sum, l.numel) << l.name;
      EXPECT_EQ(std::ssize(l.parameter_numels), l.parameter_tensors) << l.name;
    }
  }
}

// minGPT's CausalSelfAttention registers a block_size x block_size buffer in every block; a
// spec without it (Megatron GPT, MPT, llama) has no buffers, and only gpt may ask for it.
TEST(BuildWorkload, MinGptBlocksHoldTheirCausalMaskBuffer) {
  TransformerSpec spec = testing::tiny_gpt();
  for (const Layer& l : build_workload(spec, testing::options(1, 8)).layers)
    EXPECT_TRUE(l.buffers.empty()) << l.name;
  EXPECT_FALSE(has_buffers(spec));
  spec.causal_mask_buffer = true;
  EXPECT_TRUE(has_buffers(spec));
  const Workload w = build_workload(spec, testing::options(1, 4));
  for (const Layer& l : w.layers) {
    EXPECT_EQ(l.buffers, l.kind == LayerKind::kBlock ? std::vector<std::int64_t>{8 * 8}
                                                     : std::vector<std::int64_t>{})
        << l.name;
  }
  TransformerSpec mpt = testing::mpt_spec(2, 64, 4, 100, 8);
  mpt.causal_mask_buffer = true;
  EXPECT_EQ(validate(mpt), "causal_mask_buffer is minGPT's per-block mask buffer: family gpt only");
}

TEST(BuildWorkload, AllowTf32RunsFp32GemmsOnTf32CoresAndLeavesBf16Alone) {
  WorkloadOptions fp32 = testing::options(2, 8, /*flash=*/false);
  fp32.compute_dtype = Dtype::kFp32;
  WorkloadOptions tf32 = fp32;
  tf32.allow_tf32 = true;
  const Workload plain = build_workload(testing::tiny_gpt(), fp32);
  const Workload fast = build_workload(testing::tiny_gpt(), tf32);
  int gemms = 0;
  for (std::size_t l = 0; l < plain.layers.size(); ++l) {
    const auto& a = plain.layers[l].forward;
    const auto& b = fast.layers[l].forward;
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      // Same FLOPs and bytes (TF32 reads and writes fp32); only the math dtype changes.
      EXPECT_EQ(a[i].kernel.flops.value(), b[i].kernel.flops.value()) << a[i].name;
      EXPECT_EQ(a[i].kernel.bytes.value(), b[i].kernel.bytes.value()) << a[i].name;
      if (a[i].kernel.kind != KernelKind::kGemm) {
        EXPECT_EQ(b[i].kernel.dtype, Dtype::kFp32) << a[i].name;
        continue;
      }
      ++gemms;
      EXPECT_EQ(a[i].kernel.dtype, Dtype::kFp32) << a[i].name;
      EXPECT_EQ(b[i].kernel.dtype, Dtype::kTf32) << a[i].name;
    }
  }
  EXPECT_GE(gemms, 2 * 6 + 1);  // qkv, scores, pv, out, up, down per block; the LM head
  WorkloadOptions bf16 = testing::options(2, 8);
  bf16.allow_tf32 = true;
  for (const Layer& layer : build_workload(testing::tiny_gpt(), bf16).layers) {
    for (const NamedKernel& k : layer.forward) EXPECT_NE(k.kernel.dtype, Dtype::kTf32) << k.name;
  }
}

TEST(BuildWorkload, GptBlockRunsMinGptKernelsInOrder) {
  const Workload w = build_workload(testing::tiny_gpt(), testing::options(1, 8));
  const std::vector<std::string> expected = {
      "ln1", "qkv",    "attn", "attn_out", "attn_resid_dropout", "residual1",
      "ln2", "mlp_up", "gelu", "mlp_down", "mlp_resid_dropout",  "residual2"};
  EXPECT_EQ(names(w.layers[1].forward), expected);
  const std::vector<std::string> expected_head = {"ln_f", "lm_head", "logits_to_fp32",
                                                  "log_softmax", "nll_loss"};
  EXPECT_EQ(names(w.layers[3].forward), expected_head);
}

TEST(BuildWorkload, LlamaBlockRunsTorchtitansEagerKernelsInOrder) {
  const Workload w = build_workload(testing::llama_3_1_8b(), testing::options(1, 16));
  const std::vector<std::string> expected = {
      "rmsnorm1",      "q",         "k",    "v",          "rope_upcast", "rope_mul",
      "rope_downcast", "repeat_kv", "attn", "o",          "residual1",   "rmsnorm2",
      "gate",          "silu",      "up",   "swiglu_mul", "down",        "residual2"};
  EXPECT_EQ(names(w.layers[1].forward), expected);
  const std::vector<std::string> expected_backward = {"down_dgrad",
                                                      "down_wgrad",
                                                      "swiglu_mul_bwd_silu",
                                                      "swiglu_mul_bwd_up",
                                                      "up_dgrad",
                                                      "up_wgrad",
                                                      "silu_bwd",
                                                      "gate_dgrad",
                                                      "gate_wgrad",
                                                      "mlp_in_grad_sum",
                                                      "rmsnorm2_bwd",
                                                      "rmsnorm2_bwd_weight",
                                                      "residual2_grad",
                                                      "o_dgrad",
                                                      "o_wgrad",
                                                      "attn_bwd",
                                                      "repeat_kv_bwd",
                                                      "rope_bwd_upcast",
                                                      "rope_bwd_mul",
                                                      "rope_bwd_downcast",
                                                      "v_dgrad",
                                                      "v_wgrad",
                                                      "k_dgrad",
                                                      "k_wgrad",
                                                      "attn_in_grad_sum_k",
                                                      "q_dgrad",
                                                      "q_wgrad",
                                                      "attn_in_grad_sum_q",
                                                      "rmsnorm1_bwd",
                                                      "rmsnorm1_bwd_weight",
                                                      "residual1_grad"};
  EXPECT_EQ(names(w.layers[1].backward), expected_backward);
}

// The MLP's backward holds at most three T x ffn tensors: MulBackward0 makes d(silu) and d(up)
// from d(out), which goes when it returns; w3's backward frees d(up) before SiluBackward makes
// d(gate) from d(silu).
TEST(BuildWorkload, LlamaMlpBackwardHoldsThreeIntermediateGradients) {
  const Workload w = build_workload(testing::llama_3_1_8b(), testing::options(1, 16));
  const std::int64_t inner = 16 * 14336 * 2;
  EXPECT_EQ(w.layers[1].backward_transient_peak().value(), 3 * inner);
}

TEST(BuildWorkload, NormsRunPyTorchsThreeKernelsEachAtItsOwnRate) {
  // layer_norm_kernel.cu: one forward kernel; backward the input gradient, then the weight
  // gradient's column reduction, which reads dy and x again.
  const Workload w = build_workload(testing::llama_3_1_8b(), testing::options(1, 16));
  const auto find = [](const std::vector<NamedKernel>& kernels, const std::string& name) {
    for (const NamedKernel& k : kernels) {
      if (k.name == name) return k.kernel;
    }
    ADD_FAILURE() << "no kernel " << name;
    return Kernel{};
  };
  const Layer& block = w.layers[1];
  const std::int64_t act = 16 * 4096 * 2;  // 16 tokens x d_model x bf16
  EXPECT_EQ(find(block.forward, "rmsnorm1").norm, NormPass::kRmsNormForward);
  const Kernel input_grad = find(block.backward, "rmsnorm1_bwd");
  const Kernel weight_grad = find(block.backward, "rmsnorm1_bwd_weight");
  EXPECT_EQ(input_grad.norm, NormPass::kInputGrad);
  EXPECT_EQ(weight_grad.norm, NormPass::kRmsNormWeightGrad);
  EXPECT_GT(input_grad.bytes.value(), 3 * act);              // dy, x, dx and the statistics
  EXPECT_EQ(weight_grad.bytes.value(), 2 * act + 4096 * 2);  // dy and x again, dgamma
  // Elementwise kernels stream at the ordinary rate.
  EXPECT_EQ(find(block.forward, "residual1").norm, NormPass::kNone);
}

TEST(BuildWorkload, CompiledLlamaBlockRunsInductorsFusedRopeAndSwiglu) {
  WorkloadOptions o = testing::options(1, 16);
  o.compiled = true;
  const Workload w = build_workload(testing::llama_3_1_8b(), o);
  // compile_fusion.cpp then merges each run of memory-bound kernels ("residual1+rmsnorm2").
  const std::vector<std::string> forward = names(w.layers[1].forward);
  for (const char* fused : {"rope", "swiglu"}) {
    EXPECT_NE(std::find(forward.begin(), forward.end(), fused), forward.end()) << fused;
  }
  for (const std::string& name : forward) {
    EXPECT_EQ(name.find("repeat_kv"), std::string::npos);
    EXPECT_EQ(name.find("silu"), std::string::npos);
  }
}

TEST(BuildWorkload, LongVocabularyRowsTakeSoftmaxsMultiPassKernels) {
  // SoftMax.cu: a 128256-entry fp32 row (513 KB) fits neither 48 KiB of shared memory nor the
  // register path, so log_softmax reads it three times and writes once, and its backward reads
  // the gradient twice and the output once; tiny_gpt's 100-entry rows are read once.
  const std::int64_t t = 2 * 16;
  const Workload llama = build_workload(testing::llama_3_1_8b(), testing::options(2, 16));
  const std::int64_t fp32_logits = t * 128256 * 4;
  EXPECT_EQ(find_kernel(llama.layers.back().forward, "log_softmax").kernel.bytes.value(),
            4 * fp32_logits);
  EXPECT_EQ(find_kernel(llama.layers.back().backward, "log_softmax_bwd").kernel.bytes.value(),
            4 * fp32_logits);
  const Workload gpt = build_workload(testing::tiny_gpt(), testing::options(4, 8));
  EXPECT_EQ(find_kernel(gpt.layers.back().forward, "log_softmax").kernel.bytes.value(),
            2 * t * 100 * 4);
  EXPECT_EQ(find_kernel(gpt.layers.back().backward, "log_softmax_bwd").kernel.bytes.value(),
            3 * t * 100 * 4);
}

// host_softmax's kernel choice, at its bounds (SoftMax.cu): the forward's register kernel takes
// rows of up to 9 x 1024 elements whatever their dtype; the shared-memory kernels rows under
// 48 KiB less 128 bytes of reduction scratch whose length is a multiple of 16 bytes' elements;
// the backward has no register kernel. Every other row is read for its max, its sum and its
// output (forward), or for its sum and its output (backward).
TEST(BuildWorkload, SoftmaxReadsARowOnceOnlyWhereAKernelHoldsIt) {
  using detail::log_softmax_backward_passes;
  using detail::log_softmax_forward_passes;
  const auto passes = [](std::int64_t vocab, std::int64_t bytes) {
    return std::pair{log_softmax_forward_passes(vocab, bytes),
                     log_softmax_backward_passes(vocab, bytes)};
  };
  EXPECT_EQ(passes(9216, 4), std::pair(std::int64_t{2}, std::int64_t{3}));   // registers, smem
  EXPECT_EQ(passes(9217, 4), std::pair(std::int64_t{4}, std::int64_t{4}));   // 9217 % 4 != 0
  EXPECT_EQ(passes(12252, 4), std::pair(std::int64_t{2}, std::int64_t{3}));  // 49008 B
  EXPECT_EQ(passes(12256, 4), std::pair(std::int64_t{4}, std::int64_t{4}));  // 49024 B
  EXPECT_EQ(passes(24504, 2), std::pair(std::int64_t{2}, std::int64_t{3}));
  EXPECT_EQ(passes(24512, 2), std::pair(std::int64_t{4}, std::int64_t{4}));
  EXPECT_EQ(passes(20001, 2), std::pair(std::int64_t{4}, std::int64_t{4}));  // 20001 % 8 != 0
  // The vocabularies of the shipped models take the long path in bf16 and fp32: Llama 2's and
  // T5's 32000 and 32128, MPT's 50368.
  for (const std::int64_t vocab : {32000, 32128, 50368}) {
    for (const std::int64_t bytes : {2, 4})
      EXPECT_EQ(passes(vocab, bytes), std::pair(std::int64_t{4}, std::int64_t{4})) << vocab;
  }
}

TEST(BuildWorkload, TinyGptFlopsMatchAHandCount) {
  // b=1, s=8: T=8, d=64, 4 heads of 16, ffn 256, vocab 100, flash attention.
  const Workload w = build_workload(testing::tiny_gpt(), testing::options(1, 8));
  // Per block forward GEMMs: qkv 2*8*64*192 = 196608, attn_out 2*8*64*64 = 65536,
  // mlp_up 2*8*64*256 = 262144, mlp_down 2*8*256*64 = 262144; sum 786432.
  // Flash attention, causal: 4*b*s*s*d_head*heads/2 = 4*1*8*8*16*4/2 = 8192.
  // Head: lm_head 2*8*64*100 = 102400. Embedding and elementwise kernels: 0.
  double forward = 0.0;
  double backward = 0.0;
  for (const Layer& layer : w.layers) {
    forward += total_flops(layer.forward);
    backward += total_flops(layer.backward);
  }
  EXPECT_DOUBLE_EQ(forward, 2.0 * (786432 + 8192) + 102400);  // 1691648
  // Backward: every GEMM twice (dgrad + wgrad), attention 2.5x.
  EXPECT_DOUBLE_EQ(backward, 2.0 * (2 * 786432 + 2.5 * 8192) + 2 * 102400);  // 3391488
  EXPECT_DOUBLE_EQ(find_kernel(w.layers[1].forward, "qkv").kernel.flops.value(), 196608.0);
}

TEST(BuildWorkload, BlockForwardGemmFlopsAre24TDSquaredWithFfn4D) {
  const std::int64_t d = 1024, b = 2, s = 512, t = b * s;
  const TransformerSpec spec = testing::make_spec(ModelFamily::kGpt, 2, d, 16, 16, 4 * d, 50000, s);
  const Workload w = build_workload(spec, testing::options(b, s));
  double gemm = 0.0;
  for (const NamedKernel& k : w.layers[1].forward) {
    if (k.kernel.kind == KernelKind::kGemm) gemm += k.kernel.flops.value();
  }
  EXPECT_DOUBLE_EQ(gemm, 2.0 * static_cast<double>(t) * 12.0 * static_cast<double>(d * d));
}

TEST(BuildWorkload, LinearIsAGemmWithCompulsoryTraffic) {
  const Workload w = build_workload(testing::tiny_gpt(), testing::options(1, 8));
  const Kernel& qkv = find_kernel(w.layers[1].forward, "qkv").kernel;
  EXPECT_EQ(qkv.kind, KernelKind::kGemm);
  EXPECT_EQ(qkv.dtype, Dtype::kBf16);
  EXPECT_EQ(qkv.gemm.m, 8);
  EXPECT_EQ(qkv.gemm.n, 192);
  EXPECT_EQ(qkv.gemm.k, 64);
  EXPECT_EQ(qkv.gemm.batch, 1);
  EXPECT_EQ(qkv.bytes.value(), (8 * 64 + 64 * 192 + 8 * 192) * 2);  // (T*in + in*out + T*out)*e
}

TEST(BuildWorkload, LinearBackwardIsDgradWgradAndBiasReduction) {
  const Workload w = build_workload(testing::tiny_gpt(), testing::options(1, 8));
  const std::vector<NamedKernel>& bwd = w.layers[1].backward;
  const Kernel& dgrad = find_kernel(bwd, "mlp_up_dgrad").kernel;
  EXPECT_EQ(dgrad.gemm.m, 8);
  EXPECT_EQ(dgrad.gemm.n, 64);
  EXPECT_EQ(dgrad.gemm.k, 256);
  const Kernel& wgrad = find_kernel(bwd, "mlp_up_wgrad").kernel;
  EXPECT_EQ(wgrad.gemm.m, 64);
  EXPECT_EQ(wgrad.gemm.n, 256);
  EXPECT_EQ(wgrad.gemm.k, 8);
  EXPECT_DOUBLE_EQ(wgrad.flops.value(), 2.0 * 8 * 64 * 256);
  const Kernel& bgrad = find_kernel(bwd, "mlp_up_bgrad").kernel;
  EXPECT_EQ(bgrad.kind, KernelKind::kMemoryBound);
  EXPECT_EQ(bgrad.bytes.value(), (8 * 256 + 256) * 2);
  // llama linears have no bias.
  const Workload l = build_workload(testing::llama_3_1_8b(), testing::options(1, 16));
  EXPECT_THROW(find_kernel(l.layers[1].backward, "gate_bgrad"), std::out_of_range);
}

TEST(BuildWorkload, TiedHeadHasTheSameGemmAsAnUntiedOne) {
  TransformerSpec tied = testing::mpt_spec(2, 64, 4, 100, 8);
  TransformerSpec untied = tied;
  untied.tied_embeddings = false;
  const Workload a = build_workload(tied, testing::options(1, 8));
  const Workload b = build_workload(untied, testing::options(1, 8));
  EXPECT_DOUBLE_EQ(find_kernel(a.layers.back().forward, "lm_head").kernel.flops.value(),
                   find_kernel(b.layers.back().forward, "lm_head").kernel.flops.value());
  EXPECT_EQ(b.total_numel - a.total_numel, 100 * 64);
}

TEST(BuildWorkload, EmbeddingBackwardZeroFillsTheTableAndAddsATiedHeadsGradient) {
  // tiny_gpt, batch 2 x 8 tokens, bf16: wte 100 x 64, wpe 8 x 64, T = 16 ids, t = 8 positions.
  const Workload gpt = build_workload(testing::tiny_gpt(), testing::options(2, 8));
  const auto& bwd = gpt.layers.front().backward;
  EXPECT_EQ(find_kernel(bwd, "tok_embedding_grad_zero").kernel.bytes.value(), 100 * 64 * 2);
  EXPECT_EQ(find_kernel(bwd, "pos_embedding_grad_zero").kernel.bytes.value(), 8 * 64 * 2);
  // Ids read twice (8 B), gradient rows read and written (2 B), fp32 partials written and read.
  EXPECT_EQ(find_kernel(bwd, "tok_embedding_bwd").kernel.bytes.value(),
            2 * 16 * 8 + 2 * 16 * 64 * 2 + 2 * 16 * 64 * 4);
  EXPECT_EQ(find_kernel(bwd, "pos_embedding_bwd").kernel.bytes.value(),
            2 * 8 * 8 + 2 * 8 * 64 * 2 + 2 * 8 * 64 * 4);
  // Untied: this lookup's gradient is the table's only one.
  EXPECT_THROW(find_kernel(bwd, "tok_embedding_grad_accumulate"), std::out_of_range);
  // MPT ties the head to the table: the head's V x d gradient came first and the lookup's is
  // added into it (reads two, writes one).
  const Workload mpt = build_workload(testing::mpt_spec(2, 64, 4, 100, 8), testing::options(2, 8));
  EXPECT_EQ(find_kernel(mpt.layers.front().backward, "tok_embedding_grad_accumulate")
                .kernel.bytes.value(),
            3 * 100 * 64 * 2);
}

TEST(BuildWorkload, MemoryBoundKernelsArePricedByBytesOnly) {
  const Workload w = build_workload(testing::tiny_gpt(), testing::options(1, 8));
  const Kernel& gelu = find_kernel(w.layers[1].forward, "gelu").kernel;
  EXPECT_EQ(gelu.kind, KernelKind::kMemoryBound);
  EXPECT_DOUBLE_EQ(gelu.flops.value(), 0.0);
  EXPECT_EQ(gelu.bytes.value(), 2 * 8 * 256 * 2);  // reads and writes T*ffn
  const Kernel& residual = find_kernel(w.layers[1].forward, "residual1").kernel;
  EXPECT_EQ(residual.bytes.value(), 3 * 8 * 64 * 2);  // reads 2, writes 1
  const Kernel& gelu_bwd = find_kernel(w.layers[1].backward, "gelu_bwd").kernel;
  EXPECT_EQ(gelu_bwd.bytes.value(), 3 * 8 * 256 * 2);
}

TEST(BuildWorkload, RejectsInvalidSpecsAndOptions) {
  TransformerSpec bad = testing::tiny_gpt();
  bad.n_heads = 5;
  EXPECT_THROW(build_workload(bad, testing::options(1, 8)), std::invalid_argument);
  EXPECT_THROW(build_workload(testing::tiny_gpt(), testing::options(0, 8)), std::invalid_argument);
  EXPECT_THROW(build_workload(testing::tiny_gpt(), testing::options(1, 9)), std::invalid_argument);
}

TEST(ValidateOptions, NamesSequencesLongerThanThePositionTable) {
  TransformerSpec spec = testing::tiny_gpt();
  spec.name = "tiny";
  EXPECT_EQ(validate(spec, testing::options(1, 8)), "");
  EXPECT_EQ(validate(spec, testing::options(1, 16)),
            "seq_len (16) exceeds max_seq_len (8) of tiny: the learned position table has "
            "max_seq_len rows");
  EXPECT_EQ(validate(spec, testing::options(1, 0)), "seq_len must be positive (got 0)");
  EXPECT_EQ(validate(spec, testing::options(-1, 8)), "micro_batch must be positive (got -1)");
  // RoPE has no table: llama runs any sequence length.
  EXPECT_EQ(validate(testing::llama_3_1_8b(), testing::options(1, 1 << 20)), "");
}

}  // namespace
}  // namespace fsdpsim::models

namespace fsdpsim::models {
namespace {

// Builds every family with fused and unfused attention, with and without GQA, and checks the
// invariants every consumer relies on (the builder also checks that temporaries balance).
TEST(BuildWorkload, EveryVariantHasConsistentKernels) {
  const std::vector<TransformerSpec> specs = {
      testing::tiny_gpt(), testing::mpt_spec(2, 64, 4, 100, 8),
      testing::make_spec(ModelFamily::kLlama, 2, 64, 4, 2, 192, 100, 8),
      testing::make_spec(ModelFamily::kLlama, 2, 64, 4, 4, 192, 100, 8),
      testing::make_spec(ModelFamily::kGpt, 2, 64, 4, 2, 256, 100, 8)};
  for (const TransformerSpec& spec : specs) {
    for (const bool flash : {true, false}) {
      const Workload w = build_workload(spec, testing::options(3, 8, flash));
      for (const Layer& layer : w.layers) {
        EXPECT_FALSE(layer.forward.empty()) << layer.name;
        EXPECT_FALSE(layer.backward.empty()) << layer.name;
        EXPECT_GT(layer.saved_activations.value(), 0) << layer.name;
        EXPECT_LE(layer.saved_activations_checkpointed, layer.saved_activations) << layer.name;
        double fwd_gemm = 0.0;
        double bwd_gemm = 0.0;
        for (const auto* kernels : {&layer.forward, &layer.backward}) {
          for (const NamedKernel& k : *kernels) {
            EXPECT_GT(k.kernel.bytes.value(), 0) << k.name;
            if (k.kernel.kind != KernelKind::kGemm) continue;
            const GemmShape& g = k.kernel.gemm;
            EXPECT_DOUBLE_EQ(k.kernel.flops.value(),
                             2.0 * static_cast<double>(g.m * g.n * g.k * g.batch))
                << k.name;
            (kernels == &layer.forward ? fwd_gemm : bwd_gemm) += k.kernel.flops.value();
          }
        }
        // Every forward GEMM has a dgrad and a wgrad of the same size (the unfused attention's
        // batched GEMMs too: dP and dV for PV, dQ and dK for QK^T).
        EXPECT_DOUBLE_EQ(bwd_gemm, 2.0 * fwd_gemm) << layer.name;
      }
    }
  }
}

}  // namespace
}  // namespace fsdpsim::models
