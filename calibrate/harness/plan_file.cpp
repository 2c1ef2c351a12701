#include "calibrate/harness/plan_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {

namespace {

constexpr std::uintmax_t kMaxPlanBytes = std::uintmax_t{64} << 20;  // a plan lists a few hundred

bool one_of(const std::string& word, std::initializer_list<const char*> choices) {
  for (const char* c : choices) {
    if (word == c) return true;
  }
  return false;
}

}  // namespace

Plan read_plan(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw UsageError(cat("--plan: ", path,
                         " does not exist (fsdpsim calibrate plan SCENARIO -o PATH writes one)"));
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UsageError(cat("--plan: ", path,
                         " is not a regular file (fsdpsim calibrate plan -o "
                         "writes one)"));
  }
  if (std::filesystem::file_size(path, ec) > kMaxPlanBytes)
    throw UsageError(cat("--plan: ", path,
                         " is larger than 64 MiB; a plan lists a few hundred "
                         "lines"));
  std::ifstream in(path);
  if (!in) throw UsageError(cat("--plan: cannot open ", path));
  Plan plan;
  std::string line;
  int number = 0;
  // A plan merged from several scenarios' plans repeats shapes; each is measured once.
  std::set<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>> gemms;
  std::set<std::tuple<std::string, std::int32_t, std::int32_t, std::int64_t>> collectives;
  while (std::getline(in, line)) {
    ++number;
    // Text only: a control character or a byte that is not UTF-8 would reach the messages
    // below that quote the line (a NUL cut them short).
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (const std::optional<ControlCharacter> bad = find_non_text(line, "\t")) {
      throw UsageError(cat(path, ":", number, ":", bad->offset + 1, ": expected text, found ",
                           bad->name, " (fsdpsim calibrate plan -o writes this file)"));
    }
    // "# fsdpsim calibration plan v1: ..." heads what `fsdpsim calibrate plan` writes; another
    // version is a format this harness does not know, read wrongly if read at all.
    constexpr std::string_view kHeader = "# fsdpsim calibration plan v";
    if (line.starts_with(kHeader) && !line.substr(kHeader.size()).starts_with("1:")) {
      throw UsageError(cat(path, ":", number, ": a plan of another format version ('",
                           line.substr(0, line.find(':')),
                           "'); this harness reads v1: use the fsdpsim-calibrate of the fsdpsim "
                           "that wrote it"));
    }
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream stream(line);
    std::vector<std::string> words;
    for (std::string w; stream >> w;) words.push_back(w);
    if (words.empty()) continue;
    const auto fail = [&](const std::string& why) {
      throw UsageError(cat(path, ":", number, ": ", why,
                           " (fsdpsim calibrate plan -o writes this file: 'shard_group F', "
                           "'gemm DTYPE M N K BATCH COUNT' or 'collective OP RANKS "
                           "RANKS_PER_NODE BYTES COUNT')"));
    };
    // Every number whole and in range, every name known, nothing after the last field.
    const auto integer = [&](std::size_t i, std::int64_t max, const char* field) {
      const auto v = whole_integer(words[i], 1, max);
      if (!v) fail(cat(field, " is '", words[i], "', expected a whole number in [1, ", max, "]"));
      return *v;
    };
    const auto fields = [&](std::size_t expected) {
      if (words.size() != expected) {
        fail(cat("'", words[0], "' takes ", expected - 1, " fields, found ", words.size() - 1));
      }
    };
    if (words[0] == "shard_group") {
      fields(2);
      const auto f = static_cast<std::int32_t>(integer(1, kMaxRanks, "F"));
      if (std::find(plan.shard_groups.begin(), plan.shard_groups.end(), f) ==
          plan.shard_groups.end())
        plan.shard_groups.push_back(f);
    } else if (words[0] == "gemm") {
      fields(7);
      if (!one_of(words[1], {"bf16", "fp16", "fp32", "tf32", "fp8"}))
        fail(cat("DTYPE is '", words[1], "', expected bf16, fp16, fp32, tf32 or fp8"));
      const PlannedGemm g{words[1], integer(2, kMaxGemmDimension, "M"),
                          integer(3, kMaxGemmDimension, "N"), integer(4, kMaxGemmDimension, "K"),
                          integer(5, kMaxGemmDimension, "BATCH")};
      (void)integer(6, std::numeric_limits<std::int64_t>::max(), "COUNT");
      // Each operand's elements (M x K, K x N, M x N, times BATCH) within 2^40, far past any
      // GPU's memory, so that counting them cannot overflow.
      constexpr std::int64_t kMaxOperandElements = std::int64_t{1} << 40;
      for (const std::int64_t area : {g.m * g.k, g.k * g.n, g.m * g.n}) {
        if (area > kMaxOperandElements / g.batch) {
          fail(cat("an operand of ", g.m, " x ", g.n, " x ", g.k, " x ", g.batch,
                   " holds more than 2^40 elements, past any GPU's memory"));
        }
      }
      if (gemms.emplace(g.dtype, g.m, g.n, g.k, g.batch).second) plan.gemms.push_back(g);
    } else if (words[0] == "collective") {
      fields(6);
      if (!one_of(words[1], {"all_gather", "reduce_scatter", "all_reduce"}))
        fail(cat("OP is '", words[1], "', expected all_gather, reduce_scatter or all_reduce"));
      const auto ranks = static_cast<std::int32_t>(integer(2, kMaxRanks, "RANKS"));
      const auto per_node = static_cast<std::int32_t>(integer(3, kMaxRanks, "RANKS_PER_NODE"));
      if (ranks % per_node != 0)
        fail(cat("RANKS_PER_NODE ", per_node, " does not divide RANKS ", ranks));
      const std::int64_t bytes = integer(4, kMaxBytes, "BYTES");
      (void)integer(5, std::numeric_limits<std::int64_t>::max(), "COUNT");
      if (collectives.emplace(words[1], ranks, per_node, bytes).second)
        plan.collectives.push_back(PlannedCollective{words[1], ranks, per_node, bytes});
    } else {
      fail(cat("'", words[0], "' is not shard_group, gemm or collective"));
    }
  }
  // A plan of shard groups alone adds group shapes to the generic sweeps; one of nothing is a
  // failed `fsdpsim calibrate plan`, not a request for the generic run (leave --plan out).
  if (plan.shard_groups.empty() && plan.gemms.empty() && plan.collectives.empty()) {
    throw UsageError(cat("--plan: ", path,
                         " lists nothing (fsdpsim calibrate plan -o writes shard groups, GEMMs and "
                         "collectives); leave --plan out to measure the generic grid alone"));
  }
  return plan;
}

std::string unmeasured_plan_layouts(const Plan& plan, const std::vector<GroupLayout>& measured) {
  std::set<std::pair<std::int32_t, std::int32_t>> missing;
  for (const PlannedCollective& c : plan.collectives) {
    const bool found = std::any_of(measured.begin(), measured.end(), [&](const GroupLayout& g) {
      return g.ranks == c.ranks && g.ranks_per_node == c.ranks_per_node;
    });
    if (!found) missing.emplace(c.ranks, c.ranks_per_node);
  }
  if (missing.empty()) return "";
  std::string layouts;
  for (const auto& [ranks, per_node] : missing) {
    layouts += cat(layouts.empty() ? "" : ", ", ranks, " ranks (", per_node, " per node)");
  }
  return cat("the plan's collectives over ", layouts,
             " match no group this job measures: their curves are not in this profile; run the "
             "harness on the scenario's node layout (or add --shard-groups) to price them");
}

}  // namespace fsdpsim::harness
