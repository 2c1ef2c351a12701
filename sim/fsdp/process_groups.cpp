#include "sim/fsdp/process_groups.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fsdpsim::fsdp {

hardware::CommGroup comm_group(const hardware::ClusterSpec& cluster, std::int32_t size,
                               std::int32_t stride) {
  const std::int32_t gpn = cluster.gpus_per_node;
  if (stride == 1) return hardware::CommGroup{size, std::min(size, gpn)};
  // Members stride apart: a node holds gpn / stride of them when the stride is below the node
  // size, else one.
  const std::int32_t per_node = stride < gpn ? std::min(size, gpn / stride) : 1;
  return hardware::CommGroup{size, per_node};
}

std::string shard_group_problem(const hardware::ClusterSpec& cluster, std::int32_t size) {
  const std::int32_t world = cluster.world_size();
  const std::int32_t gpn = cluster.gpus_per_node;
  if (size <= 0 || world % size != 0) {
    return fmt::format("shard group size {} does not divide the world size {}", size, world);
  }
  if (size % gpn != 0 && gpn % size != 0) {
    return fmt::format("shard group size {} neither divides nor is a multiple of {} GPUs per node",
                       size, gpn);
  }
  return {};
}

}  // namespace fsdpsim::fsdp
