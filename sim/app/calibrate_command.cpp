#include "sim/app/calibrate_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <vector>

#include "calibrate/fit.hpp"
#include "calibrate/nccl_tests_log.hpp"
#include "hardware/calibrated_curves.hpp"
#include "hardware/cost_model.hpp"
#include "sim/app/calibration_json.hpp"
#include "sim/app/cli_validators.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/hardware_json.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/result_json.hpp"
#include "sim/app/scenario.hpp"
#include "sim/app/simulate_scenario.hpp"
#include "sim/app/sweep_command.hpp"

namespace fsdpsim::app {
namespace {

// "1 size", "3 sizes".
std::string sizes_text(std::size_t n) { return fmt::format("{} size{}", n, n == 1 ? "" : "s"); }

std::string size_text(std::int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= kBytesPerGiB)
    return fmt::format("{:.2f} GiB", b / static_cast<double>(kBytesPerGiB));
  if (bytes >= kBytesPerMiB)
    return fmt::format("{:.2f} MiB", b / static_cast<double>(kBytesPerMiB));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

// ---- plan -----------------------------------------------------------------------------------

// `word` as one POSIX shell word: as it is when it holds nothing the shell would interpret, else
// in single quotes (a quote inside written '\'').
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 ||
           std::string_view("_-./=:,+@%").find(ch) != std::string_view::npos;
  });
  if (plain) return word;
  std::string quoted = "'";
  for (const char ch : word) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// "all_gather bf16 8/8: its 2 measurements at 1.00 MiB are 3.00x apart (...)" for each curve
// whose repeats of one size disagree beyond timer noise (calibrate::kRepeatSpreadNoted).
std::vector<std::string> repeat_spread_notes(const calibrate::ProfileFit& fit) {
  std::vector<std::string> notes;
  for (const calibrate::CurveFit& f : fit.collectives) {
    if (f.repeat_spread < calibrate::kRepeatSpreadNoted) continue;
    notes.push_back(fmt::format(
        "{} {} {}/{}: measurements of one size are up to {:.2f}x apart (at {}); the curve takes "
        "their median. Repeats this far apart are no timer noise: logs or series of different "
        "runs (another network state, NCCL setting or cluster) mixed into one",
        calibrate::collective_name(f.key.op), dtype_name(f.key.dtype), f.key.ranks,
        f.key.ranks_per_node, f.repeat_spread, size_text(f.repeat_spread_bytes.value())));
  }
  return notes;
}

int plan_command(const CalibrateOptions& o) {
  // The scenario and every file it names are inputs the plan must not overwrite.
  std::set<std::filesystem::path> inputs{o.scenario};
  PresetLocator presets{default_configs_dir(o.configs_dir)};
  presets.files_resolved = &inputs;
  // The plan is how a cluster's profile gets made: a profile the scenario file names that is not
  // there yet (or one of another GPU, to be replaced) does not stop it. Planned without it, and
  // said so; a profile given with --set is the user's own choice and its error stands.
  const auto set_by_option = [&o] {
    return std::any_of(o.overrides.begin(), o.overrides.end(), [](const std::string& s) {
      return s.rfind("hardware.calibration=", 0) == 0 || s.rfind("hardware=", 0) == 0;
    });
  };
  std::vector<std::string> overrides = o.overrides;
  std::string without_profile;
  Scenario scenario;
  try {
    scenario = load_scenario(o.scenario, overrides, presets);
  } catch (const ConfigError& e) {
    if (set_by_option()) throw;
    std::vector<std::string> without = overrides;
    without.emplace_back("hardware.calibration=null");
    try {
      scenario = load_scenario(o.scenario, without, presets);
    } catch (const ConfigError&) {
      throw e;
    }
    overrides = std::move(without);
    without_profile = e.what();
  }
  check_sweep_block(o.scenario, overrides, presets);  // as run does
  // Record every query the cost models make; a scenario without a profile gets an empty one, so
  // everything is priced by the fallback models as in `fsdpsim run`.
  std::shared_ptr<const hardware::CalibratedCurves> curves =
      scenario.hardware.cluster.gpu.calibration;
  const bool has_profile = curves != nullptr;
  if (!has_profile) curves = std::make_shared<const hardware::CalibratedCurves>("none");
  curves->usage().set_recording(true);
  scenario.hardware.cluster.gpu.calibration = curves;
  const fsdp::SimulationOutput output = simulate_scenario(scenario, /*record_memory=*/false);
  refuse_unknown_expect_keys(scenario, output);
  // A custom model's units are GEMM work without a shape (FLOPs only): priced by the model, with
  // nothing to measure.
  std::map<hardware::GemmKey, hardware::QueryStats> gemms;
  std::int64_t shapeless = 0;
  for (const auto& [key, stats] : curves->usage().gemm_queries()) {
    if (key.m > 0 && key.n > 0 && key.k > 0) {
      gemms.emplace(key, stats);
    } else {
      shapeless += stats.count;
    }
  }
  const auto collectives = curves->usage().collective_queries();
  const hardware::ClusterSpec& c = scenario.hardware.cluster;

  const auto covered = [has_profile](const hardware::QueryStats& s) {
    if (!has_profile) return "";
    return s.above_measured ? "  [calibrated, above the curve's largest measured size]"
           : s.calibrated   ? "  [calibrated]"
                            : "  [fallback]";
  };
  if (!without_profile.empty()) {
    std::cerr << fmt::format(
        "note: planned without the scenario's calibration profile, which cannot be used ({}); the "
        "plan lists everything the step prices\n",
        without_profile);
  }
  std::string text;
  text += fmt::format(
      "calibration plan for {} ({} x {}, {} node{} x {} GPUs){}\n", scenario.name, c.world_size(),
      c.gpu.name, c.nodes, c.nodes == 1 ? "" : "s", c.gpus_per_node,
      has_profile ? fmt::format(", against calibration {}", curves->name()) : std::string());
  text += fmt::format(
      "\nGEMMs the step prices ({} shapes; dtype m n k batch, launches in the two steps simulated, "
      "a warm-up and the measured one):\n",
      gemms.size());
  for (const auto& [key, stats] : gemms) {
    text += fmt::format("  {:<5} {:>7} {:>7} {:>7} {:>4}  x{}{}\n", dtype_name(key.dtype), key.m,
                        key.n, key.k, key.batch, stats.count, covered(stats));
  }
  if (shapeless > 0) {
    text += fmt::format(
        "  ({} launches of custom-layer GEMM work have no shape, only FLOPs: the model prices "
        "them, and the plan lists nothing to measure for them)\n",
        shapeless);
  }
  text += fmt::format(
      "\ncollectives the step prices ({} shapes; ranks, ranks per node, buffer, count in the two "
      "steps simulated):\n",
      collectives.size());
  for (const auto& [key, stats] : collectives) {
    text += fmt::format("  {:<15} {:>5} {:>4}  {:>12}  x{}{}\n", calibrate::collective_name(key.op),
                        key.ranks, key.ranks_per_node, size_text(key.bytes.value()), stats.count,
                        covered(stats));
  }
  // Hybrid sharding's shard group (0: PyTorch's default, the GPUs of one node).
  const bool hybrid = scenario.fsdp.sharding_strategy == fsdp::ShardingStrategy::kHybridShard ||
                      scenario.fsdp.sharding_strategy == fsdp::ShardingStrategy::kHybridShardZero2;
  const std::int32_t shard =
      scenario.fsdp.shard_group_size > 0 ? scenario.fsdp.shard_group_size : c.gpus_per_node;
  std::string plan_command_line = "fsdpsim calibrate plan " + shell_word(o.scenario);
  for (const std::string& set : o.overrides) plan_command_line += " --set " + shell_word(set);
  // The plan file this command writes, or the name the hint gives it.
  const bool writes_plan_file = !o.plan_output.empty() && !writes_own_stream(o.plan_output);
  const std::string plan_file = writes_plan_file ? shell_word(o.plan_output) : "plan.txt";
  text += fmt::format(
      "\nmeasure them with: {}{}\n",
      writes_plan_file ? std::string() : fmt::format("{} -o {} && ", plan_command_line, plan_file),
      c.nodes > 1 ? fmt::format("fsdpsim-calibrate --plan {} --rendezvous DIR -o profile.json on "
                                "each of the {} nodes, one process per GPU under torchrun or srun "
                                "(README, \"Several nodes\")",
                                plan_file, c.nodes)
                  : fmt::format("fsdpsim-calibrate --plan {} -o profile.json", plan_file));
  // The text after the file is written: a refused output prints nothing but its error.
  if (!o.plan_output.empty()) {
    std::string plan =
        fmt::format("# fsdpsim calibration plan v1: scenario {} ({})\n# planned by: {}\n",
                    scenario.name, o.scenario, plan_command_line);
    plan +=
        "# shard_group F | gemm DTYPE M N K BATCH COUNT | collective OP RANKS RANKS_PER_NODE BYTES "
        "COUNT\n";
    if (hybrid) plan += fmt::format("shard_group {}\n", shard);
    for (const auto& [key, stats] : gemms) {
      plan += fmt::format("gemm {} {} {} {} {} {}\n", dtype_name(key.dtype), key.m, key.n, key.k,
                          key.batch, stats.count);
    }
    for (const auto& [key, stats] : collectives) {
      plan += fmt::format("collective {} {} {} {} {}\n", calibrate::collective_name(key.op),
                          key.ranks, key.ranks_per_node, key.bytes.value(), stats.count);
    }
    write_output(o.plan_output, plan, {inputs.begin(), inputs.end()});
  }
  if (!writes_stdout(o.plan_output)) std::cout << text;
  return 0;
}

// ---- fit ------------------------------------------------------------------------------------

std::string percent(double x) { return fmt::format("{:.1f}%", 100.0 * x); }

// The profile's GEMMs against a hardware preset's fallback model: per dtype, measured time over
// the model's, and the mean |ln| of that ratio (0.10 = off by about 10 % on a typical shape,
// either way); the last row pools every dtype. The model runs without the preset's
// sustained_compute_fraction (it stands for what a training run adds to a kernel benchmark: clocks
// under the power cap over minutes, NCCL traffic; the harness times GEMMs alone) and without any
// calibration. `sustained`: the share of its short GEMM rate rank 0 kept under load, when the
// profile measured it, set next to that preset fraction.
std::string gemms_against_preset(const calibrate::CalibrationProfile& profile,
                                 const std::string& preset, const hardware::ClusterSpec& cluster,
                                 std::optional<double> sustained) {
  hardware::GpuSpec gpu = cluster.gpu;
  gpu.calibration = nullptr;
  const double preset_sustained = gpu.sustained_compute_fraction;
  gpu.sustained_compute_fraction = 1.0;
  std::map<Dtype, std::vector<double>> ratios;
  std::map<Dtype, std::size_t> not_compared;  // dtypes the preset's GPU lacks
  for (const calibrate::GemmPoint& g : profile.gemms) {
    if (gpu.peak(g.dtype).value() <= 0.0) {
      ++not_compared[g.dtype];
      continue;
    }
    const Kernel k = gemm_kernel(g.shape, g.dtype);
    ratios[g.dtype].push_back(g.median.value() / hardware::kernel_time(gpu, k).value());
  }
  std::string out = fmt::format(
      "\nGEMMs against the {} preset's model (measured time / model time, the model without "
      "sustained_compute_fraction):\n",
      preset);
  for (const std::string& problem : {calibration_device_mismatch(profile.device, gpu),
                                     calibration_beyond_hardware(profile, cluster)}) {
    if (!problem.empty()) {
      out +=
          fmt::format("  note: a scenario on {} would refuse this profile: {}\n", preset, problem);
    }
  }
  for (const auto& [dtype, count] : not_compared) {
    out += fmt::format("  note: {} {} GEMM(s) not compared: {} has no {} peak\n", count,
                       dtype_name(dtype), preset, dtype_name(dtype));
  }
  out += fmt::format("  {:<5} {:>6}  {:>7}  {:>7}  {:>7}  {:>9}\n", "dtype", "shapes", "median",
                     "min", "max", "mean|ln|");
  const auto row = [&out](std::string_view name, std::vector<double> r) {
    std::sort(r.begin(), r.end());
    const std::size_t n = r.size();
    const double median = n % 2 == 1 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
    double log_sum = 0.0;
    for (const double x : r) log_sum += std::abs(std::log(x));
    out += fmt::format("  {:<5} {:>6}  {:>7.3f}  {:>7.3f}  {:>7.3f}  {:>9.3f}\n", name, n, median,
                       r.front(), r.back(), log_sum / static_cast<double>(n));
  };
  std::vector<double> pooled;
  for (const auto& [dtype, r] : ratios) {
    row(dtype_name(dtype), r);
    pooled.insert(pooled.end(), r.begin(), r.end());
  }
  if (ratios.empty()) {
    out += "  (no GEMM of a dtype the preset's GPU has)\n";
  } else if (ratios.size() > 1) {
    row("all", pooled);
  }
  if (sustained) {
    out += fmt::format(
        "  sustained: rank 0 kept {:.3f} of its short GEMM rate under load, where the preset's "
        "sustained_compute_fraction is {:.3f}; a scenario with this profile uses {:.3f}\n",
        *sustained, preset_sustained, std::min(1.0, *sustained));
  }
  return out;
}

int fit_command(const CalibrateOptions& o) {
  // A name (configs/calibration/NAME.json) or a path, as hardware.calibration and validate's
  // --calibration take it; a relative path is the working directory's.
  const std::string file = PresetLocator{default_configs_dir(o.configs_dir)}
                               .resolve("calibration", o.profile, "calibrate fit", "")
                               .string();
  const calibrate::CalibrationProfile profile = read_profile(file);
  calibrate::ProfileFit fit;
  try {
    fit = calibrate::fit_profile(profile, profile.name);
  } catch (const calibrate::InputError& e) {
    throw ConfigError(file, "", e.what());
  }
  std::string out;
  out += fmt::format(
      "profile {}{}: {} collective series, {} GEMMs{}\n", profile.name,
      profile.device.name.empty() ? std::string() : fmt::format(" ({})", profile.device.name),
      profile.collectives.size(), profile.gemms.size(),
      profile.complete ? "" : " -- INCOMPLETE: the run that wrote it stopped early");
  out += fmt::format(
      "\ncurves ({}): time between measured sizes by log-log interpolation, alpha-beta outside\n",
      fit.collectives.size());
  out +=
      fmt::format("  {:<15} {:<5} {:>10}  {:>5}  {:<21} {:>9}  {:>10}  {:>10}  {:>8}  {:>8}  {}\n",
                  "collective", "dtype", "ranks/node", "sizes", "range", "latency", "peak busbw",
                  "asymptote", "knot err", "LOO err", "origin");
  for (const calibrate::CurveFit& f : fit.collectives) {
    out += fmt::format(
        "  {:<15} {:<5} {:>10}  {:>5}  {:<21} {:>6.1f} us  {:>5.1f} GB/s  {:>5.1f} GB/s  {:>8}  "
        "{:>8}  {}\n",
        calibrate::collective_name(f.key.op), dtype_name(f.key.dtype),
        fmt::format("{}/{}", f.key.ranks, f.key.ranks_per_node), f.points,
        fmt::format("{}-{}", size_text(f.min_bytes.value()), size_text(f.max_bytes.value())),
        f.latency.value() * 1e6, f.peak_busbw_GBps, f.asymptotic_busbw_GBps,
        percent(f.max_knot_error), percent(f.max_leave_one_out_error),
        f.origin == calibrate::Origin::kDerived ? "derived" : "measured");
  }
  for (const std::string& note : repeat_spread_notes(fit)) out += fmt::format("  note: {}\n", note);
  // Curves the models leave to the fallback model on one side of their sizes.
  for (const calibrate::CurveFit& f : fit.collectives) {
    const auto note = [&](const char* regime, const char* why, const char* side, Bytes at) {
      out += fmt::format("  note: {} {} {}/{} {} ({}): {} {} the fallback model prices it\n",
                         calibrate::collective_name(f.key.op), dtype_name(f.key.dtype), f.key.ranks,
                         f.key.ranks_per_node, regime, why, side, size_text(at.value()));
    };
    if (!f.extrapolates) {
      note("stops in the latency regime", "its largest time is under twice its smallest", "above",
           f.max_bytes);
    }
    if (!f.extrapolates_down) {
      note("starts in the bandwidth regime", "under half its smallest time is latency", "below",
           f.min_bytes);
    }
  }
  out +=
      "  (knot err: how far making time non-decreasing in size moved a measurement; LOO err: an "
      "interior\n"
      "   size predicted from its neighbours alone, an estimate of the error between measured "
      "sizes)\n";
  if (!fit.skipped.empty()) {
    out += fmt::format("\nnot fitted ({}):\n", fit.skipped.size());
    for (const calibrate::SkippedSeries& s : fit.skipped)
      out += fmt::format("  {}: {}\n", s.what, s.why);
  }
  if (!fit.interference.empty()) {
    out +=
        "\ninterference (time alongside another collective / time alone, median over sizes; not "
        "used by the\ncost models, which share the NICs between concurrent collectives by their "
        "own model):\n";
    for (const calibrate::InterferenceFit& i : fit.interference) {
      out += fmt::format("  {} on {}/{} alongside {}: x{:.2f} ({})\n",
                         calibrate::collective_name(i.key.op), i.key.ranks, i.key.ranks_per_node,
                         calibrate::collective_name(i.concurrent_with), i.median_slowdown,
                         sizes_text(i.points));
    }
  }
  out += fmt::format("\nGEMMs: {} shapes measured", fit.gemms);
  // Measured more than once, a shape is priced at the median of its times (calibrate/fit.cpp).
  if (profile.gemms.size() > fit.gemms) {
    out += fmt::format(
        " ({} measurements: a shape measured again is priced at the median of "
        "its times)",
        profile.gemms.size());
  }
  if (fit.gemm_slowdown_under_nccl)
    out += fmt::format(", median slowdown under NCCL x{:.3f}", *fit.gemm_slowdown_under_nccl);
  out += "\n";
  // The profile and the --against preset are inputs the fit must not overwrite.
  std::set<std::filesystem::path> inputs{file};
  std::optional<hardware::ClusterSpec> against;
  if (!o.against.empty()) {
    PresetLocator presets{default_configs_dir(o.configs_dir)};
    presets.files_resolved = &inputs;
    against =
        hardware_from_json(nlohmann::json{{"preset", o.against}}, "--against", "/hardware", presets)
            .cluster;
    out += gemms_against_preset(profile, o.against, *against,
                                fit.rank_speeds && fit.rank_speeds->sustained
                                    ? std::optional<double>(fit.rank_speeds->sustained->rank0)
                                    : std::nullopt);
  } else {
    out +=
        "  (not checked against a GPU: `--against PRESET` compares the GEMMs with its model and "
        "names measurements its links and peaks cannot have made, which a scenario on it "
        "refuses)\n";
  }
  if (fit.rank_speeds) {
    const calibrate::RankSpeedFit& g = *fit.rank_speeds;
    const calibrate::RankSpeedMeasurement& m = *profile.rank_speeds;
    const auto spread = [](const calibrate::SpeedSpread& v) {
      return fmt::format(
          "median {:.3f}, fastest {:.3f}, slowest {:.3f} (rank {}{})", v.median, v.fastest,
          v.slowest, v.slowest_rank,
          v.slowest_host.empty() ? std::string() : fmt::format(", {}", v.slowest_host));
    };
    out += fmt::format("\nrank speeds ({} rank{}; next to rank 0's, rank 0 = 1):\n", g.ranks,
                       g.ranks == 1 ? "" : "s");
    out += fmt::format(
        "  GPUs   {} GEMM {}x{}x{}, every GPU at once after {:.1f} s of it (rank 0 {:.0f} "
        "TFLOP/s): {}\n",
        dtype_name(m.dtype), m.shape.m, m.shape.n, m.shape.k, m.held.value(), g.rank0_tflops,
        spread(g.gpu));
    if (g.host) {
      out += fmt::format("  hosts  kernel launches (rank 0 {:.2f} us each): {}\n",
                         g.rank0_launch->value() * 1e6, spread(*g.host));
    }
    if (g.sustained) {
      const calibrate::SustainedFraction& f = *g.sustained;
      out += fmt::format(
          "  held / short: the share of its short GEMM rate each GPU kept under load: rank 0 "
          "{:.3f}, median {:.3f}, lowest {:.3f} (rank {}), highest {:.3f}\n",
          f.rank0, f.median, f.lowest, f.lowest_rank, f.highest);
    }
    out += fmt::format(
        "  A scenario with this calibration simulates its slowest GPU and slowest host as "
        "stragglers (its own hardware.stragglers replace them; [] for none){}\n",
        g.sustained ? ", and runs every GEMM at rank 0's held / short share "
                      "(hardware.gpu.sustained_compute_fraction, unless the scenario sets it)"
                    : "");
  }
  const calibrate::MemoryMeasurements& m = profile.memory;
  if (m.device_copy || m.h2d_pinned || m.d2h_pinned || m.kernel_launch) {
    out += "\nmemory (not used by the cost models directly; set the matching scenario keys):\n";
    if (m.device_copy) {
      out +=
          fmt::format("  device copy {:.0f} GB/s (read + write): ", m.device_copy->value() / 1e9);
      if (!against) {
        out +=
            "hardware.gpu.memory_efficiency = this / hardware.gpu.hbm_bandwidth_GBps (with "
            "--against PRESET: the value)\n";
      } else if (const BytesPerSec hbm = against->gpu.hbm_bandwidth;
                 !calibration_device_mismatch(profile.device, against->gpu).empty() ||
                 m.device_copy->value() > hbm.value()) {
        // Another GPU's copy rate is no efficiency of this one's (one above 1 would be refused).
        out += fmt::format("no hardware.gpu.memory_efficiency for {}: {}\n", o.against,
                           m.device_copy->value() > hbm.value()
                               ? fmt::format("above its {:.0f} GB/s, the profile is another "
                                             "GPU's",
                                             hbm.value() / 1e9)
                               : std::string("the profile is another GPU's"));
      } else {
        out += fmt::format("--set hardware.gpu.memory_efficiency={:.3f} (over {}'s {:.0f} GB/s)\n",
                           m.device_copy->value() / hbm.value(), o.against, hbm.value() / 1e9);
      }
    }
    if (m.h2d_pinned || m.d2h_pinned) {
      const double slower = std::min(m.h2d_pinned.value_or(BytesPerSec(1e30)).value(),
                                     m.d2h_pinned.value_or(BytesPerSec(1e30)).value());
      out += fmt::format(
          "  pinned host copies {:.3g} GB/s (slower direction): --set "
          "hardware.node.pcie_GBps={:.3g}\n",
          slower / 1e9, slower / 1e9);
    }
    if (m.kernel_launch) {
      out += fmt::format(
          "  empty-kernel launch {:.2f} us of host time (a PyTorch eager op adds its Python and "
          "dispatcher overhead on top: hardware.node.kernel_launch_overhead_us)\n",
          m.kernel_launch->value() * 1e6);
    }
  }
  if (fit.allocation_costs) {
    const auto line = [](const char* what, const hardware::DeviceCallCost& c) {
      return fmt::format("  {} {:.1f} us + {:.1f} us per GiB\n", what, c.fixed.value() * 1e6,
                         c.per_gib.value() * 1e6);
    };
    out += fmt::format(
        "\nallocator device calls ({} timed; used for cudaMalloc retries and cache "
        "growth):\n",
        sizes_text(m.allocations.size()));
    out += line("cudaMalloc", fit.allocation_costs->malloc);
    out += line("cudaFree  ", fit.allocation_costs->free);
  }
  // The text after the file is written: a refused output prints nothing but its error.
  if (!o.fit_output.empty())
    write_output(o.fit_output, fit_to_json(fit, file).dump(2) + "\n",
                 {inputs.begin(), inputs.end()});
  if (!writes_stdout(o.fit_output)) std::cout << out;
  return 0;
}

// ---- import-nccl-tests ----------------------------------------------------------------------

// --collective NAME (every log) and --collective LOG=NAME (that log, named as on the command
// line or as another path to the same file): logs of older nccl-tests print no '# Collective
// test starting' line, and a file name need not say.
void assign_collectives(const std::vector<std::string>& values,
                        const std::vector<std::filesystem::path>& files,
                        calibrate::NcclTestsImportOptions& options,
                        std::vector<calibrate::NcclTestsLogText>& logs) {
  const auto collective = [](const std::string& value, const std::string& name) {
    const auto op = calibrate::parse_collective(name);
    if (!op) {
      throw ConfigError(fmt::format(
          "--collective {}: expected all_gather, reduce_scatter or all_reduce, found \"{}\"", value,
          name));
    }
    return *op;
  };
  for (const std::string& value : values) {
    const std::size_t eq = value.rfind('=');
    if (eq == std::string::npos) {
      if (options.collective) {
        throw ConfigError(
            fmt::format("--collective {}: a second collective for every log; name "
                        "each log's as LOG=NAME",
                        value));
      }
      options.collective = collective(value, value);
      options.collective_given_as = "--collective " + value;
      continue;
    }
    const std::filesystem::path named = value.substr(0, eq);
    const hardware::Collective op = collective(value, value.substr(eq + 1));
    bool found = false;
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::error_code ec;
      if (files[i] != named && !std::filesystem::equivalent(files[i], named, ec)) continue;
      if (logs[i].collective && *logs[i].collective != op) {
        throw ConfigError(fmt::format("--collective {}: {} is already given another collective",
                                      value, files[i].string()));
      }
      logs[i].collective = op;
      logs[i].collective_given_as = "--collective " + value;
      found = true;
    }
    if (!found) {
      throw ConfigError(fmt::format("--collective {}: {} is not one of the logs imported", value,
                                    named.string()));
    }
  }
}

int import_command(const CalibrateOptions& o) {
  calibrate::NcclTestsImportOptions options;
  if (o.ranks > 0) options.ranks = o.ranks;
  if (o.ranks_per_node > 0) options.ranks_per_node = o.ranks_per_node;
  options.in_place = o.in_place;
  options.allow_truncated = o.allow_truncated;
  std::vector<std::filesystem::path> files(o.logs.begin(), o.logs.end());
  std::vector<calibrate::NcclTestsLogText> logs;
  for (const std::filesystem::path& f : files)
    logs.push_back({f.string(), read_text_file(f), {}, {}});
  assign_collectives(o.collectives, files, options, logs);
  // Repeated runs of one size are merged as repeats: one file twice would count its runs twice.
  for (std::size_t i = 1; i < files.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (std::filesystem::equivalent(files[i], files[j], ec)) {
        throw ConfigError(fmt::format("{}: the same log as {}; give each log once",
                                      files[i].string(), files[j].string()));
      }
      // A copy under another name: two runs never print the same text (each log lists its
      // processes' pids and its own timings).
      if (logs[i].text == logs[j].text) {
        throw ConfigError(
            fmt::format("{}: the same text as {}, a copy of one run; give each log once",
                        files[i].string(), files[j].string()));
      }
    }
  }
  std::vector<std::string> notes;
  // Unnamed: after the output file, or after the first log when the profile goes to a stream.
  const std::string name = !o.name.empty() ? o.name
                           : writes_own_stream(o.import_output)
                               ? std::filesystem::path(o.logs.front()).stem().string()
                               : std::filesystem::path(o.import_output).stem().string();
  require_option_text("--name", name);
  require_option_text("--description", o.description);
  // The profile says which GPU it measured, so that a scenario on another can refuse it
  // (calibration_device_mismatch): nccl-tests logs name the device but not its SMs or memory.
  std::set<std::filesystem::path> gpu_preset;  // an input, as the logs are
  PresetLocator presets{default_configs_dir(o.configs_dir)};
  presets.files_resolved = &gpu_preset;
  // Named on the command line, not in a file: "--gpu: unknown hardware preset ...".
  static_cast<void>(presets.resolve("hardware", o.gpu, "--gpu", ""));
  const hardware::GpuSpec gpu =
      hardware_from_json(nlohmann::json{{"preset", o.gpu}}, "--gpu", "/hardware", presets)
          .cluster.gpu;
  calibrate::CalibrationProfile profile;
  try {
    profile = calibrate::import_nccl_tests_logs(logs, options, name, notes);
  } catch (const calibrate::InputError& e) {
    throw ConfigError(e.what());
  }
  // A curve prices only its own collective: all_reduce_perf, the log most clusters keep, prices
  // none of FSDP's per-unit all-gathers and reduce-scatters.
  const bool per_unit_collectives =
      std::any_of(profile.collectives.begin(), profile.collectives.end(),
                  [](const calibrate::CollectiveSeries& s) {
                    return s.op == hardware::Collective::kAllGather ||
                           s.op == hardware::Collective::kReduceScatter;
                  });
  if (!per_unit_collectives) {
    notes.push_back(
        "no all_gather or reduce_scatter log: FSDP's per-unit collectives will be priced by the "
        "model; all_reduce curves serve DDP, HSDP's replicate all-reduce and small all-reduces "
        "(run all_gather_perf and reduce_scatter_perf too)");
  }
  if (const std::string mismatch =
          device_name_mismatch(profile.device.name, gpu.name, "the logs ran on");
      !mismatch.empty()) {
    throw ConfigError(fmt::format("--gpu {}: {}", o.gpu, mismatch));
  }
  notes.push_back(fmt::format(
      "the logs ran on {}; its SMs ({}) and memory ({:.1f} GiB) are the hardware preset {}'s "
      "(--gpu)",
      profile.device.name.empty() ? std::string("a GPU they do not name") : profile.device.name,
      gpu.sm_count, static_cast<double>(gpu.hbm.value()) / static_cast<double>(1LL << 30), o.gpu));
  if (profile.device.name.empty()) profile.device.name = gpu.name;
  profile.device.sm_count = gpu.sm_count;
  profile.device.memory = gpu.hbm;
  profile.description = o.description;
  profile.notes = notes;
  for (const std::string& f : o.logs)
    profile.sources.push_back(fmt::format("nccl-tests log {}", f));
  // A series fit cannot use (a log of one size): said now, not when a run refuses the profile.
  try {
    const calibrate::ProfileFit fit = calibrate::fit_profile(profile, name);
    if (fit.curves->collectives().empty() && !fit.skipped.empty()) {
      profile.notes.push_back(fmt::format(
          "no series can be fitted ({}: {}): a scenario given this profile alone is refused; "
          "log more sizes (nccl-tests -b and -e, -f 2)",
          fit.skipped.front().what, fit.skipped.front().why));
      notes.push_back(profile.notes.back());
    } else {
      for (const std::string& note : repeat_spread_notes(fit)) {
        profile.notes.push_back(note);
        notes.push_back(note);
      }
      // Some fit and some do not: the ones that do not would price nothing, unsaid.
      for (const calibrate::SkippedSeries& skipped : fit.skipped) {
        profile.notes.push_back(fmt::format(
            "{} is not fitted ({}), so it prices nothing; log more sizes (nccl-tests -b and "
            "-e, -f 2)",
            skipped.what, skipped.why));
        notes.push_back(profile.notes.back());
      }
    }
  } catch (const calibrate::InputError& e) {
    throw ConfigError(e.what());
  }
  std::size_t points = 0;
  for (const calibrate::CollectiveSeries& s : profile.collectives) points += s.points.size();
  // A log's host names are copied as they are: bytes that are not UTF-8 become U+FFFD.
  const std::string json =
      profile_to_json(profile).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  files.insert(files.end(), gpu_preset.begin(), gpu_preset.end());
  write_output(o.import_output, json, files);
  std::ostream& report = writes_stdout(o.import_output) ? std::cerr : std::cout;
  // A profile written to a stream of our own has no file name to give `fit`.
  const bool to_stream = writes_own_stream(o.import_output);
  report << fmt::format("imported {} series ({}) from {} log(s) into {}\n",
                        profile.collectives.size(), sizes_text(points), o.logs.size(),
                        o.import_output == "-" ? "stdout" : o.import_output);
  for (const calibrate::CollectiveSeries& s : profile.collectives) {
    report << fmt::format(
        "  {:<15} {:<5} {} ranks, {} per node: {}, {}-{}\n", calibrate::collective_name(s.op),
        dtype_name(s.dtype), s.ranks, s.ranks_per_node, sizes_text(s.points.size()),
        size_text(s.points.front().bytes.value()), size_text(s.points.back().bytes.value()));
  }
  for (const std::string& n : notes) report << "note: " << n << "\n";
  report << fmt::format("next: fsdpsim calibrate fit {}\n",
                        to_stream ? "PROFILE (the profile saved to a file)" : o.import_output);
  return 0;
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, CalibrateOptions& o) {
  CLI::App* cal = app.add_subcommand(
      "calibrate",
      "Calibration profiles: what a scenario needs measured, fitting, importing nccl-tests logs");
  cal->require_subcommand(1);
  cal->footer(
      "Measure with the fsdpsim-calibrate harness (built where CUDA and NCCL are found); README "
      "'Calibrating a new "
      "cluster'.\nA scenario uses a profile with \"hardware\": {\"calibration\": \"NAME or "
      "PATH\"}.");

  CLI::App* plan =
      cal->add_subcommand("plan",
                          "List the GEMM shapes and collectives a scenario prices (-o: a plan "
                          "file for fsdpsim-calibrate --plan)");
  plan->add_option("scenario", o.scenario, "Scenario JSON file")->required()->check(non_empty());
  plan->add_option("--set", o.overrides, "Override a scenario key")->type_name("KEY=VALUE");
  plan->add_option("-o,--output", o.plan_output,
                   "Write the plan for fsdpsim-calibrate --plan ('-' for stdout)")
      ->type_name("PATH|-")
      ->check(non_empty());
  plan->add_option("--configs", o.configs_dir, "Folder of presets")
      ->type_name("DIR")
      ->check(non_empty());
  plan->callback([&o] { o.action = CalibrateAction::kPlan; });

  CLI::App* fit =
      cal->add_subcommand("fit",
                          "Fit a calibration profile into the cost models' curves and report the "
                          "fit error");
  fit->add_option("profile", o.profile,
                  "Calibration profile: a name (configs/calibration/NAME.json) or a path")
      ->required()
      ->check(non_empty());
  fit->add_option("--against", o.against,
                  "Compare the measured GEMMs with this hardware preset's model (a name or path)")
      ->type_name("PRESET")
      ->check(non_empty());
  fit->add_option("--configs", o.configs_dir, "Folder of presets")
      ->type_name("DIR")
      ->check(non_empty());
  fit->add_option("-o,--output", o.fit_output, "Write the fitted curves as JSON ('-' for stdout)")
      ->type_name("PATH|-")
      ->check(non_empty());
  fit->callback([&o] { o.action = CalibrateAction::kFit; });

  CLI::App* imp = cal->add_subcommand("import-nccl-tests",
                                      "Read nccl-tests output (all_gather_perf, "
                                      "reduce_scatter_perf, all_reduce_perf) into a profile");
  imp->add_option("logs", o.logs, "nccl-tests output files")->required()->check(non_empty());
  imp->add_option("-o,--output", o.import_output, "Profile JSON to write ('-' for stdout)")
      ->required()
      ->type_name("PATH|-")
      ->check(non_empty());
  imp->add_option("--gpu", o.gpu,
                  "Hardware preset (name or path) of the GPUs the logs ran on: its SM count and "
                  "memory go into the profile, so a scenario on another GPU refuses it")
      ->required()
      ->type_name("PRESET")
      ->check(non_empty());
  imp->add_option("--configs", o.configs_dir, "Folder of presets")
      ->type_name("DIR")
      ->check(non_empty());
  imp->add_option("--name", o.name,
                  "Profile name (default: the output file's stem, or the first log's with -o -)")
      ->check(non_empty());
  imp->add_option("--description", o.description, "Free text kept in the profile");
  imp->add_option("--collective", o.collectives,
                  "The collective, for logs that do not say: NAME for every log, or LOG=NAME "
                  "for one (repeatable); all_gather, reduce_scatter or all_reduce")
      ->type_name("[LOG=]NAME")
      ->allow_extra_args(false);  // one value each time: the logs that follow are positionals
  imp->add_option("--ranks", o.ranks,
                  "Communicator size, when it differs from the log (NCCL_TESTS_SPLIT)")
      ->check(CLI::Range(std::int64_t{2}, hardware::kMaxWorldSize));  // one rank measures nothing
  imp->add_option("--ranks-per-node", o.ranks_per_node, "Ranks of the communicator on one node")
      ->check(CLI::Range(std::int64_t{1}, hardware::kMaxWorldSize));
  imp->add_flag(
      "--in-place", o.in_place,
      "Take the in-place columns (default: out-of-place, as FSDP1 runs; FSDP2 gathers in place)");
  imp->add_flag("--allow-truncated", o.allow_truncated,
                "Keep the complete rows of a log that was cut short");
  imp->callback([&o] { o.action = CalibrateAction::kImport; });
  return cal;
}

int calibrate_command(const CalibrateOptions& options) {
  switch (options.action) {
    case CalibrateAction::kPlan:
      return plan_command(options);
    case CalibrateAction::kFit:
      return fit_command(options);
    case CalibrateAction::kImport:
      return import_command(options);
    case CalibrateAction::kNone:
      break;
  }
  throw ConfigError("fsdpsim calibrate: expected one of plan, fit, import-nccl-tests");
}

}  // namespace fsdpsim::app
