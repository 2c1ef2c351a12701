#include "calibrate/profile.hpp"

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

void merge_series(CalibrationProfile& profile, std::vector<CollectiveSeries> series) {
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
  for (std::size_t i = 0; i < merged.size(); ++i) {
    for (auto& [bytes, points] : samples[i]) {
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
  }
  profile.collectives = std::move(merged);
}

}  // namespace fsdpsim::calibrate
