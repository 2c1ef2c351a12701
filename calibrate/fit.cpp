// Fitting (fit.hpp): isotonic regression in log-time, least-squares alpha-beta asymptotes,
// leave-one-out interpolation error.
#include "calibrate/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace fsdpsim::calibrate {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Pool adjacent violators: the non-decreasing sequence closest to `y` in least squares.
std::vector<double> isotonic(const std::vector<double>& y) {
  struct Block {
    double sum = 0.0;
    std::size_t count = 0;
    [[nodiscard]] double mean() const { return sum / static_cast<double>(count); }
  };
  std::vector<Block> blocks;
  for (const double v : y) {
    blocks.push_back(Block{v, 1});
    while (blocks.size() >= 2 && blocks[blocks.size() - 2].mean() > blocks.back().mean()) {
      const Block last = blocks.back();
      blocks.pop_back();
      blocks.back().sum += last.sum;
      blocks.back().count += last.count;
    }
  }
  std::vector<double> out;
  for (const Block& b : blocks) out.insert(out.end(), b.count, b.mean());
  return out;
}

// Least-squares slope of t over s for points [begin, end).
double ls_slope(const std::vector<double>& s, const std::vector<double>& t, std::size_t begin,
                std::size_t end) {
  const auto n = static_cast<double>(end - begin);
  double ms = 0.0;
  double mt = 0.0;
  for (std::size_t i = begin; i < end; ++i) {
    ms += s[i];
    mt += t[i];
  }
  ms /= n;
  mt /= n;
  double cov = 0.0;
  double var = 0.0;
  for (std::size_t i = begin; i < end; ++i) {
    cov += (s[i] - ms) * (t[i] - mt);
    var += (s[i] - ms) * (s[i] - ms);
  }
  return var > 0.0 ? cov / var : 0.0;
}

std::string describe(const CollectiveSeries& s) {
  return fmt::format(
      "{} {} on {} ranks ({} per node){}{}", collective_name(s.op), dtype_name(s.dtype), s.ranks,
      s.ranks_per_node, s.in_place ? ", in place" : "",
      s.concurrent_with ? fmt::format(", alongside {}", collective_name(*s.concurrent_with)) : "");
}

hardware::CollectiveCurveKey key_of(const CollectiveSeries& s) {
  return hardware::CollectiveCurveKey{s.op, s.dtype, s.ranks, s.ranks_per_node};
}

// Rank 0's time over each rank's, checked and summarized; `what` names the time in messages.
SpeedSpread speeds_of(const std::vector<double>& seconds, const std::vector<std::string>& hosts,
                      const char* what, const char* key, std::vector<double>& speeds) {
  speeds.clear();
  SpeedSpread out;
  for (std::size_t r = 0; r < seconds.size(); ++r) {
    const double speed = seconds.front() / seconds[r];
    if (speed < hardware::kSlowestRankSpeed || speed > 1.0 / hardware::kSlowestRankSpeed) {
      throw InputError(fmt::format(
          "/rank_speeds/ranks/{}/{}: rank {} took {:.4g} times rank 0's {}; more than {:g} "
          "times slower or faster is a broken node or a time in the wrong unit",
          r, key, r, 1.0 / speed, what, 1.0 / hardware::kSlowestRankSpeed));
    }
    speeds.push_back(speed);
    if (speed < out.slowest || r == 0) {
      out.slowest = speed;
      out.slowest_rank = static_cast<std::int32_t>(r);
      out.slowest_host = hosts[r];
    }
    out.fastest = std::max(out.fastest, speed);
  }
  out.median = median(speeds);
  return out;
}

// Each rank's short time of the held GEMM over its held time, checked and summarized. Every rank
// must have a short time, as rank 0 has.
SustainedFraction sustained_fractions(const RankSpeedMeasurement& measured) {
  std::vector<double> fractions;
  SustainedFraction out;
  for (std::size_t r = 0; r < measured.ranks.size(); ++r) {
    const RankTiming& t = measured.ranks[r];
    if (!t.gemm_short) {
      throw InputError(fmt::format(
          "/rank_speeds/ranks/{}/gemm_short_us: missing, where rank 0 has one (on every rank or "
          "on none)",
          r));
    }
    const double fraction = t.gemm_short->value() / t.gemm.value();
    if (fraction < hardware::kLowestSustainedGemmFraction ||
        fraction > hardware::kHighestSustainedGemmFraction) {
      throw InputError(fmt::format(
          "/rank_speeds/ranks/{}/gemm_short_us: rank {} ran the held GEMM at {:.4g} of its short "
          "rate; expected {:g} to {:g} (under load a GPU keeps less, or as much within timer "
          "noise: a held time much shorter than the short one means the two were swapped; one "
          "over 4 times as long, a broken GPU or a time in the wrong unit)",
          r, r, fraction, hardware::kLowestSustainedGemmFraction,
          hardware::kHighestSustainedGemmFraction));
    }
    fractions.push_back(fraction);
    if (fraction < out.lowest || r == 0) {
      out.lowest = fraction;
      out.lowest_rank = static_cast<std::int32_t>(r);
    }
    out.highest = r == 0 ? fraction : std::max(out.highest, fraction);
  }
  out.rank0 = fractions.front();
  out.median = median(fractions);
  return out;
}

}  // namespace

hardware::CollectiveCurve fit_curve(const std::vector<CollectivePoint>& points, CurveFit& fit) {
  std::map<std::int64_t, std::vector<double>> by_size;
  for (const CollectivePoint& p : points) {
    if (p.bytes.value() <= 0)
      throw InputError(
          fmt::format("a measurement of {} bytes (sizes must be > 0)", p.bytes.value()));
    if (!(p.median.value() > 0.0) || !std::isfinite(p.median.value())) {
      throw InputError(fmt::format("the measurement at {} bytes has time {} s (must be > 0)",
                                   p.bytes.value(), p.median.value()));
    }
    by_size[p.bytes.value()].push_back(p.median.value());
  }
  if (by_size.size() < 2) {
    throw InputError(fmt::format("{} distinct size(s); a curve needs at least 2", by_size.size()));
  }
  std::vector<double> sizes;
  std::vector<double> measured;
  for (auto& [bytes, times] : by_size) {
    sizes.push_back(static_cast<double>(bytes));
    measured.push_back(median(times));
    const auto [fastest, slowest] = std::minmax_element(times.begin(), times.end());
    if (*slowest / *fastest > fit.repeat_spread) {
      fit.repeat_spread = *slowest / *fastest;
      fit.repeat_spread_bytes = Bytes(bytes);
    }
  }
  std::vector<double> log_t;
  for (const double t : measured) log_t.push_back(std::log(t));
  const std::vector<double> fitted_log = isotonic(log_t);
  // Sizes the regression did not pool keep their measured time exactly (exp(log(t)) may not).
  // A pooled group's exp(mean) can land an ulp above the next size's own time where the two are
  // equal in log space: the times stay non-decreasing all the same (times 32, 18, 24 us).
  std::vector<double> fitted;
  for (std::size_t i = 0; i < fitted_log.size(); ++i) {
    const double t = fitted_log[i] == log_t[i] ? measured[i] : std::exp(fitted_log[i]);
    fitted.push_back(fitted.empty() ? t : std::max(t, fitted.back()));
  }

  const std::size_t n = sizes.size();
  fit.points = n;
  fit.min_bytes = Bytes(static_cast<std::int64_t>(sizes.front()));
  fit.max_bytes = Bytes(static_cast<std::int64_t>(sizes.back()));
  fit.max_knot_error = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double error = std::fabs(fitted[i] - measured[i]) / measured[i];
    if (error > fit.max_knot_error) {
      fit.max_knot_error = error;
      fit.worst_knot_bytes = Bytes(static_cast<std::int64_t>(sizes[i]));
    }
  }
  // Leave one out: knot i from knots i-1 and i+1 (log-log line).
  fit.max_leave_one_out_error = 0.0;
  for (std::size_t i = 1; i + 1 < n; ++i) {
    const double x = std::log(sizes[i] / sizes[i - 1]) / std::log(sizes[i + 1] / sizes[i - 1]);
    const double predicted = fitted[i - 1] * std::exp(x * std::log(fitted[i + 1] / fitted[i - 1]));
    fit.max_leave_one_out_error =
        std::max(fit.max_leave_one_out_error, std::fabs(predicted - fitted[i]) / fitted[i]);
  }
  // Asymptotes.
  const std::size_t m = std::min(kAsymptotePoints, n);
  const double max_small = fitted.front() / sizes.front();
  const double small = std::clamp(ls_slope(sizes, fitted, 0, m), 0.0, max_small);
  double large = ls_slope(sizes, fitted, n - m, n);
  if (!(large > 0.0)) large = fitted.back() / sizes.back();

  std::vector<hardware::CurveKnot> knots;
  for (std::size_t i = 0; i < n; ++i) {
    knots.push_back(
        hardware::CurveKnot{Bytes(static_cast<std::int64_t>(sizes[i])), Seconds(fitted[i])});
  }
  hardware::CollectiveCurve curve(std::move(knots), small, large);
  fit.latency = curve.latency();
  return curve;
}

hardware::AllocationCosts fit_allocation_costs(const std::vector<AllocationTiming>& timings) {
  std::vector<double> gib;
  std::vector<double> malloc_s;
  std::vector<double> free_s;
  for (const AllocationTiming& t : timings) {
    if (t.bytes.value() <= 0 || !(t.malloc.value() > 0.0) || !(t.free.value() > 0.0)) {
      throw InputError(fmt::format(
          "memory.allocations: {} bytes timed at {} s (cudaMalloc) and {} s (cudaFree); sizes "
          "and times must be > 0",
          t.bytes.value(), t.malloc.value(), t.free.value()));
    }
    gib.push_back(static_cast<double>(t.bytes.value()) / static_cast<double>(1LL << 30));
    malloc_s.push_back(t.malloc.value());
    free_s.push_back(t.free.value());
  }
  if (gib.empty() ||
      *std::min_element(gib.begin(), gib.end()) == *std::max_element(gib.begin(), gib.end())) {
    throw InputError(fmt::format(
        "/memory/allocations: expected timings at two sizes or more to fit a line (cost = fixed "
        "+ per GiB), found {} timing(s) of {}",
        timings.size(),
        timings.empty() ? std::string("no size")
                        : fmt::format("{} bytes only", timings.front().bytes.value())));
  }
  const auto line = [&gib](const std::vector<double>& t) {
    const double slope = std::max(0.0, ls_slope(gib, t, 0, gib.size()));
    double mean_gib = 0.0;
    double mean_t = 0.0;
    for (std::size_t i = 0; i < gib.size(); ++i) {
      mean_gib += gib[i];
      mean_t += t[i];
    }
    mean_gib /= static_cast<double>(gib.size());
    mean_t /= static_cast<double>(gib.size());
    return hardware::DeviceCallCost{Seconds(std::max(0.0, mean_t - slope * mean_gib)),
                                    Seconds(slope)};
  };
  return hardware::AllocationCosts{line(malloc_s), line(free_s)};
}

RankSpeedFit fit_rank_speeds(const RankSpeedMeasurement& measured, std::vector<double>& gpu,
                             std::vector<double>& host) {
  if (measured.ranks.empty()) throw InputError("rank_speeds: no rank was timed");
  std::vector<double> gemm_s;
  std::vector<double> launch_s;
  std::vector<std::string> hosts;
  for (const RankTiming& t : measured.ranks) {
    gemm_s.push_back(t.gemm.value());
    if (t.launch) launch_s.push_back(t.launch->value());
    hosts.push_back(t.host);
  }
  RankSpeedFit out;
  out.ranks = measured.ranks.size();
  out.gpu = speeds_of(gemm_s, hosts, "time on the held GEMM", "gemm_us", gpu);
  out.rank0_tflops = gemm_flops(measured.shape) / gemm_s.front() / 1e12;
  host.clear();
  if (launch_s.size() == gemm_s.size()) {
    // Each rank's own time is checked as the GEMM times are, before the host medians would hide
    // one far off (a rank's time in the wrong unit).
    std::vector<double> each_rank;
    (void)speeds_of(launch_s, hosts, "time per kernel launch", "launch_us", each_rank);
    // A host is one machine: its ranks share its CPUs, so each rank takes its host's median
    // (the slowest of many ranks' noisy medians would be slower than any host is).
    std::map<std::string, std::vector<double>> by_host;
    for (std::size_t r = 0; r < hosts.size(); ++r) {
      if (!hosts[r].empty()) by_host[hosts[r]].push_back(launch_s[r]);
    }
    for (std::size_t r = 0; r < hosts.size(); ++r) {
      if (!hosts[r].empty()) launch_s[r] = median(by_host[hosts[r]]);
    }
    out.host = speeds_of(launch_s, hosts, "time per kernel launch", "launch_us", host);
    out.rank0_launch = Seconds(launch_s.front());
  }
  if (measured.ranks.front().gemm_short) out.sustained = sustained_fractions(measured);
  return out;
}

ProfileFit fit_profile(const CalibrationProfile& profile, const std::string& name) {
  ProfileFit out;
  out.curves = std::make_shared<hardware::CalibratedCurves>(name);
  out.curves->set_complete(profile.complete);

  // Candidates per curve key: measured before derived (a measurement of the other placement is
  // closer to the truth than a rule's), then out-of-place before in-place.
  using Rank = std::tuple<bool, bool>;  // (derived, in_place): smaller is preferred
  std::map<hardware::CollectiveCurveKey, std::map<Rank, std::vector<const CollectiveSeries*>>>
      candidates;
  std::vector<const CollectiveSeries*> concurrent;
  for (const CollectiveSeries& s : profile.collectives) {
    if (s.ranks < 2) {
      out.skipped.push_back(
          SkippedSeries{describe(s), "a one-rank collective costs nothing (NCCL copies locally)"});
      continue;
    }
    if (s.concurrent_with) {
      concurrent.push_back(&s);
      continue;
    }
    candidates[key_of(s)][Rank{s.origin == Origin::kDerived, s.in_place}].push_back(&s);
  }
  for (const auto& [key, ranked] : candidates) {
    std::optional<Rank> fitted;
    for (const auto& [rank, series] : ranked) {
      std::vector<CollectivePoint> points;
      for (const CollectiveSeries* s : series)
        points.insert(points.end(), s->points.begin(), s->points.end());
      if (fitted) {
        out.skipped.push_back(SkippedSeries{
            describe(*series.front()),
            fmt::format("a preferred series ({}, {}) of the same collective and group was fitted",
                        std::get<1>(*fitted) ? "in-place" : "out-of-place",
                        std::get<0>(*fitted) ? "derived" : "measured")});
        continue;
      }
      CurveFit fit;
      fit.key = key;
      fit.group = series.front()->group;
      fit.origin = series.front()->origin;
      try {
        hardware::CollectiveCurve curve = fit_curve(points, fit);
        const double factor = busbw_factor(key.op, key.ranks);
        for (const hardware::CurveKnot& k : curve.knots()) {
          fit.peak_busbw_GBps =
              std::max(fit.peak_busbw_GBps,
                       factor * static_cast<double>(k.bytes.value()) / k.time.value() / 1e9);
        }
        fit.asymptotic_busbw_GBps = factor * curve.asymptotic_algbw().value() / 1e9;
        fit.extrapolates = curve.reaches_bandwidth_regime();
        fit.extrapolates_down = curve.reaches_latency_regime();
        out.curves->add_collective(key, std::move(curve));
        out.collectives.push_back(fit);
        fitted = rank;
      } catch (const InputError& e) {
        out.skipped.push_back(SkippedSeries{describe(*series.front()), e.what()});
      }
    }
  }
  for (const CollectiveSeries* s : concurrent) {
    const auto it = out.curves->collectives().find(key_of(*s));
    if (it == out.curves->collectives().end()) {
      out.skipped.push_back(
          SkippedSeries{describe(*s), "no curve of the collective alone to compare with"});
      continue;
    }
    std::vector<double> ratios;
    for (const CollectivePoint& p : s->points) {
      if (p.bytes.value() > 0 && p.median.value() > 0.0)
        ratios.push_back(p.median.value() / it->second.time(p.bytes).value());
    }
    if (ratios.empty()) continue;
    out.interference.push_back(
        InterferenceFit{key_of(*s), *s->concurrent_with, median(ratios), ratios.size()});
  }

  // GEMMs: one measurement per (dtype, shape), the median of duplicates. The slowdown under
  // NCCL is over the GEMM alone timed just before it where the profile has that (the same
  // clocks and temperature), else over the gemm phase's time.
  struct GemmTimes {
    std::vector<double> alone;
    std::vector<double> under;
    std::vector<double> slowdowns;
  };
  std::map<hardware::GemmKey, GemmTimes> gemms;
  // The GEMM that ran fastest alongside NCCL against alone, for the message below.
  std::size_t fastest = 0;
  double fastest_ratio = 0.0;
  for (std::size_t i = 0; i < profile.gemms.size(); ++i) {
    const GemmPoint& g = profile.gemms[i];
    if (!g.median_under_nccl || !(g.median.value() > 0.0)) continue;
    // Against the time the check below takes: alone beside NCCL's run where measured.
    const double alone =
        g.median_alone_beside_nccl ? g.median_alone_beside_nccl->value() : g.median.value();
    if (!(alone > 0.0)) continue;
    const double ratio = g.median_under_nccl->value() / alone;
    if (fastest_ratio == 0.0 || ratio < fastest_ratio) {
      fastest = i;
      fastest_ratio = ratio;
    }
  }
  for (const GemmPoint& g : profile.gemms) {
    if (!(g.median.value() > 0.0)) {
      throw InputError(fmt::format("GEMM {}x{}x{} {} has time {} s (must be > 0)", g.shape.m,
                                   g.shape.n, g.shape.k, dtype_name(g.dtype), g.median.value()));
    }
    GemmTimes& t =
        gemms[hardware::GemmKey{g.dtype, g.shape.m, g.shape.n, g.shape.k, g.shape.batch}];
    t.alone.push_back(g.median.value());
    if (!g.median_under_nccl) continue;
    t.under.push_back(g.median_under_nccl->value());
    if (g.median_alone_beside_nccl) {
      t.slowdowns.push_back(g.median_under_nccl->value() / g.median_alone_beside_nccl->value());
    }
  }
  std::vector<double> slowdowns;
  for (const auto& [key, times] : gemms) {
    hardware::GemmMeasurement m;
    m.time = Seconds(median(times.alone));
    if (!times.under.empty()) {
      m.time_under_nccl = Seconds(median(times.under));
      slowdowns.push_back(times.slowdowns.size() == times.under.size()
                              ? median(times.slowdowns)
                              : m.time_under_nccl->value() / m.time.value());
    }
    out.curves->add_gemm(key, m);
  }
  out.gemms = gemms.size();
  if (!slowdowns.empty()) {
    // Sharing the SMs and HBM with NCCL cannot speed a GEMM up; beyond timer noise, a faster
    // time alongside NCCL means the two columns were swapped or the run was not what it says.
    if (const double m = median(slowdowns); m < 1.0 / kMaxGemmSpeedupUnderNccl) {
      const GemmPoint& g = profile.gemms[fastest];
      throw InputError(fmt::format(
          "gemms: the GEMMs ran x{:.3f} as long alongside NCCL as alone (median of {} shapes; "
          "/gemms/{}, {}x{}x{} {}, ran x{:.3f}); under_nccl_time_us cannot be shorter than "
          "{}",
          m, slowdowns.size(), fastest, g.shape.m, g.shape.n, g.shape.k, dtype_name(g.dtype),
          fastest_ratio,
          g.median_alone_beside_nccl ? "alone_beside_nccl_time_us, the time alone it is "
                                       "compared with"
                                     : "time_us"));
    }
    out.gemm_slowdown_under_nccl = median(slowdowns);
    out.curves->set_gemm_slowdown_under_nccl(*out.gemm_slowdown_under_nccl);
  }
  if (!profile.memory.allocations.empty()) {
    out.allocation_costs = fit_allocation_costs(profile.memory.allocations);
    out.curves->set_allocation_costs(*out.allocation_costs);
  }
  if (profile.rank_speeds) {
    std::vector<double> gpu;
    std::vector<double> host;
    out.rank_speeds = fit_rank_speeds(*profile.rank_speeds, gpu, host);
    // Nodes as the harness laid the ranks out (node by node), when the profile says how many.
    const std::int32_t per_node = profile.topology.gpus_per_node;
    const bool whole_nodes = per_node > 0 && std::ssize(gpu) % per_node == 0;
    out.curves->set_rank_speeds(std::move(gpu), std::move(host), whole_nodes ? per_node : 0);
    if (out.rank_speeds->sustained)
      out.curves->set_sustained_gemm_fraction(out.rank_speeds->sustained->rank0);
  }
  return out;
}

}  // namespace fsdpsim::calibrate
