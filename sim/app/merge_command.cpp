#include "sim/app/merge_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "sim/app/cli_validators.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/unusable_grid_values.hpp"

namespace fsdpsim::app {
namespace {

// Two spellings of one file (/tmp/s1.csv and ./s1.csv run from /tmp), or the same spelling.
bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

constexpr std::size_t kMissingIndicesShown = 10;

}  // namespace

SweepTable merge_tables(const std::vector<std::string>& inputs, bool allow_gaps) {
  if (inputs.empty()) throw ConfigError("merge: no input files");
  SweepTable merged;
  std::string header;
  std::string identified_by;  // the first slice with a sweep id
  std::string unidentified;   // the first slice without one (written before fsdpsim had them)
  std::map<std::int64_t, std::string> seen_in;  // index -> file
  for (const std::string& path : inputs) {
    SweepTable slice = table_from_csv(read_text_file(path), path);
    const std::string slice_header = csv_header(slice.grid_keys);
    if (header.empty()) {
      header = slice_header;
      merged.grid_keys = slice.grid_keys;
      merged.calibration_known = slice.calibration_known;
    } else if (slice_header != header) {
      throw ConfigError(
          fmt::format("{}: its header differs from {}'s; the slices are not of one sweep\n  {}: "
                      "{}  {}: {}",
                      path, inputs.front(), path, slice_header, inputs.front(), header));
    } else if (slice.calibration_known != merged.calibration_known) {
      throw ConfigError(
          fmt::format("{}: has {} calibration column, where {} has {} (one was written by an older "
                      "fsdpsim); run the slices with one fsdpsim",
                      path, slice.calibration_known ? "a" : "no", inputs.front(),
                      merged.calibration_known ? "one" : "none"));
    }
    if (!slice.sweep_id.empty() && merged.sweep_id.empty()) {
      merged.sweep_id = slice.sweep_id;
      merged.grid_points = slice.grid_points;
      identified_by = path;
    } else if (!slice.sweep_id.empty() &&
               (slice.sweep_id != merged.sweep_id || slice.grid_points != merged.grid_points)) {
      throw ConfigError(fmt::format(
          "{}: a slice of sweep {} ({} points), and {} of sweep {} ({} points); the scenario, its "
          "--set options, the grid or the contents of the preset and calibration files the points "
          "name differ, so the slices are not of one sweep",
          path, slice.sweep_id, slice.grid_points, identified_by, merged.sweep_id,
          merged.grid_points));
    }
    if (slice.sweep_id.empty() && !slice.rows.empty() && unidentified.empty()) unidentified = path;
    for (SweepRow& row : slice.rows) {
      const auto [it, inserted] = seen_in.emplace(row.index, path);
      if (!inserted && same_file(it->second, path)) {
        throw ConfigError(it->second == path
                              ? fmt::format("{}: given twice; pass each slice once", path)
                              : fmt::format("{}: given twice (also as {}); pass each slice once",
                                            path, it->second));
      }
      if (!inserted) {
        throw ConfigError(fmt::format("{}: point {} is also in {}; each index must appear once",
                                      path, row.index, it->second));
      }
      merged.rows.push_back(std::move(row));
    }
  }
  if (!merged.sweep_id.empty() && !unidentified.empty()) {
    throw ConfigError(fmt::format(
        "{}: has no sweep_id column (written by an older fsdpsim), where {} has one; run the "
        "slices with one fsdpsim",
        unidentified, identified_by));
  }
  // A slice that owns no point (--shard K/N with N above the grid's size, or a run stopped
  // before its first point) holds only a header, and with it no sweep id or grid size to check.
  if (merged.rows.empty()) {
    throw ConfigError(fmt::format(
        "merge: none of the {} files holds a point (each is a header only); nothing to merge",
        inputs.size()));
  }
  std::sort(merged.rows.begin(), merged.rows.end(),
            [](const SweepRow& a, const SweepRow& b) { return a.index < b.index; });
  // With a sweep id the grid's size is known and a missing last slice is found too; without one
  // (older slices) only the gaps below the last index are.
  const std::int64_t points =
      merged.sweep_id.empty() ? merged.rows.back().index + 1 : merged.grid_points;
  if (!allow_gaps) {
    // Counted, not listed: a slice's indices may leave millions of points out.
    std::int64_t missing = 0;
    std::vector<std::int64_t> shown;
    std::int64_t expected = 0;
    const auto skip_to = [&](std::int64_t next) {
      for (std::int64_t i = expected; i < next && shown.size() < kMissingIndicesShown; ++i)
        shown.push_back(i);
      missing += next - expected;
      expected = next + 1;
    };
    for (const SweepRow& row : merged.rows) skip_to(row.index);
    skip_to(points);
    if (missing > 0) {
      throw ConfigError(fmt::format(
          "merge: {} of the sweep's {} points are in none of the files ({}{}); is a slice "
          "missing? (--allow-gaps accepts this)",
          missing, points, fmt::join(shown, ", "),
          missing > static_cast<std::int64_t>(shown.size()) ? ", ..." : ""));
    }
  }
  return merged;
}

CLI::App* add_merge_command(CLI::App& app, MergeOptions& options) {
  CLI::App* merge =
      app.add_subcommand("merge", "Join the CSV slices of a sharded sweep (sweep --shard K/N)");
  merge->add_option("inputs", options.inputs, "CSV files written by fsdpsim sweep --out")
      ->required()
      ->check(non_empty());
  merge->add_option("--out", options.csv_path, "Write the merged CSV to PATH (default '-', stdout)")
      ->type_name("PATH|-")
      ->check(non_empty());
  merge->add_option("--md", options.md_path, "Write the markdown report of the whole sweep")
      ->type_name("PATH|-")
      ->check(non_empty());
  merge->add_option("--top", options.top, "Rows of the markdown ranking (0 = all; default 20)")
      ->type_name("N")
      ->check(row_count());
  merge->add_flag("--allow-gaps", options.allow_gaps, "Accept indices missing from every slice");
  merge->footer(R"(
Every slice must have the same header and the same sweep_id and grid_points (the scenario, its
--set options, the grid the slices ran and the preset and calibration files they named); each point
index may appear in one slice only; every point of the grid must be in one of them, unless
--allow-gaps; the rows are sorted by index, so the result is byte-identical to the unsharded
sweep's --out. When --out is a file, the summary of the whole sweep (Pareto front, "best that fits:
...") is printed on stdout.

Exit codes: 0 ok, 1 internal error, 2 bad usage or bad input (unreadable file, different headers,
slices of different sweeps, an index twice, a missing slice; a grid value malformed at every one
of its points where its neighbours ran, after writing the outputs, as sweep does).)");
  return merge;
}

int merge_command(const MergeOptions& options) {
  const SweepTable table = merge_tables(options.inputs, options.allow_gaps);
  // A slice may hold only invalid points (`sweep --shard` accepts it); the whole grid may not.
  const bool any_valid = std::any_of(table.rows.begin(), table.rows.end(), [](const SweepRow& r) {
    return r.status != PointStatus::kSkipped;
  });
  if (!table.rows.empty() && !any_valid) {
    throw ConfigError(options.inputs.front(), "",
                      fmt::format("expected at least one valid point in the merged sweep, found "
                                  "{} invalid scenario{} (the first: {}); no output was written",
                                  table.rows.size(), table.rows.size() == 1 ? "" : "s",
                                  table.rows.front().reason));
  }
  // Under --allow-gaps the table may be part of its grid: the markdown and the summary say so.
  const auto rows = static_cast<std::int64_t>(table.rows.size());
  const bool partial = !table.sweep_id.empty() && rows < table.grid_points;
  const std::string csv_path = options.csv_path.empty() ? "-" : options.csv_path;
  std::vector<OutputFile> outputs = {{csv_path, table_to_csv(table)}};  // all or none
  if (!options.md_path.empty()) {
    const std::string title =
        partial ? fmt::format("fsdpsim sweep (merged slices, {} of the grid's {} points)", rows,
                              table.grid_points)
                : "fsdpsim sweep (merged slices)";
    outputs.push_back({options.md_path, sweep_markdown(table, title, options.top)});
  }
  write_outputs(outputs, {options.inputs.begin(), options.inputs.end()});
  std::ostream& summary =
      (writes_stdout(csv_path) || writes_stdout(options.md_path)) ? std::cerr : std::cout;
  summary << sweep_summary_text(table);
  if (partial) {
    summary << fmt::format(
        "merge: {} of the grid's {} points; {} are in none of the slices "
        "(--allow-gaps)\n",
        rows, table.grid_points, table.grid_points - rows);
  }
  // As sweep judges an unsharded grid, on the points the slices hold: a value refused as such
  // wherever the grid put it (unusable_grid_values.hpp).
  if (const auto unusable = unusable_grid_values(table); !unusable.empty()) {
    std::cerr << unusable_grid_values_text(unusable);
    return 2;
  }
  return 0;
}

}  // namespace fsdpsim::app
