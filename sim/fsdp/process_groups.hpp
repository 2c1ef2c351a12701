// The process groups an FSDP/DDP job communicates over, and where their ranks sit.
//
// Ranks are laid out node by node (rank = node * gpus_per_node + local rank, as torchrun and
// Slurm number them). A shard group is F consecutive ranks; the replicate group of a rank is
// every rank with the same index inside its shard group (DeviceMesh (replicate, shard) for
// HSDP; _init_utils.py::_init_intra_and_inter_node_groups for FSDP1 hybrid sharding).
#pragma once

#include <cstdint>
#include <string>

#include "hardware/cost_model.hpp"
#include "hardware/gpu_spec.hpp"

namespace fsdpsim::fsdp {

// A group of `size` ranks spaced `stride` apart: consecutive ranks (stride 1) or the replicas
// of one shard (stride = shard group size).
hardware::CommGroup comm_group(const hardware::ClusterSpec& cluster, std::int32_t size,
                               std::int32_t stride);

// Why a shard group of `size` ranks cannot be formed on this cluster, or empty: it must divide
// the world size and tile nodes (a divisor or a multiple of the GPUs per node).
std::string shard_group_problem(const hardware::ClusterSpec& cluster, std::int32_t size);

}  // namespace fsdpsim::fsdp
