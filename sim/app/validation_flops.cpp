#include "sim/app/validation_flops.hpp"

#include <string>

#include "models/workload.hpp"

namespace fsdpsim::app {

FlopDefinition flop_definition(const ValidationCase& c, const Scenario& s) {
  const std::string& source = c.get("source");
  const auto l = static_cast<double>(s.model.n_layers);
  const auto h = static_cast<double>(s.model.d_model);
  const auto seq = static_cast<double>(s.training.seq_len);
  const auto v = static_cast<double>(s.model.vocab);
  const bool recompute =
      s.training.activation_checkpointing == fsdp::ActivationCheckpointing::kFull;
  FlopDefinition d;
  const bool h100_class = c.get("gpu").rfind('h', 0) == 0;
  if (source.rfind("llm-foundry", 0) == 0 || source == "kempnerforge" ||
      source.rfind("fms-fsdp", 0) == 0 || source.rfind("torchtitan", 0) == 0) {
    // MFU = tok/s x (6N + 12 L d s) / peak (fms-fsdp: nanoGPT's and PaLM's count, the same;
    // torchtitan's get_num_flop_per_token of April 2024 too, N with the embedding: train.py
    // @1ea476e);
    // HFU adds the recompute, a third of the model's FLOPs for each block re-run: 4/3 MFU with
    // every block checkpointed (llm-foundry), 1 + 1/(3n) with every n-th (fms-fsdp's selective
    // checkpointing, whose HFU PyTorch's FLOP counter measured).
    const auto n = static_cast<double>(models::parameter_count(s.model));
    d.model_per_token = 6.0 * n + 12.0 * l * h * seq;
    double rerun = recompute ? 1.0 : 0.0;
    if (s.training.activation_checkpointing == fsdp::ActivationCheckpointing::kSelective) {
      const std::int64_t every = s.training.checkpoint_every_n_blocks;
      const std::int64_t blocks = s.model.n_layers;
      rerun = static_cast<double>(blocks / every) / static_cast<double>(blocks);
    }
    d.hardware_per_token = d.model_per_token * (1.0 + rerun / 3.0);
    d.peak_tflops = c.get("matmul_dtype") == "fp8" ? 1979.0 : (h100_class ? 989.0 : 312.0);
  } else {
    // Megatron-LM (Narayanan et al. 2021, eq. 3): 96 B s l h^2 (1 + s/6h + V/16lh) per
    // iteration with recompute, 72 B s l h^2 (1 + s/6h + V/12lh) without.
    d.model_per_token = 72.0 * l * h * h * (1.0 + seq / (6.0 * h) + v / (12.0 * l * h));
    d.hardware_per_token = recompute
                               ? 96.0 * l * h * h * (1.0 + seq / (6.0 * h) + v / (16.0 * l * h))
                               : d.model_per_token;
    d.peak_tflops = h100_class ? 989.0 : 312.0;
  }
  return d;
}

double model_tflops(const FlopDefinition& d, double tokens_per_s_per_gpu) {
  return tokens_per_s_per_gpu * d.model_per_token / 1e12;
}

double hardware_tflops(const FlopDefinition& d, double tokens_per_s_per_gpu) {
  return tokens_per_s_per_gpu * d.hardware_per_token / 1e12;
}

double mfu(const FlopDefinition& d, double tokens_per_s_per_gpu) {
  return model_tflops(d, tokens_per_s_per_gpu) / d.peak_tflops;
}

double hfu(const FlopDefinition& d, double tokens_per_s_per_gpu) {
  return hardware_tflops(d, tokens_per_s_per_gpu) / d.peak_tflops;
}

}  // namespace fsdpsim::app
