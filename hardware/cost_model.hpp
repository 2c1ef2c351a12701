// Cost models: pure functions of (spec, shape) -> time (STYLE.md). Each formula cites its source
// in the .cpp. Calibrated curves (issue: calibration harness) will sit in front of these
// fallbacks; the signatures stay.
#pragma once

#include <cstdint>

#include "hardware/gpu_spec.hpp"
#include "sim/units/op_shapes.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::hardware {

// Time of one kernel on one GPU: GEMMs from a roofline with wave-quantization efficiency,
// attention from its FLOPs at the attention efficiency (or memory bound), memory-bound kernels
// from bytes over achievable HBM bandwidth. Never below a minimum kernel duration.
Seconds kernel_time(const GpuSpec& gpu, const Kernel& kernel);

// Time of `kernel` while an NCCL collective holds `sms_taken` SMs (its channels' thread
// blocks): GEMMs and attention run on the remaining SMs, so their peak scales by the SMs left
// and their wave quantization is recomputed (a one-wave GEMM can need a second wave: NVIDIA
// developer forum t/337991, "Compute-communication overlap causes severe GEMM performance
// degradation because of tail effect", an H100 FSDP all-gather taking 24 SMs). Memory-bound
// kernels need few SMs to saturate HBM and keep their time.
Seconds kernel_time_sharing_sms(const GpuSpec& gpu, const Kernel& kernel, std::int32_t sms_taken);

enum class Collective : std::uint8_t {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  // From one root rank to all: DDP's buffer broadcast (broadcast_buffers). Not measured by the
  // calibration harness: always the ring model.
  kBroadcast,
};

// The ranks a collective runs over, as the topology sees them.
struct CommGroup {
  std::int32_t ranks = 1;           // group size n
  std::int32_t ranks_per_node = 1;  // members of the group on one node (n / nodes spanned)
};

// Time of one NCCL collective whose full (gathered / unreduced) buffer is `bytes`, from a
// hierarchical ring model: every byte crosses each link of the ring once, so the ring runs at
// the slower of NVLink (inside a node) and the node's aggregate NIC bandwidth (across nodes),
// each at its protocol efficiency, plus per-step latency; an all-reduce runs NCCL's tree across
// nodes or NVLS inside an NVLink-SHARP node where those are faster. Source formulas: nccl-tests
// doc/PERFORMANCE.md (busbw factors), NCCL src/graph/tuning.cc (latency model).
Seconds collective_time(const ClusterSpec& cluster, Collective op, CommGroup group, Bytes bytes);

// The part of collective_time() its group spends moving bytes through the nodes' NICs at the
// modelled rate: the transfer term when the network, not NVLink, bounds the ring (or tree), and
// 0 inside one node. At that rate the collective uses its node's NICs fully, every group of
// the same layout running beside it included (a group with r of a node's g GPUs gets r/g of the
// NICs, and the g/r groups of that layout run at once), so two such collectives of different
// communicators at the same time share the NICs (hardware/collective_cost.cpp). With a measured
// curve, the measured time less the model's latency.
Seconds collective_network_time(const ClusterSpec& cluster, Collective op, CommGroup group,
                                Bytes bytes);

// Bus bandwidth of the bottleneck link for a group (the asymptotic busbw of the ring model).
BytesPerSec ring_bus_bandwidth(const ClusterSpec& cluster, CommGroup group);

}  // namespace fsdpsim::hardware
