// Typed GPU and cluster descriptions. Values come from configs/hardware/*.json via sim/app;
// every preset cites its datasheet there.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/units/dtype.hpp"
#include "sim/units/units.hpp"

namespace fsdpsim::hardware {

class CalibratedCurves;  // hardware/calibrated_curves.hpp

// Shares of hbm_bandwidth that PyTorch's normalization kernels reach, per pass (NormPass in
// sim/units/op_shapes.hpp): one block per row and a reduction per row (forward, input gradient)
// or per column (weight gradient) keep them well below a streaming kernel's rate.
struct NormEfficiencies {
  double layer_norm_forward = 0.0;
  double rms_norm_forward = 0.0;
  double input_grad = 0.0;
  double layer_norm_weight_grad = 0.0;
  double rms_norm_weight_grad = 0.0;
};

struct GpuSpec {
  std::string name;
  // Dense (no 2:4 sparsity) tensor-core peak per dtype, indexed by Dtype; 0 = unsupported.
  std::array<FlopsPerSec, 5> peak_dense{};
  Bytes hbm{0};                    // total device memory (cudaGetDeviceProperties totalGlobalMem)
  Bytes runtime_reserved{0};       // CUDA context + NCCL/cuBLAS buffers outside the allocator
  BytesPerSec hbm_bandwidth{0.0};  // datasheet peak
  std::int32_t sm_count = 0;       // streaming multiprocessors (wave quantization)
  // Fractions of peak that well-tuned kernels reach on large problems. Each preset cites the
  // measurement it comes from; calibration profiles (calibrate/) replace them.
  double gemm_efficiency = 0.0;  // large cuBLAS GEMM / peak_dense
  // cuBLAS splits the reduction of a GEMM whose grid is less than one wave across the SMs
  // (hardware::split_k, gemm_cost.cpp): measured on an H200; each preset says why it is on or off.
  bool gemm_split_k = false;
  // FlashAttention-2 at long sequences, over peak_dense. At s tokens per sequence a pass reaches
  // efficiency * s / (s + seq_half): causal tiles on the diagonal are computed whole but count
  // half, and each row block pays a fixed cost (loading its Q tile, writing O and the
  // log-sum-exp; backward, dO.O and the dQ accumulation) -- both per row, so they weigh as s
  // tokens of work against the s^2 of the matmuls. seq_half is the length at half efficiency.
  double attention_forward_efficiency = 0.0;
  double attention_backward_efficiency = 0.0;
  double attention_forward_seq_half = 0.0;
  double attention_backward_seq_half = 0.0;
  // cuDNN fused attention's speed over FlashAttention-2 on this GPU, per pass (Hopper's cuDNN
  // kernels use wgmma and TMA, which FlashAttention-2 does not).
  double cudnn_attention_forward_speedup = 0.0;
  double cudnn_attention_backward_speedup = 0.0;
  // The rates above are those of head dim 128. Per score element a kernel does matmul work in
  // proportion to its head dim and softmax work (exponentials, row max and sum, rescaling) that
  // does not depend on it: the share of a head-dim-128 kernel's time that is not matmul, for
  // FlashAttention-2 and for cuDNN, sets how much slower per FLOP a smaller head dim runs
  // (kernel_time.cpp; flash-attn 1.x and Triton, unmeasured, get none).
  double attention_softmax_share = 0.0;
  double cudnn_attention_softmax_share = 0.0;
  double memory_efficiency = 0.0;  // streaming kernels / hbm_bandwidth
  // PyTorch's multi_tensor_apply kernels (the foreach and fused optimizers) / hbm_bandwidth: each
  // launch covers at most 320 blocks of 65536 elements (MultiTensorApply.cuh), so a large update
  // is many short launches, each with its ramp and tail, below a streaming kernel's rate.
  double multi_tensor_memory_efficiency = 0.0;
  NormEfficiencies norm_memory_efficiency;
  // Fraction of the micro-benchmark GEMM rates (gemm_efficiency; measured GEMMs of a
  // calibration profile too) that GEMMs sustain inside a training step: SM clocks under the
  // power cap over minutes rather than seconds, real data, L2/HBM traffic of concurrent NCCL
  // kernels. A kernel benchmark sees only the first (a GEMM held at an H200's power limit keeps
  // 0.83 of its short-benchmark rate), so it is the one parameter fitted to measured training
  // runs: once, globally, on part of the data (reports/validation.md).
  double sustained_compute_fraction = 1.0;
  // The same for fused-attention kernels, over the attention rates above: what those rates lose
  // when a kernel runs for minutes at the power limit. Not the GEMMs' value: held at an H200's
  // power limit, its attention kept the rates its preset gives (each preset says where its rates
  // and this fraction come from).
  double attention_sustained_fraction = 1.0;
  // Measured collective curves and GEMM times of this GPU's cluster (a calibration profile,
  // hardware.calibration); collective_time() and kernel_time() consult them before the models.
  // Null: every cost from the models.
  std::shared_ptr<const CalibratedCurves> calibration;

  [[nodiscard]] FlopsPerSec peak(Dtype d) const { return peak_dense[static_cast<std::size_t>(d)]; }
  [[nodiscard]] Bytes usable_memory() const { return hbm - runtime_reserved; }
};

// Host time of one caching-allocator device call (cudaMalloc or cudaFree of a segment, cuMemMap
// or cuMemUnmap of expandable-segment pages) on `bytes`: fixed + per_gib * bytes / GiB.
struct DeviceCallCost {
  Seconds fixed{0.0};
  Seconds per_gib{0.0};
};

// The caching allocator's two device calls: cudaMalloc (cuMemMap) and cudaFree (cuMemUnmap).
struct AllocationCosts {
  DeviceCallCost malloc;
  DeviceCallCost free;
};

// A rank slower than the rest (a power-capped or faulty GPU, a busy host): its compute kernels
// run at compute_speed of the preset's rate, its CPU (launches, Python hooks) at host_speed.
struct Straggler {
  std::int32_t rank = 0;
  double compute_speed = 1.0;
  double host_speed = 1.0;
};

// The most GPUs a cluster may have: 1,048,576, several times the largest training clusters
// built, and far below where nodes x gpus_per_node would overflow 32 bits. The simulation
// groups identical ranks, so its cost does not grow with the count (README, size bounds).
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 20;

struct ClusterSpec {
  GpuSpec gpu;
  std::int32_t nodes = 1;
  std::int32_t gpus_per_node = 8;
  BytesPerSec nvlink_bandwidth{0.0};  // per GPU, one direction (A100: 300 GB/s, H100: 450 GB/s)
  BytesPerSec nic_bandwidth_per_node{0.0};  // all NICs of a node together, one direction
  BytesPerSec pcie_bandwidth{0.0};          // host <-> device per GPU, one direction
  double nvlink_efficiency = 0.0;           // achievable ring busbw / nvlink_bandwidth
  // NCCL's NVLS all-reduce inside one node (NVLink SHARP: the NVSwitch reduces and multicasts;
  // collective_cost.cpp): achieved algbw / nvlink_bandwidth, 0 where the switch cannot (A100),
  // and its fixed cost.
  double nvls_all_reduce_efficiency = 0.0;
  Seconds nvls_all_reduce_latency{0.0};
  double nic_efficiency = 0.0;  // achievable busbw / nic_bandwidth_per_node, 2 nodes
  // Fraction of the two-node NIC busbw a ring loses each time its node count doubles
  // (collective_cost.cpp, ring_bus_bandwidth).
  double nic_busbw_loss_per_node_doubling = 0.0;
  Seconds nvlink_hop_latency{0.0};       // per ring step inside a node
  Seconds network_hop_latency{0.0};      // per ring step across nodes
  Seconds collective_base_latency{0.0};  // fixed cost of one NCCL collective launch
  Seconds kernel_launch_overhead{0.0};   // CPU time to issue one eager PyTorch op
  // Thread blocks an NCCL collective keeps resident (one per channel, "N coll channels" in
  // NCCL_DEBUG=INFO logs). Compute kernels overlapping a collective get the other SMs.
  std::int32_t nccl_channels = 0;
  // Host side of the training process (Python, the CPU optimizer of CPU offload).
  Seconds fsdp_hook_overhead{0.0};         // CPU time of one FSDP hook call, fixed part
  Seconds fsdp_parameter_overhead{0.0};    // CPU time per nn.Parameter per unshard or reshard
  BytesPerSec host_memory_bandwidth{0.0};  // achievable DRAM bandwidth of a node, all sockets
  AllocationCosts allocator_calls;         // cudaMalloc / cudaFree of a segment
  // Ranks unlike the others (one entry per rank, ranks below world_size()); empty: all alike, and
  // one rank stands for every rank.
  std::vector<Straggler> stragglers;

  [[nodiscard]] std::int32_t world_size() const { return nodes * gpus_per_node; }
};

// Returns empty when consistent, else what is wrong (positivity, efficiencies in (0, 1]).
std::string validate(const ClusterSpec& spec);

}  // namespace fsdpsim::hardware
