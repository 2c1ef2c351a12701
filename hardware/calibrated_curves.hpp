// Measured costs that sit in front of the fallback cost models (cost_model.hpp): collective
// time curves per (collective, dtype, group shape) and GEMM times per exact shape, fitted from a
// calibration profile (calibrate/, `fsdpsim calibrate fit`). Pure data and evaluation: no JSON,
// no files, no printing (the app parses profiles, calibrate/ fits them).
//
// A GpuSpec carries them as `calibration`; collective_time() and kernel_time() consult them
// first and fall back to the models for anything the profile does not cover. Which costs came
// from where is counted in CalibrationUsage, so that `fsdpsim run` can say so.
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hardware/cost_model.hpp"
#include "hardware/gpu_spec.hpp"
#include "sim/units/dtype.hpp"
#include "sim/units/op_shapes.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::hardware {

// One knot of a collective curve: the full (gathered / unreduced) buffer and its median time.
struct CurveKnot {
  Bytes bytes{0};
  Seconds time{0.0};
};

// Time of one collective on one group shape as a function of the buffer size S:
// - between two knots, linear interpolation of log(time) in log(size) (a power law between
//   neighbouring measurements: exact at the knots, monotone between them, and exact for a pure
//   bandwidth regime t ~ S, where linear interpolation in log-size would overestimate);
// - below the first knot, the alpha-beta line t = t0 - (S0 - S) * small_slope, whose intercept
//   t(0+) = alpha is the latency asymptote;
// - above the last knot, the alpha-beta line t = tN + (S - SN) * large_slope, whose slope is the
//   asymptotic 1 / algbw (the alpha-beta model of NCCL's own tuner, src/graph/tuning.cc:
//   time = latency + bytes / bandwidth).
// O(log knots) per evaluation.
class CollectiveCurve {
 public:
  // Throws std::invalid_argument unless: >= 2 knots, sizes > 0 strictly increasing, times > 0
  // and non-decreasing, 0 <= small_seconds_per_byte <= t0 / S0, large_seconds_per_byte > 0.
  CollectiveCurve(std::vector<CurveKnot> knots, double small_seconds_per_byte,
                  double large_seconds_per_byte);

  // Time for a buffer of `bytes` (> 0); the knots' own times at the knots.
  [[nodiscard]] Seconds time(Bytes bytes) const;

  [[nodiscard]] const std::vector<CurveKnot>& knots() const { return knots_; }
  [[nodiscard]] double small_seconds_per_byte() const { return small_slope_; }
  [[nodiscard]] double large_seconds_per_byte() const { return large_slope_; }
  // t(0+): the latency asymptote below the measured range.
  [[nodiscard]] Seconds latency() const;
  // 1 / large_seconds_per_byte: the algbw approached above the measured range.
  [[nodiscard]] BytesPerSec asymptotic_algbw() const { return BytesPerSec(1.0 / large_slope_); }
  // Whether the knots reach the bandwidth regime: the largest measured time at least twice the
  // smallest, so that the size-proportional term is at least half of it. Only then does the
  // slope above the last knot measure a bandwidth; a sweep that stops in the latency regime has
  // a slope of noise (a 1-64 KiB sweep priced a 4 GiB all-gather at 20x the model), and larger
  // buffers are left to the fallback model (calibrated_collective_time).
  [[nodiscard]] bool reaches_bandwidth_regime() const {
    return knots_.back().time.value() >= 2.0 * knots_.front().time.value();
  }
  // Whether the knots reach the latency regime: at the smallest measured size at least half the
  // time is the latency asymptote, so that the line below it measures one. A sweep that starts
  // in the bandwidth regime (nccl-tests -b 64M) has a latency of about 0 (a 4-byte all-reduce
  // came out at 41 ps), and smaller buffers are left to the fallback model.
  [[nodiscard]] bool reaches_latency_regime() const {
    return latency().value() >= 0.5 * knots_.front().time.value();
  }

 private:
  std::vector<CurveKnot> knots_;
  double small_slope_ = 0.0;
  double large_slope_ = 0.0;
};

struct CollectiveCurveKey {
  Collective op = Collective::kAllGather;
  Dtype dtype = Dtype::kBf16;
  std::int32_t ranks = 1;
  std::int32_t ranks_per_node = 1;
  friend auto operator<=>(const CollectiveCurveKey&, const CollectiveCurveKey&) = default;
};

struct GemmKey {
  Dtype dtype = Dtype::kBf16;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  friend auto operator<=>(const GemmKey&, const GemmKey&) = default;
};

// One measured GEMM: median time alone, and (when measured) while NCCL kernels run.
struct GemmMeasurement {
  Seconds time{0.0};
  std::optional<Seconds> time_under_nccl;
};

// How many priced collectives and GEMMs came from the calibration, and how many fell back to
// the models. Thread-safe; counts are sums, so they do not depend on thread interleaving.
struct CalibrationCounts {
  std::int64_t collectives_calibrated = 0;
  std::int64_t collectives_fallback = 0;
  std::int64_t gemms_calibrated = 0;
  std::int64_t gemms_fallback = 0;
  // Of the calibrated collectives, those above their curve's largest measured size (priced by
  // the alpha-beta line through its largest sizes), and the largest of their size over it (a
  // maximum, not a sum like the others).
  std::int64_t collectives_extrapolated = 0;
  double most_extrapolated = 0.0;
  // Of the fallback GEMMs, those without a shape (a custom layer's work, FLOPs only), which no
  // measurement can price.
  std::int64_t gemms_shapeless = 0;
};

// A distinct query the cost models made, kept only while recording (for `fsdpsim calibrate
// plan`: the exact shapes a scenario needs).
struct CollectiveQuery {
  Collective op = Collective::kAllGather;
  std::int32_t ranks = 1;
  std::int32_t ranks_per_node = 1;
  Bytes bytes{0};
  friend auto operator<=>(const CollectiveQuery&, const CollectiveQuery&) = default;
};
struct QueryStats {
  std::int64_t count = 0;
  bool calibrated = false;
  bool above_measured = false;  // a collective priced above its curve's largest measured size
};

class CalibrationUsage {
 public:
  // `beyond` > 1: the curve priced it at that multiple of its largest measured size.
  void record_collective(bool calibrated, const CollectiveQuery& query, double beyond = 0.0);
  void record_gemm(bool calibrated, const GemmKey& shape);
  [[nodiscard]] CalibrationCounts counts() const;

  // Off by default: recording keeps every distinct query under a mutex.
  void set_recording(bool on) { recording_.store(on); }
  [[nodiscard]] std::map<CollectiveQuery, QueryStats> collective_queries() const;
  [[nodiscard]] std::map<GemmKey, QueryStats> gemm_queries() const;

 private:
  std::atomic<std::int64_t> collectives_calibrated_{0};
  std::atomic<std::int64_t> collectives_fallback_{0};
  std::atomic<std::int64_t> gemms_calibrated_{0};
  std::atomic<std::int64_t> gemms_fallback_{0};
  std::atomic<std::int64_t> collectives_extrapolated_{0};
  std::atomic<std::int64_t> gemms_shapeless_{0};
  std::atomic<double> most_extrapolated_{0.0};
  std::atomic<bool> recording_{false};
  mutable std::mutex mutex_;
  std::map<CollectiveQuery, QueryStats> collective_queries_;
  std::map<GemmKey, QueryStats> gemm_queries_;
};

// The fitted profile. Built once (add_*), then shared read-only through
// std::shared_ptr<const CalibratedCurves>; only the usage counters change afterwards.
class CalibratedCurves {
 public:
  explicit CalibratedCurves(std::string name) : name_(std::move(name)) {}
  CalibratedCurves(const CalibratedCurves&) = delete;
  CalibratedCurves& operator=(const CalibratedCurves&) = delete;

  void add_collective(const CollectiveCurveKey& key, CollectiveCurve curve);
  void add_gemm(const GemmKey& key, GemmMeasurement measurement);
  // Median slowdown of GEMMs while NCCL kernels run (time under NCCL / time alone), > 0.
  void set_gemm_slowdown_under_nccl(double factor);
  void set_allocation_costs(AllocationCosts costs) { allocation_costs_ = costs; }
  // false: the profile says the run that measured it stopped early (what it measured is kept).
  void set_complete(bool complete) { complete_ = complete; }
  // Each rank's speed next to rank 0's (whose GEMM timings the profile holds; rank 0 is 1), from
  // the harness's "rank-speed" phase: its GPU's on one held GEMM (rank 0's time over its own) and
  // its host's on kernel launches (empty when the launches were not timed), each in
  // [kSlowestRankSpeed, 1 / kSlowestRankSpeed]; the measured ranks were `ranks_per_node` to a
  // node (0: not known). rank_pacing.hpp makes stragglers of them.
  void set_rank_speeds(std::vector<double> gpu, std::vector<double> host,
                       std::int32_t ranks_per_node) {
    gpu_speeds_ = std::move(gpu);
    host_speeds_ = std::move(host);
    speed_ranks_per_node_ = ranks_per_node;
  }
  // What rank 0's GPU kept of its short GEMM rate under sustained load (its short time of the
  // held GEMM over its held time; the profile's GEMM timings are rank 0's, short), in
  // [kLowestSustainedGemmFraction, kHighestSustainedGemmFraction]: the measured
  // GpuSpec::sustained_compute_fraction.
  void set_sustained_gemm_fraction(double fraction) { sustained_gemm_fraction_ = fraction; }

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] bool complete() const { return complete_; }
  [[nodiscard]] const std::map<CollectiveCurveKey, CollectiveCurve>& collectives() const {
    return collectives_;
  }
  [[nodiscard]] const std::map<GemmKey, GemmMeasurement>& gemms() const { return gemms_; }
  [[nodiscard]] std::optional<double> gemm_slowdown_under_nccl() const { return gemm_slowdown_; }
  // The allocator's device-call costs, when the profile timed them (lines fitted by
  // calibrate/fit.cpp).
  [[nodiscard]] const std::optional<AllocationCosts>& allocation_costs() const {
    return allocation_costs_;
  }
  [[nodiscard]] const std::vector<double>& gpu_speeds() const { return gpu_speeds_; }
  [[nodiscard]] const std::vector<double>& host_speeds() const { return host_speeds_; }
  [[nodiscard]] std::int32_t speed_ranks_per_node() const { return speed_ranks_per_node_; }
  [[nodiscard]] std::optional<double> sustained_gemm_fraction() const {
    return sustained_gemm_fraction_;
  }

  // The curve for a collective on a group shape, or nullptr. collective_time() gets bytes, not a
  // dtype, and NCCL moves bytes whatever their type, so the curve of the first dtype measured in
  // the order bf16, fp16, fp32, tf32, fp8 is used (reductions in other dtypes differ by the
  // arithmetic, which is small next to the transfer on NVLink and networks).
  [[nodiscard]] const CollectiveCurve* find_collective(Collective op, CommGroup group) const;

  // Measured time of a GEMM kernel: the exact shape and dtype if measured; else the nearest
  // measured shape of that dtype with each of m, n, k, batch within a factor kGemmNeighbourRatio,
  // scaled by the model's time ratio between the two shapes (the model carries tile and wave
  // quantization, the measurement the level). nullopt when neither exists or the kernel is not a
  // GEMM. `model_gpu` is the spec the model prices with (its own calibration is ignored).
  [[nodiscard]] std::optional<Seconds> gemm_time(const GpuSpec& model_gpu,
                                                 const Kernel& kernel) const;

  // The same GEMM while an NCCL collective holds SMs: its measured time under NCCL if the shape
  // was measured so; else the measured time alone times the median measured slowdown; else
  // times the model's own slowdown `model_sharing / model_alone`.
  [[nodiscard]] std::optional<Seconds> gemm_time_sharing(const GpuSpec& model_gpu,
                                                         const Kernel& kernel, Seconds model_alone,
                                                         Seconds model_sharing) const;

  [[nodiscard]] CalibrationUsage& usage() const { return usage_; }

 private:
  std::string name_;
  std::map<CollectiveCurveKey, CollectiveCurve> collectives_;
  std::map<GemmKey, GemmMeasurement> gemms_;
  std::optional<double> gemm_slowdown_;
  std::optional<AllocationCosts> allocation_costs_;
  std::vector<double> gpu_speeds_;
  std::vector<double> host_speeds_;
  std::int32_t speed_ranks_per_node_ = 0;
  std::optional<double> sustained_gemm_fraction_;
  bool complete_ = true;
  mutable CalibrationUsage usage_;
};

// The slowest a measured GPU or host may be next to rank 0's (one 20x slower is broken, or its
// time is in the wrong unit), and the slowest straggler a scenario may list (slower is not a
// straggler but a broken node; the bound also keeps a rank's stretched operations within
// simulated time, sim_time.hpp).
inline constexpr double kSlowestRankSpeed = 0.05;

// Bounds of what a GPU may keep of its short GEMM rate under sustained load. An H200 at its
// 700 W limit keeps 0.83-0.84 (reports/h200-measured.md, "Kernels held at the power limit"); a
// quarter would be a GPU throttled far past its power limit (thermal slowdown) or a time in the
// wrong unit. A GPU whose clock does not drop under load keeps 1, and a held time up to a tenth
// shorter is timer noise; more means the short and held times were swapped.
inline constexpr double kLowestSustainedGemmFraction = 0.25;
inline constexpr double kHighestSustainedGemmFraction = 1.1;

// Largest ratio between a queried GEMM dimension and a measured one for the measurement to
// stand in for the query (a generic grid at powers of two covers every shape within 2x).
inline constexpr double kGemmNeighbourRatio = 2.0;

// Entry points for collective_time() / kernel_time(): the calibrated cost when `gpu` carries a
// calibration that covers the query, else nullopt. Each call is counted in the usage (as
// calibrated or fallback) when a calibration is present.
std::optional<Seconds> calibrated_collective_time(const GpuSpec& gpu, Collective op,
                                                  CommGroup group, Bytes bytes);
std::optional<Seconds> calibrated_gemm_time(const GpuSpec& gpu, const Kernel& kernel);
// The same collective cost, not counted: a second question about a collective that
// collective_time() priced (collective_network_time, its part spent on the NICs).
std::optional<Seconds> calibrated_collective_time_uncounted(const GpuSpec& gpu, Collective op,
                                                            CommGroup group, Bytes bytes);

}  // namespace fsdpsim::hardware
