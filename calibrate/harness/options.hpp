// Command line of fsdpsim-calibrate (hand-parsed: the harness needs no CLI library).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fsdpsim::harness {

enum class LaunchMode { kAuto, kSingleProcess, kEnvironment };

struct Options {
  std::string output = "fsdpsim-calibration.json";
  std::string name;  // default: GPU name and world size
  LaunchMode launch = LaunchMode::kAuto;
  std::string rendezvous_dir;  // shared folder for the NCCL unique id file
  std::string rendezvous_tag;  // names the file; default from the job id
  double timeout_s = 300.0;
  std::vector<std::string> phases{"collectives",     "concurrent", "gemm",
                                  "gemm-under-nccl", "rank-speed", "memory"};
  std::vector<std::string> collectives{"all_gather", "reduce_scatter", "all_reduce"};
  std::vector<std::string> dtypes{"bf16", "fp32"};
  std::vector<std::string> groups{"world", "intra", "inter", "shard"};
  std::vector<std::int32_t> shard_groups;
  std::int64_t min_bytes = 1024;
  std::int64_t max_bytes = std::int64_t{4} << 30;
  std::int64_t factor = 2;
  std::int32_t warmup = 5;
  std::int32_t repeats = 20;
  std::vector<std::string> gemm_dtypes{"bf16", "fp16", "fp32", "tf32", "fp8"};
  std::vector<std::int64_t> gemm_grid{1024, 4096, 16384};
  std::string plan;  // `fsdpsim calibrate plan` output
  bool help = false;
  bool version = false;
};

// Throws UsageError with the offending option.
Options parse_options(int argc, char** argv);

std::string help_text();

bool has_phase(const Options& options, const std::string& phase);

}  // namespace fsdpsim::harness
