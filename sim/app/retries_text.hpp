// "N cudaMalloc retries" (or "1 cudaMalloc retry"): how the reports name a predicted step's
// allocator retries (StepResult::reserved.alloc_retries, the sweep table's num_alloc_retries).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace fsdpsim::app {

inline std::string cuda_malloc_retries(std::int64_t retries) {
  return fmt::format("{} cudaMalloc {}", retries, retries == 1 ? "retry" : "retries");
}

}  // namespace fsdpsim::app
