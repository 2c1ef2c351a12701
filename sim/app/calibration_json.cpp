#include "sim/app/calibration_json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "calibrate/profile.hpp"
#include "hardware/collective_cost.hpp"
#include "hardware/rank_pacing.hpp"
#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/app/significant_digits.hpp"

namespace fsdpsim::app {
namespace {

using calibrate::CalibrationProfile;
using calibrate::CollectivePoint;
using calibrate::CollectiveSeries;
using calibrate::GemmPoint;

const std::vector<std::string> kCollectives{"all_gather", "reduce_scatter", "all_reduce"};

const nlohmann::json* array_child(JsonObjectReader& r, const std::string& key) {
  const nlohmann::json* v = r.child(key);
  if (v != nullptr && !v->is_array()) {
    throw ConfigError(r.file(), r.path_of(key),
                      fmt::format("expected an array, found {}", describe_json_type(*v)));
  }
  return v;
}

std::vector<std::string> string_array(JsonObjectReader& r, const std::string& key) {
  std::vector<std::string> out;
  const nlohmann::json* v = array_child(r, key);
  if (v == nullptr) return out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& item = (*v)[i];
    if (!item.is_string()) {
      throw ConfigError(r.file(), fmt::format("{}/{}", r.path_of(key), i),
                        fmt::format("expected a string, found {}", describe_json_type(item)));
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

Dtype dtype_at(JsonObjectReader& r, const std::string& key) {
  const std::string name = r.string(key);
  const auto d = parse_dtype(name);
  if (!d) {
    throw ConfigError(
        r.file(), r.path_of(key),
        fmt::format("expected one of fp32, tf32, bf16, fp16, fp8, found \"{}\"", name));
  }
  return *d;
}

// A measured time in microseconds, within the plausibility bounds (calibrate/profile.hpp).
Seconds measured_us(JsonObjectReader& r, const std::string& key) {
  const double us = r.positive_number(key);
  if (us < calibrate::kMinMeasuredUs || us > calibrate::kMaxMeasuredUs) {
    throw ConfigError(r.file(), r.path_of(key),
                      fmt::format("expected a time of {:g} us (1 ns) to {:g} us (a day), found "
                                  "{:.6g}",
                                  calibrate::kMinMeasuredUs, calibrate::kMaxMeasuredUs, us));
  }
  return microseconds(us);
}

std::optional<Seconds> optional_us(JsonObjectReader& r, const std::string& key) {
  if (!r.has(key)) return std::nullopt;
  return measured_us(r, key);
}

// min <= median <= max when given (a spread that excludes its own median is a broken file); the
// keys are time_us, min_us and max_us unless `keys` names others.
struct SpreadKeys {
  const char* median = "time_us";
  const char* min = "min_us";
  const char* max = "max_us";
};
void check_spread(const JsonObjectReader& r, Seconds median, const std::optional<Seconds>& lo,
                  const std::optional<Seconds>& hi, const SpreadKeys& keys = {}) {
  constexpr double kSlack = 1e-9;  // rounding of printed microseconds
  if (lo && lo->value() > median.value() * (1.0 + kSlack) + 1e-15) {
    throw ConfigError(r.file(), r.path_of(keys.min),
                      fmt::format("expected at most {} = {:.6g}, found {:.6g}", keys.median,
                                  median.value() * 1e6, lo->value() * 1e6));
  }
  if (hi && hi->value() < median.value() * (1.0 - kSlack) - 1e-15) {
    throw ConfigError(r.file(), r.path_of(keys.max),
                      fmt::format("expected at least {} = {:.6g}, found {:.6g}", keys.median,
                                  median.value() * 1e6, hi->value() * 1e6));
  }
}

// An informational rate `key` (a collective's algbw_GBps or busbw_GBps, a GEMM's tflops), when
// given: the value its sizes and time_us imply, within what rounding to the printed digits
// explains (nccl-tests prints 2 decimals). Nothing reads it, but a stale one (time_us edited, the
// rate not) would mislead whoever reads the profile.
void check_derived_rate(JsonObjectReader& r, const std::string& key, double implied,
                        const char* unit) {
  if (!r.has(key)) return;
  const double found = r.non_negative_number(key);
  constexpr double kRelative = 0.01;
  constexpr double kAbsolute = 0.006;  // half of 2 printed decimals, and a margin
  if (std::abs(found - implied) > std::max(kAbsolute, kRelative * implied)) {
    throw ConfigError(r.file(), r.path_of(key),
                      fmt::format("expected {:.6g} {}, as the sizes and time_us imply (the field "
                                  "is derived from them), found {:.6g}",
                                  implied, unit, found));
  }
}

CollectivePoint point_from_json(const nlohmann::json& value, const std::string& file,
                                const std::string& path, double busbw_factor) {
  JsonObjectReader r(value, file, path);
  CollectivePoint p;
  p.bytes = Bytes(r.positive_int_at_most("bytes", calibrate::kMaxMeasuredBytes));
  p.median = measured_us(r, "time_us");
  p.min = optional_us(r, "min_us");
  p.max = optional_us(r, "max_us");
  check_spread(r, p.median, p.min, p.max);
  if (r.has("repeats")) p.repeats = r.positive_int32("repeats");
  const double algbw = static_cast<double>(p.bytes.value()) / p.median.value() / 1e9;
  check_derived_rate(r, "algbw_GBps", algbw, "GB/s");
  check_derived_rate(r, "busbw_GBps", algbw * busbw_factor, "GB/s");
  r.finish({"min_us", "max_us", "repeats", "algbw_GBps", "busbw_GBps"});
  return p;
}

CollectiveSeries series_from_json(const nlohmann::json& value, const std::string& file,
                                  const std::string& path) {
  JsonObjectReader r(value, file, path);
  CollectiveSeries s;
  s.op = *calibrate::parse_collective(r.choice("collective", kCollectives));
  s.dtype = dtype_at(r, "dtype");
  s.ranks = r.positive_int32("ranks");
  s.ranks_per_node = r.positive_int32("ranks_per_node");
  if (s.ranks_per_node > s.ranks || s.ranks % s.ranks_per_node != 0) {
    throw ConfigError(
        file, r.path_of("ranks_per_node"),
        fmt::format("expected a divisor of ranks = {}, found {}", s.ranks, s.ranks_per_node));
  }
  s.group = r.string("group", "");
  if (r.has("concurrent_with"))
    s.concurrent_with = calibrate::parse_collective(r.choice("concurrent_with", kCollectives, ""));
  s.in_place = r.boolean("in_place", false);
  s.origin = r.choice("origin", {"measured", "derived"}, "measured") == "derived"
                 ? calibrate::Origin::kDerived
                 : calibrate::Origin::kMeasured;
  s.derivation = r.string("derivation", "");
  if (s.origin == calibrate::Origin::kDerived && s.derivation.empty()) {
    throw ConfigError(file, r.path_of("derivation"),
                      "a derived series must say how it was derived; found nothing");
  }
  s.source = r.string("source", "");
  const nlohmann::json* points = array_child(r, "points");
  if (points == nullptr || points->empty()) {
    throw ConfigError(file, r.path_of("points"),
                      "expected an array of at least one measurement, found none");
  }
  for (std::size_t i = 0; i < points->size(); ++i) {
    s.points.push_back(point_from_json((*points)[i], file,
                                       fmt::format("{}/{}", r.path_of("points"), i),
                                       calibrate::busbw_factor(s.op, s.ranks)));
  }
  r.finish({"group", "concurrent_with", "in_place", "origin", "derivation", "source"});
  return s;
}

GemmPoint gemm_from_json(const nlohmann::json& value, const std::string& file,
                         const std::string& path) {
  JsonObjectReader r(value, file, path);
  GemmPoint g;
  g.dtype = dtype_at(r, "dtype");
  g.shape.m = r.positive_int_at_most("m", calibrate::kMaxGemmDimension);
  g.shape.n = r.positive_int_at_most("n", calibrate::kMaxGemmDimension);
  g.shape.k = r.positive_int_at_most("k", calibrate::kMaxGemmDimension);
  g.shape.batch = r.positive_int_at_most("batch", calibrate::kMaxGemmDimension, 1);
  g.layout = r.choice("layout", {"TN", "NN", "NT", "TT"}, "TN");
  if (g.layout != "TN") {
    // The GEMM curves are keyed by dtype and shape alone (hardware::GemmKey): a step's forward
    // and backward GEMMs are all priced from the TN measurement of their shape.
    throw ConfigError(file, r.path_of("layout"),
                      fmt::format("expected \"TN\" (torch.nn.Linear's x @ W^T, what "
                                  "fsdpsim-calibrate measures), found \"{}\": fsdpsim prices "
                                  "every GEMM of a shape from its TN time, so another layout's "
                                  "would be taken for it",
                                  g.layout));
  }
  g.median = measured_us(r, "time_us");
  g.min = optional_us(r, "min_us");
  g.max = optional_us(r, "max_us");
  check_spread(r, g.median, g.min, g.max);
  if (r.has("repeats")) g.repeats = r.positive_int32("repeats");
  if (r.has("under_nccl_time_us")) g.median_under_nccl = measured_us(r, "under_nccl_time_us");
  if (r.has("alone_beside_nccl_time_us")) {
    if (!g.median_under_nccl) {
      throw ConfigError(file, r.path_of("alone_beside_nccl_time_us"),
                        "is the baseline of under_nccl_time_us, which this GEMM does not have");
    }
    g.median_alone_beside_nccl = measured_us(r, "alone_beside_nccl_time_us");
  }
  g.source = r.string("source", "");
  check_derived_rate(r, "tflops", gemm_flops(g.shape) / g.median.value() / 1e12, "TFLOP/s");
  r.finish({"batch", "layout", "min_us", "max_us", "repeats", "under_nccl_time_us",
            "alone_beside_nccl_time_us", "source", "tflops"});
  return g;
}

// The harness's "rank-speed" phase: every rank of the job once, in rank order.
calibrate::RankSpeedMeasurement rank_speeds_from_json(const nlohmann::json& value,
                                                      const std::string& file) {
  JsonObjectReader r(value, file, "/rank_speeds");
  calibrate::RankSpeedMeasurement g;
  g.dtype = dtype_at(r, "dtype");
  g.shape.m = r.positive_int_at_most("m", calibrate::kMaxGemmDimension);
  g.shape.n = r.positive_int_at_most("n", calibrate::kMaxGemmDimension);
  g.shape.k = r.positive_int_at_most("k", calibrate::kMaxGemmDimension);
  (void)r.choice("layout", {"TN"}, "TN");
  if (r.has("held_ms")) g.held = milliseconds(r.positive_number_at_most("held_ms", 8.64e7));
  if (r.has("repeats")) g.repeats = r.positive_int32("repeats");
  if (r.has("launches")) g.launches = r.positive_int32("launches");
  const nlohmann::json* ranks = array_child(r, "ranks");
  if (ranks == nullptr || ranks->empty()) {
    throw ConfigError(file, r.path_of("ranks"),
                      "expected an array of every rank's {\"rank\", \"gemm_us\"}, found none");
  }
  for (std::size_t i = 0; i < ranks->size(); ++i) {
    JsonObjectReader e((*ranks)[i], file, fmt::format("{}/{}", r.path_of("ranks"), i));
    const std::int64_t rank = e.non_negative_int("rank");
    if (rank != static_cast<std::int64_t>(i)) {
      throw ConfigError(file, e.path_of("rank"),
                        fmt::format("expected {} (every rank once, in order), found {}", i, rank));
    }
    calibrate::RankTiming t;
    t.host = e.string("host", "");
    t.gemm = measured_us(e, "gemm_us");
    t.gemm_min = optional_us(e, "gemm_min_us");
    t.gemm_max = optional_us(e, "gemm_max_us");
    check_spread(e, t.gemm, t.gemm_min, t.gemm_max, {"gemm_us", "gemm_min_us", "gemm_max_us"});
    t.gemm_short = optional_us(e, "gemm_short_us");
    t.launch = optional_us(e, "launch_us");
    // Each optional time on every rank or on none, as on rank 0.
    const auto as_rank0 = [&](const char* key, bool here, bool on_rank0) {
      if (here == on_rank0) return;
      throw ConfigError(
          file, e.path_of(key),
          fmt::format("expected {} on every rank or on none, as on rank 0, found it {}", key,
                      here ? "here" : "missing"));
    };
    if (!g.ranks.empty()) {
      as_rank0("gemm_short_us", t.gemm_short.has_value(), g.ranks.front().gemm_short.has_value());
      as_rank0("launch_us", t.launch.has_value(), g.ranks.front().launch.has_value());
    }
    e.finish({"host", "gemm_min_us", "gemm_max_us", "gemm_short_us", "launch_us"});
    // Each rank ran the GEMM back to back for held_ms: at least one of them fits in it.
    if (r.has("held_ms") && t.gemm.value() > g.held.value()) {
      throw ConfigError(file, e.path_of("gemm_us"),
                        fmt::format("expected at most held_ms ({:g} ms), the time each rank ran "
                                    "the GEMM back to back, found {:g} us",
                                    g.held.value() * 1e3, t.gemm.value() * 1e6));
    }
    g.ranks.push_back(std::move(t));
  }
  r.finish({"layout", "held_ms", "repeats", "launches"});
  return g;
}

calibrate::AllocationTiming allocation_from_json(const nlohmann::json& value,
                                                 const std::string& file, const std::string& path) {
  JsonObjectReader r(value, file, path);
  calibrate::AllocationTiming t;
  t.bytes = Bytes(r.positive_int_at_most("bytes", calibrate::kMaxMeasuredBytes));
  t.malloc = measured_us(r, "malloc_us");
  t.free = measured_us(r, "free_us");
  // cudaMalloc and cudaFree of a segment take tens of us plus about 0.1-0.6 ms per GiB on an H200
  // (configs/hardware/h200-sxm-141gb.json): a second plus 100 ms per GiB is a time in the wrong
  // unit, and would price every cudaMalloc retry as minutes.
  const double gib = static_cast<double>(t.bytes.value()) / static_cast<double>(1LL << 30);
  const double slowest_us = 1e6 + 1e5 * gib;
  for (const auto& [key, time] :
       {std::pair<const char*, Seconds>{"malloc_us", t.malloc}, {"free_us", t.free}}) {
    if (time.value() * 1e6 > slowest_us) {
      throw ConfigError(file, r.path_of(key),
                        fmt::format("expected at most {:.6g} us for {} bytes (1 s plus 100 ms per "
                                    "GiB: a cudaMalloc or cudaFree takes tens of us plus under a "
                                    "ms per GiB), found {:.6g}: a time in the wrong unit?",
                                    slowest_us, t.bytes.value(), time.value() * 1e6));
    }
  }
  r.finish();
  return t;
}

std::optional<BytesPerSec> optional_gbps(JsonObjectReader& r, const std::string& key) {
  if (!r.has(key)) return std::nullopt;
  constexpr double kMaxGBps = 1e5;  // 100 TB/s: past any memory or link of a GPU
  // A PCIe 1.0 x1 link moves 0.25 GB/s: a slower copy is a time in the wrong unit, and
  // `calibrate fit` would print it as a pcie_GBps of 0.0 that scenarios refuse.
  constexpr double kMinGBps = 0.1;
  const double rate = r.positive_number_at_most(key, kMaxGBps);
  if (rate < kMinGBps) {
    throw ConfigError(r.file(), r.path_of(key),
                      fmt::format("expected a rate from {} to {:g} GB/s (a PCIe 1.0 x1 link moves "
                                  "0.25), found {:g}",
                                  kMinGBps, kMaxGBps, rate));
  }
  return gb_per_s(rate);
}

// Rounds to 6 significant digits: readable files, stable diffs.
void add_spread(nlohmann::ordered_json& j, const std::optional<Seconds>& lo,
                const std::optional<Seconds>& hi, std::int32_t repeats) {
  if (lo) j["min_us"] = round6(lo->value() * 1e6);
  if (hi) j["max_us"] = round6(hi->value() * 1e6);
  if (repeats > 0) j["repeats"] = repeats;
}

}  // namespace

CalibrationProfile profile_from_json(const nlohmann::json& value, const std::string& file) {
  JsonObjectReader r(value, file, "");
  const std::int64_t version = r.positive_int("schema_version");
  if (version != calibrate::kProfileSchemaVersion) {
    throw ConfigError(
        file, "/schema_version",
        fmt::format("expected {}, found {}", calibrate::kProfileSchemaVersion, version));
  }
  const std::string kind = r.string("kind");
  if (kind != kCalibrationProfileKind) {
    throw ConfigError(file, "/kind",
                      fmt::format("expected \"{}\" (a calibration profile), found \"{}\"{}",
                                  kCalibrationProfileKind, kind,
                                  kind == kCalibrationFitKind
                                      ? "; that is `fsdpsim calibrate fit -o` output: give the "
                                        "profile it was fitted from"
                                      : ""));
  }
  CalibrationProfile p;
  p.name = r.name("name", std::filesystem::path(file).stem().string());
  p.description = r.string("description", "");
  p.created = r.string("created", "");
  p.tool = r.string("tool", "");
  p.complete = r.boolean("complete", true);
  if (const nlohmann::json* d = r.child("device")) {
    JsonObjectReader dr(*d, file, "/device");
    p.device.name = dr.name("name", "");
    p.device.compute_capability = dr.string("compute_capability", "");
    // Absent when unknown: 0 would read as absent and turn the check against the GPU off.
    if (dr.has("sm_count")) p.device.sm_count = dr.positive_int32("sm_count");
    if (dr.has("memory_bytes")) p.device.memory = Bytes(dr.positive_int("memory_bytes"));
    dr.finish({"name", "compute_capability", "sm_count", "memory_bytes"});
  }
  if (const nlohmann::json* s = r.child("software")) {
    JsonObjectReader sr(*s, file, "/software");
    p.software.driver = sr.string("driver", "");
    p.software.cuda_runtime = sr.string("cuda_runtime", "");
    p.software.nccl = sr.string("nccl", "");
    p.software.cublaslt = sr.string("cublaslt", "");
    sr.finish();
  }
  if (const nlohmann::json* t = r.child("topology")) {
    JsonObjectReader tr(*t, file, "/topology");
    // Sizes a job can have (hardware::kMaxWorldSize GPUs at most).
    if (tr.has("nodes")) {
      p.topology.nodes =
          static_cast<std::int32_t>(tr.positive_int_at_most("nodes", hardware::kMaxWorldSize));
    }
    if (tr.has("gpus_per_node")) {
      p.topology.gpus_per_node = static_cast<std::int32_t>(
          tr.positive_int_at_most("gpus_per_node", hardware::kMaxWorldSize));
    }
    p.topology.hosts = string_array(tr, "hosts");
    p.topology.interconnect = tr.string("interconnect", "");
    tr.finish({"nodes", "gpus_per_node", "hosts", "interconnect"});
  }
  p.sources = string_array(r, "sources");
  p.notes = string_array(r, "notes");
  if (const nlohmann::json* c = array_child(r, "collectives")) {
    for (std::size_t i = 0; i < c->size(); ++i) {
      p.collectives.push_back(series_from_json((*c)[i], file, fmt::format("/collectives/{}", i)));
    }
  }
  if (const nlohmann::json* g = array_child(r, "gemms")) {
    for (std::size_t i = 0; i < g->size(); ++i)
      p.gemms.push_back(gemm_from_json((*g)[i], file, fmt::format("/gemms/{}", i)));
  }
  if (const nlohmann::json* g = r.child("rank_speeds")) {
    p.rank_speeds = rank_speeds_from_json(*g, file);
    // The harness lays the ranks out node by node: topology says how many make a node (a job on
    // part of one node is one node; calibrate/fit.cpp takes no node unit then).
    const auto ranks = static_cast<std::int64_t>(p.rank_speeds->ranks.size());
    const std::int64_t per_node = p.topology.gpus_per_node;
    // No more ranks than the measured job had GPUs (a job on part of one node has fewer).
    if (const std::int64_t gpus = p.topology.nodes * per_node; gpus > 0 && ranks > gpus) {
      throw ConfigError(file, "/rank_speeds/ranks",
                        fmt::format("expected at most {} ranks, the topology's {} node{} x {} "
                                    "GPU{}, found {}",
                                    gpus, p.topology.nodes, p.topology.nodes == 1 ? "" : "s",
                                    per_node, per_node == 1 ? "" : "s", ranks));
    }
    if (per_node > 0 && ranks > per_node && ranks % per_node != 0) {
      throw ConfigError(file, "/topology/gpus_per_node",
                        fmt::format("expected a divisor of the {} ranks rank_speeds measured (the "
                                    "ranks are laid out node by node), found {}",
                                    ranks, per_node));
    }
  }
  if (const nlohmann::json* m = r.child("memory")) {
    JsonObjectReader mr(*m, file, "/memory");
    p.memory.device_copy = optional_gbps(mr, "device_copy_GBps");
    p.memory.h2d_pinned = optional_gbps(mr, "h2d_pinned_GBps");
    p.memory.d2h_pinned = optional_gbps(mr, "d2h_pinned_GBps");
    p.memory.kernel_launch = optional_us(mr, "kernel_launch_us");
    // An empty kernel's launch takes microseconds of host time (4.4 us on our H200's host).
    constexpr double kSlowestLaunchUs = 1e4;
    if (p.memory.kernel_launch && p.memory.kernel_launch->value() * 1e6 > kSlowestLaunchUs) {
      throw ConfigError(file, mr.path_of("kernel_launch_us"),
                        fmt::format("expected at most {:g} us (a launch takes microseconds), "
                                    "found {:.6g}",
                                    kSlowestLaunchUs, p.memory.kernel_launch->value() * 1e6));
    }
    if (const nlohmann::json* a = array_child(mr, "allocations")) {
      for (std::size_t i = 0; i < a->size(); ++i) {
        p.memory.allocations.push_back(
            allocation_from_json((*a)[i], file, fmt::format("/memory/allocations/{}", i)));
      }
    }
    mr.finish({"device_copy_GBps", "h2d_pinned_GBps", "d2h_pinned_GBps", "kernel_launch_us",
               "allocations"});
  }
  r.finish({"name", "description", "created", "tool", "complete", "device", "software", "topology",
            "sources", "notes", "collectives", "gemms", "rank_speeds", "memory"});
  return p;
}

nlohmann::ordered_json profile_to_json(const CalibrationProfile& p) {
  nlohmann::ordered_json j;
  j["schema_version"] = calibrate::kProfileSchemaVersion;
  j["kind"] = kCalibrationProfileKind;
  j["name"] = p.name;
  if (!p.description.empty()) j["description"] = p.description;
  if (!p.created.empty()) j["created"] = p.created;
  if (!p.tool.empty()) j["tool"] = p.tool;
  j["complete"] = p.complete;
  nlohmann::ordered_json device = nlohmann::ordered_json::object();
  if (!p.device.name.empty()) device["name"] = p.device.name;
  if (!p.device.compute_capability.empty())
    device["compute_capability"] = p.device.compute_capability;
  if (p.device.sm_count > 0) device["sm_count"] = p.device.sm_count;
  if (p.device.memory.value() > 0) device["memory_bytes"] = p.device.memory.value();
  j["device"] = device;
  nlohmann::ordered_json software = nlohmann::ordered_json::object();
  for (const auto& [key, value] :
       {std::pair{"driver", p.software.driver}, std::pair{"cuda_runtime", p.software.cuda_runtime},
        std::pair{"nccl", p.software.nccl}, std::pair{"cublaslt", p.software.cublaslt}}) {
    if (!value.empty()) software[key] = value;
  }
  j["software"] = software;
  nlohmann::ordered_json topology = nlohmann::ordered_json::object();
  if (p.topology.nodes > 0) topology["nodes"] = p.topology.nodes;
  if (p.topology.gpus_per_node > 0) topology["gpus_per_node"] = p.topology.gpus_per_node;
  if (!p.topology.hosts.empty()) topology["hosts"] = p.topology.hosts;
  if (!p.topology.interconnect.empty()) topology["interconnect"] = p.topology.interconnect;
  j["topology"] = topology;
  if (!p.sources.empty()) j["sources"] = p.sources;
  if (!p.notes.empty()) j["notes"] = p.notes;
  nlohmann::ordered_json collectives = nlohmann::ordered_json::array();
  for (const CollectiveSeries& s : p.collectives) {
    nlohmann::ordered_json c;
    c["collective"] = std::string(calibrate::collective_name(s.op));
    c["dtype"] = std::string(dtype_name(s.dtype));
    c["ranks"] = s.ranks;
    c["ranks_per_node"] = s.ranks_per_node;
    if (!s.group.empty()) c["group"] = s.group;
    if (s.concurrent_with)
      c["concurrent_with"] = std::string(calibrate::collective_name(*s.concurrent_with));
    if (s.in_place) c["in_place"] = true;
    c["origin"] = s.origin == calibrate::Origin::kDerived ? "derived" : "measured";
    if (!s.derivation.empty()) c["derivation"] = s.derivation;
    if (!s.source.empty()) c["source"] = s.source;
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    const double factor = calibrate::busbw_factor(s.op, s.ranks);
    for (const CollectivePoint& q : s.points) {
      nlohmann::ordered_json point;
      point["bytes"] = q.bytes.value();
      point["time_us"] = round6(q.median.value() * 1e6);
      add_spread(point, q.min, q.max, q.repeats);
      const double algbw = static_cast<double>(q.bytes.value()) / q.median.value() / 1e9;
      point["algbw_GBps"] = round6(algbw);
      point["busbw_GBps"] = round6(algbw * factor);
      points.push_back(point);
    }
    c["points"] = points;
    collectives.push_back(c);
  }
  j["collectives"] = collectives;
  nlohmann::ordered_json gemms = nlohmann::ordered_json::array();
  for (const GemmPoint& g : p.gemms) {
    nlohmann::ordered_json e;
    e["dtype"] = std::string(dtype_name(g.dtype));
    e["m"] = g.shape.m;
    e["n"] = g.shape.n;
    e["k"] = g.shape.k;
    e["batch"] = g.shape.batch;
    e["layout"] = g.layout;
    e["time_us"] = round6(g.median.value() * 1e6);
    add_spread(e, g.min, g.max, g.repeats);
    if (g.median_under_nccl) e["under_nccl_time_us"] = round6(g.median_under_nccl->value() * 1e6);
    if (g.median_alone_beside_nccl) {
      e["alone_beside_nccl_time_us"] = round6(g.median_alone_beside_nccl->value() * 1e6);
    }
    if (!g.source.empty()) e["source"] = g.source;
    gemms.push_back(e);
  }
  j["gemms"] = gemms;
  if (p.rank_speeds) {
    const calibrate::RankSpeedMeasurement& g = *p.rank_speeds;
    nlohmann::ordered_json speeds;
    speeds["dtype"] = std::string(dtype_name(g.dtype));
    speeds["m"] = g.shape.m;
    speeds["n"] = g.shape.n;
    speeds["k"] = g.shape.k;
    speeds["layout"] = "TN";
    speeds["held_ms"] = round6(g.held.value() * 1e3);
    if (g.repeats > 0) speeds["repeats"] = g.repeats;
    if (g.launches > 0) speeds["launches"] = g.launches;
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < g.ranks.size(); ++i) {
      const calibrate::RankTiming& t = g.ranks[i];
      nlohmann::ordered_json e;
      e["rank"] = i;
      if (!t.host.empty()) e["host"] = t.host;
      e["gemm_us"] = round6(t.gemm.value() * 1e6);
      if (t.gemm_min) e["gemm_min_us"] = round6(t.gemm_min->value() * 1e6);
      if (t.gemm_max) e["gemm_max_us"] = round6(t.gemm_max->value() * 1e6);
      if (t.gemm_short) e["gemm_short_us"] = round6(t.gemm_short->value() * 1e6);
      if (t.launch) e["launch_us"] = round6(t.launch->value() * 1e6);
      ranks.push_back(e);
    }
    speeds["ranks"] = ranks;
    j["rank_speeds"] = speeds;
  }
  nlohmann::ordered_json memory = nlohmann::ordered_json::object();
  if (p.memory.device_copy)
    memory["device_copy_GBps"] = round6(p.memory.device_copy->value() / 1e9);
  if (p.memory.h2d_pinned) memory["h2d_pinned_GBps"] = round6(p.memory.h2d_pinned->value() / 1e9);
  if (p.memory.d2h_pinned) memory["d2h_pinned_GBps"] = round6(p.memory.d2h_pinned->value() / 1e9);
  if (p.memory.kernel_launch)
    memory["kernel_launch_us"] = round6(p.memory.kernel_launch->value() * 1e6);
  if (!p.memory.allocations.empty()) {
    nlohmann::ordered_json allocations = nlohmann::ordered_json::array();
    for (const calibrate::AllocationTiming& t : p.memory.allocations) {
      nlohmann::ordered_json e;
      e["bytes"] = t.bytes.value();
      e["malloc_us"] = round6(t.malloc.value() * 1e6);
      e["free_us"] = round6(t.free.value() * 1e6);
      allocations.push_back(e);
    }
    memory["allocations"] = allocations;
  }
  j["memory"] = memory;
  return j;
}

CalibrationProfile read_profile(const std::filesystem::path& file) {
  return profile_from_json(read_json_file(file), file.string());
}

nlohmann::ordered_json fit_to_json(const calibrate::ProfileFit& fit,
                                   const std::string& profile_file) {
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["kind"] = kCalibrationFitKind;
  j["profile"] = profile_file;
  nlohmann::ordered_json curves = nlohmann::ordered_json::array();
  for (const calibrate::CurveFit& f : fit.collectives) {
    const hardware::CollectiveCurve& curve = fit.curves->collectives().at(f.key);
    nlohmann::ordered_json c;
    c["collective"] = std::string(calibrate::collective_name(f.key.op));
    c["dtype"] = std::string(dtype_name(f.key.dtype));
    c["ranks"] = f.key.ranks;
    c["ranks_per_node"] = f.key.ranks_per_node;
    c["origin"] = f.origin == calibrate::Origin::kDerived ? "derived" : "measured";
    c["latency_us"] = round6(f.latency.value() * 1e6);
    c["small_size_us_per_MiB"] =
        round6(curve.small_seconds_per_byte() * 1e6 * static_cast<double>(kBytesPerMiB));
    c["large_size_us_per_MiB"] =
        round6(curve.large_seconds_per_byte() * 1e6 * static_cast<double>(kBytesPerMiB));
    c["peak_busbw_GBps"] = round6(f.peak_busbw_GBps);
    c["asymptotic_busbw_GBps"] = round6(f.asymptotic_busbw_GBps);
    c["used_above_range"] = f.extrapolates;
    c["max_knot_error"] = round6(f.max_knot_error);
    c["max_leave_one_out_error"] = round6(f.max_leave_one_out_error);
    nlohmann::ordered_json knots = nlohmann::ordered_json::array();
    for (const hardware::CurveKnot& k : curve.knots()) {
      knots.push_back({{"bytes", k.bytes.value()}, {"time_us", round6(k.time.value() * 1e6)}});
    }
    c["knots"] = knots;
    curves.push_back(c);
  }
  j["collectives"] = curves;
  nlohmann::ordered_json skipped = nlohmann::ordered_json::array();
  for (const calibrate::SkippedSeries& s : fit.skipped)
    skipped.push_back({{"series", s.what}, {"why", s.why}});
  j["skipped"] = skipped;
  nlohmann::ordered_json interference = nlohmann::ordered_json::array();
  for (const calibrate::InterferenceFit& i : fit.interference) {
    interference.push_back(
        {{"collective", std::string(calibrate::collective_name(i.key.op))},
         {"concurrent_with", std::string(calibrate::collective_name(i.concurrent_with))},
         {"ranks", i.key.ranks},
         {"ranks_per_node", i.key.ranks_per_node},
         {"median_slowdown", round6(i.median_slowdown)}});
  }
  j["interference"] = interference;
  j["gemms"] = fit.gemms;
  if (fit.gemm_slowdown_under_nccl)
    j["gemm_slowdown_under_nccl"] = round6(*fit.gemm_slowdown_under_nccl);
  if (fit.allocation_costs) {
    const auto cost = [](const hardware::DeviceCallCost& c) {
      return nlohmann::ordered_json{{"fixed_us", round6(c.fixed.value() * 1e6)},
                                    {"per_GiB_us", round6(c.per_gib.value() * 1e6)}};
    };
    j["allocation_costs"] = {{"malloc", cost(fit.allocation_costs->malloc)},
                             {"free", cost(fit.allocation_costs->free)}};
  }
  if (fit.rank_speeds) {
    const calibrate::RankSpeedFit& g = *fit.rank_speeds;
    const auto spread = [](const calibrate::SpeedSpread& v, const std::vector<double>& speeds) {
      nlohmann::ordered_json all = nlohmann::ordered_json::array();
      for (const double x : speeds) all.push_back(round6(x));
      return nlohmann::ordered_json{
          {"median", round6(v.median)},     {"fastest", round6(v.fastest)},
          {"slowest", round6(v.slowest)},   {"slowest_rank", v.slowest_rank},
          {"slowest_host", v.slowest_host}, {"speeds", all}};
    };
    nlohmann::ordered_json speeds{{"ranks", g.ranks}, {"rank0_tflops", round6(g.rank0_tflops)}};
    if (g.sustained) {
      speeds["sustained_gemm_fraction"] = {{"rank0", round6(g.sustained->rank0)},
                                           {"median", round6(g.sustained->median)},
                                           {"lowest", round6(g.sustained->lowest)},
                                           {"lowest_rank", g.sustained->lowest_rank},
                                           {"highest", round6(g.sustained->highest)}};
    }
    speeds["gpu"] = spread(g.gpu, fit.curves->gpu_speeds());
    if (g.host) {
      speeds["rank0_launch_us"] = round6(g.rank0_launch->value() * 1e6);
      speeds["host"] = spread(*g.host, fit.curves->host_speeds());
    }
    j["rank_speeds"] = speeds;
  }
  return j;
}

std::string device_name_mismatch(const std::string& device, const std::string& preset,
                                 const std::string& subject) {
  if (device.empty()) return "";
  const auto upper_of = [](std::string text) {
    for (char& ch : text) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return text;
  };
  const std::string upper = upper_of(device);
  // Whether `word` starts a word of the name ("H200" in "NVIDIA H200", not in "GH200"), and
  // with `whole` also ends one ("NVL" in "H100 NVL").
  const auto word_at = [&upper](const std::string& word, bool whole = false) {
    const auto boundary = [&upper](std::size_t i) {
      return std::isalnum(static_cast<unsigned char>(upper[i])) == 0;
    };
    for (std::size_t at = upper.find(word); at != std::string::npos;
         at = upper.find(word, at + 1)) {
      const std::size_t end = at + word.size();
      if ((at == 0 || boundary(at - 1)) && (!whole || end == upper.size() || boundary(end))) {
        return true;
      }
    }
    return false;
  };
  std::vector<std::string> parts;
  for (std::size_t from = 0; from <= preset.size();) {
    const std::size_t dash = std::min(preset.find('-', from), preset.size());
    parts.push_back(upper_of(preset.substr(from, dash - from)));
    from = dash + 1;
  }
  // A name of one's own ("clusterA-gpu", "cluster2-gpu") names no model to compare: only a first
  // word shaped like one is (1-3 letters, 2-4 digits, at most one letter: A100, H200, GH200,
  // MI300X, L40S).
  const std::string& first = parts.front();
  const auto run_of = [&first](std::size_t from, auto is) {
    std::size_t end = from;
    while (end < first.size() && is(static_cast<unsigned char>(first[end])) != 0) ++end;
    return end - from;
  };
  const std::size_t letters = run_of(0, [](unsigned char ch) { return std::isupper(ch); });
  const std::size_t digits = run_of(letters, [](unsigned char ch) { return std::isdigit(ch); });
  const std::size_t rest = first.size() - letters - digits;
  const bool names_model =
      letters >= 1 && letters <= 3 && digits >= 2 && digits <= 4 &&
      (rest == 0 || (rest == 1 && std::isupper(static_cast<unsigned char>(first.back())) != 0));
  if (names_model && !word_at(parts.front())) {
    return fmt::format("{} {}, not on the {} of {}", subject, device, parts.front(), preset);
  }
  // A memory size in both: "80GB" in the name against the preset's "80GB".
  const std::string& memory = parts.back();
  const bool preset_memory = memory.size() > 2 && memory.ends_with("GB") &&
                             std::all_of(memory.begin(), memory.end() - 2, [](char ch) {
                               return std::isdigit(static_cast<unsigned char>(ch)) != 0;
                             });
  const auto gb = upper.find("GB");
  if (preset_memory && gb != std::string::npos && gb > 0 &&
      std::isdigit(static_cast<unsigned char>(upper[gb - 1])) != 0 && !word_at(memory)) {
    return fmt::format("{} {}, whose memory is not the {} of {}", subject, device, memory, preset);
  }
  // The form factor: an SXM preset's NVLink, power limit and SMs are not those of a PCIe card,
  // an NVL card or a MIG slice of the same GPU.
  if (std::find(parts.begin(), parts.end(), "SXM") != parts.end()) {
    for (const auto& [word, what] : {std::pair<std::string, const char*>{"PCIE", "a PCIe card"},
                                     {"NVL", "an NVL card"},
                                     {"MIG", "a MIG slice"}}) {
      if (word_at(word, /*whole=*/true)) {
        return fmt::format("{} {}, {}, not on the SXM module of {}", subject, device, what, preset);
      }
    }
  }
  return "";
}

std::string calibration_device_mismatch(const calibrate::DeviceInfo& device,
                                        const hardware::GpuSpec& gpu) {
  constexpr double kMemoryTolerance = 0.02;  // drivers report a few hundred MiB apart
  const bool sm_differs = device.sm_count > 0 && device.sm_count != gpu.sm_count;
  const bool memory_differs =
      device.memory.value() > 0 &&
      std::abs(static_cast<double>(device.memory.value() - gpu.hbm.value())) >
          kMemoryTolerance * static_cast<double>(gpu.hbm.value());
  if (!sm_differs && !memory_differs) {
    // Alike in SMs and memory as far as the profile says (an H100 and an H200 have 132 SMs each;
    // a profile may give no memory), the name still tells one GPU model from another.
    const std::string named =
        device_name_mismatch(device.name, gpu.name, "the profile was measured on");
    if (named.empty()) return "";
    return fmt::format(
        "{}: its measurements are another GPU model's; calibrate on this GPU or "
        "leave the profile out",
        named);
  }
  const auto gib = [](Bytes b) { return static_cast<double>(b.value()) / (1024.0 * 1024 * 1024); };
  std::string measured = device.name.empty() ? std::string("a GPU") : device.name;
  measured += fmt::format(" ({} SMs", device.sm_count > 0 ? std::to_string(device.sm_count) : "?");
  if (device.memory.value() > 0) measured += fmt::format(", {:.1f} GiB", gib(device.memory));
  return fmt::format(
      "the profile was measured on {}), the scenario's GPU {} has {} SMs and {:.1f} GiB: its "
      "measurements are another GPU model's; calibrate on this GPU or leave the profile out",
      measured, gpu.name, gpu.sm_count, gib(gpu.hbm));
}

std::string calibration_beyond_hardware(const CalibrationProfile& profile,
                                        const hardware::ClusterSpec& cluster) {
  const hardware::GpuSpec& gpu = cluster.gpu;
  // Where the measurement is in the profile file.
  const auto at = [](const std::string& problem, const std::string& path) {
    return fmt::format("{} (the profile's {})", problem, path);
  };
  // A GEMM of `shape` in `dtype` timed at `median`, at `path` in the profile.
  const auto gemm_problem = [&](Dtype dtype, const GemmShape& shape, Seconds median,
                                const std::string& path) -> std::string {
    const double peak = gpu.peak(dtype).value();
    if (!(peak > 0.0) || !(median.value() > 0.0)) return "";  // unsupported dtype: never priced
    const double flops = gemm_flops(shape);
    const double rate = flops / median.value();
    // "GEMM 4096x1024x512 (batch 2) tf32 in 15 us", for a message only.
    const std::string measured =
        fmt::format("GEMM {}x{}x{}{} {} in {:.6g} us", shape.m, shape.n, shape.k,
                    shape.batch > 1 ? fmt::format(" (batch {})", shape.batch) : std::string(),
                    dtype_name(dtype), median.value() * 1e6);
    if (rate > kPeakTolerance * peak) {
      return at(fmt::format("{} is {:.0f} TFLOP/s, above the {:.0f} TFLOP/s dense peak of the "
                            "scenario's GPU {}: a time in the wrong unit, or another GPU's "
                            "measurement",
                            measured, rate / 1e12, peak / 1e12, gpu.name),
                path);
    }
    if (flops >= kLargeGemmFlops && rate < kSlowestShareOfLineRate * peak) {
      return at(
          fmt::format("{} is {:.3g} TFLOP/s, under {:g} % of the {:.0f} TFLOP/s dense peak "
                      "of the scenario's GPU {}: a time in the wrong unit (ns written as "
                      "us?)",
                      measured, rate / 1e12, 100 * kSlowestShareOfLineRate, peak / 1e12, gpu.name),
          path);
    }
    return "";
  };
  for (std::size_t gi = 0; gi < profile.gemms.size(); ++gi) {
    const calibrate::GemmPoint& g = profile.gemms[gi];
    if (std::string problem =
            gemm_problem(g.dtype, g.shape, g.median, fmt::format("/gemms/{}", gi));
        !problem.empty())
      return problem;
    // The fastest repeat cannot beat the peak either (nor be slower than the median, checked
    // when read).
    if (g.min) {
      if (std::string problem =
              gemm_problem(g.dtype, g.shape, *g.min, fmt::format("/gemms/{}/min_us", gi));
          !problem.empty())
        return problem;
    }
    if (!g.median_under_nccl) continue;
    if (std::string problem = gemm_problem(g.dtype, g.shape, *g.median_under_nccl,
                                           fmt::format("/gemms/{}/under_nccl_time_us", gi));
        !problem.empty())
      return problem;
    if (!g.median_alone_beside_nccl) continue;
    if (std::string problem = gemm_problem(g.dtype, g.shape, *g.median_alone_beside_nccl,
                                           fmt::format("/gemms/{}/alone_beside_nccl_time_us", gi));
        !problem.empty())
      return problem;
  }
  if (profile.rank_speeds) {
    const calibrate::RankSpeedMeasurement& g = *profile.rank_speeds;
    for (std::size_t r = 0; r < g.ranks.size(); ++r) {
      const calibrate::RankTiming& t = g.ranks[r];
      const std::string path = fmt::format("/rank_speeds/ranks/{}", r);
      if (std::string problem = gemm_problem(g.dtype, g.shape, t.gemm, path + "/gemm_us");
          !problem.empty())
        return problem;
      if (t.gemm_min) {
        if (std::string problem =
                gemm_problem(g.dtype, g.shape, *t.gemm_min, path + "/gemm_min_us");
            !problem.empty())
          return problem;
      }
      if (!t.gemm_short) continue;
      if (std::string problem =
              gemm_problem(g.dtype, g.shape, *t.gemm_short, path + "/gemm_short_us");
          !problem.empty())
        return problem;
    }
  }
  const double limit = kMaxBusBandwidthOverNvlink * cluster.nvlink_bandwidth.value();
  for (std::size_t si = 0; si < profile.collectives.size(); ++si) {
    const calibrate::CollectiveSeries& s = profile.collectives[si];
    if (s.ranks < 2) continue;
    const double factor = calibrate::busbw_factor(s.op, s.ranks);
    // The group's latency on this cluster's links, whatever the size of the cluster it ran on.
    hardware::ClusterSpec spanning = cluster;
    spanning.gpus_per_node = std::max(cluster.gpus_per_node, s.ranks_per_node);
    spanning.nodes = std::max(cluster.nodes, s.ranks / s.ranks_per_node);
    const Seconds latency =
        hardware::collective_latency(spanning, s.op, {s.ranks, s.ranks_per_node});
    for (std::size_t pi = 0; pi < s.points.size(); ++pi) {
      const calibrate::CollectivePoint& p = s.points[pi];
      const auto point_path = [si, pi] { return fmt::format("/collectives/{}/points/{}", si, pi); };
      if (!(p.median.value() > 0.0)) continue;
      const double busbw = factor * static_cast<double>(p.bytes.value()) / p.median.value();
      // "all_reduce on 8 ranks, 67108864 bytes in 684600 us", for a message only.
      const auto measured = [&s, &p] {
        return fmt::format("{} on {} ranks, {} bytes in {:.6g} us",
                           calibrate::collective_name(s.op), s.ranks, p.bytes.value(),
                           p.median.value() * 1e6);
      };
      if (busbw > limit) {
        return at(
            fmt::format("{}, is {:.0f} GB/s of bus bandwidth, more than twice the {:.0f} "
                        "GB/s NVLink line rate of the scenario's {}: a time in the wrong "
                        "unit, or another machine's measurement",
                        measured(), busbw / 1e9, cluster.nvlink_bandwidth.value() / 1e9, gpu.name),
            point_path());
      }
      const bool intra_node = s.ranks_per_node >= s.ranks;
      if (!intra_node && cluster.nic_bandwidth_per_node.value() > 0.0) {
        // In a ring over n ranks, g per node, each node takes in (n - g) / n of the buffer
        // through its NICs, all of them at most (hardware/collective_cost.cpp), so busbw
        // (the buffer's (n - 1) / n over the time) is at most the node's NIC rate times
        // (n - 1) / (n - g); twice that for an all-reduce, whose tree or in-network reduction
        // can pass a ring (two-node trees do: NCCL's tree and NVLS all-reduce,
        // src/graph/tuning.cc).
        const auto n = static_cast<double>(s.ranks);
        const double ring =
            cluster.nic_bandwidth_per_node.value() * (n - 1.0) / (n - s.ranks_per_node);
        const double nic_limit =
            kPeakTolerance * (s.op == hardware::Collective::kAllReduce ? 2.0 * ring : ring);
        if (busbw > nic_limit) {
          return at(fmt::format("{}, is {:.0f} GB/s of bus bandwidth, more than the scenario's "
                                "network can carry ({:.0f} GB/s for {} ranks, {} per node, with "
                                "{:.0f} Gb/s of NICs per node, hardware.node.nic_Gbps_per_node): "
                                "the profile was measured on a faster network; set the "
                                "cluster's NIC bandwidth, or use a profile of this one",
                                measured(), busbw / 1e9, nic_limit / 1e9, s.ranks, s.ranks_per_node,
                                cluster.nic_bandwidth_per_node.value() * 8e-9),
                    point_path());
        }
      }
      const double line_rate =
          intra_node ? cluster.nvlink_bandwidth.value() : cluster.nic_bandwidth_per_node.value();
      // Large in all and per rank: a ring's hop latency (per rank) is then a small part of it.
      const bool large =
          p.bytes.value() >= kLargeCollective && p.bytes.value() / s.ranks >= kLargeCollectiveShare;
      const bool latencies_long =
          latency.value() > 0.0 && p.median.value() > kLatencyAllowance * latency.value();
      if ((large || latencies_long) && line_rate > 0.0 &&
          busbw < kSlowestShareOfLineRate * line_rate) {
        return at(
            fmt::format("{}, is {:.3g} GB/s of bus bandwidth, under {:g} % of the {:.0f} "
                        "GB/s {} line rate of the scenario's {}{}: a time or size in the "
                        "wrong unit (ns written as us, KiB as bytes?)",
                        measured(), busbw / 1e9, 100 * kSlowestShareOfLineRate, line_rate / 1e9,
                        intra_node ? "NVLink" : "network (all NICs of a node)", gpu.name,
                        large ? std::string()
                              : fmt::format(", and over {:g} times its group's {:.3g} us ring "
                                            "latency",
                                            kLatencyAllowance, latency.value() * 1e6)),
            point_path());
      }
    }
  }
  return "";
}

std::shared_ptr<const hardware::CalibratedCurves> load_calibration(
    const std::string& reference, const std::filesystem::path& from_file,
    const std::string& json_path, const PresetLocator& presets,
    const hardware::ClusterSpec* cluster) {
  if (reference.empty())
    throw ConfigError(from_file.string(), json_path, "expected a profile name or path, found \"\"");
  const std::filesystem::path file =
      presets.resolve("calibration", reference, from_file, json_path);
  // What is wrong with the profile alone is said as parse_preset says it, naming where it was
  // named (a sweep refuses such a value rather than skipping its points: names_unusable_file).
  const CalibrationProfile profile =
      parse_preset("calibration", from_file, json_path, presets.unknown_key_hint(file), [&] {
        CalibrationProfile read = read_profile(file);
        if (read.device.sm_count <= 0 && read.device.memory.value() <= 0) {
          throw ConfigError(
              file.string(), "/device",
              fmt::format(
                  "expected sm_count or memory_bytes, found {}: without them no scenario can "
                  "check that the profile measured its GPU (`fsdpsim calibrate "
                  "import-nccl-tests --gpu PRESET` writes them)",
                  read.device.name.empty()
                      ? std::string("neither")
                      : fmt::format("only the name \"{}\"", read.device.name)));
        }
        return read;
      });
  if (cluster != nullptr) {
    for (const std::string& problem : {calibration_device_mismatch(profile.device, cluster->gpu),
                                       calibration_beyond_hardware(profile, *cluster)}) {
      if (problem.empty()) continue;
      // The file a name resolved to; a path is named already where the message says where the
      // value came from.
      throw ConfigError(from_file.string(), json_path,
                        reference == file.string()
                            ? problem
                            : fmt::format("{} (profile {})", problem, file.string()));
    }
  }
  return parse_preset("calibration", from_file, json_path, presets.unknown_key_hint(file), [&] {
    calibrate::ProfileFit fit;
    try {
      // A preset keeps its name; a path is named as it resolved (relative to the file that names
      // it), so that `run`'s costs line says which file priced the step.
      fit = calibrate::fit_profile(profile,
                                   file.stem().string() == reference ? reference : file.string());
    } catch (const calibrate::InputError& e) {
      throw ConfigError(file.string(), "", e.what());
    }
    if (fit.curves->collectives().empty() && fit.curves->gemms().empty() &&
        !fit.curves->allocation_costs() && fit.curves->gpu_speeds().empty()) {
      throw ConfigError(
          file.string(), "",
          fmt::format(
              "the profile has no measurement fsdpsim can use ({} series skipped{}); `fsdpsim "
              "calibrate fit {}` says why",
              fit.skipped.size(),
              fit.skipped.empty() ? std::string() : fmt::format(": {}", fit.skipped.front().why),
              file.string()));
    }
    return fit.curves;
  });
}

namespace {

// Whether `cluster`'s stragglers are `measured` (hardware_json.cpp puts them there unless the
// scenario lists its own).
bool simulates(const hardware::ClusterSpec& cluster,
               const std::vector<hardware::Straggler>& measured) {
  return std::equal(cluster.stragglers.begin(), cluster.stragglers.end(), measured.begin(),
                    measured.end(), [](const hardware::Straggler& a, const hardware::Straggler& b) {
                      return a.rank == b.rank && a.compute_speed == b.compute_speed &&
                             a.host_speed == b.host_speed;
                    });
}

// What the measured rank speeds did to `cluster`'s job, or "" when the profile has none.
std::string rank_speed_use(const hardware::CalibratedCurves& curves,
                           const hardware::ClusterSpec& cluster) {
  const std::vector<double>& gpu = curves.gpu_speeds();
  if (gpu.empty()) return "";
  const hardware::RankPacing pacing = hardware::rank_pacing(curves, cluster.world_size());
  const std::string measured = fmt::format(
      "rank speeds of {} rank{} {} measured ({})", gpu.size(), gpu.size() == 1 ? "" : "s",
      curves.speed_ranks_per_node() > 0 ? fmt::format("on {} node{}", pacing.measured_nodes,
                                                      pacing.measured_nodes == 1 ? "" : "s")
                                        : "(nodes not known: each taken as a node of its own)",
      curves.host_speeds().empty() ? "GPUs" : "GPUs and hosts");
  const std::string job =
      pacing.sampled
          ? fmt::format(
                "the job's {} node{}, placed at random among them, can expect on average "
                "as their slowest",
                pacing.job_nodes, pacing.job_nodes == 1 ? "" : "s")
      : pacing.job_nodes > pacing.measured_nodes
          ? fmt::format(
                "the job's {} nodes hold the measured ones (the other {} taken to be like "
                "them); its slowest,",
                pacing.job_nodes, pacing.job_nodes - pacing.measured_nodes)
          : "the job's slowest,";
  if (pacing.stragglers.empty())
    return fmt::format("{}: none of the job's is slower than rank 0", measured);
  std::vector<std::string> slow;
  for (const hardware::Straggler& s : pacing.stragglers) {
    std::vector<std::string> parts;
    if (s.compute_speed < 1.0) parts.push_back(fmt::format("GPU at {:.3f}", s.compute_speed));
    if (s.host_speed < 1.0) parts.push_back(fmt::format("host at {:.3f}", s.host_speed));
    slow.push_back(fmt::format("rank {}'s {}", s.rank, fmt::join(parts, " and ")));
  }
  return fmt::format(
      "{}: {} {} of the measured rank 0's speed, {}", measured, job, fmt::join(slow, "; "),
      simulates(cluster, pacing.stragglers)
          ? "simulated as stragglers (every collective waits for them)"
      : cluster.stragglers.empty() ? "left out by the scenario's hardware.stragglers ([])"
                                   : "replaced by the scenario's hardware.stragglers");
}

// Whether `cluster`'s GPU runs its GEMMs at the fraction its calibration measured
// (hardware_json.cpp puts it there unless the scenario sets its own).
bool simulates_sustained_fraction(const hardware::ClusterSpec& cluster, double measured) {
  return cluster.gpu.sustained_compute_fraction == std::min(1.0, measured);
}

// What the measured sustained GEMM rate did to `cluster`'s GEMMs, or "" when the profile has none.
std::string sustained_fraction_use(const hardware::CalibratedCurves& curves,
                                   const hardware::ClusterSpec& cluster) {
  const std::optional<double> measured = curves.sustained_gemm_fraction();
  if (!measured) return "";
  const std::string kept =
      fmt::format("rank 0 kept {:.3f} of its short GEMM rate under load{}", *measured,
                  *measured > 1.0 ? " (above 1: timer noise, taken as 1)" : "");
  if (simulates_sustained_fraction(cluster, *measured)) {
    return fmt::format(
        "{}: every GEMM runs at that share (hardware.gpu.sustained_compute_fraction)", kept);
  }
  return fmt::format(
      "{}: replaced by the scenario's hardware.gpu.sustained_compute_fraction {:.3f}", kept,
      cluster.gpu.sustained_compute_fraction);
}

// The collective curves a profile holds, as "all_reduce on 8 ranks (8 per node), ...", or "none".
std::string collective_curves_text(const hardware::CalibratedCurves& curves) {
  std::vector<std::string> shown;
  for (const auto& [key, curve] : curves.collectives()) {
    const std::string one =
        fmt::format("{} on {} ranks ({} per node)", calibrate::collective_name(key.op), key.ranks,
                    key.ranks_per_node);
    if (std::find(shown.begin(), shown.end(), one) == shown.end()) shown.push_back(one);
  }
  return shown.empty() ? std::string("none") : fmt::format("{}", fmt::join(shown, ", "));
}

}  // namespace

std::string calibration_usage_line(const hardware::ClusterSpec& cluster, std::size_t label_width) {
  const hardware::CalibratedCurves& curves = *cluster.gpu.calibration;
  const hardware::CalibrationCounts n = curves.usage().counts();
  const std::string speeds = rank_speed_use(curves, cluster);
  const std::string sustained = sustained_fraction_use(curves, cluster);
  // Every line after the first starts under the first's text.
  std::string next_line(label_width + 1, ' ');
  next_line.front() = '\n';
  const std::string text = fmt::format(
      "of the {} collectives and {} GEMMs priced over the warm-up and the measured "
      "step, {} and {} from calibration {}, the rest from the fallback model; "
      "cudaMalloc/cudaFree from {}{}{}{}{}",
      n.collectives_calibrated + n.collectives_fallback, n.gemms_calibrated + n.gemms_fallback,
      n.collectives_calibrated, n.gemms_calibrated, curves.name(),
      curves.allocation_costs() ? "the calibration" : "the hardware preset",
      n.collectives_calibrated == 0 && n.collectives_fallback > 0
          ? fmt::format(
                "{}no collective of this step was priced by a measured curve: a curve serves "
                "only its own collective and group shape (ranks, ranks per node), and not above "
                "its sizes when it stops in the latency regime, nor below them when it starts in "
                "the bandwidth regime (`calibrate fit` names such curves); the profile's curves: "
                "{}",
                next_line, collective_curves_text(curves))
          : "",
      sustained.empty() ? "" : next_line + sustained, speeds.empty() ? "" : next_line + speeds,
      curves.complete() ? ""
                        : next_line +
                              "the profile is incomplete (\"complete\": false): its harness run "
                              "stopped early, so some shapes may be missing from it");
  // Priced from the profile, but not by a measurement of their own: said, as the counts are not.
  std::string beyond;
  if (n.collectives_extrapolated > 0) {
    beyond = fmt::format(
        "{}{} of the calibrated collectives are above their curve's largest measured size (up to "
        "{:.3g}x it), priced by the alpha-beta line through its largest sizes (`calibrate fit`'s "
        "asymptote): measure up to the step's sizes to price them by measurement (`calibrate "
        "plan` marks them)",
        next_line, n.collectives_extrapolated, n.most_extrapolated);
  }
  if (n.gemms_calibrated == 0 && n.gemms_fallback > n.gemms_shapeless && !curves.gemms().empty()) {
    std::set<std::string> dtypes;
    for (const auto& [key, unused] : curves.gemms())
      dtypes.insert(std::string(dtype_name(key.dtype)));
    beyond += fmt::format(
        "{}no GEMM of this step was priced by a measured shape: a measurement serves its own dtype "
        "and shapes within {:g}x of it in each of m, n, k and batch; the profile's GEMMs are {}",
        next_line, hardware::kGemmNeighbourRatio, fmt::join(dtypes, ", "));
  }
  return fmt::format("{:<{}}{}{}", "costs", label_width, text, beyond);
}

nlohmann::json calibration_usage_json(const hardware::ClusterSpec& cluster) {
  const hardware::CalibratedCurves& curves = *cluster.gpu.calibration;
  const hardware::CalibrationCounts n = curves.usage().counts();
  nlohmann::json out{{"profile", curves.name()},
                     {"collectives_calibrated", n.collectives_calibrated},
                     {"collectives_fallback", n.collectives_fallback},
                     {"gemms_calibrated", n.gemms_calibrated},
                     {"gemms_fallback", n.gemms_fallback},
                     {"collectives_extrapolated", n.collectives_extrapolated},
                     {"allocation_costs_calibrated", curves.allocation_costs().has_value()},
                     {"rank_speeds_measured", curves.gpu_speeds().size()},
                     {"profile_complete", curves.complete()}};
  if (const std::optional<double> measured = curves.sustained_gemm_fraction()) {
    out["sustained_gemm_fraction"] = {
        {"measured", round6(*measured)},
        {"simulated", simulates_sustained_fraction(cluster, *measured)}};
  }
  const hardware::RankPacing pacing = hardware::rank_pacing(curves, cluster.world_size());
  if (!pacing.stragglers.empty()) {
    nlohmann::json slow = nlohmann::json::array();
    for (const hardware::Straggler& s : pacing.stragglers) {
      slow.push_back({{"rank", s.rank},
                      {"compute_speed", round6(s.compute_speed)},
                      {"host_speed", round6(s.host_speed)}});
    }
    out["slowest_ranks"] = {{"ranks", slow},
                            {"expected_over_placements", pacing.sampled},
                            {"simulated", simulates(cluster, pacing.stragglers)}};
  }
  return out;
}

}  // namespace fsdpsim::app
