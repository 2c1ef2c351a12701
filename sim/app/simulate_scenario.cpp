#include "sim/app/simulate_scenario.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "hardware/calibrated_curves.hpp"
#include "models/workload.hpp"
#include "sim/app/config_error.hpp"
#include "sim/fsdp/step_size_bound.hpp"

namespace fsdpsim::app {
namespace {

// A time or a byte count past 64 bits: sizes or rates the scenario gives are out of any real range.
ConfigError out_of_range(const Scenario& scenario, const std::range_error& e) {
  return ConfigError(
      scenario.file.string(), "",
      fmt::format("{}: expected the hardware's rates{}{} and the model's sizes within the range "
                  "of real GPUs and models{}",
                  e.what(),
                  scenario.hardware.preset.empty()
                      ? ""
                      : fmt::format(" (hardware preset \"{}\", with the scenario's hardware.gpu "
                                    "and hardware.node keys over it)",
                                    scenario.hardware.preset),
                  scenario.hardware.cluster.gpu.calibration != nullptr
                      ? fmt::format(" (the measurements of calibration {} among them: `fsdpsim "
                                    "calibrate fit` shows its curves)",
                                    scenario.hardware.cluster.gpu.calibration->name())
                      : "",
                  scenario.overrides.empty()
                      ? ""
                      : fmt::format(" (run with {})", fmt::join(scenario.overrides, ", "))));
}

// Whether any forward GEMM of the workload runs in float8 (models/float8_linear.cpp converts
// only the linears whose in and out features are multiples of 16).
bool runs_float8_gemm(const models::Workload& workload) {
  for (const models::Layer& layer : workload.layers) {
    for (const models::NamedKernel& k : layer.forward) {
      if (k.kernel.dtype == Dtype::kFp8) return true;
    }
  }
  return false;
}

}  // namespace

fsdp::SimulationOutput simulate_scenario(const Scenario& scenario, bool record_memory) {
  models::WorkloadOptions options;
  options.micro_batch = scenario.training.micro_batch;
  options.seq_len = scenario.training.seq_len;
  options.decoder_seq_len = scenario.training.decoder_seq_len;
  options.compute_dtype = scenario.training.compute_dtype(scenario.fsdp.param_dtype);
  options.flash_attention = scenario.training.flash_attention;
  options.flash_kernel = scenario.training.flash_kernel;
  options.unpad_attention = scenario.training.unpad_attention;
  options.loss = scenario.training.loss;
  options.rms_norm = scenario.training.rms_norm;
  options.logits_kept_by_loop = scenario.training.logits_kept_by_loop;
  options.loss_chunks = scenario.training.loss_chunks;
  options.float8_linears = scenario.training.float8_linears();
  options.float8_linear = scenario.training.float8_linear;
  options.float8_all_gather = scenario.fsdp.float8_all_gather;
  options.compiled = scenario.training.compiled;
  options.allow_tf32 = scenario.training.allow_tf32;
  // DDP's schedule prices its autocast casts per layer itself (sim/fsdp/ddp_schedule.cpp);
  // DeepSpeed's modules hold their parameters in param_dtype, as FSDP's unsharded ones.
  if (scenario.training.parallelism != fsdp::Parallelism::kDdp) {
    options.weight_dtype = scenario.fsdp.param_dtype;
    options.residual_dtype = scenario.fsdp.param_dtype;
  } else {
    options.residual_dtype = Dtype::kFp32;  // DDP's parameters stay fp32 under autocast
  }
  fsdp::SimulationOptions simulation;
  simulation.record_memory = record_memory;
  simulation.allocator = scenario.allocator;
  simulation.warm_up = true;  // the steady state, with or without the allocator model
  try {
    const models::Workload workload = models::build_workload(scenario.model, options);
    if (options.float8_linears && !runs_float8_gemm(workload)) {
      throw ConfigError(
          scenario.file.string(), "/training/matmul_dtype",
          "expected a model with a linear that float8 runs, found none: torchao converts the "
          "nn.Linear layers whose in and out features are multiples of 16, the LM head excepted "
          "(torchtitan's float8 converter), so fp8 would change nothing");
    }
    fsdp::ScheduleInput input;
    input.workload = &workload;
    input.cluster = scenario.hardware.cluster;
    input.fsdp = scenario.fsdp;
    input.training = scenario.training;
    return fsdp::simulate_step(input, simulation);
  } catch (const SimTimeRangeError& e) {
    throw out_of_range(scenario, e);
  } catch (const ByteCountRangeError& e) {
    throw out_of_range(scenario, e);
  } catch (const fsdp::RankClassesError& e) {
    throw ConfigError(scenario.file.string(), "/hardware/stragglers", e.what());
  } catch (const fsdp::StepSizeError& e) {
    throw ConfigError(scenario.file.string(), "/training/global_batch", e.what());
  }
}

}  // namespace fsdpsim::app
