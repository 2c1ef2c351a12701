// What a calibration's measured rank speeds (CalibratedCurves::gpu_speeds, host_speeds) make of
// a job: the slowest GPU and the slowest host it can expect, as stragglers. A synchronous job
// runs at its slowest rank's pace, since every collective waits for it (the second slowest adds
// nothing while the slowest holds everyone), so these two are what the speeds cost.
//
// Nodes are the unit a job is given (the measurement's ranks per node; each rank alone when the
// profile does not say). A job on at least as
// many nodes as were measured holds the slowest measured GPU and host (its other nodes taken to
// be like the measured ones, so none slower than their slowest). A job on fewer, placed on n of
// the K measured nodes at random, can expect as its slowest the mean over every n-subset of the
// subset's slowest: with the nodes' slowest speeds sorted, m_1 <= ... <= m_K, the k-th is the
// subset's slowest in C(K - k, n - 1) of the C(K, n) subsets. A job on part of one node, w of
// its GPUs: the mean over the measured nodes of the same expectation over w of the node's GPUs.
#pragma once

#include <cstdint>
#include <vector>

#include "hardware/calibrated_curves.hpp"
#include "hardware/gpu_spec.hpp"

namespace fsdpsim::hardware {

struct RankPacing {
  std::int32_t measured_nodes = 0;
  std::int32_t job_nodes = 0;  // the job's ranks in the measurement's nodes, rounded up
  // Fewer job nodes than measured ones, or part of one node: the GPU speed is an expectation over
  // placements, its straggler on the job's first node at the local rank of the slowest measured
  // GPU (the host's likewise).
  bool sampled = false;
  // Rank order; at most two (the slowest GPU, compute_speed < 1, and the slowest host,
  // host_speed < 1), one when they share a rank; none for a side no slower than rank 0.
  std::vector<Straggler> stragglers;
};

// The pacing of a job of `world_size` ranks; nothing when the calibration measured no rank speeds.
RankPacing rank_pacing(const CalibratedCurves& curves, std::int32_t world_size);

// E[the largest of n independent standard normal draws], n >= 1, by quadrature of
// x n phi(x) Phi(x)^(n-1): 0, 0.5642, 0.8463, 1.0294 for n = 1..4, 1.4236 for 8, 1.7660 for 16
// (the expected normal order statistics tabulated by Harter, Biometrika 48, 1961).
double expected_max_standard_normal(std::int32_t n);

// `hardware.node_speed_spread`, a what-if without a measurement: nodes whose GPUs run at speeds
// spread normally around the preset's, `spread` the coefficient of variation. A job on `nodes`
// nodes runs at its slowest node's pace, expected at 1 - spread * expected_max_standard_normal(
// nodes): the last node's ranks as stragglers of that compute speed (none on one node, whose
// expected speed is the preset's); at least kSlowestRankSpeed.
std::vector<Straggler> node_spread_stragglers(double spread, std::int32_t nodes,
                                              std::int32_t gpus_per_node);

}  // namespace fsdpsim::hardware
