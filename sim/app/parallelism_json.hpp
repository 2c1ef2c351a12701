// JSON -> fsdp::TrainingConfig and fsdp::FsdpConfig: the `training`, `fsdp`, `ddp` and `deepspeed`
// sections of a scenario, with PyTorch's names for every knob, validated against each other and the
// cluster.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hardware/gpu_spec.hpp"
#include "sim/fsdp/fsdp_config.hpp"

namespace fsdpsim::app {

fsdp::TrainingConfig training_from_json(const nlohmann::json& value, const std::string& file,
                                        fsdp::Parallelism parallelism);

// `fsdp`, `ddp` and `deepspeed` may be null (absent). Checks the shard group against the cluster.
fsdp::FsdpConfig parallel_config_from_json(const nlohmann::json* fsdp, const nlohmann::json* ddp,
                                           const nlohmann::json* deepspeed, const std::string& file,
                                           fsdp::Parallelism parallelism,
                                           const hardware::ClusterSpec& cluster);

}  // namespace fsdpsim::app
