#include "sim/app/report_plots.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "sim/app/finite_number.hpp"
#include "sim/app/markdown_cell.hpp"

namespace fsdpsim::app {
namespace {

// Colours: ColorBrewer "Blues" for points that fit, a red for out-of-memory points.
constexpr const char* kFitColour = "#6baed6";
constexpr const char* kOomColour = "#de2d26";
constexpr const char* kBestColour = "#08519c";
constexpr std::size_t kMaxHeatmapAxes = 8;
// Points of one axis value spread over this width (in category units) so they do not hide
// each other.
constexpr double kJitterWidth = 0.5;
// Above this many tick labels on an axis, or this many characters in all (about what a plot panel
// holds side by side at 12 pt: JSON values such as hardware.stragglers lists are long), they are
// rotated.
constexpr std::size_t kStraightTicks = 6;
constexpr std::size_t kStraightTickCharacters = 60;

bool simulated(const SweepRow& row) { return row.status != PointStatus::kSkipped; }
bool fits(const SweepRow& row) { return row.status == PointStatus::kOk; }
double throughput(const SweepRow& row) { return row.metrics[kMetricTokensPerSPerGpu]; }
double reserved(const SweepRow& row) { return row.metrics[kMetricPeakReserved]; }

// Text for a data file cell: tabs and line breaks would break the columns.
std::string cell(std::string text) {
  for (char& c : text) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  // gnuplot reads a field that starts with '"' as a quoted string up to the next '"' (quotes
  // inside a field are plain text): an unbalanced one would swallow the columns after it.
  if (!text.empty() && text.front() == '"') text.front() = '\'';
  return text;
}

// A gnuplot string literal in single quotes. gnuplot substitutes `system commands` and @macros
// anywhere on a command line except inside single-quoted strings (gnuplot manual,
// "substitution"), so text from a table (grid keys and values, which a scenario's sweep block
// or a hand-edited CSV may hold) is displayed and never run. A quote is doubled; a line break
// would end the command, so it becomes a space.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') out += '\'';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "'";
}

// Text for a '#' comment line: a line break would start a command.
std::string comment_text(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

std::string script_header(const std::string& what, const std::string& source,
                          const std::string& data, const std::string& svg, int width, int height) {
  return fmt::format(
      "# fsdpsim report: {}.\n"
      "# From {}; data: {}. Edit freely, then re-render with: gnuplot {}.gp\n"
      "if (!exists(\"outfile\")) outfile = {}\n"
      "set terminal svg size {},{} noenhanced font \"Helvetica,12\" background rgb \"white\"\n"
      "set output outfile\n"
      "set datafile separator \"\\t\"\n",
      comment_text(what), comment_text(source), comment_text(data), svg.substr(0, svg.size() - 4),
      quoted(svg), width, height);
}

std::string category_tics(const char* axis, const std::vector<std::string>& values) {
  std::string tics;
  std::size_t characters = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    tics += fmt::format("{}{} {}", i == 0 ? "" : ", ", quoted(values[i]), i);
    characters += values[i].size();
  }
  std::string out = fmt::format("set {}range [-0.5:{}]\nset {}tics ({})", axis,
                                static_cast<double>(values.size()) - 0.5, axis, tics);
  const bool crowded = values.size() > kStraightTicks || characters > kStraightTickCharacters;
  if (crowded && std::string(axis) == "x") out += " rotate by -30 left";
  return out + "\n";
}

// points.tsv: one line per simulated point; columns 1 index, 2 status, 3 tokens/s/GPU, 4 peak
// reserved GiB, 5 on the Pareto front (0/1), then per axis its x position (6 + 2i, with
// jitter) and its value (7 + 2i).
std::string points_file(const SweepTable& table, const std::vector<ReportAxis>& axes,
                        const std::vector<std::size_t>& front) {
  std::vector<bool> on_front(table.rows.size(), false);
  for (const std::size_t f : front) on_front[f] = true;
  // Rank of each row among the simulated rows of its value, per axis.
  std::vector<std::vector<double>> position(axes.size(),
                                            std::vector<double>(table.rows.size(), 0.0));
  for (std::size_t a = 0; a < axes.size(); ++a) {
    std::vector<std::size_t> count(axes[a].values.size(), 0);
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      if (simulated(table.rows[r])) ++count[axes[a].value_of_row[r]];
    }
    std::vector<std::size_t> seen(axes[a].values.size(), 0);
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      if (!simulated(table.rows[r])) continue;
      const std::size_t v = axes[a].value_of_row[r];
      const double spread =
          count[v] > 1
              ? kJitterWidth *
                    (static_cast<double>(seen[v]) / static_cast<double>(count[v] - 1) - 0.5)
              : 0.0;
      position[a][r] = static_cast<double>(v) + spread;
      ++seen[v];
    }
  }
  std::string out = "# index\tstatus\ttokens_per_s_per_gpu\tpeak_mem_reserved_gib\tpareto";
  for (const ReportAxis& axis : axes) out += fmt::format("\t{0} x\t{0}", cell(axis.key));
  out += "\n";
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const SweepRow& row = table.rows[r];
    if (!simulated(row)) continue;
    out += fmt::format("{}\t{}\t{}\t{}\t{}", row.index, point_status_name(row.status),
                       throughput(row), reserved(row), on_front[r] ? 1 : 0);
    for (std::size_t a = 0; a < axes.size(); ++a) {
      out += fmt::format("\t{:.4f}\t{}", position[a][r], cell(row.labels[a]));
    }
    out += "\n";
  }
  return out;
}

// The best point that fits (highest throughput; ties: less memory, lower index) among `rows`.
std::optional<std::size_t> best_of(const SweepTable& table, const std::vector<std::size_t>& rows) {
  std::optional<std::size_t> best;
  for (const std::size_t r : rows) {
    const SweepRow& row = table.rows[r];
    if (!fits(row)) continue;
    if (!best || throughput(row) > throughput(table.rows[*best]) ||
        (throughput(row) == throughput(table.rows[*best]) &&
         reserved(row) < reserved(table.rows[*best]))) {
      best = r;
    }
  }
  return best;
}

void add_pareto(const SweepTable& table, const std::string& source,
                const std::vector<std::size_t>& front, ReportPlan& plan) {
  if (front.empty()) {
    plan.notes.push_back("No point fits in memory, so there is no Pareto front to plot.");
    return;
  }
  std::vector<std::size_t> by_memory = front;
  std::sort(by_memory.begin(), by_memory.end(), [&](std::size_t a, std::size_t b) {
    return reserved(table.rows[a]) < reserved(table.rows[b]);
  });
  std::string data = "# peak_mem_reserved_gib\ttokens_per_s_per_gpu\tlabel\tindex\n";
  for (const std::size_t r : by_memory) {
    const SweepRow& row = table.rows[r];
    data += fmt::format("{}\t{}\t#{}\t{}\n", reserved(row), throughput(row), row.index, row.index);
  }
  plan.files.push_back({"pareto.tsv", data});
  std::string script = script_header("throughput vs peak reserved memory and its Pareto front",
                                     source, "points.tsv, pareto.tsv", "pareto.svg", 900, 560);
  script += fmt::format(
      "set title \"Pareto front: tokens/s per GPU vs peak reserved memory (points that fit)\"\n"
      "set xlabel \"peak reserved memory per GPU (GiB)\"\n"
      "set ylabel \"tokens/s per GPU\"\n"
      "set grid lc rgb \"#dddddd\"\n"
      "set key below\n"
      "set offsets graph 0.05, graph 0.08, graph 0.08, graph 0.05\n"
      "plot \"points.tsv\" using (strcol(2) eq \"ok\" ? $4 : 1/0):3 with points pt 7 ps 0.6 lc rgb "
      "\"{}\" "
      "title \"fits\", \\\n"
      "     \"pareto.tsv\" using 1:2 with linespoints lw 2 pt 7 ps 1.0 lc rgb \"{}\" title "
      "\"Pareto front "
      "(label: point index)\", \\\n"
      "     \"pareto.tsv\" using 1:2:3 with labels left offset char 0.8,0.6 font \",10\" notitle\n",
      kFitColour, kBestColour);
  plan.files.push_back({"pareto.gp", script});
  plan.plots.push_back(
      {ReportPlotKind::kPareto, "pareto.gp", "pareto.svg",
       "Pareto front: throughput vs peak reserved memory",
       "Every point that fits (light) and the points no other point beats on both throughput and "
       "memory (dark, labelled with their index in the sweep CSV)."});
}

void add_axis(const SweepTable& table, const std::string& source,
              const std::vector<ReportAxis>& axes, std::size_t a, ReportPlan& plan) {
  const ReportAxis& axis = axes[a];
  const std::string& slug = axis.slug;
  const std::string best_file = fmt::format("best_{}.tsv", slug);
  std::vector<std::vector<std::size_t>> rows_of_value(axis.values.size());
  for (std::size_t r = 0; r < table.rows.size(); ++r)
    rows_of_value[axis.value_of_row[r]].push_back(r);
  std::string best = "# x\tvalue\ttokens_per_s_per_gpu\tpeak_mem_reserved_gib\tindex\n";
  bool any_fits = false;
  bool any_oom = false;
  std::string labels;  // where nothing fits, say so rather than leave a gap
  for (std::size_t v = 0; v < axis.values.size(); ++v) {
    for (const std::size_t r : rows_of_value[v])
      any_oom = any_oom || table.rows[r].status == PointStatus::kOom;
    const std::optional<std::size_t> b = best_of(table, rows_of_value[v]);
    if (!b) {
      // Out of memory, or no valid scenario at that value (every point skipped).
      const bool simulated =
          std::any_of(rows_of_value[v].begin(), rows_of_value[v].end(),
                      [&](std::size_t r) { return table.rows[r].status != PointStatus::kSkipped; });
      labels += fmt::format("set label {} \"{}\" at {}, graph 0.06 center textcolor rgb \"{}\"\n",
                            v + 1, simulated ? "nothing fits" : "no valid point", v, kOomColour);
      continue;
    }
    any_fits = true;
    const SweepRow& row = table.rows[*b];
    best += fmt::format("{}\t{}\t{}\t{}\t{}\n", v, cell(axis.values[v]), throughput(row),
                        reserved(row), row.index);
  }
  plan.files.push_back({best_file, best});
  const std::size_t x_column = 6 + 2 * a;
  const auto panel = [&](const char* title, const char* ylabel, int y_column) {
    std::vector<std::string> clauses;
    if (any_fits) {
      clauses.push_back(
          fmt::format("\"points.tsv\" using (strcol(2) eq \"ok\" ? column({}) : 1/0):{} with "
                      "points pt 7 ps 0.5 lc rgb \"{}\" "
                      "title \"fits\"",
                      x_column, y_column, kFitColour));
    }
    if (any_oom) {
      clauses.push_back(
          fmt::format("\"points.tsv\" using (strcol(2) eq \"oom\" ? column({}) : 1/0):{} with "
                      "points pt 2 ps 0.6 lc rgb \"{}\" "
                      "title \"out of memory\"",
                      x_column, y_column, kOomColour));
    }
    if (any_fits) {
      clauses.push_back(fmt::format(
          "\"{}\" using 1:{} with {} lw 2 pt 7 ps {} lc rgb \"{}\" title \"best that fits\"",
          best_file, y_column == 3 ? 3 : 4, axis.numeric ? "linespoints" : "points",
          axis.numeric ? "0.9" : "1.2", kBestColour));
    }
    std::string text = fmt::format("set title \"{}\"\nset ylabel \"{}\"\nplot ", title, ylabel);
    for (std::size_t i = 0; i < clauses.size(); ++i) {
      if (i > 0) text += ", \\\n     ";
      text += clauses[i];
    }
    return text + "\n";
  };
  std::string script = script_header(
      fmt::format("throughput and peak reserved memory against {}", axis.key), source,
      fmt::format("points.tsv, {}", best_file), fmt::format("axis_{}.svg", slug), 1100, 460);
  script += fmt::format("set multiplot layout 1,2 title {} font \",14\"\n", quoted(axis.key));
  script += category_tics("x", axis.values);
  script += fmt::format(
      "set xlabel {}\nset yrange [0:*]\nset grid ytics lc rgb \"#dddddd\"\nset key below\n",
      quoted(axis.key));
  script += labels;
  script += panel("throughput", "tokens/s per GPU", 3);
  script += panel("peak reserved memory", "peak reserved memory per GPU (GiB)", 4);
  script += "unset multiplot\n";
  plan.files.push_back({fmt::format("axis_{}.gp", slug), script});
  plan.plots.push_back({ReportPlotKind::kAxis, fmt::format("axis_{}.gp", slug),
                        fmt::format("axis_{}.svg", slug), axis.key,
                        fmt::format("Every simulated point at each value of {} (the other axes "
                                    "vary within a column; red crosses: "
                                    "out of memory, at the memory reached when the allocation "
                                    "failed) and, dark, the best point that "
                                    "fits at each value.",
                                    markdown_code(axis.key))});
}

void add_heatmap(const SweepTable& table, const std::string& source,
                 const std::vector<ReportAxis>& axes, std::size_t ax, std::size_t ay,
                 ReportPlan& plan) {
  const ReportAxis& x = axes[ax];
  const ReportAxis& y = axes[ay];
  const std::string stem = fmt::format("heatmap_{}__{}", x.slug, y.slug);
  std::map<std::pair<std::size_t, std::size_t>, std::vector<std::size_t>> cells;
  for (std::size_t r = 0; r < table.rows.size(); ++r)
    cells[{x.value_of_row[r], y.value_of_row[r]}].push_back(r);
  double largest = 0.0;
  for (const SweepRow& row : table.rows) {
    if (fits(row)) largest = std::max(largest, throughput(row));
  }
  std::string with_value = "# x\ty\ttokens_per_s_per_gpu\tlabel\tindex\n";
  std::string without = "# x\ty\twhy (no point of this cell fits)\n";
  bool any_without = false;
  for (const auto& [xy, rows] : cells) {
    if (const std::optional<std::size_t> b = best_of(table, rows)) {
      const double t = throughput(table.rows[*b]);
      with_value +=
          fmt::format("{}\t{}\t{}\t{}\t{}\n", xy.first, xy.second, t,
                      largest >= 100.0 ? fmt::format("{:.0f}", t) : fmt::format("{:.3g}", t),
                      table.rows[*b].index);
    } else {
      const bool oom = std::any_of(rows.begin(), rows.end(), [&](std::size_t r) {
        return table.rows[r].status == PointStatus::kOom;
      });
      without += fmt::format("{}\t{}\t{}\n", xy.first, xy.second, oom ? "oom" : "skipped");
      any_without = true;
    }
  }
  plan.files.push_back({stem + ".tsv", with_value + "\n\n" + without});
  std::string script =
      script_header(fmt::format("best throughput that fits over {} and {}", x.key, y.key), source,
                    stem + ".tsv (block 0: cells with a point that fits; block 1: cells without)",
                    stem + ".svg", 820, 600);
  script += fmt::format(
      "set title \"best tokens/s per GPU that fits (over the other axes)\"\n"
      "{}{}set xlabel {}\nset ylabel {}\nset tics scale 0\nunset key\n"
      "set palette defined (0 \"#ffffcc\", 1 \"#a1dab4\", 2 \"#41b6c4\")\n"
      "set cblabel \"tokens/s per GPU\"\n"
      "plot \"{}.tsv\" index 0 using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc "
      "palette, \\\n"
      "     \"{}.tsv\" index 0 using 1:2:4 with labels",
      category_tics("x", x.values), category_tics("y", y.values), quoted(x.key), quoted(y.key),
      stem, stem);
  if (any_without) {
    script += fmt::format(
        ", \\\n     \"{0}.tsv\" index 1 using 1:2:(0.5):(0.5) with boxxyerror fs solid 1.0 "
        "noborder lc rgb \"#e0e0e0\", "
        "\\\n     \"{0}.tsv\" index 1 using 1:2:3 with labels tc rgb \"#606060\"",
        stem);
  }
  script += "\n";
  plan.files.push_back({stem + ".gp", script});
  plan.plots.push_back(
      {ReportPlotKind::kHeatmap, stem + ".gp", stem + ".svg", fmt::format("{} x {}", x.key, y.key),
       fmt::format("The best throughput that fits for each pair of {} and {}, over the "
                   "other axes; grey: no point of the cell fits.",
                   markdown_code(x.key), markdown_code(y.key))});
}

}  // namespace

std::string file_slug(const std::string& key) {
  std::string slug;
  for (const char c : key) {
    const bool keep =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    // One '_' for a run of dropped characters: no slug holds "__", which separates the two
    // axes of a heatmap's name.
    if (keep) {
      slug += c;
    } else if (slug.empty() || slug.back() != '_') {
      slug += '_';
    }
  }
  return slug.substr(0, kMaxSlugLength);
}

std::vector<ReportAxis> report_axes(const SweepTable& table) {
  std::vector<ReportAxis> axes;
  for (std::size_t a = 0; a < table.grid_keys.size(); ++a) {
    ReportAxis axis;
    axis.key = table.grid_keys[a];
    for (const SweepRow& row : table.rows) {
      if (std::find(axis.values.begin(), axis.values.end(), row.labels[a]) == axis.values.end()) {
        axis.values.push_back(row.labels[a]);
      }
    }
    axis.numeric = !axis.values.empty() &&
                   std::all_of(axis.values.begin(), axis.values.end(),
                               [](const std::string& v) { return finite_number(v).has_value(); });
    if (axis.numeric) {
      std::stable_sort(axis.values.begin(), axis.values.end(),
                       [](const std::string& p, const std::string& q) {
                         return *finite_number(p) < *finite_number(q);
                       });
    }
    for (const SweepRow& row : table.rows) {
      axis.value_of_row.push_back(static_cast<std::size_t>(
          std::find(axis.values.begin(), axis.values.end(), row.labels[a]) - axis.values.begin()));
    }
    axis.slug = file_slug(axis.key);
    axes.push_back(std::move(axis));
  }
  // Keys that differ only in characters a file name drops ("a.b", "a_b", "a b") or past the
  // length limit would write their plots over each other: those take their axis number too, and
  // a count when that is another axis's name already ("x_y_axis1" next to "x.y" and "x_y").
  std::map<std::string, int> uses;
  for (const ReportAxis& axis : axes) ++uses[axis.slug];
  std::set<std::string> taken;
  for (std::size_t a = 0; a < axes.size(); ++a) {
    const std::string base = axes[a].slug;
    std::string slug = uses[base] == 1 ? base : fmt::format("{}_axis{}", base, a + 1);
    for (int n = 2; taken.count(slug) > 0 || (slug != base && uses.count(slug) > 0); ++n)
      slug = fmt::format("{}_axis{}_{}", base, a + 1, n);
    taken.insert(slug);
    axes[a].slug = slug;
  }
  return axes;
}

ReportPlan plan_report(const SweepTable& table, const std::string& source) {
  ReportPlan plan;
  const std::vector<ReportAxis> axes = report_axes(table);
  if (std::none_of(table.rows.begin(), table.rows.end(), simulated)) {
    plan.notes.push_back(table.rows.empty()
                             ? "The table has no points, so there is nothing to plot."
                             : "No point was simulated (every point was skipped), "
                               "so there is nothing to plot.");
    return plan;
  }
  const std::vector<std::size_t> front = pareto_front(table);
  plan.files.push_back({"points.tsv", points_file(table, axes, front)});
  add_pareto(table, source, front, plan);
  for (std::size_t a = 0; a < axes.size(); ++a) add_axis(table, source, axes, a, plan);
  std::vector<std::size_t> numeric;
  for (std::size_t a = 0; a < axes.size(); ++a) {
    if (axes[a].numeric && axes[a].values.size() > 1) numeric.push_back(a);
  }
  if (numeric.size() < 2) {
    plan.notes.push_back(
        fmt::format("No heatmap: it needs two numeric grid axes with several values ({} here).",
                    numeric.size()));
  }
  // One heatmap per pair grows as the square of the axes (30 axes: 435 gnuplot runs).
  if (numeric.size() > kMaxHeatmapAxes) {
    plan.notes.push_back(fmt::format(
        "Heatmaps for the first {} numeric axes only ({} pairs); the grid has {} numeric axes.",
        kMaxHeatmapAxes, kMaxHeatmapAxes * (kMaxHeatmapAxes - 1) / 2, numeric.size()));
    numeric.resize(kMaxHeatmapAxes);
  }
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    for (std::size_t j = i + 1; j < numeric.size(); ++j)
      add_heatmap(table, source, axes, numeric[i], numeric[j], plan);
  }
  return plan;
}

}  // namespace fsdpsim::app
