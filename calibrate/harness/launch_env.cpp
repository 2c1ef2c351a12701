#include "calibrate/harness/launch_env.hpp"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>

#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// A decimal int, all of `text` ("8abc" is not 8).
std::optional<int> whole(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

constexpr const char* kOpenMpi = "mpirun (Open MPI)";

}  // namespace

LaunchEnv launch_env() {
  struct Source {
    const char* launcher;
    const char* rank;
    const char* world;
    const char* local_rank;
  };
  static constexpr Source kSources[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  for (const Source& s : kSources) {
    const std::string rank = env(s.rank);
    const std::string world = env(s.world);
    const std::string local = env(s.local_rank);
    if (rank.empty() && world.empty()) continue;
    // One without the other is a launch gone wrong (or a stray variable), not a single process.
    if (rank.empty() || world.empty()) {
      throw UsageError(cat(rank.empty() ? s.world : s.rank, " is set without ",
                           rank.empty() ? s.rank : s.world, " (", s.launcher,
                           "'s variables); unset it, or launch every rank with both"));
    }
    LaunchEnv e;
    e.launcher = s.launcher;
    const std::optional<int> r = whole(rank);
    const std::optional<int> w = whole(world);
    const std::optional<int> l = local.empty() ? std::optional<int>(-1) : whole(local);
    if (!r || !w || !l) {
      throw UsageError(cat(s.rank, "=", rank, ", ", s.world, "=", world, ", ", s.local_rank, "=",
                           local, ": not integers"));
    }
    e.rank = *r;
    e.world = *w;
    e.local_rank = *l;
    if (e.world < 1 || e.rank < 0 || e.rank >= e.world) {
      throw UsageError(cat(s.rank, "=", rank, " is not a rank of ", s.world, "=", world));
    }
    if (e.local_rank < 0)
      throw UsageError(cat(s.local_rank, " is not set; the harness needs it to pick the GPU"));
    return e;
  }
  return LaunchEnv{};
}

std::string rendezvous_tag(const LaunchEnv& launch, const std::string& given) {
  if (!given.empty()) return given;
  // torchrun's rendezvous id first: torchrun started on each node by its own `srun` step, inside
  // one Slurm job, has the same --rdzv-id everywhere but a different SLURM_STEP_ID per node. (Not
  // TORCHELASTIC_RESTART_COUNT: the agents do not keep it in step, torch/distributed/elastic.)
  if (!env("TORCHELASTIC_RUN_ID").empty()) return cat("torchrun-", env("TORCHELASTIC_RUN_ID"));
  if (launch.launcher == kOpenMpi) {
    std::string ns = env("PMIX_NAMESPACE");
    if (ns.empty()) {
      throw UsageError(
          "under mpirun, pass --rendezvous-tag (the same on every node, e.g. the Slurm job id): "
          "PMIX_NAMESPACE is not set, and Slurm's step id differs between the first node and "
          "the others inside an sbatch script");
    }
    for (char& c : ns) {  // a file name's part: no folder separators or control characters
      if (c == '/' || static_cast<unsigned char>(c) < 0x20) c = '_';
    }
    return cat("ompi-", ns);
  }
  if (!env("SLURM_JOB_ID").empty())
    return cat("slurm-", env("SLURM_JOB_ID"), ".", env("SLURM_STEP_ID"));
  if (!env("MASTER_PORT").empty()) return cat("port-", env("MASTER_PORT"));
  throw UsageError(
      "one process per GPU needs a tag naming the NCCL id file: pass --rendezvous-tag (no "
      "SLURM_JOB_ID, TORCHELASTIC_RUN_ID or MASTER_PORT is set)");
}

}  // namespace fsdpsim::harness
