// Every shipped preset parses strictly, validates, and cites a source for each of its values.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "hardware/gpu_spec.hpp"
#include "preset_loader.hpp"
#include "tests/unit/scratch_folder.hpp"

namespace fsdpsim::hardware {
namespace {

TEST(HardwarePresets, TheFourDocumentedPresetsExist) {
  std::set<std::string> names;
  for (const auto& path : testing::preset_files()) names.insert(path.stem().string());
  for (const char* expected :
       {"a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb"}) {
    EXPECT_TRUE(names.contains(expected)) << expected;
  }
}

TEST(HardwarePresets, EveryPresetParsesAndValidates) {
  for (const auto& path : testing::preset_files()) {
    SCOPED_TRACE(path.string());
    ClusterSpec spec;
    ASSERT_NO_THROW(spec = testing::load_preset_file(path, 4));
    EXPECT_EQ(validate(spec), "");
    EXPECT_EQ(spec.gpu.name, path.stem().string());
    EXPECT_GT(to_gib(spec.gpu.usable_memory()), 30.0);
  }
}

TEST(HardwarePresets, EveryValueCitesASource) {
  for (const auto& path : testing::preset_files()) {
    SCOPED_TRACE(path.string());
    std::ifstream in(path);
    const nlohmann::json doc = nlohmann::json::parse(in);
    const nlohmann::json& sources = doc.at("sources");
    for (const char* section : {"gpu", "node"}) {
      for (const auto& [key, value] : doc.at(section).items()) {
        ASSERT_TRUE(sources.contains(key)) << "no source for /" << section << "/" << key;
        EXPECT_FALSE(sources.at(key).get<std::string>().empty());
      }
    }
  }
}

TEST(HardwarePresets, UnknownKeysAreRejected) {
  const auto dir = fsdpsim::test_support::temp_dir("hardware_preset");
  std::ifstream in(testing::preset_files().front());
  nlohmann::json doc = nlohmann::json::parse(in);
  doc["node"]["nvlink_GBs"] = 300;  // misspelled key
  const auto path = dir / "typo.json";
  std::ofstream(path) << doc.dump();
  EXPECT_THROW(testing::load_preset_file(path), std::runtime_error);
}

}  // namespace
}  // namespace fsdpsim::hardware
