// The distributed job as one process sees it: which ranks and GPUs it drives, the world
// communicator and the process-group shapes FSDP uses, and waiting on GPU work without hanging.
//
// Launch: one process driving every local GPU (ncclCommInitAll; one node), or one process per
// GPU with the rank from the launcher's environment (torchrun: RANK, WORLD_SIZE, LOCAL_RANK;
// Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; Open MPI: OMPI_COMM_WORLD_*; no MPI library
// needed) and the NCCL unique id passed through a file in a shared folder. Ranks must be laid out
// node by node (rank = node * gpus_per_node + local rank), as torchrun and Slurm's block
// distribution do; the hosts are exchanged over NCCL and checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/harness/common.hpp"
#include "calibrate/harness/heartbeat.hpp"
#include "calibrate/harness/options.hpp"
#include "calibrate/harness/stream_gate.hpp"

namespace fsdpsim::harness {

inline constexpr int kMaxRepeats = 1000;
// Values one max_over_ranks call takes: the concurrent phase's two times per repeat and its gate
// timeout flag.
inline constexpr int kMaxReduced = 2 * kMaxRepeats + 1;

struct Gpu {
  int device = 0;
  int rank = 0;
  cudaStream_t stream = nullptr;  // collectives and timed kernels
  cudaStream_t side = nullptr;    // the concurrent collective
  ncclComm_t world = nullptr;
  void* send = nullptr;  // collective buffers, `buffer_bytes` each
  void* recv = nullptr;
  std::int64_t buffer_bytes = 0;
  float* scratch = nullptr;  // kMaxReduced floats: max-over-ranks
  // Pinned, kMaxReduced floats: what goes to and comes back from `scratch`. A copy to pageable
  // memory would block the host until it ends, so wait() could not watch NCCL's errors meanwhile.
  float* host_scratch = nullptr;
  float* token = nullptr;          // one float: barriers
  StreamGate gate;                 // holds `stream` while a timed window is queued
  std::vector<cudaEvent_t> start;  // kMaxRepeats each
  std::vector<cudaEvent_t> stop;
  std::vector<cudaEvent_t> side_start;
  std::vector<cudaEvent_t> side_stop;
};

// A process-group shape with one communicator per local GPU (and a twin over the same ranks for
// concurrency measurements).
struct Group {
  std::string label;  // world, intra_node, inter_node, shard_F, replicate_F
  std::int32_t ranks = 0;
  std::int32_t ranks_per_node = 0;
  std::vector<ncclComm_t> comms;
  std::vector<ncclComm_t> twins;
  bool owns_comms = true;
};

// Whether this process is rank 0, the one that writes the profile (a single-process run always
// is), from the launcher's environment alone: known before any NCCL communicator forms. Throws
// UsageError as Job does for an incomplete launch environment.
bool launched_as_root(const Options& options);

class Job {
 public:
  // Throws UsageError when there is no usable GPU or the launch environment is incomplete.
  Job(const Options& options, Heartbeat& heartbeat);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  [[nodiscard]] bool root() const { return gpus_.front().rank == 0; }
  [[nodiscard]] std::int32_t world_size() const { return world_size_; }
  [[nodiscard]] std::int32_t gpus_per_node() const { return gpus_per_node_; }
  [[nodiscard]] std::int32_t nodes() const { return world_size_ / gpus_per_node_; }
  [[nodiscard]] const std::vector<std::string>& hosts() const { return hosts_; }
  [[nodiscard]] std::vector<Gpu>& gpus() { return gpus_; }
  [[nodiscard]] const std::string& launcher() const { return launcher_; }

  // The groups of `kinds` (world, intra, inter, shard) that exist on this job, shapes deduplicated.
  std::vector<Group> make_groups(const std::vector<std::string>& kinds,
                                 const std::vector<std::int32_t>& shard_sizes, bool twins,
                                 std::vector<std::string>& notes);
  void free_group(Group& group);

  // Collective buffers of at least `bytes` each on every local GPU; free_buffers() returns them.
  void ensure_buffers(std::int64_t bytes);
  void free_buffers();
  // Free device memory on the tightest local GPU.
  [[nodiscard]] std::int64_t free_memory() const;

  // Blocks until all local streams are idle; checks NCCL's asynchronous errors meanwhile and
  // reports progress to the heartbeat. Throws HarnessError.
  void wait(const std::string& what);
  // Enqueues a world all-reduce of one float on every local stream (not waited for).
  void barrier();
  // Element-wise maximum over all ranks of `values` (at most kMaxReduced); waits.
  std::vector<float> max_over_ranks(const std::vector<float>& values);
  // One value per local GPU (by gpus() order, each >= 0) in, every rank's value out (by rank,
  // world_size() of them): a max-over-ranks of vectors that are zero but at each GPU's own rank.
  // Every rank must call it; waits.
  std::vector<float> gather_over_ranks(const std::vector<float>& per_local_gpu);
  // NCCL launches from one thread for all local GPUs need a group.
  void group_start() const;
  void group_end() const;
  // After an error: abort every communicator (never blocks on peers).
  void abort() noexcept;

 private:
  void init_single_process();
  void init_from_environment(const Options& options);
  std::string id_file_;  // the NCCL id file rank 0 wrote, removed once every rank has joined
  void exchange_hosts();

  Heartbeat& heartbeat_;
  std::vector<Gpu> gpus_;
  std::vector<ncclComm_t> comms_;   // every communicator this process owns, for errors and abort
  std::vector<std::string> hosts_;  // per rank
  std::int32_t world_size_ = 1;
  std::int32_t gpus_per_node_ = 1;
  std::string launcher_;
  bool aborted_ = false;
};

}  // namespace fsdpsim::harness
