// The most ops a simulation may hold (every micro-batch of every step it runs: a warm-up step and
// the measured one): what the engine simulates op by op, so what its time and memory grow with. The
// scenario's own bounds (micro-batches, layer passes: sim/app/size_bounds.hpp) are checked where
// they are written, but ops per layer pass differ by model and wrap policy: in the two steps,
// Llama-3.1-8B's block is 134 ops, GPT-175B's 173, T5's 402 (encoder and decoder layers alike), a
// Llama block whose linears are units of their own (block_and_linear) 265-373. The total is
// projected from the first two micro-batches (the second accumulates gradients, the first does
// not) and refused before the others are built.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace fsdpsim::fsdp {

// Above the largest transformer_block simulations of GPT and Llama within the micro-batch and
// layer-pass bounds (GPT-175B, 96 layers x 1024 micro-batches: 17.0M ops; Llama-3.1-8B widened to
// 128 layers x 1024: 15.5M ops, 8 s and 4.0 GB on a 2-core machine, /usr/bin/time, 2026-12).
// Memory grows with the ops (about 250 B each) and past a few GB the kernel's page handling with
// it: 128 such layers wrapped block_and_linear, 33.9M ops, took 55 s (38 s of it system time) and
// 9.4 GB, where 17.0M of them took 11 s and 4.7 GB.
inline constexpr std::int64_t kMaxSimulatedOps = 25'000'000;

class StepSizeError : public std::length_error {
 public:
  using std::length_error::length_error;
};

}  // namespace fsdpsim::fsdp
