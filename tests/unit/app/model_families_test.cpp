// The t5 and custom model families through the app: bad model JSON is a ConfigError naming the
// file, the JSON path, what was expected and what was found (exit code 2 from the CLI), and
// scenarios with these models run end to end.
#include <gtest/gtest.h>

#include <string>

#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/fsdp/simulation.hpp"
#include "test_support.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;

const PresetLocator kPresets{FSDPSIM_CONFIGS_DIR};

// A 2 + 2 layer t5-small on one 8x A100 node.
nlohmann::json t5_scenario() {
  return {{"schema_version", 1},
          {"name", "tiny-t5"},
          {"model", {{"preset", "t5-small"}, {"n_layers", 2}, {"n_decoder_layers", 2}}},
          {"hardware", {{"preset", "a100-sxm-80gb"}, {"nodes", 1}}},
          {"training", {{"global_batch", 16}, {"micro_batch", 2}, {"seq_len", 128}}}};
}

nlohmann::json custom_model() {
  return {{"family", "custom"},
          {"name", "two-stage"},
          {"layers",
           {{{"name", "stem"}, {"params", 1000}, {"fsdp_unit", false}},
            {{"name", "stage"},
             {"count", 4},
             {"params", 1000000},
             {"forward_flops_per_sample", 2e9},
             {"saved_activation_bytes_per_sample", 1000000},
             {"output_bytes_per_sample", 100000},
             {"memory_bytes_per_sample", 4000000}}}}};
}

nlohmann::json custom_scenario() {
  nlohmann::json s = t5_scenario();
  s["name"] = "tiny-custom";
  s["model"] = custom_model();
  s["training"] = {{"global_batch", 64}, {"micro_batch", 8}, {"seq_len", 1}};
  return s;
}

// The error message, or "accepted".
std::string error_of(nlohmann::json document, const nlohmann::json& patch) {
  document.merge_patch(patch);
  return test_support::scenario_error(document, "bad.json", kPresets);
}

std::string layer_error(const nlohmann::json& layer_patch) {
  nlohmann::json s = custom_scenario();
  s["model"]["layers"][1].merge_patch(layer_patch);
  return error_of(s, nlohmann::json::object());
}

TEST(T5Json, RejectsBadKeysWithPathAndExpectation) {
  EXPECT_EQ(error_of(t5_scenario(), {{"model", {{"max_seq_len", 512}}}})
                .rfind("bad.json: /model/max_seq_len: unknown key", 0),
            0u);
  EXPECT_EQ(error_of(t5_scenario(), {{"model", {{"feed_forward_proj", "gated_gelu"}}}}),
            "bad.json: /model/feed_forward_proj: expected one of relu, gated-gelu, found "
            "\"gated_gelu\"; did you mean gated-gelu?");
  EXPECT_EQ(error_of(t5_scenario(), {{"model", {{"d_kv", -4}}}}),
            "bad.json: /model/d_kv: expected a positive integer, found the number -4");
  EXPECT_EQ(error_of(t5_scenario(), {{"model", {{"dropout_rate", 1.5}}}}),
            "bad.json: /model/dropout_rate: expected a number in [0, 1), found 1.5");
  EXPECT_EQ(error_of(t5_scenario(), {{"model", {{"n_decoder_layer", 2}}}}),
            "bad.json: /model/n_decoder_layer: unknown key; did you mean n_decoder_layers?");
}

// An inline T5 without d_kv takes T5Config's default, 64, not d_model / n_heads (HF's t5-11b
// has 128 heads of 128 over d_model 1024): 7 heads over d_model 512 project to 448, not 511.
TEST(T5Json, DKvDefaultsToT5ConfigsSixtyFour) {
  nlohmann::json s = t5_scenario();
  s["model"] = {{"family", "t5"}, {"n_layers", 2},   {"d_model", 512},
                {"n_heads", 7},   {"ffn_dim", 2048}, {"vocab", 32128}};
  EXPECT_EQ(app::scenario_from_json(s, "t5.json", {}, kPresets).model.d_kv, 64);
  s["model"]["d_kv"] = 73;
  EXPECT_EQ(app::scenario_from_json(s, "t5.json", {}, kPresets).model.d_kv, 73);
}

TEST(T5Json, DecoderSeqLenIsForT5AndFlashAttentionIsRefused) {
  EXPECT_EQ(error_of(t5_scenario(), {{"training", {{"decoder_seq_len", 0}}}}),
            "bad.json: /training/decoder_seq_len: expected a positive integer, found the number 0");
  nlohmann::json llama = t5_scenario();
  llama["model"] = "llama-3.1-8b";
  EXPECT_NE(error_of(llama, {{"training", {{"decoder_seq_len", 64}}}})
                .find("bad.json: /training/decoder_seq_len: applies to encoder-decoder models"),
            std::string::npos);
  EXPECT_NE(error_of(t5_scenario(), {{"training", {{"flash_attention", true}}}})
                .find("bad.json: /training/flash_attention: HF T5 attention is unfused"),
            std::string::npos);
  EXPECT_EQ(error_of(t5_scenario(), {{"training", {{"flash_attention", false}}}}), "accepted");
  // A fused kernel to run it with is refused too, with flash_attention left out as with it false.
  for (const char* kernel : {"flash2", "cudnn"}) {
    EXPECT_NE(error_of(t5_scenario(), {{"training", {{"flash_kernel", kernel}}}})
                  .find("bad.json: /training/flash_kernel: picks a fused attention kernel; HF T5 "
                        "attention is unfused"),
              std::string::npos)
        << kernel;
    EXPECT_NE(error_of(t5_scenario(),
                       {{"training", {{"flash_kernel", kernel}, {"flash_attention", false}}}})
                  .find("bad.json: /training/flash_kernel: picks a fused attention kernel; HF T5 "
                        "attention is unfused"),
              std::string::npos)
        << kernel;
  }
}

// Overrides change a preset's sizes; a family of its own is another model, given in full.
TEST(ModelJson, APresetOverrideKeepsItsFamily) {
  nlohmann::json s = t5_scenario();
  s["model"] = {{"preset", "t5-small"}, {"family", "llama"}};
  EXPECT_EQ(error_of(s, nlohmann::json::object()),
            "bad.json: /model/family: expected \"t5\" (the family of preset t5-small) or no key, "
            "found \"llama\": describe a model of another family in full, without \"preset\"");
  s["model"]["family"] = "t5";
  EXPECT_EQ(error_of(s, nlohmann::json::object()), "accepted");
}

TEST(CustomJson, RejectsBadLayersWithTheirIndex) {
  EXPECT_EQ(layer_error({{"params", -1}}),
            "bad.json: /model/layers/1/params: expected a non-negative integer, found the "
            "number -1");
  EXPECT_EQ(layer_error({{"count", 0}}),
            "bad.json: /model/layers/1/count: expected a positive integer, found the number 0");
  EXPECT_EQ(layer_error({{"forward_flop_per_sample", 1}}),
            "bad.json: /model/layers/1/forward_flop_per_sample: unknown key; did you mean "
            "forward_flops_per_sample?");
  const std::string flops = layer_error({{"backward_flops_per_sample", 1e30}});
  EXPECT_EQ(flops.rfind("bad.json: /model/layers/1/backward_flops_per_sample: expected ", 0), 0U)
      << flops;
  EXPECT_NE(flops.find("2e+18"), std::string::npos) << flops;
  // The forward's bound is half the backward's, which defaults to twice the forward.
  const std::string forward = layer_error({{"forward_flops_per_sample", 1.5e18}});
  EXPECT_EQ(forward.rfind("bad.json: /model/layers/1/forward_flops_per_sample: expected ", 0), 0U)
      << forward;
  EXPECT_NE(forward.find("1e+18"), std::string::npos) << forward;
  EXPECT_EQ(layer_error({{"name", nullptr}}),
            "bad.json: /model/layers/1/name: required key is missing");
  EXPECT_EQ(layer_error({{"parameter_tensors", 0}}),
            "bad.json: /model/layers/1/parameter_tensors: expected a positive integer when params "
            "is positive, found 0");
  EXPECT_EQ(layer_error({{"params", 0}, {"parameter_tensors", 3}}),
            "bad.json: /model/layers/1/parameter_tensors: expected 0 (or no key) when params is "
            "0, found 3: tensors need parameters to hold");
  EXPECT_EQ(layer_error({{"params", 0}}), "accepted");  // no parameters, no tensors by default
  EXPECT_EQ(layer_error({{"params", 2}, {"parameter_tensors", 5}}),
            "bad.json: /model/layers/1/parameter_tensors: expected at most params (2): each "
            "tensor holds at least one parameter, found 5");
  EXPECT_EQ(layer_error({{"params", 1}}), "accepted");  // one tensor by default, not two
  // A model whose every layer has no parameter gives FSDP nothing to do.
  nlohmann::json bare = custom_scenario();
  bare["model"]["layers"] = {{{"name", "z"}}};
  EXPECT_EQ(error_of(bare, nlohmann::json::object()),
            "bad.json: /model/layers: expected a layer with params: a model of no parameters has "
            "nothing to shard, gather or reduce");
  EXPECT_EQ(layer_error({{"name", "stem"}}),
            "bad.json: /model/layers/1/name: \"stem\" names layers/0 too; each layer needs a "
            "name of its own (use count for repeats)");
  // A name is one row of explain's table: one line, without control characters.
  EXPECT_EQ(layer_error({{"name", "head\nblock"}}),
            "bad.json: /model/layers/1/name: expected a name on one line, without control "
            "characters; found U+000A at byte 4");
  EXPECT_NE(layer_error({{"name", "head\x7f"}}).find("found U+007F at byte 4"), std::string::npos);
  EXPECT_EQ(layer_error({{"name", "t\u00eate"}}), "accepted");  // not ASCII, but printable
  EXPECT_EQ(layer_error({{"name", ""}}),
            "bad.json: /model/layers/1/name: expected a name, found an empty string");
  // Copies are units "<name>.<i>": a layer named like one, or like FSDP's root, is refused.
  EXPECT_EQ(layer_error({{"name", "root"}}),
            "bad.json: /model/layers/1/name: \"root\" is the name of FSDP's root unit; choose "
            "another");
  nlohmann::json copies = custom_scenario();
  copies["model"]["layers"].push_back({{"name", "stage.2"}, {"params", 10}});
  EXPECT_EQ(error_of(copies, nlohmann::json::object()),
            "bad.json: /model/layers/2/name: layers/1 and layers/2 both name a unit \"stage.2\" "
            "(a layer with count N names its copies <name>.0 to <name>.N-1); each unit needs a "
            "name of its own");
  copies["model"]["layers"][2]["name"] = "stage.4";  // past the copies: a name of its own
  EXPECT_EQ(error_of(copies, nlohmann::json::object()), "accepted");
  EXPECT_EQ(error_of(custom_scenario(), {{"model", {{"layers", "stem"}}}}),
            "bad.json: /model/layers: expected a non-empty array of layers, found the string "
            "\"stem\"");
  EXPECT_EQ(error_of(custom_scenario(), {{"model", {{"layers", nullptr}}}}),
            "bad.json: /model/layers: required key is missing");
  EXPECT_EQ(error_of(custom_scenario(), {{"model", {{"n_layers", 4}}}}),
            "bad.json: /model/n_layers: unknown key; did you mean layers?");
  // The kernel launches of a forward are bounded (the run time grows with them): 4 copies of
  // 131072 kernels plus the stem's 2 are just over 2^19.
  EXPECT_EQ(layer_error({{"kernels", 131072}}),
            "bad.json: /model/layers/1: the layers up to this one launch 524290 kernels per "
            "forward (count x kernels); expected at most 524288 in all");
  EXPECT_EQ(layer_error({{"kernels", 131071}}), "accepted");
  // Layers with fsdp_unit false stay in the root and are never recomputed: with no other
  // layer, checkpointing and a wrap policy would change nothing.
  nlohmann::json rootless = custom_scenario();
  for (nlohmann::json& l : rootless["model"]["layers"]) l["fsdp_unit"] = false;
  EXPECT_EQ(error_of(rootless, nlohmann::json::object()), "accepted");
  EXPECT_EQ(error_of(rootless, {{"training", {{"activation_checkpointing", "full"}}}}),
            "bad.json: /training/activation_checkpointing: recomputes blocks (layers with "
            "fsdp_unit true); every layer of this custom model has fsdp_unit false, so it would "
            "do nothing");
  EXPECT_EQ(error_of(rootless, {{"fsdp", {{"wrap_policy", "whole_model"}}}}),
            "bad.json: /fsdp/wrap_policy: groups blocks (layers with fsdp_unit true) into units; "
            "every layer of this custom model has fsdp_unit false and stays in the root unit, so "
            "it would do nothing");
  EXPECT_EQ(error_of(custom_scenario(), {{"training", {{"activation_checkpointing", "full"}}}}),
            "accepted");
}

TEST(ModelFamiliesCli, BadT5ModelExitsWithTwo) {
  const fs::path dir = test_support::temp_dir("model_families");
  const fs::path bad =
      test_support::write_scenario(dir, "bad_t5", t5_scenario(), {{"model", {{"ffn_dim", "big"}}}});
  const test_support::Outcome o = test_support::run_fsdpsim("run " + bad.string());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("/model/ffn_dim: expected a positive integer, found the string \"big\""),
            std::string::npos)
      << o.output;
}

TEST(ModelFamiliesCli, PaperT5ScenarioRuns) {
  const test_support::Outcome o = test_support::run_fsdpsim(
      "run " FSDPSIM_SOURCE_DIR "/scenarios/paper/t5_11b_8xa100.json --json -");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json r = nlohmann::json::parse(o.output.substr(o.output.find('{')));
  EXPECT_EQ(r.at("status"), "ok");
  EXPECT_EQ(r.at("parameters"), 11307321344);
  EXPECT_GT(r.at("hardware_tflops_per_gpu").get<double>(), 50.0);
  EXPECT_LT(r.at("hardware_tflops_per_gpu").get<double>(), 312.0);
}

TEST(ModelFamilies, CustomScenarioReportsSamplesAsTokensWithSeqLenOne) {
  const fsdp::StepResult r =
      simulate_scenario(scenario_from_json(custom_scenario(), "custom.json", {}, kPresets), false)
          .result;
  EXPECT_FALSE(r.out_of_memory);
  EXPECT_EQ(r.tokens_per_step_per_gpu, 8);  // 8 samples of seq_len 1 per GPU
  // 4 stages x 2e9 FLOPs x 3 (forward + 2x backward) x 8 samples, no recompute.
  EXPECT_NEAR(r.model_tflops_per_gpu * r.step_time.value() * 1e12, 4 * 2e9 * 3 * 8, 1e3);
}

TEST(ModelFamilies, T5RunsWithEveryCheckpointingModeAndWrapPolicy) {
  for (const char* ac : {"none", "full", "selective", "selective_op", "attention"}) {
    for (const char* wrap :
         {"transformer_block", "every_n_blocks", "whole_model", "block_and_linear"}) {
      nlohmann::json s = t5_scenario();
      s["training"]["activation_checkpointing"] = ac;
      s["fsdp"] = {{"wrap_policy", wrap}};
      const fsdp::StepResult r =
          simulate_scenario(scenario_from_json(s, "t5.json", {}, kPresets), false).result;
      EXPECT_GT(r.step_time.value(), 0.0) << ac << " " << wrap;
      EXPECT_FALSE(r.out_of_memory) << ac << " " << wrap;
    }
  }
}

// A unit per nn.Linear is an FSDP1 wrapping (ModuleWrapPolicy); FSDP2 refuses it by name.
TEST(ModelFamilies, LinearWrappingIsModelledForFsdp1Only) {
  EXPECT_EQ(
      error_of(t5_scenario(), {{"fsdp", {{"version", 2}, {"wrap_policy", "block_and_linear"}}}})
          .rfind("bad.json: /fsdp/wrap_policy: block_and_linear (a unit per nn.Linear nested "
                 "in its block's) is modelled for FSDP1 (version 1) only",
                 0),
      0u);
}

// training.unpad_attention wraps a fused attention kernel: it needs flash_attention, and is
// refused where no such kernel exists (T5's unfused attention, custom models) or under
// torch.compile (its host reads break the graph); an mpt scenario takes it and says so.
TEST(UnpadAttentionJson, NeedsAFusedKernelAndEagerMode) {
  nlohmann::json mpt = t5_scenario();
  mpt["model"] = {{"preset", "mpt-125m"}, {"n_layers", 2}};
  EXPECT_EQ(error_of(mpt, {{"training", {{"unpad_attention", true}, {"flash_attention", false}}}})
                .rfind("bad.json: /training/unpad_attention: unpads the tokens around a fused", 0),
            0u);
  EXPECT_EQ(error_of(mpt, {{"training", {{"unpad_attention", true}, {"compiled", true}}}})
                .rfind("bad.json: /training/unpad_attention: not modelled under torch.compile", 0),
            0u);
  EXPECT_EQ(error_of(t5_scenario(), {{"training", {{"unpad_attention", true}}}})
                .rfind("bad.json: /training/unpad_attention: HF T5 attention is unfused", 0),
            0u);
  EXPECT_EQ(error_of(custom_scenario(), {{"training", {{"unpad_attention", true}}}})
                .rfind("bad.json: /training/unpad_attention:", 0),
            0u);
  EXPECT_EQ(error_of(mpt, {{"training", {{"unpad_attention", true}}}}), "accepted");
  const fs::path file = test_support::write_scenario(test_support::temp_dir("unpad"), "mpt", mpt,
                                                     {{"training", {{"unpad_attention", true}}}});
  const auto [code, out] = test_support::run_fsdpsim("run " + file.string());
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find(", unpadded attention"), std::string::npos) << out;
}

// training.logits_kept_by_loop: refused for t5's head; an mpt scenario takes it, prints it on
// its training line, and peaks higher by about the kept bf16 logits.
TEST(LogitsKeptByLoopJson, T5RefusesItAnMptScenarioPrintsAndCountsIt) {
  EXPECT_EQ(error_of(t5_scenario(), {{"training", {{"logits_kept_by_loop", "compute_dtype"}}}})
                .rfind("bad.json: /training/logits_kept_by_loop: logits kept by the training "
                       "loop are modelled for the gpt, mpt and llama heads;",
                       0),
            0u);
  nlohmann::json mpt = t5_scenario();
  mpt["model"] = {{"preset", "mpt-125m"}, {"n_layers", 2}};
  const fs::path dir = test_support::temp_dir("kept_logits");
  const auto peak = [&](const std::string& kept) {
    const fs::path file = test_support::write_scenario(
        dir, kept, mpt, {{"training", {{"logits_kept_by_loop", kept}}}});
    const auto [code, text] = test_support::run_fsdpsim("run " + file.string() + " --json -");
    EXPECT_EQ(code, 0) << text;
    return code == 0 ? nlohmann::json::parse(text)["peak_mem_allocated_gib"].get<double>() : 0.0;
  };
  const double none = peak("none");
  const double kept = peak("compute_dtype");
  const auto tokens =
      mpt["training"]["micro_batch"].get<double>() * mpt["training"]["seq_len"].get<double>();
  // Allocated memory counts the allocator's blocks, and a large block whose remainder is 1 MiB or
  // less is handed out whole (should_split): either peak may hold up to that much more.
  EXPECT_GE(kept - none, (tokens * 50368 * 2 - (1 << 20)) / (1024.0 * 1024 * 1024));
  const fs::path file = test_support::write_scenario(
      dir, "text", mpt, {{"training", {{"logits_kept_by_loop", "compute_dtype"}}}});
  const auto [code, out] = test_support::run_fsdpsim("run " + file.string());
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find(", logits kept by the loop"), std::string::npos) << out;
}

// minGPT's causal mask buffers: a gpt key, kept whole on every rank in the dtype FSDP1's
// buffer_dtype gives (FSDP2 has no such knob), broadcast by DDP unless told not to.
TEST(MaskBufferJson, IsAGptKeyAndItsDtypeAnFsdp1Knob) {
  nlohmann::json gpt = t5_scenario();
  gpt["model"] = {
      {"preset", "gpt-175b"}, {"n_layers", 2}, {"d_model", 256}, {"n_heads", 4}, {"n_kv_heads", 4}};
  gpt["training"]["seq_len"] = 2048;
  EXPECT_EQ(error_of(gpt, nlohmann::json::object()), "accepted");
  nlohmann::json mpt = gpt;
  mpt["model"] = {{"preset", "mpt-125m"}, {"n_layers", 2}, {"causal_mask_buffer", true}};
  EXPECT_EQ(error_of(mpt, nlohmann::json::object()),
            "bad.json: /model/causal_mask_buffer: minGPT's per-block causal mask buffer: "
            "expected false (or no key) for a model that is not family gpt");
  EXPECT_EQ(error_of(gpt, {{"fsdp", {{"version", 2}, {"buffer_dtype", "bf16"}}}}),
            "bad.json: /fsdp/buffer_dtype: is FSDP1's MixedPrecision.buffer_dtype; FSDP2's "
            "MixedPrecisionPolicy has none and leaves buffers in the module's dtype");
  EXPECT_EQ(error_of(gpt, {{"fsdp", {{"buffer_dtype", "fp64"}}}})
                .rfind("bad.json: /fsdp/buffer_dtype: expected one of", 0),
            0u);
  EXPECT_EQ(error_of(gpt, {{"parallelism", "ddp"}, {"ddp", {{"broadcast_buffers", "yes"}}}})
                .rfind("bad.json: /ddp/broadcast_buffers: expected", 0),
            0u);

  const fs::path dir = test_support::temp_dir("mask_buffer");
  const auto run = [&](const std::string& name, const nlohmann::json& patch) {
    const fs::path file = test_support::write_scenario(dir, name, gpt, patch);
    const auto [code, text] = test_support::run_fsdpsim("run " + file.string() + " --json -");
    EXPECT_EQ(code, 0) << text;
    return code == 0 ? nlohmann::json::parse(text) : nlohmann::json::object();
  };
  // Alive the whole step, they raise the peak by their size.
  const auto params_gib = [](const nlohmann::json& r) {
    return r["peak_mem_allocated_gib"].get<double>();
  };
  // 2 blocks x 2048^2 elements: 32 MiB in fp32, 16 MiB in bf16.
  const double mib = 1.0 / 1024;
  const nlohmann::json fp32 = run("fp32", nlohmann::json::object());
  const nlohmann::json none = run("none", {{"model", {{"causal_mask_buffer", false}}}});
  const nlohmann::json bf16 = run("bf16", {{"fsdp", {{"buffer_dtype", "bf16"}}}});
  EXPECT_NEAR(params_gib(fp32) - params_gib(none), 32 * mib, 2e-5);
  EXPECT_NEAR(params_gib(bf16) - params_gib(none), 16 * mib,
              2e-5);  // the JSON rounds each peak to 1e-5
  // DDP broadcasts them before each forward, or not.
  const nlohmann::json ddp = run("ddp", {{"parallelism", "ddp"}, {"fsdp", nullptr}});
  const nlohmann::json kept =
      run("ddp_kept",
          {{"parallelism", "ddp"}, {"fsdp", nullptr}, {"ddp", {{"broadcast_buffers", false}}}});
  EXPECT_GT(ddp["step_time_s"].get<double>(), kept["step_time_s"].get<double>());
  // The summary says what happens to them.
  const auto summary = [&](const std::string& name, const nlohmann::json& patch) {
    const fs::path file = test_support::write_scenario(dir, name, gpt, patch);
    return test_support::run_fsdpsim("run " + file.string()).output;
  };
  EXPECT_NE(summary("ddp_text", {{"parallelism", "ddp"}, {"fsdp", nullptr}})
                .find("all-reduce fp32, buffers broadcast before synced forwards\n"),
            std::string::npos);
  EXPECT_NE(summary("bf16_text", {{"fsdp", {{"buffer_dtype", "bf16"}}}})
                .find("param bf16 / reduce bf16 / buffer bf16\n"),
            std::string::npos);
}

}  // namespace
}  // namespace fsdpsim::app
