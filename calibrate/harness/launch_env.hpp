// Which rank this process is, from the launcher's environment (plain C++, no CUDA: tested on
// machines without a GPU, tests/unit/calibrate/harness_input_test.cpp).
#pragma once

#include <string>

namespace fsdpsim::harness {

// Rank, world size and local rank from the first launcher whose variables are all set, in this
// order: torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI's mpirun (OMPI_COMM_WORLD_*), Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). Open MPI's come before Slurm's: `mpirun` inside
// an `sbatch` script starts its processes with the batch step's SLURM_PROCID=0 and
// SLURM_NTASKS=N, which would make every one of them rank 0. torchrun's come first: it sets
// them for its workers, whatever started torchrun itself. `launcher` is empty when none is set.
// Throws UsageError on values that are not a rank of the world, or without a local rank.
struct LaunchEnv {
  std::string launcher;
  int rank = -1;
  int world = -1;
  int local_rank = -1;
};
LaunchEnv launch_env();

// The tag naming the NCCL id file in the rendezvous folder: the same in every process of one job
// and different between jobs. `given` (--rendezvous-tag) if set; else torchrun's run id
// (TORCHELASTIC_RUN_ID); under Open MPI's mpirun its PMIx namespace (PMIX_NAMESPACE), since
// inside an sbatch script the first node's processes inherit the batch step's Slurm variables
// and the other nodes' the step of mpirun's daemons; else the Slurm job and step; else
// MASTER_PORT. Throws UsageError when none is set (mpirun without PMIx included).
std::string rendezvous_tag(const LaunchEnv& launch, const std::string& given);

}  // namespace fsdpsim::harness
