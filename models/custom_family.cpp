// custom: a user-listed layer list (models/custom_layer_spec.hpp). Each copy of each entry is one
// layer, an FSDP unit of its own (LayerKind::kBlock) unless fsdp_unit is false (kUnwrapped: the
// root unit's, never checkpointed). Per-sample quantities are multiplied by the micro-batch;
// seq_len does not scale them (it only turns samples into tokens for throughput).
//
// Kernels: a forward of `kernels` launches splits them between GEMM-class compute (the FLOPs,
// opaque_compute_kernel) and memory-bound work (the bytes): half each, rounded towards compute,
// at least one of each kind that has work; a layer with neither runs `kernels` empty launches
// (their cost is the launch and the minimum kernel duration). Backward runs twice the launches
// with the backward FLOPs and twice the forward bytes (read the gradient and the saved input,
// write the input gradient).
//
// Memory: saved_activation_bytes_per_sample is kept from the layer's forward to its backward;
// under full activation checkpointing a wrapped layer keeps only its input, the previous
// layer's output_bytes_per_sample (0 for the first layer, whose input is the data batch the
// training loop holds anyway); transient_bytes_per_sample is the peak workspace inside its
// forward and inside its backward.
#include <string>
#include <utility>

#include "models/families.hpp"
#include "models/kernel_factory.hpp"

namespace fsdpsim::models::detail {
namespace {

void append_kernels(std::vector<NamedKernel>& out, const std::string& prefix, std::int64_t launches,
                    double flops, std::int64_t bytes, const BuildContext& ctx) {
  std::int64_t compute = 0;
  std::int64_t memory = 0;
  if (flops > 0.0 && bytes > 0) {
    memory = launches / 2 > 0 ? launches / 2 : 1;
    compute = launches - memory > 0 ? launches - memory : 1;
  } else if (flops > 0.0) {
    compute = launches;
  } else {
    memory = launches;
  }
  for (std::int64_t i = 0; i < compute; ++i) {
    out.push_back(opaque_compute_kernel(prefix + "_compute" + std::to_string(i),
                                        flops / static_cast<double>(compute), ctx));
  }
  for (std::int64_t i = 0; i < memory; ++i) {
    // The remainder of the division goes to the first kernel: the bytes add up exactly.
    const std::int64_t share = bytes / memory + (i == 0 ? bytes % memory : 0);
    out.push_back(memory_bound_kernel(prefix + "_memory" + std::to_string(i), share, ctx));
  }
}

Layer build_layer(const CustomLayerSpec& l, std::string name, std::int64_t input_bytes,
                  const BuildContext& ctx) {
  const std::int64_t batch = ctx.batch;
  const double samples = static_cast<double>(batch);
  Layer layer;
  layer.name = std::move(name);
  layer.kind = l.fsdp_unit ? LayerKind::kBlock : LayerKind::kUnwrapped;
  layer.numel = l.params;
  layer.parameter_tensors = l.parameter_tensors;
  append_kernels(layer.forward, "fwd", l.kernels, l.forward_flops_per_sample * samples,
                 l.memory_bytes_per_sample * batch, ctx);
  append_kernels(layer.backward, "bwd", 2 * l.kernels, l.backward_flops_per_sample * samples,
                 2 * l.memory_bytes_per_sample * batch, ctx);
  layer.saved_activations = Bytes(l.saved_activation_bytes_per_sample * batch);
  layer.saved_activations_checkpointed =
      l.fsdp_unit ? Bytes(input_bytes * batch) : layer.saved_activations;
  add_transient(layer, Pass::kForward, Bytes(l.transient_bytes_per_sample * batch));
  add_transient(layer, Pass::kBackward, Bytes(l.transient_bytes_per_sample * batch));
  return layer;
}

}  // namespace

std::int64_t custom_parameter_count(const TransformerSpec& spec) {
  std::int64_t total = 0;
  for (const CustomLayerSpec& l : spec.custom_layers) total += l.count * l.params;
  return total;
}

Workload build_custom_workload(const TransformerSpec& spec, const WorkloadOptions& options) {
  const BuildContext ctx = make_context(options);
  Workload w;
  std::int64_t input_bytes = 0;  // per sample: the previous layer's output
  for (const CustomLayerSpec& l : spec.custom_layers) {
    for (std::int64_t i = 0; i < l.count; ++i) {
      std::string name = l.count > 1 ? l.name + "." + std::to_string(i) : l.name;
      w.layers.push_back(build_layer(l, std::move(name), input_bytes, ctx));
      input_bytes = l.output_bytes_per_sample;
    }
  }
  for (const Layer& layer : w.layers) w.total_numel += layer.numel;
  return w;
}

}  // namespace fsdpsim::models::detail
