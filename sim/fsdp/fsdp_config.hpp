// Typed FSDP and training configuration, named after PyTorch's arguments
// (torch/distributed/fsdp/api.py, fully_sharded_data_parallel.py). Plain aggregates: the app
// fills and validates them from JSON; nothing here parses strings.
#pragma once

#include <cstdint>

#include "sim/units/dtype.hpp"

namespace fsdpsim::fsdp {

enum class ShardingStrategy : std::uint8_t { kFullShard };

// torch.distributed.fsdp.BackwardPrefetch; kNone is `backward_prefetch=None`.
enum class BackwardPrefetch : std::uint8_t { kBackwardPre, kBackwardPost, kNone };

enum class ActivationCheckpointing : std::uint8_t {
  kNone,
  kFull,  // checkpoint_wrapper around every transformer block
};

enum class Optimizer : std::uint8_t {
  kAdamW,  // torch.optim.AdamW, foreach implementation (the CUDA default), fp32 states
};

struct FsdpConfig {
  ShardingStrategy sharding_strategy = ShardingStrategy::kFullShard;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kBackwardPre;  // PyTorch default
  bool forward_prefetch = false;                                        // PyTorch default
  bool limit_all_gathers = true;                                        // PyTorch default
  // _limiter_utils.py: _FreeEventQueue._max_num_inflight_all_gathers = 2 ("empirically chosen").
  std::int32_t max_inflight_all_gathers = 2;
  // MixedPrecision(param_dtype, reduce_dtype); reduce_dtype defaults to param_dtype in PyTorch.
  Dtype param_dtype = Dtype::kBf16;
  Dtype reduce_dtype = Dtype::kBf16;
};

struct TrainingConfig {
  std::int64_t global_batch = 0;  // sequences per optimizer step, all ranks together
  std::int64_t micro_batch = 1;   // sequences per rank per forward/backward
  std::int64_t seq_len = 0;
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::kNone;
  Optimizer optimizer = Optimizer::kAdamW;
  bool flash_attention = true;
};

}  // namespace fsdpsim::fsdp
