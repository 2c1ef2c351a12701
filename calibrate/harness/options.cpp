#include "calibrate/harness/options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {
namespace {

constexpr double kMaxTimeoutSeconds = 86400.0;  // a day

const std::vector<std::string> kPhases{"collectives",     "concurrent", "gemm",
                                       "gemm-under-nccl", "rank-speed", "memory"};
const std::vector<std::string> kCollectives{"all_gather", "reduce_scatter", "all_reduce"};
const std::vector<std::string> kDtypes{"bf16", "fp16", "fp32"};
const std::vector<std::string> kGemmDtypes{"bf16", "fp16", "fp32", "tf32", "fp8"};
const std::vector<std::string> kGroups{"world", "intra", "inter", "shard"};

std::vector<std::string> checked_list(const std::string& option, const std::string& value,
                                      const std::vector<std::string>& allowed) {
  std::vector<std::string> items = split_list(value);
  if (items.empty())
    throw UsageError(cat(option, ": expected a comma-separated list, found nothing"));
  for (const std::string& item : items) {
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      std::string choices;
      for (const std::string& a : allowed) {
        if (!choices.empty()) choices += ", ";
        choices += a;
      }
      throw UsageError(cat(option, ": unknown value '", item, "'; expected some of ", choices));
    }
  }
  return items;
}

// A whole number from 1 to `max` (the option's 32-bit field, or its own limit): larger values
// are errors, never wrapped.
std::int64_t positive_integer(const std::string& option, const std::string& value,
                              std::int64_t max = std::numeric_limits<std::int32_t>::max(),
                              std::int64_t min = 1) {
  if (const std::optional<std::int64_t> v = whole_integer(value, min, max)) return *v;
  throw UsageError(
      cat(option, ": expected a whole number from ", min, " to ", max, ", found '", value, "'"));
}

}  // namespace

std::string help_text() {
  return R"(fsdpsim-calibrate: measure NCCL collectives and cuBLASLt GEMMs on this cluster and
write a calibration profile for fsdpsim (hardware.calibration in a scenario; `fsdpsim calibrate
fit`).

Usage:
  one node, one process driving all its GPUs:
    fsdpsim-calibrate -o profile.json
  one process per GPU under torchrun (RANK, WORLD_SIZE, LOCAL_RANK) or Slurm (SLURM_PROCID,
  SLURM_NTASKS, SLURM_LOCALID) or mpirun (OMPI_COMM_WORLD_RANK, ...); the NCCL unique id is
  exchanged through a file in --rendezvous DIR, a folder every node can read:
    torchrun --nnodes 2 --nproc-per-node 8 ... --no-python \
      fsdpsim-calibrate --rendezvous /shared/dir -o profile.json
    srun --ntasks-per-node 8 fsdpsim-calibrate --rendezvous /shared/dir -o profile.json

What it measures (each phase can be chosen with --phases):
  collectives      all-gather (into one tensor), reduce-scatter (tensor), all-reduce, out of place,
                   in bf16 and fp32, sizes --min-bytes .. --max-bytes (x --factor), on the groups
                   FSDP uses: world, intra-node, inter-node (same local rank), and hybrid shard
                   groups of each --shard-groups size (the shard group and its replicate group).
                   Warm-up, then --repeats timed repeats; each repeat is the slowest rank's time;
                   median, min and max; algbw and busbw as nccl-tests defines them.
  concurrent       all-gather on one communicator while a reduce-scatter runs on another
                   (interference), every 4x from 1 MiB.
  gemm             cuBLASLt bf16, fp16, fp32, tf32 and fp8 (compute capability >= 8.9) GEMMs on
                   the shapes of --plan and on a grid (--gemm-grid), layout TN (nn.Linear).
  gemm-under-nccl  the same GEMMs while an all-gather runs: their slowdown.
  rank-speed       every rank times kernel launches on its host, then every GPU of the job,
                   all at once, one bf16 8192^3 GEMM (fp16 before compute capability 8.0) after
                   3 s of it: how much slower than rank 0 each host and each GPU runs under
                   load (a job runs at its slowest rank's pace). Each GPU first times the same
                   GEMM short, as the gemm phase does (--warmup, --repeats): held over short is
                   the share of a GEMM benchmark's rate it keeps under load.
  memory           device copy bandwidth, pinned host-to-device / device-to-host bandwidth,
                   kernel launch cost, cudaMalloc and cudaFree time by size (2 MiB-8 GiB).

Options:
  -o, --output PATH         profile to write (default fsdpsim-calibration.json); written
                            atomically after every measured series, so a run that fails or is
                            stopped keeps what it measured ("complete": false)
  --name NAME               profile name (default: GPU model and world size)
  --launch auto|single|env  single: one process, all local GPUs; env: one process per GPU from
                            the launcher's variables; auto (default): env when they are set
  --rendezvous DIR          shared folder for the NCCL unique id file (default
                            $FSDPSIM_RENDEZVOUS_DIR, else the current folder)
  --rendezvous-tag TAG      names that file (default torchrun's $TORCHELASTIC_RUN_ID, else
                            $SLURM_JOB_ID.$SLURM_STEP_ID, else $MASTER_PORT)
  --timeout SECONDS         a rank that makes no progress for this long ends the run with a
                            clear error, exit code 3 (default 300, at most 86400)
  --phases LIST             collectives,concurrent,gemm,gemm-under-nccl,rank-speed,memory
                            (default all)
  --collectives LIST        all_gather,reduce_scatter,all_reduce (default all)
  --dtypes LIST             collective dtypes: bf16,fp16,fp32 (default bf16,fp32)
  --groups LIST             world,intra,inter,shard (default all that exist)
  --shard-groups F,...      hybrid shard group sizes (default: from --plan)
  --min-bytes N             smallest message, K/M/G suffixes (default 1K)
  --max-bytes N             largest message (default 4G; reduced to fit in memory)
  --factor F                size step (default 2)
  --warmup N                untimed iterations (default 5)
  --repeats N               timed repeats (default 20)
  --gemm-dtypes LIST        bf16,fp16,fp32,tf32,fp8 (default all the GPU has)
  --gemm-grid N,...         generic grid: every m, n, k from this list (default 1024,4096,16384;
                            "none" for plan shapes only)
  --plan PATH               `fsdpsim calibrate plan SCENARIO -o PATH`: exact GEMM shapes, shard
                            group sizes and message sizes of a scenario
  -h, --help                this text
  --version                 the version

Exit codes: 0 ok; 1 a CUDA, NCCL or cuBLASLt error while measuring (results so far kept);
2 bad options or no usable GPU; 3 a rank made no progress within --timeout (failed or hung).
)";
}

bool has_phase(const Options& options, const std::string& phase) {
  return std::find(options.phases.begin(), options.phases.end(), phase) != options.phases.end();
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (const std::size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) throw UsageError(cat(arg, ": expects a value"));
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (arg == "-o" || arg == "--output") {
      o.output = next();
    } else if (arg == "--name") {
      // The profile's name, which fsdpsim prints on one line and reads as UTF-8 text.
      o.name = next();
      if (o.name.empty() || find_non_text(o.name, "\t")) {
        throw UsageError(
            cat("--name: expected a name of text on one line, found '", printable(o.name), "'"));
      }
    } else if (arg == "--launch") {
      const std::string v = next();
      if (v == "auto") {
        o.launch = LaunchMode::kAuto;
      } else if (v == "single") {
        o.launch = LaunchMode::kSingleProcess;
      } else if (v == "env") {
        o.launch = LaunchMode::kEnvironment;
      } else {
        throw UsageError(cat("--launch: expected auto, single or env, found '", v, "'"));
      }
    } else if (arg == "--rendezvous") {
      o.rendezvous_dir = next();
    } else if (arg == "--rendezvous-tag") {
      o.rendezvous_tag = next();
    } else if (arg == "--timeout") {
      const std::string v = next();
      const char* end = v.data() + v.size();
      const auto [ptr, ec] = std::from_chars(v.data(), end, o.timeout_s);
      // At most a day: the NCCL id's age limit (job.cpp) counts it in the clock's 64-bit
      // nanoseconds, and no phase waits a day for a peer.
      if (v.empty() || ec != std::errc{} || ptr != end || !(o.timeout_s > 0.0) ||
          !(o.timeout_s <= kMaxTimeoutSeconds)) {
        throw UsageError(cat("--timeout: expected seconds > 0 and at most ",
                             static_cast<int>(kMaxTimeoutSeconds), ", found '", v, "'"));
      }
    } else if (arg == "--phases") {
      o.phases = checked_list(arg, next(), kPhases);
    } else if (arg == "--collectives") {
      o.collectives = checked_list(arg, next(), kCollectives);
    } else if (arg == "--dtypes") {
      o.dtypes = checked_list(arg, next(), kDtypes);
    } else if (arg == "--groups") {
      o.groups = checked_list(arg, next(), kGroups);
    } else if (arg == "--shard-groups") {
      const std::string v = next();
      const std::vector<std::string> sizes = split_list(v);
      if (sizes.empty() || v.find(",,") != std::string::npos || v.front() == ',' ||
          v.back() == ',') {
        throw UsageError(
            cat("--shard-groups: expected group sizes such as 8,16, found '", printable(v), "'"));
      }
      for (const std::string& f : sizes) {
        o.shard_groups.push_back(static_cast<std::int32_t>(positive_integer(arg, f)));
      }
    } else if (arg == "--min-bytes") {
      o.min_bytes = parse_size(next(), arg);
    } else if (arg == "--max-bytes") {
      o.max_bytes = parse_size(next(), arg);
    } else if (arg == "--factor") {
      o.factor = positive_integer(arg, next(), 1024, 2);  // 1 would never reach --max-bytes
    } else if (arg == "--warmup") {
      o.warmup = static_cast<std::int32_t>(positive_integer(arg, next()));
    } else if (arg == "--repeats") {
      o.repeats = static_cast<std::int32_t>(positive_integer(arg, next()));
      if (o.repeats > 1000) throw UsageError("--repeats: at most 1000");
    } else if (arg == "--gemm-dtypes") {
      o.gemm_dtypes = checked_list(arg, next(), kGemmDtypes);
    } else if (arg == "--gemm-grid") {
      const std::string v = next();
      o.gemm_grid.clear();
      if (v != "none") {
        if (split_list(v).empty())
          throw UsageError("--gemm-grid: expected dimensions or none, found nothing");
        for (const std::string& d : split_list(v))
          o.gemm_grid.push_back(positive_integer(arg, d, kMaxGemmDimension));
      }
    } else if (arg == "--plan") {
      o.plan = next();
    } else {
      throw UsageError(cat("unknown option '", arg, "' (fsdpsim-calibrate --help lists them)"));
    }
  }
  if (o.min_bytes > o.max_bytes) throw UsageError("--min-bytes is larger than --max-bytes");
  return o;
}

}  // namespace fsdpsim::harness
