// Reader of configs/validation/nccl_reference.csv (published nccl-tests numbers; see its
// README.md). RFC 4180 quoting: fields may be quoted, with "" for a quote inside.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdpsim::hardware::testing {

struct NcclReferenceRow {
  std::string source;
  std::string gpu;
  std::string system;
  std::optional<std::int32_t> nodes;  // empty or "multi" -> nullopt
  std::optional<std::int32_t> gpus;
  std::string collective;  // all_reduce, all_gather, reduce_scatter, ...
  std::string algo;
  std::optional<std::int64_t> size_bytes;
  std::optional<double> busbw_GBps;  // nullopt when the cell is not one number ("~160 intra")
  std::optional<double> algbw_GBps;
  std::string notes;
};

std::vector<NcclReferenceRow> read_nccl_reference();

}  // namespace fsdpsim::hardware::testing
