// How reports name the ops of an FSDP program: its phase tag, its kind, the collective of a
// communication op, and the FSDP unit (or DDP layer) that Op::group points at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/app/scenario.hpp"
#include "sim/fsdp/schedule.hpp"

namespace fsdpsim::app {

// "forward", "backward", "recompute", "optimizer" (fsdp::Phase), "?" for other tags.
const char* phase_name(std::uint8_t phase);

// "compute", "communication", "copy", "marker".
const char* op_kind_name(engine::OpKind kind);

// The collective of a communication op, from its name's last segment with '_' read as '-':
// "blocks.3.all_gather" -> "all-gather".
std::string collective_name(std::string_view op_name);

// A name for each Op::group value of the schedule: the FSDP unit names, or for DDP (no units;
// groups are layers) the model's layer names.
std::vector<std::string> group_names(const Scenario& scenario, const fsdp::Schedule& schedule);

// "-" for ungrouped ops (-1) and groups outside `names`.
const std::string& group_name(const std::vector<std::string>& names, std::int32_t group);

// For each channel (NCCL communicator) of the program: does its group span nodes (so its ring
// runs over the network rather than NVLink)? Channels are named by the schedule builders:
// nccl:world, nccl:shard (the hybrid shard group), nccl:replicate, nccl:post_forward:<k> (FSDP2's
// groups of k ranks after forward).
std::vector<bool> channels_crossing_nodes(const Scenario& scenario, const engine::Program& program);

}  // namespace fsdpsim::app
