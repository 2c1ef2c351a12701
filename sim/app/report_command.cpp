#include "sim/app/report_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "sim/app/cli_validators.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/csv_table.hpp"
#include "sim/app/gnuplot_runner.hpp"
#include "sim/app/interrupt_guard.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/report_folder.hpp"
#include "sim/app/report_index.hpp"
#include "sim/app/report_plots.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;

constexpr const char* kReportFooter = R"(
Reads a sweep table (fsdpsim sweep --out, or fsdpsim merge --out) and writes into DIR:
  pareto.svg                  tokens/s/GPU vs peak reserved memory, the Pareto front marked
  axis_<key>.svg              throughput and peak reserved memory against each grid axis
  heatmap_<key>__<key>.svg    best throughput that fits, for each pair of numeric axes
  *.gp, *.tsv                 the gnuplot scripts and data (re-render: gnuplot NAME.gp in DIR)
  index.md                    the plots embedded with relative links, and the best points
  .fsdpsim-report-files       the files above, so that the next report into DIR removes those
                              it does not write again (an axis the new sweep lacks)
Everything is rendered first in a scratch folder inside DIR and published only when all of it
rendered: a failed report leaves DIR as it was. Files in DIR that no report wrote are kept.
gnuplot is looked up on PATH (Debian: apt-get install gnuplot-nox).

Exit codes: 0 ok, 1 internal error, 2 bad input (unreadable or malformed CSV, gnuplot missing or
failing, DIR not writable), 130 (143) stopped by Ctrl-C (SIGTERM) with DIR left as it was.)";

// A plot gnuplot rendered into the scratch folder, as written (an SVG is text, but a plot is
// published as gnuplot made it, not checked as an input would be).
std::string read_plot(const fs::path& svg) {
  std::ifstream in(svg, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw ConfigError(fmt::format("cannot read the plot {}", svg.string()));
  return content;
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, ReportOptions& options) {
  CLI::App* report = app.add_subcommand(
      "report", "Plot a sweep table (SVG via gnuplot) with a markdown index of the best points");
  report->add_option("csv", options.csv_path, "Sweep table CSV (fsdpsim sweep --out)")
      ->required()
      ->check(non_empty());
  report
      ->add_option("--out", options.out_dir, "Folder to write the report into (created if missing)")
      ->type_name("DIR")
      ->required()
      ->check(non_empty());
  report
      ->add_option("--title", options.title, "Title of index.md (default: from the CSV file name)")
      ->type_name("TEXT")
      ->check(title_text());
  report->add_option("--top", options.top, "Rows of the best-points table (0 = all; default 10)")
      ->type_name("N")
      ->check(row_count());
  report->footer(kReportFooter);
  return report;
}

namespace {

// The folders `create_directories(folder)` would make, innermost first: a failed report removes
// them again, those left empty.
class FoldersMadeHere {
 public:
  explicit FoldersMadeHere(const fs::path& folder) {
    std::error_code ec;
    for (fs::path f = folder; !f.empty() && !fs::exists(f, ec); f = f.parent_path()) {
      made_.push_back(f);
      if (f == f.parent_path()) break;
    }
  }
  ~FoldersMadeHere() {
    std::error_code ignored;
    for (const fs::path& f : made_) {
      if (!fs::is_empty(f, ignored) || !fs::remove(f, ignored)) break;
    }
  }
  FoldersMadeHere(const FoldersMadeHere&) = delete;
  FoldersMadeHere& operator=(const FoldersMadeHere&) = delete;

 private:
  std::vector<fs::path> made_;
};

}  // namespace

int report_command(const ReportOptions& options) {
  // The title goes into index.md, which a terminal may print.
  require_option_text("--title", options.title);
  const SweepTable table = table_from_csv(read_text_file(options.csv_path), options.csv_path);
  if (table.rows.empty()) {
    // As merge: a table of no point (a header alone) is not a sweep to report on.
    throw ConfigError(options.csv_path, "",
                      "has a header and no row: a sweep that ran no point has nothing to report");
  }
  const fs::path gnuplot = require_gnuplot();
  const fs::path dir(options.out_dir);
  std::error_code ec;
  // A report that fails leaves DIR as it was: folders it made go again, if still empty (the
  // scratch folder inside is removed first, being declared after this).
  const FoldersMadeHere made_here(dir);
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw ConfigError(
        fmt::format("--out {}: cannot create the folder ({})", options.out_dir, ec.message()));
  }
  const fs::path csv(options.csv_path);
  const ReportPlan plan = plan_report(table, csv.filename().string());
  // Made in a scratch folder and published together, so a failure part-way leaves DIR as it was;
  // Ctrl-C or SIGTERM stops gnuplot and removes the scratch folder too.
  const InterruptGuard guard;
  const ScratchFolder scratch(dir);
  for (const ReportFile& file : plan.files)
    write_output((scratch.path() / file.name).string(), file.content);
  try {
    for (const ReportPlot& plot : plan.plots)
      render_gnuplot(gnuplot, scratch.path(), plot.script, plot.svg, &InterruptGuard::flag());
  } catch (const GnuplotStopped&) {
    // The interrupt flag, raised, is handled below with a signal between two plots.
  }
  if (InterruptGuard::flag().load()) {
    std::cerr << fmt::format("interrupted: nothing was written to {}\n", dir.string());
    return InterruptGuard::exit_code();
  }
  const std::string title =
      options.title.empty() ? fmt::format("Sweep report: {}", csv.stem().string()) : options.title;
  std::string csv_link = fs::proximate(csv, dir, ec).generic_string();
  if (ec || csv_link.empty()) csv_link = csv.generic_string();

  std::vector<OutputFile> outputs;
  std::vector<std::string> names;
  const auto publish = [&](const std::string& name, std::string content) {
    outputs.push_back(OutputFile{(dir / name).string(), std::move(content)});
    names.push_back(name);
  };
  for (const ReportFile& file : plan.files) publish(file.name, file.content);
  for (const ReportPlot& plot : plan.plots) publish(plot.svg, read_plot(scratch.path() / plot.svg));
  publish("index.md", report_index_markdown(table, plan, title, csv_link, options.top));
  const std::vector<std::string> previous = previous_report_files(dir);
  outputs.push_back(OutputFile{(dir / kReportFileList).string(), report_file_list(names)});
  // A report folder holds plain files: a device or FIFO under a report's name (or a link to one)
  // would be written in place, where it cannot be undone or may block.
  for (const OutputFile& output : outputs) {
    const fs::file_status status = fs::status(output.path, ec);
    if (fs::exists(status) && !fs::is_regular_file(status)) {
      throw ConfigError(output.path, "",
                        "is not a plain file (a folder, device or FIFO, or a link to one); a "
                        "report replaces only files, so nothing was written");
    }
  }
  write_outputs(outputs, {csv});
  remove_stale_report_files(dir, previous, names, {csv});
  std::cout << fmt::format("report: {} plots of {} points in {} (index.md)\n", plan.plots.size(),
                           table.rows.size(), dir.string());
  for (const std::string& note : plan.notes) std::cout << fmt::format("note: {}\n", note);
  return 0;
}

}  // namespace fsdpsim::app
