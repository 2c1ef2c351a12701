#include "sim/app/validation_cases.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include "hardware/gpu_spec.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/csv_records.hpp"
#include "sim/app/finite_number.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/size_bounds.hpp"

namespace fsdpsim::app {
namespace {

// The column of `known` that header cell `column` most likely misspells, or "": the same name
// but for case, spaces or hyphens, or one edit away (two from a name of 8 letters or more), so
// that short names of one's own ("mfu", "host", "gbs") are not taken for fsdpsim's. Free text
// (notes, source_detail), whose cells change nothing, is not guarded: "nodes" is not "notes".
std::string misspelt_column(const std::string& column, const std::vector<std::string>& known) {
  if (std::string same = same_name_but_for_case(column, known); !same.empty()) return same;
  const std::size_t allowed = column.size() >= 8 ? 2 : column.size() >= 4 ? 1 : 0;
  std::string best;
  std::size_t best_distance = allowed + 1;
  for (const std::string& k : known) {
    if (k == "notes" || k == "source_detail") continue;
    const std::size_t d = edit_distance(column, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return best;
}

const std::vector<std::string> kRequiredColumns = {
    "case_id",  "source",   "model_family", "n_layers",   "d_model",       "n_heads",
    "vocab",    "seq_len",  "gpu",          "gpus",       "gpus_per_node", "fsdp_version",
    "sharding", "act_ckpt", "param_dtype",  "micro_batch"};

// What a run is compared on: a file needs at least one of them (a cluster's own runs may have
// logged tokens/s alone), and a row with none of them is skipped.
const std::vector<std::string> kMeasuredThroughputColumns = {"measured_tokens_per_s_per_gpu",
                                                             "measured_model_tflops_per_gpu",
                                                             "measured_hardware_tflops_per_gpu"};

// Every other column configs/validation/README.md defines: read into the scenario, compared, or
// kept for the reader (source_detail, params_b, inter_node_assumed, mfu_definition, notes).
const std::vector<std::string> kOtherColumns = {"source_detail",
                                                "model",
                                                "n_kv_heads",
                                                "ffn_dim",
                                                "params_b",
                                                "inter_node_gbps_per_node",
                                                "inter_node_assumed",
                                                "shard_group_size",
                                                "reduce_dtype",
                                                "matmul_dtype",
                                                "attention",
                                                "loss",
                                                "logits_kept_by_loop",
                                                "compiled",
                                                "cpu_offload",
                                                "optimizer",
                                                "global_batch",
                                                "grad_accum",
                                                "measured_mfu",
                                                "measured_hfu",
                                                "measured_peak_mem_gib",
                                                "measured_peak_reserved_gib",
                                                "mfu_definition",
                                                "notes",
                                                "no_sync",
                                                "param_storage_dtype",
                                                "backward_prefetch",
                                                "forward_prefetch",
                                                "limit_all_gathers",
                                                "clip_grad_norm",
                                                "offload_activations",
                                                "runtime",
                                                "unpad_attention",
                                                "wrap_policy",
                                                "pcie_GBps",
                                                "checkpoint_early_stop",
                                                "memory_fraction",
                                                "causal_mask_buffer",
                                                "float8_all_gather",
                                                "precompute_float8_scale",
                                                "last_unit_reshard_after_forward",
                                                "wrap_embedding_and_head",
                                                "loss_chunks",
                                                "optimizer_impl",
                                                "rms_norm",
                                                "float8_linear",
                                                "host_sync"};

const std::set<std::string> kPresetGpus = {"a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm-80gb",
                                           "h200-sxm-141gb"};

[[noreturn]] void bad_cell(const std::filesystem::path& file, const ValidationCase& c,
                           const std::string& column, const std::string& expected) {
  throw ConfigError(fmt::format("{}: line {}, column {}: expected {}, found \"{}\"", file.string(),
                                c.line, column, expected, c.get(column)));
}

// Integers a double holds exactly: every count a run has is far below.
constexpr double kLargestExactInteger = 9007199254740992.0;  // 2^53

std::int64_t positive_int(const std::filesystem::path& file, const ValidationCase& c,
                          const std::string& column) {
  // Digits are read as an integer: through a double, 2^53 + 1 would round to 2^53 and pass.
  const std::string& cell = c.get(column);
  if (!cell.empty() &&
      std::all_of(cell.begin(), cell.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), n);
    if (ec != std::errc() || end != cell.data() + cell.size() || n <= 0 ||
        n > (std::int64_t{1} << 53)) {
      bad_cell(file, c, column, "a positive integer (at most 2^53)");
    }
    return n;
  }
  const std::optional<double> v = c.number(column);  // 8.0, 1e3
  if (!v || *v <= 0 || std::floor(*v) != *v || *v > kLargestExactInteger)
    bad_cell(file, c, column, "a positive integer (at most 2^53)");
  return static_cast<std::int64_t>(*v);
}

bool boolean(const std::filesystem::path& file, const ValidationCase& c,
             const std::string& column) {
  const std::string& v = c.get(column);
  // As spreadsheets write them too: TRUE and FALSE (Excel, LibreOffice), True and False.
  if (v.empty() || v == "false" || v == "FALSE" || v == "False") return false;
  if (c.yes(column)) return true;
  bad_cell(file, c, column, "true or false");
}

}  // namespace

const std::string& ValidationCase::get(const std::string& column) const {
  static const std::string kEmpty;
  const auto it = fields.find(column);
  return it == fields.end() ? kEmpty : it->second;
}

std::optional<double> ValidationCase::number(const std::string& column) const {
  return finite_number(get(column));
}

bool ValidationCase::yes(const std::string& column) const {
  const std::string& v = get(column);
  return v == "true" || v == "TRUE" || v == "True";
}

namespace {

// Every column validate reads (or, as notes and source_detail, reads past by name).
std::vector<std::string> known_columns() {
  std::vector<std::string> known = kRequiredColumns;
  known.insert(known.end(), kMeasuredThroughputColumns.begin(), kMeasuredThroughputColumns.end());
  known.insert(known.end(), kOtherColumns.begin(), kOtherColumns.end());
  return known;
}

}  // namespace

std::vector<std::string> columns_of_your_own(const std::vector<ValidationCase>& cases) {
  std::vector<std::string> own;
  if (cases.empty()) return own;
  const std::vector<std::string> known = known_columns();
  for (const auto& [column, cell] : cases.front().fields) {
    if (!column.empty() && std::find(known.begin(), known.end(), column) == known.end()) {
      own.push_back(column);
    }
  }
  return own;
}

std::vector<ValidationCase> read_validation_cases(const std::filesystem::path& file) {
  // Bounded and checked: a device like /dev/zero would otherwise be read without end.
  const std::string text = read_text_file(file);
  const std::vector<CsvRecord> records = parse_csv_records(text, file.string());
  if (records.empty()) throw ConfigError(file.string(), "", "empty file: expected a header line");
  if (records.front().blank) {
    throw ConfigError(fmt::format(
        "{}: line 1: expected a header line of column names (case_id, source, model_family, "
        "...), found a blank line",
        file.string()));
  }
  const std::vector<std::string>& header = records.front().fields;
  // A file whose first line names no column fsdpsim reads has no header: its first row of
  // values would be read as one (and a repeated value named as a repeated column).
  if (std::none_of(header.begin(), header.end(), [](const std::string& column) {
        return std::find(kRequiredColumns.begin(), kRequiredColumns.end(), column) !=
               kRequiredColumns.end();
      })) {
    // One cell holding them all: a file separated by semicolons or tabs.
    const bool other_separator =
        header.size() == 1 && (header.front().find(';') != std::string::npos ||
                               header.front().find('\t') != std::string::npos);
    throw ConfigError(
        fmt::format("{}: line 1: expected a header line of column names (case_id, "
                    "source, model_family, ...: configs/validation/README.md), "
                    "found none of them{}",
                    file.string(),
                    other_separator ? " (the line has semicolons or tabs where CSV has commas: "
                                      "save it as comma-separated)"
                                    : ""));
  }
  std::set<std::string> named;
  for (const std::string& column : header) {
    // Unnamed columns (trailing commas, a spreadsheet's stray ones) may be several; each must
    // stay empty (below).
    if (column.empty()) continue;
    if (!named.insert(column).second) {
      throw ConfigError(fmt::format("{}: line 1: column \"{}\" appears twice in the header",
                                    file.string(), column));
    }
  }
  const std::vector<std::string> known = known_columns();
  const auto is_known = [&known](const std::string& column) {
    return std::find(known.begin(), known.end(), column) != known.end();
  };
  // Every missing column at once: a cluster's own CSV is written by hand or by a script, and
  // one message per missing column would take as many runs to complete.
  std::vector<std::string> unknown;
  std::copy_if(header.begin(), header.end(), std::back_inserter(unknown),
               [&](const std::string& column) { return !is_known(column); });
  std::vector<std::string> missing;
  for (const std::string& required : kRequiredColumns) {
    if (std::find(header.begin(), header.end(), required) != header.end()) continue;
    // A header cell fsdpsim does not know that is a near miss ("gpu " with a space) is most
    // likely the column.
    const std::string near = did_you_mean(required, unknown);
    missing.push_back(fmt::format("\"{}\"{}", required,
                                  near.empty() ? "" : fmt::format(" (found \"{}\")", near)));
  }
  if (std::none_of(kMeasuredThroughputColumns.begin(), kMeasuredThroughputColumns.end(),
                   [&header](const std::string& column) {
                     return std::find(header.begin(), header.end(), column) != header.end();
                   })) {
    missing.push_back(fmt::format("one of \"{}\" (a measured throughput to compare with)",
                                  fmt::join(kMeasuredThroughputColumns, "\", \"")));
  }
  if (!missing.empty()) {
    throw ConfigError(fmt::format("{}: line 1: required column{} missing: {}", file.string(),
                                  missing.size() == 1 ? " is" : "s are", fmt::join(missing, ", ")));
  }
  // A column fsdpsim does not know is the user's own (for --where and --group-by), unless it is
  // so close to one it knows that it is most likely a misspelling, whose cells would be ignored.
  for (const std::string& column : header) {
    if (is_known(column)) continue;
    // A measurement under a name validate does not compare would be ignored in silence (a
    // misspelled one gets its did-you-mean below first).
    if (column.rfind("measured_", 0) == 0 && misspelt_column(column, known).empty()) {
      std::vector<std::string> compared;
      std::copy_if(known.begin(), known.end(), std::back_inserter(compared),
                   [](const std::string& k) { return k.rfind("measured_", 0) == 0; });
      throw ConfigError(fmt::format(
          "{}: line 1: column \"{}\" is not a measurement validate compares ({}); rename it to "
          "keep it as a column of your own",
          file.string(), column, fmt::join(compared, ", ")));
    }
    if (const std::string hint = misspelt_column(column, known); !hint.empty()) {
      throw ConfigError(fmt::format(
          "{}: line 1: unknown column \"{}\" (did you mean \"{}\"?); a column of your own "
          "needs a name unlike fsdpsim's (configs/validation/README.md)",
          file.string(), column, hint));
    }
  }
  std::vector<ValidationCase> cases;
  std::map<std::string, std::int64_t> line_of_id;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& record = records[r];
    if (record.blank) continue;
    if (record.fields.size() != header.size()) {
      throw ConfigError(fmt::format("{}: line {}: expected {} columns as in the header, found {}",
                                    file.string(), record.line, header.size(),
                                    record.fields.size()));
    }
    ValidationCase c;
    c.line = record.line;
    for (std::size_t i = 0; i < header.size(); ++i) {
      // An unnamed column (a trailing comma) may stay empty; a value there would be lost.
      if (header[i].empty() && !record.fields[i].empty()) {
        throw ConfigError(fmt::format(
            "{}: line {}, column {}: found \"{}\" under a header cell with no name; name the "
            "column or leave it empty",
            file.string(), record.line, i + 1, escape_control_characters(record.fields[i])));
      }
      c.fields[header[i]] = record.fields[i];
    }
    // Every row is named in the reports and by --where case_id=...; two rows with one name
    // would be told apart by neither.
    const std::string& id = c.get("case_id");
    if (id.empty()) {
      throw ConfigError(
          fmt::format("{}: line {}, column case_id: expected a name, found an "
                      "empty cell",
                      file.string(), c.line));
    }
    if (const auto [it, fresh] = line_of_id.emplace(id, c.line); !fresh) {
      throw ConfigError(
          fmt::format("{}: line {}, column case_id: \"{}\" is already the case_id "
                      "of line {}; expected a name of its own",
                      file.string(), c.line, id, it->second));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

namespace {

// A scenario's or model's name from a cell, which a quoted CSV cell may break across lines: the
// names are printed on one line (JsonObjectReader::name).
std::string one_line(const std::string& cell) { return escape_control_characters(cell, ""); }

// An optional numeric cell: empty is absent; anything else must be a positive number within
// [kSmallestCell, kLargestCell]. A measurement divides an error: at 2.5e-308 tokens/s the error
// overflowed to inf and was printed as a result. No measured rate, size or fraction of a real
// run comes near either bound.
constexpr double kSmallestCell = 1e-6;
constexpr double kLargestCell = 1e15;
std::optional<double> optional_positive(const std::filesystem::path& file, const ValidationCase& c,
                                        const std::string& column) {
  if (c.get(column).empty()) return std::nullopt;
  const std::optional<double> v = c.number(column);
  if (!v || !(*v >= kSmallestCell && *v <= kLargestCell)) {
    bad_cell(file, c, column,
             fmt::format("a positive number from {:g} to {:g}, or an empty cell", kSmallestCell,
                         kLargestCell));
  }
  return v;
}

// A cell that must be one of `choices` (exact spelling).
void check_choice(const std::filesystem::path& file, const ValidationCase& c,
                  const std::string& column, const std::vector<std::string>& choices,
                  bool empty_allowed) {
  const std::string& v = c.get(column);
  if (v.empty() && empty_allowed) return;
  if (std::find(choices.begin(), choices.end(), v) == choices.end())
    bad_cell(file, c, column, fmt::format("one of {}", fmt::join(choices, ", ")));
}

// The row's scenario, every cell checked; skip_reason set (with the document built from
// stand-ins where a cell is missing) for a row that cannot be simulated.
CaseScenario checked_case(const ValidationCase& c, const std::filesystem::path& file) {
  CaseScenario out;
  // Cells checked whatever the row's fate: a malformed value is an error, not a skipped row.
  for (const char* column :
       {"measured_tokens_per_s_per_gpu", "measured_model_tflops_per_gpu",
        "measured_hardware_tflops_per_gpu", "measured_peak_mem_gib", "measured_peak_reserved_gib",
        "params_b", "inter_node_gbps_per_node"}) {
    (void)optional_positive(file, c, column);
  }
  for (const char* column :
       {"global_batch", "grad_accum", "shard_group_size", "n_kv_heads", "ffn_dim"}) {
    if (!c.get(column).empty()) (void)positive_int(file, c, column);
  }
  // The caching allocator's segments hold every allocated block.
  if (const auto allocated = optional_positive(file, c, "measured_peak_mem_gib"),
      reserved = optional_positive(file, c, "measured_peak_reserved_gib");
      allocated && reserved && *reserved < *allocated) {
    bad_cell(file, c, "measured_peak_reserved_gib",
             fmt::format("at least measured_peak_mem_gib ({}): reserved memory holds every "
                         "allocated block",
                         c.get("measured_peak_mem_gib")));
  }
  // MFU and HFU are fractions of the peak (0.41 = 41 %): above 1 is a percentage or a typo.
  for (const char* column : {"measured_mfu", "measured_hfu"}) {
    if (c.get(column).ends_with('%'))
      bad_cell(file, c, column, "a fraction of the peak in (0, 1] (0.41 = 41 %)");
    if (const auto v = optional_positive(file, c, column); v && *v > 1.0)
      bad_cell(file, c, column, "a fraction of the peak in (0, 1] (0.41 = 41 %)");
  }
  (void)boolean(file, c, "inter_node_assumed");
  check_choice(file, c, "sharding",
               {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD", "_HYBRID_SHARD_ZERO2"},
               false);
  check_choice(file, c, "param_dtype", {"fp32", "bf16", "fp16"}, false);
  check_choice(file, c, "reduce_dtype", {"fp32", "bf16", "fp16"}, true);
  check_choice(file, c, "matmul_dtype", {"fp32", "tf32", "bf16", "fp16", "fp8"}, true);
  check_choice(file, c, "optimizer", {"adamw", "sgd"}, true);
  const std::string gpu = c.get("gpu");
  const std::vector<std::string> preset_gpus(kPresetGpus.begin(), kPresetGpus.end());
  if (gpu.empty()) bad_cell(file, c, "gpu", "a GPU, e.g. a hardware preset's name");
  // A preset's name but for case, spaces or hyphens is a typo, not another GPU: skipped, its row
  // would leave the errors (and a --max-mape gate) without a word but a line on stderr.
  if (const std::string meant = same_name_but_for_case(gpu, preset_gpus);
      !meant.empty() && meant != gpu) {
    bad_cell(file, c, "gpu", fmt::format("the preset's name as written, \"{}\"", meant));
  }
  if (kPresetGpus.count(gpu) == 0) {
    const std::string hint = did_you_mean(gpu, preset_gpus);
    out.skip_reason =
        fmt::format("column gpu: GPU \"{}\" has no hardware preset{}", gpu,
                    hint.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", hint));
  } else if (c.get("gpus").empty()) {
    out.skip_reason = "the source gives no GPU count";
  } else if (!c.number("measured_tokens_per_s_per_gpu") &&
             !c.number("measured_model_tflops_per_gpu") &&
             !c.number("measured_hardware_tflops_per_gpu")) {
    out.skip_reason = "no measured throughput (tokens/s or TFLOPS) to compare with";
  }
  // A row without a GPU count is skipped, its other cells still checked: one node stands in for
  // the job where a check needs it, and the checks across cells that the count decides
  // (global_batch, grad_accum, shard_group_size) wait for a row that has it.
  const bool gpus_given = !c.get("gpus").empty();
  // (A row without a GPU count may not give its node size either.)
  std::int64_t per_node =
      !gpus_given && c.get("gpus_per_node").empty() ? 1 : positive_int(file, c, "gpus_per_node");
  const std::int64_t gpus = gpus_given ? positive_int(file, c, "gpus") : per_node;
  if (gpus > hardware::kMaxWorldSize)
    bad_cell(file, c, "gpus", fmt::format("at most {} GPUs", hardware::kMaxWorldSize));
  if (per_node > hardware::kMaxWorldSize) {
    bad_cell(file, c, "gpus_per_node", fmt::format("at most {} GPUs", hardware::kMaxWorldSize));
  }
  if (gpus < per_node) per_node = gpus;  // a job on part of one node
  if (gpus % per_node != 0)
    bad_cell(file, c, "gpus", fmt::format("a multiple of gpus_per_node ({})", per_node));
  const std::int64_t micro = positive_int(file, c, "micro_batch");
  // The scenario bounds micro_batch x seq_len by size_bounds::kTokens; bounded here already so
  // that micro_batch x gpus below stays within 64 bits.
  if (micro > size_bounds::kTokens)
    bad_cell(file, c, "micro_batch", fmt::format("at most {} sequences", size_bounds::kTokens));
  // Gradient accumulation as printed; else ceil(global / (micro x gpus)), as Composer runs it
  // (the sources' global batch need not divide evenly; the last micro-batch is partial, simulated
  // whole). Given both, they must agree up to rounding down or up.
  std::int64_t accumulation = 1;
  if (!c.get("global_batch").empty() && gpus_given) {
    const std::int64_t global = positive_int(file, c, "global_batch");
    if (global < micro * gpus) {
      bad_cell(file, c, "global_batch",
               fmt::format("at least micro_batch x gpus = {} sequences (one micro-batch on every "
                           "GPU)",
                           micro * gpus));
    }
    accumulation = (global + micro * gpus - 1) / (micro * gpus);
    if (!c.get("grad_accum").empty()) {
      const std::int64_t printed = positive_int(file, c, "grad_accum");
      const std::int64_t floor = global / (micro * gpus);
      const std::int64_t ceil = (global + micro * gpus - 1) / (micro * gpus);
      if (printed < floor || printed > ceil) {
        // A global batch in tokens is seq_len times the sequences.
        const double seq_cell = c.number("seq_len").value_or(0.0);  // checked further down
        const std::int64_t seq_len = seq_cell >= 1.0 && seq_cell <= kLargestExactInteger
                                         ? static_cast<std::int64_t>(seq_cell)
                                         : 0;
        const bool in_tokens = seq_len > 1 && global % seq_len == 0 &&
                               global / seq_len >= micro * gpus &&
                               global / seq_len / (micro * gpus) <= printed &&
                               printed <= (global / seq_len + micro * gpus - 1) / (micro * gpus);
        bad_cell(file, c, "grad_accum",
                 fmt::format("the global_batch cell's {} / (micro_batch {} x {} GPUs) = {:.4g} "
                             "micro-batches per step, rounded down or up, or no global_batch "
                             "cell{}",
                             global, micro, gpus,
                             static_cast<double>(global) / static_cast<double>(micro * gpus),
                             in_tokens ? fmt::format(" (global_batch counts sequences: {} tokens "
                                                     "are {} sequences of {})",
                                                     global, global / seq_len, seq_len)
                                       : ""));
      }
      accumulation = printed;
    }
  } else if (!c.get("grad_accum").empty()) {
    accumulation = positive_int(file, c, "grad_accum");
  }
  const std::int64_t seq = positive_int(file, c, "seq_len");
  const std::string family = c.get("model_family");
  if (family != "gpt" && family != "mpt" && family != "llama")
    bad_cell(file, c, "model_family", "gpt, mpt or llama");
  nlohmann::json model = {
      {"name", one_line(c.get("model").empty() ? c.get("case_id") : c.get("model"))},
      {"family", family},
      {"n_layers", positive_int(file, c, "n_layers")},
      {"d_model", positive_int(file, c, "d_model")},
      {"n_heads", positive_int(file, c, "n_heads")},
      {"vocab", positive_int(file, c, "vocab")},
      // llm-foundry sizes the learned position table to the run's sequence length.
      {"max_seq_len", seq}};
  if (!c.get("n_kv_heads").empty()) model["n_kv_heads"] = positive_int(file, c, "n_kv_heads");
  if (!c.get("ffn_dim").empty()) {
    model["ffn_dim"] = positive_int(file, c, "ffn_dim");
  } else if (family == "llama") {
    // Llama's SwiGLU width is no fixed multiple of d_model (ffn_dim_multiplier, multiple_of).
    bad_cell(file, c, "ffn_dim",
             "the SwiGLU inner size of a llama row (gpt and mpt rows may leave it empty: 4 x "
             "d_model)");
  }
  // The optional causal_mask_buffer column (configs/validation/README.md): minGPT's per-block
  // mask buffer; empty = false.
  if (boolean(file, c, "causal_mask_buffer")) model["causal_mask_buffer"] = true;
  nlohmann::json hardware = {
      {"preset", gpu}, {"nodes", gpus / per_node}, {"node", {{"gpus_per_node", per_node}}}};
  if (const auto nic = optional_positive(file, c, "inter_node_gbps_per_node"))
    hardware["node"]["nic_Gbps_per_node"] = *nic;
  // The optional pcie_GBps column (configs/validation/README.md); empty = the GPU preset's.
  if (const std::optional<double> pcie = optional_positive(file, c, "pcie_GBps")) {
    hardware["node"]["pcie_GBps"] = *pcie;
  }
  // The optional memory_fraction column (configs/validation/README.md): the run capped its
  // caching allocator with torch.cuda.set_per_process_memory_fraction; empty = no cap.
  nlohmann::json allocator = nlohmann::json::object();
  if (!c.get("memory_fraction").empty()) {
    const std::optional<double> fraction = c.number("memory_fraction");
    if (!fraction || !(*fraction > 0.0 && *fraction <= 1.0))
      bad_cell(file, c, "memory_fraction", "a fraction in (0, 1]");
    allocator["memory_fraction"] = *fraction;
  }
  const std::string ac = c.get("act_ckpt");
  if (ac != "none" && ac != "full" && ac != "selective" && ac != "selective_op")
    bad_cell(file, c, "act_ckpt", "none, full, selective or selective_op");
  nlohmann::json training = {
      {"global_batch", micro * gpus * accumulation},
      {"micro_batch", micro},
      {"seq_len", seq},
      {"activation_checkpointing", ac},
      {"optimizer", c.get("optimizer").empty() ? "adamw" : c.get("optimizer")}};
  // The optional loss column (configs/validation/README.md); empty = F.cross_entropy.
  if (const std::string loss = c.get("loss");
      loss == "cross_entropy" || loss == "cross_entropy_no_upcast" ||
      loss == "fused_cross_entropy" || loss == "compiled_cross_entropy") {
    training["loss"] = loss;
  } else if (!loss.empty()) {
    bad_cell(file, c, "loss",
             "cross_entropy, cross_entropy_no_upcast, fused_cross_entropy or "
             "compiled_cross_entropy");
  }
  // The optional rms_norm column (configs/validation/README.md); empty = the family's own.
  if (const std::string norm = c.get("rms_norm"); norm == "fused" || norm == "eager") {
    training["rms_norm"] = norm;
  } else if (!norm.empty()) {
    bad_cell(file, c, "rms_norm", "fused or eager");
  }
  // The optional logits_kept_by_loop column (configs/validation/README.md); empty = none.
  if (const std::string kept = c.get("logits_kept_by_loop");
      kept == "none" || kept == "compute_dtype" || kept == "fp32") {
    training["logits_kept_by_loop"] = kept;
  } else if (!kept.empty()) {
    bad_cell(file, c, "logits_kept_by_loop", "none, compute_dtype or fp32");
  }
  // The optional host_sync column (configs/validation/README.md); empty = step.
  if (const std::string sync = c.get("host_sync");
      sync == "step" || sync == "micro_batch" || sync == "none") {
    training["host_sync"] = sync;
  } else if (!sync.empty()) {
    bad_cell(file, c, "host_sync", "step, micro_batch or none");
  }
  // The optional loss_chunks column (configs/validation/README.md); empty = no chunking.
  if (!c.get("loss_chunks").empty()) training["loss_chunks"] = positive_int(file, c, "loss_chunks");
  // The optional attention column (configs/validation/README.md); empty = FlashAttention-2.
  if (const std::string attention = c.get("attention"); attention == "unfused") {
    training["flash_attention"] = false;
  } else if (attention == "flash2" || attention == "flash1" || attention == "triton" ||
             attention == "cudnn") {
    training["flash_kernel"] = attention;
  } else if (!attention.empty()) {
    bad_cell(file, c, "attention", "flash2, flash1, triton, cudnn or unfused");
  }
  // fp8: float8 linears (models/float8_linear.hpp). Another GEMM dtype than the all-gathered
  // parameters' is autocast (Composer DEFAULT).
  const std::string& matmul = c.get("matmul_dtype");
  // The optional float8_linear column: whose float8 linears (empty: torchao's).
  if (const std::string library = c.get("float8_linear"); !library.empty()) {
    if (matmul != "fp8") bad_cell(file, c, "float8_linear", "empty where matmul_dtype is not fp8");
    if (library != "torchao" && library != "transformer_engine") {
      bad_cell(file, c, "float8_linear", "torchao or transformer_engine");
    }
    training["float8_linear"] = library;
  }
  if (matmul == "fp8") {
    training["matmul_dtype"] = matmul;
  } else if (matmul == "tf32") {
    // fp32 parameters and math with torch.backends.cuda.matmul.allow_tf32.
    if (c.get("param_dtype") != "fp32") {
      bad_cell(file, c, "matmul_dtype", "tf32 only with param_dtype fp32 (TF32 is fp32 math)");
    }
    training["allow_tf32"] = true;
  } else if (!matmul.empty() && matmul != c.get("param_dtype")) {
    training["autocast_dtype"] = matmul;
  }
  if (boolean(file, c, "compiled")) training["compiled"] = true;
  // The optional no_sync, param_storage_dtype, clip_grad_norm, offload_activations and
  // unpad_attention columns (configs/validation/README.md).
  if (boolean(file, c, "no_sync")) training["no_sync"] = true;
  if (boolean(file, c, "clip_grad_norm")) training["clip_grad_norm"] = true;
  if (boolean(file, c, "offload_activations")) training["offload_activations"] = true;
  if (boolean(file, c, "unpad_attention")) training["unpad_attention"] = true;
  // The optional checkpoint_early_stop column (configs/validation/README.md); empty = the
  // scenario's default (PyTorch >= 2.1's non-reentrant checkpoint; none for DeepSpeed).
  // Without checkpointing it describes the runtime but changes nothing, and the scenario refuses
  // a key that does nothing.
  if (!c.get("checkpoint_early_stop").empty()) {
    const bool early_stop = boolean(file, c, "checkpoint_early_stop");  // checked either way
    if (c.get("act_ckpt") != "none") training["checkpoint_early_stop"] = early_stop;
  }
  if (const std::string storage = c.get("param_storage_dtype"); !storage.empty()) {
    if (storage != "fp32" && storage != "bf16" && storage != "fp16")
      bad_cell(file, c, "param_storage_dtype", "fp32, bf16 or fp16");
    training["param_storage_dtype"] = storage;
  }
  // The optional optimizer_impl column (configs/validation/README.md); empty = foreach.
  if (const std::string impl = c.get("optimizer_impl");
      impl == "foreach" || impl == "fused" || impl == "for_loop") {
    training["optimizer_impl"] = impl;
  } else if (!impl.empty()) {
    bad_cell(file, c, "optimizer_impl", "foreach, fused or for_loop");
  }
  if (c.get("fsdp_version") != "1" && c.get("fsdp_version") != "2")
    bad_cell(file, c, "fsdp_version", "1 or 2");
  const std::int64_t version = positive_int(file, c, "fsdp_version");
  nlohmann::json fsdp = {{"version", version},
                         {"sharding_strategy", c.get("sharding")},
                         {"param_dtype", c.get("param_dtype")},
                         {"cpu_offload", boolean(file, c, "cpu_offload")}};
  if (!c.get("reduce_dtype").empty()) fsdp["reduce_dtype"] = c.get("reduce_dtype");
  // The optional prefetch and rate-limiter columns (configs/validation/README.md); empty =
  // fsdpsim's defaults (PyTorch's own: BACKWARD_PRE, no forward prefetch, limiter on).
  if (const std::string prefetch = c.get("backward_prefetch"); !prefetch.empty()) {
    if (prefetch != "BACKWARD_PRE" && prefetch != "BACKWARD_POST" && prefetch != "none")
      bad_cell(file, c, "backward_prefetch", "BACKWARD_PRE, BACKWARD_POST or none");
    fsdp["backward_prefetch"] = prefetch;
  }
  if (!c.get("forward_prefetch").empty())
    fsdp["forward_prefetch"] = boolean(file, c, "forward_prefetch");
  if (!c.get("limit_all_gathers").empty())
    fsdp["limit_all_gathers"] = boolean(file, c, "limit_all_gathers");
  // The optional float8 all-gather columns (configs/validation/README.md); empty = false.
  for (const char* column : {"float8_all_gather", "precompute_float8_scale"}) {
    if (!c.get(column).empty()) fsdp[column] = boolean(file, c, column);
  }
  // The optional last_unit_reshard_after_forward column (configs/validation/README.md); empty =
  // the other units' (true).
  if (!c.get("last_unit_reshard_after_forward").empty()) {
    if (version != 2) {
      bad_cell(file, c, "last_unit_reshard_after_forward",
               "empty with fsdp_version 1 (an FSDP2 fully_shard argument)");
    }
    fsdp["last_unit_reshard_after_forward"] = boolean(file, c, "last_unit_reshard_after_forward");
  }
  // The optional wrap_embedding_and_head column (configs/validation/README.md); empty = false.
  if (!c.get("wrap_embedding_and_head").empty()) {
    if (version != 2) {
      bad_cell(file, c, "wrap_embedding_and_head",
               "empty with fsdp_version 1 (FSDP2's fully_shard([norm, output]))");
    }
    fsdp["wrap_embedding_and_head"] = boolean(file, c, "wrap_embedding_and_head");
  }
  // The optional wrap_policy column (configs/validation/README.md); empty = transformer_block.
  if (const std::string wrap = c.get("wrap_policy"); wrap == "block_and_linear") {
    if (version != 1) bad_cell(file, c, "wrap_policy", "block_and_linear only with fsdp_version 1");
    fsdp["wrap_policy"] = wrap;
  } else if (!wrap.empty() && wrap != "transformer_block") {
    bad_cell(file, c, "wrap_policy", "transformer_block or block_and_linear");
  }
  const bool hybrid =
      c.get("sharding") == "HYBRID_SHARD" || c.get("sharding") == "_HYBRID_SHARD_ZERO2";
  if (hybrid && !c.get("shard_group_size").empty()) {
    fsdp["shard_group_size"] = positive_int(file, c, "shard_group_size");
  } else if (const std::int64_t whole = c.get("sharding") == "NO_SHARD" ? 1 : gpus;
             gpus_given && !c.get("shard_group_size").empty() &&
             positive_int(file, c, "shard_group_size") != whole) {
    // Without hybrid sharding the group is fixed: every GPU (or one, unsharded).
    bad_cell(file, c, "shard_group_size",
             fmt::format("empty or {} with sharding {} (a group size of its own only with hybrid "
                         "sharding)",
                         whole, c.get("sharding")));
  }
  // The optional runtime column (configs/validation/README.md): empty or torch = PyTorch FSDP or
  // DDP as the other columns say; deepspeed-0.3 = DeepSpeed 0.3's ZeRO-3, which reads only the
  // modules' dtype (the FSDP columns above are checked all the same: a bad cell is a mistake).
  if (const std::string runtime = c.get("runtime"); runtime == "deepspeed-0.3") {
    // The scenario loader checks it for the other rows.
    if (boolean(file, c, "cpu_offload"))
      bad_cell(file, c, "cpu_offload", "false with runtime deepspeed-0.3 (not modelled)");
    if (boolean(file, c, "checkpoint_early_stop")) {
      bad_cell(file, c, "checkpoint_early_stop",
               "false or empty with runtime deepspeed-0.3 (its checkpoint re-runs whole blocks)");
    }
    // DeepSpeed 0.3 computes the gradients' norm every step whatever the config (stage3.py
    // get_grad_norm_direct), which the scenario models and refuses a key for: the cell, checked
    // above, describes the run either way.
    training.erase("clip_grad_norm");
    // The 2021 ZeRO-3 runs are Megatron-LM's GPT through DeepSpeedExamples' ZeRO-3 port
    // (Megatron-LM-v1.1.5-ZeRO3, gpt2_model.py, added 2021-03-08): GPT2Model computes the logits
    // with the word embeddings' weight (parallel_lm_logits) and, until 2021-04-18, registered it
    // as an external parameter of the model.
    model["tied_embeddings"] = true;
    // The port's examples/ds_zero_stage_3_config.json (commit 2cd968f2); its persistence
    // threshold key is misspelled (stage3_param_persitance_threshold), so DeepSpeed's default
    // holds. It sets overlap_comm (stage 3's default) and contiguous_gradients.
    constexpr double kPortMaxLiveParameters = 1e8;
    constexpr double kPortMaxReuseDistance = 1e8;
    constexpr double kPortPrefetchBucketSize = 2.5e7;
    constexpr double kPortReduceBucketSize = 5e7;
    out.document = {{"schema_version", 1},
                    {"name", one_line(c.get("case_id"))},
                    {"parallelism", "deepspeed_zero3"},
                    {"model", model},
                    {"hardware", hardware},
                    {"training", training},
                    {"fsdp", {{"param_dtype", c.get("param_dtype")}}},
                    {"deepspeed",
                     {{"register_external_embedding", true},
                      {"stage3_max_live_parameters", kPortMaxLiveParameters},
                      {"stage3_max_reuse_distance", kPortMaxReuseDistance},
                      {"stage3_prefetch_bucket_size", kPortPrefetchBucketSize},
                      {"reduce_bucket_size", kPortReduceBucketSize},
                      {"contiguous_gradients", true}}}};
    if (!allocator.empty()) out.document["allocator"] = allocator;
    return out;
  } else if (!runtime.empty() && runtime != "torch") {
    bad_cell(file, c, "runtime", "torch or deepspeed-0.3");
  }
  out.document = {{"schema_version", 1},  {"name", one_line(c.get("case_id"))},
                  {"model", model},       {"hardware", hardware},
                  {"training", training}, {"fsdp", fsdp}};
  if (!allocator.empty()) out.document["allocator"] = allocator;
  return out;
}

}  // namespace

CaseScenario scenario_for_case(const ValidationCase& c, const std::filesystem::path& file) {
  CaseScenario out = checked_case(c, file);
  if (out.document.is_object()) out.model = out.document["model"];
  if (!out.skip_reason.empty()) out.document = nullptr;
  return out;
}

std::string message_in_columns(const std::string& loader_message,
                               const std::filesystem::path& file) {
  // The scenario paths scenario_for_case fills from a single column.
  static const std::map<std::string, std::string, std::less<>> kColumnOf = {
      {"/allocator/memory_fraction", "memory_fraction"},
      {"/fsdp/backward_prefetch", "backward_prefetch"},
      {"/fsdp/cpu_offload", "cpu_offload"},
      {"/fsdp/float8_all_gather", "float8_all_gather"},
      {"/fsdp/forward_prefetch", "forward_prefetch"},
      {"/fsdp/last_unit_reshard_after_forward", "last_unit_reshard_after_forward"},
      {"/fsdp/limit_all_gathers", "limit_all_gathers"},
      {"/fsdp/param_dtype", "param_dtype"},
      {"/fsdp/precompute_float8_scale", "precompute_float8_scale"},
      {"/fsdp/reduce_dtype", "reduce_dtype"},
      {"/fsdp/shard_group_size", "shard_group_size"},
      {"/fsdp/sharding_strategy", "sharding"},
      {"/fsdp/version", "fsdp_version"},
      {"/fsdp/wrap_embedding_and_head", "wrap_embedding_and_head"},
      {"/fsdp/wrap_policy", "wrap_policy"},
      {"/hardware/node/gpus_per_node", "gpus_per_node"},
      {"/hardware/node/nic_Gbps_per_node", "inter_node_gbps_per_node"},
      {"/hardware/node/pcie_GBps", "pcie_GBps"},
      {"/hardware/preset", "gpu"},
      {"/model/causal_mask_buffer", "causal_mask_buffer"},
      {"/model/d_model", "d_model"},
      {"/model/family", "model_family"},
      {"/model/ffn_dim", "ffn_dim"},
      {"/model/max_seq_len", "seq_len"},
      {"/model/n_heads", "n_heads"},
      {"/model/n_kv_heads", "n_kv_heads"},
      {"/model/n_layers", "n_layers"},
      {"/model/vocab", "vocab"},
      {"/training/activation_checkpointing", "act_ckpt"},
      {"/training/autocast_dtype", "matmul_dtype"},
      {"/training/checkpoint_early_stop", "checkpoint_early_stop"},
      {"/training/compiled", "compiled"},
      {"/training/flash_attention", "attention"},
      {"/training/flash_kernel", "attention"},
      {"/training/float8_linear", "float8_linear"},
      {"/training/host_sync", "host_sync"},
      {"/training/logits_kept_by_loop", "logits_kept_by_loop"},
      {"/training/loss_chunks", "loss_chunks"},
      {"/training/loss", "loss"},
      {"/training/matmul_dtype", "matmul_dtype"},
      {"/training/micro_batch", "micro_batch"},
      {"/training/no_sync", "no_sync"},
      {"/training/optimizer", "optimizer"},
      {"/training/optimizer_impl", "optimizer_impl"},
      {"/training/param_storage_dtype", "param_storage_dtype"},
      {"/training/rms_norm", "rms_norm"},
      {"/training/seq_len", "seq_len"}};
  std::string_view message = loader_message;
  const std::string prefix = file.string() + ": ";
  if (message.substr(0, prefix.size()) != prefix) return loader_message;
  message.remove_prefix(prefix.size());
  const std::size_t end = message.find(": ");
  if (message.empty() || message.front() != '/' || end == std::string_view::npos)
    return std::string(message);
  const std::string_view path = message.substr(0, end);
  const std::string_view rest = message.substr(end + 2);
  if (const auto column = kColumnOf.find(path); column != kColumnOf.end())
    return fmt::format("column {}: {}", column->second, rest);
  // A check across keys of one object ("/model: n_kv_heads (5) must divide n_heads (32)"): the
  // columns of the keys it names, in the order it names them.
  const auto is_name_char = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_';
  };
  std::map<std::size_t, std::string> named;  // position in the message -> column
  for (const auto& [key, column] : kColumnOf) {
    if (key.size() <= path.size() + 1 || key.compare(0, path.size(), path) != 0 ||
        key[path.size()] != '/')
      continue;
    const std::string_view leaf = std::string_view(key).substr(key.rfind('/') + 1);
    for (std::size_t at = rest.find(leaf); at != std::string_view::npos;
         at = rest.find(leaf, at + 1)) {
      const bool whole = (at == 0 || !is_name_char(rest[at - 1])) &&
                         (at + leaf.size() == rest.size() || !is_name_char(rest[at + leaf.size()]));
      if (whole) {
        named.emplace(at, column);
        break;
      }
    }
  }
  std::vector<std::string> columns;
  for (const auto& [at, column] : named) {
    if (std::find(columns.begin(), columns.end(), column) == columns.end())
      columns.push_back(column);
  }
  if (columns.empty()) return std::string(message);
  return fmt::format("column{} {}: {}", columns.size() == 1 ? "" : "s", fmt::join(columns, ", "),
                     rest);
}

}  // namespace fsdpsim::app
