#include "calibrate/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace fsdpsim::calibrate {
namespace {

// Identity of a series for merging (everything but its points and provenance text).
auto series_key(const CollectiveSeries& s) {
  return std::make_tuple(s.op, s.dtype, s.ranks, s.ranks_per_node, s.concurrent_with.has_value(),
                         s.concurrent_with.value_or(hardware::Collective::kAllGather), s.in_place,
                         s.origin);
}

Seconds median_of(std::vector<Seconds> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) * 0.5;
}

std::string joined(const std::string& a, const std::string& b) {
  if (a.empty() || a == b) return b.empty() ? a : b;
  if (b.empty()) return a;
  return a + "; " + b;
}

}  // namespace

std::vector<std::string> merge_series(CalibrationProfile& profile,
                                      std::vector<CollectiveSeries> series) {
  std::vector<CollectiveSeries> all = std::move(profile.collectives);
  for (CollectiveSeries& s : series) all.push_back(std::move(s));
  std::vector<CollectiveSeries> merged;
  std::map<decltype(series_key(all.front())), std::size_t> index;
  std::vector<std::map<std::int64_t, std::vector<CollectivePoint>>> samples;
  for (CollectiveSeries& s : all) {
    const auto key = series_key(s);
    auto [it, inserted] = index.try_emplace(key, merged.size());
    if (inserted) {
      CollectiveSeries head = s;
      head.points.clear();
      merged.push_back(std::move(head));
      samples.emplace_back();
    } else {
      CollectiveSeries& m = merged[it->second];
      m.source = joined(m.source, s.source);
      m.derivation = joined(m.derivation, s.derivation);
      if (m.group.empty()) m.group = s.group;
    }
    for (const CollectivePoint& p : s.points) samples[it->second][p.bytes.value()].push_back(p);
  }
  std::vector<std::string> notes;
  for (std::size_t i = 0; i < merged.size(); ++i) {
    double spread = 1.0;
    std::int64_t spread_bytes = 0;
    for (auto& [bytes, points] : samples[i]) {
      const auto [fastest, slowest] = std::minmax_element(
          points.begin(), points.end(),
          [](const CollectivePoint& a, const CollectivePoint& b) { return a.median < b.median; });
      if (fastest->median.value() > 0.0 &&
          slowest->median.value() / fastest->median.value() > spread) {
        spread = slowest->median.value() / fastest->median.value();
        spread_bytes = bytes;
      }
      CollectivePoint out;
      out.bytes = Bytes(bytes);
      std::vector<Seconds> medians;
      for (const CollectivePoint& p : points) {
        medians.push_back(p.median);
        out.repeats += p.repeats;
        const Seconds lo = p.min.value_or(p.median);
        const Seconds hi = p.max.value_or(p.median);
        if (points.size() > 1 || p.min) out.min = out.min ? std::min(*out.min, lo) : lo;
        if (points.size() > 1 || p.max) out.max = out.max ? std::max(*out.max, hi) : hi;
      }
      out.median = median_of(std::move(medians));
      merged[i].points.push_back(out);
    }
    if (spread >= kRepeatSpreadNoted) {
      const CollectiveSeries& m = merged[i];
      notes.push_back(fmt::format(
          "{} {} on {} ranks ({} per node): the logs' times of one size are up to {:.2f}x apart "
          "(at {} bytes); the profile keeps their median. Runs this far apart are no timer "
          "noise: logs of another network state, NCCL setting or cluster mixed into one",
          collective_name(m.op), dtype_name(m.dtype), m.ranks, m.ranks_per_node, spread,
          spread_bytes));
    }
  }
  profile.collectives = std::move(merged);
  return notes;
}

}  // namespace fsdpsim::calibrate
