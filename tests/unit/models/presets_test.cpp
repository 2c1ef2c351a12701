// Every model preset in configs/models parses, validates and has the published parameter count.
// (JSON is read here, in the test; the app owns the real loader.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "models/workload.hpp"
#include "validation_cases.hpp"

namespace fsdpsim::models {
namespace {

namespace fs = std::filesystem;

const fs::path kModelsDir = fs::path(FSDPSIM_CONFIGS_DIR) / "models";

ModelFamily parse_family(const std::string& s) {
  if (s == "gpt") return ModelFamily::kGpt;
  if (s == "mpt") return ModelFamily::kMpt;
  if (s == "llama") return ModelFamily::kLlama;
  throw std::runtime_error("unknown family " + s);
}

TransformerSpec load_preset(const fs::path& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  TransformerSpec spec;
  spec.name = j.at("name").get<std::string>();
  spec.family = parse_family(j.at("family").get<std::string>());
  spec.n_layers = j.at("n_layers").get<std::int64_t>();
  spec.d_model = j.at("d_model").get<std::int64_t>();
  spec.n_heads = j.at("n_heads").get<std::int64_t>();
  spec.n_kv_heads = j.at("n_kv_heads").get<std::int64_t>();
  spec.ffn_dim = j.at("ffn_dim").get<std::int64_t>();
  spec.vocab = j.at("vocab").get<std::int64_t>();
  spec.max_seq_len = j.at("max_seq_len").get<std::int64_t>();
  spec.tied_embeddings = j.at("tied_embeddings").get<bool>();
  spec.causal_mask_buffer = j.value("causal_mask_buffer", false);
  return spec;
}

// The decoder-only transformer presets (gpt, mpt, llama); t5 and custom presets have their own
// keys and are tested through the app's loader (t5_test.cpp, custom_test.cpp).
std::vector<fs::path> preset_files() {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(kModelsDir)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const std::string family = nlohmann::json::parse(in).at("family").get<std::string>();
    if (family == "gpt" || family == "mpt" || family == "llama") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Exact counts: MPT from llm-foundry NumParams at max_seq_len 2048 (case ids in each preset's
// "source"), llama from Meta's model cards / HF configs.
const std::map<std::string, std::int64_t>& known_counts() {
  static const std::map<std::string, std::int64_t> counts = {
      {"mpt-125m", 125311488},        {"mpt-350m", 355985408},
      {"mpt-760m", 760470528},        {"mpt-1b", 1315950592},
      {"mpt-3b", 2651837440},         {"mpt-7b", 6658859008},
      {"mpt-13b", 12853954560},       {"mpt-30b", 29975214080},
      {"mpt-70b", 64862437376},       {"llama-3.1-8b", 8030261248},
      {"llama-3.1-70b", 70553706496}, {"llama-3.1-405b", 405853388800},
      {"llama-2-7b", 6738415616},     {"llama-2-13b", 13015864320},
      {"llama-2-70b", 68976648192}};
  return counts;
}

TEST(Presets, EveryPresetHasTheSchemaKeysAndValidates) {
  const std::set<std::string> keys = {
      "schema_version", "name",    "family", "n_layers",    "d_model",         "n_heads",
      "n_kv_heads",     "ffn_dim", "vocab",  "max_seq_len", "tied_embeddings", "source"};
  const std::vector<fs::path> files = preset_files();
  ASSERT_GE(files.size(), 17u);
  for (const fs::path& path : files) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::set<std::string> found;
    for (const auto& item : j.items()) found.insert(item.key());
    // The gpt presets are minGPT's models (their sources say so), with its mask buffers.
    std::set<std::string> expected = keys;
    if (j.at("family") == "gpt") expected.insert("causal_mask_buffer");
    EXPECT_EQ(found, expected) << path;
    EXPECT_EQ(j.at("schema_version").get<int>(), 1) << path;
    EXPECT_FALSE(j.at("source").get<std::string>().empty()) << path;
    const TransformerSpec spec = load_preset(path);
    EXPECT_EQ(spec.name + ".json", path.filename().string());
    EXPECT_EQ(validate(spec), "") << path;
    EXPECT_EQ(spec.tied_embeddings, spec.family == ModelFamily::kMpt) << path;
    EXPECT_EQ(spec.causal_mask_buffer, spec.family == ModelFamily::kGpt) << path;
  }
}

TEST(Presets, ParameterCountsMatchPublishedNumbers) {
  std::set<std::string> seen;
  for (const fs::path& path : preset_files()) {
    const TransformerSpec spec = load_preset(path);
    const auto it = known_counts().find(spec.name);
    if (it == known_counts().end()) continue;
    EXPECT_EQ(parameter_count(spec), it->second) << spec.name;
    seen.insert(spec.name);
  }
  EXPECT_EQ(seen.size(), known_counts().size());
}

TEST(Presets, GptPresetsHaveTheirNominalSize) {
  const std::int64_t gpt175 = parameter_count(load_preset(kModelsDir / "gpt-175b.json"));
  EXPECT_EQ(gpt175, 175215501312);  // "175B" (FSDP paper Sec. 5.4)
  const std::int64_t gpt1t = parameter_count(load_preset(kModelsDir / "gpt-1t.json"));
  EXPECT_EQ(gpt1t, 1009288038400);  // "1T" (PyTorch blog 2022)
}

TEST(Presets, MptPresetsMatchTheirValidationRowAtSeq2048) {
  int checked = 0;
  for (const testing::CsvRow& row : testing::read_validation_cases()) {
    if (row.at("source") != "llm-foundry@HEAD" || row.at("seq_len") != "2048") continue;
    std::string name = row.at("model");  // e.g. "MPT-70b"
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const fs::path path = kModelsDir / (name + ".json");
    ASSERT_TRUE(fs::exists(path)) << path;
    const TransformerSpec spec = load_preset(path);
    EXPECT_EQ(spec.n_layers, std::stoll(row.at("n_layers"))) << row.at("case_id");
    EXPECT_EQ(spec.d_model, std::stoll(row.at("d_model"))) << row.at("case_id");
    EXPECT_EQ(spec.n_heads, std::stoll(row.at("n_heads"))) << row.at("case_id");
    EXPECT_EQ(spec.ffn_dim, std::stoll(row.at("ffn_dim"))) << row.at("case_id");
    EXPECT_EQ(spec.vocab, std::stoll(row.at("vocab"))) << row.at("case_id");
    EXPECT_EQ(parameter_count(spec), testing::num_params_from_notes(row)) << row.at("case_id");
    ++checked;
  }
  EXPECT_GT(checked, 8);
}

}  // namespace
}  // namespace fsdpsim::models
