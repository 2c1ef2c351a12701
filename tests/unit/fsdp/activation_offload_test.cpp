// training.offload_activations on the tiny model of tiny_model.hpp (world 2, fp32, no
// checkpointing): each block saves 10 MB for its backward. save_on_cpu(pin_memory=True) copies
// them to the host after the block's forward (10 MB over PCIe at 25 GB/s: 400 us, a blocking
// copy, so the CPU waits) and back before its backward (400 us, on the compute stream). The
// embedding and head are not blocks: their activations stay on the GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/fsdp/simulation.hpp"
#include "tiny_model.hpp"

namespace fsdpsim::fsdp {
namespace {

SimulationOutput simulate(bool offload) {
  ScheduleInput in = testing::tiny_input();
  in.training.offload_activations = offload;
  return simulate_step(in, {});
}

// The program's ops whose name contains `part`, in issue order, with their durations in us.
std::vector<std::pair<std::string, double>> ops_named(const SimulationOutput& out,
                                                      const std::string& part) {
  std::vector<std::pair<std::string, double>> found;
  const engine::Program& p = out.schedule.program;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const std::string_view name = p.names[p.ops[i].name];
    if (name.find(part) == std::string::npos) continue;
    const engine::OpTiming& t = out.timeline.ops[i];
    found.emplace_back(name, (t.end - t.start).microseconds());
  }
  return found;
}

TEST(ActivationOffload, BlocksCopyTheirSavedTensorsToTheHostAndBack) {
  const SimulationOutput out = simulate(true);
  using Ops = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(ops_named(out, ".to_host"),
            (Ops{{"blocks.0.saved.to_host", 400.0}, {"blocks.1.saved.to_host", 400.0}}));
  EXPECT_EQ(ops_named(out, ".to_device"),
            (Ops{{"blocks.1.saved.to_device", 400.0}, {"blocks.0.saved.to_device", 400.0}}));
  // The blocking copy_ of the pack hook: the CPU waits once per block.
  int waits = 0;
  const engine::Program& p = out.schedule.program;
  for (const engine::CpuStep& s : p.cpu) {
    if (s.kind == engine::CpuStepKind::kWait && p.names[s.name] == "save_on_cpu") ++waits;
  }
  EXPECT_EQ(waits, 2);
}

// Without offload both blocks' 10 MB are on the GPU when backward starts; with it, at most one
// block's is (brought back for its backward), so the peak falls by one block's saved tensors.
TEST(ActivationOffload, OnlyTheBlockInBackwardHoldsItsSavedTensorsOnTheGpu) {
  const std::int64_t kept = simulate(false).result.memory.peak_allocated.value();
  const std::int64_t offloaded = simulate(true).result.memory.peak_allocated.value();
  EXPECT_EQ(kept - offloaded, 10'000'000);
}

// A block's saved tensors come back one by one, as the unpack hook copies each (4 and 6 MB here),
// into blocks like those the forward allocated.
TEST(ActivationOffload, EachSavedTensorComesBackOnItsOwn) {
  static const models::Workload workload = [] {
    models::Workload w = testing::tiny_workload();
    w.layers[1].saved_tensors = {{Bytes(4'000'000)}, {Bytes(6'000'000)}};
    return w;
  }();
  ScheduleInput in = testing::tiny_input();
  in.workload = &workload;
  in.training.offload_activations = true;
  const SimulationOutput out = simulate_step(in, {});
  const engine::Program& p = out.schedule.program;
  std::vector<std::int64_t> saved;
  std::vector<std::int64_t> back;
  for (const engine::CpuStep& s : p.cpu) {
    if (s.kind != engine::CpuStepKind::kAlloc) continue;
    const engine::TensorInfo& t = p.tensors[s.target];
    if (p.names[t.name] == "blocks.0.saved") saved.push_back(t.size.value());
    if (p.names[t.name] == "blocks.0.saved.from_host") back.push_back(t.size.value());
  }
  EXPECT_EQ(saved, (std::vector<std::int64_t>{4'000'000, 6'000'000}));
  EXPECT_EQ(back, saved);
}

}  // namespace
}  // namespace fsdpsim::fsdp
