// t5 (HF T5ForConditionalGeneration): parameter counts against HF, the layer list FSDP wraps,
// per-block FLOPs on a hand-checkable model, and the memory of the tensors a stack shares.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/workload.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/model_json.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

using testing::find_kernel;
using testing::total_flops;

TransformerSpec preset(const std::string& name) {
  const app::PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  return app::model_from_json(nlohmann::json(name), std::filesystem::path("test.json"), "/model",
                              presets);
}

// d_model 8, 2 heads of d_kv 4 (inner 8), d_ff 16, vocab 10, 2 + 2 layers, relu, tied.
TransformerSpec tiny_t5(double dropout = 0.1) {
  TransformerSpec s;
  s.name = "tiny-t5";
  s.family = ModelFamily::kT5;
  s.n_layers = 2;
  s.n_decoder_layers = 2;
  s.d_model = 8;
  s.n_heads = 2;
  s.n_kv_heads = 2;
  s.d_kv = 4;
  s.ffn_dim = 16;
  s.vocab = 10;
  s.relative_attention_num_buckets = 32;
  s.tied_embeddings = true;
  s.dropout_rate = dropout;
  return s;
}

const Layer& layer(const Workload& w, const std::string& name) {
  for (const Layer& l : w.layers) {
    if (l.name == name) return l;
  }
  throw std::out_of_range("no layer " + name);
}

double gemm_flops(const std::vector<NamedKernel>& kernels) {
  double sum = 0.0;
  for (const NamedKernel& k : kernels) {
    if (k.kernel.kind == KernelKind::kGemm) sum += k.kernel.flops.value();
  }
  return sum;
}

TEST(T5ParameterCount, PresetsMatchHuggingFaceNumParameters) {
  // transformers T5ForConditionalGeneration.from_pretrained(...).num_parameters() (tied head).
  EXPECT_EQ(parameter_count(preset("t5-small")), 60506624);
  EXPECT_EQ(parameter_count(preset("t5-base")), 222903552);
  EXPECT_EQ(parameter_count(preset("t5-large")), 737668096);
  EXPECT_EQ(parameter_count(preset("t5-3b")), 2851598336);
  EXPECT_EQ(parameter_count(preset("t5-11b")), 11307321344);
}

TEST(T5ParameterCount, V11GatedUntiedPresetsAddWi1AndTheLmHead) {
  // google/t5-v1_1-xl and -xxl: gated-gelu (wi_0, wi_1, wo), untied lm_head.
  EXPECT_EQ(parameter_count(preset("t5-v1_1-xl")), 2849757184);
  EXPECT_EQ(parameter_count(preset("t5-v1_1-xxl")), 11135332352);
  const TransformerSpec xl = preset("t5-v1_1-xl");
  TransformerSpec relu_tied = xl;
  relu_tied.gated_ffn = false;
  relu_tied.tied_embeddings = true;
  EXPECT_EQ(parameter_count(xl) - parameter_count(relu_tied),
            48 * xl.d_model * xl.ffn_dim + xl.vocab * xl.d_model);
}

TEST(T5Workload, LaysOutStacksForBlockWrapping) {
  const Workload w = build_workload(tiny_t5(), testing::options(1, 4));
  std::vector<std::string> names;
  std::vector<LayerKind> kinds;
  for (const Layer& l : w.layers) {
    names.push_back(l.name);
    kinds.push_back(l.kind);
  }
  const std::vector<std::string> expected = {
      "embedding",         "encoder.blocks.0", "encoder.blocks.1", "encoder.final_norm",
      "decoder.embedding", "decoder.blocks.0", "decoder.blocks.1", "head"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(block_count(tiny_t5()), 4);
  const std::vector<LayerKind> expected_kinds = {
      LayerKind::kEmbedding, LayerKind::kBlock, LayerKind::kBlock, LayerKind::kUnwrapped,
      LayerKind::kEmbedding, LayerKind::kBlock, LayerKind::kBlock, LayerKind::kHead};
  EXPECT_EQ(kinds, expected_kinds);
  EXPECT_EQ(w.total_numel, parameter_count(tiny_t5()));
  // Only the first block of each stack owns the 32 x 2 relative bias table.
  EXPECT_EQ(layer(w, "encoder.blocks.0").numel - layer(w, "encoder.blocks.1").numel, 64);
  EXPECT_EQ(layer(w, "decoder.blocks.0").numel - layer(w, "decoder.blocks.1").numel, 64);
  EXPECT_EQ(layer(w, "encoder.blocks.1").numel, 4 * 8 * 8 + 8 + 2 * 8 * 16 + 8);
  EXPECT_EQ(layer(w, "decoder.blocks.1").numel, 8 * 8 * 8 + 3 * 8 + 2 * 8 * 16);
  EXPECT_EQ(layer(w, "decoder.embedding").numel, 0);  // the shared table is the embedding's
  // Parameter by parameter, as HF registers them: q, k, v, o (8 x 8), the relative bias in a
  // stack's first block, the layer_norm; a decoder's cross-attention q, k, v, o and norm; wi, wo
  // (8 x 16) and the FFN's norm.
  const std::vector<std::int64_t> encoder_first = {64, 64, 64, 64, 64, 8, 128, 128, 8};
  EXPECT_EQ(layer(w, "encoder.blocks.0").parameter_numels, encoder_first);
  const std::vector<std::int64_t> decoder_later = {64, 64, 64, 64,  8,   64, 64,
                                                   64, 64, 8,  128, 128, 8};
  EXPECT_EQ(layer(w, "decoder.blocks.1").parameter_numels, decoder_later);
  EXPECT_EQ(layer(w, "embedding").parameter_numels, std::vector<std::int64_t>{80});
  EXPECT_TRUE(layer(w, "decoder.embedding").parameter_numels.empty());
  EXPECT_EQ(layer(w, "head").parameter_numels, std::vector<std::int64_t>{8});  // tied lm_head
  for (const Layer& l : w.layers) {
    std::int64_t sum = 0;
    for (const std::int64_t n : l.parameter_numels) sum += n;
    EXPECT_EQ(sum, l.numel) << l.name;
    EXPECT_EQ(std::ssize(l.parameter_numels), l.parameter_tensors) << l.name;
  }
}

// Each lookup zero-fills a gradient of the whole shared table; autograd adds it to the one from
// the use whose backward ran before: the tied head's for the decoder lookup, the decoder
// lookup's for the encoder's (which runs last).
TEST(T5Workload, BothLookupsZeroFillTheSharedTableAndAddIntoTheEarlierGradient) {
  for (const bool tied : {true, false}) {
    TransformerSpec spec = tiny_t5();
    spec.tied_embeddings = tied;
    const Workload w = build_workload(spec, testing::options(1, 4));
    for (const char* lookup : {"embedding", "decoder.embedding"}) {
      const auto& bwd = layer(w, lookup).backward;
      EXPECT_EQ(find_kernel(bwd, "tok_embedding_grad_zero").kernel.bytes.value(), 10 * 8 * 2)
          << lookup;
    }
    EXPECT_EQ(find_kernel(layer(w, "embedding").backward, "tok_embedding_grad_accumulate")
                  .kernel.bytes.value(),
              3 * 10 * 8 * 2);
    const auto& decoder = layer(w, "decoder.embedding").backward;
    if (tied) {
      EXPECT_EQ(find_kernel(decoder, "tok_embedding_grad_accumulate").kernel.bytes.value(),
                3 * 10 * 8 * 2);
    } else {
      EXPECT_THROW(find_kernel(decoder, "tok_embedding_grad_accumulate"), std::out_of_range);
    }
  }
}

// The feed-forward sub-layer ends every block: with dropout its mask, saved once the dropout
// has run, is the last tensor backward reads, so a recompute that stops early skips only the
// residual add; without dropout it stops before wo's GEMM.
TEST(T5Workload, RecomputeStopsEarlyAtTheEndOfTheFeedForward) {
  for (const auto& [dropout, kernel] :
       {std::pair<double, std::string>{0.1, "ff_residual"}, {0.0, "wo"}}) {
    const Workload w = build_workload(tiny_t5(dropout), testing::options(1, 4));
    for (const Layer& l : w.layers) {
      const std::string expected = l.kind == LayerKind::kBlock ? kernel : "";
      EXPECT_EQ(l.recompute_early_stop_kernel, expected) << l.name << " dropout " << dropout;
    }
  }
}

TEST(T5Workload, TinyBlockFlopsMatchAHandCount) {
  // b=1, encoder 4 tokens, decoder 2 tokens: T_enc = 4, T_dec = 2, d = 8, inner = 8, ff = 16.
  WorkloadOptions o = testing::options(1, 4);
  o.decoder_seq_len = 2;
  const Workload w = build_workload(tiny_t5(), o);
  // Encoder block: q, k, v, o 4 * 2*4*8*8 = 2048; scores and P@V 2 * 2*4*4*4*2 = 512 (no
  // causal halving: the unfused kernels compute the full matrix); wi, wo 2 * 2*4*8*16 = 2048.
  EXPECT_DOUBLE_EQ(gemm_flops(layer(w, "encoder.blocks.1").forward), 2048 + 512 + 2048);
  // Decoder block: self q, k, v, o 4 * 2*2*8*8 = 1024 and 2 * 2*2*2*4*2 = 128; cross q, o
  // 2 * 2*2*8*8 = 512, k, v on the 4 encoder tokens 2 * 2*4*8*8 = 1024, scores and P@V
  // 2 * 2*2*4*4*2 = 256; wi, wo 2 * 2*2*8*16 = 1024.
  EXPECT_DOUBLE_EQ(gemm_flops(layer(w, "decoder.blocks.1").forward),
                   1024 + 128 + 512 + 1024 + 256 + 1024);
  // Every forward GEMM has a dgrad and a wgrad (or dP/dV, dQ/dK) twice its FLOPs.
  for (const char* name : {"encoder.blocks.0", "decoder.blocks.0", "head"}) {
    EXPECT_DOUBLE_EQ(gemm_flops(layer(w, name).backward), 2 * gemm_flops(layer(w, name).forward))
        << name;
  }
  EXPECT_DOUBLE_EQ(total_flops(layer(w, "head").forward), 2.0 * 2 * 8 * 10);  // lm_head
  const Kernel& cross =
      find_kernel(layer(w, "decoder.blocks.0").forward, "cross_attn_scores").kernel;
  EXPECT_EQ(cross.gemm.m, 2);  // decoder queries against ...
  EXPECT_EQ(cross.gemm.n, 4);  // ... encoder keys
  const Kernel& cross_k = find_kernel(layer(w, "decoder.blocks.0").forward, "cross_k").kernel;
  EXPECT_EQ(cross_k.gemm.m, 4);  // projects the encoder's tokens
  // Model FLOPs: the decoder's causal self-attention counts half of its scores and P@V (forward)
  // and of their four backward GEMMs; the encoder's and the cross-attention's count whole.
  const auto model_flops = [](const std::vector<NamedKernel>& kernels) {
    double sum = 0.0;
    for (const NamedKernel& k : kernels) sum += k.kernel.flops.value() * k.model_flops_fraction;
    return sum;
  };
  EXPECT_DOUBLE_EQ(model_flops(layer(w, "encoder.blocks.1").forward), 2048 + 512 + 2048);
  EXPECT_DOUBLE_EQ(model_flops(layer(w, "decoder.blocks.1").forward),
                   1024 + 128 / 2 + 512 + 1024 + 256 + 1024);
  EXPECT_DOUBLE_EQ(model_flops(layer(w, "decoder.blocks.1").backward),
                   2 * (1024 + 128 / 2 + 512 + 1024 + 256 + 1024));
}

TEST(T5Workload, AttentionSavesTheFp32SoftmaxAndTheDropoutOutput) {
  const Workload w = build_workload(tiny_t5(), testing::options(1, 4));
  const Layer& block = layer(w, "encoder.blocks.1");
  // Head-major q, k, v 3 * 4*8*2 = 192 B; scores 2*4*4 = 32 elements: fp32 softmax output
  // 128 B, bool dropout mask 32 B, bf16 dropout output 64 B.
  EXPECT_EQ(block.attention_core_saved.value(), 192 + 128 + 32 + 64);
  // Token-major q, k, v, the projections' outputs: a checkpoint of the core keeps them.
  EXPECT_EQ(block.attention_core_input.value(), 192);
  EXPECT_GT(block.attention_forward_end, block.attention_forward_begin);
  EXPECT_EQ(block.forward[block.attention_forward_begin].name, "attn_split_heads");
  // No dropout (dropout_rate 0): the cast output is what P@V keeps, and there is no mask.
  const Workload dry = build_workload(tiny_t5(0.0), testing::options(1, 4));
  EXPECT_EQ(layer(dry, "encoder.blocks.1").attention_core_saved.value(), 192 + 128 + 64);
}

TEST(T5Workload, SharedStackTensorsReachTheMemoryModel) {
  // b=2, seq 16, d 8: hidden = 2*16*8*2 = 512 B; a [b, heads, 16, 16] bias = 2048 B.
  const Workload w = build_workload(tiny_t5(), testing::options(2, 16));
  const std::int64_t hidden = 512;
  const std::int64_t bias = 2 * 2 * 16 * 16 * 2;
  // The encoder output is held by the encoder's final-norm layer until its backward, which
  // follows the last decoder block's.
  const Layer& final_norm = layer(w, "encoder.final_norm");
  EXPECT_GE(final_norm.saved_activations.value(), hidden);
  // Checkpointed blocks keep their input; the first block of each stack also the biases the
  // later blocks' checkpoints hold (self-attention bias; decoder: cross-attention bias too).
  EXPECT_EQ(layer(w, "encoder.blocks.1").saved_activations_checkpointed.value(), hidden);
  EXPECT_EQ(layer(w, "encoder.blocks.0").saved_activations_checkpointed.value(), hidden + bias);
  EXPECT_EQ(layer(w, "decoder.blocks.0").saved_activations_checkpointed.value(), hidden + 2 * bias);
  // The biases live across the stack's forward; the bias gradient (and, in the decoder, the
  // encoder output's gradient) across its backward.
  EXPECT_GE(layer(w, "encoder.blocks.1").forward_transient_peak().value(), bias);
  EXPECT_GE(layer(w, "decoder.blocks.1").forward_transient_peak().value(), 2 * bias);
  EXPECT_GE(layer(w, "decoder.blocks.1").backward_transient_peak().value(),
            layer(w, "encoder.blocks.1").backward_transient_peak().value() + hidden);
  // Decoder blocks add their cross k/v input gradients into the encoder output's gradient.
  find_kernel(layer(w, "decoder.blocks.1").backward, "cross_k_encoder_grad_accumulate");
  find_kernel(layer(w, "encoder.blocks.1").backward, "position_bias_grad_accumulate");
}

TEST(T5Workload, DecoderSeqLenIsValidatedAndT5Only) {
  WorkloadOptions o = testing::options(1, 4);
  o.decoder_seq_len = -1;
  EXPECT_NE(validate(tiny_t5(), o), "");
  o.decoder_seq_len = 8;
  EXPECT_EQ(validate(tiny_t5(), o), "");
  EXPECT_NE(validate(testing::tiny_gpt(), o).find("t5"), std::string::npos);
}

TEST(T5Workload, T5LayerNormRunsEagerlyUnlessApexFusesIt) {
  // transformers runs T5LayerNorm op by op (the default, and what rms_norm eager asks for);
  // with apex installed modeling_t5.py swaps in FusedRMSNorm: one kernel forward, two backward.
  WorkloadOptions eager = testing::options(1, 4);
  eager.rms_norm = RmsNormKernel::kEager;
  WorkloadOptions fused = testing::options(1, 4);
  fused.rms_norm = RmsNormKernel::kFused;
  const Workload by_default = build_workload(tiny_t5(), testing::options(1, 4));
  const Workload e = build_workload(tiny_t5(), eager);
  const Workload f = build_workload(tiny_t5(), fused);
  const auto norm_kernels = [](const Workload& w, const std::string& layer_name) {
    std::vector<std::string> out;
    for (const NamedKernel& k : layer(w, layer_name).forward) {
      if (k.name.rfind("self_attn_norm", 0) == 0) out.push_back(k.name);
    }
    return out;
  };
  const std::vector<std::string> op_by_op = {
      "self_attn_norm_to_fp32",         "self_attn_norm_pow",   "self_attn_norm_mean",
      "self_attn_norm_add_eps",         "self_attn_norm_rsqrt", "self_attn_norm_mul",
      "self_attn_norm_to_weight_dtype", "self_attn_norm_weight"};
  EXPECT_EQ(norm_kernels(by_default, "encoder.blocks.0"), op_by_op);
  EXPECT_EQ(norm_kernels(e, "encoder.blocks.0"), op_by_op);
  EXPECT_EQ(norm_kernels(f, "encoder.blocks.0"), std::vector<std::string>{"self_attn_norm"});
  // The multiply keeps the bf16 input and the pow its fp32 copy; the fused kernel the input.
  const std::int64_t x32 = 4 * 8 * 4;
  EXPECT_EQ(layer(e, "encoder.blocks.0").saved_activations.value() -
                layer(f, "encoder.blocks.0").saved_activations.value(),
            2 * (x32 + 4 * 8 * 2));
  // Either way one saved tensor is the block's input itself, which a checkpoint keeps anyway.
  for (const Workload* w : {&e, &f}) {
    for (const char* name : {"encoder.blocks.0", "decoder.blocks.0"})
      EXPECT_EQ(layer(*w, name).saved_input.value(), 4 * 8 * 2) << name;
  }
}

// Compiled, a block's T5LayerNorms are Inductor's own fused norm whatever rms_norm says (its
// saved tensors too), and the attention's score chain fuses: the position-bias sum, its fp32 copy
// and the bf16 probabilities (read by the dropout) are neither written nor read back, the fp32
// softmax output (saved) is; in backward the gradients between the dropout's and the fp32 cast's.
TEST(T5Workload, CompiledBlocksFuseTheirNormsAndTheScoreChain) {
  WorkloadOptions eager = testing::options(1, 4);
  eager.rms_norm = RmsNormKernel::kEager;
  eager.compiled = true;
  WorkloadOptions fused = eager;
  fused.rms_norm = RmsNormKernel::kFused;
  const Workload e = build_workload(tiny_t5(), eager);
  const Workload f = build_workload(tiny_t5(), fused);
  EXPECT_EQ(layer(e, "encoder.blocks.0").saved_activations,
            layer(f, "encoder.blocks.0").saved_activations);
  const NamedKernel& chain = find_kernel(layer(e, "encoder.blocks.0").forward,
                                         "attn_add_position_bias+attn_scores_to_fp32+"
                                         "attn_softmax_fp32+attn_probs_to_dtype+attn_dropout");
  // Scores: 2 heads x 4 x 4 = 32 elements, bf16 (2 B) and fp32 (4 B); the mask 1 B each.
  const std::int64_t scores = 32 * 2;
  const std::int64_t scores32 = 32 * 4;
  const std::int64_t eager_bytes =
      3 * scores + (scores + scores32) + 2 * scores32 + (scores32 + scores) + (2 * scores + 32);
  EXPECT_EQ(chain.kernel.bytes.value(), eager_bytes - 2 * (scores + scores32 + scores));
}

// v1.1's gelu_new runs op by op (transformers' NewGELUActivation is Python arithmetic): eight
// forward kernels (18 passes over the T x d_ff tensor) that keep t, 0.5 * x and 1 + t beside x,
// and eleven backward kernels (28 passes) in autograd's order.
TEST(T5Workload, GatedGeluNewRunsOpByOp) {
  TransformerSpec gated = tiny_t5();
  gated.gated_ffn = true;
  const Workload w = build_workload(gated, testing::options(1, 4));
  const Layer& block = layer(w, "encoder.blocks.1");
  const std::int64_t ffn = 4 * 16 * 2;  // 4 tokens x d_ff 16, bf16
  const auto gelu = [](const std::vector<NamedKernel>& kernels, std::int64_t& bytes) {
    std::vector<std::string> names;
    bytes = 0;
    for (const NamedKernel& k : kernels) {
      if (k.name.rfind("gelu_new_", 0) != 0) continue;
      names.push_back(k.name);
      bytes += k.kernel.bytes.value();
    }
    return names;
  };
  std::int64_t forward_bytes = 0;
  const std::vector<std::string> forward = {
      "gelu_new_half_x", "gelu_new_pow",  "gelu_new_scale_cube", "gelu_new_add_x",
      "gelu_new_scale",  "gelu_new_tanh", "gelu_new_one_plus",   "gelu_new_mul"};
  EXPECT_EQ(gelu(block.forward, forward_bytes), forward);
  EXPECT_EQ(forward_bytes, 18 * ffn);
  std::int64_t backward_bytes = 0;
  const std::vector<std::string> backward = {"gelu_new_mul_other_bwd",
                                             "gelu_new_mul_self_bwd",
                                             "gelu_new_tanh_bwd",
                                             "gelu_new_scale_bwd",
                                             "gelu_new_scale_cube_bwd",
                                             "gelu_new_pow_square_bwd",
                                             "gelu_new_pow_times_three_bwd",
                                             "gelu_new_pow_grad_bwd",
                                             "gelu_new_accumulate_pow_bwd",
                                             "gelu_new_half_x_bwd",
                                             "gelu_new_accumulate_half_x_bwd"};
  EXPECT_EQ(gelu(block.backward, backward_bytes), backward);
  EXPECT_EQ(backward_bytes, 28 * ffn);
  // Saved against v1.0's block (relu): its relu output, the dropout mask and the wo input; the
  // gated block keeps wi_0's output, 0.5 * x, t, 1 + t, the gelu output and wi_1's output for
  // the product, then the same mask and wo input: 5 tensors more.
  TransformerSpec relu = gated;
  relu.gated_ffn = false;
  const Workload relu_workload = build_workload(relu, testing::options(1, 4));
  const Layer& plain = layer(relu_workload, "encoder.blocks.1");
  EXPECT_EQ(block.saved_activations.value() - plain.saved_activations.value(), 5 * ffn);
  EXPECT_GE(block.backward_transient_peak().value(), 5 * ffn);
}

TEST(T5Spec, ValidationNamesTheBadField) {
  TransformerSpec s = tiny_t5();
  s.d_kv = 0;
  EXPECT_NE(validate(s).find("d_kv"), std::string::npos);
  s = tiny_t5();
  s.n_decoder_layers = 0;
  EXPECT_NE(validate(s).find("n_decoder_layers"), std::string::npos);
  s = tiny_t5();
  s.dropout_rate = 1.0;
  EXPECT_NE(validate(s).find("dropout_rate"), std::string::npos);
  // d_model need not be n_heads * d_kv (t5-11b: 1024 vs 128 * 128).
  s = tiny_t5();
  s.d_kv = 64;
  EXPECT_EQ(validate(s), "");
}

}  // namespace
}  // namespace fsdpsim::models
