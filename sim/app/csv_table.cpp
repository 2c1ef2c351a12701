#include "sim/app/csv_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "sim/app/config_error.hpp"
#include "sim/app/csv_records.hpp"
#include "sim/app/markdown_cell.hpp"
#include "sim/app/retries_text.hpp"
#include "sim/app/sweep_grid.hpp"

namespace fsdpsim::app {
namespace {

constexpr std::size_t kFixedLeadingColumns = 1;  // index
constexpr std::size_t kFixedStatusColumns = 2;   // status, reason
constexpr std::array<const char*, 2> kSweepIdColumns = {"sweep_id", "grid_points"};
constexpr const char* kCalibrationColumn = "calibration";
// Tokens per step per GPU of a simulated point, at least: one token, less the rounding of the two
// six-digit numbers whose product it is.
constexpr double kLeastTokensPerStep = 0.99999;

// Shortest text that reads back as the same double; empty for NaN (a skipped point).
std::string format_metric(double x) { return std::isnan(x) ? "" : fmt::format("{}", x); }

std::optional<double> parse_metric(const std::string& text) {
  if (text.empty()) return std::numeric_limits<double>::quiet_NaN();
  double x = 0.0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), x);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size()) return std::nullopt;
  return x;
}

std::optional<PointStatus> parse_status(const std::string& text) {
  if (text == "ok") return PointStatus::kOk;
  if (text == "oom") return PointStatus::kOom;
  if (text == "skipped") return PointStatus::kSkipped;
  return std::nullopt;
}

// The last two fields of a row: the sweep's id (16 hex digits, as sweep_fingerprint writes it)
// and grid size, the same on every row; the first row sets them in `table`.
void read_sweep_id(const std::vector<std::string>& fields, std::int64_t index,
                   const std::string& where, SweepTable& table) {
  const std::string& id = fields[fields.size() - 2];
  const std::string& points_text = fields.back();
  const bool hex =
      id.size() == kSweepIdLength && id.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex) {
    throw ConfigError(fmt::format("{}: sweep_id \"{}\": expected {} hexadecimal digits", where, id,
                                  kSweepIdLength));
  }
  std::int64_t points = 0;
  const auto r =
      std::from_chars(points_text.data(), points_text.data() + points_text.size(), points);
  if (r.ec != std::errc{} || r.ptr != points_text.data() + points_text.size() || points < 1 ||
      points > kMaxGridPoints) {
    throw ConfigError(fmt::format("{}: grid_points \"{}\": expected a whole number from 1 to {}",
                                  where, points_text, kMaxGridPoints));
  }
  if (table.sweep_id.empty()) {
    table.sweep_id = id;
    table.grid_points = points;
  } else if (id != table.sweep_id || points != table.grid_points) {
    throw ConfigError(fmt::format(
        "{}: sweep {} of {} points, where the rows above are of sweep {} of {} points; a table "
        "holds one sweep",
        where, id, points, table.sweep_id, table.grid_points));
  }
  if (index >= points) {
    throw ConfigError(
        fmt::format("{}: index {} is past the sweep's last point ({})", where, index, points - 1));
  }
}

double throughput(const SweepRow& r) { return r.metrics[kMetricTokensPerSPerGpu]; }
double reserved(const SweepRow& r) { return r.metrics[kMetricPeakReserved]; }

}  // namespace

const char* point_status_name(PointStatus status) {
  switch (status) {
    case PointStatus::kOk:
      return "ok";
    case PointStatus::kOom:
      return "oom";
    case PointStatus::kSkipped:
      return "skipped";
  }
  return "?";
}

std::string csv_text(const std::string& text) {
  std::string out = text;
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return out;
}

std::string csv_field(const std::string& text) {
  std::string field;
  bool quote = false;
  for (const char c : csv_text(text)) {
    if (c == ',' || c == '"') quote = true;
    if (c == '"') field += '"';
    field += c;
  }
  return quote ? fmt::format("\"{}\"", field) : field;
}

std::string csv_header(const std::vector<std::string>& grid_keys) {
  std::string line = "index";
  for (const std::string& k : grid_keys) line += fmt::format(",{}", csv_field(k));
  line += ",status,reason";
  for (const char* k : kSweepMetricKeys) line += fmt::format(",{}", k);
  return line + "\n";
}

std::string csv_row(const SweepRow& row) {
  std::string line = fmt::format("{}", row.index);
  for (const std::string& v : row.labels) line += fmt::format(",{}", csv_field(v));
  line += fmt::format(",{},{}", point_status_name(row.status), csv_field(row.reason));
  for (const double m : row.metrics) line += fmt::format(",{}", format_metric(m));
  return line + "\n";
}

std::string table_to_csv(const SweepTable& table) {
  // Without an id or a calibration column (a table read from an older CSV) those columns stay
  // out, as they were.
  const bool identified = !table.sweep_id.empty();
  const std::string points = fmt::format("{}", table.grid_points);
  const auto line = [&](std::string text, const std::string& calibration, const std::string& id,
                        const std::string& grid_points) {
    text.pop_back();  // '\n'
    if (table.calibration_known) text.append(",").append(csv_field(calibration));
    if (identified) text += fmt::format(",{},{}", id, grid_points);
    return text + "\n";
  };
  std::string out =
      line(csv_header(table.grid_keys), kCalibrationColumn, kSweepIdColumns[0], kSweepIdColumns[1]);
  for (const SweepRow& row : table.rows)
    out += line(csv_row(row), row.calibration, table.sweep_id, points);
  return out;
}

SweepTable table_from_csv(const std::string& text, const std::string& file) {
  SweepTable table;
  std::int64_t line_number = 0;
  std::size_t columns = 0;
  bool header_read = false;
  bool identified = false;  // the sweep_id and grid_points columns are there
  std::map<std::int64_t, std::int64_t> first_line_of;  // index -> line
  for (const CsvRecord& record : parse_csv_records(text, file)) {
    if (record.blank) continue;
    line_number = record.line;
    const auto where = [&] { return fmt::format("{}: line {}", file, line_number); };
    const std::vector<std::string>& fields = record.fields;
    if (!header_read) {
      header_read = true;
      std::size_t n = fields.size();
      identified = n >= kSweepIdColumns.size() && fields[n - 2] == kSweepIdColumns[0] &&
                   fields[n - 1] == kSweepIdColumns[1];
      if (identified) n -= kSweepIdColumns.size();
      // The calibration column follows the last metric's, which no grid key can be named.
      table.calibration_known =
          n >= 2 && fields[n - 1] == kCalibrationColumn && fields[n - 2] == kSweepMetricKeys.back();
      if (table.calibration_known) --n;
      const std::size_t fixed =
          kFixedLeadingColumns + kFixedStatusColumns + kSweepMetricKeys.size();
      bool ok = n >= fixed && fields[0] == "index";
      const std::size_t grid = ok ? n - fixed : 0;
      ok = ok && fields[1 + grid] == "status" && fields[2 + grid] == "reason";
      for (std::size_t m = 0; ok && m < kSweepMetricKeys.size(); ++m) {
        ok = fields[3 + grid + m] == kSweepMetricKeys[m];
      }
      if (!ok) {
        throw ConfigError(
            fmt::format("{}: not the header of an fsdpsim sweep table (expected index, "
                        "the grid keys, status, reason, {}, then calibration, sweep_id and "
                        "grid_points)",
                        where(), fmt::join(kSweepMetricKeys, ", ")));
      }
      table.grid_keys.assign(fields.begin() + 1,
                             fields.begin() + 1 + static_cast<std::ptrdiff_t>(grid));
      // Grid keys name plots and files: each non-empty, none twice, none a fixed column's name.
      std::set<std::string> seen(fields.begin() + 1 + static_cast<std::ptrdiff_t>(grid),
                                 fields.end());
      seen.insert("index");
      for (std::size_t k = 0; k < grid; ++k) {
        const std::string& key = table.grid_keys[k];
        if (key.empty() || !seen.insert(key).second) {
          throw ConfigError(fmt::format(
              "{}, column {}: expected a grid key of its own (as --grid names it), found {}",
              where(), k + 2,
              key.empty() ? std::string("an empty name") : "\"" + key + "\" again"));
        }
      }
      columns = fields.size();
      continue;
    }
    if (fields.size() != columns) {
      throw ConfigError(
          fmt::format("{}: {} fields, the header has {}", where(), fields.size(), columns));
    }
    SweepRow row;
    const std::string& index = fields[0];
    const auto r = std::from_chars(index.data(), index.data() + index.size(), row.index);
    // As fsdpsim writes it: decimal digits, no leading zero ("03" is someone's edit).
    if (index == "index") {
      throw ConfigError(fmt::format(
          "{}: a second header line: slices joined into one file (cat)? give them to fsdpsim "
          "merge as they are",
          where()));
    }
    const bool digits_only =
        std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits_only || r.ec != std::errc{} || r.ptr != index.data() + index.size() ||
        (index.size() > 1 && index[0] == '0')) {
      throw ConfigError(fmt::format(
          "{}: index \"{}\" is not an index as fsdpsim writes it (decimal digits, no leading zero)",
          where(), index));
    }
    if (row.index >= kMaxGridPoints) {
      throw ConfigError(fmt::format("{}: index {} is past the last point of any sweep ({})",
                                    where(), row.index, kMaxGridPoints - 1));
    }
    const std::size_t grid = table.grid_keys.size();
    row.labels.assign(fields.begin() + 1, fields.begin() + 1 + static_cast<std::ptrdiff_t>(grid));
    const auto status = parse_status(fields[1 + grid]);
    if (!status) {
      throw ConfigError(
          fmt::format("{}: status \"{}\" is not ok, oom or skipped", where(), fields[1 + grid]));
    }
    row.status = *status;
    row.reason = fields[2 + grid];
    for (std::size_t m = 0; m < kSweepMetricKeys.size(); ++m) {
      const std::string& cell = fields[3 + grid + m];
      const auto value = parse_metric(cell);
      if (!value) {
        throw ConfigError(
            fmt::format("{}: {} \"{}\" is not a number", where(), kSweepMetricKeys[m], cell));
      }
      // fsdpsim writes every metric of a simulated point as a finite, non-negative number and
      // leaves a skipped point's cells empty; anything else was not written by a sweep. No
      // metric of a simulated step comes near 1e15 (a step of 30 million years, 1e15 tokens/s
      // per GPU); 1e308 tokens/s was ranked the best point.
      constexpr double kLargestMetric = 1e15;
      if (!cell.empty() && !(*value >= 0.0 && *value <= kLargestMetric)) {
        throw ConfigError(fmt::format("{}: {} \"{}\": expected a number from 0 to {:g}", where(),
                                      kSweepMetricKeys[m], cell, kLargestMetric));
      }
      if (cell.empty() && row.status != PointStatus::kSkipped) {
        throw ConfigError(
            fmt::format("{}: {} is empty, expected a number for a point with status {}", where(),
                        kSweepMetricKeys[m], point_status_name(row.status)));
      }
      // A count: a whole number, exact in a double (the markdown prints it as an integer).
      constexpr double kMaxExactCount = 9007199254740992.0;  // 2^53
      if (m == kMetricAllocRetries && !cell.empty() &&
          (*value != std::floor(*value) || *value > kMaxExactCount)) {
        throw ConfigError(fmt::format("{}: {} \"{}\": expected a whole number of at most 2^53",
                                      where(), kSweepMetricKeys[m], cell));
      }
      if (!cell.empty() && row.status == PointStatus::kSkipped) {
        throw ConfigError(fmt::format("{}: {} \"{}\" on a skipped point, which has no metrics",
                                      where(), kSweepMetricKeys[m], cell));
      }
      row.metrics[m] = *value;
    }
    if (row.status != PointStatus::kSkipped) {
      // A simulated step lasts at least one picosecond (fsdpsim's unit of time) and moves at
      // least one token per GPU; the table keeps six significant digits of each.
      const double tokens_per_step =
          row.metrics[kMetricTokensPerSPerGpu] * row.metrics[kMetricStepTime];
      if (!(tokens_per_step >= kLeastTokensPerStep)) {
        throw ConfigError(fmt::format(
            "{}: {} {:g} x {} {:g} makes {:g} tokens per step per GPU; a simulated point (status "
            "{}) has at least one",
            where(), kSweepMetricKeys[kMetricTokensPerSPerGpu],
            row.metrics[kMetricTokensPerSPerGpu], kSweepMetricKeys[kMetricStepTime],
            row.metrics[kMetricStepTime], tokens_per_step, point_status_name(row.status)));
      }
    }
    if (table.calibration_known) {
      const std::size_t column = 3 + grid + kSweepMetricKeys.size();
      row.calibration = fields[column];
      if (!row.calibration.empty() && row.status == PointStatus::kSkipped) {
        throw ConfigError(
            fmt::format("{}: calibration \"{}\" on a skipped point, which nothing "
                        "priced",
                        where(), row.calibration));
      }
    }
    if (identified) read_sweep_id(fields, row.index, where(), table);
    if (const auto [it, inserted] = first_line_of.emplace(row.index, line_number); !inserted) {
      throw ConfigError(fmt::format("{}: point {} is also on line {}; each index must appear once",
                                    where(), row.index, it->second));
    }
    table.rows.push_back(std::move(row));
  }
  if (!header_read) throw ConfigError(fmt::format("{}: empty file, expected a sweep table", file));
  return table;
}

std::vector<std::size_t> pareto_front(const SweepTable& table) {
  // A point that fits is on the front unless another has at least its throughput and at most its
  // reserved memory, one of them strictly. Sorted by throughput (descending), then reserved
  // memory: within a run of equal throughput only the least memory can be on the front, and
  // only if it is below the least memory of every faster point. O(n log n).
  std::vector<std::size_t> fitting;
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    if (table.rows[i].status == PointStatus::kOk) fitting.push_back(i);
  }
  std::stable_sort(fitting.begin(), fitting.end(), [&](std::size_t p, std::size_t q) {
    return ranks_above(table.rows[p], table.rows[q]);
  });
  std::vector<std::size_t> front;
  double least_faster = std::numeric_limits<double>::infinity();
  for (std::size_t run = 0; run < fitting.size();) {
    std::size_t end = run;
    while (end < fitting.size() &&
           throughput(table.rows[fitting[end]]) == throughput(table.rows[fitting[run]])) {
      ++end;
    }
    const double least = reserved(table.rows[fitting[run]]);
    for (std::size_t i = run; i < end && reserved(table.rows[fitting[i]]) == least; ++i) {
      if (least < least_faster) front.push_back(fitting[i]);
    }
    least_faster = std::min(least_faster, least);
    run = end;
  }
  // By throughput, ties in index order.
  std::sort(front.begin(), front.end());
  std::stable_sort(front.begin(), front.end(), [&](std::size_t p, std::size_t q) {
    return throughput(table.rows[p]) > throughput(table.rows[q]);
  });
  return front;
}

bool ranks_above(const SweepRow& a, const SweepRow& b) {
  if (throughput(a) != throughput(b)) return throughput(a) > throughput(b);
  return reserved(a) < reserved(b);
}

std::optional<std::size_t> best_that_fits(const SweepTable& table) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    if (table.rows[i].status != PointStatus::kOk) continue;
    if (!best || ranks_above(table.rows[i], table.rows[*best])) best = i;
  }
  return best;
}

std::string row_label(const SweepTable& table, const SweepRow& row) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < table.grid_keys.size(); ++i) {
    parts.push_back(fmt::format("{}={}", table.grid_keys[i], row.labels[i]));
  }
  return parts.empty() ? "(base scenario)" : fmt::format("{}", fmt::join(parts, " "));
}

std::string sweep_summary_text(const SweepTable& table) {
  std::size_t ok = 0;
  std::size_t oom = 0;
  std::size_t skipped = 0;
  for (const SweepRow& r : table.rows) {
    (r.status == PointStatus::kOk ? ok : r.status == PointStatus::kOom ? oom : skipped) += 1;
  }
  std::string out =
      fmt::format("{} point{}: {} fit, {} out of memory, {} skipped (invalid scenario)\n",
                  table.rows.size(), table.rows.size() == 1 ? "" : "s", ok, oom, skipped);
  const std::vector<std::size_t> front = pareto_front(table);
  if (!front.empty()) {
    out += "Pareto front (tokens/s/GPU vs peak reserved GiB, points that fit):\n";
    // Points of one result (an axis that changed nothing there) share a line: the first by
    // index, then the others'.
    for (std::size_t i = 0; i < front.size();) {
      const SweepRow& r = table.rows[front[i]];
      std::vector<std::int64_t> same;
      std::size_t next = i + 1;
      for (; next < front.size(); ++next) {
        const SweepRow& other = table.rows[front[next]];
        if (throughput(other) != throughput(r) || reserved(other) != reserved(r)) break;
        same.push_back(other.index);
      }
      out += fmt::format(
          "  #{:<5} {:>10.1f} tokens/s/GPU {:>8.2f} GiB  {}{}\n", r.index, throughput(r),
          reserved(r), row_label(table, r),
          same.empty() ? "" : fmt::format(" (the same result: #{})", fmt::join(same, ", #")));
      i = next;
    }
  }
  const auto retries_of = [](const SweepRow& r) {
    return static_cast<std::int64_t>(r.metrics[kMetricAllocRetries]);
  };
  const auto best_line = [&](const char* label, const SweepRow& r) {
    const std::int64_t retries = retries_of(r);
    return fmt::format(
        "{}: {} -> {:.1f} tokens/s/GPU, {:.2f} GiB reserved{}\n", label, row_label(table, r),
        throughput(r), reserved(r),
        retries == 0 ? std::string() : ", " + cuda_malloc_retries(retries) + " per step");
  };
  const auto best = best_that_fits(table);
  if (!best) {
    return out + (table.rows.empty() ? "best that fits: none: no point was run\n"
                                     : "best that fits: none of the points fits\n");
  }
  out += best_line("best that fits", table.rows[*best]);
  if (retries_of(table.rows[*best]) == 0) return out;
  // A step that fits only by flushing the allocator's cache is the least certain prediction, and
  // the first to stop fitting on a real cluster: the best one that needs no flush, too.
  std::optional<std::size_t> steady;
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    const SweepRow& r = table.rows[i];
    if (r.status != PointStatus::kOk || retries_of(r) != 0) continue;
    if (!steady || ranks_above(r, table.rows[*steady])) steady = i;
  }
  if (!steady)
    return out + "best without cudaMalloc retries: none (every point that fits retries)\n";
  return out + best_line("best without cudaMalloc retries", table.rows[*steady]);
}

std::string costs_paragraph(const SweepTable& table) {
  if (!table.calibration_known) return "";
  std::map<std::string, std::int64_t> points_by_profile;  // "" = the presets' models
  for (const SweepRow& row : table.rows) {
    if (row.status != PointStatus::kSkipped) ++points_by_profile[row.calibration];
  }
  if (points_by_profile.empty()) return "";
  const auto source = [](const std::string& profile) {
    return profile.empty() ? std::string("the hardware presets' models (no calibration profile)")
                           : fmt::format(
                                 "the calibration profile {} where it measured them, the "
                                 "rest from the hardware presets' models",
                                 markdown_code(profile));
  };
  if (points_by_profile.size() == 1)
    return fmt::format("Costs from {}.\n\n", source(points_by_profile.begin()->first));
  std::string out = "Costs by the points' calibration profiles:\n\n";
  for (const auto& [profile, points] : points_by_profile)
    out += fmt::format("- {} point{}: {}\n", points, points == 1 ? "" : "s", source(profile));
  return out + "\n";
}

std::string sweep_markdown(const SweepTable& table, const std::string& title, std::size_t top) {
  std::vector<std::size_t> simulated;
  std::map<std::string, std::size_t> skip_reasons;
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    if (table.rows[i].status == PointStatus::kSkipped) {
      ++skip_reasons[table.rows[i].reason];
    } else {
      simulated.push_back(i);
    }
  }
  std::stable_sort(simulated.begin(), simulated.end(), [&](std::size_t p, std::size_t q) {
    const SweepRow& a = table.rows[p];
    const SweepRow& b = table.rows[q];
    if ((a.status == PointStatus::kOk) != (b.status == PointStatus::kOk))
      return a.status == PointStatus::kOk;
    return ranks_above(a, b);
  });
  const std::vector<std::size_t> front = pareto_front(table);
  std::string out = fmt::format("# {}\n\n{}", markdown_text(title), costs_paragraph(table));
  out +=
      "Simulated points by throughput (points that fit first); * = on the Pareto front of "
      "throughput vs peak reserved memory.\n\n| rank | index |";
  for (const std::string& k : table.grid_keys) out += fmt::format(" {} |", markdown_text(k));
  out +=
      " status | tokens/s/GPU | step time (s) | MFU | peak reserved (GiB) | cudaMalloc retries "
      "| Pareto |\n|---:|---:|";
  for (std::size_t k = 0; k < table.grid_keys.size(); ++k) out += "---|";
  out += "---|---:|---:|---:|---:|---:|:---:|\n";
  const std::size_t shown = top == 0 ? simulated.size() : std::min(top, simulated.size());
  for (std::size_t rank = 0; rank < shown; ++rank) {
    const std::size_t p = simulated[rank];
    const SweepRow& r = table.rows[p];
    out += fmt::format("| {} | {} |", rank + 1, r.index);
    for (const std::string& v : r.labels) out += fmt::format(" {} |", markdown_text(v));
    const bool on_front = std::find(front.begin(), front.end(), p) != front.end();
    out += fmt::format(
        " {} | {:.1f} | {:.4g} | {:.1f}% | {:.2f} | {} | {} |\n", point_status_name(r.status),
        throughput(r), r.metrics[kMetricStepTime], 100.0 * r.metrics[kMetricMfu], reserved(r),
        static_cast<std::int64_t>(r.metrics[kMetricAllocRetries]), on_front ? "*" : "");
  }
  if (shown < simulated.size())
    out += fmt::format("\n({} more simulated points not shown.)\n", simulated.size() - shown);
  if (!skip_reasons.empty()) {
    out += "\n## Skipped points (invalid scenarios)\n\n| points | reason |\n|---:|---|\n";
    for (const auto& [reason, count] : skip_reasons)
      out += fmt::format("| {} | {} |\n", count, markdown_text(reason));
  }
  out += fmt::format("\n```\n{}```\n", sweep_summary_text(table));
  return out;
}

}  // namespace fsdpsim::app
