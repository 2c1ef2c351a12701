// The table of a sweep: one row per grid point (index, the grid values, status, reason, the
// headline result numbers), as CSV (RFC 4180 quoting, one line per row, '\n' line ends) in and
// out, and the answers drawn from it: the ranking by throughput, the Pareto front of throughput
// vs peak reserved memory, and the best point that fits. `fsdpsim sweep` builds the table by
// simulating; `fsdpsim merge` rebuilds it from sharded CSV files, so both print the same answers.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdpsim::app {

// The result keys a sweep table keeps, in column order. exposed_communication_s lives under
// "breakdown" in the result JSON.
inline constexpr std::array<const char*, 10> kSweepMetricKeys = {"step_time_s",
                                                                 "tokens_per_s_per_gpu",
                                                                 "model_tflops_per_gpu",
                                                                 "hardware_tflops_per_gpu",
                                                                 "mfu",
                                                                 "hfu",
                                                                 "peak_mem_allocated_gib",
                                                                 "peak_mem_reserved_gib",
                                                                 "exposed_communication_s",
                                                                 "num_alloc_retries"};
inline constexpr std::size_t kMetricTokensPerSPerGpu = 1;
inline constexpr std::size_t kMetricStepTime = 0;
inline constexpr std::size_t kMetricMfu = 4;
inline constexpr std::size_t kMetricPeakReserved = 7;
inline constexpr std::size_t kMetricAllocRetries = 9;

enum class PointStatus { kOk, kOom, kSkipped };
const char* point_status_name(PointStatus status);

struct SweepRow {
  std::int64_t index = 0;
  std::vector<std::string> labels;  // one per grid key
  PointStatus status = PointStatus::kSkipped;
  std::string reason;  // why it was skipped or does not fit; empty when ok
  std::array<double, kSweepMetricKeys.size()> metrics{};  // NaN for skipped points
  // The calibration profile that priced the point, as `run`'s costs line names it (a preset's
  // name, or the file it resolved to); empty where the hardware presets' models priced it, and
  // on a skipped point, which nothing priced.
  std::string calibration;
};

struct SweepTable {
  std::vector<std::string> grid_keys;
  std::vector<SweepRow> rows;  // in index order
  // Which sweep the rows are of: every slice of one sweep has the same id (sweep_fingerprint) and
  // grid size, so that merge refuses a slice of another sweep and notices a missing last slice.
  // Written as the last two columns, sweep_id and grid_points; empty and 0 when read from a table
  // written before fsdpsim had them.
  std::string sweep_id;
  std::int64_t grid_points = 0;
  // Whether the rows' `calibration` is known: the column is written before sweep_id, and a table
  // read from a CSV written before fsdpsim had it does not know what priced its points.
  bool calibration_known = false;
};

// `text` as a CSV row holds it: line breaks become spaces, so that a row is always one line.
std::string csv_text(const std::string& text);

// One CSV field: csv_text, quoted when it holds a comma or a quote.
std::string csv_field(const std::string& text);

// The header and a row without the calibration, sweep_id and grid_points columns, which
// table_to_csv appends.
std::string csv_header(const std::vector<std::string>& grid_keys);
std::string csv_row(const SweepRow& row);
std::string table_to_csv(const SweepTable& table);

// Reads a table written by table_to_csv. Throws ConfigError naming `file` and the line on a
// header that is not a sweep table's or a malformed row (one whose sweep id or grid size differs
// from the first row's, or whose index is past the grid).
SweepTable table_from_csv(const std::string& text, const std::string& file);

// The order every ranking of a sweep uses (markdown, report, "best that fits"): higher throughput
// first, then less peak reserved memory; rows equal on both keep their index order.
bool ranks_above(const SweepRow& a, const SweepRow& b);

// Positions in table.rows of the points that fit and that no other fitting point beats on both
// throughput (higher) and peak reserved memory (lower); sorted by throughput, highest first.
std::vector<std::size_t> pareto_front(const SweepTable& table);

// Position of the fitting point with the highest throughput (ties: less memory, lower index).
std::optional<std::size_t> best_that_fits(const SweepTable& table);

// "<key>=<value> <key>=<value>" of a row.
std::string row_label(const SweepTable& table, const SweepRow& row);

// Counts and the Pareto front in a few lines, then
// "best that fits: <grid values> -> X tokens/s/GPU, Y GiB reserved" as the last line.
std::string sweep_summary_text(const SweepTable& table);

// What priced the simulated points, as a markdown paragraph: one calibration profile, the
// presets' models, or each profile with its count of points where they differ (a grid over
// profiles); empty when the table does not know (calibration_known) or simulated no point.
std::string costs_paragraph(const SweepTable& table);

// A markdown report: `title`, the costs_paragraph, the simulated points sorted by throughput
// (those that fit first), at most `top` rows (0 = all), the Pareto front marked, then the skip
// reasons.
std::string sweep_markdown(const SweepTable& table, const std::string& title, std::size_t top);

}  // namespace fsdpsim::app
