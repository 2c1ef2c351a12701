// custom: a user-listed layer list turned into layers whose kernels, memory and parameters follow
// the per-sample numbers exactly, and the paper's vision/recsys presets.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "models/workload.hpp"
#include "sim/app/model_json.hpp"
#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

TransformerSpec preset(const std::string& name) {
  const app::PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  return app::model_from_json(nlohmann::json(name), std::filesystem::path("test.json"), "/model",
                              presets);
}

// A stem left to the root unit, then three identical wrapped stages.
TransformerSpec tiny_custom() {
  TransformerSpec s;
  s.name = "tiny-custom";
  s.family = ModelFamily::kCustom;
  CustomLayerSpec stem;
  stem.name = "stem";
  stem.params = 10;
  stem.parameter_tensors = 1;
  stem.forward_flops_per_sample = 100.0;
  stem.backward_flops_per_sample = 200.0;
  stem.saved_activation_bytes_per_sample = 7;
  stem.output_bytes_per_sample = 30;
  stem.kernels = 1;
  stem.fsdp_unit = false;
  CustomLayerSpec stage;
  stage.name = "stage";
  stage.count = 3;
  stage.params = 1000;
  stage.parameter_tensors = 2;
  stage.forward_flops_per_sample = 1e6;
  stage.backward_flops_per_sample = 2e6;
  stage.memory_bytes_per_sample = 101;
  stage.saved_activation_bytes_per_sample = 50;
  stage.output_bytes_per_sample = 20;
  stage.transient_bytes_per_sample = 5;
  stage.kernels = 3;
  s.custom_layers = {stem, stage};
  return s;
}

TEST(CustomWorkload, RepeatsEntriesAndWrapsOnlyFsdpUnits) {
  const Workload w = build_workload(tiny_custom(), testing::options(4, 1));
  ASSERT_EQ(w.layers.size(), 4u);
  EXPECT_EQ(w.layers[0].name, "stem");
  EXPECT_EQ(w.layers[0].kind, LayerKind::kUnwrapped);
  EXPECT_EQ(w.layers[1].name, "stage.0");
  EXPECT_EQ(w.layers[3].name, "stage.2");
  EXPECT_EQ(w.layers[3].kind, LayerKind::kBlock);
  EXPECT_EQ(w.total_numel, 3010);
  EXPECT_EQ(parameter_count(tiny_custom()), 3010);
  EXPECT_EQ(w.layers[2].parameter_tensors, 2);
  EXPECT_EQ(block_count(tiny_custom()), 3);  // the three stages; the stem is left to the root
}

TEST(CustomWorkload, PerSampleNumbersScaleWithTheMicroBatchNotTheSequence) {
  // micro-batch 4, seq_len 7: only the 4 samples count.
  const Workload w = build_workload(tiny_custom(), testing::options(4, 7));
  const Layer& stage = w.layers[1];
  // 3 forward launches: 2 GEMM-class kernels sharing 4e6 FLOPs, 1 memory-bound with 404 bytes.
  ASSERT_EQ(stage.forward.size(), 3u);
  EXPECT_EQ(stage.forward[0].kernel.kind, KernelKind::kGemm);
  EXPECT_DOUBLE_EQ(stage.forward[0].kernel.flops.value(), 2e6);
  EXPECT_EQ(stage.forward[0].kernel.gemm.m, 0);  // unknown shape: no tile quantization
  EXPECT_EQ(stage.forward[2].kernel.kind, KernelKind::kMemoryBound);
  EXPECT_EQ(stage.forward[2].kernel.bytes.value(), 404);
  // Backward: 6 launches, 3 + 3, 8e6 FLOPs and twice the bytes (the remainder on the first).
  ASSERT_EQ(stage.backward.size(), 6u);
  EXPECT_DOUBLE_EQ(testing::total_flops(stage.backward), 8e6);
  EXPECT_EQ(stage.backward[3].kernel.bytes.value(), 270);
  EXPECT_EQ(stage.backward[4].kernel.bytes.value(), 269);
  EXPECT_EQ(stage.saved_activations.value(), 200);
  EXPECT_EQ(stage.forward_transient_peak().value(), 20);
  EXPECT_EQ(stage.backward_transient_peak().value(), 20);
  // Checkpointing keeps the input: the stem's output for the first stage, a stage's after.
  EXPECT_EQ(w.layers[1].saved_activations_checkpointed.value(), 120);
  EXPECT_EQ(w.layers[2].saved_activations_checkpointed.value(), 80);
  // A stem with FLOPs only runs compute launches; it is never checkpointed.
  ASSERT_EQ(w.layers[0].forward.size(), 1u);
  EXPECT_DOUBLE_EQ(w.layers[0].forward[0].kernel.flops.value(), 400.0);
  EXPECT_EQ(w.layers[0].saved_activations_checkpointed, w.layers[0].saved_activations);
}

TEST(CustomSpec, ValidationNamesTheEntry) {
  TransformerSpec s = tiny_custom();
  s.custom_layers[1].count = 0;
  EXPECT_NE(validate(s).find("layers/1/count"), std::string::npos);
  s = tiny_custom();
  s.custom_layers[0].parameter_tensors = 0;
  EXPECT_NE(validate(s).find("layers/0/parameter_tensors"), std::string::npos);
  s.custom_layers.clear();
  EXPECT_NE(validate(s), "");
}

TEST(CustomPresets, PaperModelsHaveTheirNominalSizes) {
  // FSDP paper (Zhao et al. 2023) Sec. 5: RegNet 9B, DeepViT 8B, DHEN 550M dense parameters.
  EXPECT_NEAR(static_cast<double>(parameter_count(preset("regnet-9b"))), 9e9, 0.5e9);
  EXPECT_NEAR(static_cast<double>(parameter_count(preset("deepvit-8b"))), 8e9, 0.25e9);
  EXPECT_NEAR(static_cast<double>(parameter_count(preset("dhen-dense-550m"))), 550e6, 1e6);
  for (const char* name : {"regnet-9b", "deepvit-8b", "dhen-dense-550m"}) {
    const Workload w = build_workload(preset(name), testing::options(2, 1));
    EXPECT_EQ(w.total_numel, parameter_count(preset(name))) << name;
    EXPECT_EQ(w.layers.front().kind, LayerKind::kUnwrapped) << name;
    EXPECT_EQ(w.layers.back().kind, LayerKind::kUnwrapped) << name;
  }
}

}  // namespace
}  // namespace fsdpsim::models
