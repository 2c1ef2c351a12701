// Pieces of the collective model (cost_model.hpp: collective_time, ring_bus_bandwidth) that
// tests and calibration read on their own. O(1).
#pragma once

#include <cstdint>

#include "hardware/cost_model.hpp"
#include "hardware/gpu_spec.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::hardware {

// Bytes each rank sends per byte of the full buffer S: (n-1)/n for all-gather and
// reduce-scatter, 2(n-1)/n for all-reduce, 1 for broadcast (nccl-tests doc/PERFORMANCE.md busbw
// factors).
double ring_wire_factor(Collective op, std::int32_t ranks);

// The ring's latency term of collective_time (an all-reduce across nodes may take NCCL's tree
// instead, when that is faster): the first chunk's trip around the ring,
// collective_base_latency + intra-node steps * nvlink_hop_latency
//                         + inter-node steps * network_hop_latency,
// with steps = n-1 (all-gather, reduce-scatter) or 2(n-1) (all-reduce), of which nodes-1
// (or 2(nodes-1)) cross the network (NCCL src/graph/tuning.cc, ncclTopoTuneModel); a broadcast
// pays n hops, all at the network's latency once the group spans nodes (tuning.cc's ring
// Broadcast with channels on different paths).
// Zero for a one-rank group. Throws std::invalid_argument for an impossible group.
Seconds collective_latency(const ClusterSpec& cluster, Collective op, CommGroup group);

}  // namespace fsdpsim::hardware
