#include "sim/app/hardware_json.hpp"

#include <fmt/format.h>

#include <array>
#include <string>

#include "hardware/rank_pacing.hpp"
#include "sim/app/calibration_json.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/size_bounds.hpp"

namespace fsdpsim::app {
namespace {

// Plausibility bounds of a preset's numbers, far beyond any device (an HBM or link of an EB/s, a
// 10^9 TFLOP/s GPU, a kernel launch of a day) and near enough that every time and rate derived
// from them stays finite: a 1e308 would turn into an infinite bandwidth.
constexpr double kMaxRate = 1e9;              // GB/s, Gbit/s or TFLOP/s
constexpr double kMaxMicroseconds = 8.64e10;  // a day
constexpr double kMaxSequenceHalf = 1e9;      // tokens
constexpr double kMaxSpeedup = 1e3;           // cuDNN over FlashAttention
// Streaming multiprocessors: H100 SXM has 132, B200 148 per die; an SM count far past any GPU
// only slows the model's per-SM arithmetic.
constexpr std::int64_t kMaxSms = 4096;

void parse_gpu(const nlohmann::json& value, const std::string& file, const std::string& path,
               hardware::GpuSpec& gpu) {
  JsonObjectReader r(value, file, path);
  const nlohmann::json* peaks = r.child("peak_dense_tflops");
  if (peaks == nullptr)
    throw ConfigError(file, path + "/peak_dense_tflops", "required key is missing");
  JsonObjectReader p(*peaks, file, path + "/peak_dense_tflops");
  for (const Dtype d : {Dtype::kFp32, Dtype::kTf32, Dtype::kBf16, Dtype::kFp16, Dtype::kFp8}) {
    const std::string key(dtype_name(d));
    // Every GPU has an fp32 rate; the others may be 0 = unsupported (fp8 on A100).
    gpu.peak_dense[static_cast<std::size_t>(d)] =
        tflop_per_s(d == Dtype::kFp32 ? p.positive_number_at_most(key, kMaxRate)
                                      : p.non_negative_number_at_most(key, kMaxRate));
  }
  p.finish();
  // A narrower type's tensor cores are never slower than a wider one's (datasheets: A100 19.5 /
  // 156 / 312 / 312, H100 67 / 494.5 / 989 / 989 / 1979), and MFU divides by the rate of the
  // type the GEMMs run in, so a narrower peak below a wider one would put it above 100 %. Every
  // pair of given (non-zero) peaks is compared, whatever is missing between them.
  // Ranks from widest to narrowest; each narrower peak is checked against the nearest wider
  // ones first, so the message names the bound it breaks most directly.
  const auto rank = [](Dtype d) {
    return d == Dtype::kFp32 ? 0 : d == Dtype::kTf32 ? 1 : d == Dtype::kFp8 ? 3 : 2;
  };
  const Dtype narrowest_first[] = {Dtype::kFp8, Dtype::kBf16, Dtype::kFp16, Dtype::kTf32,
                                   Dtype::kFp32};
  for (const Dtype narrow : narrowest_first) {
    for (const Dtype wide : narrowest_first) {
      const double narrow_peak = gpu.peak(narrow).value();
      const double wide_peak = gpu.peak(wide).value();
      if (rank(wide) >= rank(narrow) || narrow_peak <= 0.0 || narrow_peak >= wide_peak) continue;
      throw ConfigError(file, path + "/peak_dense_tflops/" + std::string(dtype_name(narrow)),
                        fmt::format("expected 0 (none) or at least the {} peak ({}/"
                                    "peak_dense_tflops/{}: {} TFLOP/s): a narrower type is "
                                    "never slower, found {}",
                                    dtype_name(wide), path, dtype_name(wide), wide_peak / 1e12,
                                    narrow_peak / 1e12));
    }
  }
  gpu.hbm = Bytes(r.positive_int_at_most("hbm_bytes", size_bounds::kMemoryBytes));
  gpu.runtime_reserved = gib(r.non_negative_number_at_most(
      "runtime_reserved_GiB", static_cast<double>(size_bounds::kMemoryGiB)));
  gpu.hbm_bandwidth = gb_per_s(r.positive_number_at_most("hbm_bandwidth_GBps", kMaxRate));
  gpu.sm_count = static_cast<std::int32_t>(r.positive_int_at_most("sm_count", kMaxSms));
  gpu.gemm_efficiency = r.fraction("gemm_efficiency");
  gpu.gemm_split_k = r.boolean("gemm_split_k");
  gpu.attention_forward_efficiency = r.fraction("attention_forward_efficiency");
  gpu.attention_backward_efficiency = r.fraction("attention_backward_efficiency");
  gpu.attention_forward_seq_half =
      r.non_negative_number_at_most("attention_forward_seq_half", kMaxSequenceHalf);
  gpu.attention_backward_seq_half =
      r.non_negative_number_at_most("attention_backward_seq_half", kMaxSequenceHalf);
  gpu.cudnn_attention_forward_speedup =
      r.positive_number_at_most("cudnn_attention_forward_speedup", kMaxSpeedup);
  gpu.cudnn_attention_backward_speedup =
      r.positive_number_at_most("cudnn_attention_backward_speedup", kMaxSpeedup);
  gpu.attention_softmax_share = r.non_negative_number_at_most("attention_softmax_share", 1.0);
  gpu.cudnn_attention_softmax_share =
      r.non_negative_number_at_most("cudnn_attention_softmax_share", 1.0);
  gpu.memory_efficiency = r.fraction("memory_efficiency");
  gpu.multi_tensor_memory_efficiency = r.fraction("multi_tensor_memory_efficiency");
  const nlohmann::json* norms = r.child("norm_memory_efficiency");
  if (norms == nullptr)
    throw ConfigError(file, path + "/norm_memory_efficiency", "required key is missing");
  JsonObjectReader n(*norms, file, path + "/norm_memory_efficiency");
  hardware::NormEfficiencies& norm = gpu.norm_memory_efficiency;
  norm.layer_norm_forward = n.fraction("layer_norm_forward");
  norm.rms_norm_forward = n.fraction("rms_norm_forward");
  norm.input_grad = n.fraction("input_grad");
  norm.layer_norm_weight_grad = n.fraction("layer_norm_weight_grad");
  norm.rms_norm_weight_grad = n.fraction("rms_norm_weight_grad");
  n.finish();
  gpu.sustained_compute_fraction = r.fraction("sustained_compute_fraction");
  gpu.attention_sustained_fraction = r.fraction("attention_sustained_fraction");
  r.finish();
}

void parse_node(const nlohmann::json& value, const std::string& file, const std::string& path,
                hardware::ClusterSpec& c) {
  JsonObjectReader r(value, file, path);
  c.gpus_per_node = r.positive_int32("gpus_per_node");
  c.nvlink_bandwidth = gb_per_s(r.positive_number_at_most("nvlink_GBps", kMaxRate));
  c.nic_bandwidth_per_node = gbit_per_s(r.positive_number_at_most("nic_Gbps_per_node", kMaxRate));
  c.pcie_bandwidth = gb_per_s(r.positive_number_at_most("pcie_GBps", kMaxRate));
  c.nvlink_efficiency = r.fraction("nvlink_efficiency");
  c.nic_efficiency = r.fraction("nic_efficiency");
  // 0: the node's NVSwitch has no NVLink SHARP, and NCCL runs no NVLS (collective_cost.cpp).
  c.nvls_all_reduce_efficiency = r.non_negative_number_at_most("nvls_all_reduce_efficiency", 1.0);
  c.nvls_all_reduce_latency =
      microseconds(r.non_negative_number_at_most("nvls_all_reduce_latency_us", kMaxMicroseconds));
  c.nic_busbw_loss_per_node_doubling = r.non_negative_number("nic_busbw_loss_per_node_doubling");
  // A share of the two-node bandwidth lost per doubling of the nodes (collective_cost.cpp).
  if (c.nic_busbw_loss_per_node_doubling >= 1.0) {
    throw ConfigError(file, path + "/nic_busbw_loss_per_node_doubling",
                      fmt::format("expected a share of the bandwidth in [0, 1), found {}",
                                  c.nic_busbw_loss_per_node_doubling));
  }
  c.nvlink_hop_latency =
      microseconds(r.non_negative_number_at_most("nvlink_hop_latency_us", kMaxMicroseconds));
  c.network_hop_latency =
      microseconds(r.non_negative_number_at_most("network_hop_latency_us", kMaxMicroseconds));
  c.collective_base_latency =
      microseconds(r.non_negative_number_at_most("collective_base_latency_us", kMaxMicroseconds));
  c.kernel_launch_overhead =
      microseconds(r.non_negative_number_at_most("kernel_launch_overhead_us", kMaxMicroseconds));
  c.nccl_channels = r.non_negative_int32("nccl_channels");
  c.fsdp_hook_overhead =
      microseconds(r.non_negative_number_at_most("fsdp_hook_overhead_us", kMaxMicroseconds));
  c.fsdp_parameter_overhead =
      microseconds(r.non_negative_number_at_most("fsdp_parameter_overhead_us", kMaxMicroseconds));
  c.host_memory_bandwidth = gb_per_s(r.positive_number_at_most("host_memory_GBps", kMaxRate));
  // The fixed part of both device calls; each grows with the segment's size at its own rate.
  const Seconds device_call =
      microseconds(r.non_negative_number_at_most("cuda_malloc_us", kMaxMicroseconds));
  c.allocator_calls.malloc = {device_call, microseconds(r.non_negative_number_at_most(
                                               "cuda_malloc_us_per_GiB", kMaxMicroseconds))};
  c.allocator_calls.free = {device_call, microseconds(r.non_negative_number_at_most(
                                             "cuda_free_us_per_GiB", kMaxMicroseconds))};
  r.finish();
}

// The members of one "ranks" or "nodes" list, each below `count`.
std::vector<std::int32_t> indices(const nlohmann::json& list, const std::string& file,
                                  const std::string& path, std::int32_t count, const char* what) {
  if (!list.is_array() || list.empty()) {
    throw ConfigError(file, path,
                      fmt::format("expected a non-empty array of {} numbers, found {}", what,
                                  describe_json_type(list)));
  }
  std::vector<std::int32_t> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& v = list[i];
    const std::optional<std::int64_t> n = whole_number(v);
    if (!n || *n < 0 || *n >= count) {
      throw ConfigError(file, fmt::format("{}/{}", path, i),
                        fmt::format("expected a {} number in [0, {}), found {}", what, count,
                                    describe_json_type(v)));
    }
    out.push_back(static_cast<std::int32_t>(*n));
  }
  return out;
}

// hardware.stragglers: ranks (or every rank of some nodes) slower than the preset.
std::vector<hardware::Straggler> parse_stragglers(const nlohmann::json& value,
                                                  const std::string& file, const std::string& path,
                                                  const hardware::ClusterSpec& c) {
  if (!value.is_array()) {
    throw ConfigError(file, path,
                      fmt::format("expected an array of {{\"ranks\" or \"nodes\", "
                                  "\"compute_speed\", \"host_speed\"}} objects, found {}",
                                  describe_json_type(value)));
  }
  std::vector<hardware::Straggler> out;
  std::vector<bool> listed(static_cast<std::size_t>(c.world_size()), false);
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string at = fmt::format("{}/{}", path, i);
    JsonObjectReader e(value[i], file, at);
    const auto speed = [&](const std::string& key) {
      if (!e.has(key)) return 1.0;  // has() records the key as one of the object's
      const nlohmann::json& v = *e.child(key);
      if (!v.is_number() ||
          !(v.get<double>() >= hardware::kSlowestRankSpeed && v.get<double>() <= 1.0)) {
        throw ConfigError(file, e.path_of(key),
                          fmt::format("expected a number in [{}, 1], found {}",
                                      hardware::kSlowestRankSpeed, describe_json_type(v)));
      }
      return v.get<double>();
    };
    hardware::Straggler s;
    const bool slowed = e.has("compute_speed") || e.has("host_speed");
    s.compute_speed = speed("compute_speed");
    s.host_speed = speed("host_speed");
    const nlohmann::json* ranks = e.child("ranks");
    const nlohmann::json* nodes = e.child("nodes");
    e.finish();
    if (!slowed) {
      throw ConfigError(file, at, "expected compute_speed or host_speed (or both), found neither");
    }
    if ((ranks == nullptr) == (nodes == nullptr)) {
      throw ConfigError(file, at, "expected exactly one of ranks and nodes");
    }
    std::vector<std::int32_t> members;
    if (ranks != nullptr) {
      members = indices(*ranks, file, e.path_of("ranks"), c.world_size(), "rank");
    } else {
      for (const std::int32_t node : indices(*nodes, file, e.path_of("nodes"), c.nodes, "node")) {
        for (std::int32_t g = 0; g < c.gpus_per_node; ++g)
          members.push_back(node * c.gpus_per_node + g);
      }
    }
    for (const std::int32_t rank : members) {
      if (listed[static_cast<std::size_t>(rank)]) {
        throw ConfigError(file, at, fmt::format("rank {} is listed by an earlier straggler", rank));
      }
      listed[static_cast<std::size_t>(rank)] = true;
      s.rank = rank;
      out.push_back(s);
    }
  }
  return out;
}

// What a complete hardware description is: a preset file, or a scenario's hardware section (a
// preset merged with overrides, or one written in full), whose keys `nodes`, `preset`,
// `calibration` and `node_speed_spread` say how the job uses the hardware, not what it is.
enum class HardwareDescription { kPresetFile, kScenarioSection };
constexpr std::array<const char*, 4> kScenarioHardwareKeys = {"nodes", "preset", "calibration",
                                                              "node_speed_spread"};

hardware::ClusterSpec parse_cluster(const nlohmann::json& value, const std::string& file,
                                    const std::string& path, std::int64_t nodes,
                                    HardwareDescription what) {
  JsonObjectReader r(value, file, path);
  r.schema_version(kHardwarePresetSchemaVersion, /*required=*/false);
  r.ignore("sources");                // an object documenting each key
  (void)r.string("description", "");  // for the reader, as a scenario's is: text
  hardware::ClusterSpec c;
  c.gpu.name = r.name("name", "custom");
  parse_gpu(r.require("gpu"), file, path + "/gpu", c.gpu);
  parse_node(r.require("node"), file, path + "/node", c);
  c.nodes = static_cast<std::int32_t>(nodes);
  if (nodes * c.gpus_per_node > hardware::kMaxWorldSize) {
    throw ConfigError(
        file, path + "/nodes",
        fmt::format("nodes {} x gpus_per_node {} = {} GPUs; at most {} are modelled", nodes,
                    c.gpus_per_node, nodes * c.gpus_per_node, hardware::kMaxWorldSize));
  }
  if (const nlohmann::json* stragglers = r.child("stragglers"))
    c.stragglers = parse_stragglers(*stragglers, file, r.path_of("stragglers"), c);
  if (what == HardwareDescription::kScenarioSection) {
    r.finish({kScenarioHardwareKeys.begin(), kScenarioHardwareKeys.end()});
  } else {
    r.finish();
  }
  // Bounds between keys, at the key that breaks them, with the other key's path and value.
  if (c.gpu.runtime_reserved >= c.gpu.hbm) {
    throw ConfigError(file, path + "/gpu/runtime_reserved_GiB",
                      fmt::format("expected less than the device's memory ({}/gpu/hbm_bytes: {} "
                                  "B), found {} GiB",
                                  path, c.gpu.hbm.value(), to_gib(c.gpu.runtime_reserved)));
  }
  if (c.nccl_channels >= c.gpu.sm_count) {
    throw ConfigError(file, path + "/node/nccl_channels",
                      fmt::format("expected fewer than the GPU's SMs ({}/gpu/sm_count: {}), the "
                                  "channels' kernels run on SMs of their own, found {}",
                                  path, c.gpu.sm_count, c.nccl_channels));
  }
  if (const std::string problem = hardware::validate(c); !problem.empty())
    throw ConfigError(file, path, problem);
  return c;
}

// RFC 7386 merge of overrides into a preset, but objects only one level deep ("gpu", "node").
void merge_overrides(nlohmann::json& preset, const nlohmann::json& overrides) {
  for (const auto& [key, v] : overrides.items()) {
    if (key == "preset" || key == "nodes" || key == "calibration" || key == "node_speed_spread")
      continue;
    if (v.is_object() && preset.contains(key) && preset[key].is_object()) {
      for (const auto& [inner, w] : v.items()) {
        if (w.is_object() && preset[key].contains(inner) && preset[key][inner].is_object()) {
          preset[key][inner].update(w);
        } else {
          preset[key][inner] = w;
        }
      }
    } else {
      preset[key] = v;
    }
  }
}

}  // namespace

HardwareConfig hardware_from_json(const nlohmann::json& value, const std::filesystem::path& file,
                                  const std::string& path, const PresetLocator& presets) {
  JsonObjectReader r(value, file.string(), path);
  const std::int64_t nodes = r.positive_int32("nodes", 1);
  HardwareConfig out;
  if (r.has("preset")) {
    out.preset = r.string("preset");
    const auto preset_file = presets.resolve("hardware", out.preset, file, path + "/preset");
    // The preset alone must be valid (on one node: the scenario's node count is the scenario's
    // to answer for, checked with the merged spec).
    nlohmann::json merged = parse_preset(
        "hardware", file, path + "/preset", presets.unknown_key_hint(preset_file), [&] {
          nlohmann::json preset = read_json_file(preset_file);
          // Keys of the scenario's section, not of the hardware: said as such, not as unknown.
          for (const char* key : kScenarioHardwareKeys) {
            if (!preset.is_object() || !preset.contains(key)) continue;
            throw ConfigError(preset_file.string(), fmt::format("/{}", key),
                              fmt::format("not a key of a hardware preset: {} belongs to the "
                                          "scenario's hardware section (hardware.{})",
                                          key, key));
          }
          parse_cluster(preset, preset_file.string(), "", 1, HardwareDescription::kPresetFile);
          return preset;
        });
    merge_overrides(merged, value);
    out.cluster =
        parse_cluster(merged, file.string(), path, nodes, HardwareDescription::kScenarioSection);
  } else {
    // Without a preset the description must be complete: say both ways, not only "gpu".
    if (!r.has("gpu")) {
      throw ConfigError(file.string(), path + "/preset",
                        "required key is missing: expected \"preset\" (a hardware preset such as "
                        "h100-sxm-80gb) or a complete description with \"gpu\" and \"node\"");
    }
    out.cluster =
        parse_cluster(value, file.string(), path, nodes, HardwareDescription::kScenarioSection);
  }
  // Measured curves in front of the cost models (calibration_json.hpp), resolved like presets.
  if (r.has("calibration")) {
    out.cluster.gpu.calibration = load_calibration(r.string("calibration"), file,
                                                   path + "/calibration", presets, &out.cluster);
    const hardware::CalibratedCurves& curves = *out.cluster.gpu.calibration;
    // The measured rank speeds make the job's slowest GPU and host stragglers, unless the scenario
    // lists its own (an empty list: none).
    if (!r.has("stragglers") && out.cluster.stragglers.empty()) {
      out.cluster.stragglers = hardware::rank_pacing(curves, out.cluster.world_size()).stragglers;
    }
    // What rank 0 kept of its short GEMM rate under load replaces the preset's
    // sustained_compute_fraction (the share the published runs fit), unless the scenario sets
    // its own: the profile's GEMMs are rank 0's short timings, and kernel_time() divides them by
    // it. Above 1 it is timer noise, a GPU that keeps its clock.
    const nlohmann::json* gpu = r.child("gpu");
    if (const auto measured = curves.sustained_gemm_fraction();
        measured &&
        (gpu == nullptr || !gpu->is_object() || !gpu->contains("sustained_compute_fraction"))) {
      out.cluster.gpu.sustained_compute_fraction = std::min(1.0, *measured);
    }
  }
  // A what-if: nodes whose GPU speeds spread normally; the job runs at its slowest's expected
  // pace (hardware/rank_pacing.hpp). Slow ranks come from one description only.
  if (r.has("node_speed_spread")) {
    constexpr double kMaxSpread = 0.2;  // a fifth of the mean: past any cluster Sinha et al. saw
    const double spread = r.non_negative_number_at_most("node_speed_spread", kMaxSpread);
    const bool measured = out.cluster.gpu.calibration != nullptr &&
                          !out.cluster.gpu.calibration->gpu_speeds().empty();
    if (measured || r.has("stragglers") || !out.cluster.stragglers.empty()) {
      throw ConfigError(file.string(), r.path_of("node_speed_spread"),
                        measured ? "expected no node_speed_spread where the calibration measured "
                                   "the rank speeds (they say how the nodes differ), found one"
                        : out.cluster.stragglers.empty()
                            ? "expected node_speed_spread or stragglers, found both: an empty "
                              "stragglers list says no rank is slow, where the spread slows "
                              "the slowest node; leave the list out to apply the spread"
                            : "expected node_speed_spread or stragglers, found both (each "
                              "says which ranks are slow)");
    }
    out.cluster.stragglers =
        hardware::node_spread_stragglers(spread, out.cluster.nodes, out.cluster.gpus_per_node);
  }
  return out;
}

}  // namespace fsdpsim::app
