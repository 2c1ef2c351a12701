// nccl-tests log reader (format: nccl_tests_log.hpp). A line-oriented state machine: header
// lines ("# ...") set what the next table means, a column header opens a table, data rows fill
// it, "# Avg bus bandwidth" closes it.
#include "calibrate/nccl_tests_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "hardware/gpu_spec.hpp"

namespace fsdpsim::calibrate {
namespace {

constexpr std::int64_t kMaxRanks = hardware::kMaxWorldSize;

// busbw / algbw must match the nccl-tests factor within this fraction, beyond the rounding of
// both to two decimals (half of 0.01 GB/s, and some).
constexpr double kBusbwRatioTolerance = 0.03;
constexpr double kPrintedHalfUnit = 0.006;

// Half a unit of the last digit `number` is printed with, relative to its value: 0.05 / 1.3 for
// "1.3e+07", 0.005 / 20 for "20.00", 0.5 / 1567536 for "1567536"; 0 for what is not a number.
double relative_half_unit(std::string_view number) {
  const std::size_t e = number.find_first_of("eE");
  const std::string_view mantissa = number.substr(0, e);
  double value = 0.0;
  const auto r = std::from_chars(mantissa.data(), mantissa.data() + mantissa.size(), value);
  if (r.ec != std::errc{} || value == 0.0) return 0.0;
  const std::size_t dot = mantissa.find('.');
  const std::size_t decimals = dot == std::string_view::npos ? 0 : mantissa.size() - dot - 1;
  return 0.5 * std::pow(10.0, -static_cast<double>(decimals)) / std::fabs(value);
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool is_integer(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A line without srun --label's or mpirun --tag-output's prefix ("0: ", "[1,0]<stdout>:").
std::string_view without_label(std::string_view line) {
  std::size_t k = 0;
  while (k < line.size() && line[k] == ' ') ++k;
  std::size_t digits = k;
  while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') ++digits;
  if (digits > k && digits + 1 < line.size() && line[digits] == ':' && line[digits + 1] == ' ') {
    line.remove_prefix(digits + 2);
  } else if (line.starts_with("[") && line.find(">:") != std::string_view::npos) {
    line.remove_prefix(line.find(">:") + 2);
  }
  return line;
}

std::optional<double> to_double(std::string_view s) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A line as it may be quoted in a message: printable, at most 60 characters.
std::string quoted(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 60)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return "'" + out + (s.size() > 60 ? "...'" : "'");
}

// nccl-tests type names (src/common.cu test_typenames) -> our dtypes; others are not imported.
std::optional<Dtype> dtype_of(std::string_view type) {
  if (type == "float") return Dtype::kFp32;
  if (type == "half") return Dtype::kFp16;
  if (type == "bfloat16") return Dtype::kBf16;
  if (type == "f8e4m3" || type == "f8e5m2") return Dtype::kFp8;
  return std::nullopt;
}

// The largest deviation nccl-tests before 2.10 accepted for a type (src/common.cu DeltaMaxValue:
// half 1e-2, 5e-2 in some versions; bfloat16 1e-2; float 1e-5; double 1e-12; integers none), the
// loosest of its versions: a larger one is an out-of-bounds value, its row a failed test.
double largest_accepted_deviation(std::string_view type) {
  if (type == "half") return 5e-2;
  if (type == "bfloat16") return 1e-2;
  if (type == "float") return 1e-5;
  if (type == "double") return 1e-12;
  return 0.0;
}

// Every nccl-tests type name (src/common.cu test_typenames), imported or not.
bool is_type_name(std::string_view type) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "int8",  "uint8",  "int32",    "uint32", "int64",  "uint64", "half",
      "float", "double", "bfloat16", "f8e4m3", "f8e5m2", "char"};
  return std::find(kNames.begin(), kNames.end(), type) != kNames.end();
}

// NCCL_VERSION_CODE: major*10000 + minor*100 + patch from 2.9 on, major*1000 + minor*100 + patch
// before.
std::string nccl_version(std::int64_t code) {
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

std::optional<hardware::Collective> collective_from_text(std::string_view s) {
  const auto has = [&s](std::string_view w) { return s.find(w) != std::string_view::npos; };
  if (has("all_gather") || has("allgather")) return hardware::Collective::kAllGather;
  if (has("reduce_scatter") || has("reducescatter")) return hardware::Collective::kReduceScatter;
  if (has("all_reduce") || has("allreduce")) return hardware::Collective::kAllReduce;
  return std::nullopt;
}

struct Columns {
  std::size_t count = 0;   // words a complete row has (a trailing timestamp excluded)
  bool timestamp = false;  // -T: rows end with "YYYY-MM-DD HH:MM:SS" (src/util.cu formatNow)
  int size = -1;
  int elements = -1;  // the "count" column
  int type = -1;
  int redop = -1;
  std::array<int, 2> time{-1, -1};
  std::array<int, 2> algbw{-1, -1};
  std::array<int, 2> busbw{-1, -1};
  std::array<int, 2> wrong{-1, -1};
  // Before nccl-tests 2.10 the column was "error": the largest deviation from the expected
  // values (%5.0le), not a count of wrong elements.
  bool wrong_is_deviation = false;
};

std::optional<Columns> parse_column_header(const std::vector<std::string_view>& words) {
  Columns c;
  int times = 0;
  int algbws = 0;
  int busbws = 0;
  int wrongs = 0;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string_view w = words[i];
    const int at = static_cast<int>(i);
    if (w == "timestamp") {
      c.timestamp = true;
      break;
    }
    c.count = i + 1;
    if (w == "size" || w == "bytes") c.size = at;
    if (w == "count") c.elements = at;
    if (w == "type") c.type = at;
    if (w == "redop" || w == "op") c.redop = at;
    if ((w == "time" || w == "cputime") && times < 2)
      c.time[static_cast<std::size_t>(times++)] = at;
    if (w == "algbw" && algbws < 2) c.algbw[static_cast<std::size_t>(algbws++)] = at;
    if (w == "busbw" && busbws < 2) c.busbw[static_cast<std::size_t>(busbws++)] = at;
    if ((w == "#wrong" || w == "error" || w == "res") && wrongs < 2) {
      c.wrong[static_cast<std::size_t>(wrongs++)] = at;
      c.wrong_is_deviation = w == "error";
    }
  }
  if (c.size < 0 || c.type < 0 || c.time[0] < 0 || c.algbw[0] < 0 || c.busbw[0] < 0)
    return std::nullopt;
  return c;
}

// "an all_gather", "a reduce_scatter": the collective's name for a message.
std::string with_article(hardware::Collective op) {
  const std::string_view name = collective_name(op);
  return fmt::format("{} {}", name.front() == 'a' ? "an" : "a", name);
}

struct Row {
  std::size_t line = 0;
  std::int64_t bytes = 0;
  Dtype dtype = Dtype::kFp32;
  double time_us = 0.0;
  double algbw_gbps = 0.0;
  double busbw_gbps = 0.0;
  // The redop column: a reduction (sum) or none (all_gather, broadcast); unset where the log has
  // no such column or prints '-'.
  std::optional<bool> reduces;
  std::optional<std::int64_t> elements;  // the count column, where the log has one
};

struct Table {
  std::size_t header_line = 0;
  std::size_t last_line = 0;
  Columns columns;
  std::vector<Row> rows;
  std::int64_t empty_rows = 0;  // rows of size 0 (Parser::empty_rows_)
  bool footer = false;
};

struct RankInfo {
  std::string host;
  std::string device;
  std::int64_t group = 0;  // "Group g": NCCL_TESTS_SPLIT splits the ranks into communicators
};

// One run of a perf binary: its header lines and its result table(s).
struct Section {
  std::optional<hardware::Collective> collective;
  std::string program;
  std::map<std::int64_t, RankInfo> ranks;
  std::int32_t ranks_in_process = 0;  // nThread * nGpus
  std::int32_t iters = 0;
  std::string nccl;
  std::vector<Table> tables;
  bool open_table() const { return !tables.empty() && !tables.back().footer; }
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, const NcclTestsImportOptions& options)
      : text_(text), file_(file), options_(options) {}

  NcclTestsLog run();

 private:
  [[noreturn]] void fail(std::size_t line, const std::string& message) const {
    throw InputError(fmt::format("{}:{}: {}", file_, line, message));
  }
  void header_line(std::size_t number, std::string_view body);
  void data_row(std::size_t number, const std::vector<std::string_view>& words, bool last_line);
  void close_section(std::size_t number);
  void finish_table(const Section& section, const Table& table);

  std::string_view text_;
  const std::string& file_;
  const NcclTestsImportOptions& options_;
  Section section_;
  NcclTestsLog out_;
  std::size_t tables_seen_ = 0;
  std::map<std::string, std::int64_t> skipped_;
  // Rows of size 0: a message of less than one element per rank (all_gather_perf -b 8 -g 8),
  // which nccl-tests still launches and times; nothing moves, so there is nothing to calibrate.
  std::int64_t empty_rows_ = 0;
};

void Parser::header_line(std::size_t number, std::string_view body) {
  const std::vector<std::string_view> words = split_words(body);
  if (words.empty()) return;
  const bool starts_run =
      (words.size() >= 2 && words[0] == "nccl-tests" && words[1] == "version") ||
      (words.size() >= 3 && words[0] == "Collective" && words[1] == "test" &&
       words[2] == "starting:") ||
      words[0] == "nThread";
  if (starts_run && !section_.tables.empty()) close_section(number);
  if (words.size() >= 3 && words[0] == "nccl-tests" && words[1] == "version") {
    for (const std::string_view w : words) {
      if (w.starts_with("nccl-library=")) {
        if (const auto code = to_int(w.substr(13))) section_.nccl = nccl_version(*code);
      }
    }
  } else if (words.size() >= 4 && words[0] == "Collective" && words[2] == "starting:") {
    section_.program = std::string(words[3]);
    section_.collective = collective_from_text(words[3]);
    if (!section_.collective)
      fail(number, fmt::format("{} is not a collective fsdpsim calibrates "
                               "(all_gather_perf, reduce_scatter_perf, all_reduce_perf)",
                               words[3]));
  } else if (words[0] == "nThread") {
    std::int64_t threads = 1;
    std::int64_t gpus = 1;
    const auto count = [&](std::size_t i) {
      const auto v = to_int(words[i + 1]);
      if (!v || *v < 1 || *v > kMaxRanks) {
        fail(number, fmt::format("expected {} from 1 to {}, found {}", words[i], kMaxRanks,
                                 quoted(words[i + 1])));
      }
      return *v;
    };
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == "nThread") threads = count(i);
      if (words[i] == "nGpus") gpus = count(i);
      if (words[i] == "iters:" && (i == 0 || (words[i - 1] != "warmup" && words[i - 1] != "agg"))) {
        section_.iters = static_cast<std::int32_t>(to_int(words[i + 1]).value_or(0));
      }
    }
    if (threads * gpus > kMaxRanks) {
      fail(number, fmt::format("nThread {} x nGpus {} is more than {} ranks in one process",
                               threads, gpus, kMaxRanks));
    }
    section_.ranks_in_process = static_cast<std::int32_t>(threads * gpus);
  } else if (words[0] == "Rank" && words.size() >= 8) {
    // "Rank  r Group g Pid p on HOST device d [bus] NAME..."
    const auto rank = to_int(words[1]);
    const auto on = std::find(words.begin(), words.end(), std::string_view("on"));
    if (rank && on != words.end() && on + 1 != words.end()) {
      RankInfo info{std::string(*(on + 1)), "", 0};
      if (words[2] == "Group") info.group = to_int(words[3]).value_or(0);
      const std::size_t bracket = body.find(']');
      if (bracket != std::string_view::npos) {
        std::string_view name = body.substr(bracket + 1);
        while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
        while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.remove_suffix(1);
        info.device = std::string(name);
      }
      if (*rank < 0 || *rank >= kMaxRanks) {
        fail(number, fmt::format("expected a rank from 0 to {}, found {}", kMaxRanks - 1,
                                 quoted(words[1])));
      }
      // A profile describes one kind of GPU, as several logs must too (import_nccl_tests_logs).
      if (!section_.ranks.empty() && !info.device.empty() &&
          !section_.ranks.begin()->second.device.empty() &&
          info.device != section_.ranks.begin()->second.device) {
        fail(number, fmt::format("rank {} is a {}, but rank {} is a {}: a profile describes one "
                                 "kind of GPU",
                                 *rank, info.device, section_.ranks.begin()->first,
                                 section_.ranks.begin()->second.device));
      }
      if (!section_.ranks.emplace(*rank, info).second)
        fail(number, fmt::format("rank {} is listed twice", *rank));
    }
  } else if (const auto columns = parse_column_header(words)) {
    if (section_.open_table()) fail(number, "a second column header before the table above ended");
    Table t;
    t.header_line = number;
    t.last_line = number;
    t.columns = *columns;
    section_.tables.push_back(t);
  } else if (words.size() >= 3 && words[0] == "Avg" && words[1] == "bus" && section_.open_table()) {
    section_.tables.back().footer = true;
    section_.tables.back().last_line = number;
  } else if (words.size() >= 5 && words[0] == "Out" && words[1] == "of" && words[3] == "values" &&
             words.back() == "FAILED" && section_.open_table()) {
    fail(number,
         "nccl-tests reports out-of-bounds values: the collective returned wrong data, so its "
         "timings are not a measurement to calibrate with");
  }
}

void Parser::data_row(std::size_t number, const std::vector<std::string_view>& words,
                      bool last_line) {
  Table& t = section_.tables.back();
  t.last_line = number;
  const Columns& c = t.columns;
  if (words.size() < c.count) {
    if (last_line && options_.allow_truncated) {
      out_.notes.push_back(fmt::format("{}:{}: dropped the incomplete last row ({} of {} columns)",
                                       file_, number, words.size(), c.count));
      return;
    }
    if (last_line) {
      fail(number, fmt::format("truncated nccl-tests log: the last row has {} of its {} columns "
                               "(the run was cut short?)",
                               words.size(), c.count));
    }
    fail(number,
         fmt::format(
             "malformed result row: expected {} columns as in the header on line {}, found {}",
             c.count, t.header_line, words.size()));
  }
  // A row with more words than its header (beyond -T's date and time) is not what the header
  // describes: a log with a column lost from its header, or two rows run together.
  if (words.size() > c.count + (c.timestamp ? 2 : 0)) {
    fail(number,
         fmt::format(
             "malformed result row: expected {} columns as in the header on line {}, found {}",
             c.count, t.header_line, words.size()));
  }
  const std::size_t p = options_.in_place ? 1 : 0;
  if (c.time[p] < 0 || c.algbw[p] < 0 || c.busbw[p] < 0) {
    fail(t.header_line, "the table has no in-place columns (--in-place)");
  }
  const auto word = [&words](int index) { return words[static_cast<std::size_t>(index)]; };
  const auto number_at = [&](int index, const char* what) {
    const auto v = to_double(word(index));
    if (!v || *v < 0.0)
      fail(number, fmt::format("expected a number >= 0 in column '{}', found {}", what,
                               quoted(word(index))));
    return *v;
  };
  const auto bytes = to_int(word(c.size));
  if (!bytes || *bytes < 0 || *bytes > kMaxMeasuredBytes) {
    fail(number,
         fmt::format("expected a size in bytes from 0 to 2^50, found {}", quoted(word(c.size))));
  }
  if (*bytes == 0) {
    ++empty_rows_;
    ++t.empty_rows;
    return;
  }
  std::optional<std::int64_t> elements;
  if (c.elements >= 0) {
    elements = to_int(word(c.elements));
    if (!elements || *elements < 0) {
      fail(number, fmt::format("expected a count of elements (an integer >= 0) in column 'count', "
                               "found {}",
                               quoted(word(c.elements))));
    }
  }
  // The columns of the variant not imported (in-place without --in-place, out-of-place with it)
  // are still nccl-tests' numbers: anything else is a mangled row.
  const std::size_t other = 1 - p;
  for (const auto& [column, what] :
       {std::pair{c.time[other], "time"}, std::pair{c.algbw[other], "algbw"},
        std::pair{c.busbw[other], "busbw"}}) {
    if (column >= 0) (void)number_at(column, what);
  }
  Row r;
  r.line = number;
  r.bytes = *bytes;
  r.elements = elements;
  r.time_us = number_at(c.time[p], "time");
  r.algbw_gbps = number_at(c.algbw[p], "algbw");
  r.busbw_gbps = number_at(c.busbw[p], "busbw");
  if (r.time_us < kMinMeasuredUs || r.time_us > kMaxMeasuredUs) {
    fail(number, fmt::format("expected a time of {:g} us (1 ns) to {:g} us (a day), found {}",
                             kMinMeasuredUs, kMaxMeasuredUs, quoted(word(c.time[p]))));
  }
  // nccl-tests prints algbw = size / time (src/common.cu), to two decimals: a row whose columns
  // disagree was edited or mangled, and which of them is right cannot be told. A time of 10 s or
  // more is printed as %7.1e (nccl-tests since its JSON output, 2025), to two significant digits.
  const double algbw = static_cast<double>(r.bytes) / (r.time_us * 1e3);
  constexpr double kRelative = 0.02;  // a time in decimals has 3-4 significant digits
  const double time_rounding = relative_half_unit(word(c.time[p]));
  if (std::fabs(algbw - r.algbw_gbps) > kPrintedHalfUnit + (kRelative + time_rounding) * algbw) {
    fail(number, fmt::format("size / time = {:.4g} GB/s, but the row's algbw is {}: the columns "
                             "disagree",
                             algbw, quoted(word(c.algbw[p]))));
  }
  // A time printed with an exponent is taken from algbw where that is printed the finer.
  const bool exponent = word(c.time[p]).find_first_of("eE") != std::string_view::npos;
  if (exponent && r.algbw_gbps > 0.0 && kPrintedHalfUnit / r.algbw_gbps < time_rounding) {
    out_.notes.push_back(fmt::format(
        "{}:{}: time {} us is printed to two significant digits; taken as size / algbw = {:.6g} "
        "us",
        file_, number, word(c.time[p]), static_cast<double>(r.bytes) / (r.algbw_gbps * 1e3)));
    r.time_us = static_cast<double>(r.bytes) / (r.algbw_gbps * 1e3);
  }
  // Wrong data in either variant: the imported one's timing is then no measurement, and the
  // other's says the run itself went wrong (the same buffers, communicator and links).
  for (const std::size_t v : {p, other}) {
    if (c.wrong[v] < 0 || word(c.wrong[v]) == "N/A") continue;
    const std::string where =
        v == p ? std::string()
               : fmt::format(" in the {} columns", v == 1 ? "in-place" : "out-of-place");
    if (c.wrong_is_deviation) {
      const double bound = largest_accepted_deviation(word(c.type));
      if (number_at(c.wrong[v], "error") > bound) {
        fail(number, fmt::format("an error (largest deviation from the expected values) of {}{}, "
                                 "above nccl-tests' bound {:g} for {}: the collective returned "
                                 "wrong data, so this timing is not a measurement to calibrate "
                                 "with",
                                 word(c.wrong[v]), where, bound, word(c.type)));
      }
    } else if (number_at(c.wrong[v], "#wrong") > 0.0) {
      fail(number, fmt::format("{} wrong elements{}: the collective returned wrong data, so this "
                               "timing is not a measurement to calibrate with",
                               word(c.wrong[v]), where));
    }
  }
  if (!(r.time_us > 0.0)) fail(number, "a time of 0 us");
  const std::string_view type = word(c.type);
  const auto dtype = dtype_of(type);
  if (!dtype) {
    ++skipped_[fmt::format("type {}", type)];
    return;
  }
  if (c.redop >= 0) {
    const std::string_view op = word(c.redop);
    if (op != "sum" && op != "none" && op != "-") {
      ++skipped_[fmt::format("redop {}", op)];
      return;
    }
    if (op != "-") r.reduces = op == "sum";
  }
  r.dtype = *dtype;
  t.rows.push_back(r);
}

void Parser::finish_table(const Section& section, const Table& table) {
  ++tables_seen_;
  if (!table.footer) {
    if (!options_.allow_truncated) {
      fail(table.last_line,
           fmt::format(
               "truncated nccl-tests log: the table that starts on line {} has no '# Avg bus "
               "bandwidth' "
               "footer (the run was cut short?); --allow-truncated keeps its {} complete rows",
               table.header_line, table.rows.size()));
    }
    out_.notes.push_back(fmt::format("{}:{}: truncated table kept with {} complete rows", file_,
                                     table.header_line, table.rows.size()));
  }
  if (table.rows.empty()) {
    if (skipped_.empty() && table.empty_rows == 0)
      fail(table.last_line,
           fmt::format("the result table that starts on line {} has no rows", table.header_line));
    return;
  }
  // Which collective.
  std::optional<hardware::Collective> op = section.collective;
  if (options_.collective && op && *options_.collective != *op) {
    const std::string given =
        options_.collective_given_as.empty()
            ? fmt::format("--collective {}", collective_name(*options_.collective))
            : options_.collective_given_as;
    fail(table.header_line,
         fmt::format("{} contradicts the log, which ran {}", given, section.program));
  }
  if (!op) op = options_.collective;
  if (!op) op = collective_from_text(std::filesystem::path(file_).filename().string());
  if (!op) {
    fail(table.header_line,
         fmt::format("cannot tell which collective this table measured (no '# Collective test "
                     "starting' line and the file name does not say); pass --collective "
                     "{}=NAME (all_gather, reduce_scatter or all_reduce), or --collective NAME "
                     "for every log",
                     file_));
  }
  // The redop column says whether the rows reduced: an all_gather's 'none' read as a
  // reduce_scatter (they share busbw / algbw) would pass every other check.
  const bool reducing =
      *op == hardware::Collective::kReduceScatter || *op == hardware::Collective::kAllReduce;
  for (const Row& r : table.rows) {
    if (r.reduces && *r.reduces != reducing) {
      fail(r.line, fmt::format("redop {}, but the table is read as {}, which {}: the log is "
                               "another collective's; check --collective and the file name",
                               *r.reduces ? "sum" : "none", with_article(*op),
                               reducing ? "reduces" : "does not reduce"));
    }
  }
  // How many ranks, and how many per node.
  std::int32_t ranks = 0;
  std::int32_t per_node = 0;
  std::set<std::string> hosts;
  std::map<std::string, std::int32_t> ranks_on;
  for (const auto& [rank, info] : section.ranks) {
    hosts.insert(info.host);
    ++ranks_on[info.host];
  }
  if (!section.ranks.empty()) {
    ranks = static_cast<std::int32_t>(section.ranks.size());
    // Ranks 0..n-1, each once (the map's keys are unique), as nccl-tests numbers them.
    if (section.ranks.rbegin()->first != ranks - 1) {
      fail(table.header_line,
           fmt::format("the '#  Rank' lines list {} ranks up to rank {}: some are missing", ranks,
                       section.ranks.rbegin()->first));
    }
    if (section.ranks_in_process > 0 && ranks % section.ranks_in_process != 0) {
      fail(table.header_line,
           fmt::format("{} '#  Rank' lines, but each process runs nThread x nGpus = {} ranks",
                       ranks, section.ranks_in_process));
    }
    // NCCL_TESTS_SPLIT: each group of ranks is a communicator of its own, and the table times one
    // group's collective, so its shape is a group's: ranks, and ranks per node within it.
    std::map<std::int64_t, std::map<std::string, std::int32_t>> group_ranks_on;
    for (const auto& [rank, info] : section.ranks) ++group_ranks_on[info.group][info.host];
    std::set<std::pair<std::int32_t, std::int32_t>> shapes;  // (ranks, most on one host)
    for (const auto& [group, on] : group_ranks_on) {
      std::int32_t in_group = 0;
      std::int32_t most_on_host = 0;
      for (const auto& [host, n] : on) {
        in_group += n;
        most_on_host = std::max(most_on_host, n);
      }
      shapes.emplace(in_group, most_on_host);
      ranks_on = on;  // each group is checked alike below; they must all be of one shape
      if (shapes.size() > 1) {
        fail(table.header_line,
             fmt::format("the '#  Rank' lines put the ranks in {} groups (NCCL_TESTS_SPLIT) of "
                         "different shapes: {} ranks with {} on one host, and {} with {}; time "
                         "one communicator shape per log",
                         group_ranks_on.size(), shapes.begin()->first, shapes.begin()->second,
                         shapes.rbegin()->first, shapes.rbegin()->second));
      }
    }
    const auto [fewest, most] =
        std::minmax_element(ranks_on.begin(), ranks_on.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; });
    if (fewest->second != most->second) {
      fail(table.header_line,
           fmt::format("{} ranks on {} hosts, {} on {} but {} on {}: not the same number on "
                       "every node; pass --ranks-per-node",
                       shapes.begin()->first, ranks_on.size(), fewest->second, fewest->first,
                       most->second, most->first));
    }
    per_node = most->second;
    ranks = shapes.begin()->first;
  } else if (section.ranks_in_process > 0 && !options_.ranks) {
    ranks = section.ranks_in_process;  // one process without MPI: all its GPUs on one host
    per_node = ranks;
  }
  if (options_.ranks) ranks = *options_.ranks;
  if (options_.ranks_per_node) per_node = *options_.ranks_per_node;
  if (ranks <= 0)
    fail(table.header_line,
         "the log lists no ranks ('#  Rank ...' lines); pass --ranks and --ranks-per-node");
  if (per_node <= 0 && section.ranks_in_process == ranks) per_node = ranks;
  if (per_node <= 0)
    fail(table.header_line,
         "the log does not say which host each rank ran on; pass --ranks-per-node");
  if (per_node > ranks || ranks % per_node != 0) {
    fail(table.header_line,
         fmt::format("{} ranks per node does not divide {} ranks", per_node, ranks));
  }
  // Over one rank NCCL copies locally (busbw 0): nothing a step's collectives cost, and a
  // profile of it alone would price nothing (calibrate/fit.cpp skips such series).
  if (ranks < 2) {
    fail(table.header_line,
         "the table ran on 1 rank, where a collective only copies locally: it measures nothing "
         "fsdpsim prices; run nccl-tests on 2 or more GPUs (-g N, or one process per GPU)");
  }
  // busbw / algbw must be the factor of this collective on this many ranks. Both are printed to
  // two decimals: on small rows the check allows their rounding (half a printed unit each).
  const double factor = busbw_factor(*op, ranks);
  for (const Row& r : table.rows) {
    const double expected = factor * r.algbw_gbps;
    const double rounding = kPrintedHalfUnit * (1.0 + factor);
    if (std::fabs(r.busbw_gbps - expected) > rounding + kBusbwRatioTolerance * expected) {
      const double ratio = r.algbw_gbps > 0.0 ? r.busbw_gbps / r.algbw_gbps : 0.0;
      fail(r.line,
           fmt::format("busbw / algbw = {:.3f}, but {} over {} ranks has {:.3f} (nccl-tests "
                       "doc/PERFORMANCE.md); the log is not what it is read as: check --collective "
                       "and --ranks",
                       ratio, with_article(*op), ranks, factor));
    }
  }
  // nccl-tests prints the larger buffer's bytes and the count each rank passes to NCCL
  // (src/common.cu: writeBenchmarkLinePreamble(max(sendBytes, expectedBytes), nbytes / wordSize),
  // nbytes = paramcount x wordSize): all_gather's and reduce_scatter's paramcount is a rank's
  // share (src/all_gather.cu, reduce_scatter.cu GetCollByteCount), all_reduce's the whole buffer.
  const std::int64_t counted_ranks = *op == hardware::Collective::kAllReduce ? 1 : ranks;
  for (const Row& r : table.rows) {
    if (!r.elements) continue;
    const std::int64_t element_bytes = dtype_bytes(r.dtype);
    if (*r.elements > r.bytes || *r.elements * element_bytes * counted_ranks != r.bytes) {
      fail(r.line,
           fmt::format("size {} B is not count {} x {} B{}: the row was edited, or the log is not "
                       "what it is read as (check --collective and --ranks)",
                       r.bytes, *r.elements, element_bytes,
                       counted_ranks > 1 ? fmt::format(" x {} ranks", counted_ranks) : ""));
    }
  }
  // One series per dtype, in the order the dtypes first appear.
  std::vector<Dtype> order;
  for (const Row& r : table.rows) {
    if (std::find(order.begin(), order.end(), r.dtype) == order.end()) order.push_back(r.dtype);
  }
  for (const Dtype d : order) {
    CollectiveSeries s;
    s.op = *op;
    s.dtype = d;
    s.ranks = ranks;
    s.ranks_per_node = per_node;
    s.group = ranks == per_node ? "intra_node" : (per_node == 1 ? "inter_node" : "multi_node");
    s.in_place = options_.in_place;
    s.source = fmt::format("{} lines {}-{} (nccl-tests{}{})", file_, table.header_line,
                           table.last_line, section.program.empty() ? "" : " " + section.program,
                           section.nccl.empty() ? "" : ", NCCL " + section.nccl);
    for (const Row& r : table.rows) {
      if (r.dtype != d) continue;
      CollectivePoint point;
      point.bytes = Bytes(r.bytes);
      point.median = microseconds(r.time_us);
      point.repeats = section.iters;
      s.points.push_back(point);
    }
    out_.series.push_back(std::move(s));
  }
  // What the log says about the machine.
  if (!section.ranks.empty()) {
    if (out_.device.name.empty()) out_.device.name = section.ranks.begin()->second.device;
    out_.topology.nodes = std::max(out_.topology.nodes, static_cast<std::int32_t>(hosts.size()));
    out_.topology.gpus_per_node = std::max(out_.topology.gpus_per_node, per_node);
    for (const std::string& h : hosts) {
      if (std::find(out_.topology.hosts.begin(), out_.topology.hosts.end(), h) ==
          out_.topology.hosts.end()) {
        out_.topology.hosts.push_back(h);
      }
    }
  }
  if (out_.software.nccl.empty()) out_.software.nccl = section.nccl;
}

void Parser::close_section(std::size_t number) {
  (void)number;
  for (const Table& t : section_.tables) finish_table(section_, t);
  section_ = Section{};
}

NcclTestsLog Parser::run() {
  // Lines, with the number of the last non-empty one (a short row there is a truncation).
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text_.size()) {
    const std::size_t end = text_.find('\n', start);
    std::string_view line =
        text_.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  // The last line of nccl-tests' own output: a '#' line or one starting with a number (a row).
  // What a scheduler writes after a run it cut short ("slurmstepd: ... CANCELLED ...") is not.
  std::size_t last_content = 0;
  std::size_t first_content = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string_view> words = split_words(without_label(lines[i]));
    if (words.empty()) continue;
    if (first_content == 0) first_content = i + 1;
    if (words[0].starts_with("#") || is_integer(words[0])) last_content = i + 1;
  }
  if (last_content == 0) last_content = first_content;
  if (first_content == 0)
    throw InputError(fmt::format("{}: empty file, not an nccl-tests log", file_));

  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t number = i + 1;
    const std::string_view line = without_label(lines[i]);
    std::size_t first = 0;
    while (first < line.size() && (line[first] == ' ' || line[first] == '\t')) ++first;
    if (first < line.size() && line[first] == '#') {
      header_line(number, line.substr(first + 1));
      continue;
    }
    const std::vector<std::string_view> words = split_words(line);
    if (words.empty()) continue;
    if (!section_.open_table()) {
      // Between tables only other programs' output is skipped: a result row there lost its
      // table's header, or follows its footer, and its numbers cannot be read safely.
      if (is_integer(words[0]) && words.size() >= 3 && is_type_name(words[2])) {
        fail(number,
             section_.tables.empty()
                 ? std::string("a result row with no column header above it")
                 : fmt::format("a result row after the '# Avg bus bandwidth' footer on line {} "
                               "closed its table",
                               section_.tables.back().last_line));
      }
      continue;
    }
    if (!is_integer(words[0])) {
      // NCCL_DEBUG output and the like are skipped; a row shaped like a result (a type name in
      // the third column) with a bad size is an error, not a silently missing size.
      if (words.size() >= 3 && dtype_of(words[2]))
        fail(number, fmt::format("expected the size in bytes in the first column, found {}",
                                 quoted(words[0])));
      continue;
    }
    data_row(number, words, number == last_content);
  }
  close_section(lines.size());
  if (tables_seen_ == 0) {
    fail(first_content,
         fmt::format(
             "not an nccl-tests log: no result table (a '#  size  count  type ...  time  algbw  "
             "busbw' header) found; the file starts with {}",
             quoted(lines[first_content - 1])));
  }
  for (const auto& [what, count] : skipped_) {
    out_.notes.push_back(
        fmt::format("{}: skipped {} rows of {} (fsdpsim calibrates fp32, fp16, bf16 and fp8 with "
                    "redop sum)",
                    file_, count, what));
  }
  if (empty_rows_ > 0) {
    out_.notes.push_back(
        fmt::format("{}: skipped {} rows of size 0 (less than one element per "
                    "rank: nothing moved, nothing to calibrate)",
                    file_, empty_rows_));
  }
  if (out_.series.empty()) {
    throw InputError(
        fmt::format("{}: no rows fsdpsim can use (only {} rows, which it does not calibrate)",
                    file_, skipped_.empty() ? "size 0" : skipped_.begin()->first));
  }
  return out_;
}

}  // namespace

NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file,
                                  const NcclTestsImportOptions& options) {
  return Parser(text, file, options).run();
}

CalibrationProfile import_nccl_tests_logs(const std::vector<NcclTestsLogText>& logs,
                                          const NcclTestsImportOptions& options,
                                          const std::string& name,
                                          std::vector<std::string>& notes) {
  CalibrationProfile profile;
  profile.name = name;
  profile.tool = "fsdpsim calibrate import-nccl-tests";
  std::vector<CollectiveSeries> series;
  for (const NcclTestsLogText& f : logs) {
    NcclTestsImportOptions own = options;
    if (f.collective) {
      own.collective = f.collective;
      own.collective_given_as = f.collective_given_as;
    }
    NcclTestsLog log = parse_nccl_tests_log(f.text, f.file, own);
    if (!log.device.name.empty()) {
      if (!profile.device.name.empty() && profile.device.name != log.device.name) {
        throw InputError(fmt::format(
            "{}: measured on {}, but an earlier log was measured on {}; a profile describes "
            "one kind of GPU",
            f.file, log.device.name, profile.device.name));
      }
      profile.device.name = log.device.name;
    }
    if (profile.software.nccl.empty()) profile.software.nccl = log.software.nccl;
    profile.topology.nodes = std::max(profile.topology.nodes, log.topology.nodes);
    profile.topology.gpus_per_node =
        std::max(profile.topology.gpus_per_node, log.topology.gpus_per_node);
    for (const std::string& h : log.topology.hosts) {
      if (std::find(profile.topology.hosts.begin(), profile.topology.hosts.end(), h) ==
          profile.topology.hosts.end()) {
        profile.topology.hosts.push_back(h);
      }
    }
    for (CollectiveSeries& s : log.series) series.push_back(std::move(s));
    for (std::string& n : log.notes) notes.push_back(std::move(n));
  }
  for (std::string& n : merge_series(profile, std::move(series))) notes.push_back(std::move(n));
  return profile;
}

}  // namespace fsdpsim::calibrate
