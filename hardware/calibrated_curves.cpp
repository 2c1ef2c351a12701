// Evaluation of measured curves (calibrated_curves.hpp). The curve shape -- log-log
// interpolation between measurements, alpha-beta lines outside them -- is argued in the header;
// the fitting that produces knots and slopes lives in calibrate/fit.cpp.
#include "hardware/calibrated_curves.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "hardware/gemm_cost.hpp"

namespace fsdpsim::hardware {
namespace {

[[noreturn]] void bad_curve(const std::string& why) {
  throw std::invalid_argument("hardware: invalid CollectiveCurve: " + why);
}

double log_ratio(double a, double b) { return std::log(a / b); }

// Element count of A, B and C of one product of the batch, for scaling a kernel's HBM bytes
// from one GEMM shape to another with the same convention its producer used.
double gemm_elements(std::int64_t m, std::int64_t n, std::int64_t k) {
  const auto dm = static_cast<double>(m);
  const auto dn = static_cast<double>(n);
  const auto dk = static_cast<double>(k);
  return dm * dk + dk * dn + dm * dn;
}

bool within_ratio(std::int64_t a, std::int64_t b) {
  if (a <= 0 || b <= 0) return a == b;
  const double r = static_cast<double>(a) / static_cast<double>(b);
  return r <= kGemmNeighbourRatio && r >= 1.0 / kGemmNeighbourRatio;
}

double log_distance(const GemmKey& a, const GemmKey& b) {
  const auto d = [](std::int64_t x, std::int64_t y) {
    return std::fabs(std::log(static_cast<double>(std::max<std::int64_t>(x, 1)) /
                              static_cast<double>(std::max<std::int64_t>(y, 1))));
  };
  return d(a.m, b.m) + d(a.n, b.n) + d(a.k, b.k) + d(a.batch, b.batch);
}

// The model's time of `kernel` reshaped to `shape` (FLOPs exact, bytes scaled by elements).
Seconds model_gemm_time(const GpuSpec& gpu, const Kernel& kernel, const GemmKey& shape) {
  Kernel k = kernel;
  k.gemm = GemmShape{shape.m, shape.n, shape.k, shape.batch};
  k.flops = Flops(gemm_flops(k.gemm));
  const double from = gemm_elements(kernel.gemm.m, kernel.gemm.n, kernel.gemm.k) *
                      static_cast<double>(kernel.gemm.batch);
  const double to = gemm_elements(shape.m, shape.n, shape.k) * static_cast<double>(shape.batch);
  if (from > 0.0) {
    k.bytes = Bytes(static_cast<std::int64_t>(
        std::llround(static_cast<double>(kernel.bytes.value()) * to / from)));
  }
  return hardware::gemm_time(gpu, k);
}

GemmKey key_of(const Kernel& kernel) {
  return GemmKey{kernel.dtype, kernel.gemm.m, kernel.gemm.n, kernel.gemm.k, kernel.gemm.batch};
}

}  // namespace

// ---- CollectiveCurve ----------------------------------------------------------------------

CollectiveCurve::CollectiveCurve(std::vector<CurveKnot> knots, double small_seconds_per_byte,
                                 double large_seconds_per_byte)
    : knots_(std::move(knots)),
      small_slope_(small_seconds_per_byte),
      large_slope_(large_seconds_per_byte) {
  if (knots_.size() < 2) bad_curve("needs at least 2 knots, got " + std::to_string(knots_.size()));
  for (std::size_t i = 0; i < knots_.size(); ++i) {
    const CurveKnot& k = knots_[i];
    if (k.bytes.value() <= 0) bad_curve("knot sizes must be > 0");
    if (!(k.time.value() > 0.0) || !std::isfinite(k.time.value()))
      bad_curve("knot times must be finite and > 0");
    if (i > 0 && k.bytes <= knots_[i - 1].bytes) bad_curve("knot sizes must increase strictly");
    if (i > 0 && k.time < knots_[i - 1].time) bad_curve("knot times must not decrease with size");
  }
  const CurveKnot& first = knots_.front();
  const double max_small = first.time.value() / static_cast<double>(first.bytes.value());
  if (!(small_slope_ >= 0.0) || small_slope_ > max_small * (1.0 + 1e-12)) {
    bad_curve("the small-size slope must be in [0, t0/S0] so that the latency stays >= 0");
  }
  small_slope_ = std::min(small_slope_, max_small);
  if (!(large_slope_ > 0.0) || !std::isfinite(large_slope_))
    bad_curve("the large-size slope must be > 0");
}

Seconds CollectiveCurve::latency() const {
  const CurveKnot& first = knots_.front();
  return Seconds(
      std::max(0.0, first.time.value() - static_cast<double>(first.bytes.value()) * small_slope_));
}

Seconds CollectiveCurve::time(Bytes bytes) const {
  const CurveKnot& first = knots_.front();
  const CurveKnot& last = knots_.back();
  if (bytes <= first.bytes) {
    const double gap =
        static_cast<double>(first.bytes.value() - std::max<std::int64_t>(bytes.value(), 0));
    return Seconds(std::max(latency().value(), first.time.value() - gap * small_slope_));
  }
  if (bytes >= last.bytes) {
    const double excess = static_cast<double>(bytes.value() - last.bytes.value());
    return Seconds(last.time.value() + excess * large_slope_);
  }
  // First knot with size >= bytes; bytes lies in (lo, hi].
  const auto hi = std::lower_bound(knots_.begin(), knots_.end(), bytes,
                                   [](const CurveKnot& k, Bytes b) { return k.bytes < b; });
  if (hi->bytes == bytes) return hi->time;
  const auto lo = hi - 1;
  const double x =
      log_ratio(static_cast<double>(bytes.value()), static_cast<double>(lo->bytes.value())) /
      log_ratio(static_cast<double>(hi->bytes.value()), static_cast<double>(lo->bytes.value()));
  return Seconds(lo->time.value() * std::exp(x * log_ratio(hi->time.value(), lo->time.value())));
}

// ---- CalibrationUsage ---------------------------------------------------------------------

void CalibrationUsage::record_collective(bool calibrated, const CollectiveQuery& query,
                                         double beyond) {
  (calibrated ? collectives_calibrated_ : collectives_fallback_)
      .fetch_add(1, std::memory_order_relaxed);
  if (calibrated && beyond > 1.0) {
    collectives_extrapolated_.fetch_add(1, std::memory_order_relaxed);
    double most = most_extrapolated_.load(std::memory_order_relaxed);
    while (beyond > most &&
           !most_extrapolated_.compare_exchange_weak(most, beyond, std::memory_order_relaxed)) {
    }
  }
  if (!recording_.load(std::memory_order_relaxed)) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  QueryStats& s = collective_queries_[query];
  ++s.count;
  s.calibrated = calibrated;
  s.above_measured = calibrated && beyond > 1.0;
}

void CalibrationUsage::record_gemm(bool calibrated, const GemmKey& shape) {
  (calibrated ? gemms_calibrated_ : gemms_fallback_).fetch_add(1, std::memory_order_relaxed);
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0)
    gemms_shapeless_.fetch_add(1, std::memory_order_relaxed);
  if (!recording_.load(std::memory_order_relaxed)) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  QueryStats& s = gemm_queries_[shape];
  ++s.count;
  s.calibrated = calibrated;
}

CalibrationCounts CalibrationUsage::counts() const {
  return CalibrationCounts{collectives_calibrated_.load(),   collectives_fallback_.load(),
                           gemms_calibrated_.load(),         gemms_fallback_.load(),
                           collectives_extrapolated_.load(), most_extrapolated_.load(),
                           gemms_shapeless_.load()};
}

std::map<CollectiveQuery, QueryStats> CalibrationUsage::collective_queries() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return collective_queries_;
}

std::map<GemmKey, QueryStats> CalibrationUsage::gemm_queries() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return gemm_queries_;
}

// ---- CalibratedCurves ---------------------------------------------------------------------

void CalibratedCurves::add_collective(const CollectiveCurveKey& key, CollectiveCurve curve) {
  collectives_.insert_or_assign(key, std::move(curve));
}

void CalibratedCurves::add_gemm(const GemmKey& key, GemmMeasurement measurement) {
  if (!(measurement.time.value() > 0.0))
    throw std::invalid_argument("hardware: a measured GEMM time must be > 0");
  gemms_.insert_or_assign(key, measurement);
}

void CalibratedCurves::set_gemm_slowdown_under_nccl(double factor) {
  if (!(factor > 0.0) || !std::isfinite(factor)) {
    throw std::invalid_argument("hardware: the GEMM slowdown under NCCL must be finite and > 0");
  }
  gemm_slowdown_ = factor;
}

const CollectiveCurve* CalibratedCurves::find_collective(Collective op, CommGroup group) const {
  static constexpr std::array<Dtype, 5> kPreference{Dtype::kBf16, Dtype::kFp16, Dtype::kFp32,
                                                    Dtype::kTf32, Dtype::kFp8};
  for (const Dtype d : kPreference) {
    const auto it = collectives_.find(CollectiveCurveKey{op, d, group.ranks, group.ranks_per_node});
    if (it != collectives_.end()) return &it->second;
  }
  return nullptr;
}

std::optional<Seconds> CalibratedCurves::gemm_time(const GpuSpec& model_gpu,
                                                   const Kernel& kernel) const {
  if (kernel.kind != KernelKind::kGemm) return std::nullopt;
  const GemmKey query = key_of(kernel);
  if (const auto exact = gemms_.find(query); exact != gemms_.end()) return exact->second.time;
  const GemmKey* best = nullptr;
  const GemmMeasurement* best_measurement = nullptr;
  double best_distance = 0.0;
  // Only keys of the same dtype: the map is ordered by dtype first.
  for (auto it = gemms_.lower_bound(GemmKey{query.dtype, 0, 0, 0, 0});
       it != gemms_.end() && it->first.dtype == query.dtype; ++it) {
    const GemmKey& k = it->first;
    if (!within_ratio(k.m, query.m) || !within_ratio(k.n, query.n) || !within_ratio(k.k, query.k) ||
        !within_ratio(k.batch, query.batch)) {
      continue;
    }
    const double distance = log_distance(k, query);
    if (best == nullptr || distance < best_distance) {
      best = &k;
      best_measurement = &it->second;
      best_distance = distance;
    }
  }
  if (best == nullptr) return std::nullopt;
  const Seconds model_here = hardware::gemm_time(model_gpu, kernel);
  const Seconds model_there = model_gemm_time(model_gpu, kernel, *best);
  if (!(model_there.value() > 0.0)) return std::nullopt;
  return Seconds(best_measurement->time.value() * model_here.value() / model_there.value());
}

std::optional<Seconds> CalibratedCurves::gemm_time_sharing(const GpuSpec& model_gpu,
                                                           const Kernel& kernel,
                                                           Seconds model_alone,
                                                           Seconds model_sharing) const {
  const std::optional<Seconds> alone = gemm_time(model_gpu, kernel);
  if (!alone) return std::nullopt;
  if (const auto exact = gemms_.find(key_of(kernel));
      exact != gemms_.end() && exact->second.time_under_nccl) {
    return *exact->second.time_under_nccl;
  }
  if (gemm_slowdown_) return *alone * *gemm_slowdown_;
  if (!(model_alone.value() > 0.0)) return alone;
  return *alone * (model_sharing.value() / model_alone.value());
}

// ---- entry points -------------------------------------------------------------------------

namespace {

// The measured curve that prices `bytes` of `op` over `group`, if any. Above a latency-bound
// sweep's largest size the curve knows no bandwidth, below a bandwidth-bound sweep's smallest
// size no latency.
const CollectiveCurve* usable_curve(const CalibratedCurves& calibration, Collective op,
                                    CommGroup group, Bytes bytes) {
  const CollectiveCurve* curve = calibration.find_collective(op, group);
  const bool usable = curve != nullptr &&
                      (bytes <= curve->knots().back().bytes || curve->reaches_bandwidth_regime()) &&
                      (bytes >= curve->knots().front().bytes || curve->reaches_latency_regime());
  return usable ? curve : nullptr;
}

}  // namespace

std::optional<Seconds> calibrated_collective_time(const GpuSpec& gpu, Collective op,
                                                  CommGroup group, Bytes bytes) {
  if (gpu.calibration == nullptr) return std::nullopt;
  const CollectiveCurve* curve = usable_curve(*gpu.calibration, op, group, bytes);
  const double beyond = curve == nullptr
                            ? 0.0
                            : static_cast<double>(bytes.value()) /
                                  static_cast<double>(curve->knots().back().bytes.value());
  gpu.calibration->usage().record_collective(
      curve != nullptr, CollectiveQuery{op, group.ranks, group.ranks_per_node, bytes}, beyond);
  if (curve == nullptr) return std::nullopt;
  return curve->time(bytes);
}

std::optional<Seconds> calibrated_collective_time_uncounted(const GpuSpec& gpu, Collective op,
                                                            CommGroup group, Bytes bytes) {
  if (gpu.calibration == nullptr) return std::nullopt;
  const CollectiveCurve* curve = usable_curve(*gpu.calibration, op, group, bytes);
  if (curve == nullptr) return std::nullopt;
  return curve->time(bytes);
}

std::optional<Seconds> calibrated_gemm_time(const GpuSpec& gpu, const Kernel& kernel) {
  if (gpu.calibration == nullptr || kernel.kind != KernelKind::kGemm) return std::nullopt;
  const std::optional<Seconds> t = gpu.calibration->gemm_time(gpu, kernel);
  gpu.calibration->usage().record_gemm(t.has_value(), key_of(kernel));
  return t;
}

}  // namespace fsdpsim::hardware
