// `fsdpsim calibrate ...` and `fsdpsim run` with a profile, as a user runs them: output, exit codes
// (0 ok, 2 bad input naming file and line or JSON path), files written.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>

#include "tests/unit/app/test_support.hpp"

namespace {

namespace fs = std::filesystem;
using fsdpsim::test_support::Outcome;
using fsdpsim::test_support::read_file;
using fsdpsim::test_support::run_fsdpsim;

const std::string kSource = FSDPSIM_SOURCE_DIR;
const std::string kLogs = std::string(FSDPSIM_TEST_DATA_DIR) + "/nccl-tests/";
const std::string kProfile = std::string(FSDPSIM_CONFIGS_DIR) + "/calibration/a100-sxm-80gb.json";

fs::path temp_dir() { return fsdpsim::test_support::temp_dir("calibrate_cli"); }

fs::path scenario_file() {
  const fs::path file = temp_dir() / "mpt1b.json";
  std::ofstream(file) << R"({"schema_version": 1, "name": "mpt-1b-8xa100", "model": "mpt-1b",
  "hardware": {"preset": "a100-sxm-80gb", "nodes": 1},
  "training": {"global_batch": 16, "micro_batch": 2, "seq_len": 2048}})";
  return file;
}

// An nccl-tests log with its result rows edited: `edit` gets each row's fields (size, count,
// type, redop, root, then time, algbw, busbw, #wrong out of place and in place) and says whether
// to keep the row; comment lines stay. Fields are written back two spaces apart.
std::string rewritten_log(const std::string& path,
                          const std::function<bool(std::vector<std::string>&)>& edit) {
  std::string out;
  std::istringstream lines(read_file(path));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> row{std::istream_iterator<std::string>(fields), {}};
    if (line.starts_with("#") || row.size() < 13) {
      out += line + "\n";
    } else if (edit(row)) {
      out += fmt::format("{}\n", fmt::join(row, "  "));
    }
  }
  return out;
}

TEST(CalibrateCli, FitReportsCurvesAndErrors) {
  const fs::path out = temp_dir() / "fit.json";
  const Outcome o = run_fsdpsim("calibrate fit " + kProfile + " -o " + out.string());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("all_gather      fp32         8/8     20"), std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("LOO err"), std::string::npos);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"kind\": \"fsdpsim_calibration_fit\""), std::string::npos);
}

struct GemmRow {
  double median = 0.0;
  double mean_abs_log = 0.0;
};

// One bf16 GEMM measured in `time_us`: its line of `fit --against h200-sxm-141gb` has the
// measured/model ratio (median, min and max alike) and the mean |ln| of it.
GemmRow gemm_row_against_h200(double time_us) {
  const fs::path file = temp_dir() / "gemm_profile.json";
  std::ofstream(file) << R"({"schema_version": 1, "kind": "fsdpsim_calibration_profile",
  "name": "one-gemm", "gemms": [{"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192, "batch": 1,
  "layout": "TN", "time_us": )"
                      << time_us << R"(, "repeats": 10}]})";
  const Outcome o = run_fsdpsim("calibrate fit " + file.string() + " --against h200-sxm-141gb");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  const std::size_t table = o.output.find("dtype shapes   median      min      max   mean|ln|");
  EXPECT_NE(table, std::string::npos) << o.output;
  if (table == std::string::npos) return {};
  EXPECT_EQ(o.output.find("  all "), std::string::npos) << "one dtype, no pooled row";
  std::istringstream row(o.output.substr(o.output.find('\n', table) + 1));
  std::string dtype;
  int shapes = 0;
  GemmRow r;
  double min = 0.0;
  double max = 0.0;
  row >> dtype >> shapes >> r.median >> min >> max >> r.mean_abs_log;
  EXPECT_EQ(dtype, "bf16");
  EXPECT_EQ(shapes, 1);
  EXPECT_EQ(min, r.median);
  EXPECT_EQ(max, r.median);
  return r;
}

TEST(CalibrateCli, FitAgainstAPresetComparesMeasuredGemmsWithItsModel) {
  const GemmRow measured = gemm_row_against_h200(1000.0);
  EXPECT_GT(measured.median, 0.0);
  EXPECT_NEAR(measured.mean_abs_log, std::abs(std::log(measured.median)), 0.001);
  const GemmRow slower = gemm_row_against_h200(2000.0);
  EXPECT_NEAR(slower.median, 2.0 * measured.median, 0.002 * measured.median);
  EXPECT_NEAR(slower.mean_abs_log, std::abs(std::log(slower.median)), 0.001);
  const Outcome o = run_fsdpsim("calibrate fit " + kProfile + " --against no-such-gpu");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("no-such-gpu"), std::string::npos) << o.output;
}

TEST(CalibrateCli, FitAgainstAPresetPoolsEveryDtypeInALastRow) {
  const Outcome o =
      run_fsdpsim("calibrate fit " + std::string(FSDPSIM_CONFIGS_DIR) +
                  "/calibration/h200-sxm-141gb-measured.json --against h200-sxm-141gb");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("  bf16     109 "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("  all      217 "), std::string::npos) << o.output;
  // The measured copy rate as the preset's memory_efficiency: 4215 / 4800 GB/s.
  EXPECT_NE(o.output.find("device copy 4215 GB/s (read + write): --set "
                          "hardware.gpu.memory_efficiency=0.878 (over h200-sxm-141gb's 4800 GB/s)"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("note:"), std::string::npos) << o.output;
  // Against another GPU the comparison says so, and which GEMMs it could not compare.
  const Outcome a100 =
      run_fsdpsim("calibrate fit " + std::string(FSDPSIM_CONFIGS_DIR) +
                  "/calibration/h200-sxm-141gb-measured.json --against a100-sxm-80gb");
  EXPECT_EQ(a100.exit_code, 0) << a100.output;
  EXPECT_NE(a100.output.find("note: a scenario on a100-sxm-80gb would refuse this profile: the "
                             "profile was measured on NVIDIA H200 (132 SMs"),
            std::string::npos)
      << a100.output;
  EXPECT_NE(a100.output.find("note: 27 fp8 GEMM(s) not compared: a100-sxm-80gb has no fp8 peak"),
            std::string::npos)
      << a100.output;
  // ... and suggests no memory efficiency of it from another GPU's copies (it was 2.067).
  EXPECT_NE(a100.output.find("device copy 4215 GB/s (read + write): no "
                             "hardware.gpu.memory_efficiency for a100-sxm-80gb: above its 2039 "
                             "GB/s, the profile is another GPU's"),
            std::string::npos)
      << a100.output;
  EXPECT_EQ(a100.output.find("memory_efficiency="), std::string::npos) << a100.output;
  // A shape measured twice is counted once, and the fit says how it is priced.
  EXPECT_NE(o.output.find("GEMMs: 211 shapes measured (217 measurements: a shape measured again "
                          "is priced at the median of its times)"),
            std::string::npos)
      << o.output;
}

TEST(CalibrateCli, BadProfileExitsTwoNamingFileAndPath) {
  const fs::path bad = temp_dir() / "bad_profile.json";
  std::ofstream(bad)
      << R"({"schema_version": 1, "kind": "fsdpsim_calibration_profile", "collectives": [
    {"collective": "all_gather", "dtype": "bf16", "ranks": 8, "ranks_per_node": 8, "points": [{"bytes": 1024}]}]})";
  const Outcome o = run_fsdpsim("calibrate fit " + bad.string());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("error: " + bad.string() +
                          ": /collectives/0/points/0/time_us: required key is missing"),
            std::string::npos)
      << o.output;
}

// The rank speeds of four ranks on two hosts (rank 2's GPU 25 % slower; host n2 launching in the
// median of its ranks' 3 and 4 us, 3.5, so at 3 / 3.5 = 0.857 of n1's) as `calibrate fit` prints
// them, in the fit JSON too; a rank 25 times slower than rank 0 is exit 2, naming the file and the
// rank.
TEST(CalibrateCli, FitReportsTheRankSpeeds) {
  // `extra` goes into every rank's entry (the short GEMM time).
  const auto write = [](const std::string& name, double rank3_gemm_us,
                        const std::string& extra = "") {
    const fs::path file = temp_dir() / name;
    std::ofstream(file) << R"({"schema_version": 1, "kind": "fsdpsim_calibration_profile",
      "device": {"sm_count": 132}, "rank_speeds": {"dtype": "bf16", "m": 8192, "n": 8192,
      "k": 8192, "held_ms": 3000, "ranks": [
      {"rank": 0, "host": "n1", "gemm_us": 2000, "launch_us": 3)"
                        << extra << R"(},
      {"rank": 1, "host": "n1", "gemm_us": 1980, "launch_us": 3)"
                        << extra << R"(},
      {"rank": 2, "host": "n2", "gemm_us": 2500, "launch_us": 3)"
                        << extra << R"(},
      {"rank": 3, "host": "n2", "gemm_us": )"
                        << rank3_gemm_us << R"(, "launch_us": 4)" << extra << R"(}]}})";
    return file;
  };
  const fs::path speeds = write("rank_speeds.json", 2000.0);
  const fs::path fit_json = temp_dir() / "rank_speeds_fit.json";
  const Outcome o = run_fsdpsim("calibrate fit " + speeds.string() + " -o " + fit_json.string());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("rank speeds (4 ranks; next to rank 0's, rank 0 = 1):\n"
                          "  GPUs   bf16 GEMM 8192x8192x8192, every GPU at once after 3.0 s of it "
                          "(rank 0 550 TFLOP/s): median 1.000, fastest 1.010, slowest 0.800 "
                          "(rank 2, n2)\n"
                          "  hosts  kernel launches (rank 0 3.00 us each): median 0.929, fastest "
                          "1.000, slowest 0.857 (rank 2, n2)"),
            std::string::npos)
      << o.output;
  std::ifstream in(fit_json);
  const nlohmann::json fit = nlohmann::json::parse(in);
  EXPECT_EQ(fit.at("rank_speeds").at("gpu").at("slowest_rank"), 2);
  EXPECT_NEAR(fit.at("rank_speeds").at("host").at("slowest").get<double>(), 3.0 / 3.5, 1e-6);
  EXPECT_EQ(fit.at("rank_speeds").at("gpu").at("speeds").size(), 4U);
  EXPECT_FALSE(fit.at("rank_speeds").contains("sustained_gemm_fraction"));

  // Every rank timed the GEMM short in 1680 us: they kept 1680 over 2000, 1980, 2500 and 2000.
  const fs::path with_short = write("rank_speeds_short.json", 2000.0, R"(, "gemm_short_us": 1680)");
  const fs::path short_json = temp_dir() / "rank_speeds_short_fit.json";
  const Outcome s =
      run_fsdpsim("calibrate fit " + with_short.string() + " -o " + short_json.string());
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("  held / short: the share of its short GEMM rate each GPU kept under "
                          "load: rank 0 0.840, median 0.840, lowest 0.672 (rank 2), highest "
                          "0.848\n"),
            std::string::npos)
      << s.output;
  std::ifstream short_in(short_json);
  const nlohmann::json short_fit = nlohmann::json::parse(short_in);
  EXPECT_NEAR(short_fit.at("rank_speeds").at("sustained_gemm_fraction").at("rank0").get<double>(),
              0.84, 1e-6);
  EXPECT_EQ(short_fit.at("rank_speeds").at("sustained_gemm_fraction").at("lowest_rank"), 2);
  // Against a preset, the measured share is set next to the preset's fraction.
  const Outcome against =
      run_fsdpsim("calibrate fit " + with_short.string() + " --against h100-sxm-80gb");
  EXPECT_EQ(against.exit_code, 0) << against.output;
  EXPECT_NE(against.output.find("  sustained: rank 0 kept 0.840 of its short GEMM rate under load, "
                                "where the preset's sustained_compute_fraction is 0.840; a "
                                "scenario with this profile uses 0.840\n"),
            std::string::npos)
      << against.output;
  // Short times longer than the held ones by half: swapped.
  const Outcome swapped =
      run_fsdpsim("calibrate fit " +
                  write("rank_speeds_swapped.json", 2000.0, R"(, "gemm_short_us": 3000)").string());
  EXPECT_EQ(swapped.exit_code, 2) << swapped.output;
  EXPECT_NE(swapped.output.find("/rank_speeds/ranks/0/gemm_short_us: rank 0 ran the held GEMM at "
                                "1.5 of its short rate"),
            std::string::npos)
      << swapped.output;

  const fs::path broken = write("rank_speeds_broken.json", 50000.0);
  const Outcome b = run_fsdpsim("calibrate fit " + broken.string());
  EXPECT_EQ(b.exit_code, 2) << b.output;
  EXPECT_NE(b.output.find("/rank_speeds/ranks/3/gemm_us: rank 3 took 25 times rank 0's time on "
                          "the held GEMM"),
            std::string::npos)
      << b.output;
  // So is a rank's launch time, though its host's median (51.5 us of 3 and 100) would pass.
  const fs::path slow_launch = write("rank_speeds_slow_launch.json", 2000.0);
  std::string text = read_file(slow_launch);
  const std::string rank3_launch = "\"launch_us\": 4";
  text.replace(text.find(rank3_launch), rank3_launch.size(), "\"launch_us\": 100");
  std::ofstream(slow_launch) << text;
  const Outcome l = run_fsdpsim("calibrate fit " + slow_launch.string());
  EXPECT_EQ(l.exit_code, 2) << l.output;
  EXPECT_NE(l.output.find("/rank_speeds/ranks/3/launch_us: rank 3 took 33.33 times rank 0's time "
                          "per kernel launch"),
            std::string::npos)
      << l.output;
}

// A sweep kept from 64 MiB up (nccl-tests -b 64M) starts in the bandwidth regime, one kept up to
// 64 KiB stops in the latency regime: `fit` says which side of each the fallback model prices.
TEST(CalibrateCli, FitNamesTheSidesACurveDoesNotCover) {
  const auto fit_of = [](const std::string& name, const std::function<bool(double)>& keep) {
    const fs::path log = temp_dir() / (name + "_all_reduce_perf.log");
    std::ofstream(log) << rewritten_log(
        kLogs + "a100_8gpu_all_reduce_perf.log",
        [&](std::vector<std::string>& row) { return keep(std::stod(row[0])); });
    const fs::path profile = temp_dir() / (name + ".json");
    const Outcome imported = run_fsdpsim("calibrate import-nccl-tests " + log.string() + " -o " +
                                         profile.string() + " --gpu a100-sxm-80gb");
    EXPECT_EQ(imported.exit_code, 0) << imported.output;
    return run_fsdpsim("calibrate fit " + profile.string()).output;
  };
  const std::string large = fit_of("from_64m", [](double bytes) { return bytes >= 64 << 20; });
  EXPECT_NE(large.find("note: all_reduce fp32 8/8 starts in the bandwidth regime (under half its "
                       "smallest time is latency): below 64.00 MiB the fallback model prices it"),
            std::string::npos)
      << large;
  EXPECT_EQ(large.find("latency regime"), std::string::npos) << large;
  const std::string small = fit_of("to_64k", [](double bytes) { return bytes <= 64 << 10; });
  EXPECT_NE(small.find("note: all_reduce fp32 8/8 stops in the latency regime (its largest time is "
                       "under twice its smallest): above 64.0 KiB the fallback model prices it"),
            std::string::npos)
      << small;
  EXPECT_EQ(small.find("bandwidth regime"), std::string::npos) << small;
}

TEST(CalibrateCli, ImportWritesAProfileThatFits) {
  const fs::path out = temp_dir() / "imported.json";
  const Outcome o =
      run_fsdpsim("calibrate import-nccl-tests " + kLogs + "a100_8gpu_all_reduce_perf.log -o " +
                  out.string() + " --name lab-a100 --gpu a100-sxm-80gb");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("imported 1 series (20 sizes)"), std::string::npos) << o.output;
  // An all_reduce log alone prices none of FSDP's per-unit collectives: the import says so.
  EXPECT_NE(o.output.find("note: no all_gather or reduce_scatter log: FSDP's per-unit "
                          "collectives will be priced by the model"),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("note: the logs ran on NVIDIA A100-SXM4-80GB; its SMs (108) and memory "
                          "(79.3 GiB) are the hardware preset a100-sxm-80gb's (--gpu)"),
            std::string::npos)
      << o.output;
  const Outcome fit = run_fsdpsim("calibrate fit " + out.string());
  EXPECT_EQ(fit.exit_code, 0) << fit.output;
  EXPECT_NE(fit.output.find("profile lab-a100 (NVIDIA A100-SXM4-80GB)"), std::string::npos)
      << fit.output;

  // On stdout the profile has no file name for `fit`: the report (on stderr, here mixed in with
  // the profile) says to save it.
  const Outcome piped = run_fsdpsim("calibrate import-nccl-tests " + kLogs +
                                    "a100_8gpu_all_reduce_perf.log -o - --gpu a100-sxm-80gb");
  EXPECT_NE(piped.output.find("from 1 log(s) into stdout\n"), std::string::npos) << piped.output;
  EXPECT_NE(piped.output.find("next: fsdpsim calibrate fit PROFILE (the profile saved to a file)"),
            std::string::npos)
      << piped.output;

  // The profile carries the preset's SMs and memory: a scenario on A100s uses it, one on H100s
  // refuses it.
  const fs::path scenario = temp_dir() / "imported_scenario.json";
  std::ofstream(scenario) << R"({"schema_version": 1, "name": "imported", "model": "mpt-125m",
    "hardware": {"preset": "a100-sxm-80gb", "calibration": ")"
                          << out.string() << R"("},
    "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 2048}})";
  const Outcome a100 = run_fsdpsim("run " + scenario.string());
  EXPECT_EQ(a100.exit_code, 0) << a100.output;
  const Outcome h100 =
      run_fsdpsim("run " + scenario.string() + " --set hardware.preset=h100-sxm-80gb");
  EXPECT_EQ(h100.exit_code, 2) << h100.output;
  EXPECT_NE(h100.output.find("the profile was measured on NVIDIA A100-SXM4-80GB (108 SMs"),
            std::string::npos)
      << h100.output;

  // Without --gpu the profile could not be checked, so there is none.
  const Outcome no_gpu = run_fsdpsim("calibrate import-nccl-tests " + kLogs +
                                     "a100_8gpu_all_reduce_perf.log -o " + out.string());
  EXPECT_EQ(no_gpu.exit_code, 2) << no_gpu.output;
  EXPECT_NE(no_gpu.output.find("--gpu is required"), std::string::npos) << no_gpu.output;
  // --gpu must be the GPU the logs name: its model, and its memory where the name gives one.
  for (const auto& [preset, why] :
       {std::pair<std::string, std::string>{"h200-sxm-141gb",
                                            "the logs ran on NVIDIA A100-SXM4-80GB, not on the "
                                            "H200 of h200-sxm-141gb"},
        {"a100-sxm-40gb",
         "the logs ran on NVIDIA A100-SXM4-80GB, whose memory is not the 40GB of a100-sxm-40gb"}}) {
    const Outcome wrong =
        run_fsdpsim("calibrate import-nccl-tests " + kLogs + "a100_8gpu_all_reduce_perf.log -o " +
                    out.string() + " --gpu " + preset);
    EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
    EXPECT_NE(wrong.output.find("--gpu " + preset + ": " + why), std::string::npos) << wrong.output;
  }
  // Nor a PCIe card or a MIG slice of that GPU, whose links, power and SMs are not the SXM
  // module's.
  for (const auto& [device, what] :
       {std::pair<std::string, std::string>{"A100-PCIE-80GB", "a PCIe card"},
        {"A100-SXM4-80GB MIG 3g.40gb", "a MIG slice"}}) {
    std::string log = read_file(kLogs + "a100_8gpu_all_reduce_perf.log");
    for (std::size_t at = log.find("A100-SXM4-80GB"); at != std::string::npos;
         at = log.find("A100-SXM4-80GB", at + device.size())) {
      log.replace(at, std::string("A100-SXM4-80GB").size(), device);
    }
    const fs::path renamed = temp_dir() / "renamed_all_reduce_perf.log";
    std::ofstream(renamed) << log;
    const Outcome wrong = run_fsdpsim("calibrate import-nccl-tests " + renamed.string() + " -o " +
                                      out.string() + " --gpu a100-sxm-80gb");
    EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
    EXPECT_NE(wrong.output.find("--gpu a100-sxm-80gb: the logs ran on NVIDIA " + device + ", " +
                                what + ", not on the SXM module of a100-sxm-80gb"),
              std::string::npos)
        << wrong.output;
  }
  // A preset that does not exist is named as the option's value, with the ones that do.
  const Outcome unknown =
      run_fsdpsim("calibrate import-nccl-tests " + kLogs + "a100_8gpu_all_reduce_perf.log -o " +
                  out.string() + " --gpu a100-sxm-90gb");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("error: --gpu: unknown hardware preset \"a100-sxm-90gb\""),
            std::string::npos)
      << unknown.output;
  EXPECT_NE(unknown.output.find("a100-sxm-80gb, h100-sxm-80gb"), std::string::npos)
      << unknown.output;
  // Text that the profile reader would refuse is refused here.
  const Outcome escape =
      run_fsdpsim("calibrate import-nccl-tests " + kLogs + "a100_8gpu_all_reduce_perf.log -o " +
                  out.string() + " --gpu a100-sxm-80gb --name \"$(printf 'lab\\033[31m')\"");
  EXPECT_EQ(escape.exit_code, 2) << escape.output;
  EXPECT_NE(escape.output.find("--name: expected text, found the control character U+001B"),
            std::string::npos)
      << escape.output;
}

// Logs of older nccl-tests print no '# Collective test starting' line, and a saved log's name
// need not say: --collective LOG=NAME names one log's, --collective NAME every log's.
TEST(CalibrateCli, ImportTakesEachLogsCollectiveFromTheCommandLine) {
  const fs::path dir = temp_dir() / "collective_per_log";
  fs::create_directories(dir);
  const fs::path ar = dir / "ar.log";
  fs::copy_file(kLogs + "a100_8gpu_all_reduce_perf.log", ar, fs::copy_options::overwrite_existing);
  const fs::path out = dir / "profile.json";
  const std::string import =
      "calibrate import-nccl-tests " + ar.string() + " -o " + out.string() + " --gpu a100-sxm-80gb";
  const Outcome unnamed = run_fsdpsim(import);
  EXPECT_EQ(unnamed.exit_code, 2) << unnamed.output;
  EXPECT_NE(unnamed.output.find("pass --collective " + ar.string() + "=NAME"), std::string::npos)
      << unnamed.output;
  const Outcome named = run_fsdpsim(import + " --collective " + ar.string() + "=all_reduce");
  EXPECT_EQ(named.exit_code, 0) << named.output;
  EXPECT_NE(named.output.find("imported 1 series (20 sizes)"), std::string::npos) << named.output;
  EXPECT_EQ(run_fsdpsim(import + " --collective all_reduce").exit_code, 0);
  // Each --collective takes one value: the logs may follow it.
  const Outcome before_logs =
      run_fsdpsim("calibrate import-nccl-tests --collective all_reduce " + ar.string() + " -o " +
                  out.string() + " --gpu a100-sxm-80gb");
  EXPECT_EQ(before_logs.exit_code, 0) << before_logs.output;
  // The table's redop says it reduced: read as an all_gather, it is refused.
  const Outcome wrong = run_fsdpsim(import + " --collective " + ar.string() + "=all_gather");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("the table is read as an all_gather"), std::string::npos)
      << wrong.output;
  for (const auto& [value, message] :
       {std::pair<std::string, std::string>{"other.log=all_reduce",
                                            "other.log is not one of the logs imported"},
        {"broadcast", "expected all_gather, reduce_scatter or all_reduce, found \"broadcast\""},
        {"all_reduce --collective all_gather", "a second collective for every log"}}) {
    const Outcome bad = run_fsdpsim(import + " --collective " + value);
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find(message), std::string::npos) << bad.output;
  }
  // A log that names its collective contradicted by the option is refused, naming the option as
  // typed.
  const std::string gather_log = kLogs + "h200_8gpu_all_gather_perf_16g.log";
  const Outcome contradicted =
      run_fsdpsim("calibrate import-nccl-tests " + gather_log + " -o " + out.string() +
                  " --gpu h200-sxm-141gb --collective " + gather_log + "=reduce_scatter");
  EXPECT_EQ(contradicted.exit_code, 2) << contradicted.output;
  EXPECT_NE(contradicted.output.find("--collective " + gather_log +
                                     "=reduce_scatter contradicts the log, which ran all_gather"),
            std::string::npos)
      << contradicted.output;
  // A log of one size gives no curve: the import says so, rather than the first run refusing the
  // profile.
  const Outcome one_size = run_fsdpsim("calibrate import-nccl-tests " + gather_log + " -o " +
                                       out.string() + " --gpu h200-sxm-141gb");
  EXPECT_EQ(one_size.exit_code, 0) << one_size.output;
  EXPECT_NE(one_size.output.find("note: no series can be fitted (all_gather fp32 on 8 ranks (8 per "
                                 "node): 1 distinct size(s); a curve needs at least 2)"),
            std::string::npos)
      << one_size.output;
  EXPECT_NE(read_file(out).find("no series can be fitted"), std::string::npos);
  // Beside one that fits, a series that does not is named too: a one-size fp16 log next to the
  // fp32 sweep.
  const std::string half =
      rewritten_log(kLogs + "a100_8gpu_all_reduce_perf.log", [](std::vector<std::string>& row) {
        row[1] = "524288";  // elements of 2 bytes
        row[2] = "half";
        return row[0] == "1048576";
      });
  const fs::path half_log = dir / "half_all_reduce_perf.log";
  std::ofstream(half_log) << half;
  const Outcome some =
      run_fsdpsim("calibrate import-nccl-tests " + kLogs + "a100_8gpu_all_reduce_perf.log " +
                  half_log.string() + " -o " + out.string() + " --gpu a100-sxm-80gb");
  EXPECT_EQ(some.exit_code, 0) << some.output;
  EXPECT_NE(some.output.find("note: all_reduce fp16 on 8 ranks (8 per node) is not fitted (1 "
                             "distinct size(s); a curve needs at least 2), so it prices nothing"),
            std::string::npos)
      << some.output;
  // Two logs of one configuration, one three times slower (another run's network state), are
  // pooled by their median, and the import says they disagree; a log that agrees is not noted.
  const std::string slow =
      rewritten_log(kLogs + "a100_8gpu_all_reduce_perf.log", [](std::vector<std::string>& row) {
        for (const std::size_t c : {5U, 9U})
          row[c] = fmt::format("{:.2f}", 3.0 * std::stod(row[c]));  // times, out of / in place
        for (const std::size_t c : {6U, 7U, 10U, 11U})
          row[c] = fmt::format("{:.2f}", std::stod(row[c]) / 3.0);  // algbw, busbw
        return true;
      });
  const fs::path slow_log = dir / "slow_all_reduce_perf.log";
  std::ofstream(slow_log) << slow;
  const Outcome apart =
      run_fsdpsim("calibrate import-nccl-tests " + kLogs + "a100_8gpu_all_reduce_perf.log " +
                  slow_log.string() + " -o " + out.string() + " --gpu a100-sxm-80gb");
  EXPECT_EQ(apart.exit_code, 0) << apart.output;
  EXPECT_NE(apart.output.find("note: all_reduce fp32 on 8 ranks (8 per node): the logs' times of "
                              "one size are up to 3.00x apart"),
            std::string::npos)
      << apart.output;
  EXPECT_EQ(some.output.find("apart"), std::string::npos) << some.output;
  // In a profile, two series of one collective and group are pooled by `calibrate fit`, which
  // says so where they disagree.
  nlohmann::json doubled = nlohmann::json::parse(read_file(kProfile));
  nlohmann::json copy = doubled["collectives"][0];
  for (nlohmann::json& p : copy["points"]) {
    p["time_us"] = 3.0 * p["time_us"].get<double>();
    p.erase("algbw_GBps");
    p.erase("busbw_GBps");
  }
  doubled["collectives"].push_back(copy);
  const fs::path doubled_file = dir / "doubled.json";
  std::ofstream(doubled_file) << doubled.dump(1);
  const Outcome fit = run_fsdpsim("calibrate fit " + doubled_file.string());
  EXPECT_EQ(fit.exit_code, 0) << fit.output;
  EXPECT_NE(fit.output.find("measurements of one size are up to 3.00x apart"), std::string::npos)
      << fit.output;
  EXPECT_EQ(run_fsdpsim("calibrate fit " + kProfile).output.find("apart"), std::string::npos);
  // A hardware preset of one's own, named without a GPU model, is taken for its SMs and memory.
  nlohmann::json own =
      nlohmann::json::parse(read_file(kSource + "/configs/hardware/a100-sxm-80gb.json"));
  for (const std::string name : {"clusterA-gpu", "cluster2-gpu"}) {
    own["name"] = name;
    const fs::path preset = dir / (name + ".json");
    std::ofstream(preset) << own.dump(2);
    const Outcome custom =
        run_fsdpsim("calibrate import-nccl-tests " + kLogs + "a100_8gpu_all_reduce_perf.log -o " +
                    out.string() + " --gpu " + preset.string());
    EXPECT_EQ(custom.exit_code, 0) << name << "\n" << custom.output;
  }
  // An empty --name is refused rather than replaced by the file's.
  const Outcome empty_name = run_fsdpsim(import + " --collective all_reduce --name ''");
  EXPECT_EQ(empty_name.exit_code, 2) << empty_name.output;
}

TEST(CalibrateCli, TruncatedAndGarbageLogsExitTwoNamingFileAndLine) {
  const std::string out = (temp_dir() / "never.json").string();
  const Outcome truncated =
      run_fsdpsim("calibrate import-nccl-tests " + kLogs + "truncated_all_reduce_perf.log -o " +
                  out + " --gpu a100-sxm-80gb");
  EXPECT_EQ(truncated.exit_code, 2);
  EXPECT_NE(truncated.output.find("truncated_all_reduce_perf.log:30: truncated nccl-tests log"),
            std::string::npos)
      << truncated.output;
  const Outcome garbage = run_fsdpsim("calibrate import-nccl-tests " + kLogs + "garbage.log -o " +
                                      out + " --gpu a100-sxm-80gb");
  EXPECT_EQ(garbage.exit_code, 2);
  EXPECT_NE(garbage.output.find("garbage.log: expected text, found a NUL byte"), std::string::npos)
      << garbage.output;
  // Logs are read as every input is: a missing file, a folder or a device is named, not read.
  for (const std::string& path : {kLogs + "no_such.log", kLogs, std::string("/dev/zero")}) {
    const Outcome o =
        run_fsdpsim("calibrate import-nccl-tests " + path + " -o " + out + " --gpu a100-sxm-80gb");
    EXPECT_EQ(o.exit_code, 2) << path << "\n" << o.output;
    EXPECT_NE(o.output.find("error: " + path + ": "), std::string::npos) << o.output;
  }
  // One log named twice would count its repeats twice, and so would a copy of it.
  const std::string log = kLogs + "a100_8gpu_all_reduce_perf.log";
  const Outcome twice =
      run_fsdpsim("calibrate import-nccl-tests " + log + " " + kLogs + "." +
                  "/a100_8gpu_all_reduce_perf.log -o " + out + " --gpu a100-sxm-80gb");
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_NE(twice.output.find("/a100_8gpu_all_reduce_perf.log: the same log as " + log +
                              "; give each log once"),
            std::string::npos)
      << twice.output;
  EXPECT_FALSE(fs::exists(out));
  const fs::path copy = temp_dir() / "copy_of_a100_all_reduce.log";
  fs::copy_file(log, copy, fs::copy_options::overwrite_existing);
  const Outcome copied = run_fsdpsim("calibrate import-nccl-tests " + log + " " + copy.string() +
                                     " -o " + out + " --gpu a100-sxm-80gb");
  EXPECT_EQ(copied.exit_code, 2) << copied.output;
  EXPECT_NE(copied.output.find(copy.string() + ": the same text as " + log +
                               ", a copy of one run; give each log once"),
            std::string::npos)
      << copied.output;
  EXPECT_FALSE(fs::exists(out));
}

// A scenario written for the profile it is about to get (or naming one of another GPU, to be
// replaced) is planned without it, and the plan says so; a profile given with --set stands.
TEST(CalibrateCli, PlanGoesOnWithoutAProfileTheScenarioCannotUse) {
  const fs::path scenario = temp_dir() / "future_profile.json";
  std::ofstream(scenario) << R"({"schema_version": 1, "name": "mpt-1b-8xa100", "model": "mpt-1b",
  "hardware": {"preset": "a100-sxm-80gb", "nodes": 1, "calibration": "profiles/mycluster.json"},
  "training": {"global_batch": 16, "micro_batch": 2, "seq_len": 2048}})";
  const fs::path plan = temp_dir() / "future_plan.txt";
  const Outcome o = run_fsdpsim("calibrate plan " + scenario.string() + " -o " + plan.string());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("note: planned without the scenario's calibration profile, which cannot "
                          "be used ("),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("profiles/mycluster.json\" not found"), std::string::npos) << o.output;
  EXPECT_NE(read_file(plan).find("\ncollective all_gather 8 8 "), std::string::npos);
  EXPECT_EQ(o.output.find("[calibrated]"), std::string::npos) << o.output;
  const Outcome given = run_fsdpsim("calibrate plan " + scenario.string() +
                                    " --set hardware.calibration=profiles/other.json");
  EXPECT_EQ(given.exit_code, 2) << given.output;
  EXPECT_NE(given.output.find("profiles/other.json\" not found"), std::string::npos)
      << given.output;
}

// A collective priced above its curve's largest measured size is marked so in the plan, apart
// from the measured ones: mpt-1b's 96-205 MiB all-gathers against a profile cut at 64 MiB.
TEST(CalibrateCli, PlanMarksCollectivesAboveTheMeasuredSizes) {
  nlohmann::json profile = nlohmann::json::parse(read_file(kProfile));
  for (nlohmann::json& series : profile.at("collectives")) {
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& p : series.at("points")) {
      if (p.at("bytes").get<double>() <= 64.0 * 1024 * 1024) kept.push_back(p);
    }
    series["points"] = kept;
  }
  const fs::path cut = temp_dir() / "cut_at_64mib.json";
  std::ofstream(cut) << profile.dump(1);
  const Outcome o = run_fsdpsim("calibrate plan " + scenario_file().string() +
                                " --set hardware.calibration=" + cut.string());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("all_gather          8    8     96.05 MiB  x96  [calibrated, above the "
                          "curve's largest measured size]"),
            std::string::npos)
      << o.output;
}

TEST(CalibrateCli, PlanListsTheScenariosShapesAndWritesAHarnessPlan) {
  const fs::path plan = temp_dir() / "plan.txt";
  const Outcome o = run_fsdpsim("calibrate plan " + scenario_file().string() + " -o " +
                                plan.string() + " --set hardware.calibration=a100-sxm-80gb");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("all_gather          8    8     96.05 MiB  x96  [calibrated]"),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("[fallback]"), std::string::npos);  // GEMMs: not in the reference profile
  std::ifstream in(plan);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\ngemm bf16 "), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\ncollective all_gather 8 8 "), std::string::npos) << text.str();
  // The plan written names the file the harness reads; the plan says how it was planned.
  EXPECT_NE(o.output.find("measure them with: fsdpsim-calibrate --plan " + plan.string() +
                          " -o profile.json\n"),
            std::string::npos)
      << o.output;
  EXPECT_NE(text.str().find("\n# planned by: fsdpsim calibrate plan " + scenario_file().string() +
                            " --set hardware.calibration=a100-sxm-80gb\n"),
            std::string::npos)
      << text.str();
  // Without -o, the command it suggests plans the same scenario: with the --set options,
  // shell-quoted.
  const Outcome shown = run_fsdpsim("calibrate plan " + scenario_file().string() +
                                    " --set hardware.calibration=a100-sxm-80gb");
  EXPECT_NE(
      shown.output.find("measure them with: fsdpsim calibrate plan " + scenario_file().string() +
                        " --set hardware.calibration=a100-sxm-80gb -o plan.txt && "
                        "fsdpsim-calibrate --plan plan.txt -o profile.json\n"),
      std::string::npos)
      << shown.output;
  // A custom model's GEMM work has no shape: the plan lists none the harness would refuse.
  const fs::path custom_plan = temp_dir() / "custom_plan.txt";
  const Outcome custom = run_fsdpsim(
      "calibrate plan " + std::string(FSDPSIM_SOURCE_DIR) +
      "/scenarios/paper/sweeps/regnet9b_rate_limiter_2_4_nodes.json -o " + custom_plan.string());
  EXPECT_EQ(custom.exit_code, 0) << custom.output;
  EXPECT_NE(custom.output.find("launches of custom-layer GEMM work have no shape"),
            std::string::npos)
      << custom.output;
  EXPECT_EQ(read_file(custom_plan).find("gemm bf16 0 0 0"), std::string::npos);
  const Outcome two_nodes =
      run_fsdpsim("calibrate plan " + scenario_file().string() +
                  " --set hardware.nodes=2 --set training.global_batch=32 --set \"name=it's\"");
  EXPECT_EQ(two_nodes.exit_code, 0) << two_nodes.output;
  EXPECT_NE(
      two_nodes.output.find(" --set hardware.nodes=2 --set training.global_batch=32 --set "
                            "'name=it'\\''s' -o plan.txt && fsdpsim-calibrate --plan "
                            "plan.txt --rendezvous DIR -o profile.json on each of the 2 nodes"),
      std::string::npos)
      << two_nodes.output;
}

TEST(CalibrateCli, RunSaysWhichCostsCameFromTheProfile) {
  const Outcome o =
      run_fsdpsim("run " + scenario_file().string() + " --set hardware.calibration=a100-sxm-80gb");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find(" and 0 from calibration a100-sxm-80gb, the rest from the fallback "
                          "model"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("incomplete"), std::string::npos) << o.output;
  // A profile whose harness run stopped early says so wherever it prices a step.
  nlohmann::json profile = nlohmann::json::parse(
      read_file(fs::path(FSDPSIM_CONFIGS_DIR) / "calibration" / "a100-sxm-80gb.json"));
  profile["complete"] = false;
  const fs::path partial = temp_dir() / "partial_profile.json";
  std::ofstream(partial) << profile.dump(2);
  const Outcome incomplete =
      run_fsdpsim("run " + scenario_file().string() +
                  " --set hardware.calibration=" + partial.string() + " --json -");
  ASSERT_EQ(incomplete.exit_code, 0) << incomplete.output;
  EXPECT_EQ(nlohmann::json::parse(incomplete.output)["calibration"]["profile_complete"], false);
  const Outcome text = run_fsdpsim("run " + scenario_file().string() +
                                   " --set hardware.calibration=" + partial.string());
  EXPECT_NE(text.output.find("the profile is incomplete (\"complete\": false)"), std::string::npos)
      << text.output;
  // A profile named by a relative path is the scenario's folder's; the costs line names the file
  // it resolved to, wherever the command runs.
  const fs::path beside = scenario_file().parent_path() / "beside_scenario.json";
  std::ofstream(beside) << profile.dump(2);
  const Outcome relative = run_fsdpsim(
      "run " + scenario_file().string() + " --set hardware.calibration=beside_scenario.json",
      "cd / && ");
  EXPECT_NE(relative.output.find(" from calibration " + beside.string() + ", the rest"),
            std::string::npos)
      << relative.output;
  const Outcome bad =
      run_fsdpsim("run " + scenario_file().string() + " --set hardware.calibration=a100-sxm-80g");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("/hardware/calibration: unknown calibration profile \"a100-sxm-80g\""),
            std::string::npos)
      << bad.output;
  // A relative path that is not beside the scenario: the message says where it was looked for.
  const Outcome elsewhere = run_fsdpsim("run " + scenario_file().string() +
                                        " --set hardware.calibration=other/profile.json");
  EXPECT_EQ(elsewhere.exit_code, 2);
  EXPECT_NE(elsewhere.output.find(fmt::format(
                "not found (a relative path is read from the folder of {}, {}; give an absolute "
                "path for another)",
                scenario_file().filename().string(), scenario_file().parent_path().string())),
            std::string::npos)
      << elsewhere.output;
}

// `calibrate fit` takes a profile's name as the scenario's hardware.calibration does.
TEST(CalibrateCli, FitTakesAProfileByName) {
  const Outcome by_name = run_fsdpsim("calibrate fit a100-sxm-80gb");
  EXPECT_EQ(by_name.exit_code, 0) << by_name.output;
  EXPECT_EQ(by_name.output.rfind("profile a100-sxm-80gb ", 0), 0U) << by_name.output;
  const Outcome typo = run_fsdpsim("calibrate fit a100-sxm-80g");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("calibrate fit: unknown calibration profile \"a100-sxm-80g\" (did you "
                             "mean a100-sxm-80gb?)"),
            std::string::npos)
      << typo.output;
}

}  // namespace
