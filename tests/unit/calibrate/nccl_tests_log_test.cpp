// Importing nccl-tests output (calibrate/nccl_tests_log.hpp): the logs of tests/data/nccl-tests
// (real nccl-tests format, numbers from configs/validation/nccl_reference.csv) and small inline
// logs for the flags and failure modes.
#include "calibrate/nccl_tests_log.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fsdpsim::calibrate {
namespace {

const std::string kData = std::string(FSDPSIM_TEST_DATA_DIR) + "/nccl-tests/";

CalibrationProfile import(const std::vector<std::string>& names,
                          const NcclTestsImportOptions& options = {}) {
  std::vector<NcclTestsLogText> logs;
  for (const std::string& n : names) {
    std::ifstream in(kData + n, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    logs.push_back({kData + n, text.str(), {}, {}});
  }
  std::vector<std::string> notes;
  return import_nccl_tests_logs(logs, options, "test", notes);
}

// The message of the InputError `f` throws ("" if it throws nothing).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A minimal modern log: `rows` under the standard header, with footer.
std::string log_with(const std::string& program, const std::string& rows, bool footer = true) {
  std::string text = "# nccl-tests version 2.17.4 nccl-headers=22703 nccl-library=22703\n";
  if (!program.empty()) text += "# Collective test starting: " + program + "\n";
  text +=
      "# nThread 1 nGpus 2 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 "
      "iters: 20 agg iters: 1 "
      "validation: 1 graph: 0\n#\n# Using devices\n"
      "#  Rank  0 Group  0 Pid   1000 on      hostA device  0 [0000:07:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid   1000 on      hostA device  1 [0000:0f:00] NVIDIA H100 80GB "
      "HBM3\n#\n"
      "#                                                              out-of-place                 "
      "      in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
      "time   algbw   busbw  #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
      "(us)  (GB/s)  (GB/s)\n";
  text += rows;
  if (footer) text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 10.0 \n#\n";
  return text;
}

TEST(NcclTestsLog, ImportsTheA100AllReduceSweep) {
  const CalibrationProfile p = import({"a100_8gpu_all_reduce_perf.log"});
  ASSERT_EQ(p.collectives.size(), 1U);
  const CollectiveSeries& s = p.collectives.front();
  EXPECT_EQ(s.op,
            hardware::Collective::kAllReduce);  // from the file name: this format does not say
  EXPECT_EQ(s.dtype, Dtype::kFp32);
  EXPECT_EQ(s.ranks, 8);
  EXPECT_EQ(s.ranks_per_node, 8);
  ASSERT_EQ(s.points.size(), 20U);  // -b 32K -e 16G -f 2
  EXPECT_EQ(s.points.front().bytes, Bytes(32768));
  EXPECT_DOUBLE_EQ(s.points.front().median.value(), 43.83e-6);
  EXPECT_EQ(s.points.back().bytes, gib(16));
  EXPECT_DOUBLE_EQ(s.points.back().median.value(), 127997e-6);
  EXPECT_EQ(s.points.front().repeats, 50);  // -n 50
  EXPECT_EQ(p.device.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(p.topology.nodes, 1);
}

TEST(NcclTestsLog, ImportsModernAllGatherAndReduceScatterLogs) {
  const CalibrationProfile ag = import({"h200_8gpu_all_gather_perf_16g.log"});
  ASSERT_EQ(ag.collectives.size(), 1U);
  EXPECT_EQ(ag.collectives.front().op,
            hardware::Collective::kAllGather);  // "Collective test starting"
  EXPECT_EQ(ag.software.nccl, "2.27.7");        // nccl-library=22707
  EXPECT_EQ(ag.collectives.front().points.front().bytes, gib(16));
  EXPECT_DOUBLE_EQ(ag.collectives.front().points.front().median.value(), 41594.9e-6);
  // -c 0: "#wrong" is N/A; still imported.
  const CalibrationProfile rs = import({"h200_8gpu_reduce_scatter_perf_16g_nocheck.log"});
  ASSERT_EQ(rs.collectives.size(), 1U);
  EXPECT_EQ(rs.collectives.front().op, hardware::Collective::kReduceScatter);
}

TEST(NcclTestsLog, ImportsOldFormatMultiNodeLogsWithNcclDebugLines) {
  const CalibrationProfile p = import({"b200_4x8_all_reduce_perf_old_format.log"});
  ASSERT_EQ(p.collectives.size(), 1U);
  const CollectiveSeries& s = p.collectives.front();
  EXPECT_EQ(s.ranks, 32);
  EXPECT_EQ(s.ranks_per_node, 8);   // 4 hosts in the device list
  EXPECT_EQ(s.points.size(), 20U);  // the NCCL INFO lines between rows are skipped
  EXPECT_EQ(p.topology.nodes, 4);
  EXPECT_EQ(p.topology.hosts.size(), 4U);
}

TEST(NcclTestsLog, SeveralLogsOfOneGpuMergeIntoOneProfile) {
  const CalibrationProfile p = import(
      {"h200_8gpu_all_gather_perf_16g.log", "h200_8gpu_reduce_scatter_perf_16g_nocheck.log"});
  EXPECT_EQ(p.collectives.size(), 2U);
  EXPECT_NE(error_of([] {
              (void)import({"a100_8gpu_all_reduce_perf.log", "h200_8gpu_all_gather_perf_16g.log"});
            }).find("a profile describes one kind of GPU"),
            std::string::npos);
}

TEST(NcclTestsLog, TruncatedLogIsAClearErrorNamingFileAndLine) {
  const std::string e = error_of([] { (void)import({"truncated_all_reduce_perf.log"}); });
  EXPECT_NE(e.find("truncated_all_reduce_perf.log:30: truncated nccl-tests log"), std::string::npos)
      << e;
  EXPECT_NE(e.find("6 of its 13 columns"), std::string::npos) << e;
}

TEST(NcclTestsLog, TruncatedLogCanKeepItsCompleteRows) {
  NcclTestsImportOptions o;
  o.allow_truncated = true;
  const CalibrationProfile p = import({"truncated_all_reduce_perf.log"}, o);
  ASSERT_EQ(p.collectives.size(), 1U);
  EXPECT_EQ(p.collectives.front().points.size(),
            14U);  // 32 KiB .. 256 MiB; the 512 MiB row was cut
}

// A run cut short by Slurm's time limit: the scheduler's line follows the cut row in the job's
// output file; --allow-truncated still drops the cut row and keeps the complete ones.
TEST(NcclTestsLog, ATruncatedRowFollowedByTheSchedulersLineIsStillTheCut) {
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n"
      "     2097152        524288     float     sum      -1    40.00   52.43   52.43       0    "
      "40.00   52.43   52.43       0\n"
      "     4194304       1048576     float     sum      -1    80.00   52.4\n"
      "slurmstepd: error: *** STEP 1234.0 ON node0 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME "
      "LIMIT ***\n";
  const std::string text = log_with("all_reduce_perf", rows, /*footer=*/false);
  NcclTestsImportOptions o;
  o.allow_truncated = true;
  const NcclTestsLog log = parse_nccl_tests_log(text, "cut.log", o);
  ASSERT_EQ(log.series.size(), 1U);
  EXPECT_EQ(log.series[0].points.size(), 2U);
  const std::string refused = error_of([&] { (void)parse_nccl_tests_log(text, "cut.log", {}); });
  EXPECT_NE(refused.find("cut.log:14: truncated nccl-tests log"), std::string::npos) << refused;
}

TEST(NcclTestsLog, GarbageIsAClearErrorNamingFileAndLine) {
  const std::string e = error_of([] { (void)import({"garbage.log"}); });
  EXPECT_NE(e.find("garbage.log:1: not an nccl-tests log"), std::string::npos) << e;
  EXPECT_NE(e.find("srun: error"), std::string::npos) << e;  // quotes what it found
}

TEST(NcclTestsLog, EmptyFileAndMissingFooterAreErrors) {
  EXPECT_NE(error_of([] {
              (void)parse_nccl_tests_log("\n  \n", "empty.log", {});
            }).find("empty.log: empty file"),
            std::string::npos);
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n";
  const std::string e = error_of(
      [&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", rows, false), "cut.log", {}); });
  EXPECT_NE(e.find("cut.log:12: truncated nccl-tests log"), std::string::npos) << e;
  EXPECT_NE(e.find("no '# Avg bus bandwidth' footer"), std::string::npos) << e;
}

TEST(NcclTestsLog, InPlaceColumnsOnRequest) {
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "30.00   34.95   34.95       0\n"
      "     2097152        524288     float     sum      -1    30.00   69.91   69.91       0    "
      "40.00   52.43   52.43       0\n";
  const std::string text = log_with("all_reduce_perf", rows);
  const NcclTestsLog out_of_place = parse_nccl_tests_log(text, "x.log", {});
  EXPECT_DOUBLE_EQ(out_of_place.series.front().points.front().median.value(), 20e-6);
  NcclTestsImportOptions o;
  o.in_place = true;
  const NcclTestsLog in_place = parse_nccl_tests_log(text, "x.log", o);
  EXPECT_DOUBLE_EQ(in_place.series.front().points.front().median.value(), 30e-6);
  EXPECT_TRUE(in_place.series.front().in_place);
}

TEST(NcclTestsLog, AllDatatypesRunKeepsTheOnesFsdpsimCalibrates) {
  // -d all: one row per type and size; double and int8 rows are skipped with a note.
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n"
      "     1048576        131072    double     sum      -1    25.00   41.94   41.94       0    "
      "25.00   41.94   41.94       0\n"
      "     1048576        524288  bfloat16     sum      -1    21.00   49.93   49.93       0    "
      "21.00   49.93   49.93       0\n"
      "     1048576       1048576      int8     sum      -1    22.00   47.66   47.66       0    "
      "22.00   47.66   47.66       0\n"
      "     1048576        524288      half     sum      -1    21.50   48.77   48.77       0    "
      "21.50   48.77   48.77       0\n";
  const NcclTestsLog log = parse_nccl_tests_log(log_with("all_reduce_perf", rows), "d.log", {});
  ASSERT_EQ(log.series.size(), 3U);
  EXPECT_EQ(log.series[0].dtype, Dtype::kFp32);
  EXPECT_EQ(log.series[1].dtype, Dtype::kBf16);
  EXPECT_EQ(log.series[2].dtype, Dtype::kFp16);
  EXPECT_EQ(log.notes.size(), 2U);  // double, int8
}

TEST(NcclTestsLog, WrongElementsAreAnError) {
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43      12    "
      "20.00   52.43   52.43       0\n";
  const std::string e =
      error_of([&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", rows), "w.log", {}); });
  EXPECT_NE(e.find("w.log:12: 12 wrong elements"), std::string::npos) << e;
  // Wrong data in the in-place run of the same row is the run's too, out-of-place imported or not.
  const std::string in_place_wrong =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       3\n";
  const std::string w = error_of([&] {
    (void)parse_nccl_tests_log(log_with("all_reduce_perf", in_place_wrong), "w.log", {});
  });
  EXPECT_NE(w.find("w.log:12: 3 wrong elements in the in-place columns"), std::string::npos) << w;
}

// Before nccl-tests 2.10 the "error" column was the largest deviation from the expected values,
// which nccl-tests accepted up to a bound per type (DeltaMaxValue): within it the row is a
// measurement, above it the collective returned wrong data.
TEST(NcclTestsLog, AnOldErrorColumnIsADeviationWithinNcclTestsBound) {
  const auto old_log = [](const std::string& rows) {
    std::string text = log_with("all_reduce_perf", rows);
    const std::string modern = "  #wrong     time   algbw   busbw  #wrong";
    text.replace(text.find(modern), modern.size(), "   error     time   algbw   busbw   error");
    return text;
  };
  const std::string fine =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43   5e-07    "
      "20.00   52.43   52.43   0e+00\n"
      "     1048576        524288  bfloat16     sum      -1    22.00   47.66   47.66   4e-03    "
      "22.00   47.66   47.66   4e-03\n";
  const NcclTestsLog log = parse_nccl_tests_log(old_log(fine), "old.log", {});
  ASSERT_EQ(log.series.size(), 2U);
  const std::string wrong =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43   3e-02    "
      "20.00   52.43   52.43   0e+00\n";
  const std::string e =
      error_of([&] { (void)parse_nccl_tests_log(old_log(wrong), "old.log", {}); });
  EXPECT_NE(e.find("old.log:12: an error (largest deviation from the expected values) of 3e-02, "
                   "above nccl-tests' bound 1e-05 for float"),
            std::string::npos)
      << e;
  // In the in-place columns, not imported, it is the run's all the same.
  const std::string in_place =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43   0e+00    "
      "20.00   52.43   52.43   3e-02\n";
  const std::string i =
      error_of([&] { (void)parse_nccl_tests_log(old_log(in_place), "old.log", {}); });
  EXPECT_NE(i.find("old.log:12: an error (largest deviation from the expected values) of 3e-02 "
                   "in the in-place columns, above nccl-tests' bound 1e-05 for float"),
            std::string::npos)
      << i;
}

// all_gather_perf -b 8 -g 8 starts below one float per rank: nccl-tests prints (and times) rows
// of size 0, which move nothing. They are skipped with a note, the rest imported.
TEST(NcclTestsLog, RowsOfSizeZeroAreSkippedWithANote) {
  const std::string rows =
      "           0             0     float    none      -1     0.19    0.00    0.00       0     "
      "0.18    0.00    0.00       0\n"
      "     1048576        131072     float    none      -1    20.00   52.43   26.21       0    "
      "20.00   52.43   26.21       0\n";
  const NcclTestsLog log = parse_nccl_tests_log(log_with("all_gather_perf", rows), "ag.log", {});
  ASSERT_EQ(log.series.size(), 1U);
  EXPECT_EQ(log.series.front().points.size(), 1U);
  ASSERT_EQ(log.notes.size(), 1U);
  EXPECT_EQ(log.notes.front(),
            "ag.log: skipped 1 rows of size 0 (less than one element per rank: "
            "nothing moved, nothing to calibrate)");
  const std::string only_empty = error_of([] {
    (void)parse_nccl_tests_log(
        log_with("all_gather_perf", "0 0 float none -1 0.19 0.00 0.00 0 0.18 0.00 0.00 0\n"),
        "e.log", {});
  });
  EXPECT_EQ(only_empty,
            "e.log: no rows fsdpsim can use (only size 0 rows, which it does not "
            "calibrate)");
  // Size-0 rows excuse only their own table: a later table with no rows at all is an error.
  const std::string then_empty = error_of([&] {
    (void)parse_nccl_tests_log(
        log_with("all_gather_perf", rows) + log_with("reduce_scatter_perf", ""), "two.log", {});
  });
  EXPECT_NE(then_empty.find("two.log:"), std::string::npos) << then_empty;
  EXPECT_NE(then_empty.find("has no rows"), std::string::npos) << then_empty;
}

// Rows no real run prints: a size past 2^50 (whose rates would overflow), a time under a
// nanosecond, a time that contradicts the row's algbw (size / time, as nccl-tests computes it).
TEST(NcclTestsLog, ImplausibleOrInconsistentRowsAreErrors) {
  const auto error_for = [](const std::string& row) {
    return error_of(
        [&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", row + "\n"), "r.log", {}); });
  };
  EXPECT_NE(error_for("9223372036854775807 2305843009213693951 float sum -1 1e9 9223.37 "
                      "16139.9 0 1e9 9223.37 16139.9 0")
                .find("r.log:12: expected a size in bytes from 0 to 2^50"),
            std::string::npos);
  EXPECT_NE(error_for("1048576 262144 float sum -1 1e-310 52.43 52.43 0 20.00 52.43 52.43 0")
                .find("r.log:12: expected a time of 0.001 us (1 ns) to 8.64e+10 us (a day)"),
            std::string::npos);
  EXPECT_NE(error_for("65536 16384 float sum -1 0.0468 1.40 2.45 0 46.80 1.40 2.45 0")
                .find("r.log:12: size / time = 1400 GB/s, but the row's algbw is '1.40'"),
            std::string::npos)
      << error_for("65536 16384 float sum -1 0.0468 1.40 2.45 0 46.80 1.40 2.45 0");
}

// The rank lines must describe one communicator: each rank once, none missing, as many per
// host, a multiple of what each process runs.
TEST(NcclTestsLog, RankLinesThatCannotBeOneCommunicatorAreErrors) {
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n";
  const std::string good = log_with("all_reduce_perf", rows);
  const std::string rank1 = "#  Rank  1 Group  0 Pid   1000 on      hostA device  1";
  ASSERT_NE(good.find(rank1), std::string::npos);
  const auto error_for = [](std::string text) {
    return error_of([&] { (void)parse_nccl_tests_log(text, "k.log", {}); });
  };
  std::string twice = good;
  twice.replace(twice.find(rank1), rank1.size(),
                "#  Rank  0 Group  0 Pid   1000 on      hostA device  1");
  EXPECT_NE(error_for(twice).find("rank 0 is listed twice"), std::string::npos) << error_for(twice);
  std::string gap = good;
  gap.replace(gap.find(rank1), rank1.size(),
              "#  Rank  2 Group  0 Pid   1000 on      hostA device  1");
  EXPECT_NE(error_for(gap).find("list 2 ranks up to rank 2: some are missing"), std::string::npos)
      << error_for(gap);
  std::string uneven = good;
  uneven.replace(uneven.find("nGpus 2"), 7, "nGpus 1");
  const std::string rank2 =
      "#  Rank  2 Group  0 Pid   1001 on      hostB device  0 [0000:07:00] "
      "NVIDIA H100 80GB HBM3\n";
  uneven.insert(uneven.find("#\n#   "), rank2);
  EXPECT_NE(error_for(uneven).find("3 ranks on 2 hosts, 1 on hostB but 2 on hostA"),
            std::string::npos)
      << error_for(uneven);
  std::string huge = good;
  huge.replace(huge.find("nThread 1"), 9, "nThread 3");
  huge.replace(huge.find("nGpus 2"), 7, "nGpus 1431655766");
  EXPECT_NE(error_for(huge).find("expected nGpus from 1 to 1048576"), std::string::npos)
      << error_for(huge);
}

// NCCL_TESTS_SPLIT=AND1: 4 ranks on 2 hosts split into groups by rank & 1, each group a
// communicator of 2 ranks, one per host; the table times one group's collective (busbw = algbw
// for an all-reduce over 2 ranks). Its shape is the group's, not the job's 4 ranks with 2 per
// host (which took a network measurement for one inside a node). Groups of different shapes
// cannot be one series.
TEST(NcclTestsLog, ASplitLogIsOfOneGroupsShape) {
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n";
  std::string text = log_with("all_reduce_perf", rows);
  text.replace(text.find("nGpus 2"), 7, "nGpus 1");
  const std::string ranks_of_a_host = "#  Rank  0 Group  0";
  const std::size_t first = text.find(ranks_of_a_host);
  const std::size_t end = text.find("#\n#   ", first);
  const auto rank_line = [](int rank, int group, const char* host) {
    return fmt::format(
        "#  Rank {:2d} Group {:2d} Pid   100{} on {:>10} device  {} [0000:07:00] "
        "NVIDIA H100 80GB HBM3\n",
        rank, group, rank, host, rank % 2);
  };
  text.replace(first, end - first,
               rank_line(0, 0, "hostA") + rank_line(1, 1, "hostA") + rank_line(2, 0, "hostB") +
                   rank_line(3, 1, "hostB"));
  const NcclTestsLog log = parse_nccl_tests_log(text, "split.log", {});
  ASSERT_EQ(log.series.size(), 1U);
  EXPECT_EQ(log.series[0].ranks, 2);
  EXPECT_EQ(log.series[0].ranks_per_node, 1);

  std::string uneven = text;
  uneven.replace(uneven.find("#  Rank  1 Group  1"), 19, "#  Rank  1 Group  0");
  const std::string error = error_of([&] { (void)parse_nccl_tests_log(uneven, "split.log", {}); });
  EXPECT_NE(error.find("put the ranks in 2 groups (NCCL_TESTS_SPLIT) of different shapes: 1 ranks "
                       "with 1 on one host, and 3 with 2"),
            std::string::npos)
      << error;
}

// A time of 10 s or more is printed as %7.1e: "1.3e+07" us holds two significant digits, where
// size / algbw (1.37 GB/s, to two decimals) is 12.54 s; the row is not refused as columns that
// disagree, and its time is taken from the algbw, with a note.
TEST(NcclTestsLog, ATimePrintedWithAnExponentIsTakenFromTheAlgbw) {
  const std::string rows =
      " 17179869184    4294967296     float     sum      -1  1.3e+07    1.37    1.37       0  "
      "1.3e+07    1.37    1.37       0\n";
  const NcclTestsLog log = parse_nccl_tests_log(log_with("all_reduce_perf", rows), "slow.log", {});
  ASSERT_EQ(log.series.size(), 1U);
  EXPECT_NEAR(log.series[0].points[0].median.value(), 17179869184.0 / 1.37e9, 1e-9);
  ASSERT_EQ(log.notes.size(), 1U);
  EXPECT_NE(log.notes[0].find("slow.log:12: time 1.3e+07 us is printed to two significant "
                              "digits; taken as size / algbw = 1.25401e+07 us"),
            std::string::npos)
      << log.notes[0];
}

TEST(NcclTestsLog, NonNumbersWhereNumbersBelongAreErrors) {
  const std::string rows =
      "     1048576        262144     float     sum      -1    fast   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n";
  const std::string e =
      error_of([&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", rows), "n.log", {}); });
  EXPECT_NE(e.find("n.log:12: expected a number >= 0 in column 'time', found 'fast'"),
            std::string::npos)
      << e;
  // A row shaped like a result whose size is not a number is not skipped as a stray line.
  const std::string bad_size =
      "     abc        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n";
  const std::string s = error_of(
      [&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", bad_size), "s.log", {}); });
  EXPECT_NE(s.find("s.log:12: expected the size in bytes in the first column, found 'abc'"),
            std::string::npos)
      << s;
}

// The count column and the columns of the variant not imported are nccl-tests' numbers too: a
// row with anything else there was mangled, whichever columns are kept.
TEST(NcclTestsLog, EveryNumericColumnIsChecked) {
  const auto error_for_row = [](const std::string& count, const std::string& in_place_time) {
    const std::string row = "     1048576  " + count +
                            "     float     sum      -1    20.00   "
                            "52.43   52.43       0    " +
                            in_place_time + "   52.43   52.43       0\n";
    return error_of(
        [&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", row), "c.log", {}); });
  };
  EXPECT_EQ(error_for_row("262144", "20.00"), "");
  EXPECT_NE(error_for_row("N/A", "20.00")
                .find("c.log:12: expected a count of elements (an integer >= 0) in column "
                      "'count', found 'N/A'"),
            std::string::npos);
  EXPECT_NE(error_for_row("262144", "-1")
                .find("c.log:12: expected a number >= 0 in column "
                      "'time', found '-1'"),
            std::string::npos);
}

// A row must be what its header describes, inside its table: more words than the header
// (beyond -T's date and time), or a result row after the footer, is a mangled log.
TEST(NcclTestsLog, RowsTheHeaderDoesNotDescribeAreErrors) {
  const std::string row =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0";
  const auto error_for = [](const std::string& text) {
    return error_of([&] { (void)parse_nccl_tests_log(text, "x.log", {}); });
  };
  EXPECT_EQ(error_for(log_with("all_reduce_perf", row + "\n")), "");
  const std::string extra = error_for(log_with("all_reduce_perf", row + " 17\n"));
  EXPECT_NE(extra.find("x.log:12: malformed result row: expected 13 columns as in the header on "
                       "line 10, found 14"),
            std::string::npos)
      << extra;
  const std::string after = error_for(log_with("all_reduce_perf", row + "\n") + row + "\n");
  EXPECT_NE(after.find("x.log:16: a result row after the '# Avg bus bandwidth' footer on line 14 "
                       "closed its table"),
            std::string::npos)
      << after;
  const std::string before = error_for(row + "\n" + log_with("all_reduce_perf", row + "\n"));
  EXPECT_NE(before.find("x.log:1: a result row with no column header above it"), std::string::npos)
      << before;
  // -T adds the date and time after the in-place columns; the header names them "timestamp".
  std::string stamped = log_with("all_reduce_perf", row + "  2026-12-03 17:45:01\n");
  const std::size_t wrong = stamped.rfind("#wrong");
  stamped.insert(wrong + 6, "  timestamp");
  EXPECT_EQ(error_for(stamped), "");
  EXPECT_NE(error_for(log_with("all_reduce_perf", row + "  2026-12-03 17:45:01\n"))
                .find("expected 13 columns as in the header on line 10, found 15"),
            std::string::npos);
}

// A small row's busbw is checked too, within the rounding of its two decimals: a 32 KiB
// all-reduce on 2 ranks with algbw 1.31 has busbw 1.31, not 0.01.
TEST(NcclTestsLog, ASmallRowsBusbwMustMatchItsAlgbw) {
  const auto error_for = [](const std::string& busbw) {
    const std::string row =
        "       32768          8192     float     sum      -1    25.00    1.31 " + busbw +
        "       0    25.00    1.31    1.31       0\n";
    return error_of(
        [&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", row), "b.log", {}); });
  };
  EXPECT_EQ(error_for("1.31"), "");
  EXPECT_EQ(error_for("1.32"), "");  // rounding
  EXPECT_NE(error_for("0.01").find("b.log:12: busbw / algbw = 0.008, but an all_reduce over 2 "
                                   "ranks has 1.000"),
            std::string::npos)
      << error_for("0.01");
}

// One log, one kind of GPU: a rank on another is refused at its line.
TEST(NcclTestsLog, RanksOnDifferentGpusAreAnError) {
  std::string text = log_with("all_reduce_perf",
                              "     1048576        262144     float     sum      -1    20.00   "
                              "52.43   52.43       0    20.00   52.43   52.43       0\n");
  const std::size_t second = text.find("device  1 [0000:0f:00] NVIDIA H100 80GB");
  ASSERT_NE(second, std::string::npos);
  text.replace(second + std::string("device  1 [0000:0f:00] ").size(), 21, "NVIDIA A100-SXM4-80GB");
  const std::string e = error_of([&] { (void)parse_nccl_tests_log(text, "g.log", {}); });
  EXPECT_NE(e.find("g.log:7: rank 1 is a NVIDIA A100-SXM4-80GB"), std::string::npos) << e;
}

// nccl-tests prints the larger buffer's bytes and the count each rank passes to NCCL: the whole
// buffer's for all_reduce, a rank's share for all_gather (src/common.cu, all_gather.cu). A row
// whose size is not that count's bytes was edited; its size would go into the profile as is.
TEST(NcclTestsLog, ASizeThatIsNotTheCountsBytesIsRefused) {
  const auto reduce = [](const std::string& size, const std::string& count) {
    return log_with("all_reduce_perf", "  " + size + "  " + count +
                                           "     float     sum      -1    20.00   52.43   52.43  "
                                           "     0    20.00   52.43   52.43       0\n");
  };
  EXPECT_NO_THROW((void)parse_nccl_tests_log(reduce("1048576", "262144"), "m.log", {}));
  const std::string edited =
      error_of([&] { (void)parse_nccl_tests_log(reduce("1048577", "262144"), "m.log", {}); });
  EXPECT_NE(edited.find("m.log:12: size 1048577 B is not count 262144 x 4 B: the row was edited"),
            std::string::npos)
      << edited;
  const auto gather = [](const std::string& count) {
    return log_with("all_gather_perf", "     1048576  " + count +
                                           "     float    none      -1    20.00   52.43   26.21  "
                                           "     0    20.00   52.43   26.21       0\n");
  };
  EXPECT_NO_THROW((void)parse_nccl_tests_log(gather("131072"), "m.log", {}));
  const std::string total =
      error_of([&] { (void)parse_nccl_tests_log(gather("262144"), "m.log", {}); });
  EXPECT_NE(total.find("m.log:12: size 1048576 B is not count 262144 x 4 B x 2 ranks"),
            std::string::npos)
      << total;
}

TEST(NcclTestsLog, MislabelledCollectivesAreCaughtByTheBusbwFactor) {
  // An all-reduce on 2 ranks has busbw = algbw; read as a reduce-scatter (factor 1/2) it cannot
  // be.
  const std::string rows =
      "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    "
      "20.00   52.43   52.43       0\n";
  NcclTestsImportOptions o;
  o.collective = hardware::Collective::kReduceScatter;
  const std::string e =
      error_of([&] { (void)parse_nccl_tests_log(log_with("", rows), "m.log", o); });
  EXPECT_NE(e.find("m.log:11: busbw / algbw = 1.000, but a reduce_scatter over 2 ranks has 0.500"),
            std::string::npos)
      << e;
  // Read as an all-gather, its redop says so first: an all-gather reduces nothing (and an
  // all-gather's 'none' read as a reduce-scatter, whose busbw / algbw it shares, likewise).
  o.collective = hardware::Collective::kAllGather;
  const std::string g =
      error_of([&] { (void)parse_nccl_tests_log(log_with("", rows), "m.log", o); });
  EXPECT_NE(g.find("m.log:11: redop sum, but the table is read as an all_gather, which does not "
                   "reduce"),
            std::string::npos)
      << g;
  std::string gathered = rows;
  gathered.replace(gathered.find("sum "), 4, "none");
  o.collective = hardware::Collective::kReduceScatter;
  const std::string r =
      error_of([&] { (void)parse_nccl_tests_log(log_with("", gathered), "m.log", o); });
  EXPECT_NE(r.find("m.log:11: redop none, but the table is read as a reduce_scatter, which "
                   "reduces"),
            std::string::npos)
      << r;
  // With the log's own word against the option: a contradiction.
  const std::string c =
      error_of([&] { (void)parse_nccl_tests_log(log_with("all_reduce_perf", rows), "m.log", o); });
  EXPECT_NE(c.find("contradicts the log"), std::string::npos) << c;
  // Nothing says which collective: ask for --collective.
  const std::string u =
      error_of([&] { (void)parse_nccl_tests_log(log_with("", rows), "unknown.log", {}); });
  EXPECT_NE(u.find("pass --collective"), std::string::npos) << u;
}

TEST(NcclTestsLog, SrunLabelsAndRankOverridesAreHandled) {
  const std::string text =
      log_with("all_gather_perf",
               "     1048576        131072     float    none      -1    20.00   "
               "52.43   26.21       0    20.00   52.43   26.21       0\n");
  // srun --label prefixes every line with "0: ".
  std::string labelled;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    labelled += "0: ";
    labelled += text.substr(start, end - start + 1);
    start = end + 1;
  }
  const NcclTestsLog log = parse_nccl_tests_log(labelled, "l.log", {});
  ASSERT_EQ(log.series.size(), 1U);
  EXPECT_EQ(log.series.front().ranks, 2);
  // NCCL_TESTS_SPLIT runs report the world's ranks; the options say the communicator's.
  NcclTestsImportOptions o;
  o.ranks = 2;
  o.ranks_per_node = 1;
  EXPECT_EQ(parse_nccl_tests_log(labelled, "l.log", o).series.front().ranks_per_node, 1);
}

// A one-rank run copies locally: its table prices nothing, and the import says so rather than
// writing a profile that `run` would refuse later.
TEST(NcclTestsLog, AOneRankLogIsRefused) {
  std::string one = log_with("all_gather_perf",
                             "     1048576        262144     float    none      -1    10.00   "
                             "104.86    0.00       0    10.00  104.86    0.00       0\n");
  one.replace(one.find("nGpus 2"), 7, "nGpus 1");
  one.erase(one.find("#  Rank  1"),
            one.find('\n', one.find("#  Rank  1")) + 1 - one.find("#  Rank  1"));
  const std::string e = error_of([&] { (void)parse_nccl_tests_log(one, "one.log", {}); });
  EXPECT_NE(e.find("one.log:"), std::string::npos) << e;
  EXPECT_NE(e.find("the table ran on 1 rank"), std::string::npos) << e;
}

TEST(NcclTestsLog, SeveralTablesInOneFileAreAllRead) {
  const std::string ag = log_with("all_gather_perf",
                                  "     1048576        131072     float    none      -1    20.00   "
                                  "52.43   26.21       0    20.00   52.43   26.21       0\n");
  const std::string rs =
      log_with("reduce_scatter_perf",
               "     1048576        131072     float     sum      -1    "
               "21.00   49.93   24.97       0    21.00   49.93   24.97       0\n");
  const NcclTestsLog log = parse_nccl_tests_log(ag + rs, "both.log", {});
  ASSERT_EQ(log.series.size(), 2U);
  EXPECT_EQ(log.series[0].op, hardware::Collective::kAllGather);
  EXPECT_EQ(log.series[1].op, hardware::Collective::kReduceScatter);
}

}  // namespace
}  // namespace fsdpsim::calibrate
