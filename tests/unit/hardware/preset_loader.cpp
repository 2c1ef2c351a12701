#include "preset_loader.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace fsdpsim::hardware::testing {
namespace {

using nlohmann::json;

// Requires `object` at `path` to have exactly `keys`.
void expect_keys(const std::filesystem::path& file, const std::string& path, const json& object,
                 const std::set<std::string>& keys) {
  if (!object.is_object()) {
    throw std::runtime_error(file.string() + ": " + path + " must be an object");
  }
  for (const auto& [key, value] : object.items()) {
    if (!keys.contains(key)) {
      throw std::runtime_error(file.string() + ": unknown key " + path + "/" + key);
    }
  }
  for (const std::string& key : keys) {
    if (!object.contains(key)) {
      throw std::runtime_error(file.string() + ": missing key " + path + "/" + key);
    }
  }
}

}  // namespace

ClusterSpec load_preset_file(const std::filesystem::path& path, std::int32_t nodes) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  const json doc = json::parse(in);

  expect_keys(path, "", doc, {"schema_version", "name", "gpu", "node", "sources"});
  if (doc.at("schema_version").get<int>() != 1) {
    throw std::runtime_error(path.string() + ": /schema_version must be 1");
  }
  const json& g = doc.at("gpu");
  expect_keys(path, "/gpu", g,
              {"peak_dense_tflops", "hbm_bytes", "runtime_reserved_GiB", "hbm_bandwidth_GBps",
               "sm_count", "gemm_efficiency", "attention_forward_efficiency",
               "attention_backward_efficiency", "memory_efficiency"});
  const json& peaks = g.at("peak_dense_tflops");
  expect_keys(path, "/gpu/peak_dense_tflops", peaks, {"fp32", "tf32", "bf16", "fp16", "fp8"});
  const json& n = doc.at("node");
  expect_keys(
      path, "/node", n,
      {"gpus_per_node", "nvlink_GBps", "nic_Gbps_per_node", "pcie_GBps", "nvlink_efficiency",
       "nic_efficiency", "nvlink_hop_latency_us", "network_hop_latency_us",
       "collective_base_latency_us", "kernel_launch_overhead_us"});
  if (!doc.at("sources").is_object()) {
    throw std::runtime_error(path.string() + ": /sources must be an object");
  }

  ClusterSpec spec;
  GpuSpec& gpu = spec.gpu;
  gpu.name = doc.at("name").get<std::string>();
  for (std::size_t i = 0; i < gpu.peak_dense.size(); ++i) {
    const std::string key(dtype_name(static_cast<Dtype>(i)));
    gpu.peak_dense[i] = tflop_per_s(peaks.at(key).get<double>());
  }
  gpu.hbm = Bytes(g.at("hbm_bytes").get<std::int64_t>());
  gpu.runtime_reserved = gib(g.at("runtime_reserved_GiB").get<double>());
  gpu.hbm_bandwidth = gb_per_s(g.at("hbm_bandwidth_GBps").get<double>());
  gpu.sm_count = g.at("sm_count").get<std::int32_t>();
  gpu.gemm_efficiency = g.at("gemm_efficiency").get<double>();
  gpu.attention_forward_efficiency = g.at("attention_forward_efficiency").get<double>();
  gpu.attention_backward_efficiency = g.at("attention_backward_efficiency").get<double>();
  gpu.memory_efficiency = g.at("memory_efficiency").get<double>();

  spec.nodes = nodes;
  spec.gpus_per_node = n.at("gpus_per_node").get<std::int32_t>();
  spec.nvlink_bandwidth = gb_per_s(n.at("nvlink_GBps").get<double>());
  spec.nic_bandwidth_per_node = gbit_per_s(n.at("nic_Gbps_per_node").get<double>());
  spec.pcie_bandwidth = gb_per_s(n.at("pcie_GBps").get<double>());
  spec.nvlink_efficiency = n.at("nvlink_efficiency").get<double>();
  spec.nic_efficiency = n.at("nic_efficiency").get<double>();
  spec.nvlink_hop_latency = microseconds(n.at("nvlink_hop_latency_us").get<double>());
  spec.network_hop_latency = microseconds(n.at("network_hop_latency_us").get<double>());
  spec.collective_base_latency = microseconds(n.at("collective_base_latency_us").get<double>());
  spec.kernel_launch_overhead = microseconds(n.at("kernel_launch_overhead_us").get<double>());
  return spec;
}

ClusterSpec load_preset(const std::string& name, std::int32_t nodes) {
  return load_preset_file(
      std::filesystem::path(FSDPSIM_CONFIGS_DIR) / "hardware" / (name + ".json"), nodes);
}

std::vector<std::filesystem::path> preset_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(FSDPSIM_CONFIGS_DIR) / "hardware")) {
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace fsdpsim::hardware::testing
