// `fsdpsim merge`: joins the CSV slices of a sharded sweep (`fsdpsim sweep --shard K/N`) into the
// table the unsharded sweep writes, byte for byte, and prints the same summary (Pareto front,
// best point that fits).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/app/csv_table.hpp"

namespace CLI {
class App;
}

namespace fsdpsim::app {

struct MergeOptions {
  std::vector<std::string> inputs;  // CSV files written by sweep --out
  std::string csv_path;             // --out PATH|- (default '-')
  std::string md_path;              // --md PATH|-
  std::size_t top = 20;             // --top N
  bool allow_gaps = false;          // --allow-gaps: accept missing indices
};

// Reads the slices; every one must have the same header and each index may appear once. Rows are
// sorted by index. Unless `allow_gaps`, the indices must be 0..n-1 (a missing slice is an error).
// Throws ConfigError naming the file.
SweepTable merge_tables(const std::vector<std::string>& inputs, bool allow_gaps);

CLI::App* add_merge_command(CLI::App& app, MergeOptions& options);

// Returns the process exit code; throws ConfigError on bad input.
int merge_command(const MergeOptions& options);

}  // namespace fsdpsim::app
