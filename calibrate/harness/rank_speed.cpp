#include "calibrate/harness/rank_speed.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "calibrate/harness/gemm.hpp"
#include "calibrate/harness/launch_timing.hpp"
#include "calibrate/harness/progress.hpp"

namespace fsdpsim::harness {
namespace {

std::vector<float> field(const std::vector<Spread>& spreads, double Spread::*member) {
  std::vector<float> out;
  for (const Spread& s : spreads) out.push_back(static_cast<float>(s.*member));
  return out;
}

}  // namespace

void measure_rank_speeds(Job& job, const Options& options, Results& results,
                         const std::function<void()>& save) {
  HeldGemmPlan plan;
  plan.short_warmup = options.warmup;
  plan.short_repeats = options.repeats;
  progress_line(job.root(),
                cat("rank speeds: kernel launches, then a ", plan.side, "^3 GEMM on every GPU, ",
                    plan.hold_ms / 1000.0, " s held"),
                false);
  // Every rank starts each part together (the phase before ends with each rank on its own):
  // the launches with the GPUs idle, the GEMM with every GPU of the job busy.
  job.barrier();
  job.wait("lining the ranks up for the launch timing");
  std::vector<Spread> launches;
  for (Gpu& g : job.gpus()) launches.push_back(time_kernel_launches(job, g));
  job.barrier();
  job.wait("lining the ranks up for the held GEMM");
  const HeldGemm gemm = time_held_gemm(job, plan);
  const std::vector<float> gemm_us =
      job.gather_over_ranks(field(gemm.per_local_gpu, &Spread::median));
  const std::vector<float> gemm_min =
      job.gather_over_ranks(field(gemm.per_local_gpu, &Spread::min));
  const std::vector<float> gemm_max =
      job.gather_over_ranks(field(gemm.per_local_gpu, &Spread::max));
  const std::vector<float> gemm_short =
      job.gather_over_ranks(field(gemm.short_per_local_gpu, &Spread::median));
  const std::vector<float> launch_us = job.gather_over_ranks(field(launches, &Spread::median));
  RankSpeedsResult out;
  out.dtype = gemm.dtype;
  out.side = plan.side;
  out.held_ms = plan.hold_ms;
  out.repeats = plan.repeats;
  out.launches = kLaunchRepeats * kLaunchesPerRepeat;
  for (std::int32_t rank = 0; rank < job.world_size(); ++rank) {
    const auto at = static_cast<std::size_t>(rank);
    out.ranks.push_back(RankSpeedResult{rank, job.hosts()[at], gemm_us[at], gemm_short[at],
                                        gemm_min[at], gemm_max[at], launch_us[at]});
  }
  const auto slowest = [&out](double RankSpeedResult::*member) {
    return *std::max_element(out.ranks.begin(), out.ranks.end(),
                             [member](const RankSpeedResult& a, const RankSpeedResult& b) {
                               return a.*member < b.*member;
                             });
  };
  const RankSpeedResult gpu = slowest(&RankSpeedResult::gemm_us);
  const RankSpeedResult host = slowest(&RankSpeedResult::launch_us);
  progress_line(
      job.root(),
      cat("rank speeds: slowest GEMM rank ", gpu.rank, " (", gpu.host, ", ",
          gpu.gemm_us / out.ranks.front().gemm_us, "x rank 0's time), slowest launches rank ",
          host.rank, " (", host.host, ", ", host.launch_us / out.ranks.front().launch_us,
          "x); rank 0 kept ", out.ranks.front().gemm_short_us / out.ranks.front().gemm_us,
          " of its short GEMM rate under load"),
      true);
  results.rank_speeds = std::move(out);
  save();
}

}  // namespace fsdpsim::harness
