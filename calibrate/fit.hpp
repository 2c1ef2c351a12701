// From a calibration profile to the curves the cost models use (hardware/calibrated_curves.hpp),
// with a report of how well they fit.
//
// Per collective series (collective, dtype, ranks, ranks per node; out-of-place preferred):
// 1. points sorted by size, one per size (the median of duplicates);
// 2. times made non-decreasing in size by isotonic regression of log(time) (pool adjacent
//    violators, equal weights): a larger message never takes less time, and noise that says so
//    is averaged away rather than kept; the "knot error" is how far this moved a measurement;
// 3. alpha-beta asymptotes: least-squares lines t = alpha + S * slope through the
//    kAsymptotePoints smallest and largest knots (NCCL's tuner model, src/graph/tuning.cc:
//    time = latency + bytes / bandwidth), the small slope clamped to [0, t0/S0] so the latency
//    stays >= 0 and a non-positive large slope replaced by the last knot's t/S.
// The "leave-one-out error" predicts each interior knot from its neighbours alone: an estimate of
// the interpolation error between measured sizes.
//
// Series that cannot be fitted (fewer than 2 sizes) are skipped and reported; series measured
// alongside another collective (interference) are reported as a slowdown against the matching
// curve; GEMMs enter as measured (median of duplicates), with the median slowdown under NCCL.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/profile.hpp"
#include "hardware/calibrated_curves.hpp"

namespace fsdpsim::calibrate {

inline constexpr std::size_t kAsymptotePoints = 3;
// The most a GEMM may seem to speed up alongside NCCL (median over shapes) before fit_profile
// refuses the profile: timer noise between two runs of the same kernel, not a physical effect.
inline constexpr double kMaxGemmSpeedupUnderNccl = 1.05;

struct CurveFit {
  hardware::CollectiveCurveKey key;
  std::string group;
  Origin origin = Origin::kMeasured;
  std::size_t points = 0;
  Bytes min_bytes{0};
  Bytes max_bytes{0};
  double max_knot_error = 0.0;  // max |fitted - measured| / measured over the sizes
  Bytes worst_knot_bytes{0};
  double max_leave_one_out_error = 0.0;  // 0 with fewer than 3 sizes
  Seconds latency{0.0};                  // alpha below the measured range
  double peak_busbw_GBps = 0.0;          // largest measured busbw
  double asymptotic_busbw_GBps = 0.0;    // busbw of the large-size asymptote
  bool extrapolates = true;  // used above max_bytes (CollectiveCurve::reaches_bandwidth_regime)
  bool extrapolates_down = true;  // used below min_bytes (CollectiveCurve::reaches_latency_regime)
  // Measurements of one size that disagree (two series of one collective and group): the largest
  // ratio of the slowest to the fastest at a size, and that size; 1 when none repeat (noted from
  // kRepeatSpreadNoted, profile.hpp).
  double repeat_spread = 1.0;
  Bytes repeat_spread_bytes{0};
};

struct SkippedSeries {
  std::string what;
  std::string why;
};

struct InterferenceFit {
  hardware::CollectiveCurveKey key;
  hardware::Collective concurrent_with = hardware::Collective::kReduceScatter;
  double median_slowdown = 1.0;  // time with the other collective running / time alone
  std::size_t points = 0;
};

// Speeds next to rank 0's (rank 0 = 1) over the ranks of the harness's "rank-speed" phase.
struct SpeedSpread {
  std::int32_t slowest_rank = 0;
  std::string slowest_host;
  double slowest = 1.0;
  double median = 1.0;
  double fastest = 1.0;
};

// The "rank-speed" phase, summarized: each GPU's speed is rank 0's time of the held GEMM over its
// own, each host's rank 0's host's time per kernel launch over its own, a host's time the median
// of its ranks' (curves->gpu_speeds(), host_speeds(): every rank of a host alike).
// What each GPU kept of its short GEMM rate under sustained load: its short time of the held
// GEMM over its held time.
struct SustainedFraction {
  double rank0 = 1.0;  // curves->sustained_gemm_fraction(): the profile's GEMMs are rank 0's
  double median = 1.0;
  double lowest = 1.0;
  std::int32_t lowest_rank = 0;
  double highest = 1.0;
};

struct RankSpeedFit {
  std::size_t ranks = 0;
  SpeedSpread gpu;
  double rank0_tflops = 0.0;                   // the held GEMM on rank 0
  std::optional<SustainedFraction> sustained;  // when the GEMM was also timed short
  std::optional<SpeedSpread> host;             // when the launches were timed
  std::optional<Seconds> rank0_launch;
};

struct ProfileFit {
  std::shared_ptr<hardware::CalibratedCurves> curves;
  std::vector<CurveFit> collectives;
  std::vector<SkippedSeries> skipped;
  std::vector<InterferenceFit> interference;
  std::size_t gemms = 0;
  std::optional<double> gemm_slowdown_under_nccl;
  std::optional<hardware::AllocationCosts> allocation_costs;  // from memory.allocations
  std::optional<RankSpeedFit> rank_speeds;                    // from rank_speeds
};

// Each rank's GPU and host speed next to rank 0's, into `gpu` and `host` (empty when the
// launches were not timed), summarized; throws InputError naming the rank when one is further
// from rank 0 than hardware::kSlowestRankSpeed allows, or kept a share of its short GEMM rate
// outside [kLowestSustainedGemmFraction, kHighestSustainedGemmFraction].
RankSpeedFit fit_rank_speeds(const RankSpeedMeasurement& measured, std::vector<double>& gpu,
                             std::vector<double>& host);

// Least-squares lines time = fixed + per_gib * GiB through the timed cudaMalloc and cudaFree
// calls, each coefficient clamped at >= 0 (no call takes less than nothing); needs two distinct
// sizes and positive times, else throws InputError.
hardware::AllocationCosts fit_allocation_costs(const std::vector<AllocationTiming>& timings);

// Fits one series' points (>= 2 distinct sizes, times > 0); throws InputError otherwise.
// `fit` receives the errors and asymptotes.
hardware::CollectiveCurve fit_curve(const std::vector<CollectivePoint>& points, CurveFit& fit);

// Fits every series and GEMM of the profile; the curves are named `name`.
ProfileFit fit_profile(const CalibrationProfile& profile, const std::string& name);

}  // namespace fsdpsim::calibrate
