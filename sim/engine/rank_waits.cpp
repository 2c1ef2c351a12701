#include "sim/engine/rank_waits.hpp"

#include <algorithm>
#include <utility>

namespace fsdpsim::engine {

std::vector<SimTime> rank_waits(const Program& program, const RankClasses& classes,
                                const std::vector<Timeline>& timelines, OpId first_op,
                                SimTime start, SimTime end) {
  std::vector<SimTime> out;
  std::vector<std::pair<SimTime, SimTime>> waiting;
  for (std::size_t k = 0; k < classes.count(); ++k) {
    const Timeline& mine = timelines[k];
    waiting.clear();
    const auto wait = [&](SimTime from, SimTime to) {
      from = std::max(from, start);
      to = std::min(to, end);
      if (to > from) waiting.emplace_back(from, to);
    };
    for (OpId op = first_op; op < program.ops.size(); ++op) {
      const Op& o = program.ops[op];
      if (o.kind != OpKind::kCommunication) continue;
      SimTime transfer;
      for (const std::int32_t p : classes.peers[static_cast<std::size_t>(o.channel)][k])
        transfer = std::max(transfer, timelines[static_cast<std::size_t>(p)].ops[op].start);
      wait(mine.ops[op].start, transfer);
      wait(mine.transferred[op], mine.ops[op].end);
    }
    std::sort(waiting.begin(), waiting.end());
    SimTime waited = end - std::max(mine.makespan, start);
    SimTime covered = start;  // the union of the waits so far ends here
    for (const auto& [from, to] : waiting) {
      if (to <= covered) continue;
      waited = waited + (to - std::max(from, covered));
      covered = to;
    }
    out.push_back(waited);
  }
  return out;
}

}  // namespace fsdpsim::engine
