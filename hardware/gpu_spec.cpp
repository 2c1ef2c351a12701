// validate(ClusterSpec): the checks a spec passes once, before any cost model reads it.
#include "hardware/gpu_spec.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

namespace fsdpsim::hardware {
namespace {

// Collects "field = value unit (must be ...)" messages, joined by "; ".
// Each check is written so that NaN fails it.
class Problems {
 public:
  template <typename Value>
  void add(std::string_view field, Value value, std::string_view unit, std::string_view rule) {
    if (out_.tellp() > 0) out_ << "; ";
    out_ << field << " = " << value;
    if (!unit.empty()) out_ << ' ' << unit;
    out_ << " (must be " << rule << ")";
  }
  void positive(std::string_view field, std::int64_t value, std::string_view unit = "") {
    if (value <= 0) add(field, value, unit, "> 0");
  }
  void positive(std::string_view field, double value, std::string_view unit) {
    if (!(value > 0.0) || !std::isfinite(value)) add(field, value, unit, "> 0");
  }
  void non_negative(std::string_view field, double value, std::string_view unit) {
    if (!(value >= 0.0) || !std::isfinite(value)) add(field, value, unit, ">= 0");
  }
  void fraction(std::string_view field, double value) {
    if (!(value > 0.0 && value <= 1.0)) add(field, value, "", "in (0, 1]");
  }
  void share(std::string_view field, double value) {
    if (!(value >= 0.0 && value <= 1.0)) add(field, value, "", "in [0, 1]");
  }
  [[nodiscard]] std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

std::string validate(const ClusterSpec& spec) {
  Problems p;
  const GpuSpec& gpu = spec.gpu;

  p.positive("nodes", std::int64_t{spec.nodes});
  p.positive("gpus_per_node", std::int64_t{spec.gpus_per_node});
  const std::int64_t world = std::int64_t{spec.nodes} * std::int64_t{spec.gpus_per_node};
  if (world > kMaxWorldSize) {
    p.add("nodes x gpus_per_node", world, "GPUs", "<= " + std::to_string(kMaxWorldSize));
    return p.str();  // the checks below index ranks
  }
  p.positive("gpu.sm_count", std::int64_t{gpu.sm_count});

  // Every GPU has an fp32 rate; the others may be 0 = unsupported (fp8 on A100).
  p.positive("gpu.peak_dense[fp32]", gpu.peak(Dtype::kFp32).value(), "FLOP/s");
  for (std::size_t i = 1; i < gpu.peak_dense.size(); ++i) {
    std::string field = "gpu.peak_dense[";
    field += dtype_name(static_cast<Dtype>(i));
    field += "]";
    p.non_negative(field, gpu.peak_dense[i].value(), "FLOP/s");
  }

  p.positive("gpu.hbm", gpu.hbm.value(), "B");
  if (gpu.runtime_reserved.value() < 0) {
    p.add("gpu.runtime_reserved", gpu.runtime_reserved.value(), "B", ">= 0");
  } else if (gpu.hbm.value() > 0 && gpu.runtime_reserved >= gpu.hbm) {
    p.add("gpu.runtime_reserved", gpu.runtime_reserved.value(), "B",
          "< gpu.hbm = " + std::to_string(gpu.hbm.value()) + " B");
  }

  p.positive("gpu.hbm_bandwidth", gpu.hbm_bandwidth.value(), "B/s");
  p.positive("nvlink_bandwidth", spec.nvlink_bandwidth.value(), "B/s");
  p.positive("nic_bandwidth_per_node", spec.nic_bandwidth_per_node.value(), "B/s");
  p.positive("pcie_bandwidth", spec.pcie_bandwidth.value(), "B/s");

  p.fraction("gpu.gemm_efficiency", gpu.gemm_efficiency);
  p.fraction("gpu.attention_forward_efficiency", gpu.attention_forward_efficiency);
  p.fraction("gpu.attention_backward_efficiency", gpu.attention_backward_efficiency);
  p.non_negative("gpu.attention_forward_seq_half", gpu.attention_forward_seq_half, "tokens");
  p.non_negative("gpu.attention_backward_seq_half", gpu.attention_backward_seq_half, "tokens");
  p.positive("gpu.cudnn_attention_forward_speedup", gpu.cudnn_attention_forward_speedup, "");
  p.positive("gpu.cudnn_attention_backward_speedup", gpu.cudnn_attention_backward_speedup, "");
  p.share("gpu.attention_softmax_share", gpu.attention_softmax_share);
  p.share("gpu.cudnn_attention_softmax_share", gpu.cudnn_attention_softmax_share);
  p.fraction("gpu.memory_efficiency", gpu.memory_efficiency);
  p.fraction("gpu.multi_tensor_memory_efficiency", gpu.multi_tensor_memory_efficiency);
  const NormEfficiencies& norm = gpu.norm_memory_efficiency;
  p.fraction("gpu.norm_memory_efficiency.layer_norm_forward", norm.layer_norm_forward);
  p.fraction("gpu.norm_memory_efficiency.rms_norm_forward", norm.rms_norm_forward);
  p.fraction("gpu.norm_memory_efficiency.input_grad", norm.input_grad);
  p.fraction("gpu.norm_memory_efficiency.layer_norm_weight_grad", norm.layer_norm_weight_grad);
  p.fraction("gpu.norm_memory_efficiency.rms_norm_weight_grad", norm.rms_norm_weight_grad);
  p.fraction("gpu.sustained_compute_fraction", gpu.sustained_compute_fraction);
  p.fraction("gpu.attention_sustained_fraction", gpu.attention_sustained_fraction);
  p.fraction("nvlink_efficiency", spec.nvlink_efficiency);
  p.fraction("nic_efficiency", spec.nic_efficiency);
  p.share("nvls_all_reduce_efficiency", spec.nvls_all_reduce_efficiency);
  if (!(spec.nic_busbw_loss_per_node_doubling >= 0.0) ||
      !(spec.nic_busbw_loss_per_node_doubling < 1.0)) {
    p.add("nic_busbw_loss_per_node_doubling", spec.nic_busbw_loss_per_node_doubling, "",
          "in [0, 1)");
  } else if (spec.nodes > 2 && spec.nic_busbw_loss_per_node_doubling *
                                       std::log2(static_cast<double>(spec.nodes) / 2.0) >=
                                   1.0) {
    // A ring across all nodes would keep no bandwidth (collective_cost.cpp, scale_out_fraction).
    p.add("nic_busbw_loss_per_node_doubling", spec.nic_busbw_loss_per_node_doubling, "",
          "< 1 / log2(nodes / 2) = " +
              std::to_string(1.0 / std::log2(static_cast<double>(spec.nodes) / 2.0)) + " at " +
              std::to_string(spec.nodes) + " nodes, or the ring keeps no bandwidth");
  }

  p.non_negative("nvlink_hop_latency", spec.nvlink_hop_latency.value(), "s");
  p.non_negative("network_hop_latency", spec.network_hop_latency.value(), "s");
  p.non_negative("collective_base_latency", spec.collective_base_latency.value(), "s");
  p.non_negative("nvls_all_reduce_latency", spec.nvls_all_reduce_latency.value(), "s");
  p.non_negative("kernel_launch_overhead", spec.kernel_launch_overhead.value(), "s");
  p.non_negative("fsdp_hook_overhead", spec.fsdp_hook_overhead.value(), "s");
  p.non_negative("fsdp_parameter_overhead", spec.fsdp_parameter_overhead.value(), "s");
  p.positive("host_memory_bandwidth", spec.host_memory_bandwidth.value(), "B/s");
  const AllocationCosts& calls = spec.allocator_calls;
  p.non_negative("allocator_calls.malloc.fixed", calls.malloc.fixed.value(), "s");
  p.non_negative("allocator_calls.malloc.per_gib", calls.malloc.per_gib.value(), "s");
  p.non_negative("allocator_calls.free.fixed", calls.free.fixed.value(), "s");
  p.non_negative("allocator_calls.free.per_gib", calls.free.per_gib.value(), "s");
  if (spec.nccl_channels < 0 ||
      (spec.gpu.sm_count > 0 && spec.nccl_channels >= spec.gpu.sm_count)) {
    p.add("nccl_channels", spec.nccl_channels, "", "in [0, gpu.sm_count)");
  }
  std::vector<bool> slowed(static_cast<std::size_t>(std::max(spec.world_size(), 0)), false);
  for (const Straggler& s : spec.stragglers) {
    if (s.rank < 0 || s.rank >= spec.world_size() || slowed[static_cast<std::size_t>(s.rank)]) {
      p.add("stragglers.rank", s.rank, "", "a rank of the world, listed once");
      continue;
    }
    slowed[static_cast<std::size_t>(s.rank)] = true;
    p.fraction("stragglers.compute_speed", s.compute_speed);
    p.fraction("stragglers.host_speed", s.host_speed);
  }
  return p.str();
}

}  // namespace fsdpsim::hardware
