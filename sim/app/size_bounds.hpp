// Upper bounds on the sizes a scenario may give, far above any model or run trained (GPT-1T: 128
// layers, d_model 25600, 160 heads), that keep every byte count the model builders form
// (tokens x width x bytes, unfused attention's batch x heads x seq^2 x bytes, a custom layer's
// bytes per sample x micro-batch x count) within 64 bits. The README lists them.
#pragma once

#include <cstdint>

namespace fsdpsim::app::size_bounds {

inline constexpr std::int64_t kLayers = 16384;    // n_layers, n_decoder_layers, custom count
inline constexpr std::int64_t kWidth = 262144;    // d_model, d_kv
inline constexpr std::int64_t kFfn = 1048576;     // ffn_dim
inline constexpr std::int64_t kHeads = 4096;      // n_heads, n_kv_heads
inline constexpr std::int64_t kVocab = 16777216;  // vocab
inline constexpr std::int64_t kSeq = 1048576;     // max_seq_len, seq_len, decoder_seq_len
// T5's relative_attention_num_buckets (HF default 32): buckets past the sequence length are
// never used, and buckets x heads is the bias table's size.
inline constexpr std::int64_t kRelativeAttentionBuckets = kSeq;
inline constexpr std::int64_t kTokens = std::int64_t{1} << 24;        // micro_batch x seq_len
inline constexpr std::int64_t kCustomParams = std::int64_t{1} << 40;  // per custom layer
inline constexpr std::int64_t kCustomBytesPerSample = std::int64_t{1} << 36;
// A custom layer's forward FLOPs per sample: 100x a GPT-1T layer's forward over a 1M-token
// sequence (2 x 7.9e9 parameters x 2^20 tokens = 1.6e16), so that a value past any model is
// refused where it is written; its backward, twice that, as the backward it defaults to. (One
// within the bound can still make an operation of a large micro-batch outlast a day on the
// preset's GPU, which the simulation refuses, naming the operation: README, size bounds.)
inline constexpr double kCustomForwardFlopsPerSample = 1e18;
inline constexpr double kCustomBackwardFlopsPerSample = 2.0 * kCustomForwardFlopsPerSample;
// Kernel launches of one forward of a custom model (count x kernels over its layers): those of
// a transformer at the layer bound (16384 layers of ~30 launches). The simulation's time and
// memory grow with them: 2^20 launches took 7 s and 4 GiB per micro-batch on a 2-core CI
// machine, where GPT-175B launches a few thousand.
inline constexpr std::int64_t kCustomKernelsPerForward = std::int64_t{1} << 19;

// Memory amounts (device memory, cached-block thresholds, DDP buckets): 1 PiB, thousands of times
// any GPU's memory, so that byte counts and their sums stay far within 64 bits.
inline constexpr std::int64_t kMemoryBytes = std::int64_t{1} << 50;
inline constexpr std::int64_t kMemoryGiB = kMemoryBytes >> 30;
inline constexpr std::int64_t kMemoryMiB = kMemoryBytes >> 20;

// Micro-batches in one optimizer step (global_batch / (micro_batch x data-parallel GPUs)). Each
// is simulated op by op: 1000 of GPT-175B's on 128 GPUs took 38 s and 7.5 GiB on a 2-core CI
// machine, where published FSDP runs accumulate at most a few hundred.
inline constexpr std::int64_t kMicroBatchesPerStep = 1024;

// Layer passes of one optimizer step (layers, encoder and decoder or custom counts summed, x
// micro-batches): the ops to simulate grow with them whatever the layers' widths. GPT-175B's 96
// layers x 1024 micro-batches is 98,304; 4096 narrow layers x 8 micro-batches (32,768) took 4 s
// and 2 GiB on a 2-core machine, and 16384 x 1024 would have taken hours and hundreds of GiB.
inline constexpr std::int64_t kLayerPassesPerStep = std::int64_t{1} << 17;

}  // namespace fsdpsim::app::size_bounds
