// Speed of the engine and of one simulated step (STYLE.md: speed is measured here, never
// asserted in unit tests). Figures are recorded in reports/performance.md.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/sweep_grid.hpp"
#include "sim/engine/executor.hpp"
#include "sim/engine/program_builder.hpp"

namespace {

using namespace fsdpsim;

app::Scenario load(const char* relative) {
  const app::PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  return app::load_scenario(std::filesystem::path(FSDPSIM_SOURCE_DIR) / relative, {}, presets);
}

// One full step of the default scenario (GPT-175B, 128 A100): workload, schedule, replay, metrics.
void BM_SimulateGpt175bStep(benchmark::State& state) {
  const app::Scenario s = load("scenarios/paper/gpt175b_128xa100_bs1.json");
  for (auto _ : state) benchmark::DoNotOptimize(app::simulate_scenario(s, false).result.step_time);
}
BENCHMARK(BM_SimulateGpt175bStep)->Unit(benchmark::kMillisecond);

// The same step with one node's GPUs at 90 % speed (hardware.stragglers): two rank classes run
// side by side, their collectives meeting per communicator group.
void BM_SimulateGpt175bStepSlowNode(benchmark::State& state) {
  app::Scenario s = load("scenarios/paper/gpt175b_128xa100_bs1.json");
  for (std::int32_t g = 0; g < s.hardware.cluster.gpus_per_node; ++g)
    s.hardware.cluster.stragglers.push_back({3 * s.hardware.cluster.gpus_per_node + g, 0.9, 1.0});
  for (auto _ : state) benchmark::DoNotOptimize(app::simulate_scenario(s, false).result.step_time);
}
BENCHMARK(BM_SimulateGpt175bStepSlowNode)->Unit(benchmark::kMillisecond);

// DeepSpeed 0.3's ZeRO-3 on 1536 A100s (Megatron-LM 2021): per-parameter collectives, a device
// synchronize before each module, the persistent parameters' per-rank re-gather.
void BM_SimulateDeepSpeedZero3Step(benchmark::State& state) {
  const app::Scenario s = load("scenarios/deepspeed/gpt175b_1536xa100.json");
  for (auto _ : state) benchmark::DoNotOptimize(app::simulate_scenario(s, false).result.step_time);
}
BENCHMARK(BM_SimulateDeepSpeedZero3Step)->Unit(benchmark::kMillisecond);

// FSDP1 with a unit per nn.Linear (the 2022 blog's GPT-175B on 128 A100-40GB, CPU offload):
// four linear units nested in each of 96 block units, their hooks fired from the kernels.
void BM_SimulateLinearWrappedStep(benchmark::State& state) {
  const app::Scenario s = load("scenarios/paper/blog2022_gpt175b_128xa100_40gb.json");
  for (auto _ : state) benchmark::DoNotOptimize(app::simulate_scenario(s, false).result.step_time);
}
BENCHMARK(BM_SimulateLinearWrappedStep)->Unit(benchmark::kMillisecond);

// FSDP2 on Llama-2-7B (torchtitan's 8 H100 run): per-parameter unsharded copies and gradients,
// each its own allocation, four streams, the last block kept unsharded after forward.
void BM_SimulateFsdp2Step(benchmark::State& state) {
  const app::Scenario s = load("scenarios/memory/torchtitan_llama2_7b_8xh100_fsdp2.json");
  for (auto _ : state) benchmark::DoNotOptimize(app::simulate_scenario(s, false).result.step_time);
}
BENCHMARK(BM_SimulateFsdp2Step)->Unit(benchmark::kMillisecond);

// DDP on T5 2.28B (the FSDP paper's Fig. 6a point, 8 A100): gradients bucketed parameter by
// parameter from the kernel hooks, autocast casts and their recompute under full checkpointing.
void BM_SimulateDdpStep(benchmark::State& state) {
  const app::Scenario s = load("scenarios/paper/t5_2_28b_ddp_8xa100.json");
  for (auto _ : state) benchmark::DoNotOptimize(app::simulate_scenario(s, false).result.step_time);
}
BENCHMARK(BM_SimulateDdpStep)->Unit(benchmark::kMillisecond);

// The executor alone on a chain of kernels over two streams with cross-stream waits.
void BM_ExecutorOps(benchmark::State& state) {
  engine::ProgramBuilder b;
  const auto compute = b.add_stream("compute");
  const auto comm = b.add_stream("comm");
  for (std::int64_t i = 0; i < state.range(0); ++i) {
    engine::LaunchSpec spec;
    spec.name = "op";
    spec.stream = i % 8 == 0 ? comm : compute;
    spec.kind = i % 8 == 0 ? engine::OpKind::kCommunication : engine::OpKind::kCompute;
    spec.duration = to_sim_time(microseconds(10.0));
    spec.contended_duration = to_sim_time(microseconds(12.0));
    spec.launch_cost = to_sim_time(microseconds(1.0));
    if (i % 8 == 1) b.wait_stream(compute, comm);
    b.launch(spec);
  }
  const engine::Program program = b.take();
  for (auto _ : state) benchmark::DoNotOptimize(engine::execute(program).makespan);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ExecutorOps)->Arg(10'000)->Arg(100'000);

// Dealing the largest grid a sweep runs, 10 million points on 7 axes of 10 values, to the
// slices of `--shard K/N` (every slice process deals the whole grid to find its own points).
void BM_DealShardSlices(benchmark::State& state) {
  std::vector<app::GridAxis> axes;
  for (const char* key :
       {"hardware.nodes", "training.micro_batch", "training.seq_len", "model.n_layers",
        "training.global_batch", "model.d_model", "model.vocab"}) {
    axes.push_back(app::parse_grid_option(std::string(key) + "=1,2,3,4,5,6,7,8,9,10"));
  }
  const app::Shard shard{1, state.range(0)};
  for (auto _ : state) benchmark::DoNotOptimize(shard.indices(axes).size());
}
BENCHMARK(BM_DealShardSlices)->Arg(16)->Arg(1'000)->Arg(100'000)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
