#include "sim/app/summary_text.hpp"

#include <fmt/format.h>

#include "models/workload.hpp"

namespace fsdpsim::app {
namespace {

const char* family_name(models::ModelFamily f) {
  switch (f) {
    case models::ModelFamily::kGpt: return "gpt";
    case models::ModelFamily::kMpt: return "mpt";
    case models::ModelFamily::kLlama: return "llama";
  }
  return "?";
}

const char* prefetch_name(fsdp::BackwardPrefetch p) {
  switch (p) {
    case fsdp::BackwardPrefetch::kBackwardPre: return "BACKWARD_PRE";
    case fsdp::BackwardPrefetch::kBackwardPost: return "BACKWARD_POST";
    case fsdp::BackwardPrefetch::kNone: return "none";
  }
  return "?";
}

std::string share(Seconds part, Seconds whole) {
  return fmt::format("{:9.3f} s  {:5.1f}%", part.value(), 100.0 * part.value() / whole.value());
}

}  // namespace

std::string summary_text(const Scenario& s, const fsdp::SimulationOutput& output) {
  const fsdp::StepResult& r = output.result;
  const auto& c = s.hardware.cluster;
  const auto& t = s.training;
  const fsdp::StepBreakdown& b = r.breakdown;
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line(fmt::format("scenario   {}{}", s.name, s.description.empty() ? "" : " — " + s.description));
  line(fmt::format("model      {} ({}): {:.2f} B parameters, {} layers, d_model {}", s.model.name,
                   family_name(s.model.family), static_cast<double>(models::parameter_count(s.model)) / 1e9,
                   s.model.n_layers, s.model.d_model));
  line(fmt::format("cluster    {} x {} ({} nodes x {} GPUs), FULL_SHARD over {} ranks", c.world_size(), c.gpu.name,
                   c.nodes, c.gpus_per_node, c.world_size()));
  line(fmt::format("training   global batch {}, micro batch {} x {} accumulation, seq {}, checkpointing {}",
                   t.global_batch, t.micro_batch, r.micro_batches, t.seq_len,
                   t.activation_checkpointing == fsdp::ActivationCheckpointing::kFull ? "full" : "none"));
  line(fmt::format("fsdp       v1, backward_prefetch {}, limit_all_gathers {}, param {} / reduce {}",
                   prefetch_name(s.fsdp.backward_prefetch), s.fsdp.limit_all_gathers ? "on (2)" : "off",
                   dtype_name(s.fsdp.param_dtype), dtype_name(s.fsdp.reduce_dtype)));
  line("");
  line(fmt::format("step time            {:.4f} s", r.step_time.value()));
  line(fmt::format("throughput           {:.1f} tokens/s/GPU  ({:.0f} tokens/s in all)", r.tokens_per_s_per_gpu,
                   r.tokens_per_s_per_gpu * c.world_size()));
  line(fmt::format("TFLOPS/GPU           model {:.1f}, hardware {:.1f}", r.model_tflops_per_gpu,
                   r.hardware_tflops_per_gpu));
  line(fmt::format("MFU / HFU            {:.1f}% / {:.1f}%  (dense {} peak {:.0f} TFLOP/s)", 100.0 * r.mfu,
                   100.0 * r.hfu, dtype_name(s.fsdp.param_dtype), c.gpu.peak(s.fsdp.param_dtype).value() / 1e12));
  line("");
  line("where the time goes (wall time: compute stream busy, else collective only, else idle)");
  line(fmt::format("  forward            {}", share(b.forward, r.step_time)));
  line(fmt::format("  backward           {}", share(b.backward, r.step_time)));
  if (b.recompute.value() > 0.0) line(fmt::format("  recompute          {}", share(b.recompute, r.step_time)));
  line(fmt::format("  optimizer          {}", share(b.optimizer, r.step_time)));
  line(fmt::format("  exposed comm       {}", share(b.exposed_communication, r.step_time)));
  line(fmt::format("  idle               {}", share(b.idle, r.step_time)));
  line(fmt::format("  (collectives busy  {:9.3f} s in all, mostly overlapped)", b.communication_busy.value()));
  line("");
  line("memory per GPU");
  line(fmt::format("  peak allocated     {:7.2f} GiB", to_gib(r.memory.peak_allocated)));
  line(fmt::format("  peak active        {:7.2f} GiB  (reserved >= active; caching allocator not modelled yet)",
                   to_gib(r.memory.peak_active)));
  line(fmt::format("  usable             {:7.2f} GiB", to_gib(r.usable_memory)));
  std::string categories;
  for (std::size_t i = 0; i < memory::kMemoryCategoryCount; ++i) {
    categories += fmt::format("{}{} {:.2f}", i == 0 ? "" : ", ",
                              memory::category_name(static_cast<memory::MemoryCategory>(i)),
                              to_gib(r.memory.peak_active_by_category[i]));
  }
  line(fmt::format("  at the peak (GiB)  {}", categories));
  line("");
  line(r.out_of_memory ? fmt::format("status               OUT OF MEMORY: {}", r.oom_reason)
                       : fmt::format("status               ok: fits ({:.1f} GiB to spare)",
                                     to_gib(r.usable_memory - r.memory.peak_active)));
  return out;
}

}  // namespace fsdpsim::app
