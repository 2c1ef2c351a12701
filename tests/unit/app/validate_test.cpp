#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/app/config_error.hpp"
#include "sim/app/csv_records.hpp"
#include "sim/app/validation_cases.hpp"
#include "sim/app/validation_stats.hpp"
#include "test_support.hpp"

namespace fsdpsim::app {
namespace {

const std::string kData = std::string(FSDPSIM_TEST_DATA_DIR) + "/validation/";

using test_support::run_fsdpsim;
namespace fs = std::filesystem;

TEST(ValidationStats, MapeMedianAndMaxOfAbsolutePercentageErrors) {
  const ErrorSummary s = summarize_errors({100, 200, 400}, {110, 180, 400});
  EXPECT_EQ(s.count, 3);
  EXPECT_DOUBLE_EQ(s.mape, (0.1 + 0.1 + 0.0) / 3.0);
  EXPECT_DOUBLE_EQ(s.median_ape, 0.1);
  EXPECT_DOUBLE_EQ(s.max_ape, 0.1);
}

TEST(ValidationStats, MeanErrorKeepsTheSign) {
  // +10 %, -10 % and +40 %: a bias of +13.3 % where the MAPE is 20 %.
  const ErrorSummary s = summarize_errors({100, 200, 100}, {110, 180, 140});
  EXPECT_DOUBLE_EQ(s.mape, 0.6 / 3.0);
  EXPECT_NEAR(s.mean_error, 0.4 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(summarize_errors({}, {}).mean_error, 0.0);
}

TEST(ValidationStats, SpearmanUsesAverageRanks) {
  EXPECT_DOUBLE_EQ(*spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(*spearman({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0);
  EXPECT_NEAR(*spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 0.9486832980505138, 1e-12);
  EXPECT_FALSE(spearman({1}, {2}).has_value());
  // Equal measurements have no ranking to agree with: undefined, not 0.
  EXPECT_FALSE(spearman({2500, 2500}, {2400, 2600}).has_value());
  EXPECT_FALSE(spearman({1, 2, 3}, {7, 7, 7}).has_value());
}

TEST(ValidationCases, Fp8AndCompiledRowsBecomeScenarioKnobs) {
  const auto cases = read_validation_cases(kData + "small_cases.csv");
  ASSERT_EQ(cases.size(), 4u);
  int fp8 = 0;
  for (const ValidationCase& c : cases) {
    const CaseScenario s = scenario_for_case(c, kData + "small_cases.csv");
    ASSERT_FALSE(s.document.is_null()) << s.skip_reason;
    EXPECT_EQ(s.document["hardware"]["nodes"].get<int>() *
                  s.document["hardware"]["node"]["gpus_per_node"].get<int>(),
              std::stoi(c.get("gpus")));
    if (c.get("matmul_dtype") != "fp8") continue;
    ++fp8;
    EXPECT_EQ(s.document["training"]["matmul_dtype"], "fp8");
    EXPECT_FALSE(s.document["training"].contains("autocast_dtype"));
  }
  EXPECT_EQ(fp8, 1);
  const auto published =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  int compiled = 0;
  for (const ValidationCase& c : published) {
    if (c.get("compiled") != "true") continue;
    ++compiled;
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    ASSERT_FALSE(s.document.is_null()) << s.skip_reason;
    EXPECT_EQ(s.document["training"]["compiled"], true);
  }
  EXPECT_GT(compiled, 0);
}

TEST(ValidationCases, CompositionDefaultMixedPrecisionComputesUnderAutocast) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  for (const ValidationCase& c : cases) {
    if (c.get("param_dtype") != "fp32" || c.get("matmul_dtype") != "bf16") continue;
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    ASSERT_FALSE(s.document.is_null()) << s.skip_reason;
    EXPECT_EQ(s.document["training"]["autocast_dtype"], "bf16");
    return;
  }
  FAIL() << "no fp32-parameter, bf16-matmul row in the published cases";
}

TEST(ValidationCases, PrefetchAndLimiterColumnsReachTheFsdpSection) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  int composer_defaults = 0;
  for (const ValidationCase& c : cases) {
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    if (s.document.is_null()) continue;
    const nlohmann::json& f = s.document["fsdp"];
    if (c.get("backward_prefetch").empty()) {
      EXPECT_FALSE(f.contains("backward_prefetch")) << c.get("case_id");
      EXPECT_FALSE(f.contains("limit_all_gathers")) << c.get("case_id");
      continue;
    }
    EXPECT_EQ(f["backward_prefetch"], c.get("backward_prefetch")) << c.get("case_id");
    EXPECT_EQ(f["forward_prefetch"], c.get("forward_prefetch") == "true") << c.get("case_id");
    EXPECT_EQ(f["limit_all_gathers"], c.get("limit_all_gathers") == "true") << c.get("case_id");
    if (c.get("source") == "llm-foundry@fe973f0") {
      ++composer_defaults;  // Composer 0.13's defaults: BACKWARD_POST, no limiter
      EXPECT_EQ(f["backward_prefetch"], "BACKWARD_POST");
      EXPECT_EQ(f["limit_all_gathers"], false);
    }
  }
  EXPECT_GT(composer_defaults, 0);
}

// llm-foundry trains with Composer's DecoupledAdamW, a loop over the parameters
// (configs/validation/README.md, "The optimizer_impl column"); the other sources keep PyTorch's
// foreach default.
TEST(ValidationCases, LlmFoundryRowsRunComposersPerParameterAdamw) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  int llm_foundry = 0;
  int others = 0;
  for (const ValidationCase& c : cases) {
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    if (s.document.is_null()) continue;
    const nlohmann::json& t = s.document["training"];
    if (c.get("source").rfind("llm-foundry", 0) == 0) {
      ++llm_foundry;
      EXPECT_EQ(t.value("optimizer_impl", ""), "for_loop") << c.get("case_id");
    } else {
      ++others;
      EXPECT_FALSE(t.contains("optimizer_impl")) << c.get("case_id");
    }
  }
  EXPECT_EQ(llm_foundry, 449);
  EXPECT_GT(others, 0);
}

// The two files have CRLF line endings, as spreadsheets write them.
TEST(ValidationCases, Tf32MatmulsAreFp32WithAllowTf32) {
  const auto cases = read_validation_cases(kData + "tf32_case.csv");
  ASSERT_EQ(cases.size(), 1u);
  const CaseScenario s = scenario_for_case(cases[0], kData + "tf32_case.csv");
  ASSERT_FALSE(s.document.is_null()) << s.skip_reason;
  EXPECT_EQ(s.document["training"]["allow_tf32"], true);
  EXPECT_EQ(s.document["fsdp"]["param_dtype"], "fp32");
  EXPECT_FALSE(s.document["training"].contains("autocast_dtype"));
  EXPECT_FALSE(s.document["training"].contains("matmul_dtype"));
  // TF32 is a math mode of fp32: with bf16 parameters the row contradicts itself.
  const auto [code, out] = run_fsdpsim("validate " + kData + "tf32_bf16_params.csv");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column matmul_dtype"), std::string::npos) << out;
}

TEST(Validate, ReportsErrorsAsJsonWithTheDocumentedKeys) {
  const auto [code, out] = run_fsdpsim("validate " + kData + "small_cases.csv --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["evaluated"], 4);
  EXPECT_EQ(j["skipped"], 0);
  for (const char* key : {"tokens_per_s", "tflops", "mfu", "hfu", "peak_mem"}) {
    for (const char* stat : {"mape", "median_ape", "max_ape"})
      EXPECT_TRUE(j[key].contains(stat)) << key << stat;
  }
  EXPECT_TRUE(j["spearman"].is_object());
  EXPECT_EQ(j["mfu"]["count"], 4);
  EXPECT_EQ(j["hfu"]["count"], 4);
  EXPECT_EQ(j["tflops"]["count"], 4);  // the HEAD rows print model TFLOPS
}

// A cluster's own runs may have logged tokens/s alone: a file without the TFLOPS columns is
// validated on what it has, as the same rows with the columns are.
TEST(Validate, AFileOfTokensPerSecondAloneIsValidated) {
  const auto [code, out] = run_fsdpsim("validate " + kData + "tokens_only.csv --json -");
  ASSERT_EQ(code, 0) << out;
  const auto [full_code, full_out] = run_fsdpsim("validate " + kData + "small_cases.csv --json -");
  ASSERT_EQ(full_code, 0) << full_out;
  const nlohmann::json j = nlohmann::json::parse(out);
  const nlohmann::json full = nlohmann::json::parse(full_out);
  EXPECT_EQ(j["evaluated"], 4);
  EXPECT_EQ(j["tokens_per_s"], full["tokens_per_s"]);
  EXPECT_EQ(j["tflops"]["count"], 0);
}

// --md - puts the markdown alone on stdout (the summary line goes to stderr), so that
// `validate ... --md - > report.md` is the report.
TEST(Validate, MarkdownOnStdoutIsTheReportAlone) {
  // stderr to /dev/null; the runner's 2>&1 then applies to cat.
  const auto [code, out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --md - 2>/dev/null | cat");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.rfind("# ", 0), 0U) << out.substr(0, 200);
  EXPECT_EQ(out.find("validated 4 cases"), std::string::npos);
  EXPECT_NE(out.find("None: every row was simulated."), std::string::npos);
}

// MFU and HFU are the row's tokens/s through its source's FLOP count (validation_flops.hpp):
// a prediction's MFU error is its tokens/s error, once the count reproduces the printed MFU.
TEST(Validate, ComparesMfuAndHfuUnderTheRowsDefinition) {
  const auto [code, out] = run_fsdpsim("validate " + kData + "small_cases.csv --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["definition_check"]["mfu"]["count"], 4);
  EXPECT_EQ(j["definition_check"]["hfu"]["count"], 4);
  EXPECT_LT(j["definition_check"]["mfu"]["max_gap"].get<double>(), 0.002);
  EXPECT_LT(j["definition_check"]["hfu"]["max_gap"].get<double>(), 0.002);
  for (const nlohmann::json& c : j["cases"]) {
    const double tokens = c["predicted_tokens_per_s_per_gpu"].get<double>() /
                          c["measured_tokens_per_s_per_gpu"].get<double>();
    // The step times are the same tokens per step over each rate.
    ASSERT_TRUE(c.contains("step_time_s")) << c["case_id"];
    EXPECT_NEAR(
        c["step_time_s"]["measured"].get<double>() / c["step_time_s"]["predicted"].get<double>(),
        tokens, 1e-9 * tokens)
        << c["case_id"];
    for (const char* key : {"mfu", "hfu"}) {
      ASSERT_TRUE(c.contains(key)) << c["case_id"] << key;
      EXPECT_NEAR(c[key]["predicted"].get<double>() / c[key]["measured"].get<double>(), tokens,
                  0.002 * tokens)
          << c["case_id"] << key;
    }
    // With activation checkpointing the count adds the recompute: HFU = 4/3 MFU.
    const bool checkpointed = c["case_id"].get<std::string>().find("-ac1-") != std::string::npos;
    EXPECT_NEAR(c["hfu"]["predicted"].get<double>() / c["mfu"]["predicted"].get<double>(),
                checkpointed ? 4.0 / 3.0 : 1.0, 1e-9)
        << c["case_id"];
  }
  EXPECT_NEAR(j["mfu"]["mape"].get<double>(), j["tokens_per_s"]["mape"].get<double>(), 0.002);
  // lf-h100-mpt70b-s2048-g128-mb8-ac1-1: 1024 sequences of 2048 tokens on 128 GPUs at 1058
  // tokens/s/GPU.
  ASSERT_EQ(j["cases"][0]["case_id"], "lf-h100-mpt70b-s2048-g128-mb8-ac1-1");
  EXPECT_NEAR(j["cases"][0]["step_time_s"]["measured"].get<double>(), 1024.0 * 2048 / 128 / 1058,
              1e-9);
}

// A row whose printed MFU disagrees with its own tokens/s under its source's count shows up in
// the definition check (here the MFU cell of lf-a10080-mpt7b-s2048-g8-mb6-ac0-1 is 10 % high),
// in the JSON and in the markdown.
TEST(Validate, DefinitionCheckShowsAPrintedMfuTheCountDoesNotGive) {
  const fs::path md = test_support::temp_dir("validate") / "mfu_mismatch.md";
  const auto [code, out] =
      run_fsdpsim("validate " + kData + "mfu_mismatch.csv --json - --md " + md.string());
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_NEAR(j["definition_check"]["mfu"]["max_gap"].get<double>(), 1.0 - 1.0 / 1.1, 0.002);
  EXPECT_LT(j["definition_check"]["hfu"]["max_gap"].get<double>(), 0.002);
  std::ifstream in(md);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("gives the MFU it prints within 9.10% (1 row)"), std::string::npos)
      << text.str();
  // Past 1% the row is named: its numbers follow another count.
  EXPECT_NE(text.str().find("More than 1% from that count, so counted another way (their MFU and "
                            "HFU errors include the gap): mfu-printed-10pct-high "
                            "(MFU -9.1%)."),
            std::string::npos)
      << text.str();
}

TEST(Validate, MalformedRowsNameTheLineAndColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"bad_cell.csv", "line 3, column n_layers"},
      {"bad_prefetch.csv", "line 2, column backward_prefetch"},
      {"bad_wrap_policy.csv",
       "line 2, column wrap_policy: expected transformer_block or block_and_linear, found "
       "\"per_linear\""},
      {"bad_pcie.csv",
       "line 2, column pcie_GBps: expected a positive number from 1e-06 to 1e+15, or an "
       "empty cell, found \"fast\""},
      {"bad_memory_fraction.csv",
       "line 2, column memory_fraction: expected a fraction in (0, 1], found \"1.5\""},
      {"bad_optimizer_impl.csv",
       "line 2, column optimizer_impl: expected foreach, fused or for_loop, found \"adam\""},
      {"bad_rms_norm.csv", "line 2, column rms_norm: expected fused or eager, found \"apex\""},
      // Cells the scenario loader refuses together: the row is malformed, not skipped.
      {"bad_float8_fsdp1.csv",
       "line 2, column float8_all_gather: torchao's float8 all-gather is an FSDP2 (version 2) "
       "extension"},
      {"bad_last_unit_raf.csv",
       "line 2, column last_unit_reshard_after_forward: expected empty with fsdp_version 1 (an "
       "FSDP2 fully_shard argument), found \"false\""},
      {"bad_embedding_and_head_units.csv",
       "line 2, column wrap_embedding_and_head: expected empty with fsdp_version 1 (FSDP2's "
       "fully_shard([norm, output])), found \"true\""},
      // Every missing column in one message, not one per run.
      {"missing_column.csv",
       "line 1: required columns are missing: \"model_family\", \"n_layers\", \"d_model\", "},
      // A file needs something measured to compare with: one throughput column at least.
      {"no_throughput_column.csv",
       "line 1: required column is missing: one of \"measured_tokens_per_s_per_gpu\", "
       "\"measured_model_tflops_per_gpu\", \"measured_hardware_tflops_per_gpu\" (a measured "
       "throughput to compare with)"},
      {"misspelt_column.csv",
       "line 1: unknown column \"memory_fracton\" (did you mean \"memory_fraction\"?)"}};
  for (const auto& [file, message] : cases) {
    const auto [code, out] = run_fsdpsim("validate " + kData + file);
    EXPECT_EQ(code, 2) << file << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << file << "\n" << out;
  }
  // A required column whose header cell has a stray space is named as found.
  const fs::path spaced = test_support::temp_dir("validate") / "spaced_header.csv";
  {
    std::string text = test_support::read_file(kData + "small_cases.csv");
    text.replace(text.find(",gpu,"), 5, ", gpu,");
    std::ofstream(spaced) << text;
  }
  const auto [code, out] = run_fsdpsim("validate " + spaced.string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 1: required column is missing: \"gpu\" (found \" gpu\")"),
            std::string::npos)
      << out;
  // A file without its header line: the first row of values is no header (a repeated value
  // would otherwise be named a repeated column).
  {
    const fs::path headless = test_support::temp_dir("validate") / "headless.csv";
    const std::string text = test_support::read_file(kData + "small_cases.csv");
    std::ofstream(headless) << text.substr(text.find('\n') + 1);
    const auto [headless_code, headless_out] = run_fsdpsim("validate " + headless.string());
    EXPECT_EQ(headless_code, 2) << headless_out;
    EXPECT_NE(headless_out.find("line 1: expected a header line of column names"),
              std::string::npos)
        << headless_out;
  }
  // A blank first line is named as such, not as an empty file.
  {
    const fs::path blank = test_support::temp_dir("validate") / "blank_first_line.csv";
    std::ofstream(blank) << "\n" << test_support::read_file(kData + "small_cases.csv");
    const auto [blank_code, blank_out] = run_fsdpsim("validate " + blank.string());
    EXPECT_EQ(blank_code, 2) << blank_out;
    EXPECT_NE(blank_out.find("blank_first_line.csv: line 1: expected a header line of column "
                             "names (case_id, source, model_family, ...), found a blank line"),
              std::string::npos)
        << blank_out;
  }
  // A GPU without a preset is skipped (a user's own GPU), but a preset's name in other case is
  // a typo and an empty cell no GPU: skipped, their rows would drop out of a --max-mape gate.
  for (const auto& [gpu, message] : std::vector<std::pair<std::string, std::string>>{
           {"A100-SXM-80GB",
            "column gpu: expected the preset's name as written, "
            "\"a100-sxm-80gb\", found \"A100-SXM-80GB\""},
           {"", "column gpu: expected a GPU, e.g. a hardware preset's name, found \"\""}}) {
    const fs::path typo = test_support::temp_dir("validate") / "gpu_typo.csv";
    std::string text = test_support::read_file(kData + "small_cases.csv");
    const std::size_t at = text.find(",a100-sxm-80gb,");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 15, "," + gpu + ",");
    std::ofstream(typo) << text;
    const auto [typo_code, typo_out] = run_fsdpsim("validate " + typo.string());
    EXPECT_EQ(typo_code, 2) << typo_out;
    EXPECT_NE(typo_out.find(message), std::string::npos) << typo_out;
  }
  // A GPU named by its model alone is skipped with the one preset of that model as a hint.
  {
    const fs::path short_name = test_support::temp_dir("validate") / "gpu_model_only.csv";
    std::string text = test_support::read_file(kData + "small_cases.csv");
    const std::size_t at = text.find(",a100-sxm-80gb,");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 15, ",h200,");
    std::ofstream(short_name) << text;
    const auto [short_code, short_out] = run_fsdpsim("validate " + short_name.string());
    EXPECT_NE(short_out.find("column gpu: GPU \"h200\" has no hardware preset (did you mean "
                             "\"h200-sxm-141gb\"?)"),
              std::string::npos)
        << short_out;
  }
}

// Every row's cells are checked: a row that --where leaves out or that is skipped (no GPU
// count) still fails the file when a cell is malformed. And a known column written in other
// case or with spaces is not taken for a column of the user's own, whose cells would be ignored.
TEST(Validate, EveryRowAndColumnIsCheckedWhateverIsSimulated) {
  const std::string small = test_support::read_file(kData + "small_cases.csv");
  const auto write = [](const std::string& name, const std::string& text) {
    const fs::path path = test_support::temp_dir("validate") / name;
    std::ofstream(path) << text;
    return path.string();
  };
  // The last row (line 5) gets a malformed micro_batch.
  std::string bad_last = small;
  {
    const std::size_t row = bad_last.rfind("lf-a10080-mpt1b-s2048-g8-mb14-ac0-1,");
    ASSERT_NE(row, std::string::npos);
    const std::string line = bad_last.substr(row, bad_last.find('\n', row) - row);
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream in(line);
    while (std::getline(in, cell, ',')) cells.push_back(cell);
    if (line.ends_with(",")) cells.emplace_back();  // getline drops an empty last cell
    ASSERT_EQ(cells[28], "14");                     // micro_batch
    cells[28] = "0x10";
    std::string joined;
    for (std::size_t i = 0; i < cells.size(); ++i) joined += (i ? "," : "") + cells[i];
    bad_last.replace(row, line.size(), joined);
  }
  const std::string filtered = write("filtered.csv", bad_last);
  const auto [code, out] =
      run_fsdpsim("validate " + filtered + " --where case_id=lf-h100-mpt70b-s2048-g128-mb8-ac1-1");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 5, column micro_batch"), std::string::npos) << out;
  // The same row without a GPU count is skipped, and its bad cell still an error.
  std::string no_gpus = bad_last;
  {
    const std::size_t row = no_gpus.rfind("lf-a10080-mpt1b-s2048-g8-mb14-ac0-1,");
    const std::size_t gpu = no_gpus.find(",a100-sxm-80gb,8,", row);
    ASSERT_NE(gpu, std::string::npos);
    no_gpus.replace(gpu, 17, ",a100-sxm-80gb,,");
  }
  const auto [skip_code, skip_out] = run_fsdpsim("validate " + write("no_gpus.csv", no_gpus));
  EXPECT_EQ(skip_code, 2) << skip_out;
  EXPECT_NE(skip_out.find("line 5, column micro_batch"), std::string::npos) << skip_out;
  for (const std::string header : {"OFFLOAD_ACTIVATIONS", "Offload Activations"}) {
    // The column added to every line, true on every row.
    std::istringstream lines(small);
    std::string text;
    std::string line;
    for (bool first = true; std::getline(lines, line); first = false)
      text += line + (first ? "," + header : std::string(",true")) + "\n";
    const auto [c, o] = run_fsdpsim("validate " + write("renamed.csv", text));
    EXPECT_EQ(c, 2) << o;
    EXPECT_NE(o.find("unknown column \"" + header + "\" (did you mean \"offload_activations\"?)"),
              std::string::npos)
        << o;
  }
}

// The checks across a row's cells (the scenario loader's, measurements against the GPU) apply to
// the rows --where leaves out and to the skipped ones too: their model at least, when the row
// has no GPU count to make a scenario of.
TEST(Validate, ChecksAcrossCellsApplyToRowsLeftOutOrSkipped) {
  const std::string small = test_support::read_file(kData + "small_cases.csv");
  const std::string last = "lf-a10080-mpt1b-s2048-g8-mb14-ac0-1,";
  const auto variant = [&](const std::string& name, const std::string& from,
                           const std::string& to) {
    std::string text = small;
    const std::size_t at = text.find(from, text.rfind(last));
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    const fs::path path = test_support::temp_dir("validate", "across") / name;
    std::ofstream(path) << text;
    return path.string();
  };
  const std::string other = " --where case_id=lf-h100-mpt70b-s2048-g128-mb8-ac1-1";
  // n_kv_heads 5 does not divide n_heads 16 (line 5).
  const std::string kv = variant("kv.csv", ",2048,16,16,8192,", ",2048,16,5,8192,");
  const auto [left_out, left_out_text] = run_fsdpsim("validate " + kv + other);
  EXPECT_EQ(left_out, 2) << left_out_text;
  EXPECT_NE(
      left_out_text.find("kv.csv: line 5, columns n_kv_heads, n_heads: n_kv_heads (5) must divide "
                         "n_heads (16)"),
      std::string::npos)
      << left_out_text;
  // A tokens/s rate no A100 can reach (100 times the row's).
  const std::string fast = variant("fast.csv", ",448,4,20513,", ",448,4,2051300,");
  const auto [too_fast, too_fast_text] = run_fsdpsim("validate " + fast + other);
  EXPECT_EQ(too_fast, 2) << too_fast_text;
  EXPECT_NE(too_fast_text.find("fast.csv: line 5, column measured_tokens_per_s_per_gpu: expected "
                               "a rate whose FLOPs"),
            std::string::npos)
      << too_fast_text;
  // Without a GPU count the row is skipped, and its model still checked.
  const std::string no_gpus =
      variant("no_gpus.csv", ",2048,16,16,8192,50368,2048,1.3160,a100-sxm-80gb,8,",
              ",2048,16,5,8192,50368,2048,1.3160,a100-sxm-80gb,,");
  const auto [skipped, skipped_text] = run_fsdpsim("validate " + no_gpus);
  EXPECT_EQ(skipped, 2) << skipped_text;
  EXPECT_NE(
      skipped_text.find("no_gpus.csv: line 5, columns n_kv_heads, n_heads: n_kv_heads (5) must "
                        "divide n_heads"),
      std::string::npos)
      << skipped_text;
}

// A --set key no scenario has is the option's error, said once, not a skip of every row.
TEST(Validate, ASetKeyNoScenarioHasIsAnErrorOfTheOption) {
  const auto [code, out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --set fsdp.sharding_stratgy=FULL_SHARD");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("error: --set fsdp.sharding_stratgy: not a scenario key (/fsdp/"
                     "sharding_stratgy: unknown key; did you mean sharding_strategy?"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("skipped"), std::string::npos) << out;
  // The option blamed is the one whose key reaches into a value that is not an object.
  const auto [inside, inside_out] =
      run_fsdpsim("validate " + kData +
                  "small_cases.csv --set training.micro_batch=2 --set model.n_layers.x=3");
  EXPECT_EQ(inside, 2) << inside_out;
  EXPECT_NE(inside_out.find("error: --set model.n_layers.x: not a scenario key"), std::string::npos)
      << inside_out;
}

// What spreadsheets and people write: TRUE/True booleans are read; a file separated by
// semicolons, an MFU with a percent sign, an FSDP version by name and a --where value no row has
// get messages that say what to change.
TEST(Validate, SpreadsheetHabitsAreReadOrNamed) {
  const std::string small = test_support::read_file(kData + "small_cases.csv");
  const fs::path dir = test_support::temp_dir("validate", "habits");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const auto replaced = [&](std::string text, const std::string& from, const std::string& to) {
    const std::size_t at = text.rfind(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  const std::string last_row = "2048,1.3160,a100-sxm-80gb,8,8,1600,false,1,FULL_SHARD,";
  // inter_node_assumed as Excel writes it.
  const auto [excel, excel_out] = run_fsdpsim(
      "validate " +
      write("excel.csv",
            replaced(small, last_row, "2048,1.3160,a100-sxm-80gb,8,8,1600,FALSE,1,FULL_SHARD,")));
  EXPECT_EQ(excel, 0) << excel_out;
  const auto [named, named_out] = run_fsdpsim(
      "validate " +
      write("named.csv", replaced(small, last_row,
                                  "2048,1.3160,a100-sxm-80gb,8,8,1600,false,FSDP2,FULL_SHARD,")));
  EXPECT_EQ(named, 2) << named_out;
  EXPECT_NE(named_out.find("line 5, column fsdp_version: expected 1 or 2, found \"FSDP2\""),
            std::string::npos)
      << named_out;
  const auto [percent, percent_out] = run_fsdpsim(
      "validate " + write("percent.csv", replaced(small, ",0.5986,0.5986,", ",59.86%,0.5986,")));
  EXPECT_EQ(percent, 2) << percent_out;
  EXPECT_NE(percent_out.find("column measured_mfu: expected a fraction of the peak in (0, 1] "
                             "(0.41 = 41 %), found \"59.86%\""),
            std::string::npos)
      << percent_out;
  std::string semicolons = small.substr(0, small.find('\n'));
  std::replace(semicolons.begin(), semicolons.end(), ',', ';');
  const auto [semi, semi_out] = run_fsdpsim("validate " + write("semi.csv", semicolons + "\n"));
  EXPECT_EQ(semi, 2) << semi_out;
  EXPECT_NE(semi_out.find("found none of them (the line has semicolons or tabs where CSV has "
                          "commas: save it as comma-separated)"),
            std::string::npos)
      << semi_out;
  // A measurement validate does not compare, and a global batch in tokens.
  std::string header_plus = small;
  header_plus.insert(header_plus.find('\n'), ",measured_step_time_s");
  for (std::size_t at = header_plus.find('\n') + 1; at < header_plus.size();
       at = header_plus.find('\n', at) + 1) {
    at = header_plus.find('\n', at);
    header_plus.insert(at, ",1.5");
  }
  const auto [step, step_out] = run_fsdpsim("validate " + write("step.csv", header_plus));
  EXPECT_EQ(step, 2) << step_out;
  EXPECT_NE(step_out.find("line 1: column \"measured_step_time_s\" is not a measurement validate "
                          "compares (measured_tokens_per_s_per_gpu, "),
            std::string::npos)
      << step_out;
  std::string typo = header_plus;
  typo.replace(typo.find("measured_step_time_s"), 20, "measured_mfuu");
  const auto [mfuu, mfuu_out] = run_fsdpsim("validate " + write("mfuu.csv", typo));
  EXPECT_EQ(mfuu, 2) << mfuu_out;
  EXPECT_NE(mfuu_out.find("unknown column \"measured_mfuu\" (did you mean \"measured_mfu\"?)"),
            std::string::npos)
      << mfuu_out;
  const auto [tokens, tokens_out] = run_fsdpsim(
      "validate " + write("tokens.csv", replaced(small, ",14,448,4,", ",14,917504,4,")));
  EXPECT_EQ(tokens, 2) << tokens_out;
  EXPECT_NE(tokens_out.find("(global_batch counts sequences: 917504 tokens are 448 sequences of "
                            "2048)"),
            std::string::npos)
      << tokens_out;
  const auto [where, where_out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --where gpu=h100");
  EXPECT_EQ(where, 2) << where_out;
  EXPECT_NE(where_out.find("no row is left after --where (gpu is never \"h100\"; it is "
                           "\"a100-sxm-80gb\", \"h100-sxm-80gb\")"),
            std::string::npos)
      << where_out;
  const auto [every, every_out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --where 'source!=llm-foundry@HEAD'");
  EXPECT_EQ(every, 2) << every_out;
  EXPECT_NE(every_out.find("(source is \"llm-foundry@HEAD\" on every row)"), std::string::npos)
      << every_out;
}

// A llama row needs its SwiGLU width; gpt and mpt rows take 4 x d_model when it is empty.
TEST(Validate, ALlamaRowWithoutFfnDimNamesTheColumn) {
  const std::string small = test_support::read_file(kData + "small_cases.csv");
  std::string llama = small;
  const std::size_t row = llama.rfind("lf-a10080-mpt1b-s2048-g8-mb14-ac0-1,");
  const std::size_t cells = llama.find(",mpt,MPT-1b,24,2048,16,16,8192,", row);
  ASSERT_NE(cells, std::string::npos);
  llama.replace(cells, 31, ",llama,MPT-1b,24,2048,16,16,,");
  const fs::path path = test_support::temp_dir("validate", "llama_ffn") / "llama.csv";
  std::ofstream(path) << llama;
  const auto [code, out] = run_fsdpsim("validate " + path.string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 5, column ffn_dim: expected the SwiGLU inner size of a llama row (gpt "
                     "and mpt rows may leave it empty: 4 x d_model), found \"\""),
            std::string::npos)
      << out;
}

// A column unlike any fsdpsim knows is the user's own: kept, and usable by --where and --group-by.
TEST(Validate, AColumnOfYourOwnGroupsTheRows) {
  const auto [code, out] =
      run_fsdpsim("validate " + kData + "own_column.csv --where cluster=east --group-by cluster");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("validated 2 cases"), std::string::npos) << out;
  // The summary says the column sets nothing in the scenarios: a setting under a name validate
  // has no column for (inter_node_gbps for inter_node_gbps_per_node) is not lost in silence.
  EXPECT_NE(out.find("note: column of your own, not read into the scenarios (kept for --where "
                     "and --group-by): cluster\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(run_fsdpsim("validate " + kData + "small_cases.csv").output.find("of your own"),
            std::string::npos);
  // "==" is a slip for "=", not a value starting with '=' that no row has.
  const auto [twice, twice_out] =
      run_fsdpsim("validate " + kData + "own_column.csv --where cluster==east");
  EXPECT_EQ(twice, 2) << twice_out;
  EXPECT_NE(twice_out.find("--where: expected COLUMN=VALUE or COLUMN!=VALUE, found "
                           "\"cluster==east\""),
            std::string::npos)
      << twice_out;
  // Short names of one's own are not taken for misspellings of fsdpsim's ("mfu" is two edits
  // from "gpu", "nodes" one from the free-text "notes"); a letter off a long name still is.
  const std::string own = test_support::read_file(kData + "own_column.csv");
  for (const std::string name : {"nodes", "mfu", "host", "gbs", "gpu_model"}) {
    std::string renamed = own;
    renamed.replace(renamed.find("cluster"), 7, name);
    const fs::path file = test_support::temp_dir("validate", "own_names") / (name + ".csv");
    std::ofstream(file) << renamed;
    const auto [c, o] = run_fsdpsim("validate " + file.string() + " --group-by " + name);
    EXPECT_EQ(c, 0) << name << "\n" << o;
  }
  // Two letters swapped are one slip, in a short name too.
  std::string swapped = own;
  swapped.replace(swapped.find("cluster"), 7, "no_snyc");
  const fs::path file = test_support::temp_dir("validate", "own_names") / "no_snyc.csv";
  std::ofstream(file) << swapped;
  const auto [c, o] = run_fsdpsim("validate " + file.string());
  EXPECT_EQ(c, 2) << o;
  EXPECT_NE(o.find("unknown column \"no_snyc\" (did you mean \"no_sync\"?)"), std::string::npos)
      << o;
}

// A cell that is not a number, or not one of its column's values, is an error naming the line
// and column, not an ignored cell or a skipped row.
TEST(Validate, CellsThatAreNotTheirColumnsValuesAreErrors) {
  const auto [code, out] = run_fsdpsim("validate " + kData + "bad_number_cell.csv");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column n_kv_heads: expected a positive integer (at most 2^53), "
                     "found \"abc\""),
            std::string::npos)
      << out;
  const auto [code2, out2] = run_fsdpsim("validate " + kData + "bad_choice_cell.csv");
  EXPECT_EQ(code2, 2) << out2;
  EXPECT_NE(out2.find("line 2, column sharding: expected one of FULL_SHARD"), std::string::npos)
      << out2;
}

// small_cases.csv's header and first row with some cells changed (a column it lacks is added),
// written as DIR/name; `rows` copies of the row (changes apply to every copy).
fs::path variant_csv(const std::string& name, const std::map<std::string, std::string>& changes,
                     int rows = 1, const std::string& line_end = "\n") {
  std::ifstream in(kData + "small_cases.csv");
  std::string header_line;
  std::string row_line;
  std::getline(in, header_line);
  std::getline(in, row_line);
  const auto header = parse_csv_line(header_line);
  auto row = parse_csv_line(row_line);
  for (std::size_t i = 0; i < header->size(); ++i) {
    if (const auto it = changes.find((*header)[i]); it != changes.end()) (*row)[i] = it->second;
  }
  for (const auto& [column, cell] : changes) {
    if (std::find(header->begin(), header->end(), column) != header->end()) continue;
    header_line += "," + column;
    row->push_back(cell);
  }
  std::string text = header_line + line_end;
  for (int r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < row->size(); ++i) {
      if (i > 0) text += ',';
      const std::string& cell = (*row)[i];
      // Quoted as RFC 4180 asks, line breaks kept inside the quotes.
      const bool quote = cell.find_first_of(",\"\r\n") != std::string::npos;
      std::string escaped;
      for (const char c : cell) escaped += c == '"' ? std::string("\"\"") : std::string(1, c);
      text += quote ? "\"" + escaped + "\"" : escaped;
    }
    text += line_end;
  }
  const fs::path file = test_support::temp_dir("validate") / name;
  std::ofstream(file, std::ios::binary) << text;
  return file;
}

// small_cases.csv's header and first row with one more column, `column`, holding `cell`.
fs::path with_column(const std::string& name, const std::string& column, const std::string& cell) {
  return variant_csv(name, {{column, cell}});
}

// `validate` on that row with `column` holding `cell` is exit 2, the message naming line 2, the
// column and then `expected`.
void expect_cell_refused(const std::string& column, const std::string& cell,
                         const std::string& expected) {
  const auto [code, out] = run_fsdpsim("validate " + with_column("bad.csv", column, cell).string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column " + column + ": " + expected), std::string::npos) << out;
}

// The optional logits_kept_by_loop column sets training.logits_kept_by_loop; another value
// names the line and the column.
TEST(Validate, LogitsKeptByLoopColumnIsTheTrainingKey) {
  const auto kept =
      read_validation_cases(with_column("kept.csv", "logits_kept_by_loop", "compute_dtype"));
  ASSERT_EQ(kept.size(), 1u);
  const CaseScenario s = scenario_for_case(kept[0], "kept.csv");
  EXPECT_EQ(s.document["training"]["logits_kept_by_loop"], "compute_dtype");
  expect_cell_refused("logits_kept_by_loop", "bf16",
                      "expected none, compute_dtype or fp32, found \"bf16\"");
}

// The optional host_sync column sets training.host_sync; another value names the line and the
// column.
TEST(Validate, HostSyncColumnIsTheTrainingKey) {
  const auto cases = read_validation_cases(with_column("sync.csv", "host_sync", "none"));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(scenario_for_case(cases[0], "sync.csv").document["training"]["host_sync"], "none");
  expect_cell_refused("host_sync", "epoch", "expected step, micro_batch or none, found \"epoch\"");
}

// What spreadsheets and Python's csv module write: a byte-order mark, CRLF line ends, a quoted
// cell with a line break in it. The same row reads the same.
TEST(Validate, ReadsCsvAsSpreadsheetsWriteIt) {
  const fs::path plain = variant_csv("plain.csv", {});
  const fs::path excel =
      variant_csv("excel.csv", {{"notes", "first line\nsecond, \"quoted\""}}, 1, "\r\n");
  {
    std::string text = test_support::read_file(excel);
    std::ofstream(excel, std::ios::binary) << "\xEF\xBB\xBF" << text;
  }
  const auto [code, out] = run_fsdpsim("validate " + plain.string() + " --json -");
  const auto [code2, out2] = run_fsdpsim("validate " + excel.string() + " --json -");
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(code2, 0) << out2;
  EXPECT_EQ(nlohmann::json::parse(out)["tokens_per_s"],
            nlohmann::json::parse(out2)["tokens_per_s"]);
  const auto cases = read_validation_cases(excel);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].get("notes"), "first line\nsecond, \"quoted\"");
  EXPECT_EQ(cases[0].get("case_id"), read_validation_cases(plain)[0].get("case_id"));
}

// A quote that breaks RFC 4180 is named at its line and column, with what is wrong with it.
TEST(Validate, AMalformedQuoteIsNamedAtItsLineAndColumn) {
  const auto error_of = [](const std::string& text) {
    try {
      (void)parse_csv_records(text, "q.csv");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error_of("a,b,c\n1,x\"y,3\n"),
            "q.csv: line 2, column 2: malformed CSV: a quote inside a cell that does not start "
            "with one (quote the whole cell and write the quote twice: \"\")");
  EXPECT_EQ(error_of("a,b,c\n1,2,\"x\"y\n"),
            "q.csv: line 2, column 3: malformed CSV: text after the closing quote (a quote inside "
            "a quoted cell is written twice: \"\")");
  EXPECT_EQ(error_of("a,b\n1,\"never\nclosed\n"),
            "q.csv: line 2, column 2: malformed CSV: a quote that is never closed");
  // A quote left open is named where it opened, though the next quoted cell, lines below,
  // seems to close it.
  EXPECT_EQ(error_of("a,b\n1,\"left open\n2,\"x\"\n"),
            "q.csv: line 2, column 2: malformed CSV: a quoted cell runs on to line 3, where text "
            "follows the quote that would close it: is a quote on line 2 left open?");
  EXPECT_EQ(error_of("a,b\n1,\"x\"\"y\"\n"), "accepted");
}

// Each row is named by its case_id in every report and by --where: an empty or repeated one,
// or a header naming a column twice, is an error.
TEST(Validate, CaseIdsAndColumnsAreNamedOnce) {
  const auto [code, out] = run_fsdpsim("validate " + variant_csv("twice.csv", {}, 2).string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 3, column case_id: "), std::string::npos) << out;
  EXPECT_NE(out.find("is already the case_id of line 2"), std::string::npos) << out;
  const auto [code2, out2] =
      run_fsdpsim("validate " + variant_csv("unnamed.csv", {{"case_id", ""}}).string());
  EXPECT_EQ(code2, 2) << out2;
  EXPECT_NE(out2.find("line 2, column case_id: expected a name, found an empty cell"),
            std::string::npos)
      << out2;
  const fs::path doubled = test_support::temp_dir("validate") / "doubled.csv";
  {
    const std::string text = test_support::read_file(kData + "small_cases.csv");
    const std::size_t eol = text.find('\n');
    std::ofstream(doubled) << text.substr(0, eol) << ",gpus\n";
  }
  const auto [code3, out3] = run_fsdpsim("validate " + doubled.string());
  EXPECT_EQ(code3, 2) << out3;
  EXPECT_NE(out3.find("line 1: column \"gpus\" appears twice in the header"), std::string::npos)
      << out3;
  // A trailing comma makes an unnamed column: empty cells under it are fine, a value is not.
  const std::string text = test_support::read_file(kData + "small_cases.csv");
  const auto with_last_cell = [&](const std::string& name, const std::string& cell) {
    const fs::path p = test_support::temp_dir("validate") / name;
    std::ofstream file(p);
    std::istringstream lines(text);
    std::string line;
    for (bool header = true; std::getline(lines, line); header = false)
      file << line << "," << (header ? "" : cell) << "\n";
    return p.string();
  };
  const auto [trailing, trailing_out] =
      run_fsdpsim("validate " + with_last_cell("trailing_comma.csv", "") + " --json -");
  EXPECT_EQ(trailing, 0) << trailing_out;
  // Two of them (a spreadsheet's stray columns) are not one column named twice.
  {
    const fs::path two_commas = test_support::temp_dir("validate") / "two_trailing_commas.csv";
    std::ofstream file(two_commas);
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) file << line << ",,\n";
  }
  const auto [two, two_out] = run_fsdpsim(
      "validate " + (test_support::temp_dir("validate") / "two_trailing_commas.csv").string());
  EXPECT_EQ(two, 0) << two_out;
  const auto [valued, valued_out] =
      run_fsdpsim("validate " + with_last_cell("unnamed_value.csv", "7"));
  EXPECT_EQ(valued, 2) << valued_out;
  EXPECT_NE(valued_out.find("line 2, column "), std::string::npos) << valued_out;
  EXPECT_NE(valued_out.find(": found \"7\" under a header cell with no name"), std::string::npos)
      << valued_out;
}

// Numbers are decimal, within range and of their column's kind: a count past 2^53 is not
// wrapped, hex is not a number, an MFU of 44 is a percentage, a cluster has at most 2^20 GPUs.
TEST(Validate, CellsOutOfTheirColumnsRangeAreErrors) {
  const std::vector<std::tuple<std::string, std::map<std::string, std::string>, std::string>>
      cases = {
          {"huge_gpus.csv",
           {{"gpus", "99999999999999999999"}},
           "column gpus: expected a positive integer (at most 2^53), found "
           "\"99999999999999999999\""},
          {"hex.csv",
           {{"measured_tokens_per_s_per_gpu", "0x10"}},
           "column measured_tokens_per_s_per_gpu: expected a positive number from 1e-06 to "
           "1e+15, or an empty cell, found \"0x10\""},
          {"subnormal.csv",
           {{"measured_tokens_per_s_per_gpu", "4e-320"}},
           "column measured_tokens_per_s_per_gpu: expected a positive number from 1e-06 to "
           "1e+15, or an empty cell, found \"4e-320\""},
          // A normal number whose inverse overflows: the error would print as inf.
          {"tiny.csv",
           {{"measured_peak_mem_gib", "2.5e-308"}},
           "column measured_peak_mem_gib: expected a positive number from 1e-06 to 1e+15, or an "
           "empty cell, found \"2.5e-308\""},
          {"huge.csv",
           {{"measured_tokens_per_s_per_gpu", "1e300"}},
           "column measured_tokens_per_s_per_gpu: expected a positive number from 1e-06 to "
           "1e+15, or an empty cell, found \"1e300\""},
          // Read as an integer, not through a double that rounds it to 2^53.
          {"past_2p53.csv",
           {{"gpus_per_node", "9007199254740993"}},
           "column gpus_per_node: expected a positive integer (at most 2^53), found "
           "\"9007199254740993\""},
          {"spaced.csv",
           {{"micro_batch", " 8"}},
           "column micro_batch: expected a positive integer"},
          {"percent_mfu.csv",
           {{"measured_mfu", "44.5"}},
           "column measured_mfu: expected a fraction of the peak in (0, 1]"},
          {"half_batch.csv",
           {{"global_batch", "1.5"}, {"grad_accum", ""}},
           "column global_batch: expected a positive integer"},
          {"small_batch.csv",
           {{"global_batch", "8"}, {"grad_accum", ""}},
           "column global_batch: expected at least micro_batch x gpus"},
          // The first row's 1024 sequences are one micro-batch of 8 on 128 GPUs: two cells that
          // say 2 and 1 contradict each other.
          {"contradicting_batch.csv",
           {{"global_batch", "2048"}, {"grad_accum", "1"}},
           "column grad_accum: expected the global_batch cell's 2048 / (micro_batch 8 x 128 GPUs) "
           "= 2 micro-batches per step, rounded down or up, or no global_batch cell, found \"1\""},
          {"huge_micro_batch.csv",
           {{"micro_batch", "99999999"}},
           "column micro_batch: expected at most 16777216 sequences"},
          {"many_gpus.csv",
           {{"gpus", "2097152"}},
           "column gpus: expected at most 1048576 GPUs, found \"2097152\""},
          {"full_shard_group.csv",
           {{"sharding", "FULL_SHARD"}, {"shard_group_size", "3"}},
           "column shard_group_size: expected empty or"},
          {"assumed.csv",
           {{"inter_node_assumed", "maybe"}},
           "column inter_node_assumed: expected true or false, found \"maybe\""}};
  for (const auto& [name, changes, message] : cases) {
    const auto [code, out] = run_fsdpsim("validate " + variant_csv(name, changes).string());
    EXPECT_EQ(code, 2) << name << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << name << "\n" << out;
  }
}

// A row the loader rejects is skipped with the CSV column that holds the value, not the JSON
// path of the scenario built from it, and its case_id reaches the terminal escaped.
// A CSV that is not UTF-8 (saved as Latin-1) is refused at the byte: replaced by U+FFFD in the
// reports, "caf\xe9" and "caf\xe8" would print alike.
TEST(Validate, BytesThatAreNotUtf8AreRefusedAtTheirLineAndColumn) {
  const fs::path csv = variant_csv("latin1.csv", {{"case_id", "caf\xe9"}});
  const auto [code, out] = run_fsdpsim("validate " + csv.string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(
      out.find(csv.string() + ": expected UTF-8 text, found the byte 0xE9 at line 2, column 4"),
      std::string::npos)
      << out;
}

TEST(Validate, ARejectedRowNamesItsColumn) {
  const fs::path csv =
      variant_csv("version3.csv", {{"fsdp_version", "3"}, {"case_id", "two\nlines"}});
  const auto [code, out] = run_fsdpsim("validate " + csv.string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find(csv.string() + ": line 2, column fsdp_version: expected 1 or 2, found \"3\""),
            std::string::npos)
      << out;
}

// Measurements no run could have made are malformed cells too: a throughput whose FLOPs pass
// the GPU's densest peak, TFLOPS or memory above the GPU's, reserved memory below allocated, a
// node larger than any job.
TEST(Validate, MeasurementsBeyondTheGpuNameTheirColumn) {
  const std::pair<std::map<std::string, std::string>, const char*> cases[] = {
      {{{"measured_tokens_per_s_per_gpu", "1e15"}},
       "line 2, column measured_tokens_per_s_per_gpu: expected a rate whose FLOPs under the row's "
       "count stay within h100-sxm-80gb's densest peak, 1979 TFLOP/s"},
      {{{"measured_model_tflops_per_gpu", "2500"}},
       "line 2, column measured_model_tflops_per_gpu: expected at most h100-sxm-80gb's densest "
       "peak, 1979 TFLOP/s, found \"2500\""},
      {{{"measured_peak_mem_gib", "1e15"}},
       "line 2, column measured_peak_mem_gib: expected at most h100-sxm-80gb's memory"},
      {{{"gpus_per_node", "1e15"}}, "line 2, column gpus_per_node: expected at most 1048576 GPUs"}};
  int i = 0;
  for (const auto& [changes, message] : cases) {
    const fs::path csv = variant_csv("beyond" + std::to_string(i++) + ".csv", changes);
    const auto [code, out] = run_fsdpsim("validate " + csv.string());
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
  }
  const fs::path csv =
      variant_csv("reserved_below_allocated.csv",
                  {{"measured_peak_mem_gib", "50"}, {"measured_peak_reserved_gib", "40"}});
  const auto [code, out] = run_fsdpsim("validate " + csv.string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column measured_peak_reserved_gib: expected at least "
                     "measured_peak_mem_gib"),
            std::string::npos)
      << out;
}

// A row predicted out of memory is compared all the same (it ran), and the terminal says how
// many such rows the summary holds.
TEST(Validate, TheSummarySaysHowManyRowsArePredictedOutOfMemory) {
  const fs::path csv = variant_csv("oom.csv", {{"micro_batch", "64"}, {"global_batch", ""}});
  const auto [code, out] = run_fsdpsim("validate " + csv.string());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("validated 1 case (0 skipped)"), std::string::npos) << out;
  EXPECT_NE(out.find("\n1 of them predicted out of memory"), std::string::npos) << out;
  const auto [fits_code, fits] = run_fsdpsim("validate " + kData + "small_cases.csv");
  EXPECT_EQ(fits_code, 0) << fits;
  EXPECT_EQ(fits.find("predicted out of memory"), std::string::npos) << fits;
}

// The measurements are the row's, made on its own GPU: a what-if that shrinks the GPU below them
// is simulated, not taken for a malformed row. A row malformed in itself is named by its own
// cell, whatever a bad --set also says.
TEST(Validate, WhatIfsAreCheckedApartFromTheRowsOwnCells) {
  const fs::path csv = variant_csv("mem50.csv", {{"measured_peak_mem_gib", "50"}});
  const auto [code, out] =
      run_fsdpsim("validate " + csv.string() + " --set hardware.gpu.hbm_bytes=42949672960");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("validated 1 case (0 skipped)"), std::string::npos) << out;
  const fs::path bad = with_column("mpt_eager_norm.csv", "rms_norm", "eager");
  const auto [bad_code, bad_out] =
      run_fsdpsim("validate " + bad.string() + " --set training.flash_attention=banana");
  EXPECT_EQ(bad_code, 2) << bad_out;
  EXPECT_NE(bad_out.find("line 2, column rms_norm: applies to models that normalize with RMSNorm"),
            std::string::npos)
      << bad_out;
}

// A malformed row among good ones is still an error: a --max-mape gate must not pass on the
// rows that happen to be well formed. A row that only a --set makes invalid is skipped instead:
// that what-if does not apply to it (float8 linears on an A100).
TEST(Validate, AMalformedRowAmongGoodOnesIsAnError) {
  const fs::path bad = variant_csv("version3_row.csv", {{"fsdp_version", "3"}, {"case_id", "v3"}});
  const std::string bad_text = test_support::read_file(bad);
  const fs::path csv = test_support::temp_dir("validate") / "good_and_bad.csv";
  std::ofstream(csv) << test_support::read_file(kData + "small_cases.csv")
                     << bad_text.substr(bad_text.find('\n') + 1);
  const auto [code, out] = run_fsdpsim("validate " + csv.string() + " --max-mape 1");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find(": line 6, column fsdp_version: expected 1 or 2, found \"3\""),
            std::string::npos)
      << out;
  const auto [fp8_code, fp8] =
      run_fsdpsim("validate " + kData + "small_cases.csv --set training.matmul_dtype=fp8");
  EXPECT_EQ(fp8_code, 0) << fp8;
  EXPECT_NE(fp8.find("validated 2 cases (2 skipped)"), std::string::npos) << fp8;
  EXPECT_NE(fp8.find("(line 4): column matmul_dtype: float8 linears need fp8 tensor cores"),
            std::string::npos)
      << fp8;
}

// A cell the scenario loader refuses is named by its column too: an MPT row asking for minGPT's
// mask buffer.
TEST(Validate, AMaskBufferOnAnMptRowNamesItsColumn) {
  const fs::path csv = with_column("mpt_mask.csv", "causal_mask_buffer", "true");
  const auto [code, out] = run_fsdpsim("validate " + csv.string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column causal_mask_buffer: minGPT's per-block causal mask "
                     "buffer: expected false (or no key) for a model that is not family gpt"),
            std::string::npos)
      << out;
}

// The optional float8_linear column says whose float8 linears a row ran: an fp8 row's goes to
// training.float8_linear; on a row that is not fp8, or with another value, it names its column.
TEST(Validate, Float8LinearColumnIsTheTrainingKey) {
  const fs::path te = variant_csv(
      "te.csv",
      {{"gpu", "h100-sxm-80gb"}, {"matmul_dtype", "fp8"}, {"float8_linear", "transformer_engine"}});
  const auto cases = read_validation_cases(te);
  ASSERT_EQ(cases.size(), 1u);
  const CaseScenario s = scenario_for_case(cases[0], te);
  ASSERT_FALSE(s.document.is_null()) << s.skip_reason;
  EXPECT_EQ(s.document["training"]["float8_linear"], "transformer_engine");
  const auto [code, out] =
      run_fsdpsim("validate " + with_column("bf16_te.csv", "float8_linear", "torchao").string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column float8_linear: expected empty where matmul_dtype is not fp8"),
            std::string::npos)
      << out;
}

// --scenarios-out names each file after its row's case_id: an id that is not a plain file name
// would write outside the folder, so it is refused before anything is simulated or written.
TEST(Validate, ScenariosOutWritesOnlyInsideItsFolder) {
  const fs::path dir = test_support::temp_dir("validate", "scenarios_out");
  const fs::path csv = variant_csv("escape.csv", {{"case_id", "../escaped"}});
  const auto [code, out] =
      run_fsdpsim("validate " + csv.string() + " --scenarios-out " + (dir / "inner").string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("line 2, column case_id: --scenarios-out names each file after its case_id"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir / "escaped.json"));
  // A line break in the id would make a file name no listing shows plainly.
  const fs::path broken = variant_csv("broken_id.csv", {{"case_id", "a\nb"}});
  const auto [broken_code, broken_out] =
      run_fsdpsim("validate " + broken.string() + " --scenarios-out " + (dir / "inner").string());
  EXPECT_EQ(broken_code, 2) << broken_out;
  EXPECT_NE(broken_out.find("line 2, column case_id: --scenarios-out names each file after its "
                            "case_id, expected a file name (no '/', '\\' or control characters"),
            std::string::npos)
      << broken_out;
  // '-' means stdout for --json; a folder of files cannot go there.
  const auto [dash, dash_out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --scenarios-out -");
  EXPECT_EQ(dash, 2) << dash_out;
  EXPECT_NE(dash_out.find("--scenarios-out: expected a folder, found '-'"), std::string::npos)
      << dash_out;
  // One path for the folder and a file: refused before the folder is made, by both its names.
  const fs::path both = dir / "both";
  const auto [same, same_out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --json " + both.string() +
                  " --scenarios-out " + (dir / "." / "both").string());
  EXPECT_EQ(same, 2) << same_out;
  EXPECT_NE(same_out.find(both.string() + ": is given for --json and --scenarios-out; each needs "
                                          "a place of its own"),
            std::string::npos)
      << same_out;
  EXPECT_FALSE(fs::exists(both));
}

// A summary of no case is undefined, not a perfect score: rows that print TFLOPS only give a
// null tokens/s MAPE, and a --max-mape gate or a --fit on them is refused.
TEST(Validate, NoMeasuredTokensIsNotAPerfectScore) {
  const std::string rows = kData + "tflops_only_row.csv --where source=pytorch-aws-blog-2022";
  const auto [code, out] = run_fsdpsim("validate " + rows + " --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["tokens_per_s"]["count"], 0);
  EXPECT_TRUE(j["tokens_per_s"]["mape"].is_null()) << j["tokens_per_s"].dump();
  EXPECT_TRUE(j["tokens_per_s"]["max_ape"].is_null());
  EXPECT_EQ(j["tflops"]["count"], 1);
  // One row ranks nothing: its source's rank correlation is null too.
  const auto [one_code, one] =
      run_fsdpsim("validate " + variant_csv("one.csv", {}).string() + " --json -");
  ASSERT_EQ(one_code, 0) << one;
  const nlohmann::json o = nlohmann::json::parse(one);
  ASSERT_EQ(o["spearman"].size(), 1u) << o["spearman"].dump();
  EXPECT_TRUE(o["spearman"].begin()->is_null()) << o["spearman"].dump();
  const auto [text_code, text] = run_fsdpsim("validate " + rows);
  EXPECT_EQ(text_code, 0) << text;
  EXPECT_NE(text.find("none has a measured tokens/s/GPU; TFLOPS/GPU MAPE"), std::string::npos)
      << text;
  const auto [gate, gate_out] = run_fsdpsim("validate " + rows + " --max-mape 0.5");
  EXPECT_EQ(gate, 2) << gate_out;
  EXPECT_NE(gate_out.find("--max-mape: gates the tokens/s MAPE, but none of the 1 simulated rows"),
            std::string::npos)
      << gate_out;
  const auto [fit, fit_out] =
      run_fsdpsim("validate " + rows + " --fit hardware.gpu.sustained_compute_fraction=0.5:1");
  EXPECT_EQ(fit, 2) << fit_out;
  // Found before the search, not at a value it tried.
  EXPECT_NE(fit_out.find("--fit: fits the tokens/s MAPE, but none of the 1 kept rows has a "
                         "measured tokens/s/GPU"),
            std::string::npos)
      << fit_out;
}

// small_cases.csv's header and its MPT-1b row (8 A100-80GB, micro batch 14) with `changes`.
fs::path mpt1b_csv(const std::string& name, const std::map<std::string, std::string>& changes) {
  std::ifstream in(kData + "small_cases.csv");
  std::string header_line;
  std::string line;
  std::getline(in, header_line);
  std::string row_line;
  while (std::getline(in, line)) {
    if (line.rfind("lf-a10080-mpt1b-s2048-g8-mb14-ac0-1,", 0) == 0) row_line = line;
  }
  const auto header = parse_csv_line(header_line);
  auto row = parse_csv_line(row_line);
  for (std::size_t i = 0; i < header->size(); ++i) {
    if (const auto it = changes.find((*header)[i]); it != changes.end()) (*row)[i] = it->second;
  }
  std::string text = header_line + "\n";
  for (std::size_t i = 0; i < row->size(); ++i) {
    const std::string& cell = (*row)[i];
    text += (i > 0 ? "," : "") +
            (cell.find_first_of(",\"") != std::string::npos ? "\"" + cell + "\"" : cell);
  }
  const fs::path file = test_support::temp_dir("validate") / name;
  std::ofstream(file, std::ios::binary) << text << "\n";
  return file;
}

// A global batch of 400 sequences on 8 GPUs at micro batch 14 is 3.57 micro-batches a step: the
// run's four (the last one partial) are simulated whole, 448 sequences, and the step times
// compared are the row's 400 x 2048 / 8 tokens over each tokens/s (they were the simulated 448's,
// 12 % more). Without a grad_accum cell the count is rounded up too, as Composer runs it: 360
// sequences are 3.21 micro-batches, simulated as 4.
TEST(Validate, StepTimesAreOfTheRowsGlobalBatch) {
  const fs::path csv = mpt1b_csv("partial.csv", {{"global_batch", "400"}, {"grad_accum", "4"}});
  const auto [code, out] = run_fsdpsim("validate " + csv.string() + " --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json c = nlohmann::json::parse(out)["cases"][0];
  const double tokens = 400.0 * 2048.0 / 8.0;
  EXPECT_NEAR(c["step_time_s"]["measured"].get<double>(),
              tokens / c["measured_tokens_per_s_per_gpu"].get<double>(), 1e-9);
  EXPECT_NEAR(c["step_time_s"]["predicted"].get<double>(),
              tokens / c["predicted_tokens_per_s_per_gpu"].get<double>(), 1e-9);
  const auto rounded = read_validation_cases(
      mpt1b_csv("rounded.csv", {{"global_batch", "360"}, {"grad_accum", ""}}).string());
  ASSERT_EQ(rounded.size(), 1u);
  EXPECT_EQ(scenario_for_case(rounded[0], "rounded.csv").document["training"]["global_batch"], 448);
}

// A row that prints both model and hardware TFLOPS counts once in the TFLOPS summary, by its
// model count, as the case table judges it.
TEST(Validate, ARowsTflopsCountOnceInTheSummary) {
  const fs::path csv = mpt1b_csv("both_tflops.csv", {{"measured_tokens_per_s_per_gpu", ""},
                                                     {"measured_mfu", ""},
                                                     {"measured_hfu", ""},
                                                     {"measured_model_tflops_per_gpu", "130"},
                                                     {"measured_hardware_tflops_per_gpu", "130"}});
  const auto [code, out] = run_fsdpsim("validate " + csv.string() + " --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["evaluated"], 1);
  EXPECT_EQ(j["tflops"]["count"], 1) << j["tflops"].dump();
}

// Options are checked once, before any row: a malformed --set, an empty path, an infinite --fit
// bound or a malformed profile is one error, not a skip reason repeated on every row.
TEST(Validate, BadOptionsAreRefusedBeforeAnyRow) {
  const std::string cases = kData + "small_cases.csv";
  const fs::path profile = test_support::temp_dir("validate") / "broken_profile.json";
  std::ofstream(profile) << "{";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--set =1", "--set \"=1\": expected KEY=VALUE"},
      {"--json ''", "--json: expected a path or name, found an empty string"},
      {"--fit hardware.gpu.sustained_compute_fraction=0.5:inf",
       "--fit: expected KEY=LO:HI with LO and HI finite decimal numbers"},
      // Trailing junk or hex is not a number (std::stod read "0.5abc" as 0.5).
      {"--fit hardware.gpu.sustained_compute_fraction=0.5abc:1xyz",
       "--fit: expected KEY=LO:HI with LO and HI finite decimal numbers"},
      {"--fit hardware.gpu.sustained_compute_fraction=0x1:1e0",
       "--fit: expected KEY=LO:HI with LO and HI finite decimal numbers"},
      {"--fit nosuch.key=0:1", "--fit nosuch.key: not a scenario key (/nosuch: unknown key"},
      {"--calibration " + profile.string(), "broken_profile.json: malformed JSON"},
      {"--calibration " + profile.parent_path().string(),
       "expected a JSON file, found a folder, device or other special file"}};
  for (const auto& [option, message] : bad) {
    const auto [code, out] = run_fsdpsim("validate " + cases + " " + option);
    EXPECT_EQ(code, 2) << option << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << option << "\n" << out;
    EXPECT_EQ(out.find("skipped "), std::string::npos) << option << "\n" << out;
  }
  // A plain name is a preset's, even where a file of that name is in the working folder: the
  // message says how to name the file.
  const fs::path here = profile.parent_path();
  fs::copy_file(kData + "small_cases.csv", here / "mine.csv", fs::copy_options::overwrite_existing);
  const auto [code, out] =
      run_fsdpsim("validate " + cases + " --calibration mine.csv", "cd " + here.string() + " && ");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("unknown calibration profile \"mine.csv\""), std::string::npos) << out;
  EXPECT_NE(out.find("(for the file mine.csv, write ./mine.csv)"), std::string::npos) << out;
}

// Nothing validated is not a pass: a header-only table, a profile or option that makes every
// row fail, an impossible --max-mape.
TEST(Validate, NothingToValidateOrABadOptionExitsTwo) {
  const auto [code, out] = run_fsdpsim("validate " + kData + "header_only.csv --max-mape 0.1");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("expected at least one row, found none"), std::string::npos) << out;
  const std::string cases = kData + "small_cases.csv";
  const auto [code2, out2] = run_fsdpsim("validate " + cases + " --calibration nosuchprofile");
  EXPECT_EQ(code2, 2) << out2;
  EXPECT_NE(out2.find("--calibration: unknown calibration profile \"nosuchprofile\""),
            std::string::npos)
      << out2;
  // Named with --set, the error names --set.
  const auto [code7, out7] =
      run_fsdpsim("validate " + cases + " --set hardware.calibration=nosuchprofile");
  EXPECT_EQ(code7, 2) << out7;
  EXPECT_NE(out7.find("--set hardware.calibration: unknown calibration profile \"nosuchprofile\""),
            std::string::npos)
      << out7;
  // An option whose value makes every row invalid: the rows are skipped, their reasons shown.
  const auto [code3, out3] = run_fsdpsim("validate " + cases + " --set training.micro_batch=0");
  EXPECT_EQ(code3, 2) << out3;
  EXPECT_NE(out3.find("found none of 4 (4 skipped)"), std::string::npos) << out3;
  EXPECT_NE(out3.find("skipped "), std::string::npos) << "reasons on the terminal: " << out3;
  // A shipped profile names its GPU: H200 curves do not price the H100 and A100 rows.
  const auto [code6, out6] = run_fsdpsim("validate " + cases + " --calibration h200-sxm-141gb");
  EXPECT_EQ(code6, 2) << out6;
  EXPECT_NE(out6.find("found none of 4 (4 skipped)"), std::string::npos) << out6;
  EXPECT_NE(out6.find("its measurements are another GPU model's"), std::string::npos) << out6;
  // A device is refused, not read without end (/dev/zero once filled the memory).
  const auto [code5, out5] = run_fsdpsim("validate /dev/zero");
  EXPECT_EQ(code5, 2) << out5;
  EXPECT_NE(out5.find("/dev/zero: expected a regular file"), std::string::npos) << out5;
  for (const char* bad : {"-1", "nan", "0", "10", "inf"}) {
    const auto [code4, out4] = run_fsdpsim("validate " + cases + " --max-mape " + bad);
    EXPECT_EQ(code4, 2) << bad << ": " << out4;
    EXPECT_NE(out4.find("expected a positive fraction of at most 1 (0.10 = 10%)"),
              std::string::npos)
        << out4;
  }
}

TEST(Validate, MaxMapeTurnsTheErrorIntoAFailedCheck) {
  const auto [code, out] = run_fsdpsim("validate " + kData + "small_cases.csv --max-mape 0.0001");
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("exceeds --max-mape 0.0001\n"), std::string::npos) << out;
}

// KempnerForge's rows (configs/validation/README.md): no_sync, bf16 parameters, no upcast. The
// 2022 AWS blog's rows store fp16 parameters (its fp16 modules); every other row fp32.
TEST(ValidationCases, KempnerForgeRowsAccumulateUnsyncedInBf16WithoutUpcast) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  int kempnerforge = 0;
  for (const ValidationCase& c : cases) {
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    if (s.document.is_null()) continue;
    const nlohmann::json& t = s.document["training"];
    if (c.get("source") != "kempnerforge") {
      EXPECT_FALSE(t.contains("no_sync")) << c.get("case_id");
      if (c.get("source") == "pytorch-aws-blog-2022") {
        EXPECT_EQ(t["param_storage_dtype"], "fp16") << c.get("case_id");
      } else {
        EXPECT_FALSE(t.contains("param_storage_dtype")) << c.get("case_id");
      }
      continue;
    }
    ++kempnerforge;
    EXPECT_EQ(t["no_sync"], true);
    EXPECT_EQ(t["param_storage_dtype"], "bf16");
    EXPECT_EQ(t["loss"], "cross_entropy_no_upcast");
  }
  EXPECT_EQ(kempnerforge, 3);
}

// The pcie_GBps column sets the node's host link: the 2022 AWS blog's rows, from the blog's own
// trace of its activation copies (configs/validation/README.md); every other row keeps its
// preset's.
TEST(ValidationCases, PcieColumnSetsTheHostLinkOfTheRowsThatMeasuredIt) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  int measured = 0;
  for (const ValidationCase& c : cases) {
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    if (s.document.is_null()) continue;
    const nlohmann::json& node = s.document["hardware"]["node"];
    if (c.get("source") != "pytorch-aws-blog-2022") {
      EXPECT_FALSE(node.contains("pcie_GBps")) << c.get("case_id");
      continue;
    }
    ++measured;
    EXPECT_DOUBLE_EQ(node["pcie_GBps"].get<double>(), 6.3) << c.get("case_id");
  }
  EXPECT_EQ(measured, 3);
}

// A cell the row's scenario does not read is still checked: checkpoint_early_stop without
// checkpointing, the FSDP columns of a DeepSpeed row (that runtime reads only the dtypes), and
// pcie_GBps without offload.
TEST(ValidationCases, CellsARowDoesNotReadAreCheckedAllTheSame) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  const auto first = [&cases](const std::string& column, const std::string& value) {
    for (const ValidationCase& c : cases) {
      if (c.get(column) == value) return c;
    }
    throw std::logic_error("no row with " + column + " " + value);
  };
  const struct {
    ValidationCase row;
    const char* column;
    const char* value;
    const char* expected;
  } bad[] = {
      {first("act_ckpt", "none"), "checkpoint_early_stop", "banana", "expected true or false"},
      {first("model_family", "gpt"), "causal_mask_buffer", "banana", "expected true or false"},
      {first("runtime", "deepspeed-0.3"), "fsdp_version", "3", "expected 1 or 2"},
      {first("runtime", "deepspeed-0.3"), "backward_prefetch", "banana",
       "expected BACKWARD_PRE, BACKWARD_POST or none"},
      {first("runtime", "deepspeed-0.3"), "forward_prefetch", "banana", "expected true or false"},
      {first("runtime", "deepspeed-0.3"), "limit_all_gathers", "banana", "expected true or false"},
      {first("runtime", "deepspeed-0.3"), "wrap_policy", "banana",
       "expected transformer_block or block_and_linear"},
      {first("runtime", "deepspeed-0.3"), "clip_grad_norm", "banana", "expected true or false"},
      // A host link no row without offload uses, at a rate no link has.
      {first("act_ckpt", "none"), "pcie_GBps", "1e-300", "expected a positive number from 1e-06"},
  };
  // DeepSpeed 0.3 takes the norm every step, so a DeepSpeed row that says it clips is true to
  // the run, and its scenario (which refuses the key as changing nothing) leaves the key out.
  ValidationCase clipping = first("runtime", "deepspeed-0.3");
  clipping.fields["clip_grad_norm"] = "true";
  EXPECT_FALSE(
      scenario_for_case(clipping, "cases.csv").document["training"].contains("clip_grad_norm"));
  for (const auto& [row, column, value, expected] : bad) {
    ValidationCase c = row;
    ASSERT_NO_THROW(scenario_for_case(c, "cases.csv")) << c.get("case_id");
    c.fields[column] = value;
    try {
      scenario_for_case(c, "cases.csv");
      ADD_FAILURE() << column << " " << value << " accepted on " << c.get("case_id");
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("column {}: {}", column, expected)),
                std::string::npos)
          << e.what();
    }
  }
}

// The clip_grad_norm, offload_activations, unpad_attention, runtime and causal_mask_buffer columns
// (configs/validation/README.md): every llm-foundry and KempnerForge row clips, only the 2022
// blog's rows offload activations, only MosaicGPT's flash path at llm-foundry 8934724 and
// fe973f0 (which always hands FlashMHA a key_padding_mask) runs unpadded attention, and only
// Megatron-LM's 2021 ZeRO-3 rows run as DeepSpeed 0.3's ZeRO-3.
TEST(ValidationCases, OptionalColumnsReachTheScenario) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  int clipped = 0;
  int offloaded = 0;
  int unpadded = 0;
  int deepspeed = 0;
  int masked = 0;
  for (const ValidationCase& c : cases) {
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    if (s.document.is_null()) continue;
    const nlohmann::json& t = s.document["training"];
    const std::string& source = c.get("source");
    const bool clips = source.rfind("llm-foundry@", 0) == 0 || source == "kempnerforge";
    EXPECT_EQ(t.value("clip_grad_norm", false), clips) << c.get("case_id");
    EXPECT_EQ(t.value("offload_activations", false), source == "pytorch-aws-blog-2022")
        << c.get("case_id");
    // The blog wrapped each decoder linear in its own FSDP unit.
    const bool linears = s.document.contains("fsdp") &&
                         s.document["fsdp"].value("wrap_policy", "") == "block_and_linear";
    EXPECT_EQ(linears, source == "pytorch-aws-blog-2022") << c.get("case_id");
    const bool mosaic_flash = source == "llm-foundry@8934724" || source == "llm-foundry@fe973f0";
    EXPECT_EQ(t.value("unpad_attention", false), mosaic_flash) << c.get("case_id");
    clipped += clips ? 1 : 0;
    offloaded += t.value("offload_activations", false) ? 1 : 0;
    unpadded += mosaic_flash ? 1 : 0;
    const bool megatron = source == "megatron-lm-2021-zero3";
    EXPECT_EQ(s.document.value("parallelism", "fsdp") == "deepspeed_zero3", megatron)
        << c.get("case_id");
    if (megatron) {  // Megatron's GPT through the ZeRO-3 port of 2021-03 (validation_cases.cpp)
      EXPECT_TRUE(s.document["model"].value("tied_embeddings", false)) << c.get("case_id");
      EXPECT_TRUE(s.document["deepspeed"].value("register_external_embedding", false))
          << c.get("case_id");
      // The port's ds_zero_stage_3_config.json sets contiguous_gradients.
      EXPECT_TRUE(s.document["deepspeed"].value("contiguous_gradients", false)) << c.get("case_id");
    }
    deepspeed += megatron ? 1 : 0;
    // minGPT (the paper's and the blog's GPTs) keeps a causal mask buffer in every block.
    const bool min_gpt = source == "fsdp-paper" || source == "pytorch-aws-blog-2022";
    EXPECT_EQ(s.document["model"].value("causal_mask_buffer", false), min_gpt) << c.get("case_id");
    masked += min_gpt ? 1 : 0;
  }
  EXPECT_GT(clipped, 400);
  EXPECT_EQ(offloaded, 3);
  EXPECT_GT(unpadded, 200);
  EXPECT_EQ(deepspeed, 6);
  EXPECT_EQ(masked, 3);  // the paper's two rows have no GPU count: skipped
}

// The same run on more GPUs (scaling_cases.csv: llm-foundry's mpt-125m on 8, 16, 32 and 64
// A100-80GB): only the rows with one micro-batch per step pair up, each against the 16-GPU one
// (the 8-GPU row runs two micro-batches per step; a copy of the 16-GPU row under another source
// is a run of its own), and the predicted change is the ratio of the rows' predictions.
TEST(Validate, ScalingComparesTheSameRunOnMoreGpus) {
  const fs::path md = test_support::temp_dir("validate", "scaling") / "scaling.md";
  const auto [code, out] =
      run_fsdpsim("validate " + kData + "scaling_cases.csv --json - --md " + md.string());
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  std::map<std::string, double> predicted;
  for (const nlohmann::json& c : j["cases"]) {
    predicted[c["case_id"]] = c["predicted_tokens_per_s_per_gpu"].get<double>();
  }
  const nlohmann::json& scaling = j["scaling"];
  ASSERT_EQ(scaling["pairs"], 2) << scaling.dump();
  const std::string g16 = "lfc6cfb42-a10080-mpt125m-s2048-g16-mb32-ac0-1";
  const nlohmann::json& wider = scaling["cases"][1];  // ordered by factor: 16 -> 32, 16 -> 64
  EXPECT_EQ(scaling["cases"][0]["more"], "lfc6cfb42-a10080-mpt125m-s2048-g32-mb32-ac0-1");
  EXPECT_EQ(wider["fewer"], g16);
  EXPECT_EQ(wider["more"], "lfc6cfb42-a10080-mpt125m-s2048-g64-mb32-ac0-1");
  EXPECT_EQ(wider["gpus"], nlohmann::json({16, 64}));
  const double measured = 130026.0 / 133689.0 - 1.0;  // the rows' measured tokens/s/GPU
  const double model = predicted[wider["more"]] / predicted[g16] - 1.0;
  EXPECT_NEAR(wider["measured_change"].get<double>(), measured, 1e-12);
  EXPECT_NEAR(wider["predicted_change"].get<double>(), model, 1e-12);
  EXPECT_NEAR(wider["error"].get<double>(), (1.0 + model) / (1.0 + measured) - 1.0, 1e-12);
  // Per doubling, the median of the two pairs' rates: 16 -> 32 is one doubling, 16 -> 64 two.
  const double doubling = 0.5 * (131438.0 / 133689.0 - 1.0 + std::sqrt(130026.0 / 133689.0) - 1.0);
  EXPECT_NEAR(scaling["per_doubling"]["measured_change"].get<double>(), doubling, 1e-12);
  EXPECT_EQ(scaling["by_factor"]["4"]["count"], 1);
  // Both pairs are llm-foundry@c6cfb42's; the other source's copy has no pair.
  ASSERT_EQ(scaling["by_source"].size(), 1u) << scaling["by_source"].dump();
  EXPECT_EQ(scaling["by_source"]["llm-foundry@c6cfb42"]["count"], 2);
  EXPECT_EQ(scaling["by_source"]["llm-foundry@c6cfb42"]["per_doubling"], scaling["per_doubling"]);
  EXPECT_NEAR(scaling["by_factor"]["4"]["mean_abs_error"].get<double>(),
              std::abs(wider["error"].get<double>()), 1e-12);
  const std::string text = test_support::read_file(md);
  const std::size_t section = text.find("## Scaling: the same run on more GPUs");
  ASSERT_NE(section, std::string::npos) << text;
  EXPECT_NE(text.find("| 4 | 1 | -2.7% |", section), std::string::npos) << text;
  EXPECT_NE(text.find("| 16 -> 64 | -2.7% |", section), std::string::npos) << text;
  EXPECT_NE(text.find("Per doubling of the GPUs", section), std::string::npos) << text;
  EXPECT_NE(text.find("| llm-foundry@c6cfb42 | 2 | -1.5% |", section), std::string::npos) << text;
  // Rows that are never the same run on other GPU counts: no pair, and the section says so.
  const auto [none, none_out] = run_fsdpsim("validate " + kData + "small_cases.csv --json -");
  ASSERT_EQ(none, 0) << none_out;
  EXPECT_EQ(nlohmann::json::parse(none_out)["scaling"]["pairs"], 0);
  EXPECT_TRUE(nlohmann::json::parse(none_out)["scaling"]["per_doubling"].is_null());
  const auto [none_md, none_text] = run_fsdpsim("validate " + kData + "small_cases.csv --md -");
  ASSERT_EQ(none_md, 0) << none_text;
  EXPECT_NE(none_text.find("No two evaluated rows differ only in their GPU count."),
            std::string::npos)
      << none_text;
}

// The model column is optional: rows that leave it empty (a user's own past runs) are named after
// their case_id, and still pair up by the model's shape.
TEST(Validate, RowsWithoutAModelNamePairByTheirShape) {
  std::string cases = test_support::read_file(kData + "scaling_cases.csv");
  for (std::size_t at = cases.find(",mpt,MPT-125m,"); at != std::string::npos;
       at = cases.find(",mpt,MPT-125m,", at)) {
    cases.replace(at, 14, ",mpt,,");
  }
  const fs::path file = test_support::temp_dir("validate", "unnamed") / "unnamed_cases.csv";
  std::ofstream(file) << cases;
  const auto [code, out] = run_fsdpsim("validate " + file.string() + " --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["scaling"]["pairs"], 2) << j["scaling"].dump();
}

// An empty inter_node_gbps_per_node cell runs at the GPU preset's bandwidth: such a row is the
// same run as one that states that bandwidth, and on several nodes its bandwidth is assumed.
TEST(Validate, AnEmptyBandwidthCellIsThePresetsForPairsAndAssumedAcrossNodes) {
  std::string cases = test_support::read_file(kData + "scaling_cases.csv");
  for (const char* gpus : {"g16", "g64"}) {
    const std::size_t row = cases.find(std::string("lfc6cfb42-a10080-mpt125m-s2048-") + gpus);
    ASSERT_NE(row, std::string::npos);
    const std::size_t cell = cases.find(",1600,false,", row);
    ASSERT_NE(cell, std::string::npos);
    cases.replace(cell, 12, ",,false,");  // A100-80GB's preset: 1600 Gb/s per node
  }
  const fs::path csv = test_support::temp_dir("validate", "empty_nic") / "cases.csv";
  std::ofstream(csv) << cases;
  const auto [code, out] = run_fsdpsim("validate " + csv.string() + " --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["scaling"]["pairs"], 2) << j["scaling"].dump();  // 16 -> 32 and 16 -> 64
  EXPECT_EQ(j["by_network"]["several nodes, bandwidth assumed"]["count"], 2)
      << j["by_network"].dump();
  EXPECT_EQ(j["by_network"]["several nodes, bandwidth stated"]["count"], 2)
      << j["by_network"].dump();
  // inter_node_assumed as a spreadsheet writes it counts as assumed.
  const std::size_t g32 = cases.find("lfc6cfb42-a10080-mpt125m-s2048-g32");
  ASSERT_NE(g32, std::string::npos);
  cases.replace(cases.find(",1600,false,", g32), 12, ",1600,TRUE,");
  std::ofstream(csv) << cases;
  const auto [excel, excel_out] = run_fsdpsim("validate " + csv.string() + " --json -");
  ASSERT_EQ(excel, 0) << excel_out;
  const nlohmann::json network = nlohmann::json::parse(excel_out)["by_network"];
  EXPECT_EQ(network["several nodes, bandwidth assumed"]["count"], 3) << network.dump();
}

// `--set hardware.node_speed_spread` reaches every row: the one-node row is predicted as before,
// the multi-node ones slower, and more so on more nodes (2, 4, 8 nodes: their slowest expected
// 0.56, 1.03, 1.42 standard deviations below the mean), so the pairs lose more per doubling.
TEST(Validate, ANodeSpeedSpreadSlowsTheMultiNodeRowsOnly) {
  const auto predicted = [](const std::string& extra) {
    const auto [code, out] =
        run_fsdpsim("validate " + kData + "scaling_cases.csv --json -" + extra);
    EXPECT_EQ(code, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    std::map<std::string, double> p;
    for (const nlohmann::json& c : j["cases"])
      p[c["case_id"]] = c["predicted_tokens_per_s_per_gpu"].get<double>();
    return p;
  };
  std::map<std::string, double> uniform = predicted("");
  std::map<std::string, double> spread = predicted(" --set hardware.node_speed_spread=0.03");
  const std::string row = "lfc6cfb42-a10080-mpt125m-s2048-g";
  EXPECT_DOUBLE_EQ(spread[row + "8-mb32-ac0-1"], uniform[row + "8-mb32-ac0-1"]);
  double previous = 1.0;
  for (const char* gpus : {"16", "32", "64"}) {
    const double ratio = spread[row + gpus + "-mb32-ac0-1"] / uniform[row + gpus + "-mb32-ac0-1"];
    EXPECT_LT(ratio, previous) << gpus;
    previous = ratio;
  }
  EXPECT_GT(previous, 1.0 - 0.03 * 1.4236 - 1e-6);  // no slower than its slowest node
}

// A row whose simulated step does not fit is still compared (its step time is the over-memory
// step's), and the markdown says so next to the prediction and in the header.
TEST(Validate, OutOfMemoryPredictionsAreMarkedInTheMarkdown) {
  const std::string md = (test_support::temp_dir("validate", "oom") / "cases.md").string();
  const auto [code, out] = run_fsdpsim("validate " + std::string(FSDPSIM_CONFIGS_DIR) +
                                       "/validation/cases.csv --where "
                                       "case_id=aws22-a10040-gpt1t-s2048-g128-mb4-ac1-off-1 --md " +
                                       md);
  ASSERT_EQ(code, 0) << out;
  const std::string text = test_support::read_file(md);
  EXPECT_NE(text.find("1 of the evaluated runs are predicted out of memory"), std::string::npos)
      << text;
  EXPECT_NE(text.find("(out of memory) |"), std::string::npos) << text;
}

// The same MPT-760m shape at 16k tokens on A100-40GB, published twice: in bf16 (llm-foundry HEAD)
// it fits with room, with fp32 parameters under autocast (Dec 2022) fsdpsim predicts cudaMalloc
// retries. Each row says so, and the summary splits the errors by allocator state.
TEST(Validate, PredictedCudaMallocRetriesAreReportedAndSummarized) {
  const fs::path dir = test_support::temp_dir("validate", "retries");
  const std::string md = (dir / "cases.md").string();
  const std::string json = (dir / "cases.json").string();
  const auto [code, out] =
      run_fsdpsim("validate " + std::string(FSDPSIM_CONFIGS_DIR) +
                  "/validation/cases.csv --where model=MPT-760m --where gpu=a100-sxm-40gb "
                  "--where seq_len=16384 --md " +
                  md + " --json " + json);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(test_support::read_file(json));
  ASSERT_EQ(j["cases"].size(), 2U) << j.dump(1);
  for (const nlohmann::json& c : j["cases"]) {
    const bool fp32_params = c["case_id"] == "lf8934724-a10040-mpt760m-s16384-g8-mb1-ac0-1";
    if (fp32_params) {
      EXPECT_GT(c["predicted_alloc_retries"].get<std::int64_t>(), 0) << c.dump();
    } else {
      EXPECT_EQ(c["predicted_alloc_retries"], 0) << c.dump();
    }
  }
  EXPECT_EQ(j["by_allocator"]["no retry"]["count"], 1);
  EXPECT_EQ(j["by_allocator"]["cudaMalloc retries"]["count"], 1);
  EXPECT_FALSE(j["by_allocator"].contains("out of memory"));
  const std::string text = test_support::read_file(md);
  EXPECT_NE(text.find("## tokens/s/GPU by predicted allocator state"), std::string::npos) << text;
  EXPECT_NE(text.find("cudaMalloc retries) |"), std::string::npos) << text;
}

// Runs across nodes are summarized apart from those in one node, and by whether their source
// states the bandwidth between the nodes or it was assumed (inter_node_assumed).
TEST(Validate, RunsAcrossNodesAreSummarizedByWhetherTheirBandwidthIsStated) {
  const fs::path dir = test_support::temp_dir("validate", "network");
  const auto summary = [&dir](const std::string& cases) {
    const std::string json = (dir / "cases.json").string();
    const std::string md = (dir / "cases.md").string();
    const auto [code, out] = run_fsdpsim("validate " + cases + " --json " + json + " --md " + md);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(test_support::read_file(md).find("## tokens/s/GPU by inter-node bandwidth"),
              std::string::npos);
    return nlohmann::json::parse(test_support::read_file(json))["by_network"];
  };
  // The IBM/Meta runs: 128 A100s and 96 H100s at the bandwidths their table states.
  const nlohmann::json stated =
      summary(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/fms-fsdp/cases.csv");
  EXPECT_EQ(stated["several nodes, bandwidth stated"]["count"], 8) << stated.dump(1);
  EXPECT_EQ(stated.size(), 1U) << stated.dump(1);
  // small_cases.csv: one MPT-70b run on 128 H100s at an assumed 3200 Gb/s, the rest on 8 GPUs.
  const nlohmann::json assumed = summary(kData + "small_cases.csv");
  EXPECT_EQ(assumed["several nodes, bandwidth assumed"]["count"], 1) << assumed.dump(1);
  EXPECT_GE(assumed["one node"]["count"].get<int>(), 1) << assumed.dump(1);
  EXPECT_FALSE(assumed.contains("several nodes, bandwidth stated")) << assumed.dump(1);
}

// This project's H200 rows record max_memory_reserved (measured_peak_reserved_gib): validate
// compares the caching-allocator model's reserved peak with it, beside the allocated peak.
TEST(Validate, ReservedMemoryIsComparedWhereTheRowMeasuredIt) {
  const std::string md = (test_support::temp_dir("validate", "reserved") / "reserved.md").string();
  const auto [code, out] = run_fsdpsim("validate " + std::string(FSDPSIM_CONFIGS_DIR) +
                                       "/validation/measured-h200/steps.csv --json - --md " + md);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["peak_reserved_mem"]["count"], 7);
  EXPECT_EQ(j["peak_mem"]["count"], 7);
  EXPECT_LT(j["peak_reserved_mem"]["mape"].get<double>(), 0.10);
  for (const nlohmann::json& c : j["cases"]) {
    ASSERT_TRUE(c.contains("peak_reserved_gib")) << c.dump();
    // Reserved memory holds the allocated tensors and the cache around them.
    EXPECT_GE(c["peak_reserved_gib"]["measured"].get<double>(),
              c["peak_mem_gib"]["measured"].get<double>());
    EXPECT_GE(c["peak_reserved_gib"]["predicted"].get<double>(),
              c["peak_mem_gib"]["predicted"].get<double>());
  }
  EXPECT_NE(test_support::read_file(md).find("| peak reserved memory | 7 |"), std::string::npos);

  const auto [published_code, published] =
      run_fsdpsim("validate " + kData + "small_cases.csv --json -");
  ASSERT_EQ(published_code, 0) << published;
  EXPECT_EQ(nlohmann::json::parse(published)["peak_reserved_mem"]["count"], 0);

  // A row predicted out of memory (its allocator capped at 5 %) is compared on allocated
  // memory, what the step needs, but not on reserved: that is the allocator's at the failure.
  const fs::path capped = test_support::temp_dir("validate", "reserved") / "capped.csv";
  {
    std::ifstream in(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/measured-h200/steps.csv");
    std::string header;
    std::string row;
    std::getline(in, header);
    std::getline(in, row);
    std::ofstream(capped) << header << ",memory_fraction\n" << row << ",0.05\n";
  }
  const auto [capped_code, capped_out] = run_fsdpsim("validate " + capped.string() + " --json -");
  ASSERT_EQ(capped_code, 0) << capped_out;
  const nlohmann::json c = nlohmann::json::parse(capped_out);
  ASSERT_EQ(c["cases"].size(), 1U);
  EXPECT_EQ(c["cases"][0]["status"], "oom");
  EXPECT_TRUE(c["cases"][0].contains("peak_mem_gib"));
  EXPECT_FALSE(c["cases"][0].contains("peak_reserved_gib"));
  EXPECT_EQ(c["peak_reserved_mem"]["count"], 0);
}

// The memory_fraction column caps a row's allocator (allocator.memory_fraction): the H200's
// 1.5B Llama run, 52.7 GiB reserved at its peak uncapped, fits under 35 % of the 141 GB only
// after cudaMalloc retries.
TEST(Validate, MemoryFractionColumnCapsTheRowsAllocator) {
  const auto [code, out] = run_fsdpsim("validate " + kData + "memory_fraction.csv --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["cases"].size(), 2U);
  EXPECT_EQ(j["cases"][0]["predicted_alloc_retries"], 0);
  EXPECT_EQ(j["cases"][0]["status"], "ok");
  EXPECT_GT(j["cases"][1]["predicted_alloc_retries"].get<std::int64_t>(), 0);
  EXPECT_EQ(j["cases"][1]["status"], "ok");
  EXPECT_LT(j["cases"][1]["predicted_tokens_per_s_per_gpu"].get<double>(),
            j["cases"][0]["predicted_tokens_per_s_per_gpu"].get<double>());
}

// `validate` on the test data file NAME.csv, with its report JSON and the scenario of each row
// (--scenarios-out) written into a folder of their own.
struct ValidatedRows {
  nlohmann::json report;
  fs::path scenarios;
  [[nodiscard]] nlohmann::json scenario(const std::string& case_id) const {
    return nlohmann::json::parse(test_support::read_file(scenarios / (case_id + ".json")));
  }
};

ValidatedRows validate_with_scenarios(const std::string& name) {
  const fs::path out = test_support::temp_dir("validate", name);
  const auto [code, text] =
      run_fsdpsim("validate " + kData + name + ".csv --json " + (out / "report.json").string() +
                  " --scenarios-out " + (out / "scenarios").string());
  EXPECT_EQ(code, 0) << text;
  return {nlohmann::json::parse(test_support::read_file(out / "report.json")), out / "scenarios"};
}

// The optional float8 all-gather columns (float8_all_gather.csv: a Llama-1.5B on 8 H200 with
// float8 linears under FSDP2): gathered in float8 with precomputed scales, the layers cast no
// weight and the row is predicted faster than the same run gathering bf16 weights (on FSDP1,
// which has no float8 all-gather, the row is malformed: MalformedRowsNameTheLineAndColumn).
TEST(Validate, Float8AllGatherColumnsReachTheFsdpSection) {
  const ValidatedRows v = validate_with_scenarios("float8_all_gather");
  const nlohmann::json& j = v.report;
  ASSERT_EQ(j["cases"].size(), 2U) << j.dump();
  EXPECT_GT(j["cases"][1]["predicted_tokens_per_s_per_gpu"].get<double>(),
            j["cases"][0]["predicted_tokens_per_s_per_gpu"].get<double>());
  const nlohmann::json gathered = v.scenario("llama-1.5b-8xh200-fp8-float8-all-gather");
  EXPECT_TRUE(gathered["fsdp"]["float8_all_gather"].get<bool>());
  EXPECT_TRUE(gathered["fsdp"]["precompute_float8_scale"].get<bool>());
  EXPECT_FALSE(
      v.scenario("llama-1.5b-8xh200-fp8-bf16-all-gather")["fsdp"].contains("float8_all_gather"));
}

// The optional columns of a torchtitan run's training loop (fsdp2_loop_columns.csv: the same
// Llama-1.5B run on 8 H200 four times): the last unit kept unsharded after forward, fused AdamW,
// the embedding and head in units of their own and the loss in chunks reach the scenario. The
// second row, which skips the last block's backward all-gather and the foreach optimizer's extra
// passes, is predicted faster than the first; the third, whose forward starts by gathering the
// embedding alone instead of the root's embedding and head, faster still; the fourth, the loss in
// 8 chunks, is simulated as such. Empty cells leave the keys out.
TEST(Validate, TrainingLoopColumnsReachTheScenario) {
  const ValidatedRows v = validate_with_scenarios("fsdp2_loop_columns");
  const nlohmann::json& j = v.report;
  ASSERT_EQ(j["cases"].size(), 4U) << j.dump();
  EXPECT_GT(j["cases"][1]["predicted_tokens_per_s_per_gpu"].get<double>(),
            j["cases"][0]["predicted_tokens_per_s_per_gpu"].get<double>());
  EXPECT_GT(j["cases"][2]["predicted_tokens_per_s_per_gpu"].get<double>(),
            j["cases"][1]["predicted_tokens_per_s_per_gpu"].get<double>());
  const nlohmann::json torchtitan = v.scenario("llama-1.5b-8xh200-torchtitan-loop");
  EXPECT_FALSE(torchtitan["fsdp"]["last_unit_reshard_after_forward"].get<bool>());
  EXPECT_EQ(torchtitan["training"]["optimizer_impl"], "fused");
  EXPECT_FALSE(torchtitan["fsdp"].contains("wrap_embedding_and_head"));
  EXPECT_TRUE(v.scenario("llama-1.5b-8xh200-torchtitan-units")["fsdp"]["wrap_embedding_and_head"]
                  .get<bool>());
  const nlohmann::json defaults = v.scenario("llama-1.5b-8xh200-defaults");
  EXPECT_FALSE(defaults["fsdp"].contains("last_unit_reshard_after_forward"));
  EXPECT_FALSE(defaults["training"].contains("optimizer_impl"));
  EXPECT_FALSE(defaults["training"].contains("loss_chunks"));
  EXPECT_EQ(v.scenario("llama-1.5b-8xh200-torchtitan-chunked-loss")["training"]["loss_chunks"], 8);
  EXPECT_NE(j["cases"][3]["predicted_tokens_per_s_per_gpu"].get<double>(),
            j["cases"][2]["predicted_tokens_per_s_per_gpu"].get<double>());
}

// The optional rms_norm column (rms_norm.csv: the Llama-1.5B run on 8 H200, then the same with
// the reference RMSNorm op by op): eager reaches the scenario and is predicted slower; empty
// leaves the family's default.
TEST(Validate, RmsNormColumnReachesTheScenario) {
  const ValidatedRows v = validate_with_scenarios("rms_norm");
  const nlohmann::json& j = v.report;
  ASSERT_EQ(j["cases"].size(), 2U) << j.dump();
  EXPECT_LT(j["cases"][1]["predicted_tokens_per_s_per_gpu"].get<double>(),
            j["cases"][0]["predicted_tokens_per_s_per_gpu"].get<double>());
  EXPECT_EQ(v.scenario("llama-1.5b-8xh200-eager-rmsnorm")["training"]["rms_norm"], "eager");
  EXPECT_FALSE(v.scenario("llama-1.5b-8xh200-fused-rmsnorm")["training"].contains("rms_norm"));
}

// A row's written scenario is the one it was simulated as: `run` on it gives validate's
// prediction, with --set and --calibration applied (they were left out once, and `run` printed
// another number than the report).
TEST(Validate, WrittenScenariosCarryTheOverridesAndTheProfile) {
  const fs::path out = test_support::temp_dir("validate", "scenarios_with_overrides");
  const auto [code, text] = run_fsdpsim("validate " + kData +
                                        "rms_norm.csv --calibration h200-sxm-141gb-measured --set "
                                        "fsdp.reshard_after_forward=false --json " +
                                        (out / "report.json").string() + " --scenarios-out " +
                                        (out / "scenarios").string());
  ASSERT_EQ(code, 0) << text;
  const nlohmann::json report = nlohmann::json::parse(test_support::read_file(out / "report.json"));
  ASSERT_FALSE(report["cases"].empty());
  for (const nlohmann::json& c : report["cases"]) {
    const fs::path scenario = out / "scenarios" / (c["case_id"].get<std::string>() + ".json");
    const nlohmann::json written = nlohmann::json::parse(test_support::read_file(scenario));
    EXPECT_FALSE(written["fsdp"]["reshard_after_forward"].get<bool>()) << written.dump();
    EXPECT_TRUE(fs::path(written["hardware"]["calibration"].get<std::string>()).is_absolute());
    const auto [run_code, run_text] = run_fsdpsim("run " + scenario.string() + " --json -");
    ASSERT_EQ(run_code, 0) << run_text;
    const nlohmann::json result = nlohmann::json::parse(run_text);
    EXPECT_NEAR(result["tokens_per_s_per_gpu"].get<double>(),
                c["predicted_tokens_per_s_per_gpu"].get<double>(),
                1e-5 * c["predicted_tokens_per_s_per_gpu"].get<double>())  // run rounds
        << c["case_id"];
  }
  // With presets from --configs, the written scenario names them by path, as run would not
  // find them by name in its default folder.
  const fs::path configs = out / "configs";
  fs::remove_all(configs);
  fs::copy(FSDPSIM_CONFIGS_DIR, configs, fs::copy_options::recursive);
  const auto [own_code, own_text] =
      run_fsdpsim("validate " + kData + "rms_norm.csv --configs " + configs.string() +
                  " --scenarios-out " + (out / "own").string());
  ASSERT_EQ(own_code, 0) << own_text;
  for (const nlohmann::json& c : report["cases"]) {
    const nlohmann::json written = nlohmann::json::parse(
        test_support::read_file(out / "own" / (c["case_id"].get<std::string>() + ".json")));
    const std::string hardware = written["hardware"]["preset"].get<std::string>();
    EXPECT_EQ(hardware.rfind(configs.string(), 0), 0U) << hardware;
  }
}

// The H200 runs trained under allocator caps (configs/validation/measured-h200/retries): each
// capped run that fit retried cudaMalloc, and what those retries added to its step (against the
// same run uncapped) is what the presets' cudaMalloc/cudaFree costs price. Measured, the nine
// capped runs that fit (fsdpsim finds room for all nine) grew by 222.6 ms in all; priced at a
// flat 100 us per device call (the presets before the H200's allocator calls were timed) the
// eight it then found room for grew by about 40 ms.
TEST(Validate, CappedH200RunsPayWhatTheirRetriesCost) {
  const auto [code, out] = run_fsdpsim("validate " + std::string(FSDPSIM_CONFIGS_DIR) +
                                       "/validation/measured-h200/retries/steps.csv --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  std::map<std::string, nlohmann::json> uncapped;
  for (const nlohmann::json& c : j["cases"]) {
    const auto id = c["case_id"].get<std::string>();
    if (id.find("-mf") == std::string::npos) uncapped.emplace(id.substr(0, id.rfind("-ac")), c);
  }
  ASSERT_EQ(uncapped.size(), 3U);
  double measured_growth = 0.0;
  double predicted_growth = 0.0;
  int capped = 0;
  for (const nlohmann::json& c : j["cases"]) {
    const auto id = c["case_id"].get<std::string>();
    if (id.find("-mf") == std::string::npos || c["status"] != "ok") continue;
    const nlohmann::json& base = uncapped.at(id.substr(0, id.rfind("-ac")));
    EXPECT_GT(c["predicted_alloc_retries"].get<std::int64_t>(), 0) << id;
    measured_growth +=
        c["step_time_s"]["measured"].get<double>() - base["step_time_s"]["measured"].get<double>();
    predicted_growth += c["step_time_s"]["predicted"].get<double>() -
                        base["step_time_s"]["predicted"].get<double>();
    ++capped;
  }
  EXPECT_EQ(capped, 9);
  EXPECT_NEAR(measured_growth, 0.2226, 0.001);
  EXPECT_NEAR(predicted_growth, measured_growth, 0.25 * measured_growth);
}

// Issue #7 bounds every case at 25 %: the markdown lists the cases beyond it before all others,
// worst first (here the published mpt-125m row on 64 GPUs, off by about +50 %, and a row
// within 10 %).
TEST(Validate, CasesOffByMoreThan25PercentAreListedFirst) {
  const std::string md = (test_support::temp_dir("validate", "large") / "cases.md").string();
  const auto [code, out] = run_fsdpsim(
      "validate " + std::string(FSDPSIM_CONFIGS_DIR) +
      "/validation/cases.csv --where source=llm-foundry@fe973f0 --where gpus=64 --where "
      "model=MPT-125m --md " +
      md);
  ASSERT_EQ(code, 0) << out;
  const std::string text = test_support::read_file(md);
  const auto section = text.find("## Cases off by more than 25%");
  const auto all = text.find("## Cases\n");
  ASSERT_NE(section, std::string::npos) << text;
  ASSERT_NE(all, std::string::npos) << text;
  const std::string listed = text.substr(section, all - section);
  EXPECT_NE(listed.find("1 of 4."), std::string::npos) << listed;
  EXPECT_NE(listed.find("lffe973f0-a10040-mpt125m-s2048-g64-mb4-ac0-1"), std::string::npos)
      << listed;
  EXPECT_EQ(listed.find("mb16"), std::string::npos) << listed;
  // With none beyond it, the section says so, without an empty table.
  const auto [none_code, none_md] = run_fsdpsim("validate " + kData + "small_cases.csv --md -");
  ASSERT_EQ(none_code, 0) << none_md;
  const std::string none = none_md.substr(none_md.find("## Cases off by more than 25%"));
  EXPECT_EQ(none.rfind("## Cases off by more than 25%\n\n0 of 4.\n\n## Cases\n", 0), 0U) << none;
}

TEST(ValidationCases, TheAttentionColumnChoosesTheKernel) {
  const auto cases =
      read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv");
  std::set<std::string> seen;
  for (const ValidationCase& c : cases) {
    const CaseScenario s = scenario_for_case(c, "cases.csv");
    if (s.document.is_null()) continue;
    const nlohmann::json& t = s.document["training"];
    const std::string attention = c.get("attention");
    seen.insert(attention);
    if (attention == "unfused") {
      EXPECT_EQ(t["flash_attention"], false) << c.get("case_id");
    } else {
      EXPECT_EQ(t["flash_kernel"], attention) << c.get("case_id");
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"cudnn", "flash1", "triton", "unfused"}));
}

TEST(Validate, CudnnAttentionCellSelectsTheCudnnKernel) {
  const auto cases = read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) +
                                           "/validation/measured-h200/steps.csv");
  ASSERT_FALSE(cases.empty());
  for (const ValidationCase& c : cases) {
    EXPECT_EQ(c.get("attention"), "cudnn") << c.get("case_id");
    const CaseScenario s = scenario_for_case(c, "steps.csv");
    EXPECT_EQ(s.document["training"]["flash_kernel"], "cudnn") << c.get("case_id");
  }
}

TEST(Validate, WhereKeepsTheMatchingRows) {
  const auto [code, out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --where gpu=a100-sxm-80gb --json -");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["evaluated"], 2);
  const auto [code2, out2] =
      run_fsdpsim("validate " + kData + "small_cases.csv --where gpu!=a100-sxm-80gb --json -");
  ASSERT_EQ(code2, 0) << out2;
  const nlohmann::json j = nlohmann::json::parse(out2);
  EXPECT_EQ(j["evaluated"].get<int>() + j["skipped"].get<int>(), 2);
  const auto [code3, out3] = run_fsdpsim("validate " + kData + "small_cases.csv --where gpus");
  EXPECT_EQ(code3, 2) << out3;
  EXPECT_NE(out3.find("expected COLUMN=VALUE"), std::string::npos) << out3;
  const auto [code4, out4] = run_fsdpsim("validate " + kData + "small_cases.csv --where nosuch=1");
  EXPECT_EQ(code4, 2) << out4;
  EXPECT_NE(out4.find("no column \"nosuch\""), std::string::npos) << out4;
}

TEST(Validate, GroupBySummarizesEachValueOfAColumn) {
  const fs::path md = test_support::temp_dir("validate") / "group_by.md";
  const auto [code, out] = run_fsdpsim("validate " + kData +
                                       "small_cases.csv --group-by gpus --group-by gpu --json - "
                                       "--md " +
                                       md.string());
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  // small_cases.csv: three rows on 8 GPUs, one on 128; two H100 rows, two A100-80GB.
  EXPECT_EQ(j["by_column"]["gpus"]["8"]["count"], 3);
  EXPECT_EQ(j["by_column"]["gpus"]["128"]["count"], 1);
  EXPECT_EQ(j["by_column"]["gpu"]["h100-sxm-80gb"]["count"], 2);
  double signed_sum = 0.0;
  for (const nlohmann::json& c : j["cases"]) {
    if (c["case_id"].get<std::string>().find("-g8-") != std::string::npos)
      signed_sum += c["error"].get<double>();
  }
  EXPECT_NEAR(j["by_column"]["gpus"]["8"]["mean_error"].get<double>(), signed_sum / 3.0, 1e-12);
  std::ifstream in(md);
  std::stringstream text;
  text << in.rdbuf();
  const std::string t = text.str();
  const std::size_t table = t.find("## tokens/s/GPU by gpus");
  ASSERT_NE(table, std::string::npos) << t;
  // Numeric columns in numeric order; a one-row group has no rank correlation.
  EXPECT_LT(t.find("| 8 | 3 |", table), t.find("| 128 | 1 |", table)) << t;
  EXPECT_NE(t.find("| 128 | 1 |", table), std::string::npos);
  EXPECT_NE(t.find("| – |", t.find("| 128 | 1 |", table)), std::string::npos) << t;
  // An empty cell is a value of its own, named so in the markdown.
  const fs::path empty_md = test_support::temp_dir("validate") / "group_by_empty.md";
  const auto [empty, empty_out] =
      run_fsdpsim("validate " + kData +
                  "small_cases.csv --group-by measured_peak_mem_gib --json - "
                  "--md " +
                  empty_md.string());
  ASSERT_EQ(empty, 0) << empty_out;
  std::ifstream empty_in(empty_md);
  std::stringstream empty_text;
  empty_text << empty_in.rdbuf();
  EXPECT_NE(empty_text.str().find("| (empty) | 4 |"), std::string::npos) << empty_text.str();
  EXPECT_EQ(nlohmann::json::parse(empty_out)["by_column"]["measured_peak_mem_gib"][""]["count"], 4);
  // A column asked for twice is summarized once.
  const auto [twice, twice_out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --group-by gpus --group-by gpus --json -");
  ASSERT_EQ(twice, 0) << twice_out;
  EXPECT_EQ(nlohmann::json::parse(twice_out)["by_column"]["gpus"]["8"]["count"], 3);
  const auto [bad, bad_out] =
      run_fsdpsim("validate " + kData + "small_cases.csv --group-by nosuch");
  EXPECT_EQ(bad, 2) << bad_out;
  EXPECT_NE(bad_out.find("--group-by: the cases file has no column \"nosuch\""), std::string::npos)
      << bad_out;
}

// A row that prints only TFLOPS (the 2022 AWS blog's) joins no tokens/s group.
TEST(Validate, TflopsOnlyRowsMakeNoEmptyTokenGroups) {
  const auto [code, out] =
      run_fsdpsim("validate " + kData + "tflops_only_row.csv --group-by source --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["evaluated"], 2);
  EXPECT_EQ(j["tokens_per_s"]["count"], 1);
  EXPECT_EQ(j["tflops"]["count"], 2);  // the blog's hardware TFLOPS, the HEAD row's model TFLOPS
  EXPECT_FALSE(j["by_source"].contains("pytorch-aws-blog-2022")) << j["by_source"].dump();
  EXPECT_FALSE(j["by_column"]["source"].contains("pytorch-aws-blog-2022"));
  EXPECT_EQ(j["by_source"]["llm-foundry@HEAD"]["count"], 1);
}

// Calibrating with the GEMMs measured on the GPU that ran the steps must not make the steps'
// predictions worse than the preset's GEMM model does: the calibrated path divides measured
// GEMM times by the same sustained_compute_fraction that was fitted with the model's, so a
// model far from the measurements (or a fraction fitted to hide that) shows up here. The three
// sets of configs/validation/measured-h200 and configs/calibration/h200-sxm-141gb-measured.json.
// --calibration is a command-line option: a relative path is the working directory's, not the
// CSV's folder's (where hardware.calibration in a row's scenario would look).
TEST(Validate, CalibrationPathIsRelativeToTheWorkingDirectory) {
  const fs::path profile =
      fs::path(FSDPSIM_CONFIGS_DIR) / "calibration" / "h200-sxm-141gb-measured.json";
  const fs::path relative = fs::relative(profile, fs::current_path());
  ASSERT_FALSE(relative.is_absolute());
  const auto [code, out] = run_fsdpsim("validate " + std::string(FSDPSIM_CONFIGS_DIR) +
                                       "/validation/measured-h200/steps.csv --calibration " +
                                       relative.string() + " --json -");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["skipped"], 0) << j["skipped_cases"].dump(1);
  EXPECT_EQ(j["evaluated"], 7);
  // The report says which profile priced the rows, and what it priced of each (one GPU: no
  // collective; its GEMMs measured); without one, none.
  EXPECT_EQ(j["calibration"], relative.string());
  for (const nlohmann::json& c : j["cases"]) {
    EXPECT_GT(c["calibration"]["gemms_calibrated"].get<int>(), 0) << c.dump();
    EXPECT_EQ(c["calibration"]["collectives_calibrated"], 0) << c.dump();
    EXPECT_EQ(c["calibration"]["collectives_fallback"], 0) << c.dump();
  }
  const auto [plain_code, plain_out] = run_fsdpsim("validate " + std::string(FSDPSIM_CONFIGS_DIR) +
                                                   "/validation/measured-h200/steps.csv --json -");
  ASSERT_EQ(plain_code, 0) << plain_out;
  EXPECT_TRUE(nlohmann::json::parse(plain_out)["calibration"].is_null());

  // --set hardware.calibration is the same option, not a path from the CSV's folder; two
  // profiles are one too many.
  const std::string steps =
      std::string(FSDPSIM_CONFIGS_DIR) + "/validation/measured-h200/steps.csv";
  const auto [set_code, set_out] = run_fsdpsim(
      "validate " + steps + " --set hardware.calibration=" + relative.string() + " --json -");
  ASSERT_EQ(set_code, 0) << set_out;
  EXPECT_EQ(nlohmann::json::parse(set_out), j);
  const auto [two_code, two_out] =
      run_fsdpsim("validate " + steps + " --calibration " + relative.string() +
                  " --set hardware.calibration=a100-sxm-80gb");
  EXPECT_EQ(two_code, 2) << two_out;
  EXPECT_NE(two_out.find("--set hardware.calibration=a100-sxm-80gb: --calibration " +
                         relative.string() + " names the profile already"),
            std::string::npos)
      << two_out;
  // Among --set options the last holds, as for any key; an empty name is no profile.
  const auto [last_code, last_out] =
      run_fsdpsim("validate " + steps + " --set hardware.calibration=a100-sxm-80gb" +
                  " --set hardware.calibration=" + relative.string() + " --json -");
  ASSERT_EQ(last_code, 0) << last_out;
  EXPECT_EQ(nlohmann::json::parse(last_out), j);
  const auto [empty_code, empty_out] =
      run_fsdpsim("validate " + steps + " --set hardware.calibration=");
  EXPECT_EQ(empty_code, 2) << empty_out;
  EXPECT_NE(empty_out.find("expected a profile name or path, found \"\""), std::string::npos)
      << empty_out;
}

// A profile measured on one node prices the 8-GPU rows' collectives, not those of rows across
// nodes: each case says what the profile priced, the markdown names the rows it priced no
// collective of, and the scaling pairs that mix the two.
TEST(Validate, EachRowSaysWhatTheCalibrationPriced) {
  const fs::path dir = test_support::temp_dir("validate", "calibration_coverage");
  const fs::path md = dir / "v.md";
  const auto [code, out] =
      run_fsdpsim("validate " + std::string(FSDPSIM_CONFIGS_DIR) +
                  "/validation/cases.csv --where gpu=a100-sxm-80gb --where "
                  "source=llm-foundry@fe973f0 --calibration a100-sxm-80gb --json - --md " +
                  md.string());
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  std::size_t one_node = 0;
  std::size_t across_nodes = 0;
  for (const nlohmann::json& c : j["cases"]) {
    const nlohmann::json& n = c["calibration"];
    const bool multi_node = c["case_id"].get<std::string>().find("-g8-") == std::string::npos;
    EXPECT_EQ(n["gemms_calibrated"], 0) << c.dump();  // the profile has no GEMM
    EXPECT_GT(n["gemms_fallback"].get<int>(), 0) << c.dump();
    if (multi_node) {
      ++across_nodes;
      EXPECT_EQ(n["collectives_calibrated"], 0) << c.dump();
      EXPECT_GT(n["collectives_fallback"].get<int>(), 0) << c.dump();
    } else {
      ++one_node;
      EXPECT_GT(n["collectives_calibrated"].get<int>(), 0) << c.dump();
      EXPECT_EQ(n["collectives_fallback"], 0) << c.dump();
    }
  }
  EXPECT_GT(one_node, 0U);
  EXPECT_GT(across_nodes, 0U);
  const std::string text = test_support::read_file(md);
  EXPECT_NE(text.find(fmt::format("Of the {} rows, those whose every collective the fallback "
                                  "model priced: {} (`",
                                  one_node + across_nodes, across_nodes)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("; those whose every GEMM it priced: all"), std::string::npos) << text;
  EXPECT_NE(text.find("pairs compare a row whose collectives the calibration profile priced with "
                      "one whose collectives the model priced"),
            std::string::npos)
      << text;
}

TEST(Validate, OwnGemmMeasurementsPredictOwnStepsNoWorseThanThePreset) {
  const std::string measured = std::string(FSDPSIM_CONFIGS_DIR) + "/validation/measured-h200/";
  for (const std::string set : {"steps.csv", "heldout/steps.csv", "compiled/steps.csv"}) {
    const auto [code, out] = run_fsdpsim("validate " + measured + set + " --json -");
    ASSERT_EQ(code, 0) << out;
    const auto [calibrated_code, calibrated_out] = run_fsdpsim(
        "validate " + measured + set + " --calibration h200-sxm-141gb-measured --json -");
    ASSERT_EQ(calibrated_code, 0) << calibrated_out;
    const double preset = nlohmann::json::parse(out)["tokens_per_s"]["mape"].get<double>();
    const double calibrated =
        nlohmann::json::parse(calibrated_out)["tokens_per_s"]["mape"].get<double>();
    EXPECT_LE(calibrated, preset + 0.01) << set;
  }
}

TEST(Validate, FitFindsAGlobalValueNoWorseThanThePresets) {
  const std::string rows = kData + "small_cases.csv --where gpu=a100-sxm-80gb --json -";
  const auto [code, out] = run_fsdpsim("validate " + rows);
  ASSERT_EQ(code, 0) << out;
  const auto [fit_code, fit_out] =
      run_fsdpsim("validate " + rows + " --fit hardware.gpu.sustained_compute_fraction=0.3:1");
  ASSERT_EQ(fit_code, 0) << fit_out;
  const nlohmann::json plain = nlohmann::json::parse(out);
  const nlohmann::json fitted = nlohmann::json::parse(fit_out);
  const double value = fitted["fit"]["value"].get<double>();
  EXPECT_GT(value, 0.3);
  EXPECT_LE(value, 1.0);
  EXPECT_DOUBLE_EQ(fitted["fit"]["mape"].get<double>(),
                   fitted["tokens_per_s"]["mape"].get<double>());
  EXPECT_LE(fitted["tokens_per_s"]["mape"].get<double>(),
            plain["tokens_per_s"]["mape"].get<double>() + 1e-9);
  const auto [bad, bad_out] = run_fsdpsim("validate " + rows + " --fit x=1:0.5");
  EXPECT_EQ(bad, 2) << bad_out;
  EXPECT_NE(bad_out.find("expected LO < HI"), std::string::npos) << bad_out;
  // Without CPU offload no row moves data over PCIe: there is nothing to fit.
  const auto [idle, idle_out] =
      run_fsdpsim("validate " + rows + " --fit hardware.node.pcie_GBps=10:30");
  EXPECT_EQ(idle, 2) << idle_out;
  EXPECT_NE(idle_out.find("hardware.node.pcie_GBps: the tokens/s MAPE is the same"),
            std::string::npos)
      << idle_out;
  // A key --set gives as well has no value to fit; a key whose values are not numbers is refused
  // at the user's LO, not at a value the search tried.
  const auto [both, both_out] =
      run_fsdpsim("validate " + rows + " --fit hardware.gpu.sustained_compute_fraction=0.3:1" +
                  " --set hardware.gpu.sustained_compute_fraction=0.7");
  EXPECT_EQ(both, 2) << both_out;
  EXPECT_NE(both_out.find("--fit: hardware.gpu.sustained_compute_fraction: --set "
                          "hardware.gpu.sustained_compute_fraction=0.7 gives it too"),
            std::string::npos)
      << both_out;
  const auto [flag, flag_out] =
      run_fsdpsim("validate " + rows + " --fit training.flash_attention=0:1");
  EXPECT_EQ(flag, 2) << flag_out;
  EXPECT_NE(flag_out.find("at training.flash_attention=0 no kept row"), std::string::npos)
      << flag_out;
}

}  // namespace
}  // namespace fsdpsim::app
