#include "sim/app/op_labels.hpp"

#include "models/workload.hpp"
#include "sim/fsdp/process_groups.hpp"

namespace fsdpsim::app {

const char* phase_name(std::uint8_t phase) {
  switch (static_cast<fsdp::Phase>(phase)) {
    case fsdp::Phase::kForward:
      return "forward";
    case fsdp::Phase::kBackward:
      return "backward";
    case fsdp::Phase::kRecompute:
      return "recompute";
    case fsdp::Phase::kOptimizer:
      return "optimizer";
  }
  return "?";
}

const char* op_kind_name(engine::OpKind kind) {
  switch (kind) {
    case engine::OpKind::kCompute:
      return "compute";
    case engine::OpKind::kCommunication:
      return "communication";
    case engine::OpKind::kCopy:
      return "copy";
    case engine::OpKind::kCopyEngine:
      return "copy engine";
    case engine::OpKind::kMarker:
      return "marker";
  }
  return "?";
}

std::string collective_name(std::string_view op_name) {
  const auto dot = op_name.rfind('.');
  std::string name(dot == std::string_view::npos ? op_name : op_name.substr(dot + 1));
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  return name;
}

std::vector<std::string> group_names(const Scenario& scenario, const fsdp::Schedule& schedule) {
  std::vector<std::string> names;
  if (!schedule.units.empty()) {
    for (const fsdp::FsdpUnit& unit : schedule.units) names.push_back(unit.name);
    return names;
  }
  // DDP tags each op with its layer; only the layer names are needed, whatever the batch.
  models::WorkloadOptions options;
  options.micro_batch = scenario.training.micro_batch;
  options.seq_len = scenario.training.seq_len;
  options.decoder_seq_len = scenario.training.decoder_seq_len;
  for (const models::Layer& layer : models::build_workload(scenario.model, options).layers) {
    names.push_back(layer.name);
  }
  return names;
}

const std::string& group_name(const std::vector<std::string>& names, std::int32_t group) {
  static const std::string kNone = "-";
  if (group < 0 || static_cast<std::size_t>(group) >= names.size()) return kNone;
  return names[static_cast<std::size_t>(group)];
}

std::vector<bool> channels_crossing_nodes(const Scenario& scenario,
                                          const engine::Program& program) {
  constexpr std::string_view kPostForwardPrefix = "nccl:post_forward:";
  const hardware::ClusterSpec& cluster = scenario.hardware.cluster;
  const std::int32_t world = cluster.world_size();
  const std::int32_t shard =
      scenario.fsdp.shard_group_size > 0 ? scenario.fsdp.shard_group_size : cluster.gpus_per_node;
  const auto crosses = [&](std::int32_t size, std::int32_t stride) {
    const hardware::CommGroup group = fsdp::comm_group(cluster, size, stride);
    return group.ranks_per_node < group.ranks;
  };
  std::vector<bool> result;
  for (const std::string& name : program.channel_names) {
    if (name == "nccl:shard") {
      result.push_back(crosses(shard, 1));
    } else if (name == "nccl:replicate") {
      result.push_back(crosses(world / shard, shard));
    } else if (name.starts_with(kPostForwardPrefix)) {
      // nccl:post_forward:<k>, FSDP2's groups of k ranks after forward.
      result.push_back(crosses(std::stoi(name.substr(kPostForwardPrefix.size())), 1));
    } else {
      result.push_back(crosses(world, 1));
    }
  }
  return result;
}

}  // namespace fsdpsim::app
