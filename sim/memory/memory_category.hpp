// What a tensor holds, for the breakdown of memory at its peak.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace fsdpsim::memory {

enum class MemoryCategory : std::uint8_t {
  kParameters,      // sharded and unsharded (all-gathered) parameters, and module buffers
  kGradients,       // sharded gradients and unsharded gradient buffers
  kOptimizerState,  // e.g. Adam moments
  kActivations,     // tensors saved for backward and layer temporaries
  kCommunication,   // collective inputs/outputs that are not parameters or gradients
  kWorkspace,       // library workspaces
};
inline constexpr std::size_t kMemoryCategoryCount = 6;

constexpr std::string_view category_name(MemoryCategory c) {
  constexpr std::array<std::string_view, kMemoryCategoryCount> kNames = {
      "parameters", "gradients", "optimizer_state", "activations", "communication", "workspace"};
  return kNames[static_cast<std::size_t>(c)];
}

}  // namespace fsdpsim::memory
