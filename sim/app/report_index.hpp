// DIR/index.md of `fsdpsim report`: the counts, a table of the best points that fit, and the
// plots embedded with relative links, each with a line on how to read it.
#pragma once

#include <cstddef>
#include <string>

#include "sim/app/csv_table.hpp"
#include "sim/app/report_plots.hpp"

namespace fsdpsim::app {

// `csv_link` is the sweep CSV relative to the report folder; `best_rows` rows in the table of
// the best points (0 = all that fit).
std::string report_index_markdown(const SweepTable& table, const ReportPlan& plan,
                                  const std::string& title, const std::string& csv_link,
                                  std::size_t best_rows);

}  // namespace fsdpsim::app
