// A tiny hand-checkable workload for schedule tests: round numbers on an idealized GPU where one
// byte of memory traffic takes one picosecond (1 TB/s at 100 % efficiency), collectives run at
// 1 TB/s bus bandwidth with no latency, and launching costs nothing. Every duration below is
// then a plain division the tests do on paper.
#pragma once

#include <string>
#include <utility>

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

// A linear's forward GEMM (a memory-bound kernel of `microseconds` on the ideal GPU, 0.1 GFLOP)
// with the GEMM shape of nn.Linear(in, out) over 8 tokens: its weight is out x in, its output
// 8 x out in bf16.
inline models::NamedKernel tiny_linear(std::string name, std::int64_t out, std::int64_t in,
                                       std::int64_t microseconds) {
  models::NamedKernel k{name, tiny_kernel(microseconds, 0.1)};
  k.kernel.gemm = GemmShape{8, out, in, 1};
  k.linear = models::LinearPass::kForward;
  k.output_bytes = 8 * out * 2;
  k.linear_module = std::move(name);
  return k;
}

// A 20 us gradient GEMM of `linear`: <linear>_dgrad or <linear>_wgrad.
inline models::NamedKernel tiny_linear_grad(const std::string& linear, models::LinearPass pass) {
  const char* suffix = pass == models::LinearPass::kInputGrad ? "_dgrad" : "_wgrad";
  models::NamedKernel k{linear + suffix, tiny_kernel(20, 0.1)};
  k.linear = pass;
  k.linear_module = linear;
  return k;
}

// A block with a 1000-element norm and two bias-free linears, "up" 1000 x 500 and "down"
// 500 x 1000 (500k elements each): forward norm 10 us, up 40 us, down 40 us; backward
// down_dgrad, down_wgrad, up_dgrad, up_wgrad 20 us each, then norm_bwd 10 us.
inline models::Layer tiny_linear_block(std::string name) {
  models::Layer l;
  l.name = std::move(name);
  l.kind = models::LayerKind::kBlock;
  l.numel = 1'001'000;
  l.parameter_tensors = 3;
  l.forward = {{"norm", tiny_kernel(10, 0.0)},
               tiny_linear("up", 1000, 500, 40),
               tiny_linear("down", 500, 1000, 40)};
  l.backward = {tiny_linear_grad("down", models::LinearPass::kInputGrad),
                tiny_linear_grad("down", models::LinearPass::kWeightGrad),
                tiny_linear_grad("up", models::LinearPass::kInputGrad),
                tiny_linear_grad("up", models::LinearPass::kWeightGrad),
                {"norm_bwd", tiny_kernel(10, 0.0)}};
  l.saved_activations = Bytes(1'000'000);
  l.saved_activations_checkpointed = Bytes(100'000);
  return l;
}

// An embedding of one `numel`-element table: lookup 10 us, backward 20 us.
inline models::Layer tiny_embedding(std::int64_t numel) {
  models::Layer embedding;
  embedding.name = "embedding";
  embedding.kind = models::LayerKind::kEmbedding;
  embedding.numel = numel;
  embedding.parameter_tensors = 1;
  embedding.forward = {{"lookup", tiny_kernel(10, 0.0)}};
  embedding.backward = {{"lookup_bwd", tiny_kernel(20, 0.0)}};
  return embedding;
}

// embedding (tiny_embedding of 400k elements), blocks.0 and blocks.1 (tiny_linear_block), head
// (a 400 x 500 "proj" linear, 200k elements: 10 us, backward 20 us).
inline models::Workload tiny_linear_workload() {
  models::Workload w;
  w.layers.push_back(tiny_embedding(400'000));
  w.layers.push_back(tiny_linear_block("blocks.0"));
  w.layers.push_back(tiny_linear_block("blocks.1"));
  models::Layer head;
  head.name = "head";
  head.kind = models::LayerKind::kHead;
  head.numel = 200'000;
  head.parameter_tensors = 1;
  head.forward = {tiny_linear("proj", 400, 500, 10)};
  head.backward = {tiny_linear_grad("proj", models::LinearPass::kInputGrad)};
  w.layers.push_back(head);
  w.total_numel = 2'602'000;
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
