// A prediction with a calibration profile differs from the datasheet fallback in the direction and
// by the size the measurements say. MPT-1B FULL_SHARD on one 8x A100 node: its all-gathers are
// 96-205 MiB, its reduce-scatters 192-410 MiB, where NCCL is still well below its peak busbw; the
// reference profile (configs/calibration/a100-sxm-80gb.json: the published all-reduce sweep, and
// all-gather / reduce-scatter at equal busbw) says they take 1.1-1.5x what the ring model's
// latency + bytes / (0.78 x 300 GB/s) says. The expectation is recomputed here from the
// profile file's own numbers, independently of the fitting code.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "hardware/calibrated_curves.hpp"
#include "hardware/cost_model.hpp"
#include "sim/app/calibration_json.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/summary_text.hpp"
#include "sim/units/op_shapes.hpp"
#include "tests/unit/scratch_folder.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;

const std::string kProfile = std::string(FSDPSIM_CONFIGS_DIR) + "/calibration/a100-sxm-80gb.json";

fs::path write_scenario() {
  const fs::path dir = fsdpsim::test_support::temp_dir("calibrated_prediction");
  const fs::path file = dir / "mpt1b_8xa100.json";
  std::ofstream(file) << R"({
  "schema_version": 1,
  "name": "mpt-1b-8xa100",
  "model": "mpt-1b",
  "hardware": { "preset": "a100-sxm-80gb", "nodes": 1 },
  "training": { "global_batch": 16, "micro_batch": 2, "seq_len": 2048, "activation_checkpointing": "none",
                "optimizer": "adamw", "flash_attention": true },
  "fsdp": { "backward_prefetch": "BACKWARD_PRE", "param_dtype": "bf16", "reduce_dtype": "fp32" }
})";
  return file;
}

// The profile's (bytes, seconds) points of one collective, read straight from the JSON file.
std::vector<std::pair<double, double>> profile_points(const std::string& collective) {
  std::ifstream in(kProfile);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::pair<double, double>> out;
  for (const nlohmann::json& s : j.at("collectives")) {
    if (s.at("collective") != collective) continue;
    for (const nlohmann::json& p : s.at("points")) {
      out.emplace_back(p.at("bytes").get<double>(), p.at("time_us").get<double>() * 1e-6);
    }
  }
  return out;
}

// Time at `bytes` on the power law through the two measured sizes around it.
double between_measurements(const std::vector<std::pair<double, double>>& points, double bytes) {
  for (std::size_t i = 1; i < points.size(); ++i) {
    const auto [s0, t0] = points[i - 1];
    const auto [s1, t1] = points[i];
    if (bytes >= s0 && bytes <= s1)
      return t0 * std::pow(t1 / t0, std::log(bytes / s0) / std::log(s1 / s0));
  }
  ADD_FAILURE() << bytes << " bytes is outside the measured range";
  return 0.0;
}

struct Collectives {
  std::vector<double> bytes;
  std::vector<double> seconds;
  std::int64_t count = 0;
};

Collectives collectives_of(const fsdp::SimulationOutput& out, const std::string& suffix) {
  Collectives c;
  const engine::Program& p = out.schedule.program;
  for (const engine::Op& op : p.ops) {
    if (op.kind != engine::OpKind::kCommunication) continue;
    ++c.count;
    if (!p.names[op.name].ends_with(suffix)) continue;
    c.bytes.push_back(static_cast<double>(op.bytes.value()));
    c.seconds.push_back(op.duration.seconds());
  }
  return c;
}

class CalibratedPrediction : public ::testing::Test {
 protected:
  void SetUp() override {
    const PresetLocator presets{FSDPSIM_CONFIGS_DIR};
    const fs::path file = write_scenario();
    fallback_ = load_scenario(file, {}, presets);
    calibrated_ = load_scenario(file, {"hardware.calibration=a100-sxm-80gb"}, presets);
    fallback_out_ = simulate_scenario(fallback_, false);
    calibrated_out_ = simulate_scenario(calibrated_, false);
    fs::remove_all(file.parent_path());
  }
  Scenario fallback_;
  Scenario calibrated_;
  fsdp::SimulationOutput fallback_out_;
  fsdp::SimulationOutput calibrated_out_;
};

TEST_F(CalibratedPrediction, MidSizeAllGathersTakeTheMeasuredTimeNotTheRingModels) {
  const auto measured = profile_points("all_gather");
  const Collectives c = collectives_of(calibrated_out_, ".all_gather");
  const Collectives f = collectives_of(fallback_out_, ".all_gather");
  ASSERT_FALSE(c.bytes.empty());
  ASSERT_EQ(c.bytes, f.bytes);
  for (std::size_t i = 0; i < c.bytes.size(); ++i) {
    SCOPED_TRACE(c.bytes[i]);
    const double expected = between_measurements(measured, c.bytes[i]);
    EXPECT_NEAR(c.seconds[i], expected, expected * 1e-6);
    const double model =
        hardware::collective_time(fallback_.hardware.cluster, hardware::Collective::kAllGather,
                                  hardware::CommGroup{8, 8},
                                  Bytes(static_cast<std::int64_t>(c.bytes[i])))
            .value();
    EXPECT_NEAR(f.seconds[i], model, model * 1e-6);
    // 8-256 MiB: slower than the ring model, by the measured 1.1-1.5x.
    EXPECT_GE(c.bytes[i], 8.0 * kBytesPerMiB);
    EXPECT_LE(c.bytes[i], 256.0 * kBytesPerMiB);
    EXPECT_GT(c.seconds[i] / f.seconds[i], 1.1);
    EXPECT_LT(c.seconds[i] / f.seconds[i], 1.5);
  }
}

TEST_F(CalibratedPrediction, ReduceScattersFollowTheirCurveToo) {
  const auto measured = profile_points("reduce_scatter");
  const Collectives c = collectives_of(calibrated_out_, ".reduce_scatter");
  const Collectives f = collectives_of(fallback_out_, ".reduce_scatter");
  ASSERT_FALSE(c.bytes.empty());
  for (std::size_t i = 0; i < c.bytes.size(); ++i) {
    const double expected = between_measurements(measured, c.bytes[i]);
    EXPECT_NEAR(c.seconds[i], expected, expected * 1e-6);
    EXPECT_GT(c.seconds[i], f.seconds[i]);
  }
}

TEST_F(CalibratedPrediction, TheStepSpendsLongerInCollectivesAndSaysWhy) {
  const auto& busy_c = calibrated_out_.result.breakdown.communication_busy;
  const auto& busy_f = fallback_out_.result.breakdown.communication_busy;
  EXPECT_GT(busy_c.value(), busy_f.value() * 1.1);
  EXPECT_GE(calibrated_out_.result.step_time.value(), fallback_out_.result.step_time.value());
  // Every collective of this one-node job has a curve; no GEMM was measured.
  const hardware::CalibrationCounts n =
      calibrated_.hardware.cluster.gpu.calibration->usage().counts();
  EXPECT_EQ(n.collectives_fallback, 0);
  EXPECT_EQ(n.collectives_calibrated, collectives_of(calibrated_out_, "").count);
  EXPECT_EQ(n.gemms_calibrated, 0);
  EXPECT_GT(n.gemms_fallback, 0);
  const std::string summary = summary_text(calibrated_, calibrated_out_);
  const std::string line = fmt::format(
      "costs      of the {} collectives and {} GEMMs priced over the warm-up and the "
      "measured step, {} and 0 from calibration a100-sxm-80gb, the rest from the "
      "fallback model",
      n.collectives_calibrated, n.gemms_fallback, n.collectives_calibrated);
  EXPECT_NE(summary.find(line), std::string::npos) << summary;
  EXPECT_EQ(summary.find("no collective of this step has a measured curve"), std::string::npos);
  EXPECT_EQ(summary_text(fallback_, fallback_out_).find("costs "), std::string::npos);
  // On two nodes no collective has the one-node profile's group shape: the summary says so, not
  // only by a count of 0.
  const Scenario two_nodes = load_scenario(
      write_scenario(),
      {"hardware.nodes=2", "training.global_batch=32", "hardware.calibration=" + kProfile},
      PresetLocator{FSDPSIM_CONFIGS_DIR});
  const std::string elsewhere =
      summary_text(two_nodes, simulate_scenario(two_nodes, /*record_memory=*/false));
  EXPECT_NE(elsewhere.find(" measured step, 0 and 0 from calibration"), std::string::npos)
      << elsewhere;
  // It names the curves the profile has, for the reader to set beside the step's groups.
  EXPECT_NE(elsewhere.find("no collective of this step was priced by a measured curve: a curve "
                           "serves only its own collective and group shape"),
            std::string::npos)
      << elsewhere;
  EXPECT_NE(elsewhere.find("the profile's curves: all_gather on 8 ranks (8 per node)"),
            std::string::npos)
      << elsewhere;
  const nlohmann::json j = result_to_json(calibrated_, calibrated_out_);
  EXPECT_EQ(j.at("calibration").at("profile"), "a100-sxm-80gb");
  EXPECT_EQ(j.at("calibration").at("collectives_calibrated"), n.collectives_calibrated);
  EXPECT_FALSE(result_to_json(fallback_, fallback_out_).contains("calibration"));
}

// What the counts alone would hide is said: collectives above the largest size their curve
// measured (the profile cut at 64 MiB; MPT-1B's all-gathers are 96-205 MiB) and, when no GEMM of
// the step found a measurement, the dtypes the profile's GEMMs have.
TEST_F(CalibratedPrediction, ExtrapolatedCollectivesAndUnmatchedGemmsAreNamed) {
  std::ifstream in(kProfile);
  nlohmann::json profile = nlohmann::json::parse(in);
  for (nlohmann::json& series : profile.at("collectives")) {
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& p : series.at("points")) {
      if (p.at("bytes").get<double>() <= 64.0 * kBytesPerMiB) kept.push_back(p);
    }
    series["points"] = kept;
  }
  profile["gemms"] = nlohmann::json::array({{{"dtype", "fp8"},
                                             {"m", 64},
                                             {"n", 64},
                                             {"k", 64},
                                             {"batch", 1},
                                             {"layout", "TN"},
                                             {"time_us", 5.0},
                                             {"min_us", 5.0},
                                             {"max_us", 5.0},
                                             {"repeats", 10}}});
  const fs::path file = write_scenario().parent_path() / "cut_at_64mib.json";
  std::ofstream(file) << profile.dump(1);
  const Scenario cut = load_scenario(write_scenario(), {"hardware.calibration=" + file.string()},
                                     PresetLocator{FSDPSIM_CONFIGS_DIR});
  const fsdp::SimulationOutput out = simulate_scenario(cut, /*record_memory=*/false);
  const hardware::CalibrationCounts n = cut.hardware.cluster.gpu.calibration->usage().counts();
  EXPECT_GT(n.collectives_extrapolated, 0);
  EXPECT_EQ(n.collectives_extrapolated, n.collectives_calibrated);  // every one is above 64 MiB
  // The largest collective is the 410 MiB reduce-scatter over the curve's 64 MiB.
  EXPECT_NEAR(n.most_extrapolated, 410.0 / 64.0, 0.1);
  const std::string summary = summary_text(cut, out);
  EXPECT_NE(
      summary.find(fmt::format("\n           {} of the calibrated collectives are above their "
                               "curve's largest measured size (up to ",
                               n.collectives_extrapolated)),
      std::string::npos)
      << summary;
  EXPECT_NE(summary.find("no GEMM of this step was priced by a measured shape: a measurement "
                         "serves its own dtype and shapes within 2x of it in each of m, n, k and "
                         "batch; the profile's GEMMs are fp8"),
            std::string::npos)
      << summary;
  EXPECT_EQ(result_to_json(cut, out).at("calibration").at("collectives_extrapolated"),
            n.collectives_extrapolated);
  // A custom model's GEMMs have no shape for a measurement to serve: no GEMM note for them.
  const fs::path custom = write_scenario().parent_path() / "regnet_h200.json";
  std::ofstream(custom) << R"({"schema_version": 1, "model": "regnet-9b",
    "hardware": {"preset": "h200-sxm-141gb", "nodes": 1, "calibration": "h200-sxm-141gb-measured"},
    "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 1}})";
  const Scenario regnet = load_scenario(custom, {}, PresetLocator{FSDPSIM_CONFIGS_DIR});
  const fsdp::SimulationOutput regnet_out = simulate_scenario(regnet, /*record_memory=*/false);
  const hardware::CalibrationCounts r = regnet.hardware.cluster.gpu.calibration->usage().counts();
  EXPECT_EQ(r.gemms_shapeless, r.gemms_fallback);
  EXPECT_GT(r.gemms_shapeless, 0);
  EXPECT_EQ(summary_text(regnet, regnet_out).find("no GEMM of this step"), std::string::npos);
  // The reference profile measured up to 16 GiB: nothing of this step is above it.
  EXPECT_EQ(summary_text(calibrated_, calibrated_out_).find("above their curve's largest"),
            std::string::npos);
}

// A profile that timed only the allocator's device calls prices them by size. T5-11B on 2 nodes
// at batch 2 with the rate limiter off retries cudaMalloc a few times per step (the FSDP paper's
// Fig. 6c setting, reports/fsdp-paper.md section 5); each retry cudaFrees every cached segment,
// GiBs of them. At 100 ms per GiB freed or allocated the step is longer than with the preset's
// lines (63.2 us per call, plus 120.3 us per GiB allocated and 628.6 per GiB freed, measured on
// an H200); a profile timed on those lines gives the preset's step.
TEST(CalibratedAllocator, TimedDeviceCallsPriceRetriesBySize) {
  const fs::path dir = fsdpsim::test_support::temp_dir("calibrated_allocator");
  const auto profile = [&dir](const std::string& name, double malloc_per_gib_us,
                              double free_per_gib_us) {
    constexpr double kCallUs = 63.2;
    const fs::path file = dir / (name + ".json");
    std::ofstream(file)
        << R"({"schema_version": 1, "kind": "fsdpsim_calibration_profile", "name": ")" << name
        << R"(", "device": {"sm_count": 108}, "memory": {"allocations": [
      {"bytes": 2097152, "malloc_us": )"
        << kCallUs + malloc_per_gib_us / 512.0 << R"(, "free_us": )"
        << kCallUs + free_per_gib_us / 512.0 << R"(},
      {"bytes": 1073741824, "malloc_us": )"
        << kCallUs + malloc_per_gib_us << R"(, "free_us": )" << kCallUs + free_per_gib_us
        << R"(}]}})";
    return file.string();
  };
  const PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  const fs::path scenario =
      fs::path(FSDPSIM_SOURCE_DIR) / "scenarios/paper/sweeps/t5_11b_rate_limiter_2_4_nodes.json";
  const std::vector<std::string> limiter_off = {"fsdp.limit_all_gathers=false",
                                                "training.global_batch=32"};
  auto with = [&](const std::string& profile_file) {
    std::vector<std::string> o = limiter_off;
    if (!profile_file.empty()) o.push_back("hardware.calibration=" + profile_file);
    return simulate_scenario(load_scenario(scenario, o, presets), false).result;
  };
  const fsdp::StepResult preset = with("");
  const fsdp::StepResult on_lines = with(profile("on_lines", 120.3, 628.6));
  const fsdp::StepResult slow = with(profile("slow", 100'000.0, 100'000.0));
  ASSERT_GT(preset.reserved.alloc_retries, 0);
  EXPECT_NEAR(on_lines.step_time.value(), preset.step_time.value(), 1e-6);
  EXPECT_GT(slow.step_time.value(), preset.step_time.value() + 0.1);
  fs::remove_all(dir);
}

// A profile of the harness's rank-speed phase alone, written to dir/name.json: bf16 8192^3 GEMMs
// on 132-SM GPUs (H100), `ranks` its per-rank entries, `per_node` ranks to a node.
std::string write_rank_speed_profile(const fs::path& dir, const std::string& name,
                                     const nlohmann::json& ranks, std::size_t per_node) {
  const fs::path file = dir / (name + ".json");
  std::ofstream(file) << nlohmann::json{
      {"schema_version", 1},
      {"kind", "fsdpsim_calibration_profile"},
      {"name", name},
      {"device", {{"sm_count", 132}}},
      {"topology", {{"nodes", ranks.size() / per_node}, {"gpus_per_node", per_node}}},
      {"rank_speeds",
       {{"dtype", "bf16"}, {"m", 8192}, {"n", 8192}, {"k", 8192}, {"ranks", ranks}}}};
  return file.string();
}

// Llama-3.1-8B on one node of 8 H100s with `overrides`: the scenario and its simulation.
auto run_llama3_8b(const std::vector<std::string>& overrides) {
  const PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  const Scenario s = load_scenario(fs::path(FSDPSIM_SOURCE_DIR) / "scenarios/llama3_8b_8xh100.json",
                                   overrides, presets);
  return std::pair{s, simulate_scenario(s, false)};
}

// A profile of rank speeds alone (the harness's rank-speed phase) on one node of 8 H100s. Rank 5
// ran the held GEMM in 2000 / 0.9 us against rank 0's 2000, so its GPU runs at 0.9 of rank 0's
// speed, and every collective waits for it. Llama-3.1-8B's step is compute-bound (its
// collectives hide behind compute), so it takes close to 1 / 0.9 = 1.111 times as long, and
// never longer: only compute slows. An explicit `hardware.stragglers: []` leaves the GPU out,
// and a profile whose measured ranks are none slower than rank 0 leaves the step as it was.
// A node whose host launches at half rank 0's speed (6 us a launch against 3) slows a CPU-bound
// step (mpt-125m at 512 tokens: on one node the GPU waits for the host 42 % of the step) by more
// than a third and less than double.
TEST(CalibratedRankSpeeds, TheSlowestMeasuredRanksPaceTheJob) {
  const fs::path dir = fsdpsim::test_support::temp_dir("calibrated_rank_speeds");
  // Ranks eight to a node (one node when fewer), node k on host "n<k>".
  const auto profile = [&dir](const std::string& name, const std::vector<double>& gpu,
                              const std::vector<double>& host) {
    const std::size_t per_node = std::min<std::size_t>(gpu.size(), 8);
    nlohmann::json ranks = nlohmann::json::array();
    for (std::size_t r = 0; r < gpu.size(); ++r) {
      ranks.push_back({{"rank", r},
                       {"host", fmt::format("n{}", r / per_node)},
                       {"gemm_us", 2000.0 / gpu[r]},
                       {"launch_us", 3.0 / host[r]}});
    }
    return write_rank_speed_profile(dir, name, ranks, per_node);
  };
  const PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  const fs::path scenario = fs::path(FSDPSIM_SOURCE_DIR) / "scenarios/llama3_8b_8xh100.json";
  const auto run = run_llama3_8b;
  const std::vector<double> even(8, 1.0);
  const std::string slow_gpu_5 =
      profile("slow_gpu_5", {1.0, 1.01, 1.0, 1.02, 1.0, 0.9, 1.0, 1.01}, even);
  const double alone = run({}).second.result.step_time.value();
  const auto [paced_scenario, paced] = run({"hardware.calibration=" + slow_gpu_5});
  ASSERT_EQ(paced_scenario.hardware.cluster.stragglers.size(), 1U);
  EXPECT_EQ(paced_scenario.hardware.cluster.stragglers.front().rank, 5);
  const double ratio = paced.result.step_time.value() / alone;
  EXPECT_GT(ratio, 1.08);
  EXPECT_LE(ratio, 1.0 / 0.9 + 1e-9);
  ASSERT_EQ(paced.result.rank_classes.size(), 2U);
  EXPECT_EQ(paced.result.rank_classes.back().first_rank, 5);
  EXPECT_DOUBLE_EQ(paced.result.rank_classes.back().compute_speed, 0.9);
  const std::string line = calibration_usage_line(paced_scenario.hardware.cluster);
  EXPECT_NE(line.find("rank speeds of 8 ranks on 1 node measured (GPUs and hosts): the job's "
                      "slowest, rank 5's GPU at 0.900 of the measured rank 0's speed, simulated "
                      "as stragglers"),
            std::string::npos)
      << line;
  const nlohmann::json usage = result_to_json(paced_scenario, paced).at("calibration");
  EXPECT_EQ(usage.at("rank_speeds_measured"), 8);
  EXPECT_EQ(usage.at("slowest_ranks").at("ranks").at(0).at("rank"), 5);
  EXPECT_EQ(usage.at("slowest_ranks").at("simulated"), true);

  const auto [opted_out_scenario, opted_out] =
      run({"hardware.calibration=" + slow_gpu_5, "hardware.stragglers=[]"});
  EXPECT_DOUBLE_EQ(opted_out.result.step_time.value(), alone);
  EXPECT_NE(calibration_usage_line(opted_out_scenario.hardware.cluster)
                .find("left out by the scenario's hardware.stragglers ([])"),
            std::string::npos);

  // Measured rank speeds say how the nodes differ: a hypothetical spread on top is refused.
  try {
    (void)load_scenario(scenario,
                        {"hardware.calibration=" + slow_gpu_5, "hardware.node_speed_spread=0.02"},
                        presets);
    ADD_FAILURE() << "node_speed_spread was taken beside measured rank speeds";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected no node_speed_spread where the calibration "
                                         "measured the rank speeds"),
              std::string::npos)
        << e.what();
  }

  // One node of four ranks measured, none slower than rank 0; the job's other node is taken to
  // be like it.
  const auto [fast_scenario, fast] = run(
      {"hardware.calibration=" + profile("fast", {1.0, 1.01, 1.0, 1.02}, {1.0, 1.0, 1.1, 1.0})});
  EXPECT_TRUE(fast_scenario.hardware.cluster.stragglers.empty());
  EXPECT_DOUBLE_EQ(fast.result.step_time.value(), alone);
  // Refused beside measured rank speeds even where none is slower than rank 0.
  EXPECT_THROW(
      (void)load_scenario(scenario,
                          {"hardware.calibration=" + profile("fast_too", {1.0, 1.01}, {1.0, 1.0}),
                           "hardware.node_speed_spread=0.02"},
                          presets),
      ConfigError);
  EXPECT_NE(calibration_usage_line(fast_scenario.hardware.cluster)
                .find("rank speeds of 4 ranks on 1 node measured (GPUs and hosts): none of the "
                      "job's is slower than rank 0"),
            std::string::npos)
      << calibration_usage_line(fast_scenario.hardware.cluster);

  // A slow host on a CPU-bound step: two nodes, the second's host launching at half the speed of
  // the first's (6 us against 3, every rank of it alike); the job runs at its first rank's pace.
  const std::vector<std::string> small = {"model=mpt-125m", "training.seq_len=512",
                                          "hardware.nodes=2", "training.global_batch=32"};
  const double cpu_bound = run(small).second.result.step_time.value();
  std::vector<double> slow_second_host(16, 1.0);
  std::fill(slow_second_host.begin() + 8, slow_second_host.end(), 0.5);
  std::vector<std::string> slow_host = small;
  slow_host.push_back("hardware.calibration=" +
                      profile("slow_host_n1", std::vector<double>(16, 1.0), slow_second_host));
  const auto [host_scenario, host_paced] = run(slow_host);
  ASSERT_EQ(host_scenario.hardware.cluster.stragglers.size(), 1U);
  EXPECT_EQ(host_scenario.hardware.cluster.stragglers.front().rank, 8);
  EXPECT_DOUBLE_EQ(host_scenario.hardware.cluster.stragglers.front().host_speed, 0.5);
  const double host_ratio = host_paced.result.step_time.value() / cpu_bound;
  // At most twice: only the host runs at half speed (exactly twice when nothing on the GPU
  // outlasts what the CPU issues).
  EXPECT_GT(host_ratio, 1.33);
  EXPECT_LE(host_ratio, 2.0 + 1e-9);
  fs::remove_all(dir);
}

// A profile whose eight ranks on one H100 node also timed the held GEMM short, each keeping
// `kept` of its short rate under load (2000 us held, 2000 x kept short). Rank 0's share replaces
// the preset's sustained_compute_fraction, 0.84. At 0.6, a GEMM the model prices (the profile
// has no GEMM timings) takes 0.84 / 0.6 = 1.4 times as long, and Llama-3.1-8B's step takes longer
// but not 1.4 times as long (attention, norms and communication do not slow); at 0.84 the step
// is the preset's. A scenario's own hardware.gpu.sustained_compute_fraction wins, and a held
// GEMM timed faster than its short benchmark, within timer noise, keeps the full rate.
TEST(CalibratedSustainedFraction, RankZerosHeldOverShortGemmReplacesThePresetsFraction) {
  const fs::path dir = fsdpsim::test_support::temp_dir("calibrated_sustained");
  const auto profile = [&dir](const std::string& name, double kept) {
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < 8; ++r) {
      ranks.push_back(
          {{"rank", r}, {"host", "n0"}, {"gemm_us", 2000.0}, {"gemm_short_us", 2000.0 * kept}});
    }
    return write_rank_speed_profile(dir, name, ranks, 8);
  };
  const auto run = run_llama3_8b;
  const auto [preset_scenario, preset] = run({});
  ASSERT_DOUBLE_EQ(preset_scenario.hardware.cluster.gpu.sustained_compute_fraction, 0.84);
  const Kernel gemm = gemm_kernel(GemmShape{8192, 8192, 8192, 1}, Dtype::kBf16);
  const double preset_gemm =
      hardware::kernel_time(preset_scenario.hardware.cluster.gpu, gemm).value();

  const auto [slow_scenario, slow] = run({"hardware.calibration=" + profile("kept_0_6", 0.6)});
  const hardware::GpuSpec& slow_gpu = slow_scenario.hardware.cluster.gpu;
  EXPECT_NEAR(slow_gpu.sustained_compute_fraction, 0.6, 1e-12);
  EXPECT_NEAR(hardware::kernel_time(slow_gpu, gemm).value() / preset_gemm, 0.84 / 0.6, 1e-9);
  const double ratio = slow.result.step_time.value() / preset.result.step_time.value();
  EXPECT_GT(ratio, 1.2);
  EXPECT_LT(ratio, 1.4);
  const std::string line = calibration_usage_line(slow_scenario.hardware.cluster);
  EXPECT_NE(line.find("rank 0 kept 0.600 of its short GEMM rate under load: every GEMM runs at "
                      "that share (hardware.gpu.sustained_compute_fraction)"),
            std::string::npos)
      << line;
  const nlohmann::json usage = result_to_json(slow_scenario, slow).at("calibration");
  EXPECT_NEAR(usage.at("sustained_gemm_fraction").at("measured").get<double>(), 0.6, 1e-9);
  EXPECT_EQ(usage.at("sustained_gemm_fraction").at("simulated"), true);

  const auto [same_scenario, same] = run({"hardware.calibration=" + profile("kept_0_84", 0.84)});
  EXPECT_NEAR(same.result.step_time.value(), preset.result.step_time.value(),
              1e-9 * preset.result.step_time.value());

  const auto [own_scenario, own] = run({"hardware.calibration=" + profile("kept_0_6_too", 0.6),
                                        "hardware.gpu.sustained_compute_fraction=0.84"});
  EXPECT_DOUBLE_EQ(own.result.step_time.value(), preset.result.step_time.value());
  EXPECT_NE(calibration_usage_line(own_scenario.hardware.cluster)
                .find("rank 0 kept 0.600 of its short GEMM rate under load: replaced by the "
                      "scenario's hardware.gpu.sustained_compute_fraction 0.840"),
            std::string::npos)
      << calibration_usage_line(own_scenario.hardware.cluster);
  EXPECT_EQ(result_to_json(own_scenario, own)
                .at("calibration")
                .at("sustained_gemm_fraction")
                .at("simulated"),
            false);

  // A scenario's gpu section that sets other keys leaves the measured share in place.
  const auto [other_key_scenario, other_key] =
      run({"hardware.calibration=" + profile("kept_0_6_again", 0.6),
           "hardware.gpu.memory_efficiency=0.8"});
  EXPECT_NEAR(other_key_scenario.hardware.cluster.gpu.sustained_compute_fraction, 0.6, 1e-12);

  const auto [noisy_scenario, noisy] = run({"hardware.calibration=" + profile("kept_1_05", 1.05)});
  EXPECT_DOUBLE_EQ(noisy_scenario.hardware.cluster.gpu.sustained_compute_fraction, 1.0);
  EXPECT_NE(calibration_usage_line(noisy_scenario.hardware.cluster)
                .find("rank 0 kept 1.050 of its short GEMM rate under load (above 1: timer noise, "
                      "taken as 1)"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fsdpsim::app
