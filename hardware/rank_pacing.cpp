#include "hardware/rank_pacing.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <optional>

namespace fsdpsim::hardware {
namespace {

struct Slowest {
  std::int32_t rank = 0;  // where the slowest measured speed is
  double speed = 1.0;     // the job's slowest, or its expectation
};

// The mean, over every n-subset of `values` (1 <= n <= their count K), of the subset's smallest:
// with the values sorted, the k-th is the smallest in C(K - k, n - 1) of the C(K, n) subsets,
// w_k = C(K - k, n - 1) / C(K, n): w_1 = n / K, w_{k+1} = w_k (K - k - n + 1) / (K - k).
double expected_min_of_subset(std::vector<double> values, std::int32_t n) {
  std::sort(values.begin(), values.end());
  const auto count = static_cast<std::int32_t>(values.size());
  const double K = count;
  const double subset = n;
  double weight = subset / K;
  double expected = 0.0;
  for (std::int32_t k = 1;; ++k) {
    expected += weight * values[static_cast<std::size_t>(k - 1)];
    if (k == count - n + 1) break;  // the later values are never a subset's smallest
    weight *= (K - k - subset + 1) / (K - k);
  }
  return expected;
}

// The slowest of `speeds` (per_node to a node) a job of `world_size` ranks gets
// (rank_pacing.hpp), if below 1.
std::optional<Slowest> slowest_for(const std::vector<double>& speeds, std::int32_t per_node,
                                   std::int32_t world_size) {
  if (speeds.empty()) return std::nullopt;
  const auto measured_nodes = static_cast<std::int32_t>(std::ssize(speeds) / per_node);
  const std::int32_t job_nodes = (world_size + per_node - 1) / per_node;
  const auto slowest = std::min_element(speeds.begin(), speeds.end());
  Slowest out{static_cast<std::int32_t>(slowest - speeds.begin()), *slowest};
  const auto node = [&](std::int32_t k) {
    const auto first = speeds.begin() + static_cast<std::ptrdiff_t>(k) * per_node;
    return std::vector<double>(first, first + per_node);
  };
  if (world_size < per_node) {
    // Part of one node, which one at random: the mean over the nodes of the expected slowest
    // of `world_size` of its GPUs.
    double sum = 0.0;
    for (std::int32_t k = 0; k < measured_nodes; ++k)
      sum += expected_min_of_subset(node(k), world_size);
    out.speed = sum / measured_nodes;
    out.rank = (out.rank % per_node) % world_size;
  } else if (job_nodes < measured_nodes) {
    std::vector<double> node_slowest;
    for (std::int32_t k = 0; k < measured_nodes; ++k) {
      const std::vector<double> v = node(k);
      node_slowest.push_back(*std::min_element(v.begin(), v.end()));
    }
    out.speed = expected_min_of_subset(std::move(node_slowest), job_nodes);
    out.rank %= per_node;
  }
  if (out.speed >= 1.0) return std::nullopt;
  return out;
}

}  // namespace

RankPacing rank_pacing(const CalibratedCurves& curves, std::int32_t world_size) {
  RankPacing out;
  const std::vector<double>& gpu = curves.gpu_speeds();
  if (gpu.empty()) return out;
  const std::int32_t per_node = std::max(curves.speed_ranks_per_node(), 1);
  out.measured_nodes = static_cast<std::int32_t>(std::ssize(gpu) / per_node);
  const std::int32_t world = std::max(world_size, 1);
  out.job_nodes = (world + per_node - 1) / per_node;
  out.sampled = world < per_node || out.job_nodes < out.measured_nodes;
  const auto slow_gpu = slowest_for(gpu, per_node, world);
  const auto slow_host = slowest_for(curves.host_speeds(), per_node, world);
  // A straggler must be a rank of the job (a measured job larger than this one, on as many
  // nodes, may have its slowest past this one's last rank).
  const auto place = [world](std::int32_t rank) { return rank % world; };
  if (slow_gpu) out.stragglers.push_back(Straggler{place(slow_gpu->rank), slow_gpu->speed, 1.0});
  if (slow_host && slow_gpu && place(slow_host->rank) == place(slow_gpu->rank)) {
    out.stragglers.front().host_speed = slow_host->speed;
  } else if (slow_host) {
    out.stragglers.push_back(Straggler{place(slow_host->rank), 1.0, slow_host->speed});
  }
  std::sort(out.stragglers.begin(), out.stragglers.end(),
            [](const Straggler& a, const Straggler& b) { return a.rank < b.rank; });
  return out;
}

double expected_max_standard_normal(std::int32_t n) {
  if (n <= 1) return 0.0;
  // The density of the maximum vanishes outside [-10, 10] for any n up to kMaxWorldSize (its
  // mean is under 5); the trapezoid rule at 1e-3 is exact to about 1e-7 on this smooth integrand.
  constexpr double kFrom = -10.0;
  constexpr double kTo = 10.0;
  constexpr int kSteps = 20000;
  constexpr double kStep = (kTo - kFrom) / kSteps;
  const double inv_sqrt_2pi = 1.0 / std::sqrt(2.0 * std::numbers::pi);
  const auto integrand = [n, inv_sqrt_2pi](double x) {
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    if (cdf <= 0.0) return 0.0;
    const double density = inv_sqrt_2pi * std::exp(-0.5 * x * x);
    return x * n * density * std::exp((n - 1) * std::log(cdf));
  };
  double sum = 0.5 * (integrand(kFrom) + integrand(kTo));
  for (int i = 1; i < kSteps; ++i) sum += integrand(kFrom + i * kStep);
  return sum * kStep;
}

std::vector<Straggler> node_spread_stragglers(double spread, std::int32_t nodes,
                                              std::int32_t gpus_per_node) {
  std::vector<Straggler> out;
  if (spread <= 0.0 || nodes <= 1) return out;
  const double speed =
      std::max(kSlowestRankSpeed, 1.0 - spread * expected_max_standard_normal(nodes));
  for (std::int32_t g = 0; g < gpus_per_node; ++g)
    out.push_back(Straggler{(nodes - 1) * gpus_per_node + g, speed, 1.0});
  return out;
}

}  // namespace fsdpsim::hardware
