// What the harness measured, in the calibration profile schema (sim/app/calibration_json.cpp
// reads it; README "Calibrating a new cluster" documents it), and its atomic writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdpsim::harness {

struct PointResult {
  std::int64_t bytes = 0;
  double median_us = 0.0;
  double min_us = 0.0;
  double max_us = 0.0;
  std::int32_t repeats = 0;
};

struct SeriesResult {
  std::string collective;  // all_gather | reduce_scatter | all_reduce
  std::string dtype;       // bf16 | fp16 | fp32
  std::string group;       // world, intra_node, inter_node, shard_F, replicate_F
  std::int32_t ranks = 0;
  std::int32_t ranks_per_node = 0;
  std::string concurrent_with;  // empty unless measured alongside another collective
  std::vector<PointResult> points;
};

// Host time of one cudaMalloc of `bytes` and of its cudaFree on an idle device (medians).
struct AllocationResult {
  std::int64_t bytes = 0;
  double malloc_us = 0.0;
  double free_us = 0.0;
};

struct GemmResult {
  std::string dtype;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  double median_us = 0.0;
  double min_us = 0.0;
  double max_us = 0.0;
  std::int32_t repeats = 0;
  std::optional<double> under_nccl_us;
  std::string source;  // "plan" or "grid"
  // The same GEMM alone, timed just before under_nccl_us (the same clocks and temperature): the
  // baseline of its slowdown.
  std::optional<double> alone_beside_nccl_us;
};

// One rank's times in the "rank-speed" phase: the held GEMM (per launch, on its GPU), the same
// GEMM timed short before the hold, and an empty-kernel launch (its host).
struct RankSpeedResult {
  std::int32_t rank = 0;
  std::string host;
  double gemm_us = 0.0;
  double gemm_short_us = 0.0;
  double gemm_min_us = 0.0;
  double gemm_max_us = 0.0;
  double launch_us = 0.0;
};

// The "rank-speed" phase (rank_speed.hpp): a side^3 GEMM timed on every GPU of the job at once
// after `held_ms` of it, `repeats` repeats each, and `launches` kernel launches timed per rank.
struct RankSpeedsResult {
  std::string dtype;
  std::int64_t side = 0;
  double held_ms = 0.0;
  std::int32_t repeats = 0;
  std::int32_t launches = 0;
  std::vector<RankSpeedResult> ranks;  // by rank, every rank once
};

struct Results {
  std::string name;
  std::string created;
  std::string tool;
  std::string device_name;
  std::string compute_capability;
  std::int32_t sm_count = 0;
  std::int64_t memory_bytes = 0;
  std::string driver;
  std::string cuda_runtime;
  std::string nccl;
  std::string cublaslt;
  std::int32_t nodes = 0;
  std::int32_t gpus_per_node = 0;
  std::vector<std::string> hosts;
  std::vector<std::string> notes;
  bool complete = false;
  std::vector<SeriesResult> collectives;
  std::vector<GemmResult> gemms;
  std::optional<RankSpeedsResult> rank_speeds;
  std::optional<double> device_copy_GBps;
  std::optional<double> h2d_pinned_GBps;
  std::optional<double> d2h_pinned_GBps;
  std::optional<double> kernel_launch_us;
  std::vector<AllocationResult> allocations;
};

// The profile JSON (schema_version 1).
std::string to_json(const Results& results);

// Writes `content` to `path` through a temporary file in the same folder and a rename, so that a
// reader never sees half a profile. Throws HarnessError naming the path.
void write_atomically(const std::string& path, const std::string& content);

// Refuses (UsageError naming -o) an output write_atomically could not write: a folder that does
// not exist or is not writable, or a path that is a folder. Checked before the measurements
// start, so that a typo costs no NCCL start-up on every node.
void check_writable(const std::string& path);

// Refuses (UsageError naming -o) an output that is the --plan file, however it is spelled:
// the first save would replace the plan with the profile. Every rank checks it, before any
// rendezvous.
void check_output_is_not_the_plan(const std::string& output, const std::string& plan);

}  // namespace fsdpsim::harness
