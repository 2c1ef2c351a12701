// JSON -> the CUDA caching allocator's configuration: the scenario's `allocator` section, with
// PYTORCH_CUDA_ALLOC_CONF's option names, and `memory_fraction` for
// torch.cuda.set_per_process_memory_fraction. Absent: PyTorch's defaults. {"enabled": false}: no
// allocator model (reserved memory is then reported as its lower bound, the peak active memory).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/memory/allocator_config.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::app {

// `usable`: what the device leaves the allocator (GpuSpec::usable_memory()); `device_total`: the
// device's memory as cudaMemGetInfo reports it, which memory_fraction is a fraction of.
std::optional<memory::AllocatorConfig> allocator_from_json(const nlohmann::json* value,
                                                           const std::string& file, Bytes usable,
                                                           Bytes device_total);

}  // namespace fsdpsim::app
