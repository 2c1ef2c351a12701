// fsdpsim-calibrate: measures NCCL collectives, cuBLASLt GEMMs and memory costs on the cluster it
// runs on and writes a calibration profile (README "Calibrating a new cluster"). Exit codes:
// common.hpp. Only here are errors printed and mapped to exit codes.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include "calibrate/harness/collectives.hpp"
#include "calibrate/harness/common.hpp"
#include "calibrate/harness/gemm.hpp"
#include "calibrate/harness/heartbeat.hpp"
#include "calibrate/harness/job.hpp"
#include "calibrate/harness/memory.hpp"
#include "calibrate/harness/options.hpp"
#include "calibrate/harness/plan_file.hpp"
#include "calibrate/harness/rank_speed.hpp"
#include "calibrate/harness/results.hpp"

namespace {

using namespace fsdpsim::harness;

std::string version_of(long code, long major_unit) {
  return cat(code / major_unit, ".", (code % major_unit) / (major_unit / 100), ".",
             code % (major_unit / 100));
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

void describe(Job& job, const Options& o, Results& r) {
  const Gpu& gpu = job.gpus().front();
  cudaDeviceProp p{};
  FSDPSIM_CUDA(cudaGetDeviceProperties(&p, gpu.device));
  r.device_name = p.name;
  r.compute_capability = cat(p.major, ".", p.minor);
  r.sm_count = p.multiProcessorCount;
  r.memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  int driver = 0;
  int runtime = 0;
  int nccl = 0;
  FSDPSIM_CUDA(cudaDriverGetVersion(&driver));
  FSDPSIM_CUDA(cudaRuntimeGetVersion(&runtime));
  FSDPSIM_NCCL(ncclGetVersion(&nccl));
  r.driver = cat("CUDA driver API ", driver / 1000, ".", (driver % 1000) / 10);
  r.cuda_runtime = cat(runtime / 1000, ".", (runtime % 1000) / 10);
  r.nccl = nccl >= 10000 ? version_of(nccl, 10000) : version_of(nccl, 1000);
  r.cublaslt = version_of(static_cast<long>(cublasLtGetVersion()), 10000);
  r.nodes = job.nodes();
  r.gpus_per_node = job.gpus_per_node();
  for (std::size_t i = 0; i < job.hosts().size();
       i += static_cast<std::size_t>(job.gpus_per_node())) {
    r.hosts.push_back(job.hosts()[i]);
  }
  r.name = o.name.empty() ? cat(r.device_name, " x", job.world_size()) : o.name;
  r.created = utc_now();
  r.tool = cat("fsdpsim-calibrate ", FSDPSIM_CALIBRATE_VERSION, " (", job.launcher(), ")");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fsdpsim-calibrate: error: %s\n", printable(e.what()).c_str());
    return kExitUsage;
  }
  if (options.help) {
    std::fputs(help_text().c_str(), stdout);
    return kExitOk;
  }
  if (options.version) {
    std::printf("fsdpsim-calibrate %s\n", FSDPSIM_CALIBRATE_VERSION);
    return kExitOk;
  }

  Heartbeat heartbeat;
  Results results;
  std::unique_ptr<Job> job;
  const auto save = [&]() {
    if (job && job->root()) write_atomically(options.output, to_json(results));
  };
  try {
    Plan plan;
    if (!options.plan.empty()) {
      plan = read_plan(options.plan);
      for (const std::int32_t f : plan.shard_groups) {
        if (std::find(options.shard_groups.begin(), options.shard_groups.end(), f) ==
            options.shard_groups.end()) {
          options.shard_groups.push_back(f);
        }
      }
    }
    check_output_is_not_the_plan(options.output, options.plan);
    if (launched_as_root(options)) check_writable(options.output);
    heartbeat.start_watchdog(options.timeout_s, options.output);
    job = std::make_unique<Job>(options, heartbeat);
    describe(*job, options, results);
    if (job->root()) {
      std::fprintf(
          stderr, "fsdpsim-calibrate: %d rank%s (%d node%s x %d GPU%s, %s), %s; writing %s\n",
          job->world_size(), job->world_size() == 1 ? "" : "s", job->nodes(),
          job->nodes() == 1 ? "" : "s", job->gpus_per_node(), job->gpus_per_node() == 1 ? "" : "s",
          job->launcher().c_str(), results.device_name.c_str(), options.output.c_str());
    }
    save();
    if (has_phase(options, "collectives")) measure_collectives(*job, options, plan, results, save);
    if (has_phase(options, "concurrent")) measure_concurrent(*job, options, plan, results, save);
    if (has_phase(options, "gemm")) measure_gemms(*job, options, plan, results, save);
    if (has_phase(options, "gemm-under-nccl"))
      measure_gemms_under_nccl(*job, options, plan, results, save);
    if (has_phase(options, "rank-speed")) measure_rank_speeds(*job, options, results, save);
    if (has_phase(options, "memory")) {
      // Rank 0's process alone measures, the others waiting: every process copying and
      // allocating at once would share the node's host memory, PCIe switches and CPU, and only
      // rank 0's numbers are written.
      job->barrier();
      job->wait("lining the ranks up for the memory phase");
      if (job->root()) measure_memory(*job, results);
      job->barrier();
      job->wait("waiting for rank 0's memory phase");
    }
    results.complete = true;
    save();
    if (job->root())
      std::fprintf(stderr, "fsdpsim-calibrate: done; fit it with `fsdpsim calibrate fit %s`\n",
                   options.output.c_str());
    job.reset();
    return kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fsdpsim-calibrate: error: %s\n", printable(e.what()).c_str());
    return kExitUsage;
  } catch (const std::exception& e) {
    const std::string rank = job ? cat("rank ", job->gpus().front().rank) : std::string("startup");
    std::fprintf(stderr, "fsdpsim-calibrate: %s: error: %s\n", rank.c_str(),
                 printable(e.what()).c_str());
    if (job) {
      results.complete = false;
      results.notes.push_back(cat("stopped early: ", e.what()));
      try {
        save();
        if (job->root())
          std::fprintf(stderr,
                       "fsdpsim-calibrate: what was measured is in %s (\"complete\": false)\n",
                       options.output.c_str());
      } catch (const std::exception& write_error) {
        std::fprintf(stderr, "fsdpsim-calibrate: could not save the results: %s\n",
                     printable(write_error.what()).c_str());
      }
      job->abort();
    }
    return kExitFailed;
  }
}
