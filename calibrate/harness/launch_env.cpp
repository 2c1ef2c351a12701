#include "calibrate/harness/launch_env.hpp"

#include <cstdlib>
#include <exception>

#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

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
      {"mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  for (const Source& s : kSources) {
    const std::string rank = env(s.rank);
    const std::string world = env(s.world);
    const std::string local = env(s.local_rank);
    if (rank.empty() || world.empty()) continue;
    LaunchEnv e;
    e.launcher = s.launcher;
    try {
      e.rank = std::stoi(rank);
      e.world = std::stoi(world);
      e.local_rank = local.empty() ? -1 : std::stoi(local);
    } catch (const std::exception&) {
      throw UsageError(cat(s.rank, "=", rank, ", ", s.world, "=", world, ": not integers"));
    }
    if (e.world < 1 || e.rank < 0 || e.rank >= e.world) {
      throw UsageError(cat(s.rank, "=", rank, " is not a rank of ", s.world, "=", world));
    }
    if (e.local_rank < 0)
      throw UsageError(cat(s.local_rank, " is not set; the harness needs it to pick the GPU"));
    return e;
  }
  return LaunchEnv{};
}

}  // namespace fsdpsim::harness
