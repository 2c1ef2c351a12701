// `fsdpsim report SWEEP.csv --out DIR`: plots of a sweep (SVG, rendered by gnuplot found on
// PATH), their gnuplot scripts and data, and DIR/index.md embedding them with a table of the
// best points. The report is made in a scratch folder and published at once; see report_folder.hpp.
#pragma once

#include <cstddef>
#include <string>

namespace CLI {
class App;
}

namespace fsdpsim::app {

struct ReportOptions {
  std::string csv_path;  // the sweep table (fsdpsim sweep --out / fsdpsim merge --out)
  std::string out_dir;   // --out DIR
  std::string title;     // --title TEXT (default: from the CSV's name)
  std::size_t top = 10;  // --top N rows of the best-points table (0 = all)
};

// Registers the subcommand and its options on `app`; the options live in `options`.
CLI::App* add_report_command(CLI::App& app, ReportOptions& options);

// Runs it. Returns the process exit code; throws ConfigError on bad input or a missing gnuplot.
int report_command(const ReportOptions& options);

}  // namespace fsdpsim::app
