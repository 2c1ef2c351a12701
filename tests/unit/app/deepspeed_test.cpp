// parallelism deepspeed_zero3 as users reach it: scenario JSON (the `deepspeed` section, what it
// rejects), `fsdpsim run`, and the validation CSV's runtime column.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/app/scenario.hpp"
#include "test_support.hpp"

namespace fsdpsim::app {
namespace {

using test_support::run_fsdpsim;

const PresetLocator kPresets{FSDPSIM_CONFIGS_DIR};
const std::string kShipped =
    std::string(FSDPSIM_SOURCE_DIR) + "/scenarios/deepspeed/gpt175b_384xa100.json";

nlohmann::json scenario() {
  return {{"schema_version", 1},
          {"parallelism", "deepspeed_zero3"},
          {"model", "gpt-175b"},
          {"hardware", {{"preset", "a100-sxm-80gb"}, {"nodes", 2}}},
          {"training", {{"global_batch", 16}, {"micro_batch", 1}, {"seq_len", 2048}}},
          {"fsdp", {{"param_dtype", "fp16"}}}};
}

// The error message, or "accepted".
std::string error_of(const nlohmann::json& patch) {
  nlohmann::json document = scenario();
  document.merge_patch(patch);
  return test_support::scenario_error(document, "ds.json", kPresets);
}

TEST(DeepSpeedJson, ReadsTheZeroOptimizationKeysWithDeepSpeedsDefaults) {
  const Scenario s = scenario_from_json(scenario(), "ds.json", {}, kPresets);
  EXPECT_EQ(s.training.parallelism, fsdp::Parallelism::kDeepSpeedZero3);
  EXPECT_EQ(s.fsdp.param_dtype, Dtype::kFp16);
  EXPECT_EQ(s.fsdp.reduce_dtype, Dtype::kFp16);
  EXPECT_EQ(s.fsdp.deepspeed.param_persistence_threshold, 100'000);
  EXPECT_EQ(s.fsdp.deepspeed.reduce_bucket_size, 500'000'000);
  EXPECT_FALSE(s.fsdp.deepspeed.register_external_embedding);
  EXPECT_FALSE(s.fsdp.deepspeed.contiguous_gradients);
  nlohmann::json tuned = scenario();
  tuned["model"] = {{"preset", "gpt-175b"}, {"tied_embeddings", true}};
  tuned["deepspeed"] = {{"stage3_prefetch_bucket_size", 1000},
                        {"stage3_max_reuse_distance", 5},
                        {"register_external_embedding", true},
                        {"contiguous_gradients", true}};
  const Scenario t = scenario_from_json(tuned, "ds.json", {}, kPresets);
  EXPECT_EQ(t.fsdp.deepspeed.prefetch_bucket_size, 1000);
  EXPECT_EQ(t.fsdp.deepspeed.max_reuse_distance, 5);
  EXPECT_TRUE(t.fsdp.deepspeed.register_external_embedding);
  EXPECT_TRUE(t.fsdp.deepspeed.contiguous_gradients);
}

TEST(DeepSpeedJson, RejectsWhatItDoesNotModelWithFileAndPath) {
  EXPECT_EQ(error_of({{"parallelism", "fsdp"}, {"deepspeed", {{"version", "0.3"}}}}),
            "ds.json: /deepspeed: the deepspeed section needs \"parallelism\": "
            "\"deepspeed_zero3\"");
  EXPECT_EQ(error_of({{"fsdp", {{"sharding_strategy", "FULL_SHARD"}}}})
                .rfind("ds.json: /fsdp/sharding_strategy: has no meaning with parallelism "
                       "deepspeed_zero3",
                       0),
            0u);
  EXPECT_EQ(error_of({{"deepspeed", {{"version", "0.9"}}}}).rfind("ds.json: /deepspeed/version", 0),
            0u);
  EXPECT_EQ(error_of({{"deepspeed", {{"stage3_max_live_parameters", 0}}}})
                .rfind("ds.json: /deepspeed/stage3_max_live_parameters", 0),
            0u);
  // Element counts are bounded so that their buckets' bytes fit 64 bits (2^63 - 1 elements made a
  // negative byte count and an internal error).
  for (const char* key : {"reduce_bucket_size", "stage3_prefetch_bucket_size",
                          "stage3_param_persistence_threshold"}) {
    EXPECT_EQ(error_of({{"deepspeed",
                         {{key, std::numeric_limits<std::int64_t>::max()},
                          {"contiguous_gradients", true}}}})
                  .rfind(fmt::format("ds.json: /deepspeed/{}: expected a positive integer of "
                                     "at most 1125899906842624",
                                     key),
                         0),
              0u)
        << key;
  }
  EXPECT_EQ(error_of({{"fsdp", {{"param_dtype", "fp32"}}}}).rfind("ds.json: /fsdp:", 0), 0u);
  EXPECT_EQ(error_of({{"training", {{"no_sync", true}}}}).rfind("ds.json: /training/no_sync", 0),
            0u);
  // DeepSpeed takes the gradients' norm every step: the key would change nothing.
  for (const bool clip : {true, false}) {
    EXPECT_EQ(error_of({{"training", {{"clip_grad_norm", clip}}}})
                  .rfind("ds.json: /training/clip_grad_norm: changes nothing for parallelism "
                         "deepspeed_zero3",
                         0),
              0u);
  }
  // An untied head reads no embedding: registering it would change nothing.
  EXPECT_EQ(error_of({{"deepspeed", {{"register_external_embedding", true}}}}),
            "ds.json: /deepspeed/register_external_embedding: registers the token embedding that "
            "a tied LM head reuses; gpt-175b has an untied head (model key tied_embeddings), so "
            "there is nothing to register");
  EXPECT_EQ(error_of({{"training", {{"activation_checkpointing", "selective_op"}}}}),
            "ds.json: /training/activation_checkpointing: expected none, full, selective or "
            "attention with parallelism deepspeed_zero3, found selective_op: an op policy needs "
            "PyTorch's non-reentrant checkpoint, and DeepSpeed's is reentrant");
  // DeepSpeed 0.3 predates torch.compile; compiling would also have forced an early stop on its
  // reentrant checkpoint.
  EXPECT_EQ(error_of({{"training", {{"compiled", true}}}}),
            "ds.json: /training/compiled: not modelled for parallelism deepspeed_zero3: "
            "DeepSpeed 0.3 (2021) predates torch.compile (PyTorch 2.0, 2023)");
  // And float8 training.
  EXPECT_EQ(error_of({{"training", {{"matmul_dtype", "fp8"}}}}),
            "ds.json: /training/matmul_dtype: fp8 is not modelled for parallelism "
            "deepspeed_zero3: DeepSpeed 0.3 (2021) predates float8 training (Transformer "
            "Engine, 2022; torchao, 2024)");
}

TEST(DeepSpeedRun, SummaryNamesTheRuntimeAndItsSettings) {
  const auto [code, out] = run_fsdpsim("run " + kShipped);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("deepspeed  ZeRO-3 (DeepSpeed 0.3), fp16, persistence threshold 100000"),
            std::string::npos)
      << out;
}

// A runtime the validation CSV does not know names the line and column (which rows are
// DeepSpeed's: validate_test.cpp, OptionalColumnsReachTheScenario).
TEST(DeepSpeedValidation, AnUnknownRuntimeIsABadCell) {
  const auto [code, out] =
      run_fsdpsim("validate " + std::string(FSDPSIM_TEST_DATA_DIR) + "/validation/bad_runtime.csv");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column runtime: expected torch or deepspeed-0.3, found "
                     "\"deepspeed-9\""),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace fsdpsim::app
