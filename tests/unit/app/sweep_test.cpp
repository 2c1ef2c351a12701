// What-if sweeps: the grid (parsing, Cartesian order, the scenario's sweep block), the sweep table
// (CSV in and out, Pareto front), and `fsdpsim sweep` / `fsdpsim merge` as a user runs them: skip
// reasons, bad usage, determinism across thread counts, shards merged byte for byte, Ctrl-C.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sim/app/config_error.hpp"
#include "sim/app/csv_records.hpp"
#include "sim/app/csv_table.hpp"
#include "sim/app/merge_command.hpp"
#include "sim/app/sweep_command.hpp"
#include "sim/app/sweep_grid.hpp"
#include "test_support.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;
using test_support::read_file;

using test_support::Outcome;
using test_support::run_fsdpsim;

fs::path temp_dir() { return test_support::temp_dir("sweep"); }

fs::path tiny_scenario(const std::string& name,
                       const nlohmann::json& patch = nlohmann::json::object()) {
  return test_support::write_scenario(temp_dir(), name, test_support::tiny_llama_scenario(name),
                                      patch);
}

// A tiny scenario whose file starts with `block` as its sweep block, written by hand so that the
// block keeps its key order (a parsed object's keys are sorted).
fs::path tiny_scenario_with_sweep(const std::string& name, const std::string& block,
                                  const nlohmann::json& patch = nlohmann::json::object()) {
  const fs::path s = tiny_scenario(name, patch);
  const std::string text = read_file(s);
  std::ofstream(s) << "{\n  \"sweep\": " << block << "," << text.substr(1);
  return s;
}

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// ---- the grid ----

TEST(SweepGrid, ValuesAreParsedLikeSetValues) {
  const GridAxis a = parse_grid_option("fsdp.backward_prefetch=BACKWARD_PRE,none");
  EXPECT_EQ(a.keys, (std::vector<std::string>{"fsdp.backward_prefetch"}));
  ASSERT_EQ(a.values.size(), 2U);
  EXPECT_EQ(a.values[0], "BACKWARD_PRE");
  EXPECT_EQ(a.values[1], "none");
  const GridAxis b = parse_grid_option("training.micro_batch=1, 2,4");
  EXPECT_EQ(b.values, (std::vector<nlohmann::json>{1, 2, 4}));
  const GridAxis c = parse_grid_option("fsdp.limit_all_gathers=true,false");
  EXPECT_EQ(c.values, (std::vector<nlohmann::json>{true, false}));
  // Commas inside JSON objects, arrays and quoted strings do not split values.
  const GridAxis d =
      parse_grid_option(R"(model={"preset":"llama-3.1-8b","n_layers":2},"a,b",[1,2])");
  ASSERT_EQ(d.values.size(), 3U);
  EXPECT_EQ(d.values[0]["n_layers"], 2);
  EXPECT_EQ(d.values[1], "a,b");
  EXPECT_EQ(d.values[2], nlohmann::json::array({1, 2}));
}

struct BadGrid {
  const char* option;
  const char* expected;
};

void PrintTo(const BadGrid& bad, std::ostream* os) { *os << bad.option; }

class SweepGridBadOption : public ::testing::TestWithParam<BadGrid> {};

TEST_P(SweepGridBadOption, IsAConfigErrorThatSaysWhy) {
  try {
    parse_grid_option(GetParam().option);
    FAIL() << "accepted " << GetParam().option;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().expected), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Options, SweepGridBadOption,
    ::testing::Values(
        BadGrid{"training.micro_batch", "expected KEY=V1,V2,..."},
        BadGrid{"training.micro_batch=", "no values after '='"},
        BadGrid{"training.micro_batch=1,,2", "empty value in the list"},
        BadGrid{"training.micro_batch=1,", "empty value in the list"},
        // Left open, a bracket made one string value, a brace split in two.
        BadGrid{"training.micro_batch=[1,2", "a [bracket] or {brace} is not closed"},
        BadGrid{"model=2,{\"preset\":1", "a [bracket] or {brace} is not closed"},
        BadGrid{"training.micro_batch=1]", "']' closes a bracket that was not opened"},
        BadGrid{"model.name=\"a,b", "a quoted string is not closed"}, BadGrid{"=1,2", "empty key"},
        BadGrid{"training..micro_batch=1", "empty segment"},
        BadGrid{"training.micro_batch=1,2,1.0", "values 1 and 1.0 are the same value"},
        BadGrid{"fsdp.backward_prefetch=none,\"none\"", "value \"none\" is given twice"},
        // A preset name and the object naming it are the same model.
        BadGrid{"model=mpt-1b,{\"preset\":\"mpt-1b\"}",
                "values \"mpt-1b\" and {\"preset\":\"mpt-1b\"} are the same value"},
        // Different values the CSV would write alike: their rows could not be told apart.
        BadGrid{"training.micro_batch=1,2,\"1\"",
                "values 1 and \"1\" are both written \"1\" in the sweep's CSV"},
        BadGrid{"fsdp.limit_all_gathers=true,\"true\"",
                "values true and \"true\" are both written \"true\""},
        BadGrid{R"(model.name="e\nf","e f")", R"(values "e\nf" and "e f" are both written "e f")"},
        // Tied keys: each value an array of one value per key, each key once.
        BadGrid{"a+b=[1,2],3",
                "value 3: expected an array of 2 values, one for each of a, b, "
                "found 3"},
        BadGrid{"a+b=[1,2],[3]",
                "value [3]: expected an array of 2 values, one for each of a, "
                "b, found an array of 1"},
        BadGrid{"a+b=[1,2],[1.0,2]", "values [1,2] and [1.0,2] are the same value"},
        // Keys no simulation reads: every point would be the same.
        BadGrid{"name=a,b", "name changes no simulated result"},
        BadGrid{"expect.mfu.min=0.1,0.2", "expect.mfu.min changes no simulated result"},
        BadGrid{"training.micro_batch+model.description=[1,\"a\"],[2,\"b\"]",
                "model.description changes no simulated result"},
        BadGrid{"a+a=[1,2]", "the key \"a\" is tied twice"}, BadGrid{"a+=[1,2]", "empty key"},
        BadGrid{"a+b..c=[1,2]", "empty segment"},
        BadGrid{"a+b=[2,1e999]", "expected numbers within a double's range, found [2,1e999]"},
        BadGrid{"a=null", "a is null in every value, so the axis never sets it"},
        BadGrid{"a+b=[1,null],[2,null]",
                "b is null in every value, so the axis never sets it; leave it out of the axis"}),
    [](const ::testing::TestParamInfo<BadGrid>& param) {
      return "case" + std::to_string(param.index);
    });

// A long --grid is named by its start and length in bytes, not repeated whole: 10,000 values with
// one given twice make a message of a line that still names the value at fault.
TEST(SweepGrid, ALongGridIsNotRepeatedInItsErrors) {
  std::string option = "training.micro_batch=";
  for (int v = 1; v <= 10000; ++v) option += std::to_string(v) + ",";
  option += "17";
  try {
    parse_grid_option(option);
    FAIL() << "accepted a value given twice";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 200U) << what;
    EXPECT_NE(what.find("--grid \"training.micro_batch=1,2,3,"), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("...\" ({} bytes)", option.size())), std::string::npos) << what;
    EXPECT_NE(what.find("value 17 is given twice"), std::string::npos) << what;
  }
}

// Tied keys are one axis: each of its values sets every key (null removes one, as --set does),
// and the table writes it as one column named as the axis is, holding each value's array.
TEST(SweepGrid, TiedKeysAreOneAxisThatSetsEachKey) {
  const GridAxis tied =
      parse_grid_option(R"(fsdp.version + fsdp.backward_prefetch=[1,"BACKWARD_PRE"],[2,null])");
  EXPECT_EQ(tied.keys, (std::vector<std::string>{"fsdp.version", "fsdp.backward_prefetch"}));
  EXPECT_EQ(tied.name(), "fsdp.version+fsdp.backward_prefetch");
  EXPECT_EQ(tied.value_of(1, 0), 2);
  EXPECT_TRUE(tied.value_of(1, 1).is_null());
  const std::vector<GridAxis> axes = {parse_grid_option("a=x,y"), tied};
  ASSERT_EQ(grid_point_count(axes), 4);
  EXPECT_EQ(grid_point_overrides(axes, 1),
            (std::vector<std::string>{"a=\"x\"", "fsdp.version=2", "fsdp.backward_prefetch=null"}));
  EXPECT_EQ(grid_point_labels(axes, 2), (std::vector<std::string>{"y", "[1,\"BACKWARD_PRE\"]"}));
  EXPECT_EQ(grid_axis_names(axes),
            (std::vector<std::string>{"a", "fsdp.version+fsdp.backward_prefetch"}));
  EXPECT_EQ(keys_of_grid_column("a.b+c"), (std::vector<std::string>{"a.b", "c"}));
  EXPECT_EQ(keys_of_grid_column("a.b"), (std::vector<std::string>{"a.b"}));
  // An axis of one key keeps its sweep id: the id hashes the axis's name and values.
  EXPECT_EQ(sweep_fingerprint({}, {parse_grid_option("a=1,2")}, {}),
            sweep_fingerprint({}, {GridAxis{{"a"}, {1, 2}, "x"}}, {}));
  EXPECT_NE(sweep_fingerprint({}, {parse_grid_option("a+b=[1,2]")}, {}),
            sweep_fingerprint({}, {parse_grid_option("a=1"), parse_grid_option("b=2")}, {}));
}

// An axis replaces another only for the same keys in the same order; a key on two axes otherwise
// is refused, in the block, on the command line and between them.
TEST(SweepGrid, AKeyIsSweptByOneAxis) {
  const std::vector<GridAxis> file = parse_sweep_block(
      nlohmann::json::parse(R"({"a+b": [[1, 2], [3, 4]], "c": [1]})"), "s.json", {"a+b", "c"});
  ASSERT_EQ(file.size(), 2U);
  EXPECT_EQ(file[0].origin, "s.json: /sweep/a+b");
  const std::vector<GridAxis> replaced = combine_axes(file, {parse_grid_option("a+b=[5,6]")});
  ASSERT_EQ(replaced.size(), 2U);
  EXPECT_EQ(replaced[0].values, (std::vector<nlohmann::json>{nlohmann::json::array({5, 6})}));
  const auto refused = [](const std::function<void()>& f, const std::string& expected) {
    try {
      f();
      ADD_FAILURE() << "accepted; expected " << expected;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused([&] { combine_axes(file, {parse_grid_option("b+a=[6,5]")}); },
          "--grid b+a: \"b\" is swept by s.json: /sweep/a+b as a+b; a --grid replaces a file's "
          "axis only for the same keys in the same order");
  refused(
      [&] {
        combine_axes({}, {parse_grid_option("a+b=[1,2]"), parse_grid_option("b=3")});
      },
      "--grid b: \"b\" is swept by --grid a+b too; give each key one axis");
  refused(
      [&] {
        parse_sweep_block(nlohmann::json::parse(R"({"a+b": [[1, 2]], "b": [1]})"), "s.json",
                          {"a+b", "b"});
      },
      "s.json: /sweep/b: \"b\" is swept by /sweep/a+b too");
  refused(
      [&] {
        parse_sweep_block(nlohmann::json::parse(R"({"a+b": [[1, 2], 3]})"), "s.json", {"a+b"});
      },
      "s.json: /sweep/a+b/1: expected an array of 2 values, one for each of a, b, found 3");
  // A file's string is a string, whatever it holds (only --grid reads text that may not parse).
  refused(
      [&] { parse_sweep_block(nlohmann::json::parse(R"({"a+b": ["[1,8]"]})"), "s.json", {"a+b"}); },
      "s.json: /sweep/a+b/0: expected an array of 2 values, one for each of a, b, found \"[1,8]\"");
}

TEST(SweepGrid, CartesianProductVariesTheFirstAxisSlowest) {
  const std::vector<GridAxis> axes = {parse_grid_option("a=1,2"), parse_grid_option("b=x,y,z")};
  ASSERT_EQ(grid_point_count(axes), 6);
  std::vector<std::string> seen;
  for (std::int64_t i = 0; i < 6; ++i) {
    const auto o = grid_point_overrides(axes, i);
    seen.push_back(o[0] + " " + o[1]);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a=1 b=\"x\"", "a=1 b=\"y\"", "a=1 b=\"z\"",
                                            "a=2 b=\"x\"", "a=2 b=\"y\"", "a=2 b=\"z\""}));
  EXPECT_EQ(grid_point_labels(axes, 5), (std::vector<std::string>{"2", "z"}));
  EXPECT_EQ(grid_point_count({}), 1);
}

// A grid past 10 million points is refused with each axis's size and the scenario file, so the
// user sees which axis to split.
TEST(SweepGrid, AGridTooLargeNamesItsAxesAndTheFile) {
  std::string values;
  for (int v = 1; v <= 40; ++v) values += fmt::format("{}{}", v > 1 ? "," : "", v);
  std::string grid;
  for (const char* key : {"training.micro_batch", "training.seq_len", "training.global_batch",
                          "fsdp.max_inflight_all_gathers", "model.n_layers"}) {
    grid += fmt::format(" --grid {}={}", key, values);
  }
  const fs::path p = tiny_scenario("huge_grid");
  const Outcome o = run_fsdpsim("sweep " + p.string() + grid);
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("huge_grid.json: the grid (40 training.micro_batch x 40 training.seq_len "
                          "x 40 training.global_batch x 40 fsdp.max_inflight_all_gathers x 40 "
                          "model.n_layers) has more than 10000000 points"),
            std::string::npos)
      << o.output;
}

TEST(SweepGrid, FileAxesComeFirstAndAGridForTheSameKeyReplacesThem) {
  const nlohmann::json block = {{"training.micro_batch", {1, 2}},
                                {"fsdp.backward_prefetch", {"BACKWARD_PRE", "none"}}};
  // The parsed JSON keeps keys sorted; the file's order decides the axis order.
  const auto file_axes =
      parse_sweep_block(block, "s.json", {"training.micro_batch", "fsdp.backward_prefetch"});
  ASSERT_EQ(file_axes.size(), 2U);
  EXPECT_EQ(file_axes[0].name(), "training.micro_batch");
  const auto axes =
      combine_axes(file_axes, {parse_grid_option("fsdp.backward_prefetch=BACKWARD_POST"),
                               parse_grid_option("fsdp.limit_all_gathers=true,false")});
  ASSERT_EQ(axes.size(), 3U);
  EXPECT_EQ(axes[0].name(), "training.micro_batch");
  EXPECT_EQ(axes[1].name(), "fsdp.backward_prefetch");
  EXPECT_EQ(axes[1].values, (std::vector<nlohmann::json>{"BACKWARD_POST"}));
  EXPECT_EQ(axes[2].name(), "fsdp.limit_all_gathers");
  EXPECT_THROW(combine_axes({}, {parse_grid_option("a=1"), parse_grid_option("a=2")}), ConfigError);
}

TEST(SweepGrid, SweepKeysKeepTheFileOrder) {
  const fs::path p = temp_dir() / "ordered.json";
  std::ofstream(p) << R"({"schema_version": 1, "sweep": {"z.b": [1], "a.c": [2], "m.d": [3]}})";
  EXPECT_EQ(sweep_keys_in_file_order(p), (std::vector<std::string>{"z.b", "a.c", "m.d"}));
}

TEST(SweepGrid, BadSweepBlocksNameTheFileAndPath) {
  const auto message = [](const nlohmann::json& block) {
    try {
      parse_sweep_block(block, "s.json", {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(nlohmann::json::array()),
            "s.json: /sweep: expected an object of KEY: [values], found an empty array");
  EXPECT_EQ(message(nlohmann::json::object()),
            "s.json: /sweep: expected an object of KEY: [values], found an empty object");
  EXPECT_EQ(message({{"training.micro_batch", 2}}),
            "s.json: /sweep/training.micro_batch: expected a non-empty array of values, found the "
            "number 2");
  EXPECT_EQ(
      message({{"training.micro_batch", nlohmann::json::array()}}),
      "s.json: /sweep/training.micro_batch: expected a non-empty array of values, found an empty "
      "array");
  EXPECT_EQ(message({{"training.micro_batch", {1, 2, 2}}}),
            "s.json: /sweep/training.micro_batch/2: value 2 is given twice; list each value once");
  // The first value, in the order given, that repeats an earlier one; whatever their order by
  // value, and across integer and float.
  EXPECT_EQ(message({{"training.micro_batch", {8, 4, 2, 1, 2.0, 4, 8}}}),
            "s.json: /sweep/training.micro_batch/4: values 2 and 2.0 are the same value; list each "
            "value once");
  EXPECT_EQ(message({{"training.seq_len", {4096, 512, 1024, 2048, 512}}}),
            "s.json: /sweep/training.seq_len/4: value 512 is given twice; list each value once");
  EXPECT_EQ(message({{"hardware", {{{"preset", "h100-sxm-80gb"}}, "h100-sxm-80gb"}}}),
            "s.json: /sweep/hardware/1: values {\"preset\":\"h100-sxm-80gb\"} and "
            "\"h100-sxm-80gb\" are the same value; list each value once");
  // Elsewhere a string is only a string.
  EXPECT_EQ(message({{"fsdp.backward_prefetch", {"none", {{"preset", "none"}}}}}), "accepted");
}

TEST(SweepGrid, ShardsAreKOfN) {
  const Shard s = parse_shard("2/3");
  EXPECT_EQ(s.k, 2);
  EXPECT_EQ(s.n, 3);
  // Two axes of 3 values (index = 3 * a + b), dealt in index order to the slice, among the next
  // with room, holding fewest points that share a value with the point: 0, 1, 2 to slices 1, 2,
  // 3; 3 (a = 1, b = 0) shares b = 0 with slice 1 and a with none, so it goes to slice 2; ... The
  // slices are 0 5 7 | 1 3 8 | 2 4 6: every value of each axis once in each, where index % 3 would
  // give each slice one value of b.
  const std::vector<GridAxis> two = {parse_grid_option("hardware.nodes=1,2,4"),
                                     parse_grid_option("training.micro_batch=1,2,4")};
  EXPECT_EQ(s.indices(two), (std::vector<std::int64_t>{1, 3, 8}));
  EXPECT_EQ(s.slice_of(two, 5), 1);
  EXPECT_EQ(s.slice_of(two, 6), 3);
  // Far more slices than points: the first nine get one point each, in index order, the rest
  // none.
  EXPECT_EQ((Shard{1, 1'000'000'000'000}.indices(two)), (std::vector<std::int64_t>{0}));
  EXPECT_EQ((Shard{2, 1'000'000'000'000}.indices(two)), (std::vector<std::int64_t>{1}));
  EXPECT_TRUE((Shard{10, 1'000'000'000'000}.indices(two)).empty());
  // Every slice gets the grid's size / N points, rounded down or up, and of each axis value the
  // share of its points that the slice's size makes, less than two points off, whatever the grid:
  // including grids where the points' (sum of positions) modulo N, dealt in turn, gave a slice
  // one value of the last axis (2 x 3 on 3, 3 x 4 on 4, 7 x 8 on 8 slices).
  const auto axis = [](const std::string& key, int size) {
    std::string values;
    for (int v = 1; v <= size; ++v) values.append(v == 1 ? "" : ",").append(std::to_string(v));
    return parse_grid_option(key + "=" + values);
  };
  const auto grid = [&](std::vector<int> sizes) {
    static const std::array<const char*, 4> kKeys = {"hardware.nodes", "training.micro_batch",
                                                     "training.seq_len", "model.n_layers"};
    std::vector<GridAxis> axes;
    for (std::size_t a = 0; a < sizes.size(); ++a) axes.push_back(axis(kKeys[a], sizes[a]));
    return axes;
  };
  for (const auto& [axes, n] :
       std::vector<std::pair<std::vector<GridAxis>, std::int64_t>>{{grid({2, 2}), 4},
                                                                   {grid({3, 3, 2}), 4},
                                                                   {grid({3, 3, 2}), 5},
                                                                   {grid({3, 3, 2}), 16},
                                                                   {grid({2, 3}), 3},
                                                                   {grid({3, 4}), 4},
                                                                   {grid({7, 8}), 8},
                                                                   {grid({10, 10, 10}), 16},
                                                                   {grid({7, 5, 8, 3}), 5},
                                                                   {grid({6, 8, 7, 3}), 11}}) {
    const std::int64_t total = grid_point_count(axes);
    std::int64_t covered = 0;
    for (std::int64_t k = 1; k <= n; ++k) {
      const std::vector<std::int64_t> slice = Shard{k, n}.indices(axes);
      const auto size = static_cast<std::int64_t>(slice.size());
      EXPECT_TRUE(size == total / n || size == (total + n - 1) / n) << n << " " << k << " " << size;
      covered += size;
      for (std::size_t a = 0; a < axes.size(); ++a) {
        const auto m = static_cast<std::int64_t>(axes[a].values.size());
        std::vector<std::int64_t> per_value(axes[a].values.size(), 0);
        for (const std::int64_t index : slice) ++per_value[grid_coordinates(axes, index)[a]];
        for (std::size_t v = 0; v < per_value.size(); ++v) {
          // The slice's share of value v's total / m points: size / m.
          const double share = static_cast<double>(size) / static_cast<double>(m);
          EXPECT_LT(std::abs(static_cast<double>(per_value[v]) - share), 2.0)
              << "grid of " << total << " on " << n << ": slice " << k << ", axis " << a
              << " value " << v << ": " << per_value[v] << " points, share " << share;
        }
      }
    }
    EXPECT_EQ(covered, total);
  }
  // A grid whose counts would not fit memory to deal is refused, with the most slices that do.
  const std::vector<GridAxis> wide = {axis("training.global_batch", 5000)};
  EXPECT_THROW((void)(Shard{1, 4000}.indices(wide)), ConfigError);
  EXPECT_EQ((Shard{1, 3355}.indices(wide)).size(), 2U);                       // 16,775,000 counts
  EXPECT_EQ((Shard{1, 8000}.indices(wide)), (std::vector<std::int64_t>{0}));  // a point each
  for (const char* bad : {"0/3", "4/3", "3", "a/b", "1/0", "1/3x", "-1/3", ""}) {
    EXPECT_THROW(parse_shard(bad), ConfigError) << bad;
  }
}

// ---- the table ----

TEST(SweepCsv, FieldsAreQuotedAndRoundTrip) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "two lines");
  const auto fields = parse_csv_line(R"(1,"a,b","say ""hi""",,x)");
  ASSERT_TRUE(fields.has_value());
  EXPECT_EQ(*fields, (std::vector<std::string>{"1", "a,b", "say \"hi\"", "", "x"}));
  EXPECT_FALSE(parse_csv_line("\"unterminated").has_value());
  // CRLF line endings (RFC 4180; spreadsheet exports): the CR is not data.
  EXPECT_EQ(*parse_csv_line("1,\"a,b\"\r"), (std::vector<std::string>{"1", "a,b"}));
  EXPECT_EQ(*parse_csv_line("1,x\r"), (std::vector<std::string>{"1", "x"}));

  SweepTable t;
  t.grid_keys = {"training.micro_batch", "model"};
  SweepRow ok;
  ok.index = 0;
  ok.labels = {"2", R"({"n_layers":2,"preset":"x"})"};
  ok.status = PointStatus::kOk;
  ok.metrics = {0.1, 3521.2, 400, 410, 0.4, 0.41, 20.5, 21.25, 1e-05, 2};
  SweepRow skipped;
  skipped.index = 1;
  skipped.labels = {"3", "y"};
  skipped.reason = "/training/global_batch: not a multiple, \"really\"";
  skipped.metrics.fill(std::numeric_limits<double>::quiet_NaN());
  t.rows = {ok, skipped};
  const std::string csv = table_to_csv(t);
  EXPECT_EQ(table_to_csv(table_from_csv(csv, "t.csv")), csv);
  EXPECT_THROW(table_from_csv("index,status\n", "t.csv"), ConfigError);
  EXPECT_THROW(table_from_csv(csv + "2,4,z,maybe,,,,,,,,,,,\n", "t.csv"), ConfigError);
  // Cells no sweep writes: a metric that is NaN, infinite or negative, an ok point without one.
  const std::string ok_row = "2,4,z,ok,,0.1,3521.2,400,410,0.4,0.41,20.5,21.25,1e-05,0\n";
  EXPECT_NO_THROW(table_from_csv(csv + ok_row, "t.csv"));
  for (const char* cell : {"nan", "inf", "-5", "-inf", "1e308"}) {
    std::string bad = ok_row;
    bad.replace(bad.find("3521.2"), 6, cell);
    EXPECT_THROW(table_from_csv(csv + bad, "t.csv"), ConfigError) << cell;
  }
  // A simulated step that takes no time, or moves no token (a zero or a denormal from an edit).
  for (const auto& [from, to] : {std::pair{",0.1,", ",0,"}, std::pair{",3521.2,", ",0,"},
                                 std::pair{",3521.2,", ",1e-320,"}}) {
    for (const char* status : {",ok,", ",oom,"}) {
      std::string bad = ok_row;
      bad.replace(bad.find(from), std::string(from).size(), to);
      bad.replace(bad.find(",ok,"), 4, status);
      try {
        (void)table_from_csv(csv + bad, "t.csv");
        ADD_FAILURE() << bad;
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("tokens per step per GPU; a simulated point"),
                  std::string::npos)
            << e.what();
      }
    }
  }
  // "-0" reads as point 0 but is no index fsdpsim writes.
  const std::string header_line = csv.substr(0, csv.find('\n') + 1);
  std::string point_zero = ok_row;
  point_zero.replace(0, 1, "0");
  EXPECT_NO_THROW(table_from_csv(header_line + point_zero, "t.csv"));
  EXPECT_THROW(table_from_csv(header_line + "-" + point_zero, "t.csv"), ConfigError);
  std::string missing = ok_row;
  missing.replace(missing.find("3521.2"), 6, "");
  EXPECT_THROW(table_from_csv(csv + missing, "t.csv"), ConfigError);
  // A retry count that is not a whole number (it would print as another integer); an index past
  // any sweep's last point; a skipped point with metrics.
  for (const char* retries : {"0.7", "1e300"}) {
    std::string bad = ok_row;
    bad.replace(bad.rfind(",0\n"), 3, std::string(",") + retries + "\n");
    EXPECT_THROW(table_from_csv(csv + bad, "t.csv"), ConfigError) << retries;
  }
  std::string far = ok_row;
  far.replace(0, 1, "10000000");
  EXPECT_THROW(table_from_csv(csv + far, "t.csv"), ConfigError);
  try {
    (void)table_from_csv(csv + ok_row + ok_row, "t.csv");
    ADD_FAILURE() << "a point twice in one table";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv: line 5: point 2 is also on line 4"),
              std::string::npos)
        << e.what();
  }
  std::string skipped_with_metrics = ok_row;
  skipped_with_metrics.replace(skipped_with_metrics.find(",ok,"), 4, ",skipped,");
  EXPECT_THROW(table_from_csv(csv + skipped_with_metrics, "t.csv"), ConfigError);
  // Grid keys name plots and files: none empty, none twice, none a fixed column's.
  const auto header_error = [&](const std::string& from, const std::string& to) {
    std::string edited = csv;
    edited.replace(edited.find(from), from.size(), to);
    try {
      (void)table_from_csv(edited, "t.csv");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(header_error("index,training.micro_batch,model", "index,,model"),
            "t.csv: line 1, column 2: expected a grid key of its own (as --grid names it), found "
            "an empty name");
  EXPECT_EQ(header_error("index,training.micro_batch,model", "index,status,model"),
            "t.csv: line 1, column 2: expected a grid key of its own (as --grid names it), found "
            "\"status\" again");
  EXPECT_NE(header_error("index,training.micro_batch,model", "index,model,model")
                .find("column 3: expected a grid key of its own"),
            std::string::npos);
}

// Point 0 of a one-axis table, fitting, at `label`, with round metrics.
SweepRow ok_point(const std::string& label) {
  SweepRow row;
  row.labels = {label};
  row.status = PointStatus::kOk;
  row.metrics = {0.1, 3521.2, 400, 410, 0.4, 0.41, 20.5, 21.25, 1e-05, 0};
  return row;
}

// The sweep_id and grid_points columns: written when the table has an id, read back, the same on
// every row; a table without them (an older fsdpsim's) still reads.
TEST(SweepCsv, EveryRowNamesItsSweepAndTheGridSize) {
  SweepTable t;
  t.grid_keys = {"training.micro_batch"};
  t.rows = {ok_point("2")};
  const std::string old_format = table_to_csv(t);
  t.sweep_id = "0123456789abcdef";
  t.grid_points = 3;
  const std::string csv = table_to_csv(t);
  EXPECT_NE(csv.find(",num_alloc_retries,sweep_id,grid_points\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",0,0123456789abcdef,3\n"), std::string::npos) << csv;
  const SweepTable back = table_from_csv(csv, "t.csv");
  EXPECT_EQ(back.sweep_id, t.sweep_id);
  EXPECT_EQ(back.grid_points, 3);
  EXPECT_EQ(table_to_csv(back), csv);
  const SweepTable old = table_from_csv(old_format, "old.csv");
  EXPECT_TRUE(old.sweep_id.empty());
  EXPECT_EQ(table_to_csv(old), old_format);

  const std::string row_text = "1,4,ok,,0.1,3521.2,400,410,0.4,0.41,20.5,21.25,1e-05,0,";
  const auto error = [&](const std::string& tail) {
    try {
      (void)table_from_csv(csv + row_text + tail + "\n", "t.csv");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error("0123456789abcdef,3"), "accepted");
  EXPECT_NE(error("fedcba9876543210,3")
                .find("t.csv: line 3: sweep fedcba9876543210 of 3 points, "
                      "where the rows above are of sweep 0123456789abcdef"),
            std::string::npos);
  EXPECT_NE(error("0123456789abcdef,4").find("a table holds one sweep"), std::string::npos);
  EXPECT_NE(error("0123456789ABCDEF,3").find("expected 16 hexadecimal digits"), std::string::npos);
  EXPECT_NE(error("0123,3").find("expected 16 hexadecimal digits"), std::string::npos);
  for (const char* points : {"0", "-1", "x", "10000001", ""}) {
    EXPECT_NE(error(std::string("0123456789abcdef,") + points).find("grid_points"),
              std::string::npos)
        << points;
  }
  try {
    (void)table_from_csv(csv + "3" + row_text.substr(1) + "0123456789abcdef,3\n", "t.csv");
    ADD_FAILURE() << "an index past the grid";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("index 3 is past the sweep's last point (2)"),
              std::string::npos)
        << e.what();
  }
}

// The calibration column: each simulated point's profile, written before sweep_id, read back; the
// markdown says from it what priced the points. A table without it (an older fsdpsim's) reads,
// and says nothing about costs, which it does not know.
TEST(SweepCsv, EveryPointNamesTheProfileThatPricedIt) {
  SweepTable t;
  t.grid_keys = {"hardware.calibration"};
  SweepRow row = ok_point("a");
  row.calibration = "profiles/a,1.json";
  SweepRow presets = row;
  presets.index = 1;
  presets.labels = {"null"};
  presets.calibration.clear();
  SweepRow skipped = presets;
  skipped.index = 2;
  skipped.status = PointStatus::kSkipped;
  skipped.metrics.fill(std::numeric_limits<double>::quiet_NaN());
  t.rows = {row, presets, skipped};
  t.sweep_id = "0123456789abcdef";
  t.grid_points = 3;
  const std::string unknown = table_to_csv(t);
  EXPECT_EQ(unknown.find(",calibration,"), std::string::npos) << unknown;
  EXPECT_FALSE(table_from_csv(unknown, "old.csv").calibration_known);
  EXPECT_EQ(sweep_markdown(t, "t", 0).find("Costs"), std::string::npos);

  t.calibration_known = true;
  const std::string csv = table_to_csv(t);
  EXPECT_NE(csv.find(",num_alloc_retries,calibration,sweep_id,grid_points\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",0,\"profiles/a,1.json\",0123456789abcdef,3\n"), std::string::npos) << csv;
  const SweepTable back = table_from_csv(csv, "t.csv");
  EXPECT_TRUE(back.calibration_known);
  EXPECT_EQ(back.rows[0].calibration, "profiles/a,1.json");
  EXPECT_EQ(back.rows[1].calibration, "");
  EXPECT_EQ(table_to_csv(back), csv);
  EXPECT_EQ(costs_paragraph(back),
            "Costs by the points' calibration profiles:\n\n"
            "- 1 point: the hardware presets' models (no calibration profile)\n"
            "- 1 point: the calibration profile `profiles/a,1.json` where it measured them, the "
            "rest from the hardware presets' models\n\n");
  EXPECT_NE(sweep_markdown(back, "t", 0).find("# t\n\nCosts by the points'"), std::string::npos);
  SweepTable one = back;
  one.rows[1].calibration = one.rows[0].calibration;
  EXPECT_EQ(costs_paragraph(one),
            "Costs from the calibration profile `profiles/a,1.json` where it measured them, the "
            "rest from the hardware presets' models.\n\n");
  one.rows[0].calibration.clear();
  one.rows[1].calibration.clear();
  EXPECT_EQ(costs_paragraph(one),
            "Costs from the hardware presets' models (no calibration profile).\n\n");
  // A skipped point was priced by nothing; a table that says otherwise was not written by sweep.
  std::string priced_skip = csv;
  priced_skip.replace(priced_skip.rfind(",,0123456789abcdef,3\n"), 1, ",x");
  try {
    (void)table_from_csv(priced_skip, "t.csv");
    ADD_FAILURE() << "a skipped point with a profile";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv: line 4: calibration \"x\" on a skipped point"),
              std::string::npos)
        << e.what();
  }
}

// The id depends on the scenario the points start from and on the grid, not on the sweep block
// that the axes replace or on anything else.
TEST(SweepGrid, TheSweepIdFollowsTheScenarioAndTheGrid) {
  const nlohmann::json scenario = test_support::tiny_llama_scenario("id");
  const std::vector<GridAxis> axes = {parse_grid_option("training.micro_batch=1,2"),
                                      parse_grid_option("fsdp.backward_prefetch=BACKWARD_PRE")};
  const std::vector<std::string> files = {"{\"name\": \"a\"}", "{\"name\": \"b\"}"};
  const std::string id = sweep_fingerprint(scenario, axes, files);
  EXPECT_EQ(id.size(), kSweepIdLength);
  EXPECT_EQ(sweep_fingerprint(scenario, axes, files), id);
  EXPECT_EQ(sweep_fingerprint(scenario, axes, {files[1], files[0]}), id);  // files in any order
  nlohmann::json with_block = scenario;
  with_block["sweep"] = {{"training.micro_batch", {1, 2}}};
  EXPECT_EQ(sweep_fingerprint(with_block, axes, files), id);
  nlohmann::json other = scenario;
  other["training"]["seq_len"] = 1024;
  EXPECT_NE(sweep_fingerprint(other, axes, files), id);
  EXPECT_NE(sweep_fingerprint(scenario, {axes[0]}, files), id);
  EXPECT_NE(
      sweep_fingerprint(scenario, {parse_grid_option("training.micro_batch=1,4"), axes[1]}, files),
      id);
  EXPECT_NE(sweep_fingerprint(scenario, {axes[1], axes[0]}, files), id);  // another point order
  EXPECT_NE(sweep_fingerprint(scenario, axes, {files[0]}), id);
  EXPECT_NE(sweep_fingerprint(scenario, axes, {files[0], "{\"name\": \"c\"}"}), id);
}

// The id covers the presets the points name, by content: slices planned from two copies of the
// presets folder agree, and disagree once a preset a point names changes -- one named by the
// base scenario or by one value of an axis -- but not when a preset no point names does.
TEST(SweepCommand, TheSweepIdCoversThePresetsThePointsName) {
  const fs::path s = tiny_scenario("id_presets");
  const fs::path dir = temp_dir() / "id_presets";
  const auto copy_configs = [&](const std::string& name) {
    const fs::path to = dir / name;
    fs::remove_all(to);
    fs::create_directories(to);
    fs::copy(FSDPSIM_CONFIGS_DIR, to, fs::copy_options::recursive);
    return to;
  };
  const auto id_with = [&](const fs::path& configs) {
    SweepOptions options;
    options.scenario = s.string();
    options.grid = {"training.micro_batch=1,2", "hardware.preset=h100-sxm-80gb,a100-sxm-80gb"};
    options.configs_dir = configs.string();
    return plan_sweep(options).sweep_id;
  };
  const auto append_space = [](const fs::path& file) { std::ofstream(file, std::ios::app) << " "; };
  const fs::path a = copy_configs("a");
  const std::string id = id_with(a);
  EXPECT_EQ(id_with(copy_configs("b")), id);

  append_space(copy_configs("unused") / "hardware" / "h200-sxm-141gb.json");
  EXPECT_EQ(id_with(dir / "unused"), id);
  append_space(copy_configs("base") / "hardware" / "h100-sxm-80gb.json");
  EXPECT_NE(id_with(dir / "base"), id);
  append_space(copy_configs("axis") / "hardware" / "a100-sxm-80gb.json");
  EXPECT_NE(id_with(dir / "axis"), id);
  append_space(copy_configs("model") / "models" / "llama-3.1-8b.json");
  EXPECT_NE(id_with(dir / "model"), id);
}

SweepRow point(std::int64_t index, double tokens, double reserved_gib,
               PointStatus status = PointStatus::kOk) {
  SweepRow r;
  r.index = index;
  r.status = status;
  r.metrics.fill(0.0);
  r.metrics[kMetricTokensPerSPerGpu] = tokens;
  r.metrics[kMetricPeakReserved] = reserved_gib;
  return r;
}

TEST(SweepCsv, ParetoFrontKeepsPointsThatFitAndAreNotDominated) {
  SweepTable t;
  t.rows = {point(0, 100, 50), point(1, 120, 60),
            point(2, 110, 70),  // 2 is dominated by 1
            point(3, 90, 40),  point(4, 200, 30, PointStatus::kOom),
            point(5, 120, 60)};
  const std::vector<std::size_t> front = pareto_front(t);
  EXPECT_EQ(front, (std::vector<std::size_t>{1, 5, 0, 3}));
  ASSERT_TRUE(best_that_fits(t).has_value());
  EXPECT_EQ(*best_that_fits(t), 1U);  // the oom point is faster but does not fit
  const std::string summary = sweep_summary_text(t);
  EXPECT_NE(
      summary.find("best that fits: (base scenario) -> 120.0 tokens/s/GPU, 60.00 GiB reserved"),
      std::string::npos)
      << summary;
  // 1 and 5 are one result: one line of the front.
  EXPECT_NE(summary.find("  #1          120.0 tokens/s/GPU    60.00 GiB  (base scenario) (the "
                         "same result: #5)\n  #0 "),
            std::string::npos)
      << summary;
}

// The front by sorting, against its definition checked pair by pair, on tables with many ties.
TEST(SweepCsv, ParetoFrontMatchesTheDefinitionPairByPair) {
  std::uint64_t state = 12345;
  const auto next = [&state](int n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>((state >> 33) % static_cast<std::uint64_t>(n));
  };
  for (int trial = 0; trial < 200; ++trial) {
    SweepTable t;
    const int n = 1 + static_cast<int>(next(40));
    for (int i = 0; i < n; ++i) {
      t.rows.push_back(
          point(i, next(8), next(8), next(5) == 0.0 ? PointStatus::kOom : PointStatus::kOk));
    }
    std::vector<std::size_t> expected;
    for (std::size_t a = 0; a < t.rows.size(); ++a) {
      if (t.rows[a].status != PointStatus::kOk) continue;
      bool dominated = false;
      for (std::size_t b = 0; b < t.rows.size(); ++b) {
        const auto thr = [&](std::size_t i) { return t.rows[i].metrics[kMetricTokensPerSPerGpu]; };
        const auto mem = [&](std::size_t i) { return t.rows[i].metrics[kMetricPeakReserved]; };
        dominated = dominated || (t.rows[b].status == PointStatus::kOk && thr(b) >= thr(a) &&
                                  mem(b) <= mem(a) && (thr(b) > thr(a) || mem(b) < mem(a)));
      }
      if (!dominated) expected.push_back(a);
    }
    std::stable_sort(expected.begin(), expected.end(), [&](std::size_t p, std::size_t q) {
      return t.rows[p].metrics[kMetricTokensPerSPerGpu] >
             t.rows[q].metrics[kMetricTokensPerSPerGpu];
    });
    EXPECT_EQ(pareto_front(t), expected) << "trial " << trial;
  }
}

// The best point that fits may fit only by retrying cudaMalloc: the summary and the markdown say
// so, from the table's num_alloc_retries column.
TEST(SweepCsv, TheBestPointsCudaMallocRetriesAreNamed) {
  SweepTable t;
  t.rows = {point(0, 100, 50), point(1, 120, 78)};
  t.rows[1].metrics[kMetricAllocRetries] = 3;
  EXPECT_NE(sweep_summary_text(t).find("78.00 GiB reserved, 3 cudaMalloc retries per step"),
            std::string::npos)
      << sweep_summary_text(t);
  const std::string md = sweep_markdown(t, "t", 0);
  EXPECT_NE(md.find("| cudaMalloc retries |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 78.00 | 3 | * |"), std::string::npos) << md;
  // The best that needs no flush is named too.
  EXPECT_NE(sweep_summary_text(t).find("best without cudaMalloc retries: (base scenario) -> "
                                       "100.0 tokens/s/GPU, 50.00 GiB reserved\n"),
            std::string::npos)
      << sweep_summary_text(t);
  t.rows[0].metrics[kMetricAllocRetries] = 1;
  EXPECT_NE(sweep_summary_text(t).find(
                "best without cudaMalloc retries: none (every point that fits retries)"),
            std::string::npos)
      << sweep_summary_text(t);
  t.rows[0].metrics[kMetricAllocRetries] = 0;
  t.rows[1].metrics[kMetricAllocRetries] = 0;
  EXPECT_EQ(sweep_summary_text(t).find("cudaMalloc"), std::string::npos);
}

// Every ranking of a sweep breaks a tie in throughput alike, by less reserved memory: the
// markdown's rank 1 is the summary's "best that fits".
TEST(SweepCsv, ATieInThroughputRanksTheSmallerMemoryFirstEverywhere) {
  SweepTable t;
  t.grid_keys = {"training.micro_batch"};
  t.rows = {point(0, 120, 76.36), point(1, 120, 74.75), point(2, 100, 40)};
  for (std::size_t i = 0; i < t.rows.size(); ++i) t.rows[i].labels = {std::to_string(i + 1)};
  EXPECT_EQ(best_that_fits(t), std::optional<std::size_t>(1));
  const std::string md = sweep_markdown(t, "t", 0);
  EXPECT_NE(md.find("| 1 | 1 | 2 | ok | 120.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 | 0 | 1 | ok | 120.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("best that fits: training.micro_batch=2 -> 120.0"), std::string::npos) << md;
}

// The title, grid values and skip reasons are text in the markdown: what would start a link, code,
// HTML or emphasis there, or halve a backslash, is escaped, as the report's index escapes it.
TEST(SweepCsv, TheMarkdownEscapesWhatMarkdownWouldRender) {
  SweepTable t;
  t.grid_keys = {"a+b"};
  t.rows = {point(0, 100, 50), point(1, 120, 60)};
  t.rows[0].labels = {R"(["<b>x</b>","c:\\d"])"};
  t.rows[1].labels = {"[`1`,2]"};
  t.rows.push_back(point(2, 0, 0));
  t.rows[2].labels = {"[3,4]"};
  t.rows[2].status = PointStatus::kSkipped;
  t.rows[2].reason = "/a: expected *one* of [x]";
  const std::string md = sweep_markdown(t, "fsdpsim sweep of _my_ <b>.json", 0);
  EXPECT_EQ(md.rfind("# fsdpsim sweep of \\_my\\_ \\<b\\>.json\n", 0), 0U) << md;
  EXPECT_NE(md.find(R"(| \["\<b\>x\</b\>","c:\\\\d"\] |)"), std::string::npos) << md;
  EXPECT_NE(md.find(R"(| \[\`1\`,2\] |)"), std::string::npos) << md;
  EXPECT_NE(md.find(R"(| 1 | /a: expected \*one\* of \[x\] |)"), std::string::npos) << md;
}

// ---- fsdpsim sweep ----

TEST(SweepCommand, InvalidPointsAreSkippedWithTheReasonAndOomIsARow) {
  const fs::path s = tiny_scenario("skips");
  const fs::path csv = temp_dir() / "skips.csv";
  const Outcome o = run_fsdpsim(
      "sweep " + s.string() +
      " --grid training.micro_batch=1,4 --grid fsdp.backward_prefetch=BACKWARD_PRE,BACKWARD_PER"
      " --grid hardware.gpu.hbm_bytes=85017755648,4000000000 --out " +
      csv.string());
  // The misspelt value was refused at its own key at every one of its points, where another
  // value of its axis ran: exit 2, named, with the other points written. A micro batch the
  // global batch cannot hold is an infeasible configuration, a skipped row the sweep records,
  // and the small HBM makes out-of-memory rows, which are results.
  ASSERT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("error: fsdp.backward_prefetch=BACKWARD_PER: none of its 4 points could "
                          "be simulated (the first: /fsdp/backward_prefetch"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("error: training.micro_batch"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("the outputs were written with the points that could be simulated"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("error: hardware.gpu.hbm_bytes"), std::string::npos) << o.output;
  const SweepTable t = table_from_csv(read_file(csv), csv.string());
  ASSERT_EQ(t.rows.size(), 8U);
  EXPECT_EQ(t.grid_keys, (std::vector<std::string>{"training.micro_batch", "fsdp.backward_prefetch",
                                                   "hardware.gpu.hbm_bytes"}));
  EXPECT_EQ(t.rows[0].status, PointStatus::kOk);
  EXPECT_EQ(t.rows[1].status, PointStatus::kOom);
  EXPECT_FALSE(t.rows[1].reason.empty());
  EXPECT_FALSE(std::isnan(t.rows[1].metrics[kMetricTokensPerSPerGpu]));
  EXPECT_EQ(t.rows[2].status, PointStatus::kSkipped);
  EXPECT_NE(t.rows[2].reason.find("/fsdp/backward_prefetch"), std::string::npos)
      << t.rows[2].reason;
  EXPECT_NE(t.rows[2].reason.find("did you mean BACKWARD_PRE?"), std::string::npos)
      << t.rows[2].reason;
  EXPECT_NE(t.rows[2].reason.find(
                "(the value comes from --grid fsdp.backward_prefetch=\"BACKWARD_PER\")"),
            std::string::npos)
      << t.rows[2].reason;
  EXPECT_TRUE(std::isnan(t.rows[2].metrics[kMetricTokensPerSPerGpu]));
  EXPECT_EQ(t.rows[4].status, PointStatus::kSkipped);  // micro_batch 4 x 8 GPUs does not divide 16
  EXPECT_NE(t.rows[4].reason.find("not a multiple of micro_batch"), std::string::npos)
      << t.rows[4].reason;
  EXPECT_NE(
      o.output.find("best that fits: training.micro_batch=1 fsdp.backward_prefetch=BACKWARD_PRE "
                    "hardware.gpu.hbm_bytes=85017755648 -> "),
      std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("points/s"), std::string::npos)
      << "no progress bar when stderr is not a terminal";
}

TEST(SweepCommand, BadUsageExitsTwoBeforeRunning) {
  const fs::path s = tiny_scenario("bad_usage");
  const fs::path csv = temp_dir() / "never.csv";
  const struct {
    const char* arguments;
    const char* expected;
  } cases[] = {
      {"--grid fsdp.backward_prefech=none,BACKWARD_PRE",
       "--grid fsdp.backward_prefech: not a scenario key"},
      {"--grid fsdpp.backward_prefetch=none", "/fsdpp: unknown key; did you mean fsdp?"},
      {"--grid training.micro_batch", "expected KEY=V1,V2,..."},
      {"--grid training.micro_batch=", "no values after '='"},
      {"--grid training.micro_batch=1 --grid training.micro_batch=2", "given twice"},
      {"--set fsdp.bogus=1", "--set fsdp.bogus: not a scenario key"},
      {"--shard 0/2", "expected K/N"},
      {"--grid training.micro_batch=1,1", "value 1 is given twice"},
      {"-j \"\"", "expected a number of threads >= 0 (0 = one per core), found \"\""},
      {"-j 0x10", "found \"0x10\""},
      {"-j -1", "found \"-1\""},
  };
  for (const auto& c : cases) {
    const Outcome o =
        run_fsdpsim("sweep " + s.string() + " " + c.arguments + " --out " + csv.string());
    EXPECT_EQ(o.exit_code, 2) << c.arguments << "\n" << o.output;
    EXPECT_NE(o.output.find(c.expected), std::string::npos) << c.arguments << "\n" << o.output;
    EXPECT_FALSE(fs::exists(csv)) << c.arguments;
  }
  EXPECT_EQ(run_fsdpsim("sweep /nonexistent/s.json --grid training.micro_batch=1").exit_code, 2);
}

// A sweep in which no point is a valid scenario has checked nothing: bad input, with the reason.
TEST(SweepCommand, EveryPointInvalidExitsTwoWithTheReason) {
  const fs::path s = tiny_scenario("all_invalid");
  const Outcome o = run_fsdpsim("sweep " + s.string() + " --grid training.micro_batch=0,-1");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("expected at least one valid point, found 2 invalid scenarios"),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("skipped: /training/micro_batch: expected a positive integer"),
            std::string::npos)
      << o.output;
  // Nothing is written for a grid that checked nothing.
  const fs::path dir = temp_dir() / "all_invalid";
  fs::create_directories(dir);
  const fs::path csv = dir / "none.csv";
  const fs::path md = dir / "none.md";
  const Outcome written =
      run_fsdpsim("sweep " + s.string() + " --grid training.micro_batch=0,-1 --out " +
                  csv.string() + " --md " + md.string());
  EXPECT_EQ(written.exit_code, 2) << written.output;
  EXPECT_FALSE(fs::exists(csv));
  EXPECT_FALSE(fs::exists(md));

  // A slice of a sharded sweep may hold only invalid points while another holds the valid ones:
  // it writes its rows and exits 0 (a Slurm array's afterok merge must run); merge judges the
  // whole grid, and refuses one with no valid point.
  const std::string grid = " --grid training.micro_batch=0,1";
  const fs::path first = dir / "slice1.csv";
  const fs::path second = dir / "slice2.csv";
  const Outcome invalid_slice =
      run_fsdpsim("sweep " + s.string() + grid + " --shard 1/2 --out " + first.string());
  EXPECT_EQ(invalid_slice.exit_code, 0) << invalid_slice.output;
  ASSERT_EQ(
      run_fsdpsim("sweep " + s.string() + grid + " --shard 2/2 --out " + second.string()).exit_code,
      0);
  // The whole grid holds a valid point, but micro_batch 0 is refused at its only point.
  const Outcome merged_grid = run_fsdpsim("merge " + first.string() + " " + second.string());
  EXPECT_EQ(merged_grid.exit_code, 2) << merged_grid.output;
  EXPECT_NE(merged_grid.output.find("error: training.micro_batch=0: its one point could not be "
                                    "simulated (/training/micro_batch: expected"),
            std::string::npos)
      << merged_grid.output;
  const Outcome only_invalid = run_fsdpsim("merge " + first.string() + " --allow-gaps");
  EXPECT_EQ(only_invalid.exit_code, 2) << only_invalid.output;
  EXPECT_NE(only_invalid.output.find("expected at least one valid point in the merged sweep"),
            std::string::npos)
      << only_invalid.output;

  // The terminal shows three distinct reasons and counts the others.
  const Outcome many =
      run_fsdpsim("sweep " + s.string() +
                  " --grid training.micro_batch=1,0 --grid training.seq_len=0,-1,-2,-3,-4,4096");
  EXPECT_EQ(many.exit_code, 2) << many.output;
  EXPECT_NE(many.output.find("skipped: ... and points for "), std::string::npos) << many.output;
  // Every bad value is named once; the values that ran with some other point's values are not.
  EXPECT_NE(many.output.find("error: training.micro_batch=0: none of its 6 points"),
            std::string::npos)
      << many.output;
  for (const std::string bad : {"0", "-1", "-2", "-3", "-4"}) {
    EXPECT_NE(many.output.find("error: training.seq_len=" + bad + ": none of its 2 points"),
              std::string::npos)
        << many.output;
  }
  EXPECT_EQ(many.output.find("error: training.seq_len=4096"), std::string::npos) << many.output;
  EXPECT_EQ(many.output.find("error: training.micro_batch=1"), std::string::npos) << many.output;
}

TEST(SweepCommand, TheScenarioSweepBlockIsTheGrid) {
  // Written by hand: the axes follow the file's key order, not the sorted order of a parsed object.
  const fs::path s = tiny_scenario_with_sweep(
      "with_block",
      R"({"training.micro_batch": [1, 2], "fsdp.backward_prefetch": ["BACKWARD_PRE", "none"]})");
  const fs::path csv = temp_dir() / "block.csv";
  ASSERT_EQ(run_fsdpsim("sweep " + s.string() + " --grid fsdp.limit_all_gathers=true,false --out " +
                        csv.string())
                .exit_code,
            0);
  const SweepTable t = table_from_csv(read_file(csv), csv.string());
  // Written in the file as training.micro_batch, then fsdp.backward_prefetch; then the --grid.
  EXPECT_EQ(t.grid_keys, (std::vector<std::string>{"training.micro_batch", "fsdp.backward_prefetch",
                                                   "fsdp.limit_all_gathers"}));
  ASSERT_EQ(t.rows.size(), 8U);
  EXPECT_EQ(t.rows[1].labels, (std::vector<std::string>{"1", "BACKWARD_PRE", "false"}));
  EXPECT_EQ(t.rows[2].labels, (std::vector<std::string>{"1", "none", "true"}));
}

// Keys tied in the block and on the command line run as one axis each: FSDP1 with its prefetch
// beside FSDP2 without it, micro batch with the global batch it divides. A tied value malformed
// at one of its keys, where the others ran, is named as the column writes it (exit 2); a key
// no scenario has is refused before anything runs.
TEST(SweepCommand, TiedKeysVaryTogether) {
  const fs::path s = tiny_scenario_with_sweep(
      "tied", R"({"fsdp.version+fsdp.backward_prefetch": [[1, "BACKWARD_PRE"], [2, null]]})");
  const fs::path csv = temp_dir() / "tied.csv";
  const Outcome ok = run_fsdpsim(
      "sweep " + s.string() +
      " --grid 'training.micro_batch+training.global_batch=[1,8],[2,16]' --out " + csv.string());
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const SweepTable t = table_from_csv(read_file(csv), csv.string());
  EXPECT_EQ(t.grid_keys, (std::vector<std::string>{"fsdp.version+fsdp.backward_prefetch",
                                                   "training.micro_batch+training.global_batch"}));
  ASSERT_EQ(t.rows.size(), 4U);
  for (const SweepRow& r : t.rows) EXPECT_EQ(r.status, PointStatus::kOk) << r.reason;
  EXPECT_EQ(t.rows[3].labels, (std::vector<std::string>{"[2,null]", "[2,16]"}));
  // FSDP2 and FSDP1 differ: the axis did set the version.
  EXPECT_NE(t.rows[0].metrics, t.rows[2].metrics);

  const Outcome bad = run_fsdpsim("sweep " + s.string() +
                                  " --grid 'training.micro_batch+training.global_batch=[1,8],"
                                  "[2,\"x\"]' --out " +
                                  csv.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("error: training.micro_batch+training.global_batch=[2,\"x\"]: none "
                            "of its 2 points could be simulated (the first: "
                            "/training/global_batch: expected"),
            std::string::npos)
      << bad.output;
  // The value at fault is named with the axis as written, not as a --grid of its key alone.
  EXPECT_NE(bad.output.find("(the value comes from --grid "
                            "training.micro_batch+training.global_batch: training.global_batch="
                            "\"x\")"),
            std::string::npos)
      << bad.output;

  // A misspelt key is refused before anything runs, also where a null leaves it out of a value
  // (which then loads): only the values that set a key say whether it is one.
  const Outcome misspelt =
      run_fsdpsim("sweep " + s.string() +
                  " --grid 'training.global_batch+fsdp.forward_prefetchh=[8,true],[16,null]'");
  EXPECT_EQ(misspelt.exit_code, 2) << misspelt.output;
  EXPECT_NE(misspelt.output.find("fsdp.forward_prefetchh is not a scenario key"), std::string::npos)
      << misspelt.output;
  // A null where the key has no default is a malformed value, named after the outputs.
  const Outcome required = run_fsdpsim(
      "sweep " + s.string() + " --grid 'training.seq_len+training.micro_batch=[2048,1],[null,2]'" +
      " --out " + csv.string());
  EXPECT_EQ(required.exit_code, 2) << required.output;
  EXPECT_NE(required.output.find("error: training.seq_len+training.micro_batch=[null,2]: none of "
                                 "its 2 points could be simulated (the first: /training/seq_len: "
                                 "required key is missing"),
            std::string::npos)
      << required.output;

  const Outcome unknown = run_fsdpsim(
      "sweep " + s.string() + " --grid 'training.micro_batch+training.micro_batchez=[1,8]'");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("--grid training.micro_batch+training.micro_batchez: "
                                "training.micro_batchez is not a scenario key"),
            std::string::npos)
      << unknown.output;
}

// A key on two axes of a block is named at the later one in the file, by every command (run
// read the block in alphabetical key order and named the other).
TEST(SweepCommand, EveryCommandNamesTheLaterOfTwoAxesSharingAKey) {
  const fs::path s = tiny_scenario_with_sweep(
      "shared_key_block",
      R"({"training.micro_batch+training.global_batch": [[1, 8]], "training.micro_batch": [1, 2]})");
  for (const char* command : {"run", "sweep", "check"}) {
    const Outcome o = run_fsdpsim(std::string(command) + " " + s.string());
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("/sweep/training.micro_batch: \"training.micro_batch\" is swept by "
                            "/sweep/training.micro_batch+training.global_batch too"),
              std::string::npos)
        << command << "\n"
        << o.output;
  }
}

// run, explain and check simulate only the base point of a file with a sweep block, but a key
// in that block that no scenario accepts is an error there too, not found only by `sweep`.
TEST(SweepCommand, ABadSweepBlockKeyFailsEveryCommand) {
  const fs::path s =
      tiny_scenario_with_sweep("bad_block_key", R"({"fsdp.limit_all_gatherz": [true, false]})");
  for (const char* command : {"run", "explain", "sweep", "calibrate plan"}) {
    const Outcome o = run_fsdpsim(std::string(command) + " " + s.string());
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("/sweep/fsdp.limit_all_gatherz: not a scenario key"), std::string::npos)
        << command << "\n"
        << o.output;
  }
  // The same block given by --set on a file without one.
  const fs::path plain = tiny_scenario("no_block");
  for (const char* command : {"run", "explain", "check"}) {
    const Outcome o = run_fsdpsim(std::string(command) + " " + plain.string() +
                                  " --set 'sweep={\"fsdp.limit_all_gatherz\": [true]}'");
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("/sweep/fsdp.limit_all_gatherz: not a scenario key"), std::string::npos)
        << command << "\n"
        << o.output;
  }
  // So is what the block alone makes sweep refuse before running: an axis a later axis of it
  // makes do nothing (in the file's order), a value naming a preset that does not exist. An axis
  // beside the command's own --set is not: the block does not apply to `run`.
  const fs::path wiped = tiny_scenario_with_sweep(
      "wiped_axis", R"({"model.n_layers": [1], "model": ["llama-3.1-8b"]})");
  const fs::path missing =
      tiny_scenario_with_sweep("missing_preset", R"({"model": ["no-such-preset"]})");
  for (const auto& [file, message] :
       {std::pair<fs::path, std::string>{
            wiped, wiped.string() + ": /sweep/model: sets model at every point, so " +
                       wiped.string() +
                       ": /sweep/model.n_layers: model.n_layers=1 would do nothing"},
        {missing, "unknown models preset \"no-such-preset\""}}) {
    for (const char* command : {"run", "check", "sweep"}) {
      const Outcome o = run_fsdpsim(std::string(command) + " " + file.string());
      EXPECT_EQ(o.exit_code, 2) << command << " " << file << "\n" << o.output;
      EXPECT_NE(o.output.find(message), std::string::npos) << command << "\n" << o.output;
    }
  }
  EXPECT_EQ(run_fsdpsim("run " + plain.string() +
                        " --set 'sweep={\"training.micro_batch\": [1, 2]}'"
                        " --set training.micro_batch=2")
                .exit_code,
            0);
}

// --grid KEY=[1,2] is one value, an array: where no point takes it, the refusal says how a list
// of values is written.
TEST(SweepCommand, AnArrayGridValueNoPointTakesSaysHowToListValues) {
  const fs::path s = tiny_scenario("array_grid_value");
  const Outcome o = run_fsdpsim("sweep " + s.string() + " --grid 'training.micro_batch=[1,2]'");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("(--grid training.micro_batch=[1,2] sweeps one value, the array; to "
                          "sweep its items write --grid training.micro_batch=1,2)"),
            std::string::npos)
      << o.output;
  // Not for a key that takes an array, refused for what the array holds.
  const Outcome stragglers =
      run_fsdpsim("sweep " + s.string() +
                  " --grid 'hardware.stragglers=[{\"ranks\":[99],\"compute_speed\":0.9}]'");
  EXPECT_EQ(stragglers.exit_code, 2) << stragglers.output;
  EXPECT_NE(stragglers.output.find("/hardware/stragglers/0/ranks/0: expected a rank number"),
            std::string::npos)
      << stragglers.output;
  EXPECT_EQ(stragglers.output.find("sweeps one value, the array"), std::string::npos)
      << stragglers.output;
}

// `check` gates a whole file: what `sweep` would refuse once its points are loaded is an error
// there too: a value of the block that no point can take (misspelt), a grid of no valid point.
// A point refused for a relation between keys is an infeasible configuration, not bad input.
// `run` simulates the base point only and does not load the grid.
TEST(SweepCommand, CheckRefusesABlockValueNoPointCanTake) {
  const fs::path misspelt = tiny_scenario_with_sweep(
      "misspelt_value",
      R"({"training.micro_batch": [1, 2], "fsdp.backward_prefetch": ["BACKWARD_PRE", "backward_post"]})");
  const Outcome checked = run_fsdpsim("check " + misspelt.string());
  EXPECT_EQ(checked.exit_code, 2) << checked.output;
  EXPECT_NE(checked.output.find(
                misspelt.string() +
                ": /sweep/fsdp.backward_prefetch: the value backward_post can be simulated at "
                "none of its 2 points (the first: /fsdp/backward_prefetch: expected one of"),
            std::string::npos)
      << checked.output;
  EXPECT_NE(checked.output.find("`fsdpsim sweep` would skip them all and exit 2"),
            std::string::npos)
      << checked.output;
  EXPECT_EQ(run_fsdpsim("sweep " + misspelt.string() + " --out -").exit_code, 2);
  EXPECT_EQ(run_fsdpsim("run " + misspelt.string()).exit_code, 0);
  // A value of one point is said as one.
  const fs::path single = tiny_scenario_with_sweep(
      "misspelt_single", R"({"fsdp.backward_prefetch": ["BACKWARD_PRE", "backward_post"]})");
  const Outcome one = run_fsdpsim("check " + single.string());
  EXPECT_EQ(one.exit_code, 2) << one.output;
  EXPECT_NE(one.output.find(": /sweep/fsdp.backward_prefetch: the value backward_post cannot be "
                            "simulated at its one point (/fsdp/backward_prefetch: expected one of"),
            std::string::npos)
      << one.output;
  EXPECT_NE(one.output.find("`fsdpsim sweep` would skip it and exit 2"), std::string::npos)
      << one.output;

  const fs::path none_valid =
      tiny_scenario_with_sweep("no_valid_point", R"({"training.micro_batch": [-1, -2]})");
  const Outcome nothing = run_fsdpsim("check " + none_valid.string());
  EXPECT_EQ(nothing.exit_code, 2) << nothing.output;
  EXPECT_NE(nothing.output.find(none_valid.string() +
                                ": /sweep: expected at least one valid point, found 2 invalid "
                                "scenarios (the first: /training/micro_batch: expected"),
            std::string::npos)
      << nothing.output;

  // A micro batch that does not divide the global batch is infeasible where it is, not malformed.
  const fs::path infeasible =
      tiny_scenario_with_sweep("infeasible_value", R"({"training.micro_batch": [1, 3]})");
  const Outcome swept = run_fsdpsim("sweep " + infeasible.string() + " --out -");
  EXPECT_EQ(swept.exit_code, 0) << swept.output;
  EXPECT_NE(swept.output.find("\n1,3,skipped,"), std::string::npos) << swept.output;
  // A block is a check of its own: a file without an expect block is checked for it.
  const Outcome fine = run_fsdpsim("check " + infeasible.string());
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
  EXPECT_NE(fine.output.find("PASS " + infeasible.string() +
                             " sweep block: 1 of its 2 points load; `fsdpsim sweep` skips the "
                             "other one as a configuration that cannot run\n"),
            std::string::npos)
      << fine.output;
  EXPECT_NE(fine.output.find("check: 1 scenario, 1 check: 1 passed, 0 failed\n"), std::string::npos)
      << fine.output;

  // A block larger than check loads point by point passes with its keys checked, and says so.
  std::string seq_lens;
  for (int s = 8; s < 8 + 2001; ++s) {
    if (!seq_lens.empty()) seq_lens.append(",");
    seq_lens.append(std::to_string(s));
  }
  const fs::path large =
      tiny_scenario_with_sweep("large_block", R"({"training.seq_len": [)" + seq_lens + "]}");
  const fs::path junit = temp_dir() / "large.xml";
  const Outcome unloaded = run_fsdpsim("check " + large.string() + " --junit " + junit.string());
  EXPECT_NE(unloaded.output.find("PASS " + large.string() +
                                 " sweep block: its keys and the files it names are valid; its "
                                 "2001 points were not loaded one by one (check loads blocks of "
                                 "up to 2000)"),
            std::string::npos)
      << unloaded.output;
  // The JUnit case says so by its name.
  EXPECT_NE(read_file(junit).find("name=\"sweep block (keys only)\""), std::string::npos)
      << read_file(junit);

  // With an expect block too: the block's check first, then the expectations'.
  const fs::path gated = tiny_scenario_with_sweep(
      "gated_block", R"({"training.micro_batch": [1, 2]})", {{"expect", {{"status", "ok"}}}});
  const fs::path gated_junit = temp_dir() / "gated.xml";
  const Outcome both = run_fsdpsim("check " + gated.string() + " --junit " + gated_junit.string());
  EXPECT_EQ(both.exit_code, 0) << both.output;
  EXPECT_EQ(both.output.rfind("PASS " + gated.string() + " sweep block: all 2 points load\nPASS " +
                                  gated.string() + " status = \"ok\"",
                              0),
            0U)
      << both.output;
  EXPECT_NE(both.output.find("check: 1 scenario, 2 checks: 2 passed, 0 failed"), std::string::npos)
      << both.output;
  EXPECT_NE(read_file(gated_junit).find("name=\"sweep block\""), std::string::npos)
      << read_file(gated_junit);
}

// The sweep replaces the file's value of a swept key at every point, so nothing would ever read
// a bad one; `run` refuses that file, and so does `sweep`. A key the file leaves to the sweep is
// fine.
TEST(SweepCommand, ABadFileValueOfASweptKeyIsRefused) {
  const fs::path bad = tiny_scenario_with_sweep(
      "bad_base_value", R"({"fsdp.backward_prefetch": ["BACKWARD_PRE", "none"]})",
      {{"fsdp", {{"backward_prefetch", "GARBAGE"}}}});
  for (const char* grid : {"", " --grid fsdp.backward_prefetch=none"}) {
    const fs::path csv = temp_dir() / "never.csv";
    const Outcome o = run_fsdpsim("sweep " + bad.string() + grid + " --out " + csv.string());
    EXPECT_EQ(o.exit_code, 2) << grid << "\n" << o.output;
    EXPECT_NE(o.output.find(bad.string() + ": /fsdp/backward_prefetch: expected one of"),
              std::string::npos)
        << o.output;
    EXPECT_NE(o.output.find("found \"GARBAGE\" (the sweep replaces this value at every point"),
              std::string::npos)
        << o.output;
    EXPECT_FALSE(fs::exists(csv));
  }

  const fs::path left_to_the_sweep =
      tiny_scenario("base_without_preset", {{"hardware", {{"preset", nullptr}}}});
  nlohmann::json document = nlohmann::json::parse(read_file(left_to_the_sweep));
  document["sweep"] = {{"hardware.preset", {"h100-sxm-80gb"}}};
  std::ofstream(left_to_the_sweep) << document.dump(2);
  const Outcome o = run_fsdpsim("sweep " + left_to_the_sweep.string() + " --out -");
  EXPECT_EQ(o.exit_code, 0) << o.output;
}

// A profile that is not UTF-8 is not text: the sweep refuses it before any point runs, naming
// the file and where the byte is (escaped, never raw), as it refuses a NUL byte in a named file.
TEST(SweepCommand, ANamedFileThatIsNotUtf8IsRefusedWithWhereItsByteIs) {
  const fs::path profile = temp_dir() / "bad_bytes_profile.json";
  std::ofstream(profile, std::ios::binary) << "{}\n\xF8";
  const fs::path good = fs::path(FSDPSIM_SOURCE_DIR) / "configs/calibration/h200-sxm-141gb.json";
  const fs::path s =
      tiny_scenario("not_utf8_profile", {{"hardware", {{"preset", "h200-sxm-141gb"}}}});
  const Outcome o = run_fsdpsim("sweep " + s.string() + " --grid hardware.calibration=\"" +
                                good.string() + "\",\"" + profile.string() + "\" --out -");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find(profile.string() +
                          ": expected UTF-8 text, found the byte 0xF8 at line 2, column 1"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find('\xF8'), std::string::npos) << "the byte is not echoed raw";
}

TEST(SweepCommand, OutputsAreIdenticalWhateverTheNumberOfThreads) {
  const fs::path s = tiny_scenario("determinism");
  const fs::path dir = temp_dir();
  const std::string grid =
      " --grid training.micro_batch=1,2 --grid "
      "fsdp.backward_prefetch=BACKWARD_PRE,BACKWARD_POST,none"
      " --grid fsdp.limit_all_gathers=true,false --grid training.global_batch=16,32";
  for (const char* j : {"1", "2"}) {
    const std::string stem = (dir / (std::string("j") + j)).string();
    const Outcome o = run_fsdpsim("sweep " + s.string() + grid + " -j " + j + " --out " + stem +
                                  ".csv --jsonl " + stem + ".jsonl --md " + stem + ".md");
    ASSERT_EQ(o.exit_code, 0) << o.output;
  }
  EXPECT_EQ(count_lines(read_file(dir / "j1.csv")), 25U);
  EXPECT_EQ(count_lines(read_file(dir / "j1.jsonl")), 24U);
  for (const char* ext : {".csv", ".jsonl", ".md"}) {
    const std::string one = read_file(dir / (std::string("j1") + ext));
    EXPECT_FALSE(one.empty()) << ext;
    EXPECT_EQ(one, read_file(dir / (std::string("j2") + ext))) << ext;
  }
  const std::string jsonl = read_file(dir / "j1.jsonl");
  const nlohmann::json first = nlohmann::json::parse(jsonl.substr(0, jsonl.find('\n')));
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["grid"]["training.micro_batch"], 1);
  EXPECT_EQ(first["schema"], "fsdpsim.result/1");

  // The library entry point agrees.
  SweepOptions options;
  options.scenario = s.string();
  options.grid = {"training.micro_batch=1,2", "fsdp.backward_prefetch=BACKWARD_PRE,none"};
  options.configs_dir = FSDPSIM_CONFIGS_DIR;
  const SweepPlan plan = plan_sweep(options);
  const SweepRun a = run_sweep(plan, 1, nullptr);
  const SweepRun b = run_sweep(plan, 2, nullptr);
  EXPECT_EQ(table_to_csv(a.table), table_to_csv(b.table));
  EXPECT_EQ(a.json_lines, b.json_lines);
  EXPECT_FALSE(a.stopped);
}

// Merged slices say what priced their points as the unsharded sweep does; a slice written before
// fsdpsim had the calibration column cannot say it, and is refused beside one that can.
TEST(SweepCommand, MergedSlicesSayWhatPricedThePoints) {
  const fs::path s = tiny_scenario("merged_costs", {{"hardware", {{"preset", "a100-sxm-80gb"}}}});
  const fs::path dir = temp_dir();
  const std::string sweep = "sweep " + s.string() +
                            " --grid training.micro_batch=1,2 --set "
                            "hardware.calibration=a100-sxm-80gb";
  ASSERT_EQ(run_fsdpsim(sweep + " --md " + (dir / "costs_all.md").string()).exit_code, 0);
  std::string slices;
  for (int k = 1; k <= 2; ++k) {
    const fs::path slice = dir / ("costs_slice" + std::to_string(k) + ".csv");
    ASSERT_EQ(run_fsdpsim(sweep + " --shard " + std::to_string(k) + "/2 --out " + slice.string())
                  .exit_code,
              0);
    slices += " " + slice.string();
  }
  const fs::path md = dir / "costs_merged.md";
  ASSERT_EQ(run_fsdpsim("merge" + slices + " --md " + md.string()).exit_code, 0);
  const std::string line =
      "\n\nCosts from the calibration profile `a100-sxm-80gb` where it measured them, the rest "
      "from the hardware presets' models.\n\n";
  EXPECT_NE(read_file(dir / "costs_all.md").find(line), std::string::npos);
  EXPECT_NE(read_file(md).find(line), std::string::npos) << read_file(md);

  // Slice 2 as an older fsdpsim wrote it: no calibration column.
  std::string old = read_file(dir / "costs_slice2.csv");
  for (std::size_t at = old.find(",calibration,"); at != std::string::npos;
       at = old.find(",a100-sxm-80gb,")) {
    old.erase(at, old.find(',', at + 1) - at);
  }
  std::ofstream(dir / "costs_old.csv") << old;
  const SweepTable old_table = table_from_csv(old, "old.csv");
  EXPECT_FALSE(old_table.calibration_known);
  ASSERT_EQ(old_table.rows.size(), 1U);
  const Outcome mixed = run_fsdpsim("merge " + (dir / "costs_slice1.csv").string() + " " +
                                    (dir / "costs_old.csv").string());
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.output.find("costs_old.csv: has no calibration column, where "),
            std::string::npos)
      << mixed.output;
}

TEST(SweepCommand, ShardsMergeIntoTheUnshardedCsvByteForByte) {
  const fs::path s = tiny_scenario("shards");
  const fs::path dir = temp_dir();
  const std::string grid =
      " --grid training.micro_batch=1,2,4 --grid fsdp.backward_prefetch=BACKWARD_PRE,none,BAD"
      " --grid fsdp.limit_all_gathers=true,false";
  // BAD and micro_batch 4 are refused at every point (exit 2), yet every row is written.
  ASSERT_EQ(
      run_fsdpsim("sweep " + s.string() + grid + " --out " + (dir / "all.csv").string()).exit_code,
      2);
  std::string slices;
  for (int k = 1; k <= 4; ++k) {
    const fs::path slice = dir / ("slice" + std::to_string(k) + ".csv");
    const Outcome o = run_fsdpsim("sweep " + s.string() + grid + " --shard " + std::to_string(k) +
                                  "/4 --out " + slice.string());
    ASSERT_EQ(o.exit_code, 0) << o.output;
    // A slice's log says it is one.
    EXPECT_EQ(o.output.rfind("slice " + std::to_string(k) + "/4 of a grid of 18 points: ", 0), 0U)
        << o.output;
    const SweepTable t = table_from_csv(read_file(slice), slice.string());
    // Its points, as Shard deals them.
    std::vector<std::int64_t> indices;
    for (const SweepRow& r : t.rows) indices.push_back(r.index);
    EXPECT_EQ(
        indices,
        (Shard{k, 4}.indices({parse_grid_option("training.micro_batch=1,2,4"),
                              parse_grid_option("fsdp.backward_prefetch=BACKWARD_PRE,none,BAD"),
                              parse_grid_option("fsdp.limit_all_gathers=true,false")})));
    slices += " " + slice.string();
  }
  const Outcome merged = run_fsdpsim("merge" + slices + " --out " + (dir / "merged.csv").string());
  ASSERT_EQ(merged.exit_code, 2) << merged.output;
  EXPECT_NE(merged.output.find("error: fsdp.backward_prefetch=BAD: none of its 6 points"),
            std::string::npos)
      << merged.output;
  const std::string all = read_file(dir / "all.csv");
  EXPECT_EQ(count_lines(all), 19U);
  EXPECT_EQ(read_file(dir / "merged.csv"), all);
  EXPECT_NE(merged.output.find("best that fits: "), std::string::npos) << merged.output;

  // A slice twice, a missing slice, a table of another sweep: bad input.
  const std::string one = (dir / "slice1.csv").string();
  const Outcome twice =
      run_fsdpsim("merge" + slices + " " + one + " --out " + (dir / "x.csv").string());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.output.find(one + ": given twice; pass each slice once"), std::string::npos)
      << twice.output;
  // ... also when spelled another way.
  const std::string other_spelling = (dir / "." / "slice1.csv").string();
  const Outcome respelled =
      run_fsdpsim("merge" + slices + " " + other_spelling + " --out " + (dir / "x.csv").string());
  EXPECT_EQ(respelled.exit_code, 2);
  EXPECT_NE(respelled.output.find(other_spelling + ": given twice (also as " + one +
                                  "); pass each slice once"),
            std::string::npos)
      << respelled.output;
  // Two slices holding one point (one written again under another name) name both.
  fs::copy_file(one, dir / "copy.csv", fs::copy_options::overwrite_existing);
  const Outcome copied = run_fsdpsim("merge" + slices + " " + (dir / "copy.csv").string() +
                                     " --out " + (dir / "x.csv").string());
  EXPECT_EQ(copied.exit_code, 2);
  EXPECT_NE(copied.output.find("copy.csv: point 0 is also in " + one), std::string::npos)
      << copied.output;
  const std::string three =
      " " + one + " " + (dir / "slice2.csv").string() + " " + (dir / "slice3.csv").string();
  const Outcome missing = run_fsdpsim("merge" + three + " --out " + (dir / "x.csv").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("is a slice missing?"), std::string::npos) << missing.output;
  // --allow-gaps merges them, and says the table is part of its grid (18 points, 4 missing);
  // BAD, refused at every point the slices hold, is named on those points.
  const fs::path gaps_md = dir / "gaps.md";
  const Outcome gaps = run_fsdpsim("merge" + three + " --allow-gaps --out " +
                                   (dir / "x.csv").string() + " --md " + gaps_md.string());
  EXPECT_EQ(gaps.exit_code, 2) << gaps.output;
  EXPECT_NE(gaps.output.find("error: fsdp.backward_prefetch=BAD: none of its "), std::string::npos)
      << gaps.output;
  EXPECT_NE(gaps.output.find("merge: 14 of the grid's 18 points; 4 are in none of the slices "
                             "(--allow-gaps)"),
            std::string::npos)
      << gaps.output;
  EXPECT_NE(read_file(gaps_md).find("# fsdpsim sweep (merged slices, 14 of the grid's 18 points)"),
            std::string::npos);
  EXPECT_EQ(merged.output.find("merge: "), std::string::npos) << merged.output;
  ASSERT_EQ(run_fsdpsim("sweep " + s.string() + " --grid training.micro_batch=1,2 --out " +
                        (dir / "other.csv").string())
                .exit_code,
            0);
  const Outcome other = run_fsdpsim("merge" + slices + " " + (dir / "other.csv").string());
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.output.find("header differs"), std::string::npos) << other.output;
  // Each header is named by its file.
  EXPECT_NE(other.output.find((dir / "other.csv").string() + ": index,training.micro_batch,status"),
            std::string::npos)
      << other.output;

  // A slice cut short (an interrupted run keeps the rows finished so far) that lost the last
  // point: no gap below the last index merged, but the grid has 18 points.
  std::string slice2 = read_file(dir / "slice2.csv");  // 1, 4, 8, 15, 17
  ASSERT_EQ(slice2.substr(slice2.rfind('\n', slice2.size() - 2) + 1, 3), "17,");
  slice2.erase(slice2.rfind('\n', slice2.size() - 2) + 1);
  std::ofstream(dir / "slice2_cut.csv") << slice2;
  const Outcome cut =
      run_fsdpsim("merge " + one + " " + (dir / "slice2_cut.csv").string() + " " +
                  (dir / "slice3.csv").string() + " " + (dir / "slice4.csv").string() + " --out " +
                  (dir / "x.csv").string());
  EXPECT_EQ(cut.exit_code, 2);
  EXPECT_NE(cut.output.find("1 of the sweep's 18 points are in none of the files (17)"),
            std::string::npos)
      << cut.output;

  // Same grid keys, other values or another --set: a slice of another sweep, whose rows would
  // fill the missing indices with other points' numbers.
  for (const std::string& change : {std::string(" --set training.seq_len=1024"), std::string()}) {
    const std::string other_grid = change.empty()
                                       ? " --grid training.micro_batch=1,2,8 --grid "
                                         "fsdp.backward_prefetch=BACKWARD_PRE,none,BAD --grid "
                                         "fsdp.limit_all_gathers=true,false"
                                       : grid + change;
    const fs::path stranger = dir / "stranger.csv";
    const Outcome made =
        run_fsdpsim("sweep " + s.string() + other_grid + " --shard 4/4 --out " + stranger.string());
    if (made.exit_code != 0) {
      ADD_FAILURE() << made.output;
      continue;
    }
    const Outcome mixed = run_fsdpsim("merge " + three + " " + stranger.string());
    EXPECT_EQ(mixed.exit_code, 2);
    EXPECT_NE(mixed.output.find("the slices are not of one sweep"), std::string::npos)
        << mixed.output;
  }

  // More slices than points: slice 20 of 20 owns none and holds only a header. It adds nothing
  // to a merge of the slices that hold the points, and alone it is nothing to merge.
  const fs::path empty = dir / "empty.csv";
  const Outcome no_point =
      run_fsdpsim("sweep " + s.string() + grid + " --shard 20/20 --out " + empty.string());
  ASSERT_EQ(no_point.exit_code, 0) << no_point.output;
  // It says it ran nothing, not that nothing fits.
  EXPECT_NE(no_point.output.find("best that fits: none: no point was run\n"), std::string::npos)
      << no_point.output;
  EXPECT_EQ(count_lines(read_file(empty)), 1U);
  const Outcome with_empty =
      run_fsdpsim("merge" + slices + " " + empty.string() + " --out " + (dir / "x.csv").string());
  ASSERT_EQ(with_empty.exit_code, 2) << with_empty.output;  // BAD, as above
  EXPECT_EQ(read_file(dir / "x.csv"), all);
  const Outcome only_empty = run_fsdpsim("merge " + empty.string());
  EXPECT_EQ(only_empty.exit_code, 2);
  EXPECT_NE(only_empty.output.find("none of the 1 files holds a point"), std::string::npos)
      << only_empty.output;

  // A gap of millions of points is counted, not listed (it once filled memory).
  const std::string text = read_file(dir / "slice1.csv");
  const std::string header = text.substr(0, text.find('\n') + 1);
  std::string last_row = text.substr(header.size());
  last_row = last_row.substr(0, last_row.find('\n') + 1);
  ASSERT_EQ(last_row.substr(last_row.size() - 4), ",18\n");
  last_row.replace(last_row.size() - 3, 2, "10000000");
  std::ofstream(dir / "far.csv") << header << last_row << "9999999"
                                 << last_row.substr(last_row.find(','));
  const Outcome far = run_fsdpsim("merge " + (dir / "far.csv").string());
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_NE(far.output.find("9999998 of the sweep's 10000000 points are in none of the files (1, "
                            "2, 3"),
            std::string::npos)
      << far.output;

  // An index is as fsdpsim writes it: "03" is an edit, not point 3.
  std::ofstream(dir / "padded.csv") << header << "0" << last_row;
  const Outcome padded = run_fsdpsim("merge " + (dir / "padded.csv").string());
  EXPECT_EQ(padded.exit_code, 2) << padded.output;
  EXPECT_NE(padded.output.find("index \"0" + last_row.substr(0, last_row.find(',')) +
                               "\" is not an index as fsdpsim writes it"),
            std::string::npos)
      << padded.output;
  // Slices joined with cat: the second header line is named as such.
  std::ofstream(dir / "joined.csv")
      << read_file(dir / "slice1.csv") << read_file(dir / "slice2.csv");
  const Outcome joined = run_fsdpsim("merge " + (dir / "joined.csv").string());
  EXPECT_EQ(joined.exit_code, 2) << joined.output;
  EXPECT_NE(joined.output.find("a second header line: slices joined into one file (cat)? give "
                               "them to fsdpsim merge as they are"),
            std::string::npos)
      << joined.output;
}

TEST(SweepCommand, AStopFlagEndsTheSweepWithTheFinishedRows) {
  SweepOptions options;
  options.scenario = tiny_scenario("stop").string();
  options.grid = {"training.micro_batch=1,2"};
  options.configs_dir = FSDPSIM_CONFIGS_DIR;
  const std::atomic<bool> stop{true};
  const SweepRun run = run_sweep(plan_sweep(options), 2, &stop);
  EXPECT_TRUE(run.stopped);
  EXPECT_TRUE(run.table.rows.empty());
}

// A slice of a sharded sweep may hold only invalid points and exit 0, but an unknown key or
// preset, or a malformed value, that no axis touches makes every point invalid: refused before
// any slice runs.
TEST(SweepCommand, AnUnknownNameNoAxisTouchesIsRefusedInEverySlice) {
  const fs::path s = tiny_scenario("unknown_name", {{"fsdp", {{"limit_allgathers", true}}}});
  const std::string grid = " --grid training.micro_batch=1,2 --shard 1/2 --out " +
                           (temp_dir() / "unknown_name.csv").string();
  const Outcome in_file = run_fsdpsim("sweep " + s.string() + grid);
  EXPECT_EQ(in_file.exit_code, 2) << in_file.output;
  EXPECT_NE(in_file.output.find("/fsdp/limit_allgathers: unknown key; did you mean "
                                "limit_all_gathers?"),
            std::string::npos)
      << in_file.output;
  // So is a malformed value the base scenario gives every point.
  const fs::path malformed = tiny_scenario("malformed_base", {{"training", {{"seq_len", "512"}}}});
  const Outcome value = run_fsdpsim("sweep " + malformed.string() + grid);
  EXPECT_EQ(value.exit_code, 2) << value.output;
  EXPECT_NE(value.output.find("expected at least one valid point, found 2 invalid scenarios in "
                              "the whole grid (the first: /training/seq_len: expected a positive "
                              "integer, found the string \"512\")"),
            std::string::npos)
      << value.output;
  const fs::path ok = tiny_scenario("unknown_preset");
  const Outcome preset = run_fsdpsim("sweep " + ok.string() + grid + " --set model=llama-3-8b");
  EXPECT_EQ(preset.exit_code, 2) << preset.output;
  EXPECT_NE(preset.output.find("unknown models preset \"llama-3-8b\" (did you mean "
                               "llama-3.1-8b?)"),
            std::string::npos)
      << preset.output;
}

// A grid value that names a file that is not there, or a preset that does not exist, is a
// mistake at every point, not a combination that does not fit: refused as `run` refuses it (it
// was a skipped row once, and the sweep exited 0), in every slice.
TEST(SweepCommand, AGridValueNamingAMissingFileOrPresetIsRefused) {
  const fs::path s = tiny_scenario("missing_file_on_axis");
  const fs::path csv = temp_dir() / "missing_file_on_axis.csv";
  for (const auto& [grid, message] :
       {std::pair<std::string, std::string>{"hardware.calibration=a100-sxm-80gb,nosuch.json",
                                            "--grid hardware.calibration: " + s.string() +
                                                ": /hardware/calibration: calibration file \""},
        {"model=mpt-125m,mpt-126m",
         "unknown models preset \"mpt-126m\" (did you mean mpt-125m?)"}}) {
    const Outcome o = run_fsdpsim("sweep " + s.string() + " --grid " + grid +
                                  " --shard 1/2 --out " + csv.string());
    EXPECT_EQ(o.exit_code, 2) << grid << "\n" << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << o.output;
    EXPECT_FALSE(fs::exists(csv));
  }
  // So is a profile that no scenario could use: one that does not say which GPU it measured.
  nlohmann::json profile = nlohmann::json::parse(
      read_file(std::string(FSDPSIM_CONFIGS_DIR) + "/calibration/a100-sxm-80gb.json"));
  profile.erase("device");
  const fs::path no_device = temp_dir() / "no_device_profile.json";
  std::ofstream(no_device) << profile.dump(2);
  const Outcome device =
      run_fsdpsim("sweep " + s.string() + " --grid hardware.calibration=a100-sxm-80gb," +
                  no_device.string() + " --out " + csv.string());
  EXPECT_EQ(device.exit_code, 2) << device.output;
  EXPECT_NE(device.output.find("/device: expected sm_count or memory_bytes"), std::string::npos)
      << device.output;
  EXPECT_FALSE(fs::exists(csv));
  // A file that exists but that another axis's value cannot use is a skipped point, an
  // infeasible combination: the sweep records it and exits 0.
  const Outcome mixed = run_fsdpsim("sweep " + s.string() +
                                    " --grid hardware.calibration=a100-sxm-80gb --grid "
                                    "hardware.preset=a100-sxm-80gb,h100-sxm-80gb --out " +
                                    csv.string());
  EXPECT_EQ(mixed.exit_code, 0) << mixed.output;
  EXPECT_NE(mixed.output.find("1 skipped"), std::string::npos) << mixed.output;
  // Three calibrations for two presets: each profile runs with its own GPU, so no value of
  // either axis is at fault though half the points are skipped.
  const fs::path h100_profile = temp_dir() / "h100_profile.json";
  nlohmann::json h100 = nlohmann::json::parse(
      read_file(std::string(FSDPSIM_CONFIGS_DIR) + "/calibration/a100-sxm-80gb.json"));
  h100["device"] = {{"name", "NVIDIA H100 80GB HBM3"}, {"sm_count", 132}};
  std::ofstream(h100_profile) << h100.dump(2);
  const Outcome crossed =
      run_fsdpsim("sweep " + s.string() + " --grid hardware.calibration=a100-sxm-80gb," +
                  h100_profile.string() +
                  " --grid hardware.preset=a100-sxm-80gb,h100-sxm-80gb --out " + csv.string());
  EXPECT_EQ(crossed.exit_code, 0) << crossed.output;
  EXPECT_NE(crossed.output.find("2 skipped"), std::string::npos) << crossed.output;
}

// A file whose section an axis sets a key in is not an object: the file's error, not the axis's
// key, is what every point fails on.
TEST(SweepCommand, AFileSectionThatCannotHoldAnAxisKeyIsTheFilesError) {
  const fs::path s = tiny_scenario("training_list");
  nlohmann::json document = nlohmann::json::parse(read_file(s));
  document["training"] = nlohmann::json::array();
  std::ofstream(s) << document.dump(2);
  const Outcome o = run_fsdpsim("sweep " + s.string() + " --grid training.micro_batch=1,2 --out -");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find(s.string() + ": /training: expected an object, found an empty array"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("not a scenario key"), std::string::npos) << o.output;
}

// --timing names the threads that ran: one per point at most, whatever -j asks.
TEST(SweepCommand, TimingCountsTheThreadsThatRan) {
  const fs::path s = tiny_scenario("timing");
  const Outcome o =
      run_fsdpsim("sweep " + s.string() + " --grid training.micro_batch=1,2 -j 8 --timing --out " +
                  (temp_dir() / "timing.csv").string());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("timing: 2 points in "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find(" on 2 threads\n"), std::string::npos) << o.output;
}

// Points refused at a key the scenario sets and no axis does (checkpoint_early_stop under an axis
// of compile) get a note naming the key and the tie that sets it only where it applies; the tie
// runs every point. A --set's key is the user's own: no note.
TEST(SweepCommand, APointRefusedAtTheScenariosOwnKeyNamesTheTie) {
  const fs::path s = tiny_scenario(
      "moot_key",
      {{"training", {{"activation_checkpointing", "full"}, {"checkpoint_early_stop", false}}}});
  const std::string out = " --out " + (temp_dir() / "moot_key.csv").string();
  const Outcome o =
      run_fsdpsim("sweep " + s.string() + " --grid training.compiled=false,true" + out);
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("note: training.checkpoint_early_stop is the scenario's own, set at "
                          "every point; to set it only where it applies, sweep it tied to the "
                          "axis that decides, null where it does not (--grid "
                          "'AXIS+training.checkpoint_early_stop=[a1,v1],[a2,null]')"),
            std::string::npos)
      << o.output;
  const Outcome tied = run_fsdpsim(
      "sweep " + s.string() +
      " --grid 'training.compiled+training.checkpoint_early_stop=[false,false],[true,null]'" + out);
  EXPECT_EQ(tied.exit_code, 0) << tied.output;
  EXPECT_NE(tied.output.find("2 points: 2 fit"), std::string::npos) << tied.output;
  EXPECT_EQ(tied.output.find("note:"), std::string::npos) << tied.output;
  const Outcome set = run_fsdpsim("sweep " + tiny_scenario("moot_key_set").string() +
                                  " --set training.activation_checkpointing=full --set "
                                  "training.checkpoint_early_stop=false --grid "
                                  "training.compiled=false,true" +
                                  out);
  EXPECT_EQ(set.exit_code, 0) << set.output;
  EXPECT_EQ(set.output.find("note: training.checkpoint_early_stop"), std::string::npos)
      << set.output;
}

// The markdown says what priced its points: a calibration profile named by the base scenario,
// or the presets alone; a grid over profiles counts the points of each. The CSV has each point's.
TEST(SweepCommand, TheMarkdownSaysWhatPricedThePoints) {
  const fs::path s = tiny_scenario("costs", {{"hardware", {{"preset", "a100-sxm-80gb"}}}});
  const fs::path md = temp_dir() / "costs.md";
  const fs::path csv = temp_dir() / "costs.csv";
  const std::string sweep = "sweep " + s.string() + " --grid training.micro_batch=1,2 --md " +
                            md.string() + " --out " + csv.string();
  ASSERT_EQ(run_fsdpsim(sweep).exit_code, 0);
  EXPECT_NE(read_file(md).find("\n\nCosts from the hardware presets' models (no calibration "
                               "profile).\n\n"),
            std::string::npos)
      << read_file(md);
  ASSERT_EQ(run_fsdpsim(sweep + " --set hardware.calibration=a100-sxm-80gb").exit_code, 0);
  EXPECT_NE(read_file(md).find("Costs from the calibration profile `a100-sxm-80gb` where it "
                               "measured them, the rest from the hardware presets' models."),
            std::string::npos)
      << read_file(md);
  EXPECT_NE(read_file(csv).find(",a100-sxm-80gb,"), std::string::npos) << read_file(csv);
  ASSERT_EQ(run_fsdpsim(sweep + " --grid hardware.calibration=a100-sxm-80gb,null").exit_code, 0);
  EXPECT_NE(read_file(md).find("Costs by the points' calibration profiles:\n\n"
                               "- 2 points: the hardware presets' models (no calibration "
                               "profile)\n"
                               "- 2 points: the calibration profile `a100-sxm-80gb` where"),
            std::string::npos)
      << read_file(md);
}

// Ctrl-C: the points in flight finish, the rows so far are written, the exit code is 130.
TEST(SweepCommand, SigintWritesTheFinishedRowsAndExits130) {
  const fs::path s =
      tiny_scenario("sigint", {{"model", {{"preset", "llama-3.1-70b"}, {"n_layers", nullptr}}},
                               {"hardware", {{"nodes", 32}}},
                               {"training", {{"global_batch", 512}}}});
  const fs::path csv = temp_dir() / "sigint.csv";
  const fs::path md = temp_dir() / "sigint.md";
  const Outcome o = run_fsdpsim(
      "sweep " + s.string() +
          " --grid training.micro_batch=1,2,4,8 --grid training.global_batch=256,512,1024,2048,4096"
          " --grid fsdp.backward_prefetch=BACKWARD_PRE,BACKWARD_POST,none --grid "
          "fsdp.limit_all_gathers=true,false"
          " --grid fsdp.max_inflight_all_gathers=1,2,3,4,5,6,7,8,9,10"
          " --grid training.activation_checkpointing=full,none --out " +
          csv.string() + " --md " + md.string(),
      // 3 s: well inside the sweep's ~30 s of CPU (2,400 points, one at a time by default), with
      // room for a loaded machine to start the process. timeout(1) signals the sweep twice (it,
      // then its process group): under load that once ended the sweep as a second Ctrl-C would,
      // before InterruptGuard took a repeat from the same sender for the same request.
      "timeout --preserve-status -s INT 3 ");
  ASSERT_EQ(o.exit_code, 130) << o.output;
  ASSERT_TRUE(fs::exists(csv)) << o.output;
  const SweepTable t = table_from_csv(read_file(csv), csv.string());
  EXPECT_LT(t.rows.size(), 2400U);
  for (std::size_t i = 0; i < t.rows.size(); ++i)
    EXPECT_EQ(t.rows[i].index, static_cast<std::int64_t>(i));
  EXPECT_NE(o.output.find("interrupted"), std::string::npos) << o.output;
  // The markdown says it holds part of the grid.
  EXPECT_NE(read_file(md).find(fmt::format(", interrupted after {} of 2400 points", t.rows.size())),
            std::string::npos);
}

// A sweep started ignoring Ctrl-C (nohup, a shell's background job) keeps ignoring it, as the
// other commands do: it runs every point.
TEST(SweepCommand, ASweepStartedIgnoringSigintRunsToTheEnd) {
  const fs::path s = tiny_scenario("ignored_sigint",
                                   {{"model", {{"preset", "llama-3.1-70b"}, {"n_layers", nullptr}}},
                                    {"hardware", {{"nodes", 32}}},
                                    {"training", {{"global_batch", 512}}}});
  const fs::path csv = temp_dir() / "ignored_sigint.csv";
  const Outcome o =
      run_fsdpsim("sweep " + s.string() +
                      " --grid training.micro_batch=1,2 --grid "
                      "fsdp.max_inflight_all_gathers=1,2,3,4,5,6,7,8,9,10"
                      " --grid fsdp.backward_prefetch=BACKWARD_PRE,BACKWARD_POST,none --grid "
                      "training.activation_checkpointing=full,none --out " +
                      csv.string() + " 2>&1 & p=$!; sleep 0.5; kill -INT $p; wait $p",
                  "trap '' INT; ");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(table_from_csv(read_file(csv), csv.string()).rows.size(), 120U);
}

// Once the grid is done the guard is gone: an output that waits (a FIFO nobody reads) can still
// be stopped, and a signal then ends the command as it ends any other.
TEST(SweepCommand, AnOutputThatWaitsCanBeInterrupted) {
  const fs::path fifo = temp_dir() / "nobody_reads.fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const fs::path s = tiny_scenario("waits");
  const Outcome o =
      run_fsdpsim("sweep " + s.string() + " --grid training.micro_batch=1,2 --out " + fifo.string(),
                  "timeout -k 10 --preserve-status -s TERM 3 ");
  EXPECT_EQ(o.exit_code, 143) << o.output;
}

}  // namespace
}  // namespace fsdpsim::app
