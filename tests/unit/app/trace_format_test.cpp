// Every trace fsdpsim writes (run --trace for FSDP1, FSDP2, hybrid sharding and DDP, sweep
// --trace-row) is valid Chrome trace-event JSON: required fields per phase, metadata well formed,
// counters monotonic in time, complete events with non-negative durations, and flow arrows whose
// start and finish match by id and bind to the end of the op waited on and the start of the op
// that waited.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace fsdpsim::app {
namespace {

namespace fs = std::filesystem;
using test_support::Outcome;
using test_support::read_file;
using test_support::run_fsdpsim;

// Flow events sit at most this far (us) inside the slice they bind to (trace_json.cpp: 1 ns).
constexpr double kFlowInsetUs = 0.0011;

fs::path temp_dir() { return test_support::temp_dir("trace"); }

fs::path tiny_scenario(const std::string& name, const nlohmann::json& patch, int nodes = 1) {
  return test_support::write_scenario(temp_dir(), name,
                                      test_support::tiny_llama_scenario(name, nodes), patch);
}

bool is_number(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number();
}

struct Slice {
  double begin;
  double end;
};

// Everything wrong with `trace` as a Chrome trace-event file, empty if nothing.
std::vector<std::string> trace_problems(const nlohmann::json& trace) {
  std::vector<std::string> problems;
  const auto problem = [&](const nlohmann::json& e, const std::string& what) {
    if (problems.size() < 20) problems.push_back(what + ": " + e.dump().substr(0, 200));
  };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return {"no traceEvents array"};
  }
  std::map<std::pair<int, int>, std::vector<Slice>> slices;
  std::map<std::pair<int, std::string>, double> counter_time;
  std::map<std::string, nlohmann::json> starts;
  std::map<std::string, nlohmann::json> finishes;
  const std::set<std::string> metadata = {"process_name", "thread_name", "process_sort_index",
                                          "thread_sort_index"};
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string() || !is_number(e, "pid") ||
        !e.contains("name") || !e["name"].is_string()) {
      problem(e, "an event needs ph, pid and name");
      continue;
    }
    const std::string ph = e["ph"];
    const bool has_tid = is_number(e, "tid");
    const bool has_ts = is_number(e, "ts");
    if (ph == "X") {
      if (!has_tid || !has_ts || !is_number(e, "dur")) {
        problem(e, "X needs tid, ts and dur");
        continue;
      }
      if (e["dur"].get<double>() < 0.0 || e["ts"].get<double>() < 0.0)
        problem(e, "X with negative ts or dur");
      const double ts = e["ts"];
      slices[{e["pid"], e["tid"]}].push_back({ts, ts + e["dur"].get<double>()});
    } else if (ph == "C") {
      if (!has_ts || !e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        problem(e, "C needs ts and args");
        continue;
      }
      for (const auto& [key, value] : e["args"].items()) {
        if (!value.is_number()) problem(e, "counter value " + key + " is not a number");
      }
      const std::pair<int, std::string> counter{e["pid"], e["name"]};
      const double ts = e["ts"];
      if (const auto it = counter_time.find(counter); it != counter_time.end() && ts < it->second) {
        problem(e, "counter goes back in time");
      }
      counter_time[counter] = ts;
    } else if (ph == "M") {
      const std::string name = e["name"];
      if (metadata.count(name) == 0 || !e.contains("args") || !e["args"].is_object()) {
        problem(e, "M needs a known name and args");
        continue;
      }
      if (name.find("thread") == 0 && !has_tid) problem(e, "thread metadata needs tid");
      if (name.find("_name") != std::string::npos &&
          !(e["args"].contains("name") && e["args"]["name"].is_string())) {
        problem(e, "a *_name metadata event needs args.name");
      }
      if (name.find("_sort_index") != std::string::npos &&
          !(e["args"].contains("sort_index") && e["args"]["sort_index"].is_number_integer())) {
        problem(e, "a *_sort_index metadata event needs an integer args.sort_index");
      }
    } else if (ph == "s" || ph == "f") {
      if (!has_tid || !has_ts || !e.contains("id") || !e.contains("cat")) {
        problem(e, "flow events need tid, ts, id and cat");
        continue;
      }
      if (ph == "f" && e.value("bp", "") != "e")
        problem(e, "f should bind to its enclosing slice (bp: e)");
      auto& side = ph == "s" ? starts : finishes;
      const std::string id = e["id"].dump();
      if (side.count(id) != 0) problem(e, "flow id used twice");
      side[id] = e;
    } else if (ph == "i") {
      // Instant events: a scope of g(lobal), p(rocess) or t(hread), which needs a tid.
      const std::string scope = e.value("s", "t");
      if (!has_ts || (scope != "g" && scope != "p" && scope != "t") || (scope == "t" && !has_tid))
        problem(e, "instant events need ts and a scope g, p or t (t with a tid)");
    } else {
      problem(e, "unexpected phase " + ph);
    }
  }
  for (auto& [track, list] : slices) {
    std::sort(list.begin(), list.end(),
              [](const Slice& a, const Slice& b) { return a.begin < b.begin; });
  }
  // A slice of the event's track that holds `ts`, `ts` being near its end (or its start).
  const auto binds = [&](const nlohmann::json& e, bool at_end) {
    const auto it = slices.find({e["pid"], e["tid"]});
    if (it == slices.end()) return false;
    const double ts = e["ts"];
    for (const Slice& s : it->second) {
      if (s.begin > ts) break;
      if (ts <= s.end && (at_end ? s.end - ts : ts - s.begin) <= kFlowInsetUs) return true;
    }
    return false;
  };
  for (const auto& [id, s] : starts) {
    const auto f = finishes.find(id);
    if (f == finishes.end()) {
      problem(s, "flow start without a finish");
      continue;
    }
    if (f->second["cat"] != s["cat"] || f->second["name"] != s["name"])
      problem(s, "flow start and finish differ");
    if (f->second["ts"].get<double>() < s["ts"].get<double>())
      problem(s, "flow finishes before it starts");
    if (!binds(s, true)) problem(s, "flow start is not at the end of a slice of its track");
    if (!binds(f->second, false))
      problem(f->second, "flow finish is not at the start of a slice of its track");
  }
  for (const auto& [id, f] : finishes) {
    if (starts.count(id) == 0) problem(f, "flow finish without a start");
  }
  return problems;
}

struct TraceStats {
  std::size_t complete = 0;
  std::size_t counters = 0;
  std::map<std::string, std::size_t> flows;  // by name
};

TraceStats stats_of(const nlohmann::json& trace) {
  TraceStats stats;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") ++stats.complete;
    if (e["ph"] == "C") ++stats.counters;
    if (e["ph"] == "s") ++stats.flows[e["name"].get<std::string>()];
  }
  return stats;
}

nlohmann::json run_trace(const std::string& name, const nlohmann::json& patch, int nodes = 1) {
  const fs::path trace = temp_dir() / (name + ".trace.json");
  const Outcome o = run_fsdpsim("run " + tiny_scenario(name, patch, nodes).string() + " --trace " +
                                trace.string());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  return nlohmann::json::parse(read_file(trace));
}

TEST(TraceFormat, TheValidatorCatchesBrokenTraces) {
  const auto parse = [](const char* text) { return trace_problems(nlohmann::json::parse(text)); };
  EXPECT_TRUE(parse(R"({"traceEvents": []})").empty());
  EXPECT_FALSE(
      parse(R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1, "name": "a"}]})").empty());
  EXPECT_FALSE(
      parse(
          R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1, "dur": -1, "name": "a"}]})")
          .empty());
  EXPECT_FALSE(
      parse(R"({"traceEvents": [{"ph": "C", "pid": 0, "ts": 2, "name": "m", "args": {"v": 1}},
                                          {"ph": "C", "pid": 0, "ts": 1, "name": "m", "args": {"v": 2}}]})")
          .empty());
  EXPECT_FALSE(
      parse(
          R"({"traceEvents": [{"ph": "M", "pid": 0, "tid": 1, "name": "thread_name", "args": {}}]})")
          .empty());
  const char* unmatched = R"({"traceEvents": [
      {"ph": "X", "pid": 0, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
      {"ph": "s", "pid": 0, "tid": 1, "ts": 9.9995, "id": 1, "name": "w", "cat": "flow"}]})";
  EXPECT_FALSE(parse(unmatched).empty());
  const char* misplaced = R"({"traceEvents": [
      {"ph": "X", "pid": 0, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
      {"ph": "X", "pid": 0, "tid": 2, "ts": 20, "dur": 10, "name": "b"},
      {"ph": "s", "pid": 0, "tid": 1, "ts": 5, "id": 1, "name": "w", "cat": "flow"},
      {"ph": "f", "bp": "e", "pid": 0, "tid": 2, "ts": 20.0005, "id": 1, "name": "w", "cat": "flow"}]})";
  EXPECT_FALSE(parse(misplaced).empty());
  const char* good = R"({"traceEvents": [
      {"ph": "X", "pid": 0, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
      {"ph": "X", "pid": 0, "tid": 2, "ts": 20, "dur": 10, "name": "b"},
      {"ph": "s", "pid": 0, "tid": 1, "ts": 9.9995, "id": 1, "name": "w", "cat": "flow"},
      {"ph": "f", "bp": "e", "pid": 0, "tid": 2, "ts": 20.0005, "id": 1, "name": "w", "cat": "flow"}]})";
  EXPECT_TRUE(parse(good).empty());
}

TEST(TraceFormat, Fsdp1TraceIsValidWithCrossStreamArrows) {
  const nlohmann::json trace = run_trace("fsdp1", nlohmann::json::object());
  EXPECT_EQ(trace_problems(trace), std::vector<std::string>{});
  TraceStats stats = stats_of(trace);
  EXPECT_GT(stats.complete, 200U);
  EXPECT_GT(stats.counters, 10U);
  // Every unit's forward waits for its all-gather on the unshard stream.
  EXPECT_GE(stats.flows["waits for"], 3U);
  // The warm-up step comes first: a global instant marks where the measured step begins, its
  // step time before the trace's last slice ends.
  double marker = -1.0;
  double step_time_us = 0.0;
  double last_end = 0.0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "i" && e["name"] == "measured step begins") {
      marker = e["ts"].get<double>();
      step_time_us = e["args"]["step_time_s"].get<double>() * 1e6;
    }
    if (e["ph"] == "X")
      last_end = std::max(last_end, e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_GT(marker, 0.0);
  EXPECT_NEAR(marker + step_time_us, last_end, 1e-3);
}

TEST(TraceFormat, Fsdp2TraceIsValid) {
  const nlohmann::json trace = run_trace("fsdp2", {{"fsdp", {{"version", 2}}}});
  EXPECT_EQ(trace_problems(trace), std::vector<std::string>{});
  EXPECT_GE(stats_of(trace).flows["waits for"], 3U);
}

TEST(TraceFormat, HybridShardingTraceOnTwoNodesIsValid) {
  const nlohmann::json trace =
      run_trace("hsdp", {{"fsdp", {{"sharding_strategy", "HYBRID_SHARD"}}}}, 2);
  EXPECT_EQ(trace_problems(trace), std::vector<std::string>{});
}

TEST(TraceFormat, DdpTraceIsValid) {
  const nlohmann::json trace = run_trace("ddp", {{"parallelism", "ddp"}, {"fsdp", nullptr}});
  EXPECT_EQ(trace_problems(trace), std::vector<std::string>{});
  EXPECT_GE(stats_of(trace).flows["waits for"], 1U);
}

// Without the allocator model the memory counter's reserved is its lower bound, the active
// memory, as in the memory timeline and the result; it read 0.
TEST(TraceFormat, WithoutTheAllocatorReservedIsTheActiveMemory) {
  const nlohmann::json trace = run_trace("no_allocator", {{"allocator", {{"enabled", false}}}});
  std::size_t counters = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "C") continue;
    ++counters;
    EXPECT_EQ(e["args"]["reserved"], e["args"]["active"]) << e.dump();
  }
  EXPECT_GT(counters, 10U);
}

// A step that fits only after cudaMalloc retries (Llama-3.1-8B on 8 H100, micro batch 2: two a
// step) shows the allocator's device calls on the CPU track, where the GPU waits for them, and
// counts them as host work in the breakdown, not as idle time. A stream's wait marker has no
// phase of the step.
TEST(TraceFormat, AllocatorCallsAreHostWorkOnTheCpuTrack) {
  const std::string scenario = std::string(FSDPSIM_SOURCE_DIR) + "/scenarios/llama3_8b_8xh100.json";
  const fs::path trace_file = temp_dir() / "retries.trace.json";
  const fs::path result_file = temp_dir() / "retries.result.json";
  const Outcome o = run_fsdpsim("run " + scenario + " --trace " + trace_file.string() + " --json " +
                                result_file.string());
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json trace = nlohmann::json::parse(read_file(trace_file));
  EXPECT_EQ(trace_problems(trace), std::vector<std::string>{});
  double allocator_us = 0.0;
  std::size_t markers = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["name"].get<std::string>().starts_with("caching allocator: ")) {
      EXPECT_EQ(e["cat"], "cpu") << e.dump();
      allocator_us += e["dur"].get<double>();
    }
    if (e.value("cat", "") == "marker") {
      ++markers;
      EXPECT_FALSE(e["args"].contains("phase")) << e.dump();
    }
  }
  EXPECT_GT(allocator_us, 40'000.0);  // warm-up and measured step: 45 ms in the measured one
  EXPECT_GT(markers, 0U);
  const nlohmann::json result = nlohmann::json::parse(read_file(result_file));
  EXPECT_GT(result["breakdown"]["host_work_s"].get<double>(), 0.04) << result["breakdown"];
  EXPECT_LT(result["breakdown"]["idle_s"].get<double>(), 0.01) << result["breakdown"];
}

// A step out of memory marks where the allocator failed, with the result's reason: the memory
// counter's reserved holds still from there.
TEST(TraceFormat, AnOutOfMemoryStepMarksTheFailure) {
  const std::string scenario = std::string(FSDPSIM_SOURCE_DIR) + "/scenarios/llama3_8b_8xh100.json";
  const fs::path trace_file = temp_dir() / "oom.trace.json";
  const fs::path result_file = temp_dir() / "oom.result.json";
  const Outcome o = run_fsdpsim(
      "run " + scenario + " --set training.micro_batch=8 --set training.global_batch=64 --trace " +
      trace_file.string() + " --json " + result_file.string());
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json result = nlohmann::json::parse(read_file(result_file));
  ASSERT_EQ(result["status"], "oom");
  const nlohmann::json trace = nlohmann::json::parse(read_file(trace_file));
  EXPECT_EQ(trace_problems(trace), std::vector<std::string>{});
  std::size_t marks = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "i" || e["name"] != "out of memory") continue;
    ++marks;
    EXPECT_EQ(e["args"]["reason"], result["oom_reason"]);
    EXPECT_GT(e["ts"].get<double>(), 0.0);
  }
  EXPECT_EQ(marks, 1U);
}

TEST(TraceFormat, CpuBoundStepsShowLaunchArrows) {
  // A 125M model with short sequences: the GPU waits for kernel launches.
  const nlohmann::json trace =
      run_trace("cpu_bound", {{"model", "mpt-125m"}, {"training", {{"seq_len", 512}}}});
  EXPECT_EQ(trace_problems(trace), std::vector<std::string>{});
  EXPECT_GT(stats_of(trace).flows["launch"], 10U);
}

TEST(TraceFormat, SweepTraceRowIsTheTraceOfThatPoint) {
  const fs::path scenario = tiny_scenario("sweep_trace", nlohmann::json::object());
  const fs::path swept = temp_dir() / "sweep_row1.trace.json";
  const fs::path single = temp_dir() / "single_v2.trace.json";
  const Outcome o = run_fsdpsim("sweep " + scenario.string() +
                                " --grid fsdp.version=1,2 --trace-row 1 --trace " + swept.string());
  ASSERT_EQ(o.exit_code, 0) << o.output;
  ASSERT_EQ(
      run_fsdpsim("run " + scenario.string() + " --set fsdp.version=2 --trace " + single.string())
          .exit_code,
      0);
  const std::string text = read_file(swept);
  EXPECT_EQ(trace_problems(nlohmann::json::parse(text)), std::vector<std::string>{});
  EXPECT_EQ(text, read_file(single));
}

// A trace of many micro-batches is handed to its file in pieces of a mebibyte as it is made (run
// --trace): the text is the trace made whole (sweep --trace-row), in a file or on stdout.
TEST(TraceFormat, ATraceWrittenInPiecesIsTheTraceMadeWhole) {
  const std::string scenario =
      tiny_scenario("streamed_trace", {{"training", {{"global_batch", 256}}}}).string();
  const fs::path streamed = temp_dir() / "streamed.trace.json";
  const fs::path whole = temp_dir() / "whole.trace.json";
  ASSERT_EQ(run_fsdpsim("run " + scenario + " --trace " + streamed.string()).exit_code, 0);
  const Outcome swept =
      run_fsdpsim("sweep " + scenario + " --grid training.micro_batch=1 --trace-row 0 --trace " +
                  whole.string());
  ASSERT_EQ(swept.exit_code, 0) << swept.output;
  const std::string text = read_file(whole);
  EXPECT_GT(text.size(), std::size_t{3} << 20) << "several pieces";
  EXPECT_EQ(trace_problems(nlohmann::json::parse(text)), std::vector<std::string>{});
  EXPECT_TRUE(read_file(streamed) == text);
  EXPECT_TRUE(run_fsdpsim("run " + scenario + " --trace - | cat").output == text);
}

TEST(TraceFormat, SweepTraceRowOutsideTheGridOrSkippedIsBadUsage) {
  const fs::path scenario = tiny_scenario("sweep_trace_bad", nlohmann::json::object());
  const std::string trace = (temp_dir() / "never.trace.json").string();
  const Outcome outside = run_fsdpsim("sweep " + scenario.string() +
                                      " --grid fsdp.version=1,2 --trace-row 2 --trace " + trace);
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_NE(outside.output.find("--trace-row 2"), std::string::npos) << outside.output;
  // 16 sequences do not split into micro-batches of 3 on 8 GPUs: point 1 is skipped.
  const Outcome skipped =
      run_fsdpsim("sweep " + scenario.string() +
                  " --grid training.micro_batch=1,3 --trace-row 1 --trace " + trace);
  EXPECT_EQ(skipped.exit_code, 2);
  EXPECT_NE(skipped.output.find("skipped"), std::string::npos) << skipped.output;
  // Each slice of a sharded sweep would write the same trace: only the slice that runs it may.
  const Outcome other_slice =
      run_fsdpsim("sweep " + scenario.string() +
                  " --grid fsdp.version=1,2 --shard 1/2 --trace-row 1 --trace " + trace);
  EXPECT_EQ(other_slice.exit_code, 2);
  EXPECT_NE(other_slice.output.find("--trace-row 1: the point is not in --shard 1/2; give it to "
                                    "slice 2/2"),
            std::string::npos)
      << other_slice.output;
  const Outcome empty_row =
      run_fsdpsim("sweep " + scenario.string() + " --trace-row \"\" --trace " + trace);
  EXPECT_EQ(empty_row.exit_code, 2);
  EXPECT_NE(empty_row.output.find("expected a grid point index >= 0"), std::string::npos)
      << empty_row.output;
  EXPECT_EQ(run_fsdpsim("sweep " + scenario.string() + " --trace-row 0").exit_code, 2);
  EXPECT_EQ(run_fsdpsim("sweep " + scenario.string() + " --trace " + trace).exit_code, 2);
  EXPECT_FALSE(fs::exists(trace));
}

}  // namespace
}  // namespace fsdpsim::app
