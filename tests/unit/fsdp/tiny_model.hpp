// A tiny hand-checkable workload for schedule tests: round numbers on an idealized GPU where one
// byte of memory traffic takes one picosecond (1 TB/s at 100 % efficiency), collectives run at
// 1 TB/s bus bandwidth with no latency, and launching costs nothing. Every duration below is
// then a plain division the tests do on paper.
#pragma once

#include "hardware/gpu_spec.hpp"
#include "models/workload.hpp"
#include "sim/fsdp/schedule.hpp"

namespace fsdpsim::fsdp::testing {

inline Kernel tiny_kernel(std::int64_t microseconds, double gflops) {
  Kernel k;
  k.kind = KernelKind::kMemoryBound;
  k.bytes = Bytes(microseconds * 1'000'000);
  k.flops = Flops(gflops * 1e9);
  return k;
}

// Layer kernels (memory-bound, bytes = picoseconds): forward "attn" 40 us then "mlp" 60 us
// (1 GFLOP in all), backward 200 us (2 GFLOP). The attention core is the "attn" kernel and
// saves 40 % of the layer's activations.
inline models::Layer tiny_layer(std::string name, models::LayerKind kind, std::int64_t numel,
                                std::int64_t saved_bytes) {
  models::Layer l;
  l.name = std::move(name);
  l.kind = kind;
  l.numel = numel;
  l.parameter_tensors = 1;
  l.forward = {{"attn", tiny_kernel(40, 0.4)}, {"mlp", tiny_kernel(60, 0.6)}};
  l.backward = {{"bwd", tiny_kernel(200, 2.0)}};
  l.saved_activations = Bytes(saved_bytes);
  l.saved_activations_checkpointed = Bytes(saved_bytes / 10);
  l.attention_forward_begin = 0;
  l.attention_forward_end = 1;
  l.attention_core_saved = Bytes(saved_bytes * 4 / 10);
  return l;
}

// Three FSDP units: root (embedding 6M + head 4M params) and two blocks of 10M params.
inline models::Workload tiny_workload() {
  models::Workload w;
  w.layers.push_back(tiny_layer("embedding", models::LayerKind::kEmbedding, 6'000'000, 1'000'000));
  w.layers.push_back(tiny_layer("blocks.0", models::LayerKind::kBlock, 10'000'000, 10'000'000));
  w.layers.push_back(tiny_layer("blocks.1", models::LayerKind::kBlock, 10'000'000, 10'000'000));
  w.layers.push_back(tiny_layer("head", models::LayerKind::kHead, 4'000'000, 20'000'000));
  w.total_numel = 30'000'000;
  return w;
}

// Two GPUs on one node.
inline hardware::ClusterSpec tiny_cluster() {
  hardware::ClusterSpec c;
  c.gpu.name = "ideal";
  c.gpu.peak_dense[static_cast<std::size_t>(Dtype::kFp32)] = tflop_per_s(100.0);
  c.gpu.peak_dense[static_cast<std::size_t>(Dtype::kBf16)] = tflop_per_s(100.0);
  c.gpu.hbm = gib(80.0);
  c.gpu.hbm_bandwidth = gb_per_s(1000.0);
  c.gpu.sm_count = 100;
  c.gpu.gemm_efficiency = 1.0;
  c.gpu.attention_forward_efficiency = 1.0;
  c.gpu.attention_backward_efficiency = 1.0;
  c.gpu.attention_forward_seq_half = 0.0;
  c.gpu.attention_backward_seq_half = 0.0;
  c.gpu.cudnn_attention_forward_speedup = 1.0;
  c.gpu.cudnn_attention_backward_speedup = 1.0;
  c.gpu.memory_efficiency = 1.0;
  c.gpu.multi_tensor_memory_efficiency = 1.0;
  c.nodes = 1;
  c.gpus_per_node = 2;
  c.nvlink_bandwidth = gb_per_s(1000.0);
  c.nic_bandwidth_per_node = gb_per_s(100.0);
  c.pcie_bandwidth = gb_per_s(25.0);
  c.host_memory_bandwidth = gb_per_s(200.0);
  c.nvlink_efficiency = 1.0;
  c.nic_efficiency = 1.0;
  return c;
}

// One FSDP step of the tiny workload on the tiny cluster: fp32 parameters and reductions, one
// micro-batch of 1 sequence of 8 tokens per rank.
inline ScheduleInput tiny_input() {
  static const models::Workload workload = tiny_workload();
  ScheduleInput in;
  in.workload = &workload;
  in.cluster = tiny_cluster();
  in.fsdp.param_dtype = Dtype::kFp32;
  in.fsdp.reduce_dtype = Dtype::kFp32;
  in.training.global_batch = 2;
  in.training.seq_len = 8;
  return in;
}

}  // namespace fsdpsim::fsdp::testing
