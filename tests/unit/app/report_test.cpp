// fsdpsim report: what it plots from a sweep table (axes, heatmaps for numeric pairs, the Pareto
// front), and the command as a user runs it: SVGs that parse as XML, index.md linking them,
// scripts and data next to them, exit code 2 without gnuplot or with a malformed table.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "sim/app/csv_table.hpp"
#include "sim/app/gnuplot_runner.hpp"
#include "sim/app/markdown_cell.hpp"
#include "sim/app/report_folder.hpp"
#include "sim/app/report_index.hpp"
#include "sim/app/report_plots.hpp"
#include "test_support.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;
using test_support::read_file;

fs::path temp_dir(const std::string& sub) { return test_support::temp_dir("report", sub); }

using test_support::Outcome;
using test_support::run_fsdpsim;

// micro_batch (1, 2, 10: numeric, 10 after 2) x max_inflight (1, 2) x prefetch (2 strings): 12
// points; micro_batch 10 is out of memory, one point is skipped.
SweepTable small_table() {
  SweepTable table;
  table.grid_keys = {"training.micro_batch", "fsdp.max_inflight_all_gathers",
                     "fsdp.backward_prefetch"};
  std::int64_t index = 0;
  for (const char* micro : {"1", "2", "10"}) {
    for (const char* inflight : {"1", "2"}) {
      for (const char* prefetch : {"BACKWARD_PRE", "none"}) {
        SweepRow row;
        row.index = index++;
        row.labels = {micro, inflight, prefetch};
        const double m = std::stod(micro);
        row.metrics.fill(0.0);
        row.metrics[kMetricTokensPerSPerGpu] = 1000.0 + 50.0 * m +
                                               (std::string(prefetch) == "none" ? -200.0 : 0.0) +
                                               std::stod(inflight);
        row.metrics[kMetricPeakReserved] = 20.0 + 10.0 * m + std::stod(inflight);
        row.metrics[kMetricStepTime] = 1.0;
        row.metrics[kMetricMfu] = 0.5;
        row.status = m > 5 ? PointStatus::kOom : PointStatus::kOk;
        if (row.index == 5) {
          row.status = PointStatus::kSkipped;
          row.reason = "global batch not divisible";
          row.metrics.fill(std::numeric_limits<double>::quiet_NaN());
        }
        table.rows.push_back(row);
      }
    }
  }
  return table;
}

bool has_file(const ReportPlan& plan, const std::string& name) {
  return std::any_of(plan.files.begin(), plan.files.end(),
                     [&](const ReportFile& f) { return f.name == name; });
}

TEST(ReportPlots, AxesKeepGridOrderForStringsAndSortNumbers) {
  const std::vector<ReportAxis> axes = report_axes(small_table());
  ASSERT_EQ(axes.size(), 3U);
  EXPECT_TRUE(axes[0].numeric);
  EXPECT_EQ(axes[0].values, (std::vector<std::string>{"1", "2", "10"}));
  EXPECT_TRUE(axes[1].numeric);
  EXPECT_FALSE(axes[2].numeric);
  EXPECT_EQ(axes[2].values, (std::vector<std::string>{"BACKWARD_PRE", "none"}));
  EXPECT_EQ(axes[0].value_of_row[11], 2U);
}

TEST(ReportPlots, PlotsEachAxisAHeatmapForTheNumericPairAndThePareto) {
  const ReportPlan plan = plan_report(small_table(), "sweep.csv");
  ASSERT_EQ(plan.plots.size(), 5U);
  EXPECT_EQ(plan.plots[0].svg, "pareto.svg");
  EXPECT_EQ(plan.plots[1].svg, "axis_training_micro_batch.svg");
  EXPECT_EQ(plan.plots[3].svg, "axis_fsdp_backward_prefetch.svg");
  EXPECT_EQ(plan.plots[4].svg, "heatmap_training_micro_batch__fsdp_max_inflight_all_gathers.svg");
  for (const ReportPlot& plot : plan.plots) EXPECT_TRUE(has_file(plan, plot.script)) << plot.script;
  EXPECT_TRUE(has_file(plan, "points.tsv"));
  EXPECT_TRUE(has_file(plan, "pareto.tsv"));
  // The skipped point is not plotted; 11 simulated points and a header.
  const auto points = std::find_if(plan.files.begin(), plan.files.end(),
                                   [](const ReportFile& f) { return f.name == "points.tsv"; });
  EXPECT_EQ(std::count(points->content.begin(), points->content.end(), '\n'), 12);
  // Heatmap cells where nothing fits (micro_batch 10) are listed as such.
  const auto heat = std::find_if(plan.files.begin(), plan.files.end(), [](const ReportFile& f) {
    return f.name.rfind("heatmap_", 0) == 0;
  });
  EXPECT_NE(heat->content.find("2\t0\toom"), std::string::npos) << heat->content;
  // Every script renders into the `outfile` its caller chooses, defaulting to its own SVG.
  for (const ReportFile& f : plan.files) {
    if (f.name.size() > 3 && f.name.substr(f.name.size() - 3) == ".gp") {
      EXPECT_NE(f.content.find("set output outfile"), std::string::npos) << f.name;
      EXPECT_NE(f.content.find("noenhanced"), std::string::npos) << f.name;
    }
  }
}

// An axis value with no point that fits is labelled as such: out of memory ("nothing fits"), or
// every point there skipped as an invalid scenario ("no valid point").
TEST(ReportPlots, AnAxisValueWithoutAFittingPointSaysWhy) {
  const auto axis_script = [](const SweepTable& table) {
    const ReportPlan plan = plan_report(table, "sweep.csv");
    const auto f = std::find_if(plan.files.begin(), plan.files.end(), [](const ReportFile& file) {
      return file.name == "axis_training_micro_batch.gp";
    });
    return f == plan.files.end() ? std::string() : f->content;
  };
  const std::string oom = axis_script(small_table());  // micro_batch 10: out of memory
  EXPECT_NE(oom.find("\"nothing fits\" at 2,"), std::string::npos) << oom;
  SweepTable invalid = small_table();
  for (SweepRow& row : invalid.rows) {
    if (row.labels[0] != "10") continue;
    row.status = PointStatus::kSkipped;
    row.reason = "global batch not divisible";
  }
  const std::string skipped = axis_script(invalid);
  EXPECT_NE(skipped.find("\"no valid point\" at 2,"), std::string::npos) << skipped;
  EXPECT_EQ(skipped.find("nothing fits"), std::string::npos) << skipped;
}

// Few short labels stay straight; long ones (a JSON list per value) are rotated so they do not
// overlap.
TEST(ReportPlots, LongCategoryLabelsAreRotated) {
  const auto script_of = [](const ReportPlan& plan, const std::string& name) {
    const auto f = std::find_if(plan.files.begin(), plan.files.end(),
                                [&](const ReportFile& file) { return file.name == name; });
    return f == plan.files.end() ? std::string() : f->content;
  };
  const std::string prefetch =
      script_of(plan_report(small_table(), "sweep.csv"), "axis_fsdp_backward_prefetch.gp");
  ASSERT_FALSE(prefetch.empty());
  EXPECT_EQ(prefetch.find("rotate"), std::string::npos);
  SweepTable table = small_table();
  for (SweepRow& row : table.rows) {
    row.labels[2] = row.labels[2] == "none" ? R"([{"compute_speed":0.92,"ranks":[13]}])"
                                            : R"([{"host_speed":0.1,"nodes":[1,2,3,4]}])";
  }
  const std::string stragglers =
      script_of(plan_report(table, "sweep.csv"), "axis_fsdp_backward_prefetch.gp");
  EXPECT_NE(stragglers.find("rotate by -30 left"), std::string::npos) << stragglers;
}

// Grid values come from scenarios and CSVs: in a gnuplot script they are single-quoted strings,
// where gnuplot substitutes no `command` or @macro, so a value is shown, never run.
TEST(ReportPlots, GridValuesInScriptsAreNeverCommands) {
  SweepTable table = small_table();
  for (SweepRow& row : table.rows) {
    if (row.labels[2] == "none") row.labels[2] = "b`touch pwned`'@x\nplot 1";
  }
  const ReportPlan plan = plan_report(table, "sweep.csv");
  const auto script = std::find_if(plan.files.begin(), plan.files.end(), [](const ReportFile& f) {
    return f.name == "axis_fsdp_backward_prefetch.gp";
  });
  ASSERT_NE(script, plan.files.end());
  EXPECT_NE(script->content.find("'b`touch pwned`''@x plot 1' 1"), std::string::npos)
      << script->content;
  EXPECT_EQ(script->content.find("\nplot 1"), std::string::npos) << "no line of its own";
}

// Keys that differ only in what a file name drops get plots of their own, a key longer than a
// file name allows is shortened, and a label's '"' cannot open a quoted field in the data.
TEST(ReportPlots, EachAxisHasFilesOfItsOwnAndDataFieldsStayApart) {
  SweepTable table = small_table();
  table.grid_keys = {"a.b", "a_b", std::string(300, 'k')};
  for (SweepRow& row : table.rows) {
    if (row.labels[2] == "none") row.labels[2] = "\"open";
  }
  const ReportPlan plan = plan_report(table, "sweep.csv");
  std::vector<std::string> svgs;
  for (const ReportPlot& plot : plan.plots) svgs.push_back(plot.svg);
  std::sort(svgs.begin(), svgs.end());
  EXPECT_EQ(std::adjacent_find(svgs.begin(), svgs.end()), svgs.end()) << "two plots, one file";
  EXPECT_TRUE(has_file(plan, "axis_a_b_axis1.gp"));
  EXPECT_TRUE(has_file(plan, "axis_a_b_axis2.gp"));
  EXPECT_TRUE(has_file(plan, "axis_" + std::string(kMaxSlugLength, 'k') + ".gp"));
  for (const ReportFile& f : plan.files) {
    if (f.name.ends_with(".tsv")) {
      EXPECT_EQ(f.content.find("\t\""), std::string::npos) << f.name;
    }
    if (f.name == "points.tsv") {
      EXPECT_NE(f.content.find("\t'open"), std::string::npos);
    }
  }
}

// Every file of a plan has a name of its own, whatever the keys: an axis-numbered name that is
// another key's name, and keys with "__", which separates a heatmap's two axes.
TEST(ReportPlots, NoTwoFilesShareAName) {
  const auto expect_unique = [](const ReportPlan& plan) {
    std::vector<std::string> names;
    for (const ReportFile& f : plan.files) names.push_back(f.name);
    for (const ReportPlot& p : plan.plots) names.push_back(p.svg);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end())
        << *std::adjacent_find(names.begin(), names.end());
  };
  SweepTable numbered = small_table();
  numbered.grid_keys = {"x.y", "x_y", "x_y_axis1"};
  expect_unique(plan_report(numbered, "sweep.csv"));

  SweepTable four;
  four.grid_keys = {"a", "a__b", "b__c", "c"};
  for (std::int64_t i = 0; i < 16; ++i) {
    SweepRow row;
    row.index = i;
    row.labels = {std::to_string(i / 8), std::to_string(i / 4 % 2), std::to_string(i / 2 % 2),
                  std::to_string(i % 2)};
    row.status = PointStatus::kOk;
    row.metrics.fill(1.0);
    row.metrics[kMetricTokensPerSPerGpu] = 100.0 + static_cast<double>(i);
    four.rows.push_back(row);
  }
  const ReportPlan plan = plan_report(four, "sweep.csv");
  EXPECT_EQ(plan.plots.size(), 1U + 4U + 6U);
  expect_unique(plan);
}

// Heatmaps grow as the square of the numeric axes: past eight, the first eight only, and a note.
TEST(ReportPlots, HeatmapsAreCappedAtEightNumericAxes) {
  SweepTable table;
  for (int a = 0; a < 10; ++a) table.grid_keys.push_back("axis" + std::to_string(a));
  for (int r = 0; r < 2; ++r) {
    SweepRow row;
    row.index = r;
    row.status = PointStatus::kOk;
    row.metrics.fill(1.0);
    row.labels.assign(10, std::to_string(r + 1));
    table.rows.push_back(row);
  }
  const ReportPlan plan = plan_report(table, "sweep.csv");
  const auto heatmaps =
      std::count_if(plan.plots.begin(), plan.plots.end(),
                    [](const ReportPlot& p) { return p.kind == ReportPlotKind::kHeatmap; });
  EXPECT_EQ(heatmaps, 28);
  EXPECT_NE(std::find_if(plan.notes.begin(), plan.notes.end(),
                         [](const std::string& n) {
                           return n.find("first 8 numeric axes only (28 pairs); the grid has 10") !=
                                  std::string::npos;
                         }),
            plan.notes.end());
}

// Text from the table in index.md is text: it cannot open a link, an image, code or a heading.
TEST(ReportIndex, KeysAndTitlesCannotInjectMarkdown) {
  EXPECT_EQ(markdown_text("x](evil.svg) ![y\n# h"), "x\\](evil.svg) !\\[y \\# h");
  // Emphasis, strikethrough and entities too; an underscore inside a word cannot emphasise.
  EXPECT_EQ(markdown_text("_a_ micro_batch __b__ ~~c~~ &lt;i&gt;"),
            "\\_a\\_ micro_batch \\_\\_b\\_\\_ \\~\\~c\\~\\~ \\&lt;i\\&gt;");
  EXPECT_EQ(markdown_code("a`b"), "``a`b``");
  EXPECT_EQ(markdown_code("`a"), "`` `a ``");
  EXPECT_EQ(markdown_link_target("dir (1)/my sweep.csv"), "<dir (1)/my sweep.csv>");
  EXPECT_EQ(markdown_link_target("sweep.csv"), "sweep.csv");
  SweepTable table = small_table();
  table.grid_keys[0] = "x](evil.svg) ![y\n\n# INJECTED";
  const ReportPlan plan = plan_report(table, "sweep.csv");
  const std::string index =
      report_index_markdown(table, plan, "T\n## x", "dir (1)/my sweep).csv", 10);
  EXPECT_EQ(index.find("\n# INJECTED"), std::string::npos) << index;
  EXPECT_EQ(index.find("\n## x"), std::string::npos) << index;
  // Outside code spans, where it is literal text, every bracket of the key is escaped.
  std::string prose;
  bool in_code = false;
  for (const char c : index) {
    if (c == '`') in_code = !in_code;
    if (!in_code) prose += c;
  }
  EXPECT_EQ(prose.find("x](evil.svg)"), std::string::npos) << index;
  EXPECT_NE(prose.find("x\\](evil.svg) !\\[y"), std::string::npos) << index;
  EXPECT_NE(index.find("(<dir (1)/my sweep).csv>)"), std::string::npos) << index;
}

TEST(ReportPlots, NothingFitsMeansNoParetoAndANote) {
  SweepTable table = small_table();
  for (SweepRow& row : table.rows) {
    if (row.status == PointStatus::kOk) row.status = PointStatus::kOom;
  }
  const ReportPlan plan = plan_report(table, "sweep.csv");
  EXPECT_FALSE(has_file(plan, "pareto.gp"));
  EXPECT_FALSE(plan.notes.empty());
  const std::string index = report_index_markdown(table, plan, "t", "sweep.csv", 10);
  EXPECT_NE(index.find("No point fits"), std::string::npos);
}

TEST(ReportIndex, EmbedsEveryPlotAndRanksTheBestPoints) {
  const SweepTable table = small_table();
  const ReportPlan plan = plan_report(table, "sweep.csv");
  const std::string index =
      report_index_markdown(table, plan, "Sweep report: small", "../sweep.csv", 3);
  EXPECT_EQ(index.rfind("# Sweep report: small\n", 0), 0U);
  for (const ReportPlot& plot : plan.plots)
    EXPECT_NE(index.find("](" + plot.svg + ")"), std::string::npos);
  EXPECT_NE(index.find("[../sweep.csv](../sweep.csv)"), std::string::npos);
  EXPECT_NE(index.find("12 points, 7 fit, 4 out of memory, 1 skipped"), std::string::npos) << index;
  // Best that fits: micro_batch 2, 2 in flight, BACKWARD_PRE (1102 tokens/s), point #6.
  EXPECT_NE(index.find("| 1 | #6 | 2 | 2 | BACKWARD_PRE | 1102.0 |"), std::string::npos) << index;
  EXPECT_EQ(index.find("| 4 |"), std::string::npos);
  EXPECT_EQ(index.find("Part of a grid"), std::string::npos) << index;
}

// A table of fewer rows than its grid (an interrupted sweep, one shard) says so.
TEST(ReportIndex, PartOfAGridSaysSo) {
  SweepTable table = small_table();
  table.grid_points = 24;
  const std::string index = report_index_markdown(table, plan_report(table, "sweep.csv"),
                                                  "Sweep report: part", "../sweep.csv", 3);
  EXPECT_NE(index.find("**Part of a grid of 24 points**"), std::string::npos) << index;
}

// The index says what priced the points where the table knows (costs_paragraph), and nothing
// where it does not (a table written before the calibration column).
TEST(ReportIndex, SaysWhatPricedThePointsWhereTheTableKnows) {
  SweepTable table = small_table();
  const auto index = [&] {
    return report_index_markdown(table, plan_report(table, "sweep.csv"), "Sweep report: costs",
                                 "../sweep.csv", 3);
  };
  EXPECT_EQ(index().find("Costs"), std::string::npos) << index();
  table.calibration_known = true;
  for (SweepRow& row : table.rows) {
    if (row.status != PointStatus::kSkipped) row.calibration = "h100-cluster";
  }
  EXPECT_NE(index().find("Costs from the calibration profile `h100-cluster` where it measured "
                         "them, the rest from the hardware presets' models.\n\n"),
            std::string::npos)
      << index();
}

// A small XML well-formedness check: balanced, properly nested tags with quoted attributes,
// comments, processing instructions and a doctype; returns the root element's name.
std::string xml_root(const std::string& xml, std::string& why) {
  std::vector<std::string> open;
  std::string root;
  std::size_t i = 0;
  while ((i = xml.find('<', i)) != std::string::npos) {
    if (xml.compare(i, 4, "<!--") == 0) {
      i = xml.find("-->", i);
      if (i == std::string::npos) return why = "unterminated comment", "";
      continue;
    }
    if (xml.compare(i, 9, "<![CDATA[") == 0) {
      i = xml.find("]]>", i);
      if (i == std::string::npos) return why = "unterminated CDATA", "";
      continue;
    }
    if (xml.compare(i, 2, "<?") == 0 || xml.compare(i, 2, "<!") == 0) {
      i = xml.find('>', i);
      if (i == std::string::npos) return why = "unterminated declaration", "";
      continue;
    }
    // A tag: find its end outside quotes.
    std::size_t j = i + 1;
    char quote = 0;
    for (; j < xml.size(); ++j) {
      if (quote != 0) {
        if (xml[j] == quote) quote = 0;
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      } else if (xml[j] == '>') {
        break;
      }
    }
    if (j >= xml.size()) return why = "unterminated tag", "";
    const std::string tag = xml.substr(i + 1, j - i - 1);
    const bool closing = !tag.empty() && tag[0] == '/';
    const bool self_closing = !tag.empty() && tag.back() == '/';
    const std::string name = tag.substr(
        closing ? 1 : 0, tag.find_first_of(" \t\n/", closing ? 1 : 0) - (closing ? 1 : 0));
    if (name.empty()) return why = "empty tag name", "";
    if (closing) {
      if (open.empty() || open.back() != name) return why = "mismatched </" + name + ">", "";
      open.pop_back();
    } else if (!self_closing) {
      if (open.empty() && !root.empty()) return why = "two root elements", "";
      if (open.empty()) root = name;
      open.push_back(name);
    } else if (open.empty() && root.empty()) {
      root = name;
    }
    i = j + 1;
  }
  if (!open.empty()) return why = "unclosed <" + open.back() + ">", "";
  return root;
}

TEST(ReportCommand, WritesSvgsThatParseAndAnIndexThatLinksThem) {
  if (!find_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  const fs::path dir = temp_dir("full");
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(small_table());
  const fs::path out = dir / "report";
  const Outcome o =
      run_fsdpsim("report " + csv.string() + " --out " + out.string() + " --title 'Small sweep'");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const std::string index = read_file(out / "index.md");
  EXPECT_EQ(index.rfind("# Small sweep\n", 0), 0U);
  EXPECT_NE(index.find("(../sweep.csv)"), std::string::npos) << index;
  std::size_t svgs = 0;
  for (std::size_t at = index.find("]("); at != std::string::npos; at = index.find("](", at + 2)) {
    const std::string link = index.substr(at + 2, index.find(')', at) - at - 2);
    if (link.size() < 4 || link.substr(link.size() - 4) != ".svg") continue;
    ++svgs;
    ASSERT_TRUE(fs::exists(out / link)) << link;
    const std::string svg = read_file(out / link);
    std::string why;
    EXPECT_EQ(xml_root(svg, why), "svg") << link << ": " << why;
    const std::string stem = link.substr(0, link.size() - 4);
    EXPECT_TRUE(fs::exists(out / (stem + ".gp"))) << stem;
  }
  EXPECT_EQ(svgs, 5U);
  EXPECT_TRUE(fs::exists(out / "points.tsv"));
  // No temporary files are left behind.
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

// small_table's micro_batch axis alone: 3 points, one out of memory.
SweepTable micro_batch_table() {
  SweepTable table = small_table();
  table.grid_keys = {"training.micro_batch"};
  std::vector<SweepRow> rows;
  for (SweepRow row : table.rows) {
    if (row.labels[1] != "1" || row.labels[2] != "BACKWARD_PRE") continue;
    row.index = static_cast<std::int64_t>(rows.size());
    row.labels.resize(1);
    rows.push_back(row);
  }
  table.rows = rows;
  return table;
}

std::vector<std::string> sorted_names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A report over an older one removes the older's files it does not write again (the axes the
// new sweep lacks) and keeps what no report wrote: the sweep CSV and a user's notes.
TEST(ReportCommand, ReplacesAnOlderReportAndKeepsOtherFiles) {
  if (!find_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  const fs::path dir = temp_dir("replace");
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(small_table());
  std::ofstream(dir / "notes.md") << "my notes\n";
  const std::string report = "report " + csv.string() + " --out " + dir.string();
  ASSERT_EQ(run_fsdpsim(report).exit_code, 0);
  ASSERT_TRUE(fs::exists(dir / "axis_fsdp_backward_prefetch.svg"));
  const std::string list = read_file(dir / kReportFileList);
  EXPECT_NE(list.find("axis_fsdp_backward_prefetch.svg\n"), std::string::npos) << list;
  EXPECT_EQ(list.find("sweep.csv"), std::string::npos) << list;

  std::ofstream(csv) << table_to_csv(micro_batch_table());
  const Outcome o = run_fsdpsim(report);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const std::vector<std::string> expected = {kReportFileList,
                                             "axis_training_micro_batch.gp",
                                             "axis_training_micro_batch.svg",
                                             "best_training_micro_batch.tsv",
                                             "index.md",
                                             "notes.md",
                                             "pareto.gp",
                                             "pareto.svg",
                                             "pareto.tsv",
                                             "points.tsv",
                                             "sweep.csv"};
  EXPECT_EQ(sorted_names(dir), expected);
  EXPECT_EQ(read_file(dir / "notes.md"), "my notes\n");
}

// gnuplot failing on the third plot leaves the folder as the last good report left it, without
// a scratch folder: no new plot is published next to an old index.md.
TEST(ReportCommand, AFailedReportLeavesTheFolderAsItWas) {
  if (!find_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  const fs::path dir = temp_dir("failed");
  const fs::path out = dir / "report";
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(micro_batch_table());
  ASSERT_EQ(run_fsdpsim("report " + csv.string() + " --out " + out.string()).exit_code, 0);
  const std::vector<std::string> before = sorted_names(out);
  const std::string index = read_file(out / "index.md");

  // A gnuplot that renders two plots (an empty SVG each), then fails.
  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  const fs::path count = dir / "count";
  {
    std::ofstream script(bin / "gnuplot");
    script << "#!/bin/sh\n"
           << "n=$(cat " << count.string() << " 2>/dev/null || echo 0); n=$((n+1)); echo $n > "
           << count.string() << "\n"
           << "[ $n -le 2 ] || { echo 'render failed' >&2; exit 1; }\n"
           << "f=${2#outfile=\\'}; echo '<svg/>' > \"${f%\\'}\"\n";
  }
  fs::permissions(bin / "gnuplot", fs::perms::owner_all);
  std::ofstream(csv) << table_to_csv(small_table());
  const Outcome o = run_fsdpsim("report " + csv.string() + " --out " + out.string(),
                                "env PATH=" + bin.string() + ":/usr/bin:/bin ");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("gnuplot failed on axis_"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("render failed"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("scratch"), std::string::npos) << "a removed folder named: " << o.output;
  EXPECT_EQ(read_file(count), "3\n");
  EXPECT_EQ(sorted_names(out), before);
  EXPECT_EQ(read_file(out / "index.md"), index);
}

// A gnuplot that ends well and writes nothing is named as such (not as a move from a removed
// scratch folder), and a folder the report made for itself goes again.
TEST(ReportCommand, AGnuplotThatWritesNothingIsNamedAndLeavesNoFolder) {
  const fs::path dir = temp_dir("silent_gnuplot");
  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "gnuplot") << "#!/bin/sh\nexit 0\n";
  fs::permissions(bin / "gnuplot", fs::perms::owner_all);
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(micro_batch_table());
  const fs::path out = dir / "new" / "report";
  const Outcome o = run_fsdpsim("report " + csv.string() + " --out " + out.string(),
                                "env PATH=" + bin.string() + ":/usr/bin:/bin ");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("without an error but wrote no "), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("scratch"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(dir / "new")) << "the folders the report made are left behind";
}

// The file list is trusted only for names a report writes: a hand-edited list naming the sweep
// or a user's notes removes neither.
TEST(ReportCommand, TheFileListRemovesOnlyWhatAReportWrites) {
  if (!find_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  const fs::path dir = temp_dir("edited_list");
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(micro_batch_table());
  std::ofstream(dir / "notes.md") << "mine\n";
  std::ofstream(dir / "axis_old.svg") << "<svg/>\n";
  std::ofstream(dir / kReportFileList) << "sweep.csv\nnotes.md\n../notes.md\naxis_old.svg\n";
  const Outcome o = run_fsdpsim("report " + csv.string() + " --out " + dir.string());
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(fs::exists(csv));
  EXPECT_TRUE(fs::exists(dir / "notes.md"));
  EXPECT_FALSE(fs::exists(dir / "axis_old.svg"));
}

// A device under a report's name (here a link to /dev/full) is refused before anything is
// published: it would be written in place, where a failure cannot be undone.
TEST(ReportCommand, ADeviceUnderAReportsNameIsRefused) {
  if (!find_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path dir = temp_dir("device");
  const fs::path out = dir / "report";
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(micro_batch_table());
  ASSERT_EQ(run_fsdpsim("report " + csv.string() + " --out " + out.string()).exit_code, 0);
  fs::remove(out / "index.md");
  fs::create_symlink("/dev/full", out / "index.md");
  const std::string points = read_file(out / "points.tsv");
  std::ofstream(csv) << table_to_csv(small_table());
  const Outcome o = run_fsdpsim("report " + csv.string() + " --out " + out.string());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("index.md: is not a plain file"), std::string::npos) << o.output;
  EXPECT_EQ(read_file(out / "points.tsv"), points);
  EXPECT_FALSE(fs::exists(out / "axis_fsdp_backward_prefetch.svg"));
}

// SIGTERM (or Ctrl-C) while gnuplot runs: gnuplot is stopped, nothing is published, no scratch
// folder stays, and the exit code says which signal.
TEST(ReportCommand, ASignalStopsGnuplotAndLeavesNothingBehind) {
  const fs::path dir = temp_dir("signal");
  const fs::path out = dir / "report";
  fs::create_directories(out);
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(micro_batch_table());
  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  // The stand-in gnuplot says it started, then hangs; SIGTERM comes once it has started (a fixed
  // delay raced with a loaded machine, where the signal could land before fsdpsim was running).
  const fs::path started = dir / "gnuplot_started";
  {
    std::ofstream script(bin / "gnuplot");
    script << "#!/bin/sh\ntouch '" << started.string() << "'\nexec sleep 60\n";
  }
  fs::permissions(bin / "gnuplot", fs::perms::owner_all);
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = run_fsdpsim(
      "report " + csv.string() + " --out " + out.string(),
      "env PATH=" + bin.string() +
          ":/usr/bin:/bin sh -c '\"$0\" \"$@\" & pid=$!; i=0; while [ ! -e " + started.string() +
          " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; kill -TERM $pid; wait $pid' ");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(o.exit_code, 143) << o.output;
  EXPECT_NE(o.output.find("interrupted: nothing was written"), std::string::npos) << o.output;
  EXPECT_TRUE(fs::is_empty(out)) << "left behind in " << out;
}

TEST(ReportCommand, MissingGnuplotOrBadInputExitsTwo) {
  const fs::path dir = temp_dir("bad");
  const fs::path csv = dir / "sweep.csv";
  std::ofstream(csv) << table_to_csv(small_table());
  const Outcome no_gnuplot = run_fsdpsim(
      "report " + csv.string() + " --out " + (dir / "r").string(), "env PATH=/nonexistent ");
  EXPECT_EQ(no_gnuplot.exit_code, 2);
  EXPECT_NE(no_gnuplot.output.find("gnuplot not found"), std::string::npos) << no_gnuplot.output;
  EXPECT_FALSE(fs::exists(dir / "r" / "index.md"));
  const fs::path bad = dir / "bad.csv";
  std::ofstream(bad) << "not,a,sweep\n1,2,3\n";
  EXPECT_EQ(run_fsdpsim("report " + bad.string() + " --out " + (dir / "r2").string()).exit_code, 2);
  EXPECT_EQ(run_fsdpsim("report /nonexistent/sweep.csv --out " + (dir / "r3").string()).exit_code,
            2);
  EXPECT_EQ(run_fsdpsim("report " + csv.string()).exit_code, 2);  // --out is required
  // A header alone is no sweep to report on (merge refuses it too); a title is plain text.
  const std::string text = table_to_csv(small_table());
  const fs::path header_only = dir / "header_only.csv";
  std::ofstream(header_only) << text.substr(0, text.find('\n') + 1);
  const Outcome empty =
      run_fsdpsim("report " + header_only.string() + " --out " + (dir / "r4").string());
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_NE(empty.output.find("has a header and no row"), std::string::npos) << empty.output;
  const Outcome escape = run_fsdpsim("report " + csv.string() + " --out " + (dir / "r5").string() +
                                     " --title \"$(printf 'x\\033[31my')\"");
  EXPECT_EQ(escape.exit_code, 2) << escape.output;
  EXPECT_NE(escape.output.find("--title: expected text, found the control character U+001B"),
            std::string::npos)
      << escape.output;
  EXPECT_FALSE(fs::exists(dir / "r5" / "index.md"));
  // An empty title is a mistake, not the default one.
  const Outcome untitled =
      run_fsdpsim("report " + csv.string() + " --out " + (dir / "r6").string() + " --title ''");
  EXPECT_EQ(untitled.exit_code, 2) << untitled.output;
  EXPECT_FALSE(fs::exists(dir / "r6" / "index.md"));
  // So is a blank one, which would head the page with nothing.
  const Outcome blank =
      run_fsdpsim("report " + csv.string() + " --out " + (dir / "r7").string() + " --title '  '");
  EXPECT_EQ(blank.exit_code, 2) << blank.output;
  EXPECT_NE(blank.output.find("expected a title, found \"  \""), std::string::npos) << blank.output;
  EXPECT_FALSE(fs::exists(dir / "r7" / "index.md"));
}

}  // namespace
}  // namespace fsdpsim::app
