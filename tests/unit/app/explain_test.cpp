// fsdpsim explain: communication exposed per unit and the critical path summed by unit and kind
// on hand-made timelines, the diagnosis of synthetic steps, and the command's exit codes and JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/app/explain_critical_path.hpp"
#include "sim/app/explain_diagnosis.hpp"
#include "sim/app/explain_exposed_comm.hpp"
#include "sim/app/explain_step.hpp"
#include "sim/app/significant_digits.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/engine/executor.hpp"
#include "sim/engine/op_graph.hpp"
#include "sim/engine/program_builder.hpp"
#include "sim/fsdp/schedule.hpp"
#include "test_support.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;
using test_support::Outcome;
using test_support::run_fsdpsim;

SimTime us(double v) { return to_sim_time(microseconds(v)); }
Seconds s_us(double v) { return microseconds(v); }
constexpr std::uint8_t tag(fsdp::Phase p) { return static_cast<std::uint8_t>(p); }

// A program and its timeline written down directly: op i runs [start, end] (us) on a stream.
struct HandTimeline {
  engine::Program program;
  engine::Timeline timeline;

  void op(const std::string& name, engine::StreamId stream, engine::OpKind kind, fsdp::Phase phase,
          std::int32_t group, double start, double end,
          engine::ChannelId channel = engine::kNoChannel) {
    engine::Op o;
    o.name = program.names.intern(name);
    o.stream = stream;
    o.kind = kind;
    o.phase = tag(phase);
    o.group = group;
    o.channel = channel;
    o.duration = us(end - start);
    program.ops.push_back(o);
    timeline.ops.push_back({us(start), us(start), us(end)});
  }
};

TEST(ExplainExposedCommunication, CollectiveTimeWithoutComputeKernelsIsExposedPerUnit) {
  // compute stream 0: a.fwd 0-10, b.fwd 15-20, a.bwd 28-40.
  // b.all_gather 5-25 (intra-node): overlapped 5-10 and 15-20 -> 10 of 20 exposed.
  // a.reduce_scatter 20-30 (inter-node channel): overlapped 28-30 -> 8 of 10 exposed.
  // an ungrouped all_reduce 40-41 (no channel): 1 of 1 exposed.
  // Wall time with a collective and no compute: 10-15, 20-28, 40-41 = 14.
  HandTimeline h;
  h.program.stream_names = {"compute", "comm"};
  h.program.channel_names = {"nccl:intra", "nccl:inter"};
  using engine::OpKind;
  h.op("a.fwd", 0, OpKind::kCompute, fsdp::Phase::kForward, 0, 0, 10);
  h.op("b.all_gather", 1, OpKind::kCommunication, fsdp::Phase::kForward, 1, 5, 25, 0);
  h.op("b.fwd", 0, OpKind::kCompute, fsdp::Phase::kForward, 1, 15, 20);
  h.op("a.reduce_scatter", 1, OpKind::kCommunication, fsdp::Phase::kBackward, 0, 20, 30, 1);
  h.op("a.bwd", 0, OpKind::kCompute, fsdp::Phase::kBackward, 0, 28, 40);
  h.op("x.all_reduce", 1, OpKind::kCommunication, fsdp::Phase::kOptimizer, -1, 40, 41);
  const ExposedCommunication c =
      exposed_communication(h.program, h.timeline, 0, SimTime{}, {"a", "b"}, {false, true});
  ASSERT_EQ(c.units.size(), 3U);
  EXPECT_EQ(c.units[0].unit, "a");
  EXPECT_EQ(c.units[0].collectives, 1);
  EXPECT_DOUBLE_EQ(c.units[0].busy.value(), s_us(10).value());
  EXPECT_DOUBLE_EQ(c.units[0].exposed.value(), s_us(8).value());
  EXPECT_EQ(c.units[1].unit, "b");
  EXPECT_DOUBLE_EQ(c.units[1].busy.value(), s_us(20).value());
  EXPECT_DOUBLE_EQ(c.units[1].exposed.value(), s_us(10).value());
  EXPECT_DOUBLE_EQ(c.units[1].overlapped().value(), s_us(10).value());
  EXPECT_EQ(c.units[2].unit, "-");
  EXPECT_DOUBLE_EQ(c.units[2].exposed.value(), s_us(1).value());
  EXPECT_DOUBLE_EQ(c.busy.value(), s_us(31).value());
  EXPECT_DOUBLE_EQ(c.exposed.value(), s_us(19).value());
  EXPECT_DOUBLE_EQ(c.exposed_wall.value(), s_us(14).value());
  ASSERT_EQ(c.causes.size(), 3U);
  EXPECT_EQ(c.causes[0].phase, "forward");
  EXPECT_EQ(c.causes[0].collective, "all-gather");
  EXPECT_FALSE(c.causes[0].inter_node);
  EXPECT_EQ(c.causes[1].collective, "reduce-scatter");
  EXPECT_TRUE(c.causes[1].inter_node);
  EXPECT_EQ(c.causes[2].collective, "all-reduce");

  // The measured step starting at 22 (first op 3): only the reduce-scatter and the all-reduce
  // count, the former 20-30 clipped to 22-30 with 28-30 overlapped.
  const ExposedCommunication later =
      exposed_communication(h.program, h.timeline, 3, us(22), {"a", "b"}, {false, true});
  ASSERT_EQ(later.units.size(), 2U);
  EXPECT_DOUBLE_EQ(later.units[0].busy.value(), s_us(8).value());
  EXPECT_DOUBLE_EQ(later.units[0].exposed.value(), s_us(6).value());
}

TEST(ExplainCriticalPath, SumsThePathByKindAndByUnitFromTheStepStart) {
  // As in op_graph_test: launch A (0-1), launch G (1-2), G 2-32, B 32-37, C 37-41 (B and C of
  // unit "u1", G of unit "u0"); a hook on the CPU meanwhile.
  engine::ProgramBuilder b;
  const engine::StreamId compute = b.add_stream("compute");
  const engine::StreamId comm = b.add_stream("unshard");
  engine::LaunchSpec spec;
  spec.launch_cost = us(1);
  spec.name = "u0.fwd.a";
  spec.stream = compute;
  spec.duration = us(10);
  spec.group = 0;
  b.launch(spec);
  spec.name = "u0.all_gather";
  spec.stream = comm;
  spec.kind = engine::OpKind::kCommunication;
  spec.duration = us(30);
  b.launch(spec);
  b.wait_event(compute, b.record_event(comm));
  spec.name = "u1.fwd.b";
  spec.stream = compute;
  spec.kind = engine::OpKind::kCompute;
  spec.duration = us(5);
  spec.group = 1;
  b.launch(spec);
  b.cpu_work("u1.pre_forward", us(2));
  spec.name = "u1.fwd.c";
  spec.duration = us(4);
  b.launch(spec);
  const engine::Timeline t = engine::execute(b.program());
  const engine::CriticalPath path = engine::critical_path(b.program(), t);

  const CriticalPathSummary all =
      summarize_critical_path(b.program(), path, SimTime{}, {"u0", "u1"});
  EXPECT_DOUBLE_EQ(all.length.value(), s_us(41).value());
  EXPECT_EQ(all.steps, 5);
  EXPECT_DOUBLE_EQ(all.cpu_launch.value(), s_us(2).value());
  EXPECT_DOUBLE_EQ(all.gpu_communication.value(), s_us(30).value());
  EXPECT_DOUBLE_EQ(all.gpu_compute.value(), s_us(9).value());
  ASSERT_EQ(all.by_kind.size(), 3U);
  EXPECT_EQ(all.by_kind[0].kind, "forward all-gather");
  EXPECT_EQ(all.by_kind[1].kind, "forward compute");
  EXPECT_EQ(all.by_kind[1].steps, 2);
  EXPECT_EQ(all.by_kind[2].kind, "CPU launch");
  ASSERT_EQ(all.by_unit_kind.size(), 3U);
  EXPECT_EQ(all.by_unit_kind[0].unit, "u0");
  EXPECT_EQ(all.by_unit_kind[1].unit, "u1");
  EXPECT_EQ(all.by_unit_kind[2].unit, "u0");  // both launches on the path launch u0's ops
  EXPECT_EQ(all.by_unit_kind[2].kind, "CPU launch");

  // From t = 20 us: 12 us of the all-gather, then B and C.
  const CriticalPathSummary late = summarize_critical_path(b.program(), path, us(20), {"u0", "u1"});
  EXPECT_DOUBLE_EQ(late.length.value(), s_us(21).value());
  EXPECT_EQ(late.steps, 3);
  EXPECT_DOUBLE_EQ(late.gpu_communication.value(), s_us(12).value());
}

DiagnosisInput step(double compute, double exposed, double idle) {
  DiagnosisInput in;
  in.step_time = Seconds(compute + exposed + idle);
  in.compute = Seconds(compute);
  in.exposed_communication = Seconds(exposed);
  in.idle = Seconds(idle);
  return in;
}

TEST(ExplainDiagnosis, ComputeBound) {
  EXPECT_EQ(
      diagnose(step(9.96, 0.01, 0.03)),
      "compute-bound: 99.6% of the step on the compute stream; communication fully overlapped");
  EXPECT_EQ(diagnose(step(9.7, 0.2, 0.1)),
            "compute-bound: 97.0% of the step on the compute stream; 2.0% exposed communication");
  // One GPU: nothing to overlap (it once read "communication fully overlapped").
  DiagnosisInput alone = step(9.96, 0.0, 0.04);
  alone.communicates = false;
  EXPECT_EQ(diagnose(alone),
            "compute-bound: 99.6% of the step on the compute stream; no communication");
}

TEST(ExplainDiagnosis, CommunicationBoundNamesPhaseCollectiveAndLink) {
  DiagnosisInput in = step(6.2, 3.8, 0.0);
  in.top_exposed_phase = "backward";
  in.top_exposed_collective = "all-gather";
  in.top_exposed_inter_node = true;
  EXPECT_EQ(diagnose(in),
            "communication-bound: backward is all-gather bound on the inter-node link; exposed "
            "communication in all phases: 38.0% of the step");
  in.also_exposed_collective = "reduce-scatter";
  in.top_exposed_inter_node = false;
  EXPECT_EQ(diagnose(in),
            "communication-bound: backward is all-gather and reduce-scatter bound on the "
            "intra-node link (NVLink); exposed communication in all phases: 38.0% of the step");
}

TEST(ExplainDiagnosis, ComputeBoundEvenWithSomeExposedCommunicationWhichItNames) {
  DiagnosisInput in = step(9.0, 0.8, 0.2);
  in.top_exposed_phase = "backward";
  in.top_exposed_collective = "all-gather";
  in.top_exposed_inter_node = true;
  EXPECT_EQ(diagnose(in),
            "compute-bound: 90.0% of the step on the compute stream; 8.0% exposed communication, "
            "most of it backward all-gather on the inter-node link");
  // Under 85% on the compute stream the same exposed share bounds the step.
  in = step(8.4, 0.8, 0.8);
  in.top_exposed_phase = "backward";
  in.top_exposed_collective = "all-gather";
  EXPECT_EQ(diagnose(in).rfind("communication-bound: backward is all-gather bound on the "
                               "intra-node link (NVLink); exposed communication in all phases: "
                               "8.0% of the step",
                               0),
            0U);
}

TEST(ExplainDiagnosis, NamesThePhaseWithTheMostExposedTimeThenItsLargestCauses) {
  const auto cause = [](const char* phase, const char* collective, double exposed) {
    return ExposedCause{phase, collective, true, Seconds(exposed)};
  };
  // The forward's all-gathers are the largest single cause, the backward holds more in all.
  DiagnosisInput in;
  name_top_exposed({cause("forward", "all-gather", 3.0), cause("backward", "reduce-scatter", 2.5),
                    cause("backward", "all-gather", 1.5)},
                   in);
  EXPECT_EQ(in.top_exposed_phase, "backward");
  EXPECT_EQ(in.top_exposed_collective, "reduce-scatter");
  EXPECT_EQ(in.also_exposed_collective, "all-gather");
  EXPECT_TRUE(in.top_exposed_inter_node);
  // A second cause of the phase under half the first is not named; equal phases go by name.
  in = DiagnosisInput{};
  name_top_exposed({cause("forward", "all-gather", 3.0), cause("backward", "reduce-scatter", 2.5),
                    cause("backward", "all-gather", 0.5)},
                   in);
  EXPECT_EQ(in.top_exposed_phase, "backward");
  EXPECT_EQ(in.top_exposed_collective, "reduce-scatter");
  EXPECT_EQ(in.also_exposed_collective, "");
  in = DiagnosisInput{};
  name_top_exposed({}, in);
  EXPECT_EQ(in.top_exposed_phase, "");
}

TEST(ExplainDiagnosis, CpuBoundWhenTheCriticalPathRunsOnTheCpuAndTheGpuIdles) {
  DiagnosisInput in = step(5.0, 1.0, 4.0);
  in.critical_cpu_launch = Seconds(5.0);
  in.critical_cpu_host = Seconds(1.0);
  EXPECT_EQ(
      diagnose(in),
      "CPU-bound: the GPU idles 40.0% waiting for kernel launches (60.0% of the critical path on "
      "the CPU)");
  in.critical_cpu_launch = Seconds(1.0);
  in.critical_cpu_host = Seconds(3.0);
  EXPECT_EQ(
      diagnose(in),
      "CPU-bound: the GPU idles 40.0% waiting for host work (40.0% of the critical path on the "
      "CPU)");
  // A CPU-heavy critical path while the GPU stays busy is not CPU-bound.
  DiagnosisInput busy = step(9.5, 0.0, 0.5);
  busy.critical_cpu_launch = Seconds(3.0);
  EXPECT_EQ(diagnose(busy).rfind("compute-bound", 0), 0U);
}

TEST(ExplainDiagnosis, MixedWhenNothingDominates) {
  EXPECT_EQ(diagnose(step(7.0, 0.2, 2.8)),
            "mixed: 70.0% on the compute stream, 2.0% exposed communication, 28.0% idle");
}

fs::path temp_dir() { return test_support::temp_dir("explain"); }

// A two-layer Llama on 2 nodes of 8 H100, with `patch` merged in.
fs::path tiny_scenario(const std::string& name,
                       const nlohmann::json& patch = nlohmann::json::object()) {
  return test_support::write_scenario(temp_dir(), name, test_support::tiny_llama_scenario(name, 2),
                                      patch);
}

// With a slow host on rank 1 the step waits for rank 1: explain names it (its GPU idles for its
// own CPU, so idle time would name a healthy rank), its critical path spans the job's step, and
// the wall-clock exposed and busy times are the breakdown's.
TEST(ExplainCommand, ASlowHostIsTheStragglerAndItsPathSpansTheStep) {
  const fs::path s = tiny_scenario(
      "slow_host", {{"hardware", {{"stragglers", {{{"ranks", {1}}, {"host_speed", 0.05}}}}}}});
  const Outcome o = run_fsdpsim("explain " + s.string() + " --json -");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json e = nlohmann::json::parse(o.output);
  EXPECT_EQ(e["straggler"]["first_rank"], 1) << e["straggler"].dump();
  EXPECT_NEAR(e["critical_path"]["length_s"].get<double>(), e["step_time_s"].get<double>(), 1e-9);
  const nlohmann::json b = e["breakdown"];
  EXPECT_NEAR(e["communication"]["exposed_wall_s"].get<double>(),
              b["exposed_communication_s"].get<double>(), 1e-9);
  EXPECT_NEAR(e["communication"]["busy_wall_s"].get<double>(),
              b["communication_busy_s"].get<double>(), 1e-9);
}

TEST(ExplainCommand, PrintsDiagnosisCriticalPathAndUnits) {
  const Outcome o = run_fsdpsim("explain " + tiny_scenario("explain_text").string());
  ASSERT_EQ(o.exit_code, 0) << o.output;
  for (const char* expected : {"diagnosis ", "critical path ", "by kind", "communication per unit",
                               "blocks.0", "root", "sum", "wall clock: collectives running"}) {
    EXPECT_NE(o.output.find(expected), std::string::npos) << expected << "\n" << o.output;
  }
}

// --top limits the exposed causes like every other list, and 0 lists them all (DeepSpeed 0.3's
// GPT-175B has five: backward all-reduce and all-gather, forward all-gather, the optimizer's).
TEST(ExplainCommand, TopLimitsTheExposedCausesAndZeroListsAll) {
  const std::string scenario =
      std::string(FSDPSIM_SOURCE_DIR) + "/scenarios/deepspeed/gpt175b_384xa100.json";
  const Outcome all = run_fsdpsim("explain " + scenario + " --top 0");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(all.output.find("optimizer all-reduce"), std::string::npos) << all.output;
  const Outcome two = run_fsdpsim("explain " + scenario + " --top 2");
  EXPECT_NE(two.output.find("(3 more; --top 0 lists all)"), std::string::npos) << two.output;
}

TEST(ExplainCommand, JsonHasTheCriticalPathOfTheWholeStepAndEveryUnit) {
  const fs::path scenario = tiny_scenario("explain_json");
  const Outcome o = run_fsdpsim("explain " + scenario.string() + " --json -");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json j = nlohmann::json::parse(o.output);
  EXPECT_EQ(j["schema"], "fsdpsim.explain/1");
  EXPECT_EQ(j["status"], "ok");
  EXPECT_FALSE(j["diagnosis"].get<std::string>().empty());
  // The critical path spans the measured step exactly; each number is written to six significant
  // digits, as run --json writes the same step's.
  const double step = j["step_time_s"].get<double>();
  EXPECT_EQ(j["critical_path"]["length_s"].get<double>(), step);
  double by_kind = 0.0;
  for (const auto& k : j["critical_path"]["by_kind"]) by_kind += k["time_s"].get<double>();
  EXPECT_NEAR(by_kind, step, 1e-5 * step);
  const Outcome run = run_fsdpsim("run " + scenario.string() + " --json -");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(nlohmann::json::parse(run.output)["step_time_s"].get<double>(), step);
  EXPECT_EQ(nlohmann::json::parse(run.output)["breakdown"]["idle_s"], j["breakdown"]["idle_s"]);
  // Every number of it, however deep.
  const auto expect_six_digits = [](const nlohmann::json& v, const std::string& path,
                                    const auto& self) -> void {
    if (v.is_number_float()) {
      EXPECT_EQ(round6(v.get<double>()), v.get<double>()) << path;
    } else if (v.is_structured()) {
      for (const auto& [key, child] : v.items()) self(child, path + "/" + key, self);
    }
  };
  expect_six_digits(j, "", expect_six_digits);
  ASSERT_EQ(j["communication"]["units"].size(), 3U);  // blocks.0, blocks.1, root
  EXPECT_EQ(j["communication"]["units"][0]["unit"], "blocks.0");
  EXPECT_EQ(j["communication"]["units"][2]["unit"], "root");
  // Two nodes, FULL_SHARD over all 16 GPUs: every collective crosses nodes.
  for (const auto& cause : j["communication"]["exposed_by_cause"])
    EXPECT_EQ(cause["link"], "inter-node");
  // Same scenario, same bytes.
  const fs::path file = temp_dir() / "explain.json";
  ASSERT_EQ(run_fsdpsim("explain " + scenario.string() + " --json " + file.string()).exit_code, 0);
  std::ifstream in(file);
  EXPECT_EQ(nlohmann::json::parse(in), j);
}

// With a calibration profile, explain says what it priced, as run's summary does, in its own
// column, and puts run's "calibration" object in its JSON; without one the key is null.
TEST(ExplainCommand, SaysWhatTheCalibrationProfilePriced) {
  const std::string scenario = std::string(FSDPSIM_SOURCE_DIR) + "/scenarios/llama3_8b_8xh100.json";
  const std::string calibrated =
      " --set hardware.preset=a100-sxm-80gb --set hardware.calibration=a100-sxm-80gb";
  const Outcome text = run_fsdpsim("explain " + scenario + calibrated);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("\ncosts           of the "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(" from calibration a100-sxm-80gb, the rest from the fallback model"),
            std::string::npos)
      << text.output;
  const Outcome json = run_fsdpsim("explain " + scenario + calibrated + " --json -");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output);
  EXPECT_EQ(j["calibration"]["profile"], "a100-sxm-80gb");
  EXPECT_GT(j["calibration"]["collectives_calibrated"].get<int>(), 0);
  const Outcome plain = run_fsdpsim("explain " + scenario + " --json -");
  EXPECT_TRUE(nlohmann::json::parse(plain.output)["calibration"].is_null());
  EXPECT_EQ(run_fsdpsim("explain " + scenario).output.find("\ncosts "), std::string::npos);
}

// The slow rank is the one whose collectives wait least for the others; the report then
// describes it (its breakdown, critical path and communication), not a rank that waits for it.
TEST(ExplainCommand, NamesTheStragglerTheOtherRanksWaitForAndDescribesIt) {
  const fs::path scenario = tiny_scenario("explain_straggler");
  const Outcome uniform = run_fsdpsim("explain " + scenario.string() + " --json -");
  ASSERT_EQ(uniform.exit_code, 0) << uniform.output;
  EXPECT_TRUE(nlohmann::json::parse(uniform.output)["straggler"].is_null());
  EXPECT_EQ(nlohmann::json::parse(uniform.output)["described_rank"], 0);
  const std::string slow =
      " --set 'hardware.stragglers=[{\"ranks\": [9], \"compute_speed\": 0.5}]'";
  const Outcome text = run_fsdpsim("explain " + scenario.string() + slow);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("straggler       rank 9 (compute speed 0.5, host speed 1) sets the "
                             "pace: the others' collectives wait for it up to "),
            std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find("; what follows describes rank 9\n"), std::string::npos)
      << text.output;
  const Outcome json = run_fsdpsim("explain " + scenario.string() + slow + " --json -");
  const nlohmann::json e = nlohmann::json::parse(json.output);
  const nlohmann::json s = e["straggler"];
  EXPECT_EQ(s["first_rank"], 9);
  EXPECT_EQ(s["described_rank"], 9);
  EXPECT_EQ(e["described_rank"], 9);
  EXPECT_GT(s["others_wait_s"].get<double>(), 0.0);
  // `run`'s table: rank 9 waits least, the others wait for it as long as explain says.
  const nlohmann::json r =
      nlohmann::json::parse(run_fsdpsim("run " + scenario.string() + slow + " --json -").output);
  ASSERT_EQ(r["rank_classes"].size(), 2U);
  const nlohmann::json& fast = r["rank_classes"][0];
  const nlohmann::json& slow_class = r["rank_classes"][1];
  ASSERT_EQ(slow_class["first_rank"], 9);
  EXPECT_LT(slow_class["waits_for_others_s"].get<double>(),
            fast["waits_for_others_s"].get<double>());
  EXPECT_NEAR(
      fast["waits_for_others_s"].get<double>() - slow_class["waits_for_others_s"].get<double>(),
      s["others_wait_s"].get<double>(), 2e-6);  // JSON rounds to 1e-6 s
  // The slow GPU's critical path runs through its own compute, at half speed: more of it than the
  // path of a rank that waits for it.
  EXPECT_GT(e["critical_path"]["gpu_compute_s"].get<double>(),
            nlohmann::json::parse(uniform.output)["critical_path"]["gpu_compute_s"].get<double>());
}

// A slow host on one rank (hardware.stragglers host_speed) of Llama-3.1-8B on 8 H100 at 512
// tokens: its own collectives run exposed longer than the others' (it launches late what follows
// them), so the least exposed communication, once taken for the pace-setter, named a rank that
// waits for it. The rank whose collectives wait least is the slow host.
TEST(ExplainCommand, ASlowHostSetsThePaceThoughItsOwnCollectivesRunExposedLonger) {
  const std::string run_args = std::string(FSDPSIM_SOURCE_DIR) +
                               "/scenarios/llama3_8b_8xh100.json --set training.seq_len=512 "
                               "--set 'hardware.stragglers=[{\"ranks\": [3], \"host_speed\": "
                               "0.3}]' --json -";
  const Outcome run = run_fsdpsim("run " + run_args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json classes = nlohmann::json::parse(run.output)["rank_classes"];
  ASSERT_EQ(classes.size(), 2U);
  ASSERT_EQ(classes[1]["first_rank"], 3);
  EXPECT_GT(classes[1]["exposed_communication_s"].get<double>(),
            classes[0]["exposed_communication_s"].get<double>());
  EXPECT_LT(classes[1]["waits_for_others_s"].get<double>(),
            classes[0]["waits_for_others_s"].get<double>());
  const Outcome explain = run_fsdpsim("explain " + run_args);
  ASSERT_EQ(explain.exit_code, 0) << explain.output;
  const nlohmann::json e = nlohmann::json::parse(explain.output);
  EXPECT_EQ(e["straggler"]["first_rank"], 3) << e["straggler"].dump();
  EXPECT_EQ(e["described_rank"], 3);
  // Its critical path carries its host's launches and hooks, at 30 % speed.
  EXPECT_GT(e["critical_path"]["cpu_launch_s"].get<double>(), 0.0);
}

// Where every class waits as long for the others (no rank sets the pace), the report says so and
// describes the largest class, as `run` does, rather than naming a rank that waits 0 us less.
TEST(ExplainStep, RanksThatWaitAlikeHaveNoPaceSetter) {
  const fs::path scenario = tiny_scenario("explain_wait_alike");
  const Scenario loaded =
      load_scenario(scenario, {"hardware.stragglers=[{\"ranks\": [9], \"compute_speed\": 0.5}]"},
                    PresetLocator{FSDPSIM_CONFIGS_DIR});
  fsdp::SimulationOutput output = simulate_scenario(loaded, false);
  ASSERT_EQ(output.result.rank_classes.size(), 2U);
  ASSERT_TRUE(explain_step(loaded, output).straggler.has_value());
  for (fsdp::RankClassResult& k : output.result.rank_classes) k.waits_for_others = Seconds(0.25);
  const Explanation e = explain_step(loaded, output);
  EXPECT_FALSE(e.straggler.has_value());
  EXPECT_TRUE(e.ranks_wait_alike);
  EXPECT_EQ(e.result.breakdown_rank, 0);
  EXPECT_NE(explanation_text(e, 3).find("straggler       none sets the pace: the ranks differ in "
                                        "speed, but every class waits as long for the others; "
                                        "what follows describes rank 0\n"),
            std::string::npos)
      << explanation_text(e, 3);
  EXPECT_TRUE(explanation_json(e)["straggler"].is_null());
}

// At 16.5 GB of HBM the 2-layer model's step fits only after a cudaMalloc retry (18 GB leaves
// room for its 15.1 GiB reserved peak): explain counts it and its allocator time.
TEST(ExplainCommand, CountsCudaMallocRetriesAndTheirAllocatorTime) {
  const fs::path scenario = tiny_scenario("explain_retries");
  const std::string tight = " --set hardware.gpu.hbm_bytes=16500000000";
  const Outcome text = run_fsdpsim("explain " + scenario.string() + tight);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("allocator       1 cudaMalloc retry per step"), std::string::npos)
      << text.output;
  // The critical path's host work includes the allocator's calls, and says how much of it.
  EXPECT_NE(text.output.find("%, of which the caching allocator's calls "), std::string::npos)
      << text.output;
  const nlohmann::json j = nlohmann::json::parse(
      run_fsdpsim("explain " + scenario.string() + tight + " --json -").output);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["alloc_retries"], 1);
  EXPECT_GT(j["critical_path"]["cpu_allocator_s"].get<double>(), 0.0);
  EXPECT_LE(j["critical_path"]["cpu_allocator_s"].get<double>(),
            j["critical_path"]["cpu_host_s"].get<double>());

  const Outcome roomy = run_fsdpsim("explain " + scenario.string());
  ASSERT_EQ(roomy.exit_code, 0) << roomy.output;
  EXPECT_EQ(roomy.output.find("allocator "), std::string::npos) << roomy.output;
  EXPECT_EQ(roomy.output.find("caching allocator's calls"), std::string::npos) << roomy.output;
  EXPECT_EQ(nlohmann::json::parse(
                run_fsdpsim("explain " + scenario.string() + " --json -").output)["alloc_retries"],
            0);
}

TEST(ExplainCommand, ExplainsDdpAndOutOfMemoryScenarios) {
  const Outcome ddp = run_fsdpsim(
      "explain " +
      tiny_scenario("explain_ddp", {{"parallelism", "ddp"}, {"fsdp", nullptr}}).string());
  EXPECT_EQ(ddp.exit_code, 0) << ddp.output;
  EXPECT_NE(ddp.output.find("all-reduce"), std::string::npos) << ddp.output;
  const Outcome oom =
      run_fsdpsim("explain " + tiny_scenario("explain_oom").string() +
                  " --set training.micro_batch=64 --set training.global_batch=1024");
  EXPECT_EQ(oom.exit_code, 0) << oom.output;
  EXPECT_NE(oom.output.find("out of memory"), std::string::npos) << oom.output;
  // The diagnosis says so before describing the step as if it fit, and the JSON gives the reason
  // as run's does.
  EXPECT_NE(oom.output.find("diagnosis       out of memory; were it to fit, "), std::string::npos)
      << oom.output;
  const Outcome oom_json =
      run_fsdpsim("explain " + tiny_scenario("explain_oom").string() +
                  " --set training.micro_batch=64 --set training.global_batch=1024 --json -");
  ASSERT_EQ(oom_json.exit_code, 0) << oom_json.output;
  const nlohmann::json j = nlohmann::json::parse(oom_json.output);
  EXPECT_EQ(j["status"], "oom");
  EXPECT_NE(j.value("oom_reason", "").find("CUDA out of memory"), std::string::npos) << j.dump();
}

// On one GPU FSDP1 still all-reduces each unit's gradients, in no time: one line says so instead
// of a table of zeros.
TEST(ExplainCommand, CollectivesOfOneRankTakeOneLine) {
  const Outcome o =
      run_fsdpsim("explain " +
                  tiny_scenario("explain_one_gpu",
                                {{"hardware", {{"nodes", 1}, {"node", {{"gpus_per_node", 1}}}}},
                                 {"fsdp", {{"version", 1}}}})
                      .string() +
                  " --set training.global_batch=2");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("collectives in the step, none taking any time (groups of one rank)"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("overlapped"), std::string::npos) << o.output;
}

// A CPU optimizer's host step (CPU offload) is named by its own word, not left without a unit.
TEST(ExplainCommand, ACpuOptimizerIsNamedOnTheCriticalPath) {
  const Outcome o =
      run_fsdpsim("explain " + tiny_scenario("explain_offload").string() +
                  " --set fsdp.cpu_offload=true --set training.global_batch=16 --json -");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json j = nlohmann::json::parse(o.output);
  bool named = false;
  for (const nlohmann::json& share : j["critical_path"]["by_unit_kind"])
    named = named || (share["unit"] == "optimizer" && share["kind"] == "CPU host work");
  EXPECT_TRUE(named) << j["critical_path"]["by_unit_kind"].dump();
}

TEST(ExplainCommand, BadInputAndUsageExitTwo) {
  EXPECT_EQ(run_fsdpsim("explain").exit_code, 2);
  EXPECT_EQ(run_fsdpsim("explain /nonexistent/scenario.json").exit_code, 2);
  const Outcome typo = run_fsdpsim("explain " + tiny_scenario("explain_bad").string() +
                                   " --set fsdp.sharding_stratgy=X");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("did you mean"), std::string::npos) << typo.output;
  EXPECT_EQ(run_fsdpsim("explain " + tiny_scenario("explain_bad2").string() +
                        " --json /nonexistent/dir/x.json")
                .exit_code,
            2);
  EXPECT_EQ(run_fsdpsim("explain --help").exit_code, 0);
}

}  // namespace
}  // namespace fsdpsim::app
