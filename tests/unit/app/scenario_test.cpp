#include <gtest/gtest.h>

#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::app {
namespace {

const PresetLocator kPresets{FSDPSIM_CONFIGS_DIR};

std::filesystem::path scenario_path(const std::string& relative) {
  return std::filesystem::path(FSDPSIM_SOURCE_DIR) / "scenarios" / relative;
}

fsdp::StepResult simulate(const Scenario& s) { return simulate_scenario(s, false).result; }

TEST(ApplyOverride, SetsNestedKeysAndParsesJsonValues) {
  nlohmann::json doc = {{"fsdp", {{"limit_all_gathers", true}}}, {"model", "gpt-175b"}};
  apply_override(doc, "fsdp.limit_all_gathers=false");
  apply_override(doc, "training.micro_batch=2");
  apply_override(doc, "fsdp.backward_prefetch=none");
  apply_override(doc, "model.n_layers=4");
  EXPECT_EQ(doc["fsdp"]["limit_all_gathers"], false);
  EXPECT_EQ(doc["training"]["micro_batch"], 2);
  EXPECT_EQ(doc["fsdp"]["backward_prefetch"], "none");
  EXPECT_EQ(doc["model"]["preset"], "gpt-175b");  // a preset name becomes {"preset": ...}
  EXPECT_EQ(doc["model"]["n_layers"], 4);
  EXPECT_THROW(apply_override(doc, "no_equals_sign"), ConfigError);
  // A section the file sets to null is not filled in (its other keys would default silently).
  nlohmann::json with_null = {{"fsdp", nullptr}};
  EXPECT_THROW(apply_override(with_null, "fsdp.limit_all_gathers=false"), ConfigError);
  EXPECT_THROW(apply_override(doc, "a..b=1"), ConfigError);
  // A key inside a value that is not an object: the message says where that value is.
  nlohmann::json listed = {{"training", nlohmann::json::array()}};
  try {
    apply_override(listed, "training.micro_batch=2");
    ADD_FAILURE() << "set a key inside an array";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--set \"training.micro_batch=2\": /training: expected an object to set "
              "\"micro_batch\" in, found an empty array");
  }
  // null removes the key, so that its default holds (a JSON merge patch's null).
  apply_override(doc, "fsdp.backward_prefetch=null");
  EXPECT_FALSE(doc["fsdp"].contains("backward_prefetch")) << doc.dump();
  apply_override(doc, "training.no_such_key=null");  // nothing to remove
  EXPECT_FALSE(doc["training"].contains("no_such_key")) << doc.dump();
  // Nor is a section created, or a preset name made an object, on the way to nothing.
  const nlohmann::json before = doc;
  apply_override(doc, "expect.mfu=null");
  apply_override(doc, "no_section.key=null");
  EXPECT_EQ(doc, before);
  nlohmann::json named = {{"model", "gpt-175b"}};
  apply_override(named, "model.n_layers=null");
  EXPECT_EQ(named["model"], "gpt-175b");
  // Under expect, a result's dotted path is one key of the block, with a bound or not.
  nlohmann::json gated = nlohmann::json::object();
  apply_override(gated, "expect.breakdown.idle_s.max=0.5");
  apply_override(gated, "expect.mfu.min=0.3");
  apply_override(gated, R"(expect.breakdown.exposed_communication_s={"max": 0.1})");
  apply_override(gated, "expect.tolerance=0.1");
  EXPECT_EQ(gated, nlohmann::json::parse(R"({"expect": {"breakdown.idle_s": {"max": 0.5},
      "mfu": {"min": 0.3}, "breakdown.exposed_communication_s": {"max": 0.1},
      "tolerance": 0.1}})"));
  // A sweep block's keys are scenario keys, dotted too.
  apply_override(gated, "sweep.training.micro_batch=[1, 2]");
  EXPECT_EQ(gated["sweep"], nlohmann::json::parse(R"({"training.micro_batch": [1, 2]})"));
  // Paths name those keys whole; a bound one edit from min or max is refused, not taken for
  // part of the result key.
  EXPECT_EQ(json_path_of("expect.breakdown.idle_s.max"), "/expect/breakdown.idle_s/max");
  EXPECT_EQ(json_path_of("fsdp.backward_prefetch"), "/fsdp/backward_prefetch");
  EXPECT_EQ(json_path_of("sweep.training.micro_batch"), "/sweep/training.micro_batch");
  try {
    apply_override(gated, "expect.breakdown.idle_s.mx=1");
    ADD_FAILURE() << "a misspelt bound was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ends in \"mx\", not a bound; did you mean max?"),
              std::string::npos)
        << e.what();
  }
}

TEST(DidYouMean, SuggestsCloseKeysOnly) {
  EXPECT_EQ(did_you_mean("sharding_stratgy", {"sharding_strategy", "backward_prefetch"}),
            "sharding_strategy");
  EXPECT_EQ(did_you_mean("zzz", {"sharding_strategy"}), "");
  // A shortened name is suggested when one key alone contains it as whole words.
  EXPECT_EQ(did_you_mean("sharding", {"sharding_strategy", "backward_prefetch"}),
            "sharding_strategy");
  EXPECT_EQ(did_you_mean("prefetch", {"backward_prefetch", "forward_prefetch"}), "");
  EXPECT_EQ(did_you_mean("shard", {"sharding_strategy"}), "");
  // Its words in any case and order, separated by '_', '-' or spaces; a whole-word match wins
  // over two edits, not over one.
  const std::vector<std::string> gpus = {"a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm-80gb"};
  EXPECT_EQ(did_you_mean("H100", gpus), "h100-sxm-80gb");
  EXPECT_EQ(did_you_mean("A100 80GB", gpus), "a100-sxm-80gb");
  EXPECT_EQ(did_you_mean("80gb-h100", gpus), "h100-sxm-80gb");
  EXPECT_EQ(did_you_mean("A100", gpus), "");  // two of them
  EXPECT_EQ(did_you_mean("mfu", {"gpu", "measured_mfu", "notes"}), "measured_mfu");
  EXPECT_EQ(did_you_mean("nodes", {"gpus_per_node", "notes"}), "notes");
  EXPECT_EQ(did_you_mean("llama-3-8b", {"llama-2-7b", "llama-3.1-8b", "llama-3.1-70b"}),
            "llama-3.1-8b");
}

// A key of a nested object given one level up is pointed to where it belongs.
TEST(DidYouMean, AnUnknownKeyOfOneChildObjectNamesIt) {
  const auto message = [](const nlohmann::json& object) {
    JsonObjectReader r(object, "h.json", "/hardware");
    static_cast<void>(r.child("node"));
    static_cast<void>(r.child("gpu"));
    r.ignore("sources");
    try {
      r.finish();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // A preset's "sources" documents every key: it is not where a key belongs.
  EXPECT_EQ(message({{"node", {{"gpus_per_node", 8}}},
                     {"gpu", {{"sm_count", 132}}},
                     {"sources", {{"gpus_per_node", "DGX H100"}}},
                     {"gpus_per_node", 4}}),
            "h.json: /hardware/gpus_per_node: unknown key; did you mean node.gpus_per_node?");
  // Nothing close: the keys the object takes are listed, its documentation ("sources") left out.
  EXPECT_EQ(message({{"node", {{"name", 8}}}, {"gpu", {{"name", 132}}}, {"label", 4}}),
            "h.json: /hardware/label: unknown key; the keys here are gpu, node");
}

// A key holding '/' or '~' is one reference token of the path (RFC 6901: "~1" and "~0"), not
// two levels: "/fsdp/a/b" would name a key b inside a.
TEST(JsonPointer, AnUnknownKeyWithASlashOrTildeIsEscaped) {
  const nlohmann::json object = {{"a/b~c", 1}};
  JsonObjectReader r(object, "s.json", "/fsdp");
  try {
    r.finish();
    FAIL() << "an unknown key was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "s.json: /fsdp/a~1b~0c: unknown key");
  }
  EXPECT_EQ(pointer_token("plain_key"), "plain_key");
  EXPECT_EQ(pointer_token("~/"), "~0~1");
}

// An unknown key far longer than any fsdpsim reads is shown cut, with its length, and is not
// compared with the known keys for a hint (a 50 MB key took 13 s and printed 50 MB).
TEST(JsonPointer, AHugeUnknownKeyIsShownCut) {
  const nlohmann::json object = {{std::string(1000000, 'k'), 1}};
  JsonObjectReader r(object, "s.json", "/fsdp");
  try {
    r.finish();
    FAIL() << "an unknown key was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "s.json: /fsdp/" + std::string(80, 'k') + "...: unknown key (1000000 bytes long)");
  }
}

TEST(Scenario, DefaultScenarioLoadsWithPaperSettings) {
  const Scenario s = load_scenario(scenario_path("paper/gpt175b_128xa100_bs1.json"), {}, kPresets);
  EXPECT_EQ(s.hardware.cluster.world_size(), 128);
  EXPECT_EQ(s.model.n_layers, 96);
  EXPECT_EQ(s.fsdp.backward_prefetch, fsdp::BackwardPrefetch::kBackwardPre);
  EXPECT_TRUE(s.fsdp.limit_all_gathers);
  EXPECT_EQ(s.training.activation_checkpointing, fsdp::ActivationCheckpointing::kFull);
}

// --set KEY=null on a key the scenario does not hold removes nothing: fine for a known key (its
// default holds anyway), a silent no-op for a misspelt one, which is refused as a set would be.
TEST(Scenario, RemovingAnUnknownKeyIsRefused) {
  const auto file = scenario_path("paper/gpt175b_128xa100_bs1.json");
  const Scenario kept = load_scenario(file, {"fsdp.forward_prefetch=null"}, kPresets);
  EXPECT_EQ(kept.model.n_layers, 96);
  (void)load_scenario(file, {"model.n_layers=null", "training.decoder_seq_len=null"}, kPresets);
  for (const std::string typo : {"fsdp.forwrd_prefetch=null", "no_section.key=null"}) {
    try {
      (void)load_scenario(file, {typo}, kPresets);
      ADD_FAILURE() << typo << " was accepted";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--set \"" + typo + "\": nothing to remove"), std::string::npos) << what;
      EXPECT_NE(what.find("unknown key"), std::string::npos) << what;
    }
  }
  // A key that is there, unknown or not, is removed: from the file, or set by an earlier --set.
  nlohmann::json stale = read_json_file(file);
  stale["fsdp"]["bogus"] = 1;
  EXPECT_EQ(scenario_from_json(stale, file, {"fsdp.bogus=null"}, kPresets).model.n_layers, 96);
  (void)load_scenario(file, {"fsdp.limit_all_gathers=true", "fsdp.limit_all_gathers=null"},
                      kPresets);
  // Inside a value that is not an object, no key is there to remove.
  try {
    (void)load_scenario(file, {"training.micro_batch.x=null"}, kPresets);
    ADD_FAILURE() << "training.micro_batch.x=null was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--set \"training.micro_batch.x=null\": nothing to remove, and "
              "training.micro_batch.x is not a scenario key (it is inside a value that is not an "
              "object)");
  }
  try {
    (void)load_scenario(file, {"fsdp.forwrd_prefetch=null"}, kPresets);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean forward_prefetch?"), std::string::npos)
        << e.what();
  }
}

// Sanity bar of the foundation issue: the paper's GPT-175B on 128 A100-80GB reaches "more than
// 173" (batch 1) and 186 (batch 2) TFLOPS/GPU counting recompute (FSDP paper Sec. 5.4, Fig. 7b).
// The simulation must land within 20 % of both. Tighter accuracy is validated in reports/.
TEST(PaperSanity, Gpt175bOn128A100WithinTwentyPercentOfThePaper) {
  const fsdp::StepResult bs1 =
      simulate(load_scenario(scenario_path("paper/gpt175b_128xa100_bs1.json"), {}, kPresets));
  const fsdp::StepResult bs2 =
      simulate(load_scenario(scenario_path("paper/gpt175b_128xa100_bs2.json"), {}, kPresets));
  EXPECT_NEAR(bs1.hardware_tflops_per_gpu, 173.0, 0.2 * 173.0);
  EXPECT_NEAR(bs2.hardware_tflops_per_gpu, 186.0, 0.2 * 186.0);
  EXPECT_FALSE(bs1.out_of_memory);
  EXPECT_FALSE(bs2.out_of_memory);
  EXPECT_GT(bs2.hardware_tflops_per_gpu, bs1.hardware_tflops_per_gpu);  // as in the paper
}

// FSDP paper Fig. 6b: backward prefetch is "approximately 18%" faster on GPT-175B. The effect
// must come out of the stream and communicator semantics (no constant was set from it).
TEST(PaperSanity, BackwardPrefetchSpeedupOnGpt175bIsAboutEighteenPercent) {
  const fsdp::StepResult pre =
      simulate(load_scenario(scenario_path("paper/gpt175b_128xa100_bs1.json"), {}, kPresets));
  const fsdp::StepResult none = simulate(
      load_scenario(scenario_path("paper/gpt175b_128xa100_bs1_no_prefetch.json"), {}, kPresets));
  const double speedup = none.step_time.value() / pre.step_time.value() - 1.0;
  EXPECT_NEAR(speedup, 0.18, 0.05);
}

TEST(Scenario, AllowTf32MovesFp32GemmsToTheTf32PeakAndMfuWithThem) {
  const std::vector<std::string> fp32 = {"fsdp.param_dtype=\"fp32\"", "fsdp.reduce_dtype=\"fp32\""};
  std::vector<std::string> tf32 = fp32;
  tf32.emplace_back("training.allow_tf32=true");
  const fsdp::StepResult plain =
      simulate(load_scenario(scenario_path("paper/t5_11b_8xa100.json"), fp32, kPresets));
  const fsdp::StepResult fast =
      simulate(load_scenario(scenario_path("paper/t5_11b_8xa100.json"), tf32, kPresets));
  EXPECT_LT(fast.step_time.value(), plain.step_time.value() / 2.0);  // 156 vs 19.5 TFLOP/s
  // MFU is against the peak the GEMMs run at: A100 fp32 19.5, TF32 156 TFLOP/s.
  EXPECT_NEAR(plain.mfu * 19.5, plain.model_tflops_per_gpu, 1e-6);
  EXPECT_NEAR(fast.mfu * 156.0, fast.model_tflops_per_gpu, 1e-6);
  // No effect on bf16 compute.
  const fsdp::StepResult bf16 = simulate(load_scenario(scenario_path("paper/t5_11b_8xa100.json"),
                                                       {"training.allow_tf32=true"}, kPresets));
  const fsdp::StepResult bf16_plain =
      simulate(load_scenario(scenario_path("paper/t5_11b_8xa100.json"), {}, kPresets));
  EXPECT_EQ(bf16.step_time.value(), bf16_plain.step_time.value());
}

TEST(Scenario, EveryShippedScenarioLoadsAndRuns) {
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(FSDPSIM_SOURCE_DIR "/scenarios")) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    const Scenario s = load_scenario(entry.path(), {}, kPresets);
    const fsdp::StepResult r = simulate(s);
    EXPECT_GT(r.step_time.value(), 0.0);
    EXPECT_GT(r.mfu, 0.0);
    EXPECT_LT(r.mfu, 1.0);
  }
}

}  // namespace
}  // namespace fsdpsim::app
