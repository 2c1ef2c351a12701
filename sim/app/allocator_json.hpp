// JSON -> the CUDA caching allocator's configuration: the scenario's `allocator` section, with
// PYTORCH_CUDA_ALLOC_CONF's option names. Absent: PyTorch's defaults. {"enabled": false}: no
// allocator model (reserved memory is then reported as its lower bound, the peak active memory).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/memory/allocator_config.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::app {

std::optional<memory::AllocatorConfig> allocator_from_json(const nlohmann::json* value,
                                                           const std::string& file, Bytes capacity);

}  // namespace fsdpsim::app
