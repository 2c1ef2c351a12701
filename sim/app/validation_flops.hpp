// How each source of measured runs counts FLOPs, and the TFLOPS, MFU and HFU a tokens/s rate
// gives under that count (configs/validation/README.md, column mfu_definition).
#pragma once

#include "sim/app/scenario.hpp"
#include "sim/app/validation_cases.hpp"

namespace fsdpsim::app {

// FLOPs per token and the peak a source divides by.
struct FlopDefinition {
  double model_per_token = 0.0;     // MFU's numerator: no recompute
  double hardware_per_token = 0.0;  // HFU's: counting the recompute
  double peak_tflops = 0.0;         // the source's dense peak
};

// The definition of the row's source, for the row's model and training settings.
FlopDefinition flop_definition(const ValidationCase& c, const Scenario& s);

// TFLOPS/GPU and utilization (a fraction of peak) at `tokens_per_s_per_gpu`.
double model_tflops(const FlopDefinition& d, double tokens_per_s_per_gpu);
double hardware_tflops(const FlopDefinition& d, double tokens_per_s_per_gpu);
double mfu(const FlopDefinition& d, double tokens_per_s_per_gpu);
double hfu(const FlopDefinition& d, double tokens_per_s_per_gpu);

}  // namespace fsdpsim::app
