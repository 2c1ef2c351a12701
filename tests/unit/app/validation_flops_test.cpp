// The FLOP counts fsdpsim applies to each source's rows (sim/app/validation_flops.hpp), checked
// against what the rows print: tokens/s under the count must give the row's MFU and HFU. This
// pins the parameter counts of the model families too (6N in the llm-foundry count).
#include "sim/app/validation_flops.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/app/preset_paths.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/validation_cases.hpp"

namespace fsdpsim::app {
namespace {

const std::string kCases = std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv";
const PresetLocator kPresets{FSDPSIM_CONFIGS_DIR};

TEST(ValidationFlops, EveryPublishedRowsTokensGiveTheUtilizationItPrints) {
  int mfu_rows = 0;
  int hfu_rows = 0;
  for (const ValidationCase& c : read_validation_cases(kCases)) {
    const auto tokens = c.number("measured_tokens_per_s_per_gpu");
    if (!tokens) continue;
    const CaseScenario built = scenario_for_case(c, kCases);
    if (built.document.is_null()) continue;
    const FlopDefinition d =
        flop_definition(c, scenario_from_json(built.document, kCases, {}, kPresets));
    if (const auto printed = c.number("measured_mfu")) {
      EXPECT_NEAR(mfu(d, *tokens) / *printed, 1.0, 0.005) << c.get("case_id");
      ++mfu_rows;
    }
    if (const auto printed = c.number("measured_hfu")) {
      EXPECT_NEAR(hfu(d, *tokens) / *printed, 1.0, 0.005) << c.get("case_id");
      ++hfu_rows;
    }
  }
  EXPECT_EQ(mfu_rows, 452);
  EXPECT_EQ(hfu_rows, 449);
}

// fms-fsdp's HFU counts the recompute its checkpointing runs (PyTorch's FLOP counter): nothing for
// the 7B rows, half the blocks' forward for the 13B rows (every 2nd block: 7/6 of the MFU's
// count), every block's for the 34B and 70B rows (4/3). The printed HFU over the printed MFU
// agrees within the two digits they are printed to.
TEST(ValidationFlops, FmsFsdpHardwareFlopsCountTheBlocksItRecomputes) {
  const std::string cases = std::string(FSDPSIM_CONFIGS_DIR) + "/validation/fms-fsdp/cases.csv";
  int rows = 0;
  for (const ValidationCase& c : read_validation_cases(cases)) {
    const CaseScenario built = scenario_for_case(c, cases);
    ASSERT_FALSE(built.document.is_null()) << built.skip_reason;
    const FlopDefinition d =
        flop_definition(c, scenario_from_json(built.document, cases, {}, kPresets));
    const std::string& ac = c.get("act_ckpt");
    const double expected = ac == "full" ? 4.0 / 3.0 : ac == "selective" ? 7.0 / 6.0 : 1.0;
    EXPECT_DOUBLE_EQ(d.hardware_per_token / d.model_per_token, expected) << c.get("case_id");
    EXPECT_NEAR(*c.number("measured_hfu") / *c.number("measured_mfu") / expected, 1.0, 0.04)
        << c.get("case_id");
    ++rows;
  }
  EXPECT_EQ(rows, 8);
}

// torchtitan's MFU of April 2024 (train.py and utils.py @1ea476e): wps x (6N + 12 L H Q T) /
// 312e12, N every parameter, the embedding and output included. Llama 3 8B at 8192 tokens:
// 6 x 8,030,261,248 + 12 x 32 x 4096 x 8192 = 61.07 GFLOP per token; each printed MFU is its
// printed wps under that count, to the digit it is printed to.
TEST(ValidationFlops, TorchtitanMfuCountsEveryParameter) {
  const std::string cases = std::string(FSDPSIM_CONFIGS_DIR) + "/validation/torchtitan/cases.csv";
  int rows = 0;
  for (const ValidationCase& c : read_validation_cases(cases)) {
    if (c.get("measured_mfu").empty()) continue;
    const CaseScenario built = scenario_for_case(c, cases);
    ASSERT_FALSE(built.document.is_null()) << built.skip_reason;
    const FlopDefinition d =
        flop_definition(c, scenario_from_json(built.document, cases, {}, kPresets));
    if (c.get("case_id") == "tt-a10080-llama3-8b-s8192-g64-mb1-acs-1") {
      EXPECT_DOUBLE_EQ(d.model_per_token, 6.0 * 8'030'261'248.0 + 12.0 * 32 * 4096 * 8192);
    }
    EXPECT_NEAR(mfu(d, *c.number("measured_tokens_per_s_per_gpu")), *c.number("measured_mfu"),
                0.0005)
        << c.get("case_id");
    ++rows;
  }
  EXPECT_EQ(rows, 8);
}

TEST(ValidationFlops, TflopsAndUtilizationShareOneCount) {
  const FlopDefinition d{6.0e9, 8.0e9, 312.0};  // 1B-parameter-like count, A100 peak
  EXPECT_DOUBLE_EQ(model_tflops(d, 1000.0), 6.0);
  EXPECT_DOUBLE_EQ(hardware_tflops(d, 1000.0), 8.0);
  EXPECT_DOUBLE_EQ(mfu(d, 1000.0), 6.0 / 312.0);
  EXPECT_DOUBLE_EQ(hfu(d, 1000.0), 8.0 / 312.0);
}

}  // namespace
}  // namespace fsdpsim::app
