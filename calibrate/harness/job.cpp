#include "calibrate/harness/job.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "calibrate/harness/launch_env.hpp"

namespace fsdpsim::harness {
namespace {

constexpr std::size_t kHostNameBytes = 64;
constexpr std::size_t kHostRecordBytes = 128;  // the name, then the boot id (a 36-character UUID)
// How far the clocks of two nodes may disagree on a shared folder's file times (NTP keeps them
// within milliseconds; this allows for a node without it).
constexpr std::chrono::seconds kClockSkewMargin{60};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// Whether the launcher's environment, not this process alone, makes the ranks.
bool uses_environment(const Options& options, const LaunchEnv& e) {
  return options.launch == LaunchMode::kEnvironment ||
         (options.launch == LaunchMode::kAuto && !e.launcher.empty() && e.world > 1);
}

// Rank 0 writes the id (temporary file + rename); the others poll until it appears.
ncclUniqueId exchange_unique_id(const Options& o, int rank, Heartbeat& heartbeat,
                                std::string& written) {
  const std::string chosen =
      o.rendezvous_dir.empty() ? env("FSDPSIM_RENDEZVOUS_DIR") : o.rendezvous_dir;
  const std::string dir = chosen.empty() ? std::string(1, '.') : chosen;
  const std::string path =
      cat(dir, "/fsdpsim-calibrate-", rendezvous_tag(launch_env(), o.rendezvous_tag), ".ncclid");
  ncclUniqueId id{};
  if (rank == 0) {
    FSDPSIM_NCCL(ncclGetUniqueId(&id));
    const std::string temporary = cat(path, ".", ::getpid(), ".tmp");
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out.write(id.internal, sizeof id.internal);
      // Closed before checking: the bytes leave the stream's buffer only then, and a full disk
      // or quota (NFS reports it at close) would otherwise leave an empty id behind.
      out.close();
      if (!out) {
        std::remove(temporary.c_str());
        throw UsageError(
            cat("--rendezvous: cannot write ", temporary, " (is ", dir, " a writable folder?)"));
      }
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      std::remove(temporary.c_str());
      throw UsageError(cat("--rendezvous: cannot create ", path));
    }
    written = path;
    heartbeat.remove_on_timeout(path);
    return id;
  }
  heartbeat.beat(cat("waiting for rank 0 to write the NCCL id to ", path,
                     " (is --rendezvous a folder all nodes share, and did rank 0 start?)"));
  // A file written before this process started, less --timeout (rank 0 waits that long for the
  // others to join, so a rank starting later would find it gone) and a margin for the clocks of
  // the nodes, is a previous run's, which rank 0 will replace. (Rank 0 removes its file however
  // it ends, a timeout included; only a killed run leaves one.)
  const auto started = std::filesystem::file_time_type::clock::now() - kClockSkewMargin -
                       std::chrono::duration_cast<std::filesystem::file_time_type::duration>(
                           std::chrono::duration<double>(o.timeout_s));
  for (;;) {
    std::error_code ec;
    const auto written_at = std::filesystem::last_write_time(path, ec);
    if (!ec && written_at >= started) {
      std::ifstream in(path, std::ios::binary);
      in.read(id.internal, sizeof id.internal);
      if (in.gcount() == static_cast<std::streamsize>(sizeof id.internal)) return id;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

bool launched_as_root(const Options& options) {
  const LaunchEnv e = launch_env();
  return !uses_environment(options, e) || e.rank == 0;
}

Job::Job(const Options& options, Heartbeat& heartbeat) : heartbeat_(heartbeat) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    const std::string visible = env("CUDA_VISIBLE_DEVICES");
    throw UsageError(cat(
        "no usable CUDA device: ",
        status == cudaSuccess ? std::string("0 devices") : std::string(cudaGetErrorString(status)),
        visible.empty() ? std::string() : cat(" (CUDA_VISIBLE_DEVICES=", visible, ")"),
        ". Run the harness on a GPU node; `fsdpsim calibrate import-nccl-tests` imports existing "
        "nccl-tests logs without one"));
  }
  const LaunchEnv e = launch_env();
  if (uses_environment(options, e)) {
    if (e.launcher.empty()) {
      throw UsageError(
          "--launch env: none of RANK/WORLD_SIZE/LOCAL_RANK, OMPI_COMM_WORLD_* or "
          "SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID is set");
    }
    launcher_ = e.launcher;
    Gpu g;
    g.device = e.local_rank % devices;
    g.rank = e.rank;
    world_size_ = e.world;
    gpus_.push_back(g);
    heartbeat_.set_rank_label(cat("rank ", e.rank, " of ", e.world));
    init_from_environment(options);
  } else {
    launcher_ = "single process";
    world_size_ = devices;
    for (int d = 0; d < devices; ++d) {
      Gpu g;
      g.device = d;
      g.rank = d;
      gpus_.push_back(g);
    }
    heartbeat_.set_rank_label(cat("single process, ", devices, " GPUs"));
    init_single_process();
  }
  for (Gpu& g : gpus_) {
    FSDPSIM_CUDA(cudaSetDevice(g.device));
    FSDPSIM_CUDA(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    FSDPSIM_CUDA(cudaStreamCreateWithFlags(&g.side, cudaStreamNonBlocking));
    FSDPSIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&g.scratch), kMaxReduced * sizeof(float)));
    FSDPSIM_CUDA(
        cudaMallocHost(reinterpret_cast<void**>(&g.host_scratch), kMaxReduced * sizeof(float)));
    FSDPSIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&g.token), sizeof(float)));
    // On the GPU's own stream: cudaMemset runs on the legacy default stream, which a
    // cudaStreamNonBlocking stream does not wait for.
    FSDPSIM_CUDA(cudaMemsetAsync(g.token, 0, sizeof(float), g.stream));
    create_gate(g.gate);
    for (auto* events : {&g.start, &g.stop, &g.side_start, &g.side_stop}) {
      events->resize(kMaxRepeats);
      for (cudaEvent_t& ev : *events) FSDPSIM_CUDA(cudaEventCreate(&ev));
    }
  }
  exchange_hosts();
  FSDPSIM_CUDA(cudaSetDevice(gpus_.front().device));  // this process's first GPU from now on
}

void Job::init_single_process() {
  heartbeat_.beat("initializing NCCL over the local GPUs");
  std::vector<ncclComm_t> comms(gpus_.size());
  std::vector<int> devices;
  for (const Gpu& g : gpus_) devices.push_back(g.device);
  FSDPSIM_NCCL(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data()));
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    gpus_[i].world = comms[i];
    comms_.push_back(comms[i]);
  }
}

void Job::init_from_environment(const Options& options) {
  Gpu& g = gpus_.front();
  FSDPSIM_CUDA(cudaSetDevice(g.device));
  const ncclUniqueId id = exchange_unique_id(options, g.rank, heartbeat_, id_file_);
  heartbeat_.beat(
      cat("initializing NCCL over ", world_size_, " ranks (waiting for every rank to join)"));
  // Every rank has read the id once the communicator forms, and none will if it fails: either
  // way a later job reusing the tag must not find this one's id.
  const auto remove_id_file = [&] {
    if (id_file_.empty()) return;
    std::remove(id_file_.c_str());
    heartbeat_.remove_on_timeout("");
  };
  try {
    FSDPSIM_NCCL(ncclCommInitRank(&g.world, world_size_, id, g.rank));
  } catch (...) {
    remove_id_file();
    throw;
  }
  comms_.push_back(g.world);
  remove_id_file();
  heartbeat_.beat("NCCL initialized");
}

void Job::exchange_hosts() {
  const DeviceGuard guard;
  // A host is its name and its kernel's boot id, as NCCL's host hash (getHostHash, misc/utils.cc)
  // tells hosts apart: containers started from one image can share a host name.
  char name[kHostRecordBytes] = {};
  ::gethostname(name, kHostNameBytes - 1);
  {
    std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
    boot_id.read(name + kHostNameBytes, kHostRecordBytes - kHostNameBytes - 1);
  }
  std::vector<char> all(kHostRecordBytes * static_cast<std::size_t>(world_size_));
  std::vector<char*> device_buffers(gpus_.size());
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    FSDPSIM_CUDA(cudaSetDevice(gpus_[i].device));
    FSDPSIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&device_buffers[i]), all.size()));
    // Ordered on the stream the all-gather runs on and finished before it is queued: a cudaMemcpy
    // from pageable memory returns once the bytes are staged, not once they have landed.
    FSDPSIM_CUDA(cudaMemcpyAsync(
        device_buffers[i] + kHostRecordBytes * static_cast<std::size_t>(gpus_[i].rank), name,
        kHostRecordBytes, cudaMemcpyHostToDevice, gpus_[i].stream));
    FSDPSIM_CUDA(cudaStreamSynchronize(gpus_[i].stream));
  }
  group_start();
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    char* buffer = device_buffers[i];
    FSDPSIM_NCCL(ncclAllGather(buffer + kHostRecordBytes * static_cast<std::size_t>(gpus_[i].rank),
                               buffer, kHostRecordBytes, ncclChar, gpus_[i].world,
                               gpus_[i].stream));
  }
  group_end();
  wait("exchanging host names");
  FSDPSIM_CUDA(cudaSetDevice(gpus_.front().device));
  FSDPSIM_CUDA(cudaMemcpy(all.data(), device_buffers.front(), all.size(), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    FSDPSIM_CUDA(cudaSetDevice(gpus_[i].device));
    FSDPSIM_CUDA(cudaFree(device_buffers[i]));
  }
  std::vector<std::string> records;  // per rank: host name, then boot id
  for (int r = 0; r < world_size_; ++r) {
    const char* h = all.data() + kHostRecordBytes * static_cast<std::size_t>(r);
    hosts_.emplace_back(h, strnlen(h, kHostNameBytes));
    records.push_back(hosts_.back() + '\n' +
                      std::string(h + kHostNameBytes,
                                  strnlen(h + kHostNameBytes, kHostRecordBytes - kHostNameBytes)));
  }
  // Node by node: each host's ranks consecutive, the same number on every host.
  std::int32_t per_node = 0;
  while (per_node < world_size_ && records[static_cast<std::size_t>(per_node)] == records.front())
    ++per_node;
  for (int r = 0; r < world_size_; ++r) {
    const std::string& expected = records[static_cast<std::size_t>((r / per_node) * per_node)];
    if (world_size_ % per_node != 0 || records[static_cast<std::size_t>(r)] != expected) {
      // Two machines of one name (containers) differ in their boot id alone: say so.
      const std::string& here = records[static_cast<std::size_t>(r)];
      const std::string& host = hosts_[static_cast<std::size_t>(r)];
      const bool same_name = here != expected && host == expected.substr(0, expected.find('\n'));
      throw UsageError(cat(
          "ranks are not laid out node by node (rank ", r, " runs on ", host,
          same_name ? cat(", a machine of the same name as rank ", (r / per_node) * per_node,
                          "'s but another boot id, ", here.substr(here.find('\n') + 1))
                    : std::string(),
          "); launch with the same number of ranks per node, numbered node by node (torchrun does; "
          "Slurm needs --distribution=block)"));
    }
  }
  gpus_per_node_ = per_node;
}

Job::~Job() {
  if (aborted_) return;
  for (Gpu& g : gpus_) {
    cudaSetDevice(g.device);
    cudaStreamSynchronize(g.stream);
    cudaStreamSynchronize(g.side);
    for (auto* events : {&g.start, &g.stop, &g.side_start, &g.side_stop}) {
      for (cudaEvent_t ev : *events) cudaEventDestroy(ev);
    }
    if (g.send != nullptr) cudaFree(g.send);
    if (g.recv != nullptr) cudaFree(g.recv);
    if (g.scratch != nullptr) cudaFree(g.scratch);
    if (g.host_scratch != nullptr) cudaFreeHost(g.host_scratch);
    if (g.token != nullptr) cudaFree(g.token);
    destroy_gate(g.gate);
    cudaStreamDestroy(g.stream);
    cudaStreamDestroy(g.side);
  }
  for (ncclComm_t c : comms_) ncclCommDestroy(c);
}

void Job::abort() noexcept {
  if (aborted_) return;
  aborted_ = true;
  for (ncclComm_t c : comms_) ncclCommAbort(c);
  comms_.clear();
}

void Job::group_start() const {
  if (gpus_.size() > 1) FSDPSIM_NCCL(ncclGroupStart());
}

void Job::group_end() const {
  if (gpus_.size() > 1) FSDPSIM_NCCL(ncclGroupEnd());
}

void Job::wait(const std::string& what) {
  heartbeat_.beat(what);
  for (;;) {
    bool idle = true;
    for (const Gpu& g : gpus_) {
      for (cudaStream_t s : {g.stream, g.side}) {
        const cudaError_t q = cudaStreamQuery(s);
        if (q == cudaErrorNotReady) {
          idle = false;
        } else if (q != cudaSuccess) {
          throw HarnessError(cat("CUDA error ", cudaGetErrorName(q), " (", cudaGetErrorString(q),
                                 ") while ", what));
        }
      }
    }
    for (ncclComm_t c : comms_) {
      ncclResult_t async = ncclSuccess;
      FSDPSIM_NCCL(ncclCommGetAsyncError(c, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        throw HarnessError(cat("NCCL reports '", ncclGetErrorString(async), "' while ", what,
                               " (another rank failed or the network is down?)"));
      }
    }
    if (idle) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  heartbeat_.beat(cat(what, " (done)"));
}

void Job::barrier() {
  group_start();
  for (Gpu& g : gpus_)
    FSDPSIM_NCCL(ncclAllReduce(g.token, g.token, 1, ncclFloat, ncclMax, g.world, g.stream));
  group_end();
}

std::vector<float> Job::max_over_ranks(const std::vector<float>& values) {
  const DeviceGuard guard;
  if (values.empty() || values.size() > static_cast<std::size_t>(kMaxReduced)) {
    throw HarnessError("max_over_ranks: between 1 and kMaxReduced values");
  }
  const std::size_t bytes = values.size() * sizeof(float);
  for (Gpu& g : gpus_) {
    FSDPSIM_CUDA(cudaSetDevice(g.device));
    std::copy(values.begin(), values.end(), g.host_scratch);
    FSDPSIM_CUDA(
        cudaMemcpyAsync(g.scratch, g.host_scratch, bytes, cudaMemcpyHostToDevice, g.stream));
  }
  group_start();
  for (Gpu& g : gpus_) {
    FSDPSIM_NCCL(
        ncclAllReduce(g.scratch, g.scratch, values.size(), ncclFloat, ncclMax, g.world, g.stream));
  }
  group_end();
  Gpu& first = gpus_.front();
  FSDPSIM_CUDA(cudaSetDevice(first.device));
  // Into the buffer the first GPU's upload read, after it on the same stream.
  FSDPSIM_CUDA(cudaMemcpyAsync(first.host_scratch, first.scratch, bytes, cudaMemcpyDeviceToHost,
                               first.stream));
  wait("reducing timings over ranks");
  return {first.host_scratch, first.host_scratch + values.size()};
}

std::vector<float> Job::gather_over_ranks(const std::vector<float>& per_local_gpu) {
  if (per_local_gpu.size() != gpus_.size()) {
    throw HarnessError("gather_over_ranks: one value per local GPU");
  }
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(world_size_));
  // In slices of at most kMaxReduced ranks, the most one max_over_ranks call takes.
  for (std::int32_t first = 0; first < world_size_; first += kMaxReduced) {
    const std::int32_t count = std::min(kMaxReduced, world_size_ - first);
    const DeviceGuard guard;
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
    // Each GPU's slice in its own pinned buffer, ordered on its stream before the all-reduce.
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      Gpu& g = gpus_[i];
      std::fill(g.host_scratch, g.host_scratch + count, 0.0F);
      if (g.rank >= first && g.rank < first + count)
        g.host_scratch[g.rank - first] = per_local_gpu[i];
      FSDPSIM_CUDA(cudaSetDevice(g.device));
      FSDPSIM_CUDA(
          cudaMemcpyAsync(g.scratch, g.host_scratch, bytes, cudaMemcpyHostToDevice, g.stream));
    }
    group_start();
    for (Gpu& g : gpus_) {
      FSDPSIM_NCCL(ncclAllReduce(g.scratch, g.scratch, static_cast<std::size_t>(count), ncclFloat,
                                 ncclMax, g.world, g.stream));
    }
    group_end();
    Gpu& front = gpus_.front();
    FSDPSIM_CUDA(cudaSetDevice(front.device));
    FSDPSIM_CUDA(cudaMemcpyAsync(front.host_scratch, front.scratch, bytes, cudaMemcpyDeviceToHost,
                                 front.stream));
    wait("gathering timings from every rank");
    out.insert(out.end(), front.host_scratch, front.host_scratch + count);
  }
  return out;
}

namespace {

// Waits for the GPU's streams, then frees its collective buffers.
void release_buffers(Gpu& g) {
  FSDPSIM_CUDA(cudaSetDevice(g.device));
  FSDPSIM_CUDA(cudaStreamSynchronize(g.stream));
  FSDPSIM_CUDA(cudaStreamSynchronize(g.side));
  if (g.send != nullptr) FSDPSIM_CUDA(cudaFree(g.send));
  if (g.recv != nullptr) FSDPSIM_CUDA(cudaFree(g.recv));
  g.send = nullptr;
  g.recv = nullptr;
  g.buffer_bytes = 0;
}

}  // namespace

void Job::ensure_buffers(std::int64_t bytes) {
  const DeviceGuard guard;
  for (Gpu& g : gpus_) {
    if (g.buffer_bytes >= bytes) continue;
    release_buffers(g);
    FSDPSIM_CUDA(cudaMalloc(&g.send, static_cast<std::size_t>(bytes)));
    FSDPSIM_CUDA(cudaMalloc(&g.recv, static_cast<std::size_t>(bytes)));
    // Non-zero, finite contents (bytes 0x3c: 1.06 in fp16, 0.0115 in bf16 and fp32) so that
    // reductions do the arithmetic they do in training. Filled on the GPU's stream and waited
    // for: a cudaMemset on the legacy default stream would overlap the first timed collectives
    // on the non-blocking streams (and the side stream's, which use the same buffers).
    FSDPSIM_CUDA(cudaMemsetAsync(g.send, 0x3c, static_cast<std::size_t>(bytes), g.stream));
    FSDPSIM_CUDA(cudaMemsetAsync(g.recv, 0x3c, static_cast<std::size_t>(bytes), g.stream));
    FSDPSIM_CUDA(cudaStreamSynchronize(g.stream));
    g.buffer_bytes = bytes;
  }
}

void Job::free_buffers() {
  const DeviceGuard guard;
  for (Gpu& g : gpus_) release_buffers(g);
}

std::int64_t Job::free_memory() const {
  const DeviceGuard guard;
  std::int64_t tightest = -1;
  for (const Gpu& g : gpus_) {
    FSDPSIM_CUDA(cudaSetDevice(g.device));
    std::size_t free = 0;
    std::size_t total = 0;
    FSDPSIM_CUDA(cudaMemGetInfo(&free, &total));
    const auto f = static_cast<std::int64_t>(free);
    if (tightest < 0 || f < tightest) tightest = f;
  }
  return tightest;
}

std::vector<Group> Job::make_groups(const std::vector<std::string>& kinds,
                                    const std::vector<std::int32_t>& shard_sizes, bool twins,
                                    std::vector<std::string>& notes) {
  const DeviceGuard guard;
  struct Wanted {
    std::string label;
    std::int32_t ranks;
    std::int32_t per_node;
    std::vector<int> colors;  // per local GPU
  };
  const std::int32_t g = gpus_per_node_;
  const std::int32_t n = world_size_ / g;
  const auto wants = [&kinds](const char* k) {
    return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
  };
  std::vector<Wanted> wanted;
  const auto colors = [this](auto color_of) {
    std::vector<int> out;
    for (const Gpu& gpu : gpus_) out.push_back(color_of(gpu.rank));
    return out;
  };
  if (wants("world")) wanted.push_back({"world", world_size_, g, colors([](int) { return 0; })});
  if (wants("intra") && n > 1 && g > 1)
    wanted.push_back({"intra_node", g, g, colors([g](int r) { return r / g; })});
  if (wants("inter") && n > 1)
    wanted.push_back({"inter_node", n, 1, colors([g](int r) { return r % g; })});
  if (wants("shard")) {
    for (const std::int32_t f : shard_sizes) {
      if (f < 2 || f >= world_size_ || world_size_ % f != 0 || (f % g != 0 && g % f != 0)) {
        notes.push_back(cat("shard group size ", f, " skipped: it must divide the world (",
                            world_size_, ") and tile nodes of ", g, " GPUs"));
        continue;
      }
      wanted.push_back({cat("shard_", f), f, std::min(f, g), colors([f](int r) { return r / f; })});
      const std::int32_t replicas = world_size_ / f;
      if (replicas > 1) {
        wanted.push_back({cat("replicate_", f), replicas, f < g ? g / f : 1,
                          colors([f](int r) { return r % f; })});
      }
    }
  }
  std::vector<Group> groups;
  for (const Wanted& w : wanted) {
    const bool duplicate = std::any_of(groups.begin(), groups.end(), [&w](const Group& x) {
      return x.ranks == w.ranks && x.ranks_per_node == w.per_node;
    });
    if (duplicate || w.ranks < 2) continue;
    Group group;
    group.label = w.label;
    group.ranks = w.ranks;
    group.ranks_per_node = w.per_node;
    heartbeat_.beat(cat("creating the ", w.label, " communicators"));
    for (int copy = 0; copy < (twins ? 2 : 1); ++copy) {
      std::vector<ncclComm_t>& target = copy == 0 ? group.comms : group.twins;
      target.assign(gpus_.size(), nullptr);
      group_start();
      for (std::size_t i = 0; i < gpus_.size(); ++i) {
        FSDPSIM_CUDA(cudaSetDevice(gpus_[i].device));
        FSDPSIM_NCCL(
            ncclCommSplit(gpus_[i].world, w.colors[i], gpus_[i].rank, &target[i], nullptr));
      }
      group_end();
      for (ncclComm_t c : target) comms_.push_back(c);
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

void Job::free_group(Group& group) {
  const DeviceGuard guard;
  if (aborted_) return;
  for (auto* list : {&group.comms, &group.twins}) {
    for (ncclComm_t c : *list) {
      comms_.erase(std::remove(comms_.begin(), comms_.end(), c), comms_.end());
      ncclCommDestroy(c);
    }
    list->clear();
  }
}

}  // namespace fsdpsim::harness
