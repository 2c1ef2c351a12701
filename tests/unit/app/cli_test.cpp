// The fsdpsim binary as a user runs it: exit codes, messages for bad input, determinism,
// outputs written atomically.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim/app/config_error.hpp"
#include "sim/app/csv_records.hpp"
#include "sim/app/json_file.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using fsdpsim::find_control_character;
using fsdpsim::app::parse_csv_line;
using fsdpsim::test_support::Outcome;
using fsdpsim::test_support::read_file;
using fsdpsim::test_support::run_fsdpsim;

const std::string kScenario =
    std::string(FSDPSIM_SOURCE_DIR) + "/scenarios/paper/gpt175b_128xa100_bs1.json";
// Llama-3.1-8B on one 8x H100 node: FlashAttention, fp8 tensor cores.
const std::string kLlamaScenario =
    std::string(FSDPSIM_SOURCE_DIR) + "/scenarios/llama3_8b_8xh100.json";

fs::path temp_dir() { return fsdpsim::test_support::temp_dir("cli"); }

// The default scenario with `patch` merged in (null deletes a key).
fs::path scenario_with(const std::string& name, const nlohmann::json& patch) {
  std::ifstream in(kScenario);
  return fsdpsim::test_support::write_scenario(temp_dir(), name, nlohmann::json::parse(in), patch);
}

// A preset file behind a link that loops is named as unreadable, with the system's reason, not
// as missing.
TEST(Cli, APresetLinkThatLoopsIsUnreadableNotMissing) {
  const fs::path p = scenario_with("looping_model", {{"model", "loop.json"}});
  std::error_code ec;
  fs::remove(p.parent_path() / "loop.json", ec);
  fs::create_symlink(p.parent_path() / "loop.json", p.parent_path() / "loop.json");
  const Outcome o = run_fsdpsim("run " + p.string());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("/model: models file \"" + (p.parent_path() / "loop.json").string() +
                          "\" cannot be read (Too many levels of symbolic links)"),
            std::string::npos)
      << o.output;
}

// A small model's size is shown at a scale that shows it, not as "0.00 B".
TEST(Cli, ASmallModelsParametersAreCounted) {
  const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                " --set model.n_layers=1 --set model.d_model=64 --set "
                                "model.n_heads=1 --set model.n_kv_heads=1 --set model.ffn_dim=128 "
                                "--set model.vocab=100");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("): 53952 parameters, 1 layer, d_model 64\n"), std::string::npos)
      << o.output;
  const Outcome mid =
      run_fsdpsim("run " + kLlamaScenario + " --set model=mpt-125m --set training.seq_len=2048");
  EXPECT_NE(mid.output.find(" M parameters, 12 layers"), std::string::npos) << mid.output;
}

// An unknown command is named, with the commands there are; no command at all says so.
TEST(Cli, AnUnknownCommandIsNamed) {
  const Outcome unknown = run_fsdpsim("rn scenario.json");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("unknown command \"rn\": expected one of run, sweep, merge, "
                                "check, validate, explain, report, calibrate"),
            std::string::npos)
      << unknown.output;
  const Outcome none = run_fsdpsim("");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("A subcommand is required"), std::string::npos) << none.output;
}

TEST(Cli, VersionAndHelpExitZero) {
  EXPECT_EQ(run_fsdpsim("--version").exit_code, 0);
  const Outcome help = run_fsdpsim("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("run"), std::string::npos);
  const Outcome run_help = run_fsdpsim("run --help");
  EXPECT_EQ(run_help.exit_code, 0);
  // Every command says what its exit codes mean.
  for (const char* command : {"run", "explain", "sweep", "merge", "report", "check", "validate"}) {
    const Outcome o = run_fsdpsim(std::string(command) + " --help");
    EXPECT_EQ(o.exit_code, 0) << command;
    EXPECT_NE(o.output.find("Exit codes"), std::string::npos) << command << "\n" << o.output;
  }
  // Every knob is documented, with PyTorch's name for it.
  for (const char* knob : {"parallelism",
                           "global_batch",
                           "micro_batch",
                           "seq_len",
                           "activation_checkpointing",
                           "checkpoint_every_n_blocks",
                           "no_sync",
                           "param_storage_dtype",
                           "optimizer",
                           "flash_attention",
                           "matmul_dtype",
                           "Float8Linear",
                           "compiled",
                           "torch.compile",
                           "version",
                           "sharding_strategy",
                           "shard_group_size",
                           "backward_prefetch",
                           "forward_prefetch",
                           "limit_all_gathers",
                           "max_inflight_all_gathers",
                           "reshard_after_forward",
                           "last_unit_reshard_after_forward",
                           "forward_prefetch_modules",
                           "backward_prefetch_modules",
                           "root_reshard_after_forward",
                           "logits_kept_by_loop",
                           "param_dtype",
                           "reduce_dtype",
                           "cpu_offload",
                           "float8_all_gather",
                           "enable_fsdp_float8_all_gather",
                           "precompute_float8_scale",
                           "precompute_float8_dynamic_scale_for_fsdp",
                           "wrap_policy",
                           "blocks_per_unit",
                           "bucket_cap_mb",
                           "broadcast_buffers",
                           "buffer_dtype",
                           "causal_mask_buffer",
                           "BackwardPrefetch",
                           "ShardingStrategy",
                           "MixedPrecision",
                           "CPUOffload",
                           "_FreeEventQueue"}) {
    EXPECT_NE(run_help.output.find(knob), std::string::npos) << knob;
  }
}

TEST(Cli, DefaultScenarioPrintsASummary) {
  const Outcome o = run_fsdpsim("run " + kScenario);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  for (const char* text : {"step time", "tokens/s/GPU", "TFLOPS/GPU", "MFU / HFU", "peak allocated",
                           "forward", "backward", "optimizer", "exposed comm", "status"}) {
    EXPECT_NE(o.output.find(text), std::string::npos) << text << "\n" << o.output;
  }
}

// How much of the collectives' time compute hid is computed, not asserted: the paper's GPT-175B
// hides nearly all of it, the same model behind a 1 Gb/s network almost none.
TEST(Cli, SummarySaysHowMuchCommunicationOverlapped) {
  const Outcome hidden = run_fsdpsim("run " + kScenario);
  ASSERT_EQ(hidden.exit_code, 0) << hidden.output;
  EXPECT_NE(hidden.output.find("in all, 99% of it overlapped with compute)"), std::string::npos)
      << hidden.output;
  const Outcome exposed = run_fsdpsim("run " + kLlamaScenario +
                                      " --set hardware.nodes=2 --set training.global_batch=32 "
                                      "--set hardware.node.nic_Gbps_per_node=1");
  ASSERT_EQ(exposed.exit_code, 0) << exposed.output;
  EXPECT_NE(exposed.output.find("in all, 0% of it overlapped with compute)"), std::string::npos)
      << exposed.output;
}

TEST(Cli, ResultJsonOnStdoutHasTheStableKeys) {
  const Outcome o = run_fsdpsim("run " + kScenario + " --json -");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json j = nlohmann::json::parse(o.output);
  for (const char* key : {"schema", "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                          "hardware_tflops_per_gpu", "mfu", "hfu", "peak_mem_allocated_gib",
                          "peak_mem_reserved_gib", "status", "breakdown"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["schema"], "fsdpsim.result/1");
}

// stdout is the trace or the memory timeline alone; the summary goes to stderr.
TEST(Cli, ATraceOrTimelineOnStdoutIsAloneThere) {
  const std::string tiny = " --set model.n_layers=2";
  const Outcome trace = run_fsdpsim("run " + kScenario + tiny + " --trace - | cat");
  const nlohmann::json j = nlohmann::json::parse(trace.output);  // throws on a summary after it
  EXPECT_TRUE(j.contains("traceEvents"));
  const Outcome timeline = run_fsdpsim("run " + kScenario + tiny + " --memory-timeline - | cat");
  EXPECT_EQ(timeline.output.rfind("time_s,", 0), 0U) << timeline.output.substr(0, 200);
  EXPECT_EQ(timeline.output.find("scenario "), std::string::npos);
  const Outcome both = run_fsdpsim("run " + kScenario + tiny + " --trace -");
  EXPECT_EQ(both.exit_code, 0) << both.output;
  EXPECT_NE(both.output.find("step time"), std::string::npos) << "the summary is on stderr";
}

TEST(Cli, SameScenarioTwiceGivesByteIdenticalJson) {
  const fs::path dir = temp_dir();
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --json " + (dir / "a.json").string()).exit_code, 0);
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --json " + (dir / "b.json").string()).exit_code, 0);
  const std::string a = read_file(dir / "a.json");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, read_file(dir / "b.json"));
}

TEST(Cli, SetOverridesChangeTheResult) {
  const Outcome base = run_fsdpsim("run " + kScenario + " --json -");
  const Outcome changed =
      run_fsdpsim("run " + kScenario +
                  " --json - --set fsdp.backward_prefetch=none --set training.micro_batch=2"
                  " --set training.global_batch=256");
  ASSERT_EQ(changed.exit_code, 0) << changed.output;
  const auto a = nlohmann::json::parse(base.output);
  const auto b = nlohmann::json::parse(changed.output);
  EXPECT_EQ(b["tokens_per_step_per_gpu"], 2 * a["tokens_per_step_per_gpu"].get<int>());
  EXPECT_NE(a["step_time_s"], b["step_time_s"]);
}

// torchtitan's op policy sits between no checkpointing and full: it recomputes less than a whole
// block (three of seven linears, the norms and elementwise ops) and keeps more than its input
// (four linears' outputs and the attention's).
TEST(Cli, OpPolicyCheckpointingLiesBetweenNoneAndFull) {
  std::map<std::string, nlohmann::json> results;
  for (const char* ac : {"none", "selective_op", "full"}) {
    const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                  " --json - --set training.activation_checkpointing=" + ac);
    ASSERT_EQ(o.exit_code, 0) << o.output;
    results[ac] = nlohmann::json::parse(o.output);
  }
  const auto step = [&](const char* ac) { return results[ac]["step_time_s"].get<double>(); };
  const auto peak = [&](const char* ac) {
    return results[ac]["peak_mem_allocated_gib"].get<double>();
  };
  EXPECT_LT(step("none"), step("selective_op"));
  EXPECT_LT(step("selective_op"), step("full"));
  EXPECT_LT(peak("full"), peak("selective_op"));
  EXPECT_LT(peak("selective_op"), peak("none"));
  const Outcome text = run_fsdpsim("run " + kLlamaScenario +
                                   " --set training.activation_checkpointing=selective_op");
  EXPECT_NE(text.output.find("checkpointing selective_op"), std::string::npos) << text.output;
}

TEST(Cli, EagerRmsNormSlowsALlamaStep) {
  const Outcome fused = run_fsdpsim("run " + kLlamaScenario + " --json -");
  const Outcome eager =
      run_fsdpsim("run " + kLlamaScenario + " --json - --set training.rms_norm=eager");
  ASSERT_EQ(fused.exit_code, 0) << fused.output;
  ASSERT_EQ(eager.exit_code, 0) << eager.output;
  EXPECT_GT(nlohmann::json::parse(eager.output)["step_time_s"].get<double>(),
            nlohmann::json::parse(fused.output)["step_time_s"].get<double>());
  // On minGPT, which normalizes with nn.LayerNorm, it is refused: CliBadInput's
  // rms_norm_on_layernorm_model.
}

// A scenario within every size bound can need more memory than the machine gives: 1,024
// micro-batches of GPT-175B under a 1.5 GB address-space limit. run says so (exit 2), and a sweep
// keeps its other points. (AddressSanitizer reserves terabytes of address space and aborts
// rather than throwing, so the sanitizer build skips this.)
TEST(Cli, OutOfHostMemoryIsAnErrorAndASweepKeepsItsOtherPoints) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ulimit -v and AddressSanitizer do not mix";
#endif
  const std::string limit = "ulimit -v 1500000 && ";
  const Outcome run =
      run_fsdpsim("run " + kScenario + " --set training.global_batch=131072", limit);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("error: " + kScenario + ": out of host memory"), std::string::npos)
      << run.output;
  const Outcome sweep =
      run_fsdpsim("sweep " + kScenario + " --grid training.global_batch=128,131072 --out -", limit);
  EXPECT_EQ(sweep.exit_code, 0) << sweep.output;
  EXPECT_NE(sweep.output.find("\n0,128,ok,"), std::string::npos) << sweep.output;
  EXPECT_NE(sweep.output.find("\n1,131072,skipped,out of host memory"), std::string::npos)
      << sweep.output;
  // Its trace asked for: the table is written, the trace is not, and the exit code says so.
  const fs::path table = temp_dir() / "oom_trace.csv";
  const Outcome traced = run_fsdpsim(
      "sweep " + kScenario + " --grid training.global_batch=128,131072 --out " + table.string() +
          " --trace-row 1 --trace " + (temp_dir() / "oom_trace.json").string(),
      limit);
  EXPECT_EQ(traced.exit_code, 2) << traced.output;
  EXPECT_NE(traced.output.find("error: --trace-row 1: out of host memory simulating the point "
                               "again"),
            std::string::npos)
      << traced.output;
  EXPECT_NE(read_file(table).find("\n0,128,ok,"), std::string::npos);
  EXPECT_FALSE(fs::exists(temp_dir() / "oom_trace.json"));
  // check reports that scenario as an error and still checks and reports the others.
  const fs::path small = scenario_with("check_small", {{"expect", {{"status", "ok"}}}});
  const fs::path huge = scenario_with(
      "check_huge", {{"training", {{"global_batch", 131072}}}, {"expect", {{"status", "ok"}}}});
  const fs::path junit = temp_dir() / "check_oom.xml";
  const Outcome check = run_fsdpsim(
      "check " + small.string() + " " + huge.string() + " --junit " + junit.string(), limit);
  EXPECT_EQ(check.exit_code, 2) << check.output;
  EXPECT_NE(check.output.find("PASS " + small.string() + " status = \"ok\""), std::string::npos)
      << check.output;
  EXPECT_NE(check.output.find("ERROR " + huge.string() + ": out of host memory"), std::string::npos)
      << check.output;
  EXPECT_NE(read_file(junit).find("errors=\"1\""), std::string::npos);
}

// The heap's slack for the next simulation (main.cpp, M_TOP_PAD) is part of every heap
// extension, the first included: under an address-space limit with no room for it, every
// command aborted (std::bad_alloc while building the parser) before this limit was checked.
TEST(Cli, ASmallAddressSpaceLimitStillRunsSmallCommands) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ulimit -v and AddressSanitizer do not mix";
#endif
  const std::string limit = "ulimit -v 250000 && ";
  const Outcome version = run_fsdpsim("--version", limit);
  EXPECT_EQ(version.exit_code, 0) << version.output;
  const Outcome run = run_fsdpsim("run " + kScenario + " --json -", limit);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"step_time_s\""), std::string::npos) << run.output;
}
TEST(Cli, TraceIsChromeTraceEventJson) {
  const fs::path trace = temp_dir() / "t.trace.json";
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --trace " + trace.string()).exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(read_file(trace));
  ASSERT_TRUE(j["traceEvents"].is_array());
  int complete = 0;
  int counters = 0;
  std::set<std::string> threads;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name"));
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_TRUE(e.contains("ts") && e.contains("tid"));
    }
    if (e["ph"] == "C") ++counters;
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threads.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_GT(complete, 1000);
  EXPECT_GT(counters, 10);
  EXPECT_TRUE(threads.count("CPU thread"));
  EXPECT_TRUE(threads.count("stream compute"));
  EXPECT_TRUE(threads.count("stream unshard"));
  EXPECT_TRUE(threads.count("stream post_backward"));
}

// The measured step's memory (from its start; the warm-up step before it is left out), so that
// its maxima are the result's peaks, under FSDP1 and FSDP2 (whose CPU, never blocked, allocates
// the measured step's tensors long before the GPU ends the warm-up step).
// --allocations lists the measured step's tensors as the CPU allocates and frees them. They
// account for every byte: their running sum falls from its peak to the step's end by as much as
// the memory timeline's allocated column does.
TEST(Cli, AllocationsAccountForTheStepsMemory) {
  const fs::path csv = temp_dir() / "allocations.csv";
  const fs::path timeline = temp_dir() / "allocations_timeline.csv";
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --allocations " + csv.string() +
                        " --memory-timeline " + timeline.string())
                .exit_code,
            0);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string line;
  std::ifstream timeline_in(timeline);
  std::getline(timeline_in, line);
  double timeline_peak = 0.0;
  double timeline_end = 0.0;
  while (std::getline(timeline_in, line)) {
    const std::size_t comma = line.find(',');
    timeline_end = std::stod(line.substr(comma + 1, line.find(',', comma + 1) - comma - 1));
    timeline_peak = std::max(timeline_peak, timeline_end);
  }

  std::ifstream in(csv);
  std::getline(in, line);
  EXPECT_EQ(line, "time_s,action,bytes,stream,category,tensor");
  double last_time = -1.0;
  double live = 0.0;
  double peak = 0.0;
  int allocations = 0;
  int frees = 0;
  std::set<std::string> streams;
  while (std::getline(in, line)) {
    const std::optional<std::vector<std::string>> fields = parse_csv_line(line);
    ASSERT_TRUE(fields.has_value()) << line;
    const std::vector<std::string>& v = *fields;
    ASSERT_EQ(v.size(), 6u) << line;
    if (allocations == 0 && frees == 0) {
      EXPECT_EQ(v[1], "alloc") << "the list starts with the step's first allocation";
    }
    EXPECT_GE(std::stod(v[0]), last_time) << line;
    last_time = std::stod(v[0]);
    if (v[1] == "alloc") {
      live += std::stod(v[2]);
      ++allocations;
    } else {
      ASSERT_EQ(v[1], "free") << line;
      live -= std::stod(v[2]);
      ++frees;
    }
    peak = std::max(peak, live);
    streams.insert(v[3]);
    EXPECT_FALSE(v[4].empty());
    EXPECT_FALSE(v[5].empty());
  }
  EXPECT_GT(allocations, 100);
  EXPECT_GT(frees, 100);
  EXPECT_TRUE(streams.count("compute")) << "activations on the compute stream";
  EXPECT_GT(streams.size(), 1u) << "collective buffers on their own streams";
  EXPECT_GT(timeline_peak - timeline_end, 1.0);
  // The timeline counts whole allocator blocks: a request rounds up to 512 B, and a cached block
  // less than 1 MiB larger than it is not split (CUDACachingAllocator.cpp round_size,
  // should_split), so the timeline's peak may exceed the requests' by a little.
  EXPECT_GE(timeline_peak - timeline_end, (peak - live) / kGiB - 1e-6);
  EXPECT_LT(timeline_peak - timeline_end, (peak - live) / kGiB + 1e-2);
  // One step's outputs are the scenario's; the micro-batch search has none.
  EXPECT_EQ(run_fsdpsim("run " + kScenario + " --max-micro-batch --allocations " + csv.string())
                .exit_code,
            2);
}

TEST(Cli, MemoryTimelineIsACsvOfTheStep) {
  const fs::path csv = temp_dir() / "memory.csv";
  const fs::path json = temp_dir() / "memory_result.json";
  // The third: 12 slow nodes of 16, whose class the breakdown describes, while the 32 fast
  // ranks need the most memory: the timeline is theirs, as the memory figures are.
  const std::string stragglers =
      R"( --set 'hardware.stragglers=[{"nodes":[1,2,3,4,5,6,7,8,9,10,11,12],)"
      R"("compute_speed":0.7}]')";
  for (const std::string& variant :
       {std::string(), std::string(" --set fsdp.version=2 --set fsdp.limit_all_gathers=false"),
        stragglers}) {
    SCOPED_TRACE(variant);
    ASSERT_EQ(run_fsdpsim("run " + kScenario + variant + " --memory-timeline " + csv.string() +
                          " --json " + json.string())
                  .exit_code,
              0);
    const nlohmann::json result = nlohmann::json::parse(read_file(json));
    if (variant == stragglers) {
      EXPECT_NE(result["memory_rank"], result["breakdown_rank"]);
    }
    std::ifstream in(csv);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "time_s,allocated_gib,active_gib,reserved_gib");
    double last_time = -1.0;
    double max_reserved = 0.0;
    double max_active = 0.0;
    double max_allocated = 0.0;
    int rows = 0;
    while (std::getline(in, line)) {
      std::stringstream row(line);
      std::string cell;
      std::vector<double> v;
      while (std::getline(row, cell, ',')) v.push_back(std::stod(cell));
      ASSERT_EQ(v.size(), 4u) << line;
      EXPECT_GE(v[0], last_time);
      EXPECT_GE(v[3] + 1e-6, v[2]) << "reserved >= active";
      last_time = v[0];
      max_reserved = std::max(max_reserved, v[3]);
      max_active = std::max(max_active, v[2]);
      max_allocated = std::max(max_allocated, v[1]);
      ++rows;
    }
    EXPECT_GT(rows, 100);
    EXPECT_GT(max_reserved, 30.0);
    EXPECT_NEAR(max_reserved, result["peak_mem_reserved_gib"].get<double>(), 1e-4);
    EXPECT_NEAR(max_active, result["peak_mem_active_gib"].get<double>(), 1e-4);
    EXPECT_NEAR(max_allocated, result["peak_mem_allocated_gib"].get<double>(), 1e-4);
  }

  // Without the allocator model, reserved is its lower bound (active) in both outputs.
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --set allocator.enabled=false --memory-timeline " +
                        csv.string() + " --json " + json.string())
                .exit_code,
            0);
  double max_lower_bound = 0.0;
  std::ifstream again(csv);
  std::string line;
  std::getline(again, line);
  while (std::getline(again, line))
    max_lower_bound = std::max(max_lower_bound, std::stod(line.substr(line.rfind(',') + 1)));
  EXPECT_NEAR(max_lower_bound,
              nlohmann::json::parse(read_file(json))["peak_mem_reserved_gib"].get<double>(), 1e-4);
}

// A hostile file nested 100,000 deep (arrays in hardware.node) or a --set value nested 100 deep
// is refused at the JSON path, before any recursive walk could exhaust the stack.
TEST(Cli, DeeplyNestedJsonIsRefusedNotACrash) {
  const fs::path deep = temp_dir() / "deep.json";
  {
    std::string text = read_file(kScenario);
    const std::string node = "\"node\": {";
    const std::size_t at = text.find(node);
    ASSERT_NE(at, std::string::npos);
    const std::size_t end = text.find('}', at);
    text.replace(at, end - at + 1,
                 "\"node\": " + std::string(100000, '[') + std::string(100000, ']'));
    std::ofstream(deep) << text;
  }
  const Outcome o = run_fsdpsim("run " + deep.string());
  EXPECT_EQ(o.exit_code, 2) << o.output.substr(0, 500);
  // The path goes down to the array that is one too deep: 62 arrays inside /hardware/node.
  std::string path = "/hardware/node";
  for (int i = 0; i < 62; ++i) path += "/0";
  EXPECT_NE(o.output.find("deep.json: " + path + ": nested deeper than 64 levels"),
            std::string::npos)
      << o.output.substr(0, 500);
  const Outcome set =
      run_fsdpsim("run " + kScenario + " --set 'training.micro_batch=" + std::string(100, '[') +
                  std::string(100, ']') + "'");
  EXPECT_EQ(set.exit_code, 2) << set.output;
  EXPECT_NE(set.output.find("nested deeper than 64 levels"), std::string::npos) << set.output;
  // A --set value is checked as a file is: a key given twice is refused, not dropped.
  const Outcome twice =
      run_fsdpsim("run " + kScenario + " --set 'training={\"micro_batch\":1,\"micro_batch\":2}'");
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_NE(twice.output.find("/micro_batch: key given twice in the same object"),
            std::string::npos)
      << twice.output;
  // An empty key is a key: the path shows it.
  const Outcome empty_key =
      run_fsdpsim("run " + kScenario + " --set 'training={\"\":{\"a\":1,\"a\":2}}'");
  EXPECT_EQ(empty_key.exit_code, 2) << empty_key.output;
  EXPECT_NE(empty_key.output.find("//a: key given twice in the same object"), std::string::npos)
      << empty_key.output;
  // Inside an array the path names the element.
  const Outcome in_array =
      run_fsdpsim("run " + kScenario +
                  " --set 'hardware.stragglers=[{\"ranks\":[1],\"compute_speed\":0.9},"
                  "{\"ranks\":[2],\"compute_speed\":0.9,\"compute_speed\":0.8}]'");
  EXPECT_EQ(in_array.exit_code, 2) << in_array.output;
  EXPECT_NE(in_array.output.find("/1/compute_speed: key given twice in the same object"),
            std::string::npos)
      << in_array.output;
}

// Several outputs of one run are written together or not at all: a path that cannot be written
// leaves the others unwritten (and no staging files behind).
TEST(Cli, OutputsAreWrittenAllOrNone) {
  const fs::path dir = temp_dir() / "all_or_none";
  fs::create_directories(dir);
  const fs::path json = dir / "result.json";
  const Outcome o = run_fsdpsim("run " + kScenario + " --json " + json.string() +
                                " --memory-timeline " + (dir / "missing" / "m.csv").string());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("cannot write"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(json));
  EXPECT_TRUE(fs::is_empty(dir)) << "no staging file is left";
}

// An output that replaces a file keeps that file's permissions (a private result stays
// private), and a file its owner made read-only is refused, as a shell's redirect refuses it.
TEST(Cli, AReplacedOutputKeepsItsPermissions) {
  const fs::path dir = temp_dir() / "permissions";
  fs::create_directories(dir);
  const fs::path json = dir / "private.json";
  std::ofstream(json) << "old\n";
  fs::permissions(json, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  const Outcome o = run_fsdpsim("run " + kScenario + " --json " + json.string());
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(read_file(json), "old\n");
  EXPECT_EQ(fs::status(json).permissions(), fs::perms::owner_read | fs::perms::owner_write);

  // Read-only to its owner (root writes such a file, as its shell would) or immutable (to all).
  const std::string before = read_file(json);
  const auto expect_refused = [&](const std::string& how) {
    const Outcome again = run_fsdpsim("run " + kScenario + " --json " + json.string());
    EXPECT_EQ(again.exit_code, 2) << how << "\n" << again.output;
    EXPECT_NE(again.output.find("cannot write " + json.string() + ": the file is not writable"),
              std::string::npos)
        << how << "\n"
        << again.output;
    EXPECT_EQ(read_file(json), before) << how;
  };
  if (::geteuid() != 0) {
    fs::permissions(json, fs::perms::owner_read, fs::perm_options::replace);
    expect_refused("read-only");
    fs::permissions(json, fs::perms::owner_write, fs::perm_options::add);
  }
  if (std::system(("chattr +i " + json.string() + " 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "chattr +i is not available here";
  expect_refused("immutable");
  EXPECT_EQ(std::system(("chattr -i " + json.string()).c_str()), 0);
}

// A streamed output (the trace) is written piece by piece as it is made, with the other outputs,
// all or none.
TEST(Cli, AStreamedOutputIsWrittenAsItsPieces) {
  const fs::path dir = temp_dir() / "streamed";
  fs::create_directories(dir);
  const fs::path streamed = dir / "streamed.json";
  const fs::path whole = dir / "whole.json";
  fsdpsim::app::write_outputs({{streamed.string(), "unused",
                                [](const fsdpsim::app::TextSink& sink) {
                                  for (const char* piece : {"[1", ",2", "]\n"}) sink(piece);
                                }},
                               {whole.string(), "{}\n"}});
  EXPECT_EQ(read_file(streamed), "[1,2]\n");
  EXPECT_EQ(read_file(whole), "{}\n");
}

// A signal that comes while a streamed output is written stops it: no output lands, no staged file
// is left, and the signal takes its course (here a handler, which sees it; unhandled, it ends the
// process, as the next test checks).
TEST(Cli, ASignalStopsAStreamedOutputAndLeavesNothing) {
  const fs::path dir = temp_dir() / "streamed_interrupted";
  fs::remove_all(dir);
  fs::create_directories(dir);
  static volatile std::sig_atomic_t handled = 0;
  handled = 0;
  struct sigaction on_hangup {};
  on_hangup.sa_handler = [](int) { handled = 1; };
  struct sigaction previous {};
  ASSERT_EQ(::sigaction(SIGHUP, &on_hangup, &previous), 0);
  int pieces_after_signal = 0;
  const auto interrupted = [&pieces_after_signal](const fsdpsim::app::TextSink& sink) {
    sink("[1");
    std::raise(SIGHUP);  // held back while the outputs are staged
    for (int i = 0; i < 1000; ++i) {
      sink(",2");
      ++pieces_after_signal;
    }
    sink("]\n");
  };
  std::string message;
  try {
    fsdpsim::app::write_outputs({{(dir / "plain.json").string(), "{}\n"},
                                 {(dir / "streamed.json").string(), "", interrupted}});
  } catch (const fsdpsim::app::ConfigError& e) {
    message = e.what();
  }
  ::sigaction(SIGHUP, &previous, nullptr);
  EXPECT_EQ(message, "interrupted while writing the outputs");
  EXPECT_EQ(handled, 1);
  EXPECT_EQ(pieces_after_signal, 0) << "the piece after the signal stops the writing";
  EXPECT_TRUE(fs::is_empty(dir)) << "no output and no staging file is left";
}

// A signal the process ignores (nohup ignores SIGHUP, a shell its background jobs' SIGINT) does
// not stop the writing: every output lands.
TEST(Cli, AnIgnoredSignalWhileStreamingChangesNothing) {
  const fs::path dir = temp_dir() / "streamed_ignored";
  fs::remove_all(dir);
  fs::create_directories(dir);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction previous {};
  ASSERT_EQ(::sigaction(SIGHUP, &ignore, &previous), 0);
  const auto hung_up = [](const fsdpsim::app::TextSink& sink) {
    sink("[1");
    std::raise(SIGHUP);
    sink(",2]\n");
  };
  std::string message;
  try {
    fsdpsim::app::write_outputs(
        {{(dir / "plain.json").string(), "{}\n"}, {(dir / "streamed.json").string(), "", hung_up}});
  } catch (const fsdpsim::app::ConfigError& e) {
    message = e.what();
  }
  ::sigaction(SIGHUP, &previous, nullptr);
  EXPECT_EQ(message, "");
  EXPECT_EQ(read_file(dir / "streamed.json"), "[1,2]\n");
  EXPECT_EQ(read_file(dir / "plain.json"), "{}\n");
}

TEST(Cli, AnUnhandledSignalWhileStreamingEndsTheProcessAndLeavesNothing) {
  const fs::path dir = temp_dir() / "streamed_killed";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto interrupted = [](const fsdpsim::app::TextSink& sink) {
    sink("[1");
    std::raise(SIGINT);
    for (int i = 0; i < 1000; ++i) sink(",2");
    sink("]\n");
  };
  // Forked ("fast" style), so that the child writes into this process's scratch folder.
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(
      {
        std::signal(SIGINT, SIG_DFL);
        fsdpsim::app::write_outputs({{(dir / "plain.json").string(), "{}\n"},
                                     {(dir / "streamed.json").string(), "", interrupted}});
      },
      testing::KilledBySignal(SIGINT), "");
  EXPECT_TRUE(fs::is_empty(dir)) << "no output and no staging file is left";
}

// A file the scenario names (a preset, a profile) is an input too: an output there is refused
// and the file kept.
TEST(Cli, AnOutputOverAFileTheScenarioNamesIsRefused) {
  const fs::path profile = temp_dir() / "own_profile.json";
  fs::copy_file(fs::path(FSDPSIM_CONFIGS_DIR) / "calibration" / "a100-sxm-80gb.json", profile,
                fs::copy_options::overwrite_existing);
  const std::string before = read_file(profile);
  for (const std::string& command : {std::string("run"), std::string("explain")}) {
    const Outcome o =
        run_fsdpsim(command + " " + kScenario + " --set hardware.calibration=" + profile.string() +
                    " --json " + profile.string());
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("writing the output there would destroy it"), std::string::npos)
        << o.output;
  }
  EXPECT_EQ(read_file(profile), before);
}

// An output that cannot be written is found before anything is simulated: a sweep or a folder
// of checks can run for hours, and their results would be lost at the end.
TEST(Cli, AnUnwritableOutputFailsBeforeTheWork) {
  const std::string missing = (temp_dir() / "no_such_folder" / "out").string();
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"sweep " + kScenario + " --grid training.micro_batch=1,2 --out " + missing + ".csv",
       "best that fits"},
      {"check " + kScenario + " --junit " + missing + ".xml", "PASS"},
      {"validate " + std::string(FSDPSIM_TEST_DATA_DIR) + "/validation/small_cases.csv --md " +
           missing + ".md",
       "validated"},
      {"explain " + kScenario + " --json " + missing + ".json", "step time"},
      {"run " + kScenario + " --trace " + missing + ".trace", "step time"}};
  for (const auto& [command, printed_after_the_work] : commands) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("cannot write " + missing), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("the folder"), std::string::npos) << o.output;
    EXPECT_EQ(o.output.find(printed_after_the_work), std::string::npos) << command << "\n"
                                                                        << o.output;
  }
}

// An output path that is a symbolic link is written through to the file it names, as a shell
// redirect would, and a FIFO is written in place: neither is replaced by a regular file.
TEST(Cli, LinksAndFifosAreWrittenThroughNotReplaced) {
  const fs::path dir = temp_dir() / "links";
  fs::create_directories(dir);
  const fs::path target = dir / "target.json";
  const fs::path link = dir / "link.json";
  std::ofstream(target) << "old";
  fs::remove(link);
  fs::create_symlink(target, link);
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --json " + link.string()).exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(nlohmann::json::parse(read_file(target)).contains("step_time_s"));
  // A link to a file not there yet creates it; one into a folder not there is refused up front.
  const fs::path fresh = dir / "fresh.json";
  const fs::path to_fresh = dir / "to_fresh.json";
  fs::remove(fresh);
  fs::remove(to_fresh);
  fs::create_symlink(fresh, to_fresh);
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --json " + to_fresh.string()).exit_code, 0);
  EXPECT_TRUE(nlohmann::json::parse(read_file(fresh)).contains("step_time_s"));
  const fs::path nowhere = dir / "to_nowhere.json";
  fs::remove(nowhere);
  fs::create_symlink(dir / "no_such_folder" / "x.json", nowhere);
  const Outcome dangling = run_fsdpsim("run " + kScenario + " --json " + nowhere.string());
  EXPECT_EQ(dangling.exit_code, 2) << dangling.output;
  EXPECT_NE(
      dangling.output.find("the folder " + (dir / "no_such_folder").string() + " does not exist"),
      std::string::npos)
      << dangling.output;

  const fs::path fifo = dir / "fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = read_file(fifo); });
  const Outcome o = run_fsdpsim("run " + kScenario + " --json " + fifo.string());
  if (o.exit_code != 0) {
    // Unblock the reader if fsdpsim never opened the FIFO.
    std::ofstream(fifo) << "";
  }
  reader.join();
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(nlohmann::json::parse(received).contains("step_time_s"));
}

// roundup_power2_divisions in PyTorch's list form reaches the allocator: a list that gives every
// interval 4 divisions is the number 4, one that gives them 1 (off) is no setting, and "[64:4]",
// which rounds only sizes below 128 MiB (its first entry's 4 holds below 64 MiB too), is neither
// (Llama-3.1-8B on 8 H100, whose reserved memory the rounding moves).
// matmul_dtype fp8 on a model none of whose linears torchao converts (d_model 4104 = 57 heads of
// 72: no in or out feature count a multiple of 16 but the LM head's) would change nothing.
TEST(Cli, Float8WithoutAnEligibleLinearIsRefused) {
  const std::string model =
      R"('model={"family":"llama","n_layers":2,"d_model":4104,"n_heads":57,"n_kv_heads":57,)"
      R"("ffn_dim":14336,"vocab":128256,"max_seq_len":8192}')";
  const std::string run = "run " + kLlamaScenario + " --set " + model +
                          " --set training.micro_batch=1 --set training.global_batch=8";
  EXPECT_EQ(run_fsdpsim(run).exit_code, 0);
  const Outcome o = run_fsdpsim(run + " --set training.matmul_dtype=fp8");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("/training/matmul_dtype: expected a model with a linear that float8 "
                          "runs, found none"),
            std::string::npos)
      << o.output;
}

// training.optimizer_state_dtype: bf16 states hold half the state of fp32 ones, and the
// parameters' own dtype is no setting (a sweep can list both), bf16 beside bf16 parameters too.
TEST(Cli, OptimizerStateDtypeBf16HalvesTheStatesAndTheParametersDtypeIsNoSetting) {
  const auto state = [](const std::string& set) {
    const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                  " --set training.optimizer_impl=fused --json -" + set);
    EXPECT_EQ(o.exit_code, 0) << o.output;
    return nlohmann::json::parse(o.output)["memory_at_peak"]["optimizer_state_gib"].get<double>();
  };
  const double none = state("");
  EXPECT_DOUBLE_EQ(state(" --set training.optimizer_state_dtype=fp32"), none);
  EXPECT_NEAR(state(" --set training.optimizer_state_dtype=bf16"), none / 2, 1e-3);
  const double bf16_params = state(" --set training.param_storage_dtype=bf16");
  EXPECT_DOUBLE_EQ(
      state(" --set training.param_storage_dtype=bf16 --set training.optimizer_state_dtype=bf16"),
      bf16_params);
}

TEST(Cli, RoundupPower2DivisionsTakesPyTorchsListForm) {
  const auto reserved = [](const std::string& set) {
    const Outcome o = run_fsdpsim("run " + kLlamaScenario + " --json -" + set);
    EXPECT_EQ(o.exit_code, 0) << o.output;
    return nlohmann::json::parse(o.output)["peak_mem_reserved_gib"].get<double>();
  };
  const std::string key = " --set allocator.roundup_power2_divisions=";
  const double none = reserved("");
  const double four = reserved(key + "4");
  EXPECT_NE(four, none);
  EXPECT_EQ(reserved(key + "'\"[1:4, >:4]\"'"), four);
  EXPECT_EQ(reserved(key + "'\"4\"'"), four);  // PYTORCH_CUDA_ALLOC_CONF's text of the number
  EXPECT_EQ(reserved(key + "'\"[1:4,\\t>:4,]\"'"), four);  // a tab, a trailing comma
  EXPECT_EQ(reserved(key + "'\"[1:1]\"'"), none);
  const double below_64 = reserved(key + "'\"[64:4]\"'");
  EXPECT_NE(below_64, none);
  EXPECT_NE(below_64, four);
}

// allocator.memory_fraction is torch.cuda.set_per_process_memory_fraction: the allocator holds
// at most that share of the device. The 2-layer model reserves 15.1 GiB at its peak; at 17 % of
// an 80 GB H100 it fits only after cudaMalloc retries.
TEST(Cli, MemoryFractionCapsWhatTheAllocatorMayHold) {
  const fs::path tiny = fsdpsim::test_support::write_scenario(
      temp_dir(), "fraction", fsdpsim::test_support::tiny_llama_scenario("fraction", 2),
      nlohmann::json::object());
  const auto run = [&](const std::string& set) {
    const Outcome o = run_fsdpsim("run " + tiny.string() + " --json -" + set);
    EXPECT_EQ(o.exit_code, 0) << o.output;
    return nlohmann::json::parse(o.output);
  };
  const nlohmann::json whole = run("");
  const nlohmann::json tenth = run(" --set allocator.memory_fraction=0.1");
  const nlohmann::json fifth = run(" --set allocator.memory_fraction=0.2");
  const nlohmann::json tight = run(" --set allocator.memory_fraction=0.17");
  EXPECT_NEAR(fifth["usable_mem_gib"].get<double>() / tenth["usable_mem_gib"].get<double>(), 2.0,
              1e-6);
  EXPECT_LT(fifth["usable_mem_gib"].get<double>(), whole["usable_mem_gib"].get<double>());
  EXPECT_EQ(whole["num_alloc_retries"], 0);
  EXPECT_EQ(fifth["num_alloc_retries"], 0);
  EXPECT_EQ(tight["status"], "ok");
  EXPECT_GT(tight["num_alloc_retries"].get<int>(), 0);
  // Without retries the warm cache serves the measured step: no device calls. Each retry frees
  // cached segments, which the rest of the step cudaMallocs again.
  EXPECT_EQ(whole["num_device_alloc"], 0);
  EXPECT_EQ(whole["num_device_free"], 0);
  EXPECT_GT(tight["num_device_free"].get<int>(), 0);
  EXPECT_GE(tight["num_device_alloc"].get<int>(), tight["num_alloc_retries"].get<int>());
  EXPECT_LE(tight["peak_mem_reserved_gib"].get<double>(), tight["usable_mem_gib"].get<double>());
  EXPECT_GT(tight["step_time_s"].get<double>(), whole["step_time_s"].get<double>());
  EXPECT_EQ(tenth["status"], "oom");
  const Outcome summary =
      run_fsdpsim("run " + tiny.string() + " --set allocator.memory_fraction=0.17");
  EXPECT_NE(summary.output.find("ok: fits ("), std::string::npos) << summary.output;
  EXPECT_NE(summary.output.find(" per step (see explain)"), std::string::npos) << summary.output;

  const Outcome above =
      run_fsdpsim("run " + tiny.string() + " --set allocator.memory_fraction=1.5");
  EXPECT_EQ(above.exit_code, 2);
  EXPECT_NE(above.output.find("/allocator/memory_fraction: expected a number in (0, 1]"),
            std::string::npos)
      << above.output;
  // In (0, 1] but leaving no room for a single segment: named at its key, not as a capacity.
  const Outcome nothing =
      run_fsdpsim("run " + tiny.string() + " --set allocator.memory_fraction=1e-300");
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.output.find("/allocator/memory_fraction: 1e-300 of the device's"),
            std::string::npos)
      << nothing.output;
  EXPECT_NE(nothing.output.find("leaves 0 bytes: expected a fraction that leaves the allocator at "
                                "least one 2 MiB segment"),
            std::string::npos)
      << nothing.output;
  // A fraction of 1 sets no maximum (setMemoryFraction), so it caps nothing and leaves garbage
  // collection off.
  const nlohmann::json all = run(" --set allocator.memory_fraction=1");
  EXPECT_EQ(all["usable_mem_gib"], whole["usable_mem_gib"]);
  EXPECT_EQ(all["peak_mem_reserved_gib"], whole["peak_mem_reserved_gib"]);
  const Outcome collect = run_fsdpsim("run " + tiny.string() +
                                      " --set allocator.memory_fraction=1"
                                      " --set allocator.garbage_collection_threshold=0.5");
  EXPECT_EQ(collect.exit_code, 2) << collect.output;
  EXPECT_NE(collect.output.find("PyTorch applies it only under a memory fraction below 1"),
            std::string::npos)
      << collect.output;
  const Outcome off = run_fsdpsim(
      "run " + tiny.string() + " --set 'allocator={\"enabled\": false, \"memory_fraction\": 0.5}'");
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_NE(off.output.find("needs the allocator model"), std::string::npos) << off.output;
}

// With units of their own for the embedding and the head, one unit of every block is not the last
// before the root: reshard_after_forward sets it and last_unit_reshard_after_forward the head's,
// where without them the block unit is the only one and reshard_after_forward would do nothing.
TEST(Cli, EmbeddingAndHeadUnitsCountAmongTheUnitsBeforeTheRoot) {
  const std::string one_block_unit =
      "run " + kLlamaScenario +
      " --set fsdp.version=2 --set fsdp.backward_prefetch=null"
      " --set fsdp.wrap_policy=every_n_blocks --set fsdp.blocks_per_unit=1000"
      " --set fsdp.reshard_after_forward=2 --set fsdp.last_unit_reshard_after_forward=false";
  const Outcome alone = run_fsdpsim(one_block_unit);
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("the only unit before the root is the last one"), std::string::npos)
      << alone.output;
  const Outcome with_ends =
      run_fsdpsim(one_block_unit + " --set fsdp.wrap_embedding_and_head=true");
  EXPECT_EQ(with_ends.exit_code, 0) << with_ends.output;
  EXPECT_NE(with_ends.output.find("last unit's false, embedding and head units"), std::string::npos)
      << with_ends.output;
}

// training.loss_chunks on Llama-3.1-8B, FSDP2 with torchtitan's units, 8192 tokens a GPU: the
// whole loss's fp32 [8192, 128256] tensors (3.9 GiB each) give way to an eighth of them, for a
// 2 GiB fp32 LM-head gradient and a 128 MiB fp32 buffer; the model's FLOPs are the same. The
// largest micro-batch is searched among those whose tokens split into the chunks.
TEST(Cli, ChunkedLossShrinksTheLogitsPeak) {
  const std::string torchtitan =
      "run " + kLlamaScenario +
      " --set fsdp.version=2 --set fsdp.backward_prefetch=null"
      " --set fsdp.wrap_embedding_and_head=true --set fsdp.last_unit_reshard_after_forward=false"
      " --set training.micro_batch=1 --set training.seq_len=8192 --set training.global_batch=8";
  const auto result = [&](const std::string& set) {
    const Outcome o = run_fsdpsim(torchtitan + set + " --json -");
    EXPECT_EQ(o.exit_code, 0) << o.output;
    return nlohmann::json::parse(o.output);
  };
  const nlohmann::json whole = result("");
  const nlohmann::json chunked = result(" --set training.loss_chunks=8");
  EXPECT_LT(chunked["peak_mem_allocated_gib"].get<double>(),
            whole["peak_mem_allocated_gib"].get<double>() - 5.0);
  const auto flops = [](const nlohmann::json& r) {
    return r["model_tflops_per_gpu"].get<double>() * r["step_time_s"].get<double>();
  };
  EXPECT_NEAR(flops(chunked), flops(whole), 1e-3 * flops(whole));
  const Outcome summary = run_fsdpsim(torchtitan + " --set training.loss_chunks=8");
  EXPECT_NE(summary.output.find("loss in 8 chunks"), std::string::npos) << summary.output;
  const Outcome search = run_fsdpsim(torchtitan +
                                     " --set training.seq_len=1000 --set training.micro_batch=2"
                                     " --set training.global_batch=16"
                                     " --set training.loss_chunks=16 --max-micro-batch");
  EXPECT_EQ(search.exit_code, 0) << search.output;
  EXPECT_NE(search.output.find("(multiples of 2 tried: their tokens split into the loss's 16 "
                               "chunks)"),
            std::string::npos)
      << search.output;
}

// GPT-175B on 128 A100 (FSDP1, rate limiter): a loop that never waits for the GPU enters the
// next step while the backward's last units still run, so the first all-gathers find the blocks
// those units freed still in use and take new segments. About the same allocated peak (its
// instant moves by a few frees), gigabytes more reserved.
TEST(Cli, HostSyncBoundsWhereTheAllocatorRunsAhead) {
  const std::string gpt = "run " + std::string(FSDPSIM_SOURCE_DIR) +
                          "/scenarios/paper/gpt175b_128xa100_bs1.json --json -";
  const nlohmann::json step = nlohmann::json::parse(run_fsdpsim(gpt).output);
  const nlohmann::json none =
      nlohmann::json::parse(run_fsdpsim(gpt + " --set training.host_sync=none").output);
  EXPECT_NEAR(step["peak_mem_allocated_gib"].get<double>(),
              none["peak_mem_allocated_gib"].get<double>(), 0.01);
  EXPECT_GT(none["peak_mem_reserved_gib"].get<double>(),
            step["peak_mem_reserved_gib"].get<double>() + 1.0);
  // The summary names a loop that is not the default one.
  const Outcome text = run_fsdpsim("run " + std::string(FSDPSIM_SOURCE_DIR) +
                                   "/scenarios/paper/gpt175b_128xa100_bs1.json"
                                   " --set training.host_sync=micro_batch");
  EXPECT_NE(text.output.find(", host waits for the GPU each micro-batch\n"), std::string::npos)
      << text.output;
}

TEST(Cli, MaxMicroBatchFindsTheLargestThatFits) {
  const Outcome o = run_fsdpsim("run " + std::string(FSDPSIM_SOURCE_DIR) +
                                "/scenarios/llama3_8b_8xh100.json --max-micro-batch");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("largest micro-batch that fits: "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("is out of memory"), std::string::npos) << o.output;

  // At 30 % of its H100, the 2-layer model fits micro-batch 4 only by retrying cudaMalloc; 3 is
  // the largest that needs no retry.
  const fs::path tiny = fsdpsim::test_support::write_scenario(
      temp_dir(), "max_micro_batch", fsdpsim::test_support::tiny_llama_scenario("mmb", 2),
      nlohmann::json::object());
  const Outcome capped = run_fsdpsim("run " + tiny.string() +
                                     " --set allocator.memory_fraction=0.3 --max-micro-batch");
  EXPECT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_NE(capped.output.find("largest micro-batch that fits: 4 "), std::string::npos)
      << capped.output;
  EXPECT_NE(capped.output.find("1 cudaMalloc retry per step"), std::string::npos) << capped.output;
  EXPECT_NE(capped.output.find("largest without cudaMalloc retries: 3: "), std::string::npos)
      << capped.output;
  // Retries need not grow with the micro-batch: T5-11B on 8 A100 fits 40 with retries, 35 to 37
  // retry too, 38 and 39 do not (a bisection that took 35's retries for a bound would answer 34).
  const Outcome uneven = run_fsdpsim("run " + std::string(FSDPSIM_SOURCE_DIR) +
                                     "/scenarios/paper/t5_11b_8xa100.json --max-micro-batch");
  EXPECT_NE(uneven.output.find("largest micro-batch that fits: 40 "), std::string::npos)
      << uneven.output;
  EXPECT_NE(uneven.output.find("largest without cudaMalloc retries: 39: "), std::string::npos)
      << uneven.output;
  // Without the allocator model there are no retries: the largest that fits is the answer,
  // with nothing more to say.
  const Outcome clean =
      run_fsdpsim("run " + tiny.string() + " --set allocator.enabled=false --max-micro-batch");
  EXPECT_NE(clean.output.find("largest micro-batch that fits: 19 "), std::string::npos)
      << clean.output;
  EXPECT_EQ(clean.output.find("cudaMalloc retr"), std::string::npos) << clean.output;
}

struct BadInput {
  const char* name;
  nlohmann::json patch;
  const char* expected;  // a fragment of the error message
};

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, ExitsTwoAndNamesTheProblem) {
  const BadInput& bad = GetParam();
  const fs::path p = scenario_with(bad.name, bad.patch);
  const Outcome o = run_fsdpsim("run " + p.string());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find(bad.expected), std::string::npos) << o.output;
  EXPECT_NE(o.output.find(p.filename().string()), std::string::npos)
      << "the file is named: " << o.output;
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, CliBadInput,
    ::testing::Values(
        BadInput{"wrong_type",
                 {{"training", {{"micro_batch", "two"}}}},
                 "/training/micro_batch: expected a positive integer, found the string \"two\""},
        BadInput{"unknown_key",
                 {{"fsdp", {{"sharding_stratgy", "FULL_SHARD"}}}},
                 "/fsdp/sharding_stratgy: unknown key; did you mean sharding_strategy?"},
        BadInput{"zero_layers",
                 {{"model", {{"preset", "gpt-175b"}, {"n_layers", 0}}}},
                 "/model/n_layers: expected a positive integer, found the number 0"},
        BadInput{"negative_seq", {{"training", {{"seq_len", -2048}}}}, "/training/seq_len"},
        BadInput{"zero_gpus_per_node",
                 {{"hardware", {{"node", {{"gpus_per_node", 0}}}}}},
                 "/hardware/node/gpus_per_node: expected a positive integer"},
        BadInput{"missing_preset", {{"model", "gpt-9000"}}, "unknown models preset \"gpt-9000\""},
        // Buffer settings on a model with no buffers fsdpsim models would change nothing.
        BadInput{"buffer_dtype_without_buffers",
                 {{"model", "llama-3.1-8b"}, {"fsdp", {{"buffer_dtype", "bf16"}}}},
                 "/fsdp/buffer_dtype: sets the dtype of the model's buffers, and llama-3.1-8b "
                 "holds none"},
        BadInput{"broadcast_buffers_without_buffers",
                 {{"model", "llama-3.1-8b"},
                  {"parallelism", "ddp"},
                  {"fsdp", nullptr},
                  {"ddp", {{"broadcast_buffers", false}}}},
                 "/ddp/broadcast_buffers: broadcasts the model's buffers, and llama-3.1-8b holds "
                 "none"},
        // MFU divides by the GEMMs' dtype peak: a narrower type's below a wider one's is refused.
        BadInput{"fp8_peak_below_bf16",
                 {{"hardware", {{"gpu", {{"peak_dense_tflops", {{"fp8", 100}}}}}}}},
                 "/hardware/gpu/peak_dense_tflops/fp8: expected 0 (none) or at least the bf16 "
                 "peak"},
        // A preset of another kind is the naming file's mistake: the error says where it was named.
        BadInput{
            "preset_of_another_kind",
            {{"model", {{"preset", FSDPSIM_SOURCE_DIR "/configs/hardware/a100-sxm-80gb.json"}}}},
            "a100-sxm-80gb.json: /family: required key is missing (the models preset named "
            "at "},
        BadInput{
            "calibration_of_another_kind",
            {{"hardware", {{"calibration", FSDPSIM_SOURCE_DIR "/configs/models/gpt-175b.json"}}}},
            "gpt-175b.json: /kind: required key is missing (the calibration profile named at "},
        // hardware.stragglers: ranks or nodes in range, each listed once, speeds in [0.05, 1].
        BadInput{"stragglers_not_array",
                 {{"hardware", {{"stragglers", {{"ranks", {1}}}}}}},
                 "/hardware/stragglers: expected an array of"},
        BadInput{"straggler_rank_out_of_range",
                 {{"hardware", {{"stragglers", {{{"ranks", {999}}, {"compute_speed", 0.9}}}}}}},
                 "/hardware/stragglers/0/ranks/0: expected a rank number in [0, 128), found the "
                 "number 999"},
        BadInput{"straggler_ranks_and_nodes",
                 {{"hardware",
                   {{"stragglers", {{{"ranks", {1}}, {"nodes", {0}}, {"compute_speed", 0.9}}}}}}},
                 "/hardware/stragglers/0: expected exactly one of ranks and nodes"},
        BadInput{"straggler_without_speed",
                 {{"hardware", {{"stragglers", {{{"ranks", {1}}}}}}}},
                 "/hardware/stragglers/0: expected compute_speed or host_speed"},
        BadInput{"straggler_too_slow",
                 {{"hardware", {{"stragglers", {{{"ranks", {1}}, {"compute_speed", 0.01}}}}}}},
                 "/hardware/stragglers/0/compute_speed: expected a number in [0.05, 1], found "
                 "the number 0.01"},
        BadInput{"straggler_faster",
                 {{"hardware", {{"stragglers", {{{"ranks", {1}}, {"host_speed", 1.5}}}}}}},
                 "/hardware/stragglers/0/host_speed: expected a number in [0.05, 1], found the "
                 "number 1.5"},
        BadInput{"straggler_twice",
                 {{"hardware",
                   {{"stragglers",
                     {{{"ranks", {8}}, {"compute_speed", 0.9}},
                      {{"nodes", {1}}, {"host_speed", 0.5}}}}}}},
                 "/hardware/stragglers/1: rank 8 is listed by an earlier straggler"},
        BadInput{"straggler_typo",
                 {{"hardware", {{"stragglers", {{{"rank", {1}}, {"compute_speed", 0.9}}}}}}},
                 "/hardware/stragglers/0/rank: unknown key; did you mean ranks?"},
        // A preset's schema_version, when given, must be the one this fsdpsim reads.
        BadInput{"model_schema_version_string",
                 {{"model", {{"preset", "gpt-175b"}, {"schema_version", "1"}}}},
                 "/model/schema_version: expected a positive integer, found the string \"1\""},
        BadInput{"hardware_schema_version_2",
                 {{"hardware", {{"schema_version", 2}}}},
                 "/hardware/schema_version: this fsdpsim reads schema_version 1"},
        BadInput{"bad_choice",
                 {{"fsdp", {{"backward_prefetch", "BACKWARD_PER"}}}},
                 "did you mean BACKWARD_PRE?"},
        BadInput{"bad_optimizer_impl",
                 {{"training", {{"optimizer_impl", "fussed"}}}},
                 "/training/optimizer_impl: expected one of foreach, fused, for_loop, found "
                 "\"fussed\"; did you mean fused?"},
        BadInput{"indivisible_batch",
                 {{"training", {{"global_batch", 100}}}},
                 "not a multiple of micro_batch"},
        BadInput{"missing_section", {{"training", nullptr}}, "/training: required key is missing"},
        // A misspelt required key is named as the likely typo, not only as a missing key.
        BadInput{"misspelt_section",
                 {{"training", nullptr}, {"trainig", {{"global_batch", 8}}}},
                 "/training: required key is missing; found \"trainig\": did you mean training?"},
        BadInput{"bad_efficiency",
                 {{"hardware", {{"gpu", {{"gemm_efficiency", 1.5}}}}}},
                 "/hardware/gpu/gemm_efficiency: expected a number in (0, 1]"},
        BadInput{"fp8_on_a100",
                 {{"training", {{"matmul_dtype", "fp8"}}}},
                 "/training/matmul_dtype: float8 linears need fp8 tensor cores, and "
                 "a100-sxm-80gb has no fp8 peak"},
        BadInput{"matmul_dtype_not_compute_dtype",
                 {{"training", {{"matmul_dtype", "fp32"}}}},
                 "/training/matmul_dtype: expected fp8 (float8 linears) or the compute dtype"},
        BadInput{"compiled_not_boolean",
                 {{"training", {{"compiled", "yes"}}}},
                 "/training/compiled: expected true or false, found the string \"yes\""},
        BadInput{"compiled_custom_model",
                 {{"model", "regnet-9b"},
                  {"training", {{"compiled", true}, {"checkpoint_early_stop", nullptr}}}},
                 "/training/compiled: rewrites a model's own kernels"},
        BadInput{"fused_loss_t5",
                 {{"model", "t5-small"},
                  {"training", {{"loss", "fused_cross_entropy"}, {"flash_attention", false}}}},
                 "/training/loss: only cross_entropy is modelled for t5"},
        BadInput{"bad_loss", {{"training", {{"loss", "xentropy"}}}}, "/training/loss"},
        BadInput{"kept_fp32_logits_fused_loss",
                 {{"training", {{"loss", "fused_cross_entropy"}, {"logits_kept_by_loop", "fp32"}}}},
                 "/training/logits_kept_by_loop: fp32 needs loss cross_entropy (the upcast makes "
                 "the fp32 logits), found loss fused_cross_entropy"},
        BadInput{"kept_logits_custom_model",
                 {{"model", "regnet-9b"},
                  {"training",
                   {{"logits_kept_by_loop", "compute_dtype"}, {"flash_attention", nullptr}}}},
                 "/training/logits_kept_by_loop: logits kept by the training loop are modelled "
                 "for the gpt, mpt and llama heads; regnet-9b is a custom model"},
        // A custom model's units are opaque: attention and linear knobs do not apply.
        BadInput{"flash_kernel_custom_model",
                 {{"model", "regnet-9b"},
                  {"training", {{"flash_attention", nullptr}, {"flash_kernel", "cudnn"}}}},
                 "/training/flash_kernel: picks an attention kernel; a custom model"},
        BadInput{"attention_checkpointing_custom_model",
                 {{"model", "regnet-9b"},
                  {"training",
                   {{"flash_attention", nullptr},
                    {"checkpoint_early_stop", nullptr},
                    {"activation_checkpointing", "attention"}}}},
                 "/training/activation_checkpointing: attention recomputes the attention core"},
        BadInput{"op_checkpointing_custom_model",
                 {{"model", "regnet-9b"},
                  {"training",
                   {{"flash_attention", nullptr},
                    {"checkpoint_early_stop", nullptr},
                    {"activation_checkpointing", "selective_op"}}}},
                 "/training/activation_checkpointing: selective_op saves the outputs of a "
                 "block's mm and attention ops; a custom model's units are opaque"},
        BadInput{"block_and_linear_custom_model",
                 {{"model", "regnet-9b"},
                  {"training", {{"flash_attention", nullptr}}},
                  {"fsdp", {{"wrap_policy", "block_and_linear"}}}},
                 "/fsdp/wrap_policy: block_and_linear wraps each nn.Linear"},
        BadInput{"early_stop_without_checkpointing",
                 {{"training", {{"activation_checkpointing", "none"}}}},
                 "/training/checkpoint_early_stop: stops a whole block's recompute early; with "
                 "activation_checkpointing none"},
        BadInput{"cpu_offload_accumulating_outside_no_sync",
                 {{"fsdp", {{"cpu_offload", true}}}, {"training", {{"global_batch", 256}}}},
                 "/fsdp/cpu_offload: FSDP1 with CPU offload cannot accumulate gradients across "
                 "micro-batches outside no_sync"},
        BadInput{"last_unit_raf_fsdp1",
                 {{"fsdp", {{"last_unit_reshard_after_forward", false}}}},
                 "/fsdp/last_unit_reshard_after_forward: FSDP1 derives it from sharding_strategy"},
        BadInput{"last_unit_raf_shard_grad_op",
                 {{"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", false},
                    {"sharding_strategy", "SHARD_GRAD_OP"},
                    {"last_unit_reshard_after_forward", true}}}},
                 "/fsdp/last_unit_reshard_after_forward: SHARD_GRAD_OP keeps parameters after "
                 "forward; it contradicts last_unit_reshard_after_forward"},
        // FSDP1 makes a one-GPU shard group NO_SHARD, reducing gradients inside it only.
        BadInput{"fsdp1_hybrid_shard_groups_of_one_gpu",
                 {{"fsdp", {{"sharding_strategy", "HYBRID_SHARD"}, {"shard_group_size", 1}}}},
                 "/fsdp/shard_group_size: HYBRID_SHARD with shard groups of 1 GPU: FSDP1 runs "
                 "each group as NO_SHARD, whose gradient all-reduce stays inside the group"},
        BadInput{"float8_all_gather_fsdp1",
                 {{"fsdp", {{"float8_all_gather", true}}}},
                 "/fsdp/float8_all_gather: torchao's float8 all-gather is an FSDP2 (version 2) "
                 "extension"},
        BadInput{
            "float8_all_gather_without_float8_linears",
            {{"fsdp", {{"version", 2}, {"limit_all_gathers", false}, {"float8_all_gather", true}}}},
            "/fsdp/float8_all_gather: all-gathers the weights of float8 linears in float8; it "
            "needs training.matmul_dtype fp8"},
        BadInput{
            "precompute_without_float8_all_gather",
            {{"fsdp",
              {{"version", 2}, {"limit_all_gathers", false}, {"precompute_float8_scale", true}}}},
            "/fsdp/precompute_float8_scale: precomputes the scales of a float8 all-gather, "
            "which float8_all_gather false turns off; it would do nothing"},
        BadInput{"prefetch_modules_fsdp1",
                 {{"fsdp", {{"backward_prefetch_modules", 2}}}},
                 "/fsdp/backward_prefetch_modules: FSDP1 prefetches one unit (forward_prefetch, "
                 "backward_prefetch); backward_prefetch_modules is an FSDP2 (version 2) option"},
        BadInput{
            "forward_prefetch_modules_without_prefetch",
            {{"fsdp",
              {{"version", 2}, {"limit_all_gathers", false}, {"forward_prefetch_modules", 2}}}},
            "/fsdp/forward_prefetch_modules: sizes the forward prefetch, which "
            "forward_prefetch false turns off; it would do nothing"},
        BadInput{
            "prefetch_modules_zero",
            {{"fsdp",
              {{"version", 2}, {"limit_all_gathers", false}, {"backward_prefetch_modules", 0}}}},
            "/fsdp/backward_prefetch_modules: expected a positive integer"},
        BadInput{"last_unit_raf_whole_model",
                 {{"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", false},
                    {"wrap_policy", "whole_model"},
                    {"last_unit_reshard_after_forward", false}}}},
                 "/fsdp/last_unit_reshard_after_forward: there is no unit before the root to set "
                 "(wrap_policy whole_model)"},
        BadInput{"raf_shadowed_by_the_only_unit",
                 {{"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", false},
                    {"wrap_policy", "every_n_blocks"},
                    {"blocks_per_unit", 1000},
                    {"reshard_after_forward", 2},
                    {"last_unit_reshard_after_forward", false}}}},
                 "/fsdp/reshard_after_forward: the only unit before the root is the last one"},
        BadInput{
            "root_raf_not_a_divisor",
            {{"fsdp",
              {{"version", 2}, {"limit_all_gathers", false}, {"root_reshard_after_forward", 3}}}},
            "/fsdp/root_reshard_after_forward: root_reshard_after_forward=3 must be a divisor "
            "of the shard group (128 ranks; 128 itself is true)"},
        BadInput{"root_raf_string",
                 {{"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", false},
                    {"root_reshard_after_forward", "yes"}}}},
                 "/fsdp/root_reshard_after_forward: expected true, false or a group size >= 1, "
                 "found the string \"yes\""},
        BadInput{"bf16_states_foreach",
                 {{"training", {{"optimizer_state_dtype", "bf16"}}}},
                 "/training/optimizer_state_dtype: bf16 states beside fp32 parameters need "
                 "AdamW's fused CUDA kernel"},
        BadInput{"bf16_states_offloaded",
                 {{"training", {{"optimizer_state_dtype", "bf16"}, {"optimizer_impl", "fused"}}},
                  {"fsdp", {{"cpu_offload", true}}}},
                 "/training/optimizer_state_dtype: bf16 states run in AdamW's fused CUDA kernel; "
                 "with cpu_offload the host steps"},
        BadInput{"bf16_states_fp16",
                 {{"training", {{"optimizer_state_dtype", "fp16"}, {"optimizer_impl", "fused"}}}},
                 "/training/optimizer_state_dtype: expected one of bf16, fp32"},
        BadInput{
            "fp32_states_bf16_params",
            {{"training", {{"optimizer_state_dtype", "fp32"}, {"param_storage_dtype", "bf16"}}}},
            "/training/optimizer_state_dtype: expected bf16, the parameters' dtype, which AdamW's "
            "states take, found fp32"},
        BadInput{"loss_chunks_fsdp1",
                 {{"training", {{"loss_chunks", 8}}}},
                 "/training/loss_chunks: torchtitan's ChunkedLossWrapper is modelled with FSDP2 "
                 "and torchtitan's units"},
        BadInput{"loss_chunks_uneven",
                 {{"training", {{"loss_chunks", 3}}}},
                 "/training/loss_chunks: expected a divisor of the micro-batch's 2048 tokens"},
        BadInput{"loss_chunks_zero",
                 {{"training", {{"loss_chunks", 0}}}},
                 "/training/loss_chunks: expected a positive integer"},
        BadInput{"loss_chunks_logits_kept",
                 {{"training", {{"loss_chunks", 8}, {"logits_kept_by_loop", "compute_dtype"}}}},
                 "/training/loss_chunks: the chunked loss makes the logits inside the loss"},
        // Head dimensions the fused attention kernels do not run: 12288 / 16 = 768 past flash-attn
        // 2's 256; 12288 / 64 = 192, within it, past flash-attn 1.x's 128.
        BadInput{"flash_head_dim_past_256",
                 {{"model", {{"preset", "gpt-175b"}, {"n_heads", 16}, {"n_kv_heads", 16}}},
                  {"training", {{"flash_attention", true}}}},
                 "/training/flash_attention: expected a head dimension the fused attention kernel "
                 "runs, a multiple of 8 up to 256 (flash-attn 2, SDPA's flash and cuDNN backends), "
                 "found 768 (d_model 12288 / 16 heads)"},
        BadInput{"flash1_head_dim_past_128",
                 {{"model", {{"preset", "gpt-175b"}, {"n_heads", 64}, {"n_kv_heads", 64}}},
                  {"training", {{"flash_attention", true}, {"flash_kernel", "flash1"}}}},
                 "/training/flash_kernel: expected a head dimension the fused attention kernel "
                 "runs, a multiple of 8 up to 128 (flash-attn 1.x and its Triton port), found 192"},
        // Autocast is modelled over weights wider than its dtype only.
        BadInput{"autocast_same_width",
                 {{"training", {{"autocast_dtype", "fp16"}}}, {"fsdp", {{"param_dtype", "bf16"}}}},
                 "/training/autocast_dtype: expected a dtype narrower than the bf16 weights"},
        BadInput{"autocast_wider",
                 {{"training", {{"autocast_dtype", "fp32"}}}, {"fsdp", {{"param_dtype", "bf16"}}}},
                 "found fp32: autocast's casts of the weights to a dtype as wide or wider"},
        BadInput{"loss_chunks_autocast",
                 {{"training", {{"loss_chunks", 8}, {"autocast_dtype", "bf16"}}},
                  {"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", false},
                    {"param_dtype", "fp32"},
                    {"wrap_embedding_and_head", true}}}},
                 "/training/loss_chunks: modelled with the weights in the compute dtype"},
        BadInput{"embedding_and_head_fsdp1",
                 {{"fsdp", {{"wrap_embedding_and_head", true}}}},
                 "/fsdp/wrap_embedding_and_head: groups the final norm and the LM head in one "
                 "unit, as FSDP2's fully_shard([norm, output]) does (torchtitan); FSDP1 wraps "
                 "one module per unit: use version 2"},
        BadInput{"embedding_and_head_whole_model",
                 {{"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", false},
                    {"wrap_policy", "whole_model"},
                    {"wrap_embedding_and_head", true}}}},
                 "/fsdp/wrap_embedding_and_head: gives the embedding and the head units of their "
                 "own beside the blocks'; wrap_policy whole_model wraps no module but the root"},
        BadInput{
            "embedding_and_head_tied",
            {{"model", "mpt-7b"},
             {"fsdp",
              {{"version", 2}, {"limit_all_gathers", false}, {"wrap_embedding_and_head", true}}}},
            "/fsdp/wrap_embedding_and_head: mpt-7b ties its LM head to the embedding's "
            "table, so torchtitan puts both, with the final norm, in one unit"},
        BadInput{
            "embedding_and_head_t5",
            {{"model", "t5-11b"},
             {"fsdp",
              {{"version", 2}, {"limit_all_gathers", false}, {"wrap_embedding_and_head", true}}}},
            "/fsdp/wrap_embedding_and_head: wraps a decoder's token embedding and its final "
            "norm with the LM head; t5-11b is an encoder-decoder (t5) with an embedding for "
            "each"},
        BadInput{"embedding_and_head_root_raf",
                 {{"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", false},
                    {"wrap_embedding_and_head", true},
                    {"root_reshard_after_forward", true}}}},
                 "/fsdp/root_reshard_after_forward: with wrap_embedding_and_head the root holds "
                 "no parameter to reshard"},
        BadInput{"bad_kept_logits",
                 {{"training", {{"logits_kept_by_loop", "bf16"}}}},
                 "/training/logits_kept_by_loop: expected one of none, compute_dtype, fp32"},
        BadInput{"bad_host_sync",
                 {{"training", {{"host_sync", "epoch"}}}},
                 "/training/host_sync: expected one of step, micro_batch, none"},
        BadInput{"bf16_storage_ddp",
                 {{"parallelism", "ddp"},
                  {"fsdp", nullptr},
                  {"training", {{"param_storage_dtype", "bf16"}}}},
                 "/training/param_storage_dtype: parameters stored below fp32 are modelled for "
                 "FSDP"},
        BadInput{"bf16_states_ddp",
                 {{"parallelism", "ddp"},
                  {"fsdp", nullptr},
                  {"training", {{"optimizer_state_dtype", "bf16"}, {"optimizer_impl", "fused"}}}},
                 "/training/optimizer_state_dtype: bf16 optimizer states are modelled for FSDP"},
        BadInput{"ddp_unknown_key",
                 {{"parallelism", "ddp"}, {"fsdp", nullptr}, {"ddp", {{"bucket_cap", 25}}}},
                 "/ddp/bucket_cap: unknown key"},
        BadInput{"bad_storage_dtype",
                 {{"training", {{"param_storage_dtype", "fp8"}}}},
                 "/training/param_storage_dtype"},
        BadInput{"flash_kernel_unfused",
                 {{"training", {{"flash_attention", false}, {"flash_kernel", "flash1"}}}},
                 "/training/flash_kernel: flash_kernel needs flash_attention true"},
        BadInput{"bad_flash_kernel",
                 {{"training", {{"flash_kernel", "flash9"}}}},
                 "/training/flash_kernel"},
        BadInput{"float8_linear_without_fp8",
                 {{"training", {{"float8_linear", "transformer_engine"}}}},
                 "/training/float8_linear: float8_linear needs matmul_dtype fp8"},
        BadInput{"transformer_engine_float8_all_gather",
                 {{"fsdp",
                   {{"version", 2}, {"limit_all_gathers", nullptr}, {"float8_all_gather", true}}},
                  {"training", {{"matmul_dtype", "fp8"}, {"float8_linear", "transformer_engine"}}}},
                 "/fsdp/float8_all_gather: expected false or absent with training.float8_linear "
                 "transformer_engine"},
        BadInput{"bad_float8_linear",
                 {{"training", {{"matmul_dtype", "fp8"}, {"float8_linear", "te"}}}},
                 "/training/float8_linear: expected one of torchao, transformer_engine"},
        // 32-bit settings are bounded, not wrapped; sizes are bounded so byte counts fit 64 bits.
        BadInput{"nodes_beyond_int32",
                 {{"hardware", {{"nodes", 4294967297LL}}}},
                 "/hardware/nodes: expected a positive integer of at most 2147483647, found "
                 "4294967297"},
        // A cluster of at most 2^20 GPUs (hardware::kMaxWorldSize), whose ring keeps bandwidth.
        BadInput{"world_beyond_bound",
                 {{"hardware", {{"nodes", 536870912}}}},
                 "/hardware/nodes: nodes 536870912 x gpus_per_node 8 = 4294967296 GPUs; at most "
                 "1048576 are modelled"},
        BadInput{"ring_without_bandwidth",
                 {{"hardware",
                   {{"nodes", 131072}, {"node", {{"nic_busbw_loss_per_node_doubling", 0.07}}}}}},
                 "nic_busbw_loss_per_node_doubling = 0.07 (must be < 1 / log2(nodes / 2) = "
                 "0.062500 at 131072 nodes"},
        // Memory amounts at most 1 PiB (size_bounds.hpp), not wrapped into negative bytes.
        BadInput{"hbm_beyond_bound",
                 {{"hardware", {{"gpu", {{"hbm_bytes", 9223372036854775807LL}}}}}},
                 "/hardware/gpu/hbm_bytes: expected a positive integer of at most "
                 "1125899906842624"},
        BadInput{"runtime_reserved_beyond_bound",
                 {{"hardware", {{"gpu", {{"runtime_reserved_GiB", 1e10}}}}}},
                 "/hardware/gpu/runtime_reserved_GiB: expected a non-negative number of at most "
                 "1048576"},
        // Rates and times bounded so that nothing derived from them is infinite.
        BadInput{"roundup_not_power_of_two",
                 {{"allocator", {{"roundup_power2_divisions", 3}}}},
                 "/allocator/roundup_power2_divisions: expected a power of two (1, 2, 4, ...) up "
                 "to 1073741824 or a list \"[MiB:divisions, ..., >:divisions]\", found the "
                 "number 3"},
        BadInput{"roundup_list_divisions_past_int32",
                 {{"allocator", {{"roundup_power2_divisions", "[256:4294967296]"}}}},
                 "/allocator/roundup_power2_divisions: expected each interval's divisions, 0 "
                 "(off) or a power of two up to 1073741824, found \"[256:4294967296]\""},
        BadInput{"roundup_empty_list",
                 {{"allocator", {{"roundup_power2_divisions", "[]"}}}},
                 "/allocator/roundup_power2_divisions: expected at least one entry (\"[]\" is no "
                 "setting: leave the key out)"},
        BadInput{"roundup_array",
                 {{"allocator", {{"roundup_power2_divisions", {256, 1}}}}},
                 "/allocator/roundup_power2_divisions: expected a power of two (1, 2, 4, ...) up "
                 "to 1073741824 or a list \"[MiB:divisions, ..., >:divisions]\", found an array"},
        BadInput{"roundup_list_start_not_power_of_two",
                 {{"allocator", {{"roundup_power2_divisions", "[256:1, 384:2, >:4]"}}}},
                 "/allocator/roundup_power2_divisions: expected each interval's start in MiB, a "
                 "power of two, or \">\", found \"[256:1, 384:2, >:4]\""},
        BadInput{"roundup_list_divisions_not_power_of_two",
                 {{"allocator", {{"roundup_power2_divisions", "[256:3]"}}}},
                 "/allocator/roundup_power2_divisions: expected each interval's divisions, 0 (off) "
                 "or a power of two up to 1073741824, found \"[256:3]\""},
        BadInput{"roundup_list_unbracketed",
                 {{"allocator", {{"roundup_power2_divisions", "256:1,>:4"}}}},
                 "/allocator/roundup_power2_divisions: expected a power of two up to 1073741824 or "
                 "a list \"[MiB:divisions, ..., >:divisions]\", found \"256:1,>:4\""},
        BadInput{"gc_threshold_one",
                 {{"allocator", {{"memory_fraction", 0.9}, {"garbage_collection_threshold", 1}}}},
                 "/allocator/garbage_collection_threshold: expected a number in (0, 1), found the "
                 "number 1"},
        BadInput{"nic_beyond_bound",
                 {{"hardware", {{"node", {{"nic_Gbps_per_node", 1e308}}}}}},
                 "/hardware/node/nic_Gbps_per_node: expected a positive number of at most "
                 "1000000000, found 1e+308"},
        BadInput{"max_split_below_20",
                 {{"allocator", {{"max_split_size_mb", 19}}}},
                 "/allocator/max_split_size_mb: expected at least 20 (PyTorch's parser refuses "
                 "less), found 19"},
        BadInput{"garbage_collection_with_expandable_segments",
                 {{"allocator",
                   {{"expandable_segments", true},
                    {"memory_fraction", 0.9},
                    {"garbage_collection_threshold", 0.5}}}},
                 "/allocator/garbage_collection_threshold: frees whole cached segments, and "
                 "expandable_segments makes none"},
        BadInput{"max_split_beyond_bound",
                 {{"allocator", {{"max_split_size_mb", 8796093022208LL}}}},
                 "/allocator/max_split_size_mb: expected a positive integer of at most 1073741824"},
        // A setting that the rest of the scenario makes do nothing is refused, not ignored.
        BadInput{"checkpoint_every_n_without_selective",
                 {{"training",
                   {{"activation_checkpointing", "full"}, {"checkpoint_every_n_blocks", 3}}}},
                 "/training/checkpoint_every_n_blocks: picks the blocks activation_checkpointing "
                 "selective wraps; with full it would do nothing"},
        BadInput{"early_stop_compiled",
                 {{"training",
                   {{"activation_checkpointing", "full"},
                    {"checkpoint_early_stop", false},
                    {"compiled", true}}}},
                 "/training/checkpoint_early_stop: does nothing under torch.compile"},
        BadInput{"checkpoint_every_n_past_the_blocks",
                 {{"training",
                   {{"activation_checkpointing", "selective"}, {"checkpoint_every_n_blocks", 97}}}},
                 "/training/checkpoint_every_n_blocks: selective checkpoints the blocks whose "
                 "number (from 1) is a multiple of 97; gpt-175b has 96 blocks, so it would "
                 "checkpoint none"},
        BadInput{"selective_default_n_past_the_blocks",
                 {{"model", {{"preset", "gpt-175b"}, {"n_layers", 1}}},
                  {"training", {{"activation_checkpointing", "selective"}}}},
                 "/training/activation_checkpointing: selective checkpoints the blocks whose "
                 "number (from 1) is a multiple of 2 (checkpoint_every_n_blocks' default); "
                 "gpt-175b has 1 block, so it would checkpoint none"},
        BadInput{"no_sync_with_one_micro_batch",
                 {{"training", {{"no_sync", true}}}},
                 "/training/no_sync: defers the gradient reduction to a step's last micro-batch; "
                 "global_batch 128 is one micro-batch of 1 x 128 GPUs, so it would do nothing"},
        BadInput{"blocks_per_unit_without_every_n",
                 {{"fsdp", {{"blocks_per_unit", 4}}}},
                 "/fsdp/blocks_per_unit: sizes the units of wrap_policy every_n_blocks; with "
                 "transformer_block it would do nothing"},
        BadInput{"inflight_without_limiter",
                 {{"fsdp", {{"limit_all_gathers", false}, {"max_inflight_all_gathers", 4}}}},
                 "/fsdp/max_inflight_all_gathers: is the depth of the rate limiter, which "
                 "limit_all_gathers false turns off"},
        BadInput{"limiter_with_no_shard",
                 {{"fsdp", {{"sharding_strategy", "NO_SHARD"}, {"limit_all_gathers", true}}}},
                 "/fsdp/limit_all_gathers: sets the rate limiter, which waits for the frees of "
                 "unsharded parameters; NO_SHARD never frees them, so it would do nothing"},
        BadInput{"inflight_with_no_shard",
                 {{"fsdp", {{"sharding_strategy", "NO_SHARD"}, {"max_inflight_all_gathers", 4}}}},
                 "/fsdp/max_inflight_all_gathers: sets the rate limiter"},
        BadInput{"inflight_with_fsdp2",
                 {{"fsdp",
                   {{"version", 2},
                    {"limit_all_gathers", nullptr},
                    {"backward_prefetch", nullptr},
                    {"max_inflight_all_gathers", 4}}}},
                 "/fsdp/max_inflight_all_gathers: is the depth of FSDP1's rate limiter; FSDP2 "
                 "has none"},
        // FSDPState._pre_backward keeps the one-module prefetch whatever it is told.
        BadInput{
            "fsdp2_without_backward_prefetch",
            {{"fsdp",
              {{"version", 2}, {"limit_all_gathers", nullptr}, {"backward_prefetch", "none"}}}},
            "/fsdp/backward_prefetch: FSDP2 always prefetches one module in backward"},
        BadInput{"allocator_key_while_disabled",
                 {{"allocator", {{"enabled", false}, {"expandable_segments", true}}}},
                 "/allocator/expandable_segments: configures the caching allocator model, which "
                 "\"enabled\": false turns off"},
        BadInput{"gc_threshold_without_fraction",
                 {{"allocator", {{"garbage_collection_threshold", 0.6}}}},
                 "/allocator/garbage_collection_threshold: PyTorch applies it only under a "
                 "memory fraction"},
        // Each micro-batch is simulated: at most 1024 per step (size_bounds.hpp).
        BadInput{"micro_batches_beyond_bound",
                 {{"training", {{"global_batch", 128 * 1025}}}},
                 "/training/global_batch: global_batch 131200 is 1025 micro-batches of 1 x 128 "
                 "GPUs per optimizer step; at most 1024 are simulated"},
        // ... and at most 131072 layer passes (a deep model with many micro-batches).
        BadInput{"layer_passes_beyond_bound",
                 {{"model",
                   {{"family", "gpt"},
                    {"n_layers", 4096},
                    {"d_model", 256},
                    {"n_heads", 8},
                    {"vocab", 100},
                    {"max_seq_len", 2048}}},
                  {"training", {{"global_batch", 128 * 64}}}},
                 "/training/global_batch: 4096 layers x 64 micro-batches per optimizer step = "
                 "262144 layer passes; at most 131072 are simulated"},
        BadInput{"seq_len_beyond_bound",
                 {{"training", {{"seq_len", 512000000}}}},
                 "/training/seq_len: expected a positive integer of at most 1048576"},
        BadInput{"tokens_beyond_bound",
                 {{"training", {{"micro_batch", 65536}, {"seq_len", 1048576}}}},
                 "/training/micro_batch: expected micro_batch x seq_len of at most 16777216"},
        BadInput{"model_width_beyond_bound",
                 {{"model",
                   {{"family", "gpt"},
                    {"n_layers", 2},
                    {"d_model", 2147483648LL},
                    {"n_heads", 8},
                    {"vocab", 100},
                    {"max_seq_len", 2048}}}},
                 "/model/d_model: expected a positive integer of at most 262144"},
        // run checks the expect and sweep blocks as check and sweep do.
        BadInput{"bad_expect_block", {{"expect", {{"mfu", {{"min", "abc"}}}}}}, "/expect/mfu"},
        // run does not judge the expect block, but a key no result has is refused as check does.
        BadInput{
            "expect_key_typo",
            {{"expect", {{"tokens_per_s_per_gp", {{"min", 1}}}}}},
            "/expect/tokens_per_s_per_gp/min: the result JSON has no key \"tokens_per_s_per_gp\" "
            "(at \"tokens_per_s_per_gp\"); did you mean tokens_per_s_per_gpu?"},
        BadInput{"expect_status_no_result_has",
                 {{"expect", {{"status", "OK"}}}},
                 "/expect/status: expected \"ok\" or \"oom\" (a result's status), found the "
                 "string \"OK\""},
        BadInput{"bad_sweep_block",
                 {{"sweep", {{"training.micro_batch", "abc"}}}},
                 "/sweep/training.micro_batch"},
        // A GPU a billion times too slow: an operation would outlast what simulated time holds.
        BadInput{"rates_out_of_range",
                 {{"hardware", {{"gpu", {{"hbm_bandwidth_GBps", 1e-300}}}}}},
                 "longer than the one day fsdpsim simulates per operation"},
        // An integer past 64 bits is refused with the key's bound, not as a number that is no
        // integer, nor with 64 bits' bound where the key's is smaller.
        BadInput{"global_batch_past_64_bits",
                 {{"training", {{"global_batch", 9.3e18}}}},
                 "/training/global_batch: expected a positive integer of at most 2^63 - 1, found "
                 "the number 9.3e+18"},
        BadInput{"micro_batch_past_64_bits",
                 {{"training", {{"micro_batch", 9.3e18}}}},
                 "/training/micro_batch: expected a positive integer of at most 16777216, found "
                 "the number 9.3e+18"},
        BadInput{"nodes_past_64_bits",
                 {{"hardware", {{"nodes", 1e30}}}},
                 "/hardware/nodes: expected a positive integer of at most 2147483647, found the "
                 "number 1e+30"},
        BadInput{"sm_count_past_any_gpu",
                 {{"hardware", {{"gpu", {{"sm_count", 100000000}}}}}},
                 "/hardware/gpu/sm_count: expected a positive integer of at most 4096"},
        // Descriptions are text for the reader, in a scenario, a model and a hardware preset.
        // A model is a preset's name or path, or an object: both are named.
        BadInput{"model_number",
                 {{"model", 3}},
                 "/model: expected a preset name or path (a string) or an object, found the "
                 "number 3"},
        // A preset's name with ".json" is a path: the message gives the name to write.
        BadInput{"model_preset_named_as_a_file",
                 {{"model", "llama-3.1-8b.json"}},
                 "not found (a relative path is read from the folder of "
                 "model_preset_named_as_a_file.json"},
        BadInput{"model_preset_named_as_a_file_hint",
                 {{"model", "llama-3.1-8b.json"}},
                 "; for the models preset llama-3.1-8b write \"llama-3.1-8b\""},
        BadInput{"model_description_not_text",
                 {{"model", {{"preset", "gpt-175b"}, {"description", 3}}}},
                 "/model/description: expected a string, found the number 3"},
        // Without a preset, both ways of describing the hardware are named.
        BadInput{"hardware_without_preset",
                 {{"hardware", {{"preset", nullptr}}}},
                 "/hardware/preset: required key is missing: expected \"preset\" (a hardware "
                 "preset such as h100-sxm-80gb) or a complete description with \"gpu\" and "
                 "\"node\""},
        BadInput{"hardware_description_not_text",
                 {{"hardware", {{"description", {{"a", 1}}}}}},
                 "/hardware/description: expected a string, found an object"},
        // T5's bias table is buckets x heads: a bucket count past any sequence is refused.
        BadInput{
            "t5_buckets_out_of_range",
            {{"model",
              {{"preset", "t5-small"}, {"relative_attention_num_buckets", 2251799813685248LL}}}},
            "/model/relative_attention_num_buckets: expected a positive integer of at most "
            "1048576, found 2251799813685248"},
        // minGPT normalizes with nn.LayerNorm: rms_norm would change nothing, so it is refused.
        BadInput{"rms_norm_on_layernorm_model",
                 {{"training", {{"rms_norm", "eager"}}}},
                 "/training/rms_norm: applies to models that normalize with RMSNorm (llama, t5)"},
        // Each size within its bound, but 16 layers each saving 64 GiB per sample at a micro-batch
        // of 16.7M samples hold 2^64 bytes: refused, not wrapped into a small peak.
        BadInput{"memory_past_64_bits",
                 {{"model",
                   {{"family", "custom"},
                    {"layers",
                     {{{"name", "l"},
                       {"count", 16},
                       {"params", 1000},
                       {"saved_activation_bytes_per_sample", 68719476736LL}}}}}},
                  {"hardware", {{"nodes", 1}}},
                  {"training",
                   {{"global_batch", 134217728},
                    {"micro_batch", 16777216},
                    {"seq_len", 1},
                    {"activation_checkpointing", "none"},
                    {"checkpoint_early_stop", nullptr}}}},
                 "a byte count overflows 2^63 bytes (8 EiB)"}),
    [](const ::testing::TestParamInfo<BadInput>& param) { return std::string(param.param.name); });

TEST(Cli, StragglersAddARankTableAndRankClassesToTheResult) {
  const fs::path p = scenario_with(
      "straggler", {{"hardware", {{"stragglers", {{{"nodes", {3}}, {"compute_speed", 0.8}}}}}}});
  const Outcome text = run_fsdpsim("run " + p.string());
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("ranks (hardware.stragglers"), std::string::npos) << text.output;
  const Outcome json = run_fsdpsim("run " + p.string() + " --json -");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json r = nlohmann::json::parse(json.output);
  ASSERT_EQ(r["rank_classes"].size(), 2U);
  EXPECT_EQ(r["rank_classes"][0]["ranks"], 120);
  EXPECT_EQ(r["rank_classes"][1]["first_rank"], 24);
  EXPECT_EQ(r["rank_classes"][1]["ranks"], 8);
  // The slow node's collectives start last, so they wait for nobody; the others wait for it.
  EXPECT_EQ(r["rank_classes"][1]["waits_for_others_s"].get<double>(), 0.0);
  EXPECT_GT(r["rank_classes"][0]["waits_for_others_s"].get<double>(), 0.0);
  EXPECT_NE(text.output.find("host work      idle  waits for others  peak reserved"),
            std::string::npos)
      << text.output;
  // Without the allocator model each class's reserved memory is its lower bound, peak active,
  // as the step's is: never below what it allocated.
  const nlohmann::json lower_bound = nlohmann::json::parse(
      run_fsdpsim("run " + p.string() + " --set allocator.enabled=false --json -").output);
  EXPECT_EQ(lower_bound["reserved_model"], "lower_bound_active");
  for (const nlohmann::json& k : lower_bound["rank_classes"]) {
    EXPECT_GE(k["peak_mem_reserved_gib"].get<double>(), k["peak_mem_allocated_gib"].get<double>())
        << k.dump();
  }
  // Compute-bound at 2 Tb/s per node: the job runs at about the slow node's pace.
  const Outcome uniform = run_fsdpsim("run " + kScenario + " --json -");
  const double ratio = r["step_time_s"].get<double>() /
                       nlohmann::json::parse(uniform.output)["step_time_s"].get<double>();
  EXPECT_GT(ratio, 1.15);
  EXPECT_LT(ratio, 1.25);
  EXPECT_FALSE(nlohmann::json::parse(uniform.output).contains("rank_classes"));
  // The trace shows each class as a process named by its first rank.
  const fs::path trace = temp_dir() / "straggler.trace.json";
  ASSERT_EQ(run_fsdpsim("run " + p.string() + " --trace " + trace.string()).exit_code, 0);
  std::set<int> pids;
  std::set<std::string> names;
  const nlohmann::json events = nlohmann::json::parse(read_file(trace))["traceEvents"];
  for (const auto& e : events) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "process_name") names.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 24}));
  EXPECT_TRUE(names.count("rank 24 (8 ranks alike; compute speed 0.8, host speed 1)"))
      << *names.begin();
}

// hardware.node_speed_spread 0.025 on 16 nodes: the slowest node is expected 1.765991 standard
// deviations below the mean (Harter's table), at 1 - 0.025 x 1.765991 = 0.95585 of the preset's
// speed; the last node's eight ranks carry it, and the compute-bound job runs at about its pace
// (no slower: only compute slows). With stragglers too, or out of range: exit 2.
TEST(Cli, ANodeSpeedSpreadRunsTheJobAtItsExpectedSlowestNode) {
  const fs::path p = scenario_with("node_spread", {{"hardware", {{"node_speed_spread", 0.025}}}});
  const Outcome json = run_fsdpsim("run " + p.string() + " --json -");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json r = nlohmann::json::parse(json.output);
  ASSERT_EQ(r["rank_classes"].size(), 2U);
  EXPECT_EQ(r["rank_classes"][1]["first_rank"], 120);
  EXPECT_EQ(r["rank_classes"][1]["ranks"], 8);
  EXPECT_NEAR(r["rank_classes"][1]["compute_speed"].get<double>(), 1.0 - 0.025 * 1.765991, 1e-5);
  const Outcome uniform = run_fsdpsim("run " + kScenario + " --json -");
  const double ratio = r["step_time_s"].get<double>() /
                       nlohmann::json::parse(uniform.output)["step_time_s"].get<double>();
  EXPECT_GT(ratio, 1.03);
  EXPECT_LE(ratio, 1.0 / (1.0 - 0.025 * 1.765991) + 1e-4);

  const fs::path both =
      scenario_with("node_spread_and_stragglers",
                    {{"hardware",
                      {{"node_speed_spread", 0.025},
                       {"stragglers", {{{"ranks", {3}}, {"compute_speed", 0.9}}}}}}});
  const Outcome refused = run_fsdpsim("run " + both.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("/hardware/node_speed_spread: expected node_speed_spread or "
                                "stragglers, found both"),
            std::string::npos)
      << refused.output;
  const Outcome range = run_fsdpsim("run " + kScenario + " --set hardware.node_speed_spread=0.3");
  EXPECT_EQ(range.exit_code, 2) << range.output;
  EXPECT_NE(range.output.find("/hardware/node_speed_spread"), std::string::npos) << range.output;
  // A what-if of the scenario, not a property of a GPU model: a preset with it is refused.
  nlohmann::json preset = nlohmann::json::parse(
      read_file(fs::path(FSDPSIM_CONFIGS_DIR) / "hardware" / "a100-sxm-80gb.json"));
  preset["node_speed_spread"] = 0.02;
  const fs::path preset_file = temp_dir() / "a100_with_spread.json";
  std::ofstream(preset_file) << preset.dump();
  const Outcome in_preset =
      run_fsdpsim("run " + kScenario + " --set hardware.preset=" + preset_file.string());
  EXPECT_EQ(in_preset.exit_code, 2) << in_preset.output;
  EXPECT_NE(in_preset.output.find(preset_file.string() +
                                  ": /node_speed_spread: not a key of a hardware preset: "
                                  "node_speed_spread belongs to the scenario's hardware section "
                                  "(hardware.node_speed_spread)"),
            std::string::npos)
      << in_preset.output;
  // So are the other keys of the scenario's section: a preset's "nodes" or "calibration" were
  // read as nothing.
  for (const char* key : {"nodes", "calibration", "preset"}) {
    nlohmann::json with_key = nlohmann::json::parse(
        read_file(fs::path(FSDPSIM_CONFIGS_DIR) / "hardware" / "a100-sxm-80gb.json"));
    with_key[key] = std::string(key) == "nodes" ? nlohmann::json(99) : nlohmann::json("x");
    const fs::path file = temp_dir() / (std::string("a100_with_") + key + ".json");
    std::ofstream(file) << with_key.dump();
    const Outcome o = run_fsdpsim("run " + kScenario + " --set hardware.preset=" + file.string());
    EXPECT_EQ(o.exit_code, 2) << key << "\n" << o.output;
    EXPECT_NE(o.output.find(file.string() + ": /" + key + ": not a key of a hardware preset"),
              std::string::npos)
        << o.output;
  }
}

TEST(Cli, MalformedJsonNamesLineAndColumn) {
  const fs::path p = temp_dir() / "malformed.json";
  std::ofstream(p)
      << "{\n  \"schema_version\": 1,\n  \"model\": \"gpt-175b\"\n  \"training\": {}\n}\n";
  const Outcome o = run_fsdpsim("run " + p.string());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("malformed JSON at line 4"), std::string::npos) << o.output;
}

// A number beyond a double's range, a folder, a preset name the file system refuses:
// errors naming the file, not internal ones.
TEST(Cli, UnreadableInputsAreBadInput) {
  const fs::path huge = temp_dir() / "huge_number.json";
  std::ofstream(huge) << "{\"schema_version\": 1, \"model\": \"gpt-175b\", \"hardware\": "
                         "{\"preset\": \"a100-sxm-80gb\", \"nodes\": 1e400}}\n";
  const Outcome overflow = run_fsdpsim("run " + huge.string());
  EXPECT_EQ(overflow.exit_code, 2) << overflow.output;
  EXPECT_NE(overflow.output.find("huge_number.json: malformed JSON at line 1, column 93: expected "
                                 "numbers within a double's range"),
            std::string::npos)
      << overflow.output;
  const Outcome folder = run_fsdpsim("run " + temp_dir().string());
  EXPECT_EQ(folder.exit_code, 2) << folder.output;
  EXPECT_NE(folder.output.find(": expected a regular file, found a folder"), std::string::npos)
      << folder.output;
  const fs::path long_name = scenario_with("long_preset_name", {{"model", std::string(300, 'x')}});
  const Outcome name = run_fsdpsim("run " + long_name.string());
  EXPECT_EQ(name.exit_code, 2) << name.output;
  EXPECT_NE(name.output.find("/model: unknown models preset"), std::string::npos) << name.output;
  // The system's reason, not a guess: a name too long, a read that fails (not an empty file).
  const Outcome too_long =
      run_fsdpsim("run " + (temp_dir() / (std::string(300, 'n') + ".json")).string());
  EXPECT_EQ(too_long.exit_code, 2) << too_long.output;
  EXPECT_NE(too_long.output.find("cannot open the file: File name too long"), std::string::npos)
      << too_long.output;
  if (fs::exists("/proc/self/mem")) {
    const Outcome eio = run_fsdpsim("run /proc/self/mem");
    EXPECT_EQ(eio.exit_code, 2) << eio.output;
    EXPECT_NE(eio.output.find("/proc/self/mem: cannot read the file: Input/output error"),
              std::string::npos)
        << eio.output;
  }
}

// A key given twice is an error at its path (a parser would keep one silently); an error in a
// value --set gave says so; a long bad value is shown by its start, not echoed whole.
TEST(Cli, DuplicateKeysSetOriginsAndLongValuesAreNamed) {
  const fs::path dup = temp_dir() / "duplicate_key.json";
  std::ofstream(dup) << "{\"schema_version\": 1, \"model\": \"gpt-175b\", \"training\": "
                        "{\"global_batch\": \"abc\", \"seq_len\": 2048, \"global_batch\": 16}}\n";
  const Outcome twice = run_fsdpsim("run " + dup.string());
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_NE(twice.output.find("duplicate_key.json: /training/global_batch: key given twice"),
            std::string::npos)
      << twice.output;
  // A number beyond a double's range is named as a number, not taken as the string "1e400".
  for (const auto& [value, message] :
       {std::pair<std::string, std::string>{"0",
                                            "/training/micro_batch: expected a positive "
                                            "integer, found the number 0 (the value comes "
                                            "from --set training.micro_batch=0)"},
        {"1e400",
         "--set \"training.micro_batch=1e400\": expected numbers within a double's "
         "range, found 1e400"}}) {
    const Outcome set = run_fsdpsim("run " + kScenario + " --set training.micro_batch=" + value);
    EXPECT_EQ(set.exit_code, 2) << set.output;
    EXPECT_NE(set.output.find(message), std::string::npos) << set.output;
  }
  const Outcome long_value =
      run_fsdpsim("run " + kScenario + " --set fsdp.sharding_strategy=" + std::string(500, 'x'));
  EXPECT_EQ(long_value.exit_code, 2) << long_value.output;
  EXPECT_NE(long_value.output.find("...\" (500 characters)"), std::string::npos)
      << long_value.output;
  EXPECT_LT(long_value.output.size(), 1000u) << long_value.output;
  const Outcome long_string = run_fsdpsim("run " + kScenario + " --set training.micro_batch=\"" +
                                          std::string(500, 'y') + "\"");
  EXPECT_EQ(long_string.exit_code, 2) << long_string.output;
  EXPECT_NE(long_string.output.find("found a string of 500 characters starting \"yyy"),
            std::string::npos)
      << long_string.output;
}

TEST(Cli, MissingFileAndBadUsageExitTwo) {
  EXPECT_EQ(run_fsdpsim("run /nonexistent/scenario.json").exit_code, 2);
  EXPECT_EQ(run_fsdpsim("run").exit_code, 2);
  EXPECT_EQ(run_fsdpsim("frobnicate").exit_code, 2);
  const Outcome bad_set = run_fsdpsim("run " + kScenario + " --set fsdp.backward_prefetch");
  EXPECT_EQ(bad_set.exit_code, 2);
  EXPECT_NE(bad_set.output.find("expected KEY=VALUE"), std::string::npos) << bad_set.output;
  const Outcome unwritable = run_fsdpsim("run " + kScenario + " --json /nonexistent/dir/out.json");
  EXPECT_EQ(unwritable.exit_code, 2) << unwritable.output;
}

// Options that would silently do nothing or undo each other are usage errors: an empty path, two
// outputs to one place, a negative row count. An error at a key set twice by --set names the
// --set that holds (the last).
TEST(Cli, OptionsThatWouldDoNothingAreRefused) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"run " + kScenario + " --json ''", "--json: expected a path or name, found an empty string"},
      {"run " + kScenario + " --json - --trace -",
       "-: is given for two outputs; stdout can take one"},
      {"run " + kScenario + " --json " + (temp_dir() / "same.json").string() + " --trace " +
           (temp_dir() / "." / "same.json").string(),
       "is given for two outputs; each needs a file of its own"},
      {"sweep " + kScenario + " --grid training.micro_batch=1,2 --top -1",
       "--top: expected a number of rows >= 0 (0 = all), found \"-1\""},
      {"run " + kScenario + " --set training.micro_batch=2 --set training.micro_batch=x",
       "(the value comes from --set training.micro_batch=x)"},
      // A key the --set created under an unknown section: the section is named, and the --set.
      {"run " + kScenario + " --set bogus.x=1",
       "/bogus: unknown key; the keys here are allocator, ddp, deepspeed, description, expect, "
       "fsdp, hardware, model, name, parallelism, schema_version, sweep, training (the value "
       "comes from --set bogus.x=1)"},
      // An optional key read only when present is a key of its object all the same: a typo of
      // it gets its did-you-mean, and it is listed.
      {"run " + kScenario + " --set training.autocast_dtyp=bf16",
       "/training/autocast_dtyp: unknown key; did you mean autocast_dtype?"},
      {"run " + kScenario + " --set hardware.gpu.memory_GiB=80",
       "/hardware/gpu/memory_GiB: unknown key; the keys here are attention_backward_efficiency, "},
      {"run " + kScenario + " --set hardware.gpu.memory_GiB=80", ", hbm_bytes, "},
      // An optional key left out is listed too.
      {"run " + kScenario +
           " --set 'hardware.stragglers=[{\"ranks\": [0], \"compute_speed\": 0.9, \"qqqq\": 1}]'",
       "/hardware/stragglers/0/qqqq: unknown key; the keys here are compute_speed, host_speed, "
       "nodes, ranks"}};
  for (const auto& [command, message] : bad) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << command << "\n" << o.output;
  }
  EXPECT_FALSE(fs::exists(temp_dir() / "same.json"));
  // Relative names of a file not yet there: "rel.json" and "./rel.json" are one place too.
  const Outcome relative = run_fsdpsim("run " + kScenario + " --json rel.json --trace ./rel.json",
                                       "cd " + temp_dir().string() + " && ");
  EXPECT_EQ(relative.exit_code, 2) << relative.output;
  EXPECT_NE(relative.output.find("is given for two outputs"), std::string::npos) << relative.output;
  EXPECT_FALSE(fs::exists(temp_dir() / "rel.json"));
}

// Outputs land together or not at all: a device that cannot take its output (a full disk) fails
// the command before the other outputs are moved into place.
TEST(Cli, AnOutputThatCannotBeWrittenKeepsTheOthersOut) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path json = temp_dir() / "not_alone.json";
  fs::remove(json);
  const Outcome o =
      run_fsdpsim("run " + kScenario + " --json " + json.string() + " --trace /dev/full");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("cannot write /dev/full: No space left on device"), std::string::npos)
      << o.output;
  EXPECT_FALSE(fs::exists(json));
  for (const auto& entry : fs::directory_iterator(temp_dir()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

// A sweep's trace lands with its table or neither does: the trace of a point failing to write
// (a full device) leaves the table that was there before.
TEST(Cli, ASweepTraceThatCannotBeWrittenKeepsTheTableOut) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path csv = temp_dir() / "kept_table.csv";
  std::ofstream(csv) << "before\n";
  const Outcome o = run_fsdpsim("sweep " + kScenario +
                                " --set model.n_layers=2 --grid training.micro_batch=1,2 --out " +
                                csv.string() + " --trace-row 0 --trace /dev/full");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("cannot write /dev/full"), std::string::npos) << o.output;
  EXPECT_EQ(read_file(csv), "before\n");
}

// /dev/stdout, /dev/stderr and /dev/fd/N are this process's own streams, written as they stand:
// a log the shell appends stdout to keeps what it held and gets the JSON, where reopening the path
// had replaced the log; /dev/stdout is stdout, so no summary joins the JSON there, as with '-'.
TEST(Cli, OutputsToTheProcesssOwnStreamsAreWrittenAsStreams) {
  const fs::path log = temp_dir() / "appended.log";
  std::ofstream(log) << "before\n";
  const Outcome appended = run_fsdpsim("run " + kScenario + " --set model.n_layers=2 --json " +
                                       "/dev/stdout >> " + log.string());
  EXPECT_EQ(appended.exit_code, 0) << appended.output;
  const std::string text = read_file(log);
  ASSERT_EQ(text.rfind("before\n", 0), 0U) << text;
  EXPECT_TRUE(nlohmann::json::accept(text.substr(7))) << text;

  const fs::path fd3 = temp_dir() / "fd3.json";
  const Outcome descriptor = run_fsdpsim(
      "run " + kScenario + " --set model.n_layers=2 --json /dev/fd/3 3>" + fd3.string());
  EXPECT_EQ(descriptor.exit_code, 0) << descriptor.output;
  EXPECT_NE(read_file(fd3).find("\"step_time_s\""), std::string::npos);

  // A descriptor that refuses the write (read-only here) fails before the files land.
  const fs::path kept_out = temp_dir() / "not_landed.json";
  fs::remove(kept_out);
  const Outcome read_only = run_fsdpsim("run " + kScenario + " --set model.n_layers=2 --json " +
                                        "/dev/fd/3 --trace " + kept_out.string() + " 3</dev/null");
  EXPECT_EQ(read_only.exit_code, 2) << read_only.output;
  EXPECT_FALSE(fs::exists(kept_out));
  // stdout redirected to a file is that file: a second output to it is refused.
  const fs::path same = temp_dir() / "stdout_file.json";
  const Outcome twice = run_fsdpsim("run " + kScenario + " --json /dev/stdout --memory-timeline " +
                                    same.string() + " > " + same.string());
  EXPECT_EQ(twice.exit_code, 2);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--json /dev/stdout --trace -", "is given for two outputs; stdout can take one"},
      {"--json /dev/fd/9", "cannot write /dev/fd/9: the descriptor is not open"},
      // The kernel names descriptors without leading zeros: a path like any other.
      {"--json /dev/fd/01", "cannot write /dev/fd/01: No such file or directory"}};
  for (const auto& [outputs, message] : refused) {
    const Outcome o = run_fsdpsim("run " + kScenario + " " + outputs);
    EXPECT_EQ(o.exit_code, 2) << outputs << "\n" << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << outputs << "\n" << o.output;
  }
}

// A rename into place that fails after others succeeded (here: onto a file made append-only,
// which can be written but not replaced; an immutable one is refused before anything runs) puts
// the outputs already renamed back as they were: the file they replaced comes back, a new one
// goes.
TEST(Cli, AFailedRenamePutsTheOutputsAlreadyInPlaceBack) {
  const fs::path dir = temp_dir() / "rename_fails";
  fs::create_directories(dir);
  const fs::path json = dir / "replaced.json";
  const fs::path timeline = dir / "new.csv";
  const fs::path locked = dir / "locked.json";
  std::ofstream(json) << "before\n";
  fs::remove(timeline);
  std::ofstream(locked) << "locked\n";
  if (std::system(("chattr +a " + locked.string() + " 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "chattr +a is not available here";
  const Outcome o =
      run_fsdpsim("run " + kScenario + " --set model.n_layers=2 --json " + json.string() +
                  " --memory-timeline " + timeline.string() + " --trace " + locked.string());
  EXPECT_EQ(std::system(("chattr -a " + locked.string()).c_str()), 0);
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("cannot move the output into place at " + locked.string()),
            std::string::npos)
      << o.output;
  EXPECT_EQ(read_file(json), "before\n");
  EXPECT_FALSE(fs::exists(timeline));
  EXPECT_EQ(read_file(locked), "locked\n");
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().rfind(".fsdpsim-", 0), std::string::npos)
        << entry.path();
}

// Each command is bad usage (exit 2) and says `message`.
void expect_each_refused(const std::vector<std::string>& commands, const std::string& message) {
  for (const std::string& command : commands) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << command << "\n" << o.output;
  }
}

// An empty --configs is refused by every command that takes it, not read as the default folder.
TEST(Cli, AnEmptyConfigsFolderIsRefused) {
  const std::string csv = std::string(FSDPSIM_SOURCE_DIR) + "/configs/validation/cases.csv";
  expect_each_refused(
      {"run " + kScenario + " --configs ''", "explain " + kScenario + " --configs ''",
       "sweep " + kScenario + " --grid training.micro_batch=1 --configs ''",
       "check " + kScenario + " --configs ''", "validate " + csv + " --configs ''"},
      "--configs: expected a path or name, found an empty string");
}

// An empty input path is refused by name, not read as a file called "" ("cannot open the file").
TEST(Cli, AnEmptyInputPathIsRefused) {
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"run ''", "scenario"},
      {"explain ''", "scenario"},
      {"sweep ''", "scenario"},
      {"check " + kScenario + " ''", "paths"},
      {"validate ''", "cases"},
      {"merge ''", "inputs"},
      {"report '' --out " + (temp_dir() / "empty_report").string(), "csv"},
      {"calibrate plan ''", "scenario"},
      {"calibrate fit ''", "profile"},
      {"calibrate import-nccl-tests '' -o x.json --gpu h100-sxm-80gb", "logs"}};
  for (const auto& [command, option] : commands) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find(option + ": expected a path or name, found an empty string"),
              std::string::npos)
        << command << "\n"
        << o.output;
  }
}

// A bound between two keys is reported at the key that breaks it, with the other key's path and
// value, and the --set that gave either is named.
TEST(Cli, ABoundBetweenTwoKeysNamesBothAndTheSet) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hardware.gpu.hbm_bytes=1",
       "/hardware/gpu/runtime_reserved_GiB: expected less than the device's memory "
       "(/hardware/gpu/hbm_bytes: 1 B), found 1.5 GiB (/hardware/gpu/hbm_bytes comes from --set "
       "hardware.gpu.hbm_bytes=1)"},
      {"hardware.gpu.peak_dense_tflops.fp32=600",
       "/hardware/gpu/peak_dense_tflops/tf32: expected 0 (none) or at least the fp32 peak "
       "(/hardware/gpu/peak_dense_tflops/fp32: 600 TFLOP/s): a narrower type is never slower, "
       "found 494.5 (/hardware/gpu/peak_dense_tflops/fp32 comes from --set "
       "hardware.gpu.peak_dense_tflops.fp32=600)"},
      {"hardware.gpu.sm_count=1",
       "/hardware/node/nccl_channels: expected fewer than the GPU's SMs (/hardware/gpu/sm_count: "
       "1)"},
      {"hardware.gpu.peak_dense_tflops.bf16=0",
       "/fsdp/param_dtype: h100-sxm-80gb has no bf16 peak in its hardware description "
       "(/hardware/gpu/peak_dense_tflops/bf16: 0) (/hardware/gpu/peak_dense_tflops/bf16 comes "
       "from --set hardware.gpu.peak_dense_tflops.bf16=0)"},
      // Bounds of one key are the JSON reader's, at the key's path, not the hardware model's
      // check of its own fields (gpu.peak_dense[fp32], without a path or the --set).
      {"hardware.gpu.peak_dense_tflops.fp32=0",
       "/hardware/gpu/peak_dense_tflops/fp32: expected a positive number, found the number 0 "
       "(the value comes from --set hardware.gpu.peak_dense_tflops.fp32=0)"},
      {"hardware.node.nic_busbw_loss_per_node_doubling=1",
       "/hardware/node/nic_busbw_loss_per_node_doubling: expected a share of the bandwidth in "
       "[0, 1), found 1 (the value comes from --set "
       "hardware.node.nic_busbw_loss_per_node_doubling=1)"},
      {"hardware.node.nvls_all_reduce_efficiency=1.5",
       "/hardware/node/nvls_all_reduce_efficiency: expected a non-negative number of at most 1, "
       "found the number 1.5 (the value comes from --set "
       "hardware.node.nvls_all_reduce_efficiency=1.5)"},
      // An empty stragglers list says no rank is slow: beside a spread, the message says so.
      {"hardware.node_speed_spread=0.05 --set 'hardware.stragglers=[]'",
       "/hardware/node_speed_spread: expected node_speed_spread or stragglers, found both: an "
       "empty stragglers list says no rank is slow"},
      // Below a range, its upper end is named too.
      {"hardware.node_speed_spread=-0.01",
       "/hardware/node_speed_spread: expected a non-negative number of at most 0.2, found the "
       "number -0.01"},
      // Past 64 bits, a 32-bit key's own bound.
      {"hardware.node.nccl_channels=1e30",
       "/hardware/node/nccl_channels: expected a non-negative integer of at most 2147483647, "
       "found the number 1e+30"}};
  for (const auto& [set, message] : cases) {
    const Outcome o = run_fsdpsim("run " + kLlamaScenario + " --set " + set);
    EXPECT_EQ(o.exit_code, 2) << set << "\n" << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << set << "\n" << o.output;
  }
  const Outcome sm = run_fsdpsim("run " + kLlamaScenario + " --set hardware.gpu.sm_count=1");
  EXPECT_NE(sm.output.find("(/hardware/gpu/sm_count comes from --set hardware.gpu.sm_count=1)"),
            std::string::npos)
      << sm.output;
  // The key that breaks the bound is named first, whatever order the --set options come in.
  const Outcome both = run_fsdpsim("run " + kLlamaScenario +
                                   " --set hardware.node.nccl_channels=200 --set "
                                   "hardware.gpu.sm_count=132");
  EXPECT_NE(both.output.find("found 200 (the value comes from --set "
                             "hardware.node.nccl_channels=200)"),
            std::string::npos)
      << both.output;
}

// FSDP2 cannot all-gather float8 weights from a k-rank post-forward shard (NotImplementedError in
// FSDPParam.all_gather_inputs): a float8 all-gather with reshard_after_forward k is refused.
TEST(Cli, AFloat8AllGatherCannotReshardToKRanks) {
  const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                " --set fsdp.version=2 --set training.matmul_dtype=fp8 --set "
                                "fsdp.float8_all_gather=true --set fsdp.reshard_after_forward=4");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("/fsdp/reshard_after_forward: expected true or false with "
                          "fsdp.float8_all_gather, found 4"),
            std::string::npos)
      << o.output;
}

// An output written over one of the command's inputs would destroy it: refused before anything
// is written, whatever the command and whatever name reaches the input.
TEST(Cli, AnOutputOverAnInputIsRefused) {
  const fs::path dir = temp_dir() / "over_input";
  fs::create_directories(dir);
  const fs::path scenario = dir / "s.json";
  fs::copy_file(kScenario, scenario, fs::copy_options::overwrite_existing);
  const fs::path profile = dir / "p.json";
  fs::copy_file(fs::path(FSDPSIM_SOURCE_DIR) / "configs/calibration/a100-sxm-80gb.json", profile,
                fs::copy_options::overwrite_existing);
  const fs::path link = dir / "link.json";
  fs::remove(link);
  fs::create_symlink(scenario, link);
  const std::string original = read_file(scenario);
  const std::vector<std::string> commands = {
      "run " + scenario.string() + " --json " + scenario.string(),
      "run " + scenario.string() + " --trace " + link.string(),
      "explain " + scenario.string() + " --json " + (dir / "." / "s.json").string(),
      "check " + dir.string() + " --junit " + scenario.string(),
      "calibrate plan " + scenario.string() + " -o " + scenario.string(),
      "calibrate fit " + profile.string() + " -o " + profile.string()};
  expect_each_refused(commands, "writing the output there would destroy it");
  // Refused before the report is printed: the error is all there is.
  for (const std::string& command : {commands[4], commands[5]}) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.output.rfind("error: ", 0), 0U) << command << "\n" << o.output;
  }
  EXPECT_EQ(read_file(scenario), original);
  EXPECT_EQ(read_file(profile),
            read_file(fs::path(FSDPSIM_SOURCE_DIR) / "configs/calibration/a100-sxm-80gb.json"));
}

// A fresh folder `dir` holding a copy of the source tree's presets, as dir/configs (returned).
fs::path copy_of_configs(const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path configs = dir / "configs";
  fs::copy(fs::path(FSDPSIM_SOURCE_DIR) / "configs", configs, fs::copy_options::recursive);
  return configs;
}

// The files a command reads besides the one it is given are inputs too: the presets of a
// --configs folder, a calibration profile, --against and --gpu presets, a check's baseline.
TEST(Cli, AnOutputOverAFileTheInputNamesIsRefused) {
  const fs::path dir = temp_dir() / "over_named_input";
  const fs::path configs = copy_of_configs(dir);
  const fs::path preset = configs / "hardware/a100-sxm-80gb.json";
  const fs::path profile = configs / "calibration/a100-sxm-80gb.json";
  const std::string preset_text = read_file(preset);
  const std::string profile_text = read_file(profile);
  const fs::path baseline_dir = dir / "baselines";
  fs::create_directories(baseline_dir);
  const fs::path baseline = baseline_dir / "b.result.json";
  ASSERT_EQ(run_fsdpsim("run " + kScenario + " --json " + baseline.string()).exit_code, 0);
  const std::string baseline_text = read_file(baseline);
  nlohmann::json checked = nlohmann::json::parse(read_file(kScenario));
  checked["expect"] = {{"baseline", "baselines/b.result.json"}};
  std::ofstream(dir / "checked.json") << checked.dump(2);
  const std::string cases =
      (fs::path(FSDPSIM_SOURCE_DIR) / "configs/validation/cases.csv").string();
  const std::string row = " --where case_id=lf-a10080-mpt30b-s4096-g8-mb1-ac1-1";
  const std::string with_configs = " --configs " + configs.string();
  const std::vector<std::string> commands = {
      "sweep " + kScenario + with_configs + " --set hardware.preset=a100-sxm-80gb --out " +
          preset.string(),
      "validate " + cases + row + with_configs + " --json " + preset.string(),
      "validate " + cases + row + " --calibration " + profile.string() + " --md " +
          profile.string(),
      "calibrate fit " + profile.string() + " --against " + preset.string() + " -o " +
          preset.string(),
      "check " + (dir / "checked.json").string() + " --junit " + baseline.string()};
  expect_each_refused(commands, "writing the output there would destroy");
  EXPECT_EQ(read_file(preset), preset_text);
  EXPECT_EQ(read_file(profile), profile_text);
  EXPECT_EQ(read_file(baseline), baseline_text);
}

// A preset with a key this binary does not know (a presets folder newer than the binary: another
// checkout, or a pull without a rebuild) says which folder the binary reads and how to mend it; a
// file named by its path is the user's own, and gets no such note.
TEST(Cli, AnUnknownKeyInAPresetSaysWhichFolderTheBinaryReads) {
  const fs::path configs = copy_of_configs(temp_dir() / "newer_presets");
  const fs::path preset = configs / "hardware/h100-sxm-80gb.json";
  nlohmann::json newer = nlohmann::json::parse(read_file(preset));
  newer["node"]["a_future_key"] = 1;
  std::ofstream(preset) << newer.dump(2);
  for (const std::string& folder : {configs.string(), configs.string() + "/"}) {
    const Outcome o = run_fsdpsim("run " + kLlamaScenario + " --configs " + folder);
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_NE(o.output.find("/node/a_future_key: unknown key"), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("; this fsdpsim reads its presets from " + folder +
                            " (--configs, else $FSDPSIM_CONFIGS_DIR, else the source tree it was "
                            "built from)"),
              std::string::npos)
        << o.output;
  }
  // So does one lacking a key the binary needs (an older folder).
  newer["node"].erase("a_future_key");
  newer["node"].erase("nccl_channels");
  std::ofstream(preset) << newer.dump(2);
  const Outcome older = run_fsdpsim("run " + kLlamaScenario + " --configs " + configs.string());
  EXPECT_EQ(older.exit_code, 2) << older.output;
  EXPECT_NE(older.output.find("/node/nccl_channels: required key is missing"), std::string::npos)
      << older.output;
  EXPECT_NE(older.output.find("; this fsdpsim reads its presets from"), std::string::npos)
      << older.output;
  const Outcome by_path =
      run_fsdpsim("run " + kLlamaScenario + " --set hardware.preset=" + preset.string());
  EXPECT_EQ(by_path.exit_code, 2) << by_path.output;
  EXPECT_NE(by_path.output.find("/node/nccl_channels: required key is missing"), std::string::npos)
      << by_path.output;
  EXPECT_EQ(by_path.output.find("reads its presets from"), std::string::npos) << by_path.output;
  // A key that only some GPUs turn on is required all the same: a preset written before it was
  // would otherwise price an H100's small GEMM grids as an A100's.
  newer["node"]["nccl_channels"] = 24;
  newer["gpu"].erase("gemm_split_k");
  std::ofstream(preset) << newer.dump(2);
  const Outcome no_split = run_fsdpsim("run " + kLlamaScenario + " --configs " + configs.string());
  EXPECT_EQ(no_split.exit_code, 2) << no_split.output;
  EXPECT_NE(no_split.output.find("/gpu/gemm_split_k: required key is missing"), std::string::npos)
      << no_split.output;
}

// Ops per layer differ by model and wrap policy, so the simulation's own size is bounded too:
// 128 Llama blocks whose linears are units of their own, 1024 micro-batches (within the layer-pass
// bound) hold 33.9M ops (55 s, 9.4 GB), and are refused from the first two micro-batches.
TEST(Cli, ASimulationOfTooManyOpsIsRefusedBeforeItIsBuilt) {
  const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                " --set model.n_layers=128 --set training.global_batch=16384 --set "
                                "fsdp.wrap_policy=block_and_linear");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("/training/global_batch: the simulation would hold about 33884156 ops "
                          "(15520 in the first of a step's 1024 micro-batches, 16546 in each "
                          "other, in 2 steps: a warm-up step and the measured one, each op "
                          "simulated in turn); at most 25000000 are"),
            std::string::npos)
      << o.output;
}

// A link to a file not written yet is written through: with the file itself as the other output,
// the two would be one file and the first output lost.
TEST(Cli, TwoOutputsThroughADanglingLinkAreOnePlace) {
  const fs::path dir = temp_dir() / "dangling_alias";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink("out.json", dir / "trace.link");
  const Outcome o = run_fsdpsim("run " + kScenario + " --json out.json --trace trace.link",
                                "cd " + dir.string() + " && ");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("trace.link: is given for two outputs"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(dir / "out.json"));
}

// With float8 linears MFU and HFU are measured against the fp8 peak (llm-foundry's convention):
// against the compute dtype's peak an fp8 step reached 145 % MFU with fp32 parameters.
TEST(Cli, Float8UtilizationIsMeasuredAgainstTheFp8Peak) {
  for (const char* params : {"bf16", "fp32"}) {
    const std::string sets =
        std::string(" --set training.matmul_dtype=fp8 --set fsdp.param_dtype=") + params +
        " --set fsdp.reduce_dtype=fp32";
    const Outcome text = run_fsdpsim("run " + kLlamaScenario + sets);
    ASSERT_EQ(text.exit_code, 0) << text.output;
    EXPECT_NE(text.output.find("(dense fp8 peak 1979 TFLOP/s)"), std::string::npos) << text.output;
    const Outcome json = run_fsdpsim("run " + kLlamaScenario + sets + " --json -");
    const nlohmann::json r = nlohmann::json::parse(json.output);
    EXPECT_GT(r["mfu"].get<double>(), 0.0);
    EXPECT_LE(r["mfu"].get<double>(), r["hfu"].get<double>());
    EXPECT_LT(r["hfu"].get<double>(), 1.0) << params;
  }
}

// A model's FLOPs (MFU's numerator) do not depend on its attention kernel: unfused attention runs
// the masked half of its s x s GEMMs, which counts in the hardware FLOPs only.
TEST(Cli, ModelFlopsAreTheSameWithAndWithoutFlashAttention) {
  const auto flops = [&](const char* flash) {
    const Outcome o =
        run_fsdpsim("run " + kLlamaScenario + " --set training.flash_attention=" + flash +
                    " --set training.micro_batch=1 --json -");
    const nlohmann::json r = nlohmann::json::parse(o.output);
    const double step = r["step_time_s"].get<double>();
    return std::pair{r["model_tflops_per_gpu"].get<double>() * step,
                     r["hardware_tflops_per_gpu"].get<double>() * step};
  };
  const auto [flash_model, flash_hardware] = flops("true");
  const auto [eager_model, eager_hardware] = flops("false");
  EXPECT_NEAR(eager_model, flash_model, 1e-4 * flash_model);  // the JSON keeps 6 digits
  EXPECT_GT(eager_hardware, flash_hardware * 1.01);
}

// With CPU offload the optimizer steps on the host: optimizer_impl picks its loop there too
// (fused: torch's CPU fused AdamW, one pass over seven streams where the per-tensor kernels
// make 21), and the summary's breakdown shows the step as host work.
TEST(Cli, CpuOffloadStepsTheHostOptimizerItsOwnWay) {
  std::map<std::string, double> host_work;
  for (const char* impl : {"for_loop", "fused"}) {
    const Outcome o = run_fsdpsim(
        "run " + kLlamaScenario +
        " --set fsdp.cpu_offload=true --set training.optimizer_impl=" + impl + " --json -");
    ASSERT_EQ(o.exit_code, 0) << o.output;
    host_work[impl] = nlohmann::json::parse(o.output)["breakdown"]["host_work_s"].get<double>();
  }
  EXPECT_GT(host_work["fused"], 0.0);
  EXPECT_NEAR(host_work["for_loop"] / host_work["fused"], 3.0, 0.05);
  const Outcome text = run_fsdpsim("run " + kLlamaScenario + " --set fsdp.cpu_offload=true");
  EXPECT_NE(text.output.find("  host work  "), std::string::npos) << text.output;
}

// FSDP2 has no sharding strategies: the summary names its mesh and reshard_after_forward, not
// the FSDP1 strategy a SHARD_GRAD_OP was read into.
TEST(Cli, TheFsdp2SummaryNamesMeshAndReshardAfterForward) {
  const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                " --set fsdp.version=2 --set fsdp.sharding_strategy=SHARD_GRAD_OP "
                                "--set fsdp.limit_all_gathers=false");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("fsdp       v2, sharded over all GPUs, reshard_after_forward false, "
                          "backward prefetch 1 module ahead"),
            std::string::npos)
      << o.output;
  const std::size_t line = o.output.find("\nfsdp ");
  ASSERT_NE(line, std::string::npos);
  const std::string fsdp_line = o.output.substr(line, o.output.find('\n', line + 1) - line);
  EXPECT_EQ(fsdp_line.find("FULL_SHARD"), std::string::npos) << fsdp_line;
  // Nor FSDP1's BackwardPrefetch: FSDP2 always prefetches its backward_prefetch_modules.
  EXPECT_EQ(fsdp_line.find("BACKWARD_PRE"), std::string::npos) << fsdp_line;
}

// An error no single --set explains, in a file that loads as written, names the --set options
// that made it: FSDP2 on a file whose rate limiter only FSDP1 has.
TEST(Cli, AnErrorTheSetOptionsMadeTogetherNamesThem) {
  const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                " --set fsdp.limit_all_gathers=true --set fsdp.version=2");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("/fsdp/limit_all_gathers: FSDP2 has no rate limiter"), std::string::npos)
      << o.output;
  // limit_all_gathers is a --set of its own here: the loader names it, the value's source.
  EXPECT_NE(o.output.find("(the value comes from --set fsdp.limit_all_gathers=true)"),
            std::string::npos)
      << o.output;
  const fs::path limited = scenario_with("limited", {{"fsdp", {{"limit_all_gathers", true}}}});
  const Outcome v2 = run_fsdpsim("run " + limited.string() + " --set fsdp.version=2");
  EXPECT_EQ(v2.exit_code, 2) << v2.output;
  EXPECT_NE(v2.output.find("(valid without the overrides; not with --set fsdp.version=2)"),
            std::string::npos)
      << v2.output;
  // Of several, the one that breaks it alone is named.
  const Outcome among =
      run_fsdpsim("run " + limited.string() + " --set training.micro_batch=1 --set fsdp.version=2");
  EXPECT_NE(among.output.find("(valid without the overrides; not with --set fsdp.version=2)"),
            std::string::npos)
      << among.output;
}

// reshard_after_forward as PyTorch reads integers: 1 is false (resharding to one rank), the shard
// group's size true (resharding to the whole group).
TEST(Cli, ReshardAfterForwardIntegersReadAsPytorchReadsThem) {
  const std::string fsdp2 = " --set fsdp.version=2 --set fsdp.limit_all_gathers=false";
  const auto fsdp_line = [&](const std::string& value) {
    const Outcome o =
        run_fsdpsim("run " + kLlamaScenario + fsdp2 + " --set fsdp.reshard_after_forward=" + value);
    EXPECT_EQ(o.exit_code, 0) << o.output;
    const std::size_t line = o.output.find("\nfsdp ");
    return line == std::string::npos ? o.output
                                     : o.output.substr(line, o.output.find('\n', line + 1) - line);
  };
  EXPECT_EQ(fsdp_line("1"), fsdp_line("false"));
  EXPECT_EQ(fsdp_line("8"), fsdp_line("true"));  // 8 GPUs: the whole shard group
  EXPECT_NE(fsdp_line("true"), fsdp_line("false"));
}

// The last unit's and the root's reshard_after_forward, and prefetch lists longer than one, are
// named when they differ from the defaults (the blocks' value, false for the root, one unit).
TEST(Cli, TheFsdp2SummaryNamesPerUnitReshardAndPrefetchDepths) {
  const Outcome o = run_fsdpsim("run " + kLlamaScenario +
                                " --set fsdp.version=2 --set fsdp.limit_all_gathers=false "
                                "--set fsdp.last_unit_reshard_after_forward=false "
                                "--set fsdp.root_reshard_after_forward=true "
                                "--set fsdp.backward_prefetch_modules=2 "
                                "--set fsdp.forward_prefetch=true "
                                "--set fsdp.forward_prefetch_modules=3");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("reshard_after_forward true, backward prefetch 2 modules ahead, last "
                          "unit's false, root's true, forward_prefetch (3 modules ahead)"),
            std::string::npos)
      << o.output;
}

// A NUL byte would end the text for the JSON parser, which would then ignore what follows it.
TEST(Cli, ANulByteInAScenarioIsAnError) {
  const fs::path p = temp_dir() / "nul.json";
  std::ofstream(p, std::ios::binary) << read_file(kScenario) << std::string(1, '\0') << "junk {";
  const Outcome o = run_fsdpsim("run " + p.string());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  // Where an editor shows it: the line and column after the scenario's text.
  const std::string text = read_file(kScenario);
  const auto lines = std::count(text.begin(), text.end(), '\n');
  const std::size_t column = text.size() - (text.rfind('\n') + 1) + 1;
  EXPECT_NE(o.output.find("nul.json: expected text, found a NUL byte at line " +
                          std::to_string(lines + 1) + ", column " + std::to_string(column)),
            std::string::npos)
      << o.output;
}

// A time out of range comes from the scenario as a whole, not one key: the message names the
// operation (its layer and kernel, or its collective), the hardware preset the rates come from,
// and the overrides it ran with, so that a sweep's skipped point says which value did it.
TEST(Cli, ATimeOutOfRangeNamesTheOverridesItRanWith) {
  const Outcome run =
      run_fsdpsim("run " + kScenario + " --set hardware.gpu.hbm_bandwidth_GBps=1e-300");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find(
                "embedding.fwd.tok_embedding: an operation would last 1.18e+299 s, longer than the "
                "one day fsdpsim simulates per operation: expected the hardware's rates (hardware "
                "preset \"a100-sxm-80gb\", with the scenario's hardware.gpu and hardware.node keys "
                "over it) and the model's sizes within the range of real GPUs and models (run with "
                "--set hardware.gpu.hbm_bandwidth_GBps=1e-300)"),
            std::string::npos)
      << run.output;
  // A collective, and host work (the CPU AdamW of an offloaded step), are named too.
  const std::pair<const char*, const char*> named[] = {
      {" --set hardware.node.nvlink_GBps=1e-7", ".all_gather: an operation would last"},
      {" --set hardware.node.host_memory_GBps=1e-300 --set fsdp.cpu_offload=true",
       "optimizer.cpu_adamw: an operation would last"}};
  for (const auto& [sets, operation] : named) {
    const Outcome o = run_fsdpsim("run " + kScenario + sets);
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_NE(o.output.find(operation), std::string::npos) << o.output;
  }
  const Outcome sweep = run_fsdpsim("sweep " + kScenario +
                                    " --grid hardware.gpu.hbm_bandwidth_GBps=1e-300,2039 --out -");
  EXPECT_NE(sweep.output.find("(run with --grid hardware.gpu.hbm_bandwidth_GBps=1e-300)"),
            std::string::npos)
      << sweep.output;
}

// A terminal runs the escape sequences a control character starts: none may reach it through
// an input (refused where it is read) or a message echoing the command line (written out).
TEST(Cli, ControlCharactersAreRefusedAndNeverEchoed) {
  const fs::path json = temp_dir() / "escape.json";
  nlohmann::json document = nlohmann::json::parse(read_file(kScenario));
  document["name"] = "red \x1b[31m";
  std::ofstream(json) << document.dump();
  const fs::path csv = temp_dir() / "escape.csv";
  std::ofstream(csv) << "case_id\nab\x1b]0;title\x07\n";
  // In a key (after another: dump sorts them): named in the object that holds it.
  const fs::path key = temp_dir() / "escape_key.json";
  document["name"] = "plain";
  document["hardware"] = {{"preset", "h100-sxm-80gb"}, {"zz\x1b[2J", 2}};
  std::ofstream(key) << document.dump();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"run " + json.string(),
       "escape.json: /name: expected text, found the control character U+001B (escaped as "
       "\\u001B) at byte 4 of the string"},
      {"validate " + csv.string(),
       "escape.csv: expected text, found the control character U+001B at line 2, column 3"},
      {"run " + key.string(),
       "escape_key.json: /hardware: expected a key of text, found \"zz<U+001B>[2J\" with the "
       "control character U+001B"},
      {"run " + kScenario + " --set 'name=\"a\\u009b\"'",
       "--set \"name=\"a\\u009b\"\": expected text, found the control character U+009B"},
      {"run " + kScenario + " --set \"name=a$(printf '\\033')b\"",
       "--set \"name=a<U+001B>b\": expected text, found the control character U+001B at byte 1"},
      // Bytes that are not UTF-8 could not be written into the result JSON.
      {"run " + kScenario + " --set \"name=a$(printf '\\377')b\" --json -",
       "--set \"name=a<0xFF>b\": expected UTF-8 text, found the byte 0xFF at byte 1"},
      {"sweep " + kScenario + " --grid \"model.name=a$(printf '\\377')b,c\" --out -",
       "expected UTF-8 text, found the byte 0xFF at byte 1"},
      // CLI11's own messages quote what they could not convert.
      {"validate " + csv.string() + " --max-mape \"$(printf '\\033')]0;title\"",
       "--max-mape: expected a positive fraction of at most 1 (0.10 = 10%), found "
       "<U+001B>]0;title"},
      {"run " + kScenario + " \"--bogus$(printf '\\033')[2J\"", "--bogus<U+001B>[2J"}};
  for (const auto& [command, message] : bad) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << command << "\n" << o.output;
    EXPECT_FALSE(find_control_character(o.output, "\t\n").has_value()) << o.output;
  }
}

// An override that a later one would wipe out is refused, not lost: a --set inside a key a later
// --set replaces, and in a sweep a --set whose key (or a key holding it) a grid axis sets. The
// same key twice among the --set options keeps the documented rule: the last holds.
TEST(Cli, OverridesThatWouldBeLostAreRefused) {
  nlohmann::json document = nlohmann::json::parse(read_file(kScenario));
  document["sweep"] = {{"model.n_layers", {2, 4}}};
  const fs::path with_block = temp_dir() / "sweep_block_layers.json";
  std::ofstream(with_block) << document.dump(2);
  const std::vector<std::pair<std::string, std::string>> lost = {
      {"run " + kScenario + " --set model.n_layers=2 --set model=gpt-1t",
       "--set model=gpt-1t: replaces the whole model, so --set model.n_layers=2 given before it "
       "would do nothing; give that one after it"},
      {"sweep " + kScenario + " --grid model=gpt-175b,gpt-1t --set model.n_layers=2 --out -",
       "--grid model: sets model at every point, so --set model.n_layers=2 would do nothing; put "
       "it in the grid's values"},
      {"sweep " + kScenario +
           " --grid training.micro_batch=1,2 --set training.micro_batch=4 --out -",
       "--grid training.micro_batch: sets training.micro_batch at every point, so --set "
       "training.micro_batch=4 would do nothing; give one of them"},
      {"sweep " + with_block.string() + " --grid model=gpt-175b,gpt-1t --out -",
       "--grid model: sets model at every point, so " + with_block.string() +
           ": /sweep/model.n_layers: model.n_layers=2 would do nothing"},
      // Tied keys are named as the axis was written.
      {"sweep " + kScenario +
           " --grid 'training.micro_batch+training.global_batch=[1,128],[2,256]'"
           " --set training.global_batch=32 --out -",
       "--grid training.micro_batch+training.global_batch: sets training.global_batch at every "
       "point, so --set training.global_batch=32 would do nothing; give one of them"}};
  for (const auto& [command, message] : lost) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << command << "\n" << o.output;
  }
  // Kept: a key refined after the object that holds it, and the same key twice (the last holds).
  const Outcome refined =
      run_fsdpsim("run " + kScenario + " --set model=gpt-1t --set model.n_layers=2 --json -");
  ASSERT_EQ(refined.exit_code, 0) << refined.output;
  const Outcome twice =
      run_fsdpsim("run " + kScenario + " --set training.seq_len=1024 --set training.seq_len=512");
  ASSERT_EQ(twice.exit_code, 0) << twice.output;
  EXPECT_NE(twice.output.find("seq 512"), std::string::npos) << twice.output;
}

// Every command that simulates a scenario refuses an expect block naming a key no result has,
// as run does: a typo in a CI gate is found whichever command meets it first.
TEST(Cli, AnExpectKeyNoResultHasIsRefusedByEveryCommandThatSimulates) {
  nlohmann::json document = nlohmann::json::parse(read_file(kScenario));
  document["expect"] = {{"tokens_per_sec", {{"min", 1}}}};
  const fs::path file = temp_dir() / "expect_typo.json";
  std::ofstream(file) << document.dump(2);
  for (const std::string& command :
       {"run " + file.string(), "explain " + file.string(), "calibrate plan " + file.string(),
        "check " + file.string(),
        "sweep " + file.string() + " --grid training.micro_batch=1,2 --out -"}) {
    const Outcome o = run_fsdpsim(command);
    EXPECT_EQ(o.exit_code, 2) << command << "\n" << o.output;
    EXPECT_NE(o.output.find("/expect/tokens_per_sec"), std::string::npos) << command << "\n"
                                                                          << o.output;
  }
}

// Messages say where a value came from and what is missing: a grid key is not a --set, and a
// presets folder that does not exist is not an empty list of presets.
TEST(Cli, MessagesNameTheGridAndAMissingPresetsFolder) {
  const Outcome grid = run_fsdpsim("sweep " + kScenario + " --grid training.foo=1,2 --out -");
  EXPECT_EQ(grid.exit_code, 2);
  EXPECT_NE(grid.output.find("(the value comes from --grid training.foo=1)"), std::string::npos)
      << grid.output;
  const Outcome configs = run_fsdpsim("run " + kScenario + " --configs /no/such/folder");
  EXPECT_EQ(configs.exit_code, 2);
  EXPECT_NE(configs.output.find("the presets folder /no/such/folder/models does not exist"),
            std::string::npos)
      << configs.output;
}

// A whole number is an integer however JSON writes it (DeepSpeed configs write 1e9 and 5e8); a
// fraction is not.
TEST(Cli, WholeNumbersMayBeWrittenInExponentForm) {
  const std::string base = "run " + kScenario + " --json -";
  const Outcome plain =
      run_fsdpsim(base + " --set training.micro_batch=2 --set training.global_batch=256");
  const Outcome exponent =
      run_fsdpsim(base + " --set training.micro_batch=2.0 --set training.global_batch=2.56e2");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(exponent.exit_code, 0) << exponent.output;
  EXPECT_EQ(exponent.output, plain.output);
  const Outcome fraction = run_fsdpsim(base + " --set training.micro_batch=1.5");
  EXPECT_EQ(fraction.exit_code, 2);
  EXPECT_NE(fraction.output.find("/training/micro_batch: expected a positive integer, found the "
                                 "number 1.5"),
            std::string::npos)
      << fraction.output;
  // Everywhere an integer is read: a group size, a straggler's rank.
  const Outcome group = run_fsdpsim(base +
                                    " --set fsdp.version=2 --set fsdp.limit_all_gathers=false"
                                    " --set fsdp.reshard_after_forward=8.0");
  EXPECT_EQ(group.exit_code, 0) << group.output;
  const Outcome rank =
      run_fsdpsim(base + " --set 'hardware.stragglers=[{\"ranks\":[1.0],\"compute_speed\":0.9}]'");
  EXPECT_EQ(rank.exit_code, 0) << rank.output;
  const Outcome huge = run_fsdpsim(base + " --set hardware.nodes=1e19");
  EXPECT_EQ(huge.exit_code, 2);
  EXPECT_NE(huge.output.find("/hardware/nodes: expected a positive integer"), std::string::npos)
      << huge.output;
}

// An empty ddp section is DistributedDataParallel's defaults, as no section is.
TEST(Cli, AnEmptyDdpSectionIsTheDefaults) {
  nlohmann::json document = fsdpsim::test_support::tiny_llama_scenario("ddp_defaults");
  document["parallelism"] = "ddp";
  document.erase("fsdp");
  const fs::path scenario = fsdpsim::test_support::write_scenario(
      temp_dir(), "ddp_defaults", document, nlohmann::json::object());
  const std::string ddp = "run " + scenario.string() + " --json -";
  const Outcome none = run_fsdpsim(ddp);
  const Outcome empty = run_fsdpsim(ddp + " --set 'ddp={}'");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(empty.exit_code, 0) << empty.output;
  EXPECT_EQ(empty.output, none.output);
  // PyTorch's bucket_cap_mb=None is not 25: a cap given explicitly caps the first bucket too.
  const std::string text = "run " + scenario.string();
  EXPECT_NE(run_fsdpsim(text).output.find("buckets 25 MiB (the first 1 MiB)"), std::string::npos);
  const Outcome explicit_cap = run_fsdpsim(text + " --set ddp.bucket_cap_mb=25");
  EXPECT_NE(explicit_cap.output.find("buckets 25 MiB,"), std::string::npos) << explicit_cap.output;
}

// A result that cannot reach stdout (a full disk, a closed descriptor) fails the run, as an
// unwritable --json PATH does.
TEST(Cli, AnUnwritableStandardOutputFailsTheRun) {
  const fs::path errors = temp_dir() / "stderr.txt";
  for (const std::string& redirect : {std::string(" > /dev/full"), std::string(" >&-")}) {
    for (const std::string& command : {"run " + kScenario + " --json -", "run " + kScenario,
                                       std::string("--version"), std::string("run --help")}) {
      const std::string line =
          std::string(FSDPSIM_BINARY) + " " + command + redirect + " 2> " + errors.string();
      const int status = std::system(line.c_str());
      ASSERT_TRUE(WIFEXITED(status)) << line;
      EXPECT_EQ(WEXITSTATUS(status), 2) << line;
      EXPECT_NE(read_file(errors).find("error: cannot write the standard output"),
                std::string::npos)
          << line << "\n"
          << read_file(errors);
    }
  }
}

// The search prints its answer and writes no file: outputs of one step asked for with it are
// refused before anything runs, not left unwritten with exit 0.
TEST(Cli, MaxMicroBatchRefusesTheOutputsOfOneStep) {
  const fs::path out = temp_dir() / "max_micro_batch.json";
  fs::remove(out);
  const std::vector<std::string> options = {"--json " + out.string(), "--json -",
                                            "--trace " + out.string(),
                                            "--memory-timeline " + out.string(), "--timing"};
  for (const std::string& option : options) {
    const Outcome o = run_fsdpsim("run " + kScenario + " --max-micro-batch " + option);
    EXPECT_EQ(o.exit_code, 2) << option << "\n" << o.output;
    EXPECT_NE(o.output.find("excludes"), std::string::npos) << o.output;
    EXPECT_FALSE(fs::exists(out)) << option;
  }
}

// Each probe of --max-micro-batch is a simulation: on a terminal a line says which one runs (and
// is cleared before the answer); in a pipe or a log nothing but the answer is printed.
TEST(Cli, MaxMicroBatchShowsItsProbesOnATerminalOnly) {
  if (std::system("command -v script > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "script(1), which gives the command a terminal, is not installed";
  const fs::path tiny = fsdpsim::test_support::write_scenario(
      temp_dir(), "max_micro_batch_tty", fsdpsim::test_support::tiny_llama_scenario("tty", 2),
      nlohmann::json::object());
  const std::string command = std::string(FSDPSIM_BINARY) + " run " + tiny.string() +
                              " --set allocator.enabled=false --max-micro-batch";
  // script(1) runs the command on a pseudo-terminal of its own and copies what it writes.
  const Outcome on_terminal =
      fsdpsim::test_support::run_shell("script -qec '" + command + "' /dev/null 2>&1");
  ASSERT_EQ(on_terminal.exit_code, 0) << on_terminal.output;
  EXPECT_NE(on_terminal.output.find("\rmax-micro-batch: simulating micro_batch 1 (probe 1, "),
            std::string::npos)
      << on_terminal.output;
  EXPECT_NE(
      on_terminal.output.find("\r" + std::string(78, ' ') + "\rlargest micro-batch that fits: 19 "),
      std::string::npos)
      << on_terminal.output;
  const Outcome piped =
      run_fsdpsim("run " + tiny.string() + " --set allocator.enabled=false --max-micro-batch");
  EXPECT_EQ(piped.output.find("simulating"), std::string::npos) << piped.output;
  EXPECT_EQ(piped.output.rfind("largest micro-batch that fits: 19 ", 0), 0U) << piped.output;
}

// --max-micro-batch tries micro-batches up to 4096 and up to the token bound; where every one it
// tries fits, it says where it stopped instead of failing on its own probe or guessing.
TEST(Cli, MaxMicroBatchSaysWhereItsSearchStops) {
  const fs::path dir = temp_dir();
  const nlohmann::json tiny = fsdpsim::test_support::tiny_llama_scenario("long_seq");
  nlohmann::json document = tiny;
  document["training"]["seq_len"] = 8192;
  document["training"]["micro_batch"] = 1;
  document["training"]["global_batch"] = 8;
  document["model"]["n_layers"] = 1;
  const fs::path p =
      fsdpsim::test_support::write_scenario(dir, "long_seq", document, nlohmann::json::object());
  const Outcome o = run_fsdpsim("run " + p.string() +
                                " --max-micro-batch --set hardware.gpu.hbm_bytes=1125899906842624");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("the search stops at micro_batch 2048 (micro_batch x seq_len is at most "
                          "16777216 tokens); larger ones may fit too"),
            std::string::npos)
      << o.output;
}

}  // namespace
