// The plan `fsdpsim calibrate plan SCENARIO -o PLAN` writes (sim/app/calibrate_command.cpp):
// line-oriented text, '#' comments,
//   shard_group F                                   a hybrid shard group size
//   gemm DTYPE M N K BATCH COUNT                    a GEMM shape the scenario prices
//   collective OP RANKS RANKS_PER_NODE BYTES COUNT  a collective the scenario prices
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fsdpsim::harness {

struct PlannedGemm {
  std::string dtype;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
};

struct PlannedCollective {
  std::string collective;
  std::int32_t ranks = 0;
  std::int32_t ranks_per_node = 0;
  std::int64_t bytes = 0;
};

struct Plan {
  std::vector<std::int32_t> shard_groups;
  std::vector<PlannedGemm> gemms;
  std::vector<PlannedCollective> collectives;
};

// Throws UsageError naming the file and line.
Plan read_plan(const std::string& path);

// A group layout this job measures: its ranks and how many share a node.
struct GroupLayout {
  std::int32_t ranks = 0;
  std::int32_t ranks_per_node = 0;
};

// A note naming the planned collectives' layouts that no group of this job has (a plan made for
// 4 nodes run on one): curves of other layouts do not price them, and `fsdpsim run` would fall
// back to the model for them. Empty when every planned layout is measured.
std::string unmeasured_plan_layouts(const Plan& plan, const std::vector<GroupLayout>& measured);

}  // namespace fsdpsim::harness
