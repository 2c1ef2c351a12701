#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "models/workload.hpp"
#include "test_specs.hpp"
#include "validation_cases.hpp"

namespace fsdpsim::models {
namespace {

using testing::make_spec;
using testing::mpt_spec;

// MPT NumParams printed by llm-foundry's benchmarking README (configs/validation/cases.csv notes).
TEST(ParameterCount, Mpt70bMatchesLlmFoundryNumParams) {
  // case lf-h100-mpt70b-s2048-g256-mb8-ac1-1: NumParams=64862437376
  EXPECT_EQ(parameter_count(mpt_spec(80, 8192, 64, 50368, 2048)), 64862437376);
}

TEST(ParameterCount, MptMatchesLlmFoundryNumParamsAcrossSizesAndPositionTables) {
  // case lf-h100-mpt7b-s2048-g512-mb6-ac0-1
  EXPECT_EQ(parameter_count(mpt_spec(32, 4096, 32, 50368, 2048)), 6658859008);
  // case lf-a10080-mpt125m-s65536-g8-mb1-ac0-1 (position table of 65536 rows)
  EXPECT_EQ(parameter_count(mpt_spec(12, 768, 12, 50368, 65536)), 174070272);
  // case lf-h100-mpt30b-s8192-g8-mb1-ac1-1
  EXPECT_EQ(parameter_count(mpt_spec(48, 7168, 56, 50368, 8192)), 30019254272);
}

TEST(ParameterCount, EveryMptRowOfTheValidationCasesMatchesItsNumParams) {
  int checked = 0;
  for (const testing::CsvRow& row : testing::read_validation_cases()) {
    if (row.at("model_family") != "mpt") continue;
    const long long expected = testing::num_params_from_notes(row);
    ASSERT_GT(expected, 0) << row.at("case_id");
    // llm-foundry sizes the learned position table with max_seq_len = the run's seq_len.
    const TransformerSpec spec = make_spec(
        ModelFamily::kMpt, std::stoll(row.at("n_layers")), std::stoll(row.at("d_model")),
        std::stoll(row.at("n_heads")), std::stoll(row.at("n_kv_heads")),
        std::stoll(row.at("ffn_dim")), std::stoll(row.at("vocab")), std::stoll(row.at("seq_len")));
    EXPECT_EQ(parameter_count(spec), expected) << row.at("case_id");
    ++checked;
  }
  EXPECT_GT(checked, 400);
}

TEST(ParameterCount, MptFollowsTheReadmeClosedForm) {
  // configs/validation/README.md: P = 12*L*d^2 + 13*L*d + 2*d + V*d + s*d.
  const std::int64_t l = 24, d = 1536, v = 50368, s = 2048;
  EXPECT_EQ(parameter_count(mpt_spec(l, d, 12, v, s)),
            12 * l * d * d + 13 * l * d + 2 * d + v * d + s * d);
}

TEST(ParameterCount, LlamaMatchesMetaOfficialCounts) {
  EXPECT_EQ(parameter_count(testing::llama_3_1_8b()), 8030261248);
  EXPECT_EQ(parameter_count(make_spec(ModelFamily::kLlama, 80, 8192, 64, 8, 28672, 128256, 131072)),
            70553706496);
  EXPECT_EQ(
      parameter_count(make_spec(ModelFamily::kLlama, 126, 16384, 128, 8, 53248, 128256, 131072)),
      405853388800);
  EXPECT_EQ(parameter_count(make_spec(ModelFamily::kLlama, 32, 4096, 32, 32, 11008, 32000, 4096)),
            6738415616);
  EXPECT_EQ(parameter_count(make_spec(ModelFamily::kLlama, 40, 5120, 40, 40, 13824, 32000, 4096)),
            13015864320);
  EXPECT_EQ(parameter_count(make_spec(ModelFamily::kLlama, 80, 8192, 64, 8, 28672, 32000, 4096)),
            68976648192);
}

TEST(ParameterCount, LlamaRowsOfTheValidationCasesMatchTheirRoundedParamsB) {
  int checked = 0;
  for (const testing::CsvRow& row : testing::read_validation_cases()) {
    if (row.at("model_family") != "llama") continue;
    const TransformerSpec spec = make_spec(
        ModelFamily::kLlama, std::stoll(row.at("n_layers")), std::stoll(row.at("d_model")),
        std::stoll(row.at("n_heads")), std::stoll(row.at("n_kv_heads")),
        std::stoll(row.at("ffn_dim")), std::stoll(row.at("vocab")), std::stoll(row.at("seq_len")));
    const double billions = static_cast<double>(parameter_count(spec)) * 1e-9;
    EXPECT_NEAR(billions, std::stod(row.at("params_b")), 0.005) << row.at("case_id");
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(ParameterCount, GptBlockIs12DSquaredPlus13DWithFfn4D) {
  const TransformerSpec one = make_spec(ModelFamily::kGpt, 1, 256, 8, 8, 1024, 1000, 128);
  const TransformerSpec two = make_spec(ModelFamily::kGpt, 2, 256, 8, 8, 1024, 1000, 128);
  EXPECT_EQ(parameter_count(two) - parameter_count(one), 12 * 256 * 256 + 13 * 256);
}

TEST(ParameterCount, GptCountsUntiedHeadAndLearnedPositions) {
  // 96 * (12d^2 + 13d) + 2d (final LayerNorm) + V*d (embedding) + V*d (head) + s*d (positions).
  const std::int64_t d = 12288, v = 50000, s = 2048;
  const TransformerSpec gpt175 = make_spec(ModelFamily::kGpt, 96, d, 96, 96, 4 * d, v, s);
  EXPECT_EQ(parameter_count(gpt175), 96 * (12 * d * d + 13 * d) + 2 * d + 2 * v * d + s * d);
  EXPECT_EQ(parameter_count(gpt175), 175215501312);
}

TEST(ParameterCount, EqualsTheSumOfLayerNumelsAndCountsATiedWeightOnce) {
  const TransformerSpec spec = mpt_spec(4, 512, 8, 50368, 2048);
  const Workload w = build_workload(spec, testing::options(1, 128));
  EXPECT_EQ(w.total_numel, parameter_count(spec));
  std::int64_t sum = 0;
  for (const Layer& layer : w.layers) sum += layer.numel;
  EXPECT_EQ(sum, w.total_numel);
  EXPECT_EQ(w.layers.front().numel, (50368 + 2048) * 512);  // embedding owns the tied weight
  EXPECT_EQ(w.layers.back().numel, 2 * 512);                // head: final LayerNorm only
}

}  // namespace
}  // namespace fsdpsim::models
