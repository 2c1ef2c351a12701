// JSON <-> calibration profile (calibrate/profile.hpp), and `hardware.calibration` of a scenario:
// a profile name in <configs>/calibration/ or a path relative to the scenario, read, fitted
// (calibrate/fit.hpp) and attached to the GPU spec. Schema: README "Calibrating a new cluster".
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "calibrate/fit.hpp"
#include "calibrate/profile.hpp"
#include "hardware/calibrated_curves.hpp"
#include "hardware/gpu_spec.hpp"
#include "sim/app/preset_paths.hpp"

namespace fsdpsim::app {

inline constexpr const char* kCalibrationProfileKind = "fsdpsim_calibration_profile";
inline constexpr const char* kCalibrationFitKind = "fsdpsim_calibration_fit";

// Throws ConfigError naming `file`, the JSON path, what was expected and what was found.
calibrate::CalibrationProfile profile_from_json(const nlohmann::json& value,
                                                const std::string& file);
nlohmann::ordered_json profile_to_json(const calibrate::CalibrationProfile& profile);
calibrate::CalibrationProfile read_profile(const std::filesystem::path& file);

// The fitted curves and their errors, for plotting and review (`fsdpsim calibrate fit -o`).
nlohmann::ordered_json fit_to_json(const calibrate::ProfileFit& fit,
                                   const std::string& profile_file);

// Reads and fits the profile `reference` names (resolved like presets, kind "calibration").
// Throws ConfigError, naming `from_file` and `json_path` when the reference is wrong and the
// profile file when its content is, when nothing in it can be used, and when its device gives
// neither an SM count nor a memory size (then no scenario could check it). With `cluster`, also
// when the profile was measured on another GPU (calibration_device_mismatch) or holds a
// measurement that GPU and its links cannot have made (calibration_beyond_hardware).
std::shared_ptr<const hardware::CalibratedCurves> load_calibration(
    const std::string& reference, const std::filesystem::path& from_file,
    const std::string& json_path, const PresetLocator& presets,
    const hardware::ClusterSpec* cluster = nullptr);

// Why a device name (nvidia-smi's, as "NVIDIA A100-SXM4-80GB") is not the GPU of hardware preset
// `preset` (named "<model>-<form>-<memory>gb", as "a100-sxm-80gb"), or "": the model must appear
// in the name, and a memory size the name gives must be the preset's; an SXM preset is no PCIe
// or NVL card or MIG slice. A name not given is not compared, nor is the model of a preset whose
// name does not give one. The message starts "<subject> <device>" ("the logs ran on ...").
std::string device_name_mismatch(const std::string& device, const std::string& preset,
                                 const std::string& subject);

// Why a profile measured on `device` cannot price `gpu`, or "" when it can: a different SM count
// or total memory (more than 2 % apart), or a device name that names another model
// (device_name_mismatch), means another GPU model, whose GEMM rates, allocator timings and
// collective curves are not this one's. A field the profile leaves out is not
// compared (the reference A100 profiles give the SM count alone: one profile serves the 40 and
// 80 GB parts); load_calibration refuses a profile that gives neither.
std::string calibration_device_mismatch(const calibrate::DeviceInfo& device,
                                        const hardware::GpuSpec& gpu);

// The first measurement of `profile` that `cluster`'s GPU and links cannot have made, or "": a
// GEMM faster than the GPU's dense peak for its dtype (by more than kPeakTolerance: rounding of
// the timer), or a collective whose bus bandwidth exceeds twice the NVLink line rate (NVLink
// SHARP all-reduce reaches about 1.07x of it on H100, NCCL 2.18 release notes / nccl-tests
// results; nothing reaches 2x), or, across nodes, more than the scenario's NICs can carry (a
// ring's busbw is at most their rate times (n - 1) / (n - g) for n ranks, g per node; twice that
// for an all-reduce, kPeakTolerance on top). Such numbers are a unit slip (ms written as us) or
// another machine's (a faster network's: the scenario's own NIC setting would then do nothing),
// and would give an MFU above 100 %. The other way, a large GEMM (kLargeGemmFlops and
// up) under kSlowestShareOfLineRate of the dense peak, or a large collective (kLargeCollective
// bytes and up, kLargeCollectiveShare per rank) under that share of its link's line rate (NVLink
// inside a node, the node's NICs across nodes), is a time or size in the wrong unit (ns written as
// us, KiB as bytes): real ones reach tens of percent of either, and a thousandfold slower profile
// would price a step in minutes without a word. A smaller collective under that share is taken
// for such a slip too when it also lasts over kLatencyAllowance times its group's ring latency
// (collective_latency, NCCL's own latency model): a small collective may be latency-bound, but
// not a hundred latencies long, which catches a curve measured to below kLargeCollective whose
// sizes were written in KiB.
inline constexpr double kPeakTolerance = 1.05;
inline constexpr double kMaxBusBandwidthOverNvlink = 2.0;
inline constexpr double kSlowestShareOfLineRate = 0.01;
inline constexpr double kLargeGemmFlops = 1e10;
inline constexpr std::int64_t kLargeCollective = std::int64_t{64} << 20;
inline constexpr std::int64_t kLargeCollectiveShare = std::int64_t{1} << 20;
inline constexpr double kLatencyAllowance = 100.0;
std::string calibration_beyond_hardware(const calibrate::CalibrationProfile& profile,
                                        const hardware::ClusterSpec& cluster);

// What a simulation priced from the calibration and what from the fallback models (the
// curves' usage counters): one summary line, and the result JSON's "calibration" object.
// `cluster` carries the calibration (gpu.calibration set); the line also says what the profile's
// rank speeds did to its job (hardware::rank_pacing). The line starts with the label "costs"
// padded to `label_width`, the column where its text and that of its further lines begin (run's
// summary: 11, explain's report: 16).
std::string calibration_usage_line(const hardware::ClusterSpec& cluster,
                                   std::size_t label_width = 11);
// (and its JSON: "rank_speeds_measured", and "slowest_ranks" when one of the job's is slower than
// rank 0, with whether they are simulated as stragglers).
nlohmann::json calibration_usage_json(const hardware::ClusterSpec& cluster);

}  // namespace fsdpsim::app
