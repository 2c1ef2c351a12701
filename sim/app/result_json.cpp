#include "sim/app/result_json.hpp"

#include <cmath>

#include "models/workload.hpp"
#include "sim/app/calibration_json.hpp"
#include "sim/app/expectations.hpp"
#include "sim/app/significant_digits.hpp"

namespace fsdpsim::app {

nlohmann::json breakdown_json(const fsdp::StepBreakdown& b) {
  return {
      {"forward_s", round6(b.forward.value())},
      {"backward_s", round6(b.backward.value())},
      {"recompute_s", round6(b.recompute.value())},
      {"optimizer_s", round6(b.optimizer.value())},
      {"exposed_communication_s", round6(b.exposed_communication.value())},
      {"host_work_s", round6(b.host_work.value())},
      {"idle_s", round6(b.idle.value())},
      {"communication_busy_s", round6(b.communication_busy.value())},
  };
}

nlohmann::json result_to_json(const Scenario& scenario, const fsdp::SimulationOutput& output) {
  const fsdp::StepResult& r = output.result;
  const fsdp::StepBreakdown& b = r.breakdown;
  const auto& cluster = scenario.hardware.cluster;
  nlohmann::json out;
  out["schema"] = kResultSchema;
  out["scenario"] = scenario.name;
  out["status"] = r.out_of_memory ? "oom" : "ok";
  out["step_time_s"] = round6(r.step_time.value());
  out["tokens_per_s_per_gpu"] = round6(r.tokens_per_s_per_gpu);
  out["tokens_per_s"] = round6(r.tokens_per_s_per_gpu * cluster.world_size());
  out["model_tflops_per_gpu"] = round6(r.model_tflops_per_gpu);
  out["hardware_tflops_per_gpu"] = round6(r.hardware_tflops_per_gpu);
  out["mfu"] = round6(r.mfu);
  out["hfu"] = round6(r.hfu);
  out["peak_mem_allocated_gib"] = round6(to_gib(r.memory.peak_allocated));
  out["peak_mem_active_gib"] = round6(to_gib(r.memory.peak_active));
  // Without the allocator model, its lower bound (blocks in use or awaiting record_stream events).
  out["peak_mem_reserved_gib"] = round6(to_gib(r.reported_peak_reserved()));
  out["reserved_model"] = r.models_reserved ? "caching_allocator" : "lower_bound_active";
  out["fragmentation_gib"] = round6(to_gib(r.reserved.fragmentation_at_peak));
  out["num_alloc_retries"] = r.reserved.alloc_retries;
  // The allocator's device calls in the measured step, as torch.cuda.memory_stats() counts them.
  out["num_device_alloc"] = r.reserved.device_allocs;
  out["num_device_free"] = r.reserved.device_frees;
  out["usable_mem_gib"] = round6(to_gib(r.usable_memory));
  out["oom_reason"] = r.oom_reason;
  out["world_size"] = cluster.world_size();
  out["micro_batches"] = r.micro_batches;
  out["inter_node_gb_per_gpu"] = round6(to_gb(output.schedule.inter_node_bytes));
  out["tokens_per_step_per_gpu"] = r.tokens_per_step_per_gpu;
  out["parameters"] = models::parameter_count(scenario.model);
  out["breakdown"] = breakdown_json(b);
  nlohmann::json at_peak;
  for (std::size_t c = 0; c < memory::kMemoryCategoryCount; ++c) {
    const auto category = static_cast<memory::MemoryCategory>(c);
    at_peak[std::string(memory::category_name(category)) + "_gib"] =
        round6(to_gib(r.memory.peak_active_by_category[c]));
  }
  out["memory_at_peak"] = at_peak;
  out["peak_tensor"] = r.peak_tensor;
  out["simulation"] = {{"ops", r.op_count}, {"cpu_steps", r.event_count - r.op_count}};
  // hardware.stragglers: each class of alike ranks (absent when every rank is alike).
  if (!r.rank_classes.empty()) {
    nlohmann::json classes = nlohmann::json::array();
    for (const fsdp::RankClassResult& k : r.rank_classes) {
      const fsdp::StepBreakdown& kb = k.breakdown;
      classes.push_back({
          {"first_rank", k.first_rank},
          {"ranks", k.ranks},
          {"compute_speed", k.compute_speed},
          {"host_speed", k.host_speed},
          {"compute_busy_s", round6(kb.compute_busy().value())},
          {"exposed_communication_s", round6(kb.exposed_communication.value())},
          {"host_work_s", round6(kb.host_work.value())},
          {"idle_s", round6(kb.idle.value())},
          {"waits_for_others_s", round6(k.waits_for_others.value())},
          {"peak_mem_allocated_gib", round6(to_gib(k.peak_allocated))},
          {"peak_mem_reserved_gib", round6(to_gib(k.peak_reserved))},
          {"status", k.out_of_memory ? "oom" : "ok"},
      });
    }
    out["rank_classes"] = classes;
    out["breakdown_rank"] = r.breakdown_rank;
    out["memory_rank"] = r.memory_rank;
  }
  if (cluster.gpu.calibration != nullptr) {
    out["calibration"] = calibration_usage_json(cluster);
  }
  return out;
}

void refuse_unknown_expect_keys(const Scenario& scenario, const fsdp::SimulationOutput& output) {
  if (scenario.expectations)
    (void)evaluate_expectations(*scenario.expectations, result_to_json(scenario, output));
}

}  // namespace fsdpsim::app
