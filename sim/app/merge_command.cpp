#include "sim/app/merge_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>

#include "sim/app/cli_validators.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"

namespace fsdpsim::app {
namespace {

constexpr std::size_t kMissingIndicesShown = 10;

}  // namespace

SweepTable merge_tables(const std::vector<std::string>& inputs, bool allow_gaps) {
  if (inputs.empty()) throw ConfigError("merge: no input files");
  SweepTable merged;
  std::string header;
  std::map<std::int64_t, std::string> seen_in;  // index -> file
  for (const std::string& path : inputs) {
    SweepTable slice = table_from_csv(read_text_file(path), path);
    const std::string slice_header = csv_header(slice.grid_keys);
    if (header.empty()) {
      header = slice_header;
      merged.grid_keys = slice.grid_keys;
    } else if (slice_header != header) {
      throw ConfigError(
          fmt::format("{}: its header differs from {}'s; the slices are not of one sweep\n  {}  {}",
                      path, inputs.front(), slice_header, header));
    }
    for (SweepRow& row : slice.rows) {
      const auto [it, inserted] = seen_in.emplace(row.index, path);
      if (!inserted) {
        throw ConfigError(fmt::format("{}: point {} is also in {}; each index must appear once",
                                      path, row.index, it->second));
      }
      merged.rows.push_back(std::move(row));
    }
  }
  std::sort(merged.rows.begin(), merged.rows.end(),
            [](const SweepRow& a, const SweepRow& b) { return a.index < b.index; });
  if (!allow_gaps && !merged.rows.empty()) {
    // Counted, not listed: a slice's indices may leave millions of points out.
    std::int64_t missing = 0;
    std::vector<std::int64_t> shown;
    std::int64_t expected = 0;
    for (const SweepRow& row : merged.rows) {
      for (std::int64_t i = expected; i < row.index && shown.size() < kMissingIndicesShown; ++i)
        shown.push_back(i);
      missing += row.index - expected;
      expected = row.index + 1;
    }
    if (missing > 0) {
      throw ConfigError(fmt::format(
          "merge: {} points below index {} are in none of the files ({}{}); is a slice missing? "
          "(--allow-gaps accepts this)",
          missing, merged.rows.back().index, fmt::join(shown, ", "),
          missing > static_cast<std::int64_t>(shown.size()) ? ", ..." : ""));
    }
  }
  return merged;
}

CLI::App* add_merge_command(CLI::App& app, MergeOptions& options) {
  CLI::App* merge =
      app.add_subcommand("merge", "Join the CSV slices of a sharded sweep (sweep --shard K/N)");
  merge->add_option("inputs", options.inputs, "CSV files written by fsdpsim sweep --out")
      ->required();
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
Every slice must have the same header; each point index may appear in one slice only; the rows
are sorted by index, so the result is byte-identical to the unsharded sweep's --out. When --out is
a file, the summary of the whole sweep (Pareto front, "best that fits: ...") is printed on stdout.

Exit codes: 0 ok, 1 internal error, 2 bad usage or bad input (unreadable file, different headers,
an index twice, a missing slice).)");
  return merge;
}

int merge_command(const MergeOptions& options) {
  const SweepTable table = merge_tables(options.inputs, options.allow_gaps);
  const std::string csv_path = options.csv_path.empty() ? "-" : options.csv_path;
  std::vector<OutputFile> outputs = {{csv_path, table_to_csv(table)}};  // all or none
  if (!options.md_path.empty()) {
    outputs.push_back(
        {options.md_path, sweep_markdown(table, "fsdpsim sweep (merged slices)", options.top)});
  }
  write_outputs(outputs, {options.inputs.begin(), options.inputs.end()});
  std::ostream& summary = (csv_path == "-" || options.md_path == "-") ? std::cerr : std::cout;
  summary << sweep_summary_text(table);
  return 0;
}

}  // namespace fsdpsim::app
