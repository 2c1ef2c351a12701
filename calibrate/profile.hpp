// The calibration profile as typed data: what was measured on a cluster (or taken from
// published measurements), with its spread, before any fitting. sim/app/calibration_json.cpp
// converts it from and to JSON (schema_version 1, README "Calibrating a new cluster"); the
// harness (calibrate/harness) writes the same schema with its own writer; fit.hpp turns it into
// the curves the cost models use. No JSON here.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/units/dtype.hpp"
#include "sim/units/op_shapes.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::calibrate {

inline constexpr int kProfileSchemaVersion = 1;

// Plausibility bounds of a measurement, in a profile or an nccl-tests log: far outside any real
// collective, GEMM or allocation, and close enough that every rate derived from one (bytes or
// flops over time) stays finite and every size fits 64 bits with room to spare.
inline constexpr std::int64_t kMaxMeasuredBytes = std::int64_t{1} << 50;  // 1 PiB
inline constexpr std::int64_t kMaxGemmDimension = std::int64_t{1} << 24;  // m, n, k or batch
inline constexpr double kMinMeasuredUs = 1e-3;                            // 1 ns
inline constexpr double kMaxMeasuredUs = 8.64e10;                         // a day

// Bad input to the calibration tools (a log, a profile, an option): the message names the file
// and line or JSON path. The app maps it to exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a series' numbers come from: measured as they are, or derived from other measurements
// by a stated rule (reference profiles only; `derivation` says how).
enum class Origin : std::uint8_t { kMeasured, kDerived };

// One message size of a collective: the full buffer (nccl-tests' "size": the gathered output of
// an all-gather, the input of a reduce-scatter or all-reduce) and the time over the repeats.
struct CollectivePoint {
  Bytes bytes{0};
  Seconds median{0.0};
  std::optional<Seconds> min;  // spread over the repeats, when known
  std::optional<Seconds> max;
  std::int32_t repeats = 0;  // 0 = not known (nccl-tests prints an average only)
};

struct CollectiveSeries {
  hardware::Collective op = hardware::Collective::kAllGather;
  Dtype dtype = Dtype::kBf16;
  std::int32_t ranks = 1;           // communicator size
  std::int32_t ranks_per_node = 1;  // members on one node
  std::string group;  // label: world, intra_node, inter_node, shard_F, replicate_F, ...
  // Measured while this collective ran on a second communicator over the same ranks (interference);
  // such series never feed the curves, the fit reports their slowdown.
  std::optional<hardware::Collective> concurrent_with;
  bool in_place = false;
  Origin origin = Origin::kMeasured;
  std::string derivation;  // how a derived series was computed (empty when measured)
  std::string source;      // log file, harness run, or citation
  std::vector<CollectivePoint> points;
};

struct GemmPoint {
  Dtype dtype = Dtype::kBf16;  // math dtype (tf32: fp32 storage, CUBLAS_COMPUTE_32F_FAST_TF32)
  GemmShape shape{};           // C[m,n] = A[m,k] B[k,n], `batch` products
  std::string layout = "TN";   // cuBLAS op(A), op(B): "TN" is torch.nn.Linear's x @ W^T
  Seconds median{0.0};
  std::optional<Seconds> min;
  std::optional<Seconds> max;
  std::int32_t repeats = 0;
  std::optional<Seconds> median_under_nccl;  // the same GEMM while an NCCL collective runs
  // The same GEMM alone, timed just before median_under_nccl (the same clocks and temperature):
  // the baseline of its slowdown, where the profile has it.
  std::optional<Seconds> median_alone_beside_nccl;
  std::string source;
};

// One size of the harness's allocation timing: host time of a cudaMalloc of `bytes` and of the
// cudaFree of it, on an otherwise idle device (medians of the repeats).
struct AllocationTiming {
  Bytes bytes{0};
  Seconds malloc{0.0};
  Seconds free{0.0};
};

// Host/device transfer and launch costs (harness "memory" phase); all optional.
struct MemoryMeasurements {
  std::optional<BytesPerSec> device_copy;  // device-to-device copy: (bytes read + written) / time,
                                           // comparable with hbm_bandwidth * memory_efficiency
  std::optional<BytesPerSec> h2d_pinned;
  std::optional<BytesPerSec> d2h_pinned;
  std::optional<Seconds> kernel_launch;       // host time of one empty-kernel launch
  std::vector<AllocationTiming> allocations;  // by size, for the caching allocator's device calls
};

// One rank's times in the harness's "rank-speed" phase: the held GEMM on its GPU (per launch),
// the same GEMM timed short before the hold (when timed), and an empty-kernel launch on its host
// (when timed).
struct RankTiming {
  std::string host;
  Seconds gemm{0.0};
  std::optional<Seconds> gemm_min;
  std::optional<Seconds> gemm_max;
  std::optional<Seconds> gemm_short;
  std::optional<Seconds> launch;
};

// The harness's "rank-speed" phase: one GEMM shape timed on every GPU of the job at once, after
// `held` of it, and kernel launches timed on every rank's host, to see how much slower than rank
// 0 (whose GEMM timings the profile holds) each GPU and each host runs under load.
struct RankSpeedMeasurement {
  Dtype dtype = Dtype::kBf16;
  GemmShape shape{};
  Seconds held{0.0};
  std::int32_t repeats = 0;
  std::int32_t launches = 0;
  std::vector<RankTiming> ranks;  // rank i at index i
};

struct DeviceInfo {
  std::string name;                // cudaDeviceProp::name
  std::string compute_capability;  // "9.0"
  std::int32_t sm_count = 0;
  Bytes memory{0};
};

struct SoftwareInfo {
  std::string driver;
  std::string cuda_runtime;
  std::string nccl;
  std::string cublaslt;
};

struct TopologyInfo {
  std::int32_t nodes = 0;
  std::int32_t gpus_per_node = 0;
  std::vector<std::string> hosts;
  std::string interconnect;  // free text ("8x NVLink4 via NVSwitch, 8x 400G IB")
};

struct CalibrationProfile {
  std::string name;
  std::string description;
  std::string created;  // ISO 8601, when known
  std::string tool;     // what produced it
  DeviceInfo device;
  SoftwareInfo software;
  TopologyInfo topology;
  std::vector<std::string> sources;  // citations of the data (reference profiles)
  std::vector<std::string> notes;  // what the producer wants a reader to know (skipped shapes, ...)
  bool complete = true;  // false: a harness run that stopped early (what it measured is kept)
  std::vector<CollectiveSeries> collectives;
  std::vector<GemmPoint> gemms;
  std::optional<RankSpeedMeasurement> rank_speeds;
  MemoryMeasurements memory;
};

// nccl-tests / NCCL names: all_gather, reduce_scatter, all_reduce, broadcast.
constexpr std::string_view collective_name(hardware::Collective op) {
  switch (op) {
    case hardware::Collective::kAllGather:
      return "all_gather";
    case hardware::Collective::kReduceScatter:
      return "reduce_scatter";
    case hardware::Collective::kAllReduce:
      return "all_reduce";
    case hardware::Collective::kBroadcast:
      return "broadcast";
  }
  return "all_gather";
}

constexpr std::optional<hardware::Collective> parse_collective(std::string_view s) {
  if (s == "all_gather") return hardware::Collective::kAllGather;
  if (s == "reduce_scatter") return hardware::Collective::kReduceScatter;
  if (s == "all_reduce") return hardware::Collective::kAllReduce;
  return std::nullopt;
}

// nccl-tests busbw factor (doc/PERFORMANCE.md): 2(n-1)/n for all-reduce, (n-1)/n for all-gather
// and reduce-scatter, 1 for broadcast; busbw = algbw * factor, algbw = size / time.
constexpr double busbw_factor(hardware::Collective op, std::int32_t ranks) {
  if (ranks <= 1) return 0.0;
  if (op == hardware::Collective::kBroadcast) return 1.0;
  const double f = static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  return op == hardware::Collective::kAllReduce ? 2.0 * f : f;
}

// Repeats of one collective and size this far apart (slowest over fastest) are taken for runs of
// another cluster, network state or NCCL setting mixed into one series, and said (their median is
// used all the same). A threshold chosen far above timer noise, not a measured bound: the one
// published sweep here, nccl_reference.csv's 8x A100 all-reduce, moves by 0.5 % between its equal
// 1-4 MiB sizes.
inline constexpr double kRepeatSpreadNoted = 1.5;

// Merges `series` into `profile.collectives`: series with the same collective, dtype, group
// shape, placement and concurrency become one; a size seen more than once (several logs of one
// configuration are several samples) keeps the median of the medians, the widest spread and the
// summed repeats. Points end up sorted by size. O(points log points). Returns a note for each
// merged series whose samples of one size are kRepeatSpreadNoted or more apart.
std::vector<std::string> merge_series(CalibrationProfile& profile,
                                      std::vector<CollectiveSeries> series);

}  // namespace fsdpsim::calibrate
