// Scaling in `fsdpsim validate`: evaluated rows that are the same run on different GPU counts,
// each compared with the one on the fewest GPUs. The change in tokens/s per GPU that the runs
// measured next to the one fsdpsim predicts isolates what the model gets wrong about scale: an
// error in absolute level that is the same at every GPU count cancels in the ratio.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/app/validation_cases.hpp"

namespace fsdpsim::app {

struct ValidationOutcome;

// What two rows must share to be the same run on different GPU counts: the row's scenario
// (validation_cases.hpp, scenario_for_case) without its name, node count and global batch (and
// without the model's name where the row's model column is empty: it is then the case_id), with
// its micro-batches per step and the row's gpus_per_node and source columns. So the model, GPU,
// micro-batch, accumulation, precision, FSDP and network settings are the same; only the GPU
// count, and with it the global batch, differs. The network is the bandwidth the scenario ran at,
// `nic_bytes_per_s` (hardware::ClusterSpec::nic_bandwidth_per_node): a row that leaves its
// inter_node_gbps_per_node cell empty, as a one-node run may, ran at the preset's, and pairs with
// a row that states that value.
std::string scaling_key(const ValidationCase& c, const nlohmann::json& scenario,
                        double nic_bytes_per_s);

// One row on more GPUs against its group's row on the fewest.
struct ScalingPair {
  const ValidationOutcome* fewer = nullptr;
  const ValidationOutcome* more = nullptr;
  double factor = 1.0;            // more's GPUs / fewer's GPUs
  double measured_change = 0.0;   // measured tokens/s/GPU, more / fewer - 1
  double predicted_change = 0.0;  // predicted, the same
  // (1 + predicted_change) / (1 + measured_change) - 1: > 0 when fsdpsim keeps more of the
  // per-GPU throughput than the runs did.
  double error = 0.0;
};

// The pairs among rows that print tokens/s and fit (a row predicted out of memory has no step
// of its own to scale): in each group of equal scaling_key, the first row in file order on the
// fewest GPUs against every row on more. Ordered by factor, then by the rows' lines.
std::vector<ScalingPair> scaling_pairs(const std::vector<ValidationOutcome>& outcomes);

// JSON key "scaling": pairs, per_doubling (measured_change, predicted_change: the median over
// the pairs of each change as the change per doubling of the GPUs that compounds to it; null
// without pairs), by_factor ("2", "4", ...: count, measured_change, predicted_change as means,
// mean_error, mean_abs_error), by_source (count and per_doubling of each source's pairs) and
// cases (fewer, more, gpus, measured_change, predicted_change, error).
nlohmann::json scaling_json(const std::vector<ScalingPair>& pairs);

// The markdown section "Scaling: the same run on more GPUs".
std::string scaling_markdown(const std::vector<ScalingPair>& pairs);

}  // namespace fsdpsim::app
