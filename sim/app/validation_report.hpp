// The report of `fsdpsim validate`: each evaluated row's quantities next to its measurements,
// summarized overall, by source, GPU, model size and predicted allocator state and by any column
// asked for, as JSON and as markdown (README "How good the predictions are"; issue #7's keys).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hardware/calibrated_curves.hpp"
#include "sim/app/validation_cases.hpp"
#include "sim/app/validation_stats.hpp"

namespace fsdpsim::app {

// (measured, predicted) of one quantity.
using Compared = std::pair<double, double>;

// One evaluated row.
struct ValidationOutcome {
  const ValidationCase* c = nullptr;
  std::string size_bucket;
  std::optional<double> measured_tokens;  // absent when the source prints only TFLOPS
  double predicted_tokens = 0.0;
  // Seconds per optimizer step: the row's tokens per step per GPU (global_batch x seq_len /
  // gpus) over its tokens/s, and the simulated step. Their difference shows what an error is
  // made of: a fixed cost per step (data loading, logging syncs) misses the same milliseconds
  // whatever the model, a rate misses a share of the step.
  std::optional<Compared> step_time_s;
  // Under the row's own FLOP definition (validation_flops.hpp), each where the row prints it.
  std::optional<Compared> model_tflops;
  std::optional<Compared> hardware_tflops;
  std::optional<Compared> mfu;
  std::optional<Compared> hfu;
  // The definition check: the utilization the row's own tokens/s gives under the definition
  // fsdpsim implements, over the utilization the row prints, minus 1.
  std::optional<double> mfu_definition_gap;
  std::optional<double> hfu_definition_gap;
  std::optional<Compared> peak_mem;       // torch.cuda.max_memory_allocated(), GiB
  std::optional<Compared> peak_reserved;  // torch.cuda.max_memory_reserved(), GiB
  std::string status;                     // "ok" or "oom"
  // cudaMalloc retries of the predicted step (the caching allocator freed its cache and tried
  // again), 0 where the allocator is not modelled.
  std::int64_t alloc_retries = 0;
  // With a calibration profile, what it priced of this row (warm-up and measured step) and what
  // the model priced: a row whose group shapes the profile did not measure is the model's.
  std::optional<hardware::CalibrationCounts> calibration;
  // The row's scenario without its GPU count (validation_scaling.hpp): rows with equal keys are
  // the same run on different GPU counts.
  std::string scaling_key;
};

struct ValidationFit {
  std::string key;
  double value = 0.0;
  double mape = 0.0;  // tokens/s MAPE at the value
};

// What the report says about how it was made.
struct ValidationContext {
  std::string cases_file;             // the CSV's file name
  std::vector<std::string> where;     // --where, as given
  std::string calibration;            // the profile every row was priced with, as given; "" none
  bool calibration_complete = true;   // false: the harness run that wrote it stopped early
  std::vector<std::string> group_by;  // --group-by columns, each once
  std::optional<ValidationFit> fit;
};

// The tokens/s errors of the rows that print tokens/s.
ErrorSummary tokens_summary(const std::vector<ValidationOutcome>& outcomes);

// The model size bucket of the summaries: "< 1B", "1-10B", "10-100B", ">= 100B".
std::string size_bucket(double params_b);

// Every summary of a report (validation_report.cpp), gathered in one pass over the rows.
struct ValidationSummaries;

// The report of the evaluated rows: its summaries are gathered once, when it is made, and both
// renderings and the tokens/s line read them.
class ValidationReport {
 public:
  // `outcomes` must outlive the report.
  ValidationReport(const std::vector<ValidationOutcome>& outcomes, nlohmann::json skipped,
                   ValidationContext context);
  ~ValidationReport();
  ValidationReport(const ValidationReport&) = delete;
  ValidationReport& operator=(const ValidationReport&) = delete;

  // The tokens/s errors of the rows that print tokens/s.
  [[nodiscard]] ErrorSummary tokens() const;
  // The TFLOPS/GPU errors (model or hardware, as each row prints them).
  [[nodiscard]] ErrorSummary tflops() const;
  // Schema fsdpsim.validation/1: evaluated, skipped, tokens_per_s, tflops, mfu, hfu, peak_mem,
  // peak_reserved_mem (count, mape, median_ape, max_ape, mean_error; null when count is 0),
  // definition_check, spearman (null below two cases),
  // by_source, by_gpu, by_model_size, by_allocator, by_column (with --group-by), scaling
  // (validation_scaling.hpp), cases, skipped_cases.
  [[nodiscard]] nlohmann::json json() const;
  [[nodiscard]] std::string markdown() const;

 private:
  const std::vector<ValidationOutcome>& outcomes_;
  nlohmann::json skipped_;
  ValidationContext context_;
  std::unique_ptr<const ValidationSummaries> summaries_;
};

// A fraction as a percentage with one decimal ("6.0%").
std::string percent(double fraction);

}  // namespace fsdpsim::app
