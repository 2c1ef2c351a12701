// Speed of the engine and of one simulated step (STYLE.md: speed is measured here, never
// asserted in unit tests). Figures are recorded in reports/performance.md.
#include <benchmark/benchmark.h>

#include "models/workload.hpp"
#include "sim/app/scenario.hpp"
#include "sim/engine/executor.hpp"
#include "sim/engine/program_builder.hpp"
#include "sim/fsdp/simulation.hpp"

namespace {

using namespace fsdpsim;

app::Scenario load(const char* relative) {
  const app::PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  return app::load_scenario(std::filesystem::path(FSDPSIM_SOURCE_DIR) / relative, {}, presets);
}

fsdp::ScheduleInput input_for(const app::Scenario& s, const models::Workload& w) {
  fsdp::ScheduleInput in;
  in.workload = &w;
  in.cluster = s.hardware.cluster;
  in.fsdp = s.fsdp;
  in.training = s.training;
  return in;
}

models::Workload workload_for(const app::Scenario& s) {
  models::WorkloadOptions o;
  o.micro_batch = s.training.micro_batch;
  o.seq_len = s.training.seq_len;
  o.compute_dtype = s.fsdp.param_dtype;
  o.flash_attention = s.training.flash_attention;
  return models::build_workload(s.model, o);
}

// One full step of the default scenario (GPT-175B, 128 A100): workload, schedule, replay, metrics.
void BM_SimulateGpt175bStep(benchmark::State& state) {
  const app::Scenario s = load("scenarios/paper/gpt175b_128xa100_bs1.json");
  for (auto _ : state) {
    const models::Workload w = workload_for(s);
    benchmark::DoNotOptimize(fsdp::simulate_step(input_for(s, w), false).result.step_time);
  }
}
BENCHMARK(BM_SimulateGpt175bStep)->Unit(benchmark::kMillisecond);

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

}  // namespace

BENCHMARK_MAIN();
