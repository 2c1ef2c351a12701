#include "calibrate/harness/plan_file.hpp"

#include <fstream>
#include <sstream>

#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {

Plan read_plan(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(cat("--plan: cannot open ", path));
  Plan plan;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;
    bool ok = false;
    if (kind == "shard_group") {
      std::int32_t f = 0;
      ok = static_cast<bool>(words >> f) && f > 0;
      if (ok) plan.shard_groups.push_back(f);
    } else if (kind == "gemm") {
      PlannedGemm g;
      std::int64_t count = 0;
      ok = static_cast<bool>(words >> g.dtype >> g.m >> g.n >> g.k >> g.batch >> count) &&
           g.m > 0 && g.n > 0 && g.k > 0 && g.batch > 0;
      if (ok) plan.gemms.push_back(g);
    } else if (kind == "collective") {
      PlannedCollective c;
      std::int64_t count = 0;
      ok = static_cast<bool>(words >> c.collective >> c.ranks >> c.ranks_per_node >> c.bytes >>
                             count) &&
           c.bytes > 0;
      if (ok) plan.collectives.push_back(c);
    }
    if (!ok) {
      throw UsageError(cat(path, ":", number,
                           ": expected 'shard_group F', 'gemm DTYPE M N K BATCH COUNT' or "
                           "'collective OP RANKS RANKS_PER_NODE BYTES COUNT' (fsdpsim calibrate "
                           "plan -o writes this file)"));
    }
  }
  return plan;
}

}  // namespace fsdpsim::harness
