// What `fsdpsim report` draws from a sweep table, as files: tab-separated data files and the
// gnuplot scripts that render them to SVG (written next to each other so users can tweak and
// re-run `gnuplot NAME.gp`). Pure text generation; gnuplot_runner.hpp runs the scripts.
//
// Plots: the Pareto front of throughput vs peak reserved memory; for each grid axis, throughput
// and peak reserved memory against its values (every simulated point, and a line through the
// best point that fits at each value); for each pair of numeric axes, a heatmap of the best
// throughput that fits.
#pragma once

#include <string>
#include <vector>

#include "sim/app/csv_table.hpp"

namespace fsdpsim::app {

struct ReportFile {
  std::string name;  // relative to the report folder
  std::string content;
};

enum class ReportPlotKind { kPareto, kAxis, kHeatmap };

struct ReportPlot {
  ReportPlotKind kind = ReportPlotKind::kAxis;
  std::string script;   // "pareto.gp"
  std::string svg;      // "pareto.svg"
  std::string title;    // a heading for index.md
  std::string caption;  // how to read it
};

// A grid axis as the report sees it: its values in plotting order (numbers ascending, other
// values in grid order) and whether every value is a number.
struct ReportAxis {
  std::string key;
  std::string slug;  // its part of file names: file_slug, unique among the axes
  bool numeric = false;
  std::vector<std::string> values;
  std::vector<std::size_t> value_of_row;  // per table row, an index into values
};

std::vector<ReportAxis> report_axes(const SweepTable& table);

struct ReportPlan {
  std::vector<ReportFile> files;   // data (.tsv) and scripts (.gp), in writing order
  std::vector<ReportPlot> plots;   // Pareto, then axes in grid order, then heatmaps
  std::vector<std::string> notes;  // plots left out, and why
};

// `source` names the CSV in the scripts' comments.
ReportPlan plan_report(const SweepTable& table, const std::string& source);

// "training.micro_batch" -> "training_micro_batch" (file names): letters, digits and '-', at
// most kMaxSlugLength of them (a file name has at most 255 bytes, and two go into a heatmap's).
inline constexpr std::size_t kMaxSlugLength = 64;
std::string file_slug(const std::string& key);

}  // namespace fsdpsim::app
