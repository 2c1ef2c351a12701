// Hierarchical ring model of NCCL collectives.
//
// time = latency + wire bytes / bus bandwidth          (alpha-beta, as NCCL's own tuner:
//                                                      src/graph/tuning.cc ncclTopoGetAlgoTime,
//                                                      time = lat + nBytes / bw)
// wire bytes per rank = factor * S, factor (n-1)/n for all-gather / reduce-scatter, 2(n-1)/n
// for all-reduce and 1 for broadcast, S the full buffer (nccl-tests doc/PERFORMANCE.md: busbw =
// algbw * factor, so busbw is the rate each rank's link carries).
//
// Bus bandwidth (ring_bus_bandwidth):
// - Inside one node the ring runs over NVLink: nvlink_bandwidth * nvlink_efficiency (measured
//   ring busbw ~ 78 % of line rate on A100, ~ 81 % on H100/H200; configs/validation/
//   nccl_reference.csv).
// - Across nodes, NCCL builds one ring per channel and spreads the channels over the NICs
//   (src/graph/search.cc, the ring search per channel); every byte crosses each node boundary once
//   per ring, so the node's NIC traffic equals one rank's link traffic and the bound is the node's
//   aggregate NIC bandwidth * nic_efficiency (NVIDIA/nccl#812: DGX-A100 with 8x200 Gb/s IB measures
//   192 GB/s all-reduce busbw = 0.96 * 200 GB/s).
// - Only NICs next to a participating GPU carry traffic: NCCL sends from a GPU through the NIC
//   closest to it, or through a NIC next to another GPU *of the same communicator* via PXN
//   (NCCL 2.12, "Doubling all2all Performance with NVIDIA Collective Communication Library
//   2.12", NVIDIA developer blog 2022). So a group with r of a node's g GPUs gets the share
//   r/g of the node's NICs -- one NIC per GPU on DGX-style nodes. With r = 1 (hybrid sharding's
//   replicate group: the same local rank on every node) that is one NIC: DGX-A100 200 Gb/s
//   -> 24 GB/s, the per-HDR-NIC rate an NCCL maintainer quotes (NVIDIA/nccl#412).
// - The ring gets slower as it spans more nodes (NVIDIA/nccl#1229, nccl-tests#283): a pipelined
//   ring moves at the pace of its slowest node-to-node hop at each instant, and every node added
//   is another hop through the fabric that can be congested. A user's H100 cluster
//   (NVIDIA/nccl#1229, figures given as "just like", without NIC, message size or NCCL
//   version): reduce-scatter busbw 360, 345, 320, 300, 280, 260 GB/s at 4, 8, 16, 32, 64, 128
//   nodes, a loss linear in log2(nodes). Its least-squares line gives
//   382 GB/s at 2 nodes and 20.4 GB/s less per doubling, 0.0534 of the two-node value; so
//   busbw(nodes) = busbw(2 nodes) * (1 - loss * log2(nodes / 2)), and nic_efficiency is the
//   two-node value (0.96 x 400 x (1 - 0.0534) = 363 GB/s at 4 nodes against 360 reported,
//   assuming 8x400 Gb/s per node, DGX H100's).
//
// Latency (collective_latency): NCCL's ring latency model (src/graph/tuning.cc,
// ncclTopoTuneModel, NCCL 2.30.7): baseLat + (nsteps - nInterSteps) * intraLat
// + nInterSteps * interLat, nsteps = n-1 or 2(n-1), nInterSteps = nodes-1 or 2(nodes-1). Only
// the ring's node crossings pay the network latency: the latency is the first chunk's path
// around the pipelined ring. The preset constants are NCCL's LL128 ring row (see
// configs/hardware/*.json "sources"). Left out: NCCL raises intraLat of a ring across nodes to
// its per-step network overhead (getNetOverhead: 1 us on Intel hosts, 2 on AMD, against LL128's
// 1.9) and adds the network plugin's reported latency to interLat (graph->latencyInter: 0 for
// NCCL's own IB and socket transports, src/transport/net_ib/init.cc and net_socket.cc).
// A ring with one rank per node (hybrid sharding's replicate group) pays the tree's network hop
// latency at each step instead (NCCL 2.23.4 and later: "With ppn=1 latencies are fully exposed,
// use the Tree network latency").
//
// All-reduce across nodes may also run NCCL's tree (a double binary tree across nodes, a chain
// inside each; NCCL 2.4+), and NCCL times both and runs the faster (src/graph/tuning.cc,
// ncclTopoGetAlgoTime). Tree latency: baseLat + 2 * ((ranks per node - 1) * intraLat
// + log2i(nodes) * interLat), with the Tree/LL128 row of NCCL's hwLat (NVLink 1.25 us, network
// 8.5 us; baseLat 14 us, the ring's) -- logarithmic in the node count where the ring's is
// linear in the rank count; its bus bandwidth is 0.92 of the ring's (`busBw * .92` for tree
// all-reduce in the same function), and on two nodes with several ranks each 0.92 of
// min(NVLink, twice the ring's), since each byte then crosses the network once (tree_all_reduce
// below). Small all-reduces over many nodes (gradient norms, overflow flags, DeepSpeed's
// per-bias buckets) take the tree; large ones the ring, or on two nodes the tree.
//
// All-reduce inside one node may run NCCL's NVLS instead (NVLink SHARP, NCCL 2.17+, on NVSwitch
// systems that have it: H100/H200, not A100; src/graph/tuning.cc nvlsEfficiency, and NCCL
// disables NVLS across nodes without CollNet, where NVLSTree is not modelled). Each GPU sends its
// buffer to the switch once and receives the reduced buffer once, whatever the rank count, so
// time = nvls_all_reduce_latency + S / (nvls_all_reduce_efficiency * nvlink_bandwidth), both
// fitted to the measured 8x H200 rows (configs/hardware/h200-sxm-141gb.json "sources"); the
// model runs the faster of it and the ring, as NCCL's tuner does. Inside one node the ring's
// latency is the measured 8-GPU one (configs/hardware/*.json), so small all-reduces stay rings.
//
// NIC sharing (collective_network_time): at its modelled rate a collective across nodes uses its
// nodes' NICs fully (the share r/g of a group with r of a node's g GPUs, times the g/r groups of
// that layout that run at once), so its transfer term is the time it holds them. The executor
// slows that part when another communicator's collective is on the NICs at the same time
// (sim/engine/program.hpp, Op::network_time): two communicators' channels on the same NICs share
// their line rate, NCCL arbitrating nothing between communicators (each runs its own kernels and
// proxy thread).
//
// Edge cases: a one-rank collective costs 0 -- NCCL turns it into a local copy or nothing
// (src/enqueue.cc: ncclLaunchOneRank; its cost table is 0 for nRanks == 1), and the copy, when
// out of place, is a memory-bound kernel the caller prices if it wants. An empty collective
// costs 0 too: NCCL discards it before launching anything (src/enqueue.cc taskAppend, "Empty
// collectives can be discarded").
#include "hardware/collective_cost.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "hardware/calibrated_curves.hpp"

namespace fsdpsim::hardware {
namespace {

void check_group(const ClusterSpec& cluster, CommGroup group) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(
        "hardware: impossible CommGroup{ranks=" + std::to_string(group.ranks) +
        ", ranks_per_node=" + std::to_string(group.ranks_per_node) + "}: " + why);
  };
  if (group.ranks < 1) fail("ranks must be >= 1");
  if (group.ranks_per_node < 1 || group.ranks_per_node > group.ranks) {
    fail("ranks_per_node must be in [1, ranks]");
  }
  if (group.ranks % group.ranks_per_node != 0) fail("ranks must be a multiple of ranks_per_node");
  if (group.ranks_per_node > cluster.gpus_per_node) {
    fail("ranks_per_node exceeds gpus_per_node = " + std::to_string(cluster.gpus_per_node));
  }
  if (group.ranks / group.ranks_per_node > cluster.nodes) {
    fail("the group spans more nodes than the cluster has (" + std::to_string(cluster.nodes) + ")");
  }
}

// The share of the two-node ring busbw a ring across `nodes` nodes keeps (see the header).
double scale_out_fraction(const ClusterSpec& cluster, std::int64_t nodes) {
  if (nodes <= 2) return 1.0;
  const double fraction =
      1.0 - cluster.nic_busbw_loss_per_node_doubling * std::log2(static_cast<double>(nodes) / 2.0);
  if (fraction <= 0.0) {
    throw std::invalid_argument(
        "hardware: nic_busbw_loss_per_node_doubling leaves no bandwidth at " +
        std::to_string(nodes) + " nodes");
  }
  return fraction;
}

std::int64_t ring_steps(Collective op, std::int64_t ranks) {
  return op == Collective::kAllReduce ? 2 * (ranks - 1) : ranks - 1;
}

// NCCL tuning.cc hwLat, Tree/LL128 row, and the tree all-reduce's share of the ring's bandwidth.
constexpr Seconds kTreeNvlinkHopLatency = microseconds(1.25);
constexpr Seconds kTreeNetworkHopLatency = microseconds(8.5);
constexpr double kTreeBusBandwidthShare = 0.92;

// log2i: floor(log2(n)).
std::int64_t floor_log2(std::int64_t n) {
  std::int64_t k = 0;
  while (n > 1) {
    n >>= 1;
    ++k;
  }
  return k;
}

// A collective's time as its latency and its transfer, and whether the nodes' NICs bound the
// transfer.
struct Phases {
  Seconds latency{0.0};
  Seconds transfer{0.0};
  bool network_bound = false;
  [[nodiscard]] Seconds total() const { return latency + transfer; }
};

// The network bounds a ring across nodes unless NVLink is the slower link.
bool network_bounds(const ClusterSpec& cluster, CommGroup group) {
  if (group.ranks_per_node == group.ranks) return false;
  return group.ranks_per_node == 1 ||
         ring_bus_bandwidth(cluster, group).value() <
             (cluster.nvlink_bandwidth * cluster.nvlink_efficiency).value();
}

// NCCL's tree all-reduce over a group spanning several nodes (see the header). On two nodes
// the tree reduces inside each node and sends each byte across the network once, where the
// ring sends 2(n-1)/n of them, so its busbw can pass the NICs' (maintainers in NVIDIA/nccl#812
// and nccl-tests#196): NCCL's search raises the tree's intra-node bandwidth up to twice the
// inter-node one (src/graph/search.cc, "increase bwIntra for trees (2 nodes or collnet)") and
// its tuner prices the tree at it (src/graph/tuning.cc: nNodes <= 2 ? bwIntra : bwInter). With
// one rank per node there is nothing to reduce inside a node, and no gain.
Phases tree_all_reduce(const ClusterSpec& cluster, CommGroup group, Bytes bytes) {
  const std::int64_t nodes = group.ranks / group.ranks_per_node;
  const Seconds latency =
      cluster.collective_base_latency +
      2.0 * (kTreeNvlinkHopLatency * static_cast<double>(group.ranks_per_node - 1) +
             kTreeNetworkHopLatency * static_cast<double>(floor_log2(nodes)));
  const double wire_bytes =
      ring_wire_factor(Collective::kAllReduce, group.ranks) * static_cast<double>(bytes.value());
  const BytesPerSec ring = ring_bus_bandwidth(cluster, group);
  const BytesPerSec nvlink = cluster.nvlink_bandwidth * cluster.nvlink_efficiency;
  const bool two_node_tree = nodes <= 2 && group.ranks_per_node > 1;
  const BytesPerSec bus = two_node_tree ? std::min(nvlink, ring * 2.0) : ring;
  return {latency, Seconds(wire_bytes / (kTreeBusBandwidthShare * bus.value())),
          two_node_tree ? bus.value() < nvlink.value() : network_bounds(cluster, group)};
}

// NCCL's NVLS all-reduce inside one node (see the header): the buffer goes to the switch and
// comes back once per GPU, at the preset's measured share of the NVLink rate.
Phases nvls_all_reduce(const ClusterSpec& cluster, Bytes bytes) {
  const BytesPerSec rate = cluster.nvlink_bandwidth * cluster.nvls_all_reduce_efficiency;
  return {cluster.nvls_all_reduce_latency,
          Seconds(static_cast<double>(bytes.value()) / rate.value()), false};
}

// The model's phases (no calibration) of a collective with more than one rank and bytes.
Phases modelled_phases(const ClusterSpec& cluster, Collective op, CommGroup group, Bytes bytes) {
  const double wire_bytes = ring_wire_factor(op, group.ranks) * static_cast<double>(bytes.value());
  const Phases ring{collective_latency(cluster, op, group),
                    Seconds(wire_bytes / ring_bus_bandwidth(cluster, group).value()),
                    network_bounds(cluster, group)};
  if (op != Collective::kAllReduce) return ring;
  if (group.ranks_per_node == group.ranks) {
    if (cluster.nvls_all_reduce_efficiency <= 0.0) return ring;
    const Phases nvls = nvls_all_reduce(cluster, bytes);
    return nvls.total() < ring.total() ? nvls : ring;
  }
  const Phases tree = tree_all_reduce(cluster, group, bytes);
  return tree.total() < ring.total() ? tree : ring;
}

void check_bytes(Bytes bytes) {
  if (bytes.value() < 0) {
    throw std::invalid_argument("hardware: collective_time got negative bytes " +
                                std::to_string(bytes.value()));
  }
}

}  // namespace

double ring_wire_factor(Collective op, std::int32_t ranks) {
  if (ranks <= 1) return 0.0;
  // A broadcast passes the whole buffer down the ring: busbw = algbw (nccl-tests
  // doc/PERFORMANCE.md; NCCL's tuner: ring algbw = busbw * nRanks / nsteps with nsteps = nRanks
  // for broadcast, src/graph/tuning.cc).
  if (op == Collective::kBroadcast) return 1.0;
  const auto n = static_cast<double>(ranks);
  const double factor = (n - 1.0) / n;
  return op == Collective::kAllReduce ? 2.0 * factor : factor;
}

BytesPerSec ring_bus_bandwidth(const ClusterSpec& cluster, CommGroup group) {
  check_group(cluster, group);
  const BytesPerSec nvlink = cluster.nvlink_bandwidth * cluster.nvlink_efficiency;
  if (group.ranks_per_node == group.ranks) return nvlink;  // inside one node (or one rank)

  const double nic_share =
      static_cast<double>(group.ranks_per_node) / static_cast<double>(cluster.gpus_per_node);
  const BytesPerSec nic = cluster.nic_bandwidth_per_node *
                          (cluster.nic_efficiency * std::min(1.0, nic_share) *
                           scale_out_fraction(cluster, group.ranks / group.ranks_per_node));
  // With one rank per node the ring has no NVLink hop; otherwise NVLink may still be the bound.
  return group.ranks_per_node == 1 ? nic : std::min(nvlink, nic);
}

Seconds collective_latency(const ClusterSpec& cluster, Collective op, CommGroup group) {
  check_group(cluster, group);
  if (group.ranks == 1) return Seconds(0.0);
  const std::int64_t nodes = group.ranks / group.ranks_per_node;
  if (op == Collective::kBroadcast) {
    // tuning.cc's ring Broadcast: nsteps = nRanks hops of one kind, the network's once the ring
    // leaves the node (hw[a] = nNodes == 1 ? intraHw[a] : NCCL_HW_NET), all of them when the
    // channels take different paths (one when they all take the same: not assumed here).
    const Seconds hop = nodes == 1 ? cluster.nvlink_hop_latency : cluster.network_hop_latency;
    return cluster.collective_base_latency + hop * static_cast<double>(group.ranks);
  }
  const std::int64_t steps = ring_steps(op, group.ranks);
  const std::int64_t inter_steps = ring_steps(op, nodes);  // 0 inside one node
  const std::int64_t intra_steps = steps - inter_steps;
  // "With ppn=1 latencies are fully exposed, use the Tree network latency" (tuning.cc since NCCL
  // 2.23.4): a ring with one rank per node, as hybrid sharding's replicate group, pays the tree's
  // network hop at every step.
  const Seconds inter_hop =
      group.ranks_per_node == 1 ? kTreeNetworkHopLatency : cluster.network_hop_latency;
  return cluster.collective_base_latency +
         cluster.nvlink_hop_latency * static_cast<double>(intra_steps) +
         inter_hop * static_cast<double>(inter_steps);
}

Seconds collective_time(const ClusterSpec& cluster, Collective op, CommGroup group, Bytes bytes) {
  check_group(cluster, group);
  check_bytes(bytes);
  if (group.ranks == 1 || bytes.value() == 0) return Seconds(0.0);
  // Measured curves first (calibrated_curves.hpp), the ring model for what they do not cover.
  if (const auto measured = calibrated_collective_time(cluster.gpu, op, group, bytes)) {
    return *measured;
  }
  return modelled_phases(cluster, op, group, bytes).total();
}

Seconds collective_network_time(const ClusterSpec& cluster, Collective op, CommGroup group,
                                Bytes bytes) {
  check_group(cluster, group);
  check_bytes(bytes);
  if (group.ranks == 1 || bytes.value() == 0 || !network_bounds(cluster, group)) {
    return Seconds(0.0);
  }
  if (const auto measured = calibrated_collective_time_uncounted(cluster.gpu, op, group, bytes)) {
    return Seconds(std::max(0.0, (*measured - collective_latency(cluster, op, group)).value()));
  }
  const Phases phases = modelled_phases(cluster, op, group, bytes);
  return phases.network_bound ? phases.transfer : Seconds(0.0);
}

}  // namespace fsdpsim::hardware
