#include "hardware/rank_pacing.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>

namespace fsdpsim::hardware {
namespace {

struct Slowest {
  std::int32_t rank = 0;  // where the slowest measured speed is
  double speed = 1.0;     // the job's slowest, or its expectation
};

// The slowest of `speeds` a job of `job_nodes` nodes gets (rank_pacing.hpp), if below 1.
std::optional<Slowest> slowest_for(const std::vector<double>& speeds, std::int32_t per_node,
                                   std::int32_t job_nodes) {
  if (speeds.empty()) return std::nullopt;
  const auto measured_nodes = static_cast<std::int32_t>(std::ssize(speeds) / per_node);
  const auto slowest = std::min_element(speeds.begin(), speeds.end());
  Slowest out{static_cast<std::int32_t>(slowest - speeds.begin()), *slowest};
  if (job_nodes < measured_nodes) {
    std::vector<double> node_slowest;
    for (std::int32_t k = 0; k < measured_nodes; ++k) {
      const auto first = speeds.begin() + static_cast<std::ptrdiff_t>(k) * per_node;
      node_slowest.push_back(*std::min_element(first, first + per_node));
    }
    std::sort(node_slowest.begin(), node_slowest.end());
    // w_k = C(K - k, n - 1) / C(K, n): w_1 = n / K, w_{k+1} = w_k (K - k - n + 1) / (K - k).
    const double K = measured_nodes;
    const double n = job_nodes;
    double weight = n / K;
    double expected = 0.0;
    for (std::int32_t k = 1;; ++k) {
      expected += weight * node_slowest[static_cast<std::size_t>(k - 1)];
      if (k == measured_nodes - job_nodes + 1) break;  // the later nodes are never the slowest
      weight *= (K - k - n + 1) / (K - k);
    }
    out.speed = expected;
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
  out.job_nodes = (std::max(world_size, 1) + per_node - 1) / per_node;
  out.sampled = out.job_nodes < out.measured_nodes;
  const auto slow_gpu = slowest_for(gpu, per_node, out.job_nodes);
  const auto slow_host = slowest_for(curves.host_speeds(), per_node, out.job_nodes);
  // A straggler must be a rank of the job (a job smaller than one node holds its first ranks).
  const auto place = [world_size](std::int32_t rank) { return rank % std::max(world_size, 1); };
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

}  // namespace fsdpsim::hardware
