// The calibration profile's JSON schema (sim/app/calibration_json.cpp): round trips, the
// harness's own writer read back by the app, the shipped reference profiles, and bad input named
// by file, JSON path, what was expected and what was found.
#include "sim/app/calibration_json.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "calibrate/harness/results.hpp"
#include "sim/app/config_error.hpp"
#include "tests/unit/scratch_folder.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;

calibrate::CalibrationProfile sample_profile() {
  calibrate::CalibrationProfile p;
  p.name = "sample";
  p.description = "two series and a GEMM";
  p.created = "2026-01-02T03:04:05Z";
  p.tool = "test";
  p.complete = false;
  p.device = {"NVIDIA H100 80GB HBM3", "9.0", 132, Bytes(85520809984)};
  p.software = {"CUDA driver API 13.0", "13.0", "2.27.7", "13.0.1"};
  p.topology = {2, 8, {"a", "b"}, "NVLink4 + 8x400G IB"};
  p.sources = {"unit test"};
  p.notes = {"a note"};
  calibrate::CollectiveSeries s;
  s.op = hardware::Collective::kReduceScatter;
  s.dtype = Dtype::kFp32;
  s.ranks = 16;
  s.ranks_per_node = 8;
  s.group = "world";
  s.source = "harness";
  s.points.push_back(
      calibrate::CollectivePoint{Bytes(1024), Seconds(20e-6), Seconds(19e-6), Seconds(25e-6), 20});
  s.points.push_back(
      calibrate::CollectivePoint{Bytes(1 << 30), Seconds(0.02), std::nullopt, std::nullopt, 0});
  p.collectives.push_back(s);
  calibrate::CollectiveSeries c = s;
  c.op = hardware::Collective::kAllGather;
  c.concurrent_with = hardware::Collective::kReduceScatter;
  c.in_place = true;
  c.origin = calibrate::Origin::kDerived;
  c.derivation = "by hand";
  p.collectives.push_back(c);
  calibrate::GemmPoint g;
  g.dtype = Dtype::kTf32;
  g.shape = GemmShape{4096, 1024, 512, 2};
  g.median = Seconds(1e-4);
  g.min = Seconds(0.9e-4);
  g.max = Seconds(1.2e-4);
  g.repeats = 25;
  g.median_under_nccl = Seconds(1.3e-4);
  g.source = "plan";
  p.gemms.push_back(g);
  calibrate::RankSpeedMeasurement speeds;
  speeds.shape = GemmShape{8192, 8192, 8192, 1};
  speeds.held = Seconds(3.0);
  speeds.repeats = 20;
  speeds.launches = 10000;
  speeds.ranks = {{"a", microseconds(2000.0), microseconds(1990.0), microseconds(2010.0),
                   microseconds(1700.0), microseconds(3.0)},
                  {"b", microseconds(2100.0), std::nullopt, std::nullopt, microseconds(1750.0),
                   microseconds(3.5)}};
  p.rank_speeds = speeds;
  p.memory.device_copy = gb_per_s(3000.0);
  p.memory.kernel_launch = microseconds(2.5);
  p.memory.allocations = {{mib(2), microseconds(40.0), microseconds(60.0)},
                          {gib(2), microseconds(900.0), microseconds(1500.0)}};
  return p;
}

// The ConfigError message for `json` read as a profile from "bad.json".
std::string error_for(const nlohmann::json& json) {
  try {
    (void)profile_from_json(json, "bad.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

nlohmann::json valid_json() {
  return nlohmann::json::parse(profile_to_json(sample_profile()).dump());
}

TEST(CalibrationProfileJson, RoundTripKeepsEveryField) {
  const calibrate::CalibrationProfile p = sample_profile();
  const nlohmann::json j = nlohmann::json::parse(profile_to_json(p).dump());
  const calibrate::CalibrationProfile q = profile_from_json(j, "round.json");
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.description, p.description);
  EXPECT_EQ(q.created, p.created);
  EXPECT_FALSE(q.complete);
  EXPECT_EQ(q.device.name, p.device.name);
  EXPECT_EQ(q.device.sm_count, 132);
  EXPECT_EQ(q.device.memory, p.device.memory);
  EXPECT_EQ(q.software.nccl, "2.27.7");
  EXPECT_EQ(q.topology.hosts, p.topology.hosts);
  EXPECT_EQ(q.notes, p.notes);
  ASSERT_EQ(q.collectives.size(), 2U);
  const calibrate::CollectiveSeries& s = q.collectives[0];
  EXPECT_EQ(s.op, hardware::Collective::kReduceScatter);
  EXPECT_EQ(s.dtype, Dtype::kFp32);
  EXPECT_EQ(s.ranks, 16);
  EXPECT_EQ(s.ranks_per_node, 8);
  ASSERT_EQ(s.points.size(), 2U);
  EXPECT_NEAR(s.points[0].median.value(), 20e-6, 1e-15);
  EXPECT_NEAR(s.points[0].min->value(), 19e-6, 1e-15);
  EXPECT_NEAR(s.points[0].max->value(), 25e-6, 1e-15);
  EXPECT_EQ(s.points[0].repeats, 20);
  EXPECT_FALSE(s.points[1].min.has_value());
  const calibrate::CollectiveSeries& c = q.collectives[1];
  EXPECT_EQ(c.concurrent_with, hardware::Collective::kReduceScatter);
  EXPECT_TRUE(c.in_place);
  EXPECT_EQ(c.origin, calibrate::Origin::kDerived);
  EXPECT_EQ(c.derivation, "by hand");
  ASSERT_EQ(q.gemms.size(), 1U);
  EXPECT_EQ(q.gemms[0].dtype, Dtype::kTf32);
  EXPECT_EQ(q.gemms[0].shape.batch, 2);
  EXPECT_NEAR(q.gemms[0].median_under_nccl->value(), 1.3e-4, 1e-15);
  EXPECT_FALSE(q.gemms[0].median_alone_beside_nccl.has_value());
  ASSERT_TRUE(q.rank_speeds.has_value());
  EXPECT_EQ(q.rank_speeds->shape.k, 8192);
  EXPECT_NEAR(q.rank_speeds->held.value(), 3.0, 1e-12);
  EXPECT_EQ(q.rank_speeds->repeats, 20);
  EXPECT_EQ(q.rank_speeds->launches, 10000);
  ASSERT_EQ(q.rank_speeds->ranks.size(), 2U);
  EXPECT_EQ(q.rank_speeds->ranks[1].host, "b");
  EXPECT_NEAR(q.rank_speeds->ranks[1].gemm.value(), 2100e-6, 1e-15);
  EXPECT_NEAR(q.rank_speeds->ranks[0].gemm_min->value(), 1990e-6, 1e-15);
  EXPECT_NEAR(q.rank_speeds->ranks[1].gemm_short->value(), 1750e-6, 1e-15);
  EXPECT_FALSE(q.rank_speeds->ranks[1].gemm_max.has_value());
  EXPECT_NEAR(q.rank_speeds->ranks[1].launch->value(), 3.5e-6, 1e-15);
  EXPECT_NEAR(q.memory.device_copy->value(), 3000e9, 1.0);
  EXPECT_NEAR(q.memory.kernel_launch->value(), 2.5e-6, 1e-15);
  ASSERT_EQ(q.memory.allocations.size(), 2U);
  EXPECT_EQ(q.memory.allocations[1].bytes, gib(2));
  EXPECT_NEAR(q.memory.allocations[1].free.value(), 1500e-6, 1e-15);
  // And back again: the same JSON.
  EXPECT_EQ(profile_to_json(q).dump(), profile_to_json(p).dump());
  // The alone time beside NCCL, where a GEMM has it, goes out and comes back too.
  calibrate::CalibrationProfile beside = sample_profile();
  beside.gemms[0].median_alone_beside_nccl = Seconds(1.1e-4);
  const calibrate::CalibrationProfile back =
      profile_from_json(nlohmann::json::parse(profile_to_json(beside).dump()), "beside.json");
  ASSERT_TRUE(back.gemms[0].median_alone_beside_nccl.has_value());
  EXPECT_NEAR(back.gemms[0].median_alone_beside_nccl->value(), 1.1e-4, 1e-15);
}

TEST(CalibrationProfileJson, TheHarnessWriterIsReadByTheApp) {
  harness::Results r;
  r.name = "from the harness";
  r.created = "2026-01-01T00:00:00Z";
  r.tool = "fsdpsim-calibrate test";
  r.device_name = "NVIDIA H200";
  r.compute_capability = "9.0";
  r.sm_count = 132;
  r.memory_bytes = 150000000000;
  r.nccl = "2.27.7";
  r.nodes = 2;
  r.gpus_per_node = 8;
  r.hosts = {"n1", "n2"};
  r.notes = {"fp8 \"skipped\"\tfor a reason"};
  r.complete = true;
  r.collectives.push_back(
      harness::SeriesResult{"all_gather",
                            "bf16",
                            "world",
                            16,
                            8,
                            "",
                            {{1024, 30.5, 29.0, 40.0, 20}, {2048, 31.0, 30.0, 31.5, 20}}});
  r.collectives.push_back(harness::SeriesResult{
      "reduce_scatter", "bf16", "world", 16, 8, "all_gather", {{1 << 20, 80.0, 70.0, 90.0, 20}}});
  r.gemms.push_back(harness::GemmResult{"bf16", 8192, 8192, 8192, 1, 1500.0, 1490.0, 1520.0, 25,
                                        1700.0, "grid", 1520.0});
  r.rank_speeds = harness::RankSpeedsResult{"bf16", 8192, 3000.0, 20, 10000, {}};
  for (std::int32_t rank = 0; rank < 16; ++rank) {
    r.rank_speeds->ranks.push_back(harness::RankSpeedResult{
        rank, rank < 8 ? "n1" : "n2", rank == 0 ? 1500.0 : 1520.0, 1260.0, 1490.0, 1600.0, 2.5});
  }
  r.device_copy_GBps = 4000.0;
  r.h2d_pinned_GBps = 50.0;
  r.d2h_pinned_GBps = 51.0;
  r.kernel_launch_us = 2.1;
  r.allocations = {{2 << 20, 35.0, 50.0}, {8 << 20, 60.0, 80.0}};
  const calibrate::CalibrationProfile p =
      profile_from_json(nlohmann::json::parse(harness::to_json(r)), "harness.json");
  EXPECT_EQ(p.name, "from the harness");
  EXPECT_EQ(p.notes.front(), "fp8 \"skipped\"\tfor a reason");
  ASSERT_EQ(p.collectives.size(), 2U);
  EXPECT_EQ(p.collectives[0].points.size(), 2U);
  EXPECT_NEAR(p.collectives[0].points[0].median.value(), 30.5e-6, 1e-15);
  EXPECT_EQ(p.collectives[1].concurrent_with, hardware::Collective::kAllGather);
  ASSERT_EQ(p.gemms.size(), 1U);
  EXPECT_NEAR(p.gemms[0].median_under_nccl->value(), 1700e-6, 1e-15);
  ASSERT_TRUE(p.gemms[0].median_alone_beside_nccl.has_value());
  EXPECT_NEAR(p.gemms[0].median_alone_beside_nccl->value(), 1520e-6, 1e-15);
  ASSERT_TRUE(p.rank_speeds.has_value());
  ASSERT_EQ(p.rank_speeds->ranks.size(), 16U);
  EXPECT_EQ(p.rank_speeds->ranks[9].host, "n2");
  EXPECT_EQ(p.rank_speeds->shape.m, 8192);
  EXPECT_EQ(p.rank_speeds->launches, 10000);
  EXPECT_NEAR(p.rank_speeds->ranks[0].gemm.value(), 1500e-6, 1e-15);
  EXPECT_NEAR(p.rank_speeds->ranks[15].gemm_max->value(), 1600e-6, 1e-15);
  EXPECT_NEAR(p.rank_speeds->ranks[15].gemm_short->value(), 1260e-6, 1e-15);
  EXPECT_NEAR(p.rank_speeds->ranks[3].launch->value(), 2.5e-6, 1e-15);
  EXPECT_NEAR(p.memory.h2d_pinned->value(), 50e9, 1.0);
  ASSERT_EQ(p.memory.allocations.size(), 2U);
  EXPECT_EQ(p.memory.allocations[1].bytes, mib(8));
  EXPECT_NEAR(p.memory.allocations[0].malloc.value(), 35e-6, 1e-15);
  // Atomic writes: the file appears whole, no temporary left behind.
  const fs::path dir = fsdpsim::test_support::temp_dir("harness_writer");
  harness::write_atomically((dir / "p.json").string(), harness::to_json(r));
  EXPECT_EQ(read_profile(dir / "p.json").name, "from the harness");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(CalibrationProfileJson, ShippedReferenceProfilesLoadAndFit) {
  const PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  for (const std::string& name : presets.names("calibration")) {
    SCOPED_TRACE(name);
    const calibrate::CalibrationProfile p =
        read_profile(fs::path(FSDPSIM_CONFIGS_DIR) / "calibration" / (name + ".json"));
    EXPECT_FALSE(p.sources.empty()) << "a shipped profile cites its sources";
    for (const calibrate::CollectiveSeries& s : p.collectives) EXPECT_FALSE(s.source.empty());
    const auto curves = load_calibration(name, fs::path(FSDPSIM_SOURCE_DIR) / "scenario.json",
                                         "/hardware/calibration", presets);
    // Reference profiles hold collectives; a one-GPU measurement holds GEMMs alone.
    EXPECT_FALSE(curves->collectives().empty() && curves->gemms().empty());
  }
  EXPECT_GE(presets.names("calibration").size(), 3U);
}

TEST(CalibrationProfileJson, BadInputNamesFilePathExpectedAndFound) {
  nlohmann::json j = valid_json();
  j["schema_version"] = 2;
  EXPECT_EQ(error_for(j), "bad.json: /schema_version: expected 1, found 2");

  j = valid_json();
  j["kind"] = "fsdpsim_calibration_fit";
  EXPECT_NE(error_for(j).find("bad.json: /kind: expected \"fsdpsim_calibration_profile\""),
            std::string::npos);

  j = valid_json();
  j["colectives"] = j["collectives"];
  EXPECT_EQ(error_for(j), "bad.json: /colectives: unknown key; did you mean collectives?");

  j = valid_json();
  j["collectives"][0]["points"][1]["bytes"] = -5;
  EXPECT_NE(error_for(j).find("bad.json: /collectives/0/points/1/bytes: expected"),
            std::string::npos)
      << error_for(j);

  j = valid_json();
  j["collectives"][0]["points"][0]["min_us"] = 50.0;
  EXPECT_EQ(error_for(j),
            "bad.json: /collectives/0/points/0/min_us: expected at most time_us = 20, found 50");

  j = valid_json();
  j["collectives"][0]["ranks_per_node"] = 5;
  EXPECT_EQ(error_for(j),
            "bad.json: /collectives/0/ranks_per_node: expected a divisor of ranks = 16, found 5");

  j = valid_json();
  j["collectives"][1]["collective"] = "all_gathr";
  EXPECT_NE(error_for(j).find(
                "bad.json: /collectives/1/collective: expected one of all_gather, reduce_scatter, "
                "all_reduce, found \"all_gathr\"; did you mean all_gather?"),
            std::string::npos)
      << error_for(j);

  j = valid_json();
  j["rank_speeds"]["ranks"][1]["rank"] = 0;
  EXPECT_EQ(error_for(j),
            "bad.json: /rank_speeds/ranks/1/rank: expected 1 (every rank once, in order), found 0");

  j = valid_json();
  j["rank_speeds"]["ranks"][0]["gemm_us"] = 0.0;
  EXPECT_NE(error_for(j).find("bad.json: /rank_speeds/ranks/0/gemm_us: expected"),
            std::string::npos)
      << error_for(j);

  j = valid_json();
  j["rank_speeds"]["ranks"][0]["gemm_max_us"] = 1000.0;
  EXPECT_EQ(error_for(j),
            "bad.json: /rank_speeds/ranks/0/gemm_max_us: expected at least gemm_us = 2000, found "
            "1000");

  // held_ms is how long each rank ran the GEMM back to back: more than nothing, and at least
  // one GEMM (rank 1's takes 2100 us).
  j = valid_json();
  j["rank_speeds"]["held_ms"] = 0.0;
  EXPECT_NE(error_for(j).find("bad.json: /rank_speeds/held_ms: expected"), std::string::npos)
      << error_for(j);
  j["rank_speeds"]["held_ms"] = 2.1;
  EXPECT_EQ(error_for(j), "");
  j["rank_speeds"]["held_ms"] = 2.0;
  EXPECT_EQ(error_for(j),
            "bad.json: /rank_speeds/ranks/1/gemm_us: expected at most held_ms (2 ms), the time "
            "each rank ran the GEMM back to back, found 2100 us");

  j = valid_json();
  j["rank_speeds"]["ranks"][1].erase("launch_us");
  EXPECT_EQ(error_for(j),
            "bad.json: /rank_speeds/ranks/1/launch_us: expected launch_us on every rank or on "
            "none, as on rank 0, found it missing");

  j = valid_json();
  j["rank_speeds"]["ranks"][0].erase("gemm_short_us");
  EXPECT_EQ(error_for(j),
            "bad.json: /rank_speeds/ranks/1/gemm_short_us: expected gemm_short_us on every rank "
            "or on none, as on rank 0, found it here");

  j = valid_json();
  j["rank_speeds"]["ranks"] = nlohmann::json::array();
  EXPECT_NE(error_for(j).find("bad.json: /rank_speeds/ranks: expected an array of every rank's"),
            std::string::npos)
      << error_for(j);

  j = valid_json();
  j["gemms"][0]["dtype"] = "int4";
  EXPECT_EQ(
      error_for(j),
      "bad.json: /gemms/0/dtype: expected one of fp32, tf32, bf16, fp16, fp8, found \"int4\"");

  j = valid_json();
  j["collectives"][1].erase("derivation");
  EXPECT_NE(error_for(j).find("bad.json: /collectives/1/derivation: a derived series must say how"),
            std::string::npos);

  j = valid_json();
  j["collectives"][0]["points"] = nlohmann::json::array();
  EXPECT_NE(error_for(j).find("bad.json: /collectives/0/points: expected an array of at least one"),
            std::string::npos);

  j = valid_json();
  j["topology"]["hosts"] = "a,b";
  EXPECT_EQ(error_for(j), "bad.json: /topology/hosts: expected an array, found the string \"a,b\"");

  // Plausibility bounds: sizes whose rates would overflow, times no device measures.
  j = valid_json();
  j["collectives"][0]["points"][0]["bytes"] = 9223372036854775807LL;
  EXPECT_NE(error_for(j).find("/collectives/0/points/0/bytes: expected a positive integer of at "
                              "most 1125899906842624"),
            std::string::npos)
      << error_for(j);
  j = valid_json();
  j["collectives"][0]["points"][0]["time_us"] = 1e-300;
  EXPECT_NE(error_for(j).find("/collectives/0/points/0/time_us: expected a time of 0.001 us"),
            std::string::npos)
      << error_for(j);
  j = valid_json();
  j["gemms"][0]["m"] = 1099511627776LL;
  EXPECT_NE(error_for(j).find("/gemms/0/m: expected a positive integer of at most 16777216"),
            std::string::npos)
      << error_for(j);

  j = valid_json();
  j["collectives"][0].erase("dtype");
  EXPECT_EQ(error_for(j), "bad.json: /collectives/0/dtype: required key is missing");

  // The informational bandwidths: numbers, and the ones bytes and time_us imply (1 GiB in
  // 20 ms is 53.69 GB/s; a reduce-scatter on 16 ranks moves 15/16 of it per rank, 50.33).
  j = valid_json();
  ASSERT_TRUE(j["collectives"][0]["points"][1].contains("busbw_GBps"));
  j["collectives"][0]["points"][1]["busbw_GBps"] = nullptr;
  EXPECT_EQ(error_for(j),
            "bad.json: /collectives/0/points/1/busbw_GBps: expected a non-negative number, found "
            "null");
  j = valid_json();
  j["collectives"][0]["points"][1]["algbw_GBps"] = 99.0;
  EXPECT_EQ(error_for(j),
            "bad.json: /collectives/0/points/1/algbw_GBps: expected 53.6871 GB/s, as the sizes and "
            "time_us imply (the field is derived from them), found 99");
  j = valid_json();
  j["collectives"][0]["points"][1]["busbw_GBps"] = 53.69;  // the algbw: a factor forgotten
  EXPECT_NE(error_for(j).find("/collectives/0/points/1/busbw_GBps: expected 50.3316 GB/s"),
            std::string::npos)
      << error_for(j);
  j = valid_json();
  j["collectives"][0]["points"][1]["algbw_GBps"] = 53.69;  // as nccl-tests prints it
  j["collectives"][0]["points"][1]["busbw_GBps"] = 50.33;
  EXPECT_EQ(error_for(j), "");
  // A GEMM's tflops likewise: 2 x 4096 x 1024 x 512 x 2 flops in 100 us is 85.9 TFLOP/s.
  j = valid_json();
  j["gemms"][0]["tflops"] = "fast";
  EXPECT_EQ(error_for(j),
            "bad.json: /gemms/0/tflops: expected a non-negative number, found the string \"fast\"");
  j["gemms"][0]["tflops"] = 85.9;
  EXPECT_EQ(error_for(j), "");
  j["gemms"][0]["tflops"] = 171.8;
  EXPECT_NE(error_for(j).find("/gemms/0/tflops: expected 85.8993 TFLOP/s"), std::string::npos)
      << error_for(j);
  // A copy rate below a PCIe 1.0 x1 link's is a time in the wrong unit.
  j = valid_json();
  j["memory"] = {{"h2d_pinned_GBps", 0.004}};
  EXPECT_EQ(error_for(j),
            "bad.json: /memory/h2d_pinned_GBps: expected a rate from 0.1 to 100000 GB/s (a PCIe "
            "1.0 x1 link moves 0.25), found 0.004");
  j["memory"] = {{"h2d_pinned_GBps", 0.5}};
  EXPECT_EQ(error_for(j), "");
  // Counts of nothing, and sizes no job has: refused, not read as "unknown".
  j = valid_json();
  j["gemms"][0]["repeats"] = 0;
  EXPECT_EQ(error_for(j),
            "bad.json: /gemms/0/repeats: expected a positive integer, found the number 0");
  j = valid_json();
  j["topology"]["gpus_per_node"] = 1000000000;
  EXPECT_NE(error_for(j).find("bad.json: /topology/gpus_per_node: expected"), std::string::npos)
      << error_for(j);
  // The harness lays the ranks out node by node: 2 ranks on nodes of 1 GPU (or of 8, part of
  // one node) are whole nodes, 3 ranks on nodes of 2 are not.
  j = valid_json();
  j["topology"]["gpus_per_node"] = 1;
  EXPECT_EQ(error_for(j), "");
  j["rank_speeds"]["ranks"].push_back(j["rank_speeds"]["ranks"][1]);
  j["rank_speeds"]["ranks"][2]["rank"] = 2;
  j["topology"]["gpus_per_node"] = 2;
  EXPECT_EQ(error_for(j),
            "bad.json: /topology/gpus_per_node: expected a divisor of the 3 ranks rank_speeds "
            "measured (the ranks are laid out node by node), found 2");
  // More ranks than the measured job had GPUs: not this job's measurement.
  j = valid_json();
  j["topology"]["nodes"] = 1;
  j["topology"]["gpus_per_node"] = 1;
  EXPECT_EQ(error_for(j),
            "bad.json: /rank_speeds/ranks: expected at most 1 ranks, the topology's 1 node x 1 "
            "GPU, found 2");
  // Allocator and launch times a GPU's host cannot take: a time in the wrong unit.
  j = valid_json();
  j["memory"] = {{"kernel_launch_us", 1e9}};
  EXPECT_EQ(error_for(j),
            "bad.json: /memory/kernel_launch_us: expected at most 10000 us (a launch takes "
            "microseconds), found 1e+09");
  j["memory"] = {{"allocations", {{{"bytes", 1 << 30}, {"malloc_us", 1e10}, {"free_us", 700}}}}};
  EXPECT_NE(error_for(j).find("bad.json: /memory/allocations/0/malloc_us: expected at most "
                              "1.1e+06 us for 1073741824 bytes"),
            std::string::npos)
      << error_for(j);
  j["memory"]["allocations"][0]["malloc_us"] = 200;
  EXPECT_EQ(error_for(j), "");
  // 0 SMs is not "unknown" (leave the key out): it would turn the check against the GPU off.
  j = valid_json();
  j["device"]["sm_count"] = 0;
  EXPECT_EQ(error_for(j),
            "bad.json: /device/sm_count: expected a positive integer, found the number 0");
}

TEST(CalibrationProfileJson, ScenarioReferenceErrorsNameTheScenario) {
  const PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  try {
    (void)load_calibration("a100-sxm-80g", "scenario.json", "/hardware/calibration", presets);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(
        m.find(
            "scenario.json: /hardware/calibration: unknown calibration profile \"a100-sxm-80g\""),
        std::string::npos)
        << m;
    EXPECT_NE(m.find("did you mean a100-sxm-80gb"), std::string::npos) << m;
  }
}

TEST(CalibrationProfileJson, ProfileOfAnotherGpuModelIsRefused) {
  calibrate::DeviceInfo h200;
  h200.name = "NVIDIA H200";
  h200.sm_count = 132;
  h200.memory = Bytes{150109880320};
  hardware::GpuSpec gpu;
  gpu.name = "h200-sxm-141gb";
  gpu.sm_count = 132;
  gpu.hbm = Bytes{150109945856};
  EXPECT_EQ(calibration_device_mismatch(h200, gpu), "");  // the same GPU, another driver's count

  gpu.name = "a100-sxm-40gb";
  gpu.sm_count = 108;
  gpu.hbm = Bytes{42505076736};
  EXPECT_EQ(calibration_device_mismatch(h200, gpu),
            "the profile was measured on NVIDIA H200 (132 SMs, 139.8 GiB), the scenario's GPU "
            "a100-sxm-40gb has 108 SMs and 39.6 GiB: its measurements are another GPU model's; "
            "calibrate on this GPU or leave the profile out");

  // An H100 has the H200's SMs; its memory tells them apart.
  gpu.name = "h100-sxm-80gb";
  gpu.sm_count = 132;
  gpu.hbm = Bytes{85017755648};
  EXPECT_NE(calibration_device_mismatch(h200, gpu), "");

  // What the profile does not say is not compared (the A100 reference profiles give the SMs
  // alone); load_calibration refuses one that says neither (below).
  calibrate::DeviceInfo sms_only;
  sms_only.sm_count = 132;
  EXPECT_EQ(calibration_device_mismatch(sms_only, gpu), "");
  sms_only.name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(calibration_device_mismatch(sms_only, gpu), "");
  // But a name it gives is: with the SMs alike and no memory given, the name tells an A100 or an
  // H200 from the H100 it would otherwise price.
  sms_only.name = "NVIDIA A100 SXM (NVLink3)";
  EXPECT_EQ(calibration_device_mismatch(sms_only, gpu),
            "the profile was measured on NVIDIA A100 SXM (NVLink3), not on the H100 of "
            "h100-sxm-80gb: its measurements are another GPU model's; calibrate on this GPU or "
            "leave the profile out");
  sms_only.name = "NVIDIA H200";
  EXPECT_NE(calibration_device_mismatch(sms_only, gpu), "");

  const PresetLocator presets{FSDPSIM_CONFIGS_DIR};
  hardware::ClusterSpec cluster;
  cluster.gpu = gpu;
  try {
    (void)load_calibration("h200-sxm-141gb-measured", "scenario.json", "/hardware/calibration",
                           presets, &cluster);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("scenario.json: /hardware/calibration: the profile was "
                                          "measured on NVIDIA H200 (132 SMs, 139.8 GiB)",
                                          0),
              0U)
        << e.what();
  }
}

// An H100 node as the checks of a loaded profile see it: its SMs, memory, peaks and NVLink.
hardware::ClusterSpec h100_cluster() {
  hardware::ClusterSpec c;
  c.gpu.name = "h100-sxm-80gb";
  c.gpu.sm_count = 132;
  c.gpu.hbm = Bytes{85017755648};
  c.gpu.peak_dense[static_cast<std::size_t>(Dtype::kTf32)] = FlopsPerSec(494.7e12);
  c.gpu.peak_dense[static_cast<std::size_t>(Dtype::kBf16)] = FlopsPerSec(989.4e12);
  c.nvlink_bandwidth = gb_per_s(450.0);
  return c;
}

// The ConfigError message of loading `json` as a profile file for a scenario on `cluster`.
std::string load_error(const nlohmann::json& json, const hardware::ClusterSpec* cluster) {
  const fs::path dir = fsdpsim::test_support::temp_dir("profile_load");
  const fs::path file = dir / "profile.json";
  std::ofstream(file) << json.dump(2);
  try {
    (void)load_calibration(file.string(), "scenario.json", "/hardware/calibration",
                           PresetLocator{FSDPSIM_CONFIGS_DIR}, cluster);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CalibrationProfileJson, AProfileThatDoesNotSayWhichGpuItMeasuredIsRefused) {
  const hardware::ClusterSpec cluster = h100_cluster();
  EXPECT_EQ(load_error(valid_json(), &cluster), "");
  nlohmann::json j = valid_json();
  j["device"] = {{"name", "NVIDIA A100-SXM4-80GB"}};  // what an nccl-tests log says
  EXPECT_NE(
      load_error(j, nullptr)
          .find("profile.json: /device: expected sm_count or memory_bytes, found only the name "
                "\"NVIDIA A100-SXM4-80GB\""),
      std::string::npos)
      << load_error(j, nullptr);
  j["device"] = {{"name", "NVIDIA H100"}, {"memory_bytes", 85520809984}};
  EXPECT_EQ(load_error(j, &cluster), "");
}

// Numbers no H100 can produce: a GEMM above its dense peak, a collective at more than twice
// its NVLink line rate, GEMMs faster alongside NCCL than alone, a layout fsdpsim does not key.
TEST(CalibrationProfileJson, MeasurementsBeyondTheHardwareAreRefused) {
  const hardware::ClusterSpec cluster = h100_cluster();
  nlohmann::json j = valid_json();
  // 2 x 4096 x 1024 x 512 x 2 flops at the tf32 peak of 494.7 TFLOP/s take 17.4 us.
  j["gemms"][0]["time_us"] = 15.0;
  j["gemms"][0]["min_us"] = 15.0;
  j["gemms"][0]["max_us"] = 16.0;
  EXPECT_NE(
      load_error(j, &cluster)
          .find("scenario.json: /hardware/calibration: GEMM 4096x1024x512 (batch 2) tf32 in 15 us "
                "is 573 TFLOP/s, above the 495 TFLOP/s dense peak of the scenario's GPU "
                "h100-sxm-80gb: a time in the wrong unit, or another GPU's measurement (the "
                "profile's /gemms/0)"),
      std::string::npos)
      << load_error(j, &cluster);
  j["gemms"][0]["time_us"] = 17.5;  // just under the peak: a real (if excellent) kernel
  j["gemms"][0]["min_us"] = 17.5;
  j["gemms"][0]["max_us"] = 18.0;
  j["gemms"][0]["under_nccl_time_us"] = 20.0;
  EXPECT_EQ(load_error(j, &cluster), "");
  EXPECT_EQ(load_error(j, nullptr), "");  // without a scenario's GPU there is nothing to compare

  // The rank-speed GEMM is checked the same way: 2 x 8192^3 in 1 ms is 1100 TFLOP/s.
  j = valid_json();
  j["rank_speeds"]["ranks"][1]["gemm_us"] = 1000.0;
  EXPECT_NE(load_error(j, &cluster)
                .find("GEMM 8192x8192x8192 bf16 in 1000 us is 1100 TFLOP/s, above the 989 "
                      "TFLOP/s dense peak of the scenario's GPU h100-sxm-80gb: a time in the "
                      "wrong unit, or another GPU's measurement (the profile's "
                      "/rank_speeds/ranks/1/gemm_us)"),
            std::string::npos)
      << load_error(j, &cluster);

  // So is the fastest repeat of each (a median of 2000 us with a minimum of 1 us is a typo).
  j = valid_json();
  j["rank_speeds"]["ranks"][0]["gemm_min_us"] = 1000.0;
  EXPECT_NE(load_error(j, &cluster).find("(the profile's /rank_speeds/ranks/0/gemm_min_us)"),
            std::string::npos)
      << load_error(j, &cluster);
  j["rank_speeds"]["ranks"][0]["gemm_min_us"] = 1990.0;
  EXPECT_EQ(load_error(j, &cluster), "");
  j = valid_json();
  j["gemms"][0]["time_us"] = 17.5;
  j["gemms"][0]["min_us"] = 15.0;
  j["gemms"][0]["max_us"] = 18.0;
  EXPECT_NE(load_error(j, &cluster)
                .find("GEMM 4096x1024x512 (batch 2) tf32 in 15 us is 573 "
                      "TFLOP/s, above the 495 TFLOP/s dense peak"),
            std::string::npos)
      << load_error(j, &cluster);
  EXPECT_NE(load_error(j, &cluster).find("(the profile's /gemms/0/min_us)"), std::string::npos)
      << load_error(j, &cluster);

  // A GEMM's time under NCCL is held to the same bounds: 2 x 8192^3 in 1.5 s is 0.7 TFLOP/s,
  // under 1 % of the bf16 peak (ns written as us).
  j = valid_json();
  j["gemms"][0] = {{"dtype", "bf16"}, {"m", 8192},         {"n", 8192},
                   {"k", 8192},       {"time_us", 1500.0}, {"under_nccl_time_us", 1.5e6}};
  EXPECT_NE(load_error(j, &cluster).find("(the profile's /gemms/0/under_nccl_time_us)"),
            std::string::npos)
      << load_error(j, &cluster);
  j["gemms"][0]["under_nccl_time_us"] = 1800.0;
  EXPECT_EQ(load_error(j, &cluster), "");

  j = valid_json();
  // 15/16 x 1 GiB in 1 ms is 1007 GB/s of bus bandwidth, over 2 x 450. (The bandwidths derived
  // from the old time go: they would no longer match.)
  j["collectives"][0]["points"][1]["time_us"] = 1000.0;
  j["collectives"][0]["points"][1].erase("algbw_GBps");
  j["collectives"][0]["points"][1].erase("busbw_GBps");
  EXPECT_NE(load_error(j, &cluster)
                .find("reduce_scatter on 16 ranks, 1073741824 bytes in 1000 us, "
                      "is 1007 GB/s of bus bandwidth, more than twice the 450 "
                      "GB/s NVLink line rate"),
            std::string::npos)
      << load_error(j, &cluster);

  // Across nodes, the scenario's NICs bound it: a ring over 16 ranks, 8 per node, takes in half
  // the buffer through each node's NICs, so its busbw is at most 15/8 of their rate (x1.05).
  // valid_json's 1 GiB in 20 ms is 50 GB/s: over 100 Gb/s NICs per node (24.6 GB/s), not over
  // 8 x 400 Gb/s.
  j = valid_json();
  hardware::ClusterSpec slow_network = cluster;
  slow_network.nic_bandwidth_per_node = gbit_per_s(100.0);
  EXPECT_NE(load_error(j, &slow_network)
                .find("reduce_scatter on 16 ranks, 1073741824 bytes in 20000 us, is 50 GB/s of "
                      "bus bandwidth, more than the scenario's network can carry (25 GB/s for 16 "
                      "ranks, 8 per node, with 100 Gb/s of NICs per node, "
                      "hardware.node.nic_Gbps_per_node): the profile was measured on a faster "
                      "network; set the cluster's NIC bandwidth, or use a profile of this one "
                      "(the profile's /collectives/0/points/1)"),
            std::string::npos)
      << load_error(j, &slow_network);
  slow_network.nic_bandwidth_per_node = gbit_per_s(3200.0);
  EXPECT_EQ(load_error(j, &slow_network), "");

  // A thousandfold too slow (ns written as us): refused too, where the size makes latency moot.
  j = valid_json();
  j["collectives"][0]["points"][1]["time_us"] = 5e6;
  j["collectives"][0]["points"][1].erase("algbw_GBps");
  j["collectives"][0]["points"][1].erase("busbw_GBps");
  hardware::ClusterSpec with_nics = cluster;
  with_nics.nic_bandwidth_per_node = gb_per_s(400.0);  // 8 x 400 Gb/s
  EXPECT_NE(load_error(j, &with_nics)
                .find("reduce_scatter on 16 ranks, 1073741824 bytes in 5e+06 us, is 0.201 GB/s "
                      "of bus bandwidth, under 1 % of the 400 GB/s network (all NICs of a node) "
                      "line rate of the scenario's h100-sxm-80gb: a time or size in the wrong "
                      "unit (ns written as us, KiB as bytes?) (the profile's "
                      "/collectives/0/points/1)"),
            std::string::npos)
      << load_error(j, &with_nics);

  // The same 20 ms for 1 GiB with the size written in KiB (1 MiB): the curve stops below the
  // large sizes, but 20 ms is 448 times the group's ring latency (NCCL's model: 14 + 14 x 1.9 +
  // 1 x 4 = 44.6 us). 1 MiB in 100 us, a latency-bound reading, passes.
  j = valid_json();
  j["collectives"][0]["points"][1]["bytes"] = 1 << 20;
  j["collectives"][0]["points"][1].erase("algbw_GBps");
  j["collectives"][0]["points"][1].erase("busbw_GBps");
  hardware::ClusterSpec with_latency = with_nics;
  with_latency.collective_base_latency = microseconds(14.0);
  with_latency.nvlink_hop_latency = microseconds(1.9);
  with_latency.network_hop_latency = microseconds(4.0);
  EXPECT_NE(load_error(j, &with_latency)
                .find("reduce_scatter on 16 ranks, 1048576 bytes in 20000 us, is 0.0492 GB/s of "
                      "bus bandwidth, under 1 % of the 400 GB/s network (all NICs of a node) "
                      "line rate of the scenario's h100-sxm-80gb, and over 100 times its group's "
                      "44.6 us ring latency: a time or size in the wrong unit (ns written as us, "
                      "KiB as bytes?) (the profile's /collectives/0/points/1)"),
            std::string::npos)
      << load_error(j, &with_latency);
  EXPECT_EQ(load_error(j, &with_nics), "");  // no latency model: no yardstick for small sizes
  j["collectives"][0]["points"][1]["time_us"] = 100.0;
  EXPECT_EQ(load_error(j, &with_latency), "");

  j = valid_json();
  j["gemms"][0]["m"] = 8192;  // 2 x 8192 x 1024 x 512 x 2 = 1.7e10 flops
  j["gemms"][0]["time_us"] = 1e5;
  j["gemms"][0]["min_us"] = 1e5;
  j["gemms"][0]["max_us"] = 1e5;
  j["gemms"][0].erase("under_nccl_time_us");
  j["gemms"][0].erase("tflops");
  EXPECT_NE(load_error(j, &cluster)
                .find("GEMM 8192x1024x512 (batch 2) tf32 in 100000 us is 0.172 TFLOP/s, under 1 % "
                      "of the 495 TFLOP/s dense peak"),
            std::string::npos)
      << load_error(j, &cluster);

  j = valid_json();
  j["gemms"][0]["under_nccl_time_us"] = 50.0;  // half of time_us
  EXPECT_NE(load_error(j, &cluster).find("the GEMMs ran x0.500 as long alongside NCCL as alone"),
            std::string::npos)
      << load_error(j, &cluster);
  EXPECT_NE(load_error(j, &cluster).find("/gemms/0, "), std::string::npos)
      << load_error(j, &cluster);
  j["gemms"][0]["under_nccl_time_us"] = 98.0;  // timer noise
  EXPECT_EQ(load_error(j, &cluster), "");
  // Measured beside NCCL, the time alone it is compared with is that one, and the message names it:
  // under_nccl_time_us can be longer than time_us and still be the shorter of the two.
  j["gemms"][0]["under_nccl_time_us"] = 120.0;
  j["gemms"][0]["alone_beside_nccl_time_us"] = 150.0;
  EXPECT_NE(load_error(j, &cluster)
                .find("ran x0.800); under_nccl_time_us cannot be shorter than "
                      "alone_beside_nccl_time_us"),
            std::string::npos)
      << load_error(j, &cluster);

  j = valid_json();
  j["gemms"][0]["layout"] = "NN";
  EXPECT_NE(error_for(j).find("bad.json: /gemms/0/layout: expected \"TN\""), std::string::npos)
      << error_for(j);
  // The baseline of a slowdown is no use without the time under NCCL.
  j = valid_json();
  j["gemms"][0].erase("under_nccl_time_us");
  j["gemms"][0]["alone_beside_nccl_time_us"] = 100.0;
  EXPECT_NE(error_for(j).find("bad.json: /gemms/0/alone_beside_nccl_time_us: is the baseline of "
                              "under_nccl_time_us, which this GEMM does not have"),
            std::string::npos)
      << error_for(j);
}

}  // namespace
}  // namespace fsdpsim::app
