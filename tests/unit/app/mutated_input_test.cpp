// Bad input ends as a ConfigError (exit 2, with the file, the JSON path or CSV column, and what
// was expected against what was found), never as another exception (exit 1, "internal error")
// or a crash. Shipped scenarios, changed at one to three places drawn by a fixed seed (a key
// removed, a value replaced by one of the wrong type or out of range, a number scaled), go
// through run_command as `fsdpsim run FILE --json OUT` does (loaded, simulated, the expect block
// judged); published validation cases, with one to three cells replaced by wrong or odd values,
// through validate_command. Each must run or be refused with a ConfigError. The sanitizer build
// runs the same draws, so an out-of-range read or an overflow on the way fails there too.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sim/app/config_error.hpp"
#include "sim/app/csv_records.hpp"
#include "sim/app/csv_table.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/run_command.hpp"
#include "sim/app/validate_command.hpp"
#include "tests/unit/scratch_folder.hpp"

namespace fsdpsim::app {
namespace {

// A fixed seed: the draws are the same on every run and platform (std::mt19937's output is
// specified by the standard; its distributions are not, so none is used).
constexpr std::uint32_t kSeed = 20261206;
constexpr int kScenarioDraws = 400;
constexpr int kCaseDraws = 200;

std::size_t below(std::mt19937& rng, std::size_t n) { return static_cast<std::size_t>(rng() % n); }

// Values a scenario key is unlikely to accept: the wrong type, zero, negative, huge, tiny.
nlohmann::json wrong_value(std::mt19937& rng) {
  static const std::array<nlohmann::json, 16> kValues = {nullptr,
                                                         true,
                                                         0,
                                                         -1,
                                                         1,
                                                         3.5,
                                                         -0.5,
                                                         1e308,
                                                         -1e308,
                                                         1e-300,
                                                         std::int64_t{1} << 62,
                                                         "",
                                                         "x",
                                                         nlohmann::json::array(),
                                                         nlohmann::json::array({1}),
                                                         nlohmann::json::object()};
  return kValues[below(rng, kValues.size())];
}

// Every value of the document, by its JSON pointer (the root left out).
void collect_pointers(const nlohmann::json& node, const nlohmann::json::json_pointer& at,
                      std::vector<nlohmann::json::json_pointer>& out) {
  if (!at.empty()) out.push_back(at);
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) collect_pointers(value, at / key, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) collect_pointers(node[i], at / i, out);
  }
}

// One change at a random place; returns what it did, for the failure message.
std::string mutate(nlohmann::json& document, std::mt19937& rng) {
  std::vector<nlohmann::json::json_pointer> pointers;
  collect_pointers(document, nlohmann::json::json_pointer(), pointers);
  const nlohmann::json::json_pointer at = pointers[below(rng, pointers.size())];
  nlohmann::json& value = document[at];
  const nlohmann::json::json_pointer parent = at.parent_pointer();
  switch (below(rng, 4)) {
    case 0:
      if (document[parent].is_object()) {
        document[parent].erase(at.back());
        return at.to_string() + " removed";
      }
      break;
    case 1:
      if (value.is_number()) {
        static const std::array<double, 6> kFactors = {0.0, -1.0, 1000.0, 1e6, 1e-3, 1.5};
        value = value.get<double>() * kFactors[below(rng, kFactors.size())];
        return at.to_string() + " scaled to " + value.dump();
      }
      break;
    default:
      break;
  }
  value = wrong_value(rng);
  return at.to_string() + " = " + value.dump();
}

std::vector<std::filesystem::path> shipped_scenarios() {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path root = std::filesystem::path(FSDPSIM_SOURCE_DIR) / "scenarios";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::filesystem::path& p = entry.path();
    // Sweep files hold grids that `sweep` expands; `run` takes the others.
    if (p.extension() != ".json" || p.parent_path().filename() == "sweeps") continue;
    files.push_back(p);
  }
  std::sort(files.begin(), files.end());  // the directory's order is the file system's
  return files;
}

// What a command did with the input: ran it, refused it as bad input (a ConfigError), or let
// another exception escape (the test's failure). The command's summary on std::cout is dropped.
struct Handling {
  bool refused = false;
  std::string escaped;
};

template <typename Command>
Handling handling_of(Command&& command) {
  std::ostringstream sink;
  std::streambuf* const previous = std::cout.rdbuf(sink.rdbuf());
  Handling h;
  try {
    command();
  } catch (const ConfigError&) {
    h.refused = true;
  } catch (const std::exception& e) {
    h.escaped = e.what();
  }
  std::cout.rdbuf(previous);
  return h;
}

TEST(MutatedInput, ShippedScenariosSimulateOrAreRefusedAsBadInput) {
  const std::vector<std::filesystem::path> files = shipped_scenarios();
  ASSERT_GE(files.size(), 10u);
  const std::filesystem::path dir = test_support::temp_dir("mutated_input", "scenarios");
  std::mt19937 rng(kSeed);
  int refused = 0;
  for (int draw = 0; draw < kScenarioDraws; ++draw) {
    const std::filesystem::path& file = files[below(rng, files.size())];
    nlohmann::json document = nlohmann::json::parse(read_text_file(file.string()));
    // The copy is run from another folder: a baseline it names is made absolute first.
    if (document.contains("expect") && document["expect"].is_object() &&
        document["expect"].contains("baseline") && document["expect"]["baseline"].is_string()) {
      document["expect"]["baseline"] =
          (file.parent_path() / document["expect"]["baseline"].get<std::string>()).string();
    }
    std::string changes;
    for (std::size_t n = 1 + below(rng, 3); n > 0; --n) changes += mutate(document, rng) + "; ";
    // As `fsdpsim run FILE --json OUT` runs it: loaded, simulated, its expect block judged.
    RunOptions options;
    options.scenario = (dir / "scenario.json").string();
    options.json_path = (dir / "result.json").string();
    options.configs_dir = FSDPSIM_CONFIGS_DIR;
    std::ofstream(options.scenario) << document.dump();
    const Handling h = handling_of([&] { static_cast<void>(run_command(options)); });
    refused += h.refused ? 1 : 0;
    EXPECT_EQ(h.escaped, "") << "draw " << draw << ": " << file.filename() << " with " << changes;
  }
  // The draws reach the checks: most changes are refused, and not all (some values are legal).
  EXPECT_GT(refused, kScenarioDraws / 2);
  EXPECT_LT(refused, kScenarioDraws);
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (const std::string& f : fields) line.append(line.empty() ? "" : ",").append(csv_field(f));
  return line + "\n";
}

TEST(MutatedInput, ValidationCasesSimulateOrAreRefusedAsBadInput) {
  const std::string published = std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv";
  const std::vector<CsvRecord> records = parse_csv_records(read_text_file(published), published);
  ASSERT_FALSE(records.empty());
  const std::vector<std::string>& columns = records.front().fields;
  const auto gpus =
      static_cast<std::size_t>(std::find(columns.begin(), columns.end(), "gpus") - columns.begin());
  ASSERT_LT(gpus, columns.size());
  // Small jobs only: the draws are about the checks, not the simulation's size.
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const std::vector<std::string>& f = records[i].fields;
    if (f.size() == columns.size() && !f[gpus].empty() && std::stod(f[gpus]) <= 64)
      rows.push_back(f);
  }
  ASSERT_GE(rows.size(), 100u);
  static const std::array<const char*, 15> kCells = {"",          "-1",
                                                     "0",         "1e308",
                                                     "nan",       "inf",
                                                     "x",         "true",
                                                     "3.5",       "99999999999999999999",
                                                     "bf16",      "HYBRID_SHARD",
                                                     "selective", "7",
                                                     "a,\"b"};
  const std::filesystem::path dir = test_support::temp_dir("mutated_input");
  std::mt19937 rng(kSeed);
  int refused = 0;
  for (int draw = 0; draw < kCaseDraws; ++draw) {
    // Two rows, the second changed, in a CSV of their own.
    const std::vector<std::string>& other = rows[below(rng, rows.size())];
    std::vector<std::string> row = rows[below(rng, rows.size())];
    std::string changes;
    for (std::size_t n = 1 + below(rng, 3); n > 0; --n) {
      const std::size_t column = below(rng, columns.size());
      row[column] = kCells[below(rng, kCells.size())];
      changes += columns[column] + "=" + row[column] + "; ";
    }
    ValidateOptions options;
    options.cases = (dir / "cases.csv").string();
    options.json_path = (dir / "validate.json").string();
    options.configs_dir = FSDPSIM_CONFIGS_DIR;
    std::ofstream(options.cases) << csv_line(columns) << csv_line(other) << csv_line(row);
    // As `fsdpsim validate` runs it.
    const Handling o = handling_of([&] { static_cast<void>(validate_command(options)); });
    refused += o.refused ? 1 : 0;
    EXPECT_EQ(o.escaped, "") << "draw " << draw << " with " << changes;
  }
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, kCaseDraws);
}

}  // namespace
}  // namespace fsdpsim::app
