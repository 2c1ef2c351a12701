#include "calibrate/harness/plan_file.hpp"

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
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
  while (std::getline(in, line)) {
    ++number;
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream stream(line);
    std::vector<std::string> words;
    for (std::string w; stream >> w;) words.push_back(w);
    if (words.empty()) continue;
    // Every number whole and in range, every name known, nothing after the last field.
    const auto integer = [&words](std::size_t i, std::int64_t max) {
      return whole_integer(words[i], 1, max);
    };
    bool ok = false;
    if (words[0] == "shard_group" && words.size() == 2) {
      if (const auto f = integer(1, kMaxRanks)) {
        plan.shard_groups.push_back(static_cast<std::int32_t>(*f));
        ok = true;
      }
    } else if (words[0] == "gemm" && words.size() == 7 &&
               one_of(words[1], {"bf16", "fp16", "fp32", "tf32", "fp8"})) {
      const auto m = integer(2, kMaxGemmDimension);
      const auto n = integer(3, kMaxGemmDimension);
      const auto k = integer(4, kMaxGemmDimension);
      const auto batch = integer(5, kMaxGemmDimension);
      if (m && n && k && batch && integer(6, std::numeric_limits<std::int64_t>::max())) {
        plan.gemms.push_back(PlannedGemm{words[1], *m, *n, *k, *batch});
        ok = true;
      }
    } else if (words[0] == "collective" && words.size() == 6 &&
               one_of(words[1], {"all_gather", "reduce_scatter", "all_reduce"})) {
      const auto ranks = integer(2, kMaxRanks);
      const auto per_node = integer(3, kMaxRanks);
      const auto bytes = integer(4, kMaxBytes);
      if (ranks && per_node && *ranks % *per_node == 0 && bytes &&
          integer(5, std::numeric_limits<std::int64_t>::max())) {
        plan.collectives.push_back(PlannedCollective{words[1], static_cast<std::int32_t>(*ranks),
                                                     static_cast<std::int32_t>(*per_node), *bytes});
        ok = true;
      }
    }
    if (!ok) {
      throw UsageError(cat(path, ":", number,
                           ": expected 'shard_group F', 'gemm DTYPE M N K BATCH COUNT' (DTYPE "
                           "bf16, fp16, fp32, tf32 or fp8) or 'collective OP RANKS RANKS_PER_NODE "
                           "BYTES COUNT' (OP all_gather, reduce_scatter or all_reduce; "
                           "RANKS_PER_NODE dividing RANKS), positive whole numbers (fsdpsim "
                           "calibrate plan -o writes this file)"));
    }
  }
  return plan;
}

}  // namespace fsdpsim::harness
