// Reads the standard output of NVIDIA nccl-tests (all_gather_perf, reduce_scatter_perf,
// all_reduce_perf; any flags) into collective series of a calibration profile.
//
// What is read (nccl-tests src/util.cu: writeDeviceReport, writeResultHeader,
// writeBenchmarkLine*, writeResultFooter; older releases differ only in column names):
// - "# nccl-tests version V nccl-headers=H nccl-library=L": the NCCL version (L = major*10000 +
//   minor*100 + patch);
// - "# Collective test starting: all_gather_perf": the collective (else --collective, else the
//   file name);
// - "#  Rank  r Group g Pid p on HOST device d [bus] NAME": ranks, hosts (ranks per node) and the
//   GPU name;
// - the column header "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time ...":
//   the first time/algbw/busbw/#wrong group is out-of-place, the second in-place ("error" or
//   "res" instead of "#wrong", "bytes"/"N"/"op" instead of "size"/"count"/"redop", a missing
//   "root", "cputime" (-C), per-iteration columns (-I) and timestamps (-T) are all accepted);
// - data rows, until "# Avg bus bandwidth": size (B, the full buffer), type, time (us).
// Lines that are neither (NCCL_DEBUG output, mpirun chatter, srun --label prefixes) are skipped.
// Several tables in one file (one run after another) are all read.
//
// Checks, each an InputError naming the file and line: no result table (not an nccl-tests log);
// a row with fewer or more columns than its header (beyond -T's date and time), or a result row
// outside a table (before its header, after its footer); a non-number where a number belongs;
// size / time disagreeing with the row's algbw; a table without its
// "# Avg bus bandwidth" footer (the run was cut short; --allow-truncated keeps its complete rows);
// a row with wrong elements (#wrong > 0); busbw / algbw disagreeing with the collective and rank
// count (doc/PERFORMANCE.md factors), which catches a mislabelled log.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/profile.hpp"

namespace fsdpsim::calibrate {

struct NcclTestsImportOptions {
  std::optional<hardware::Collective> collective;  // when the log does not say
  // How the user gave `collective`, for errors ("--collective LOG=NAME"); when empty, errors
  // write "--collective NAME".
  std::string collective_given_as;
  std::optional<std::int32_t> ranks;           // override (NCCL_TESTS_SPLIT runs)
  std::optional<std::int32_t> ranks_per_node;  // override
  bool in_place = false;                       // take the in-place columns instead of out-of-place
  bool allow_truncated = false;                // keep the complete rows of a log cut short
};

struct NcclTestsLog {
  std::vector<CollectiveSeries> series;  // one per table and dtype
  DeviceInfo device;
  SoftwareInfo software;
  TopologyInfo topology;
  std::vector<std::string> notes;  // rows skipped and why, truncation kept, overrides used
};

// Parses one log's text; `file` names it in errors and sources. Throws InputError.
NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file,
                                  const NcclTestsImportOptions& options);

// One log as read: its name (for errors and sources) and its text.
struct NcclTestsLogText {
  std::string file;
  std::string text;
  // This log's collective where it does not say (--collective FILE=NAME); else the options'.
  std::optional<hardware::Collective> collective;
  std::string collective_given_as;  // that option as typed, for errors
};

// Parses every log and merges them into one profile named `name` (merge_series). Throws
// InputError (bad log, logs of different GPUs). Reading the files is the caller's: the command
// line refuses folders, devices and oversized files there.
CalibrationProfile import_nccl_tests_logs(const std::vector<NcclTestsLogText>& logs,
                                          const NcclTestsImportOptions& options,
                                          const std::string& name, std::vector<std::string>& notes);

}  // namespace fsdpsim::calibrate
