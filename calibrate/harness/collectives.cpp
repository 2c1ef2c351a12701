#include "calibrate/harness/collectives.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "calibrate/harness/progress.hpp"

namespace fsdpsim::harness {
namespace {

// Launches per timed repeat: enough that the ~2 us of a pair of events is noise next to
// microsecond collectives, as nccl-tests averages -n back-to-back iterations.
int inner_launches(std::int64_t bytes) {
  if (bytes <= (std::int64_t{1} << 20)) return 16;
  if (bytes <= (std::int64_t{64} << 20)) return 4;
  return 1;
}

struct Dtype {
  const char* name;
  ncclDataType_t type;
  std::int64_t size;
};

Dtype dtype_of(const std::string& name) {
  if (name == "bf16") return Dtype{"bf16", ncclBfloat16, 2};
  if (name == "fp16") return Dtype{"fp16", ncclFloat16, 2};
  return Dtype{"fp32", ncclFloat32, 4};
}

// Launches one collective of `bytes` (full buffer) on one GPU's communicator and stream.
void launch(const std::string& op, const Dtype& d, std::int64_t bytes, std::int32_t ranks,
            ncclComm_t comm, cudaStream_t stream, void* send, void* recv) {
  const auto total = static_cast<std::size_t>(bytes / d.size);
  const std::size_t per_rank = total / static_cast<std::size_t>(ranks);
  if (op == "all_gather") {
    FSDPSIM_NCCL(ncclAllGather(send, recv, per_rank, d.type, comm, stream));
  } else if (op == "reduce_scatter") {
    FSDPSIM_NCCL(ncclReduceScatter(send, recv, per_rank, d.type, ncclSum, comm, stream));
  } else {
    FSDPSIM_NCCL(ncclAllReduce(send, recv, total, d.type, ncclSum, comm, stream));
  }
}

std::int64_t rounded(std::int64_t bytes, std::int32_t ranks, const Dtype& d) {
  const std::int64_t unit = d.size * ranks;
  return (bytes / unit) * unit;
}

// The sweep's sizes and the plan's, up to `cap`; the plan's sizes above it are not measured, and
// a note says so (the profile's curve then stops below them and fsdpsim extrapolates).
std::vector<std::int64_t> sweep_sizes(const Options& o, const Plan& plan, std::int64_t cap,
                                      std::vector<std::string>& notes) {
  std::set<std::int64_t> sizes;
  for (std::int64_t s = o.min_bytes; s <= std::min(o.max_bytes, cap); s *= o.factor) {
    sizes.insert(s);
    if (s > std::numeric_limits<std::int64_t>::max() / o.factor) break;
  }
  std::set<std::int64_t> above;
  for (const PlannedCollective& c : plan.collectives) {
    (c.bytes <= cap ? sizes : above).insert(c.bytes);
  }
  if (!above.empty()) {
    notes.push_back(cat(above.size(), " planned size", above.size() == 1 ? "" : "s",
                        " above the largest message measured (", format_size(cap),
                        ") not measured, up to ", format_size(*above.rbegin()),
                        cap == o.max_bytes ? "; raise --max-bytes to measure them" : ""));
  }
  return {sizes.begin(), sizes.end()};
}

// Largest buffer every rank can hold twice (send + receive) with room to spare: 40 % of the
// tightest free memory each, the same on all ranks.
std::int64_t buffer_cap(Job& job, const Options& o, std::vector<std::string>& notes) {
  const double local_mib =
      static_cast<double>(job.free_memory()) * 0.4 / static_cast<double>(1 << 20);
  const std::vector<float> worst = job.max_over_ranks({static_cast<float>(-local_mib)});
  const auto cap =
      static_cast<std::int64_t>(-static_cast<double>(worst.front())) * (std::int64_t{1} << 20);
  if (cap < o.max_bytes) {
    notes.push_back(cat("largest message reduced from ", format_size(o.max_bytes), " to ",
                        format_size(cap), " to fit in GPU memory"));
    return cap;
  }
  return o.max_bytes;
}

PointResult point_from(const std::vector<float>& per_repeat_us, std::int64_t bytes) {
  std::vector<double> samples(per_repeat_us.begin(), per_repeat_us.end());
  const Spread s = spread_of(samples);
  return PointResult{bytes, s.median, s.min, s.max, static_cast<std::int32_t>(samples.size())};
}

// Elapsed ms between two events, as us per launch.
float per_launch_us(cudaEvent_t a, cudaEvent_t b, int inner) {
  float ms = 0.0F;
  FSDPSIM_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms * 1000.0F / static_cast<float>(inner);
}

// Each repeat's launches are queued behind every local stream's closed gate (stream_gate.hpp),
// then the barrier: the barrier's all-reduce ends once every rank has opened its gates, i.e.
// queued its repeat, so the timed collectives run back to back on every rank, whatever the
// host's enqueue rate. `gate_timed_out_anywhere` is set when a gate on any rank opened by its
// timeout.
std::vector<float> time_one(Job& job, const Options& o, const Group& group, const std::string& op,
                            const Dtype& d, std::int64_t bytes, bool& gate_timed_out_anywhere) {
  std::vector<Gpu>& gpus = job.gpus();
  const int inner = inner_launches(bytes);
  const auto issue = [&]() {
    job.group_start();
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      launch(op, d, bytes, group.ranks, group.comms[i], gpus[i].stream, gpus[i].send, gpus[i].recv);
    }
    job.group_end();
  };
  for (int w = 0; w < o.warmup; ++w) issue();
  job.wait(cat("warming up ", op, " ", d.name, " ", format_size(bytes), " on ", group.label));
  for (int r = 0; r < o.repeats; ++r) {
    for (Gpu& g : gpus) close_gate(g.gate, g.stream);
    job.barrier();
    for (Gpu& g : gpus)
      FSDPSIM_CUDA(cudaEventRecord(g.start[static_cast<std::size_t>(r)], g.stream));
    for (int i = 0; i < inner; ++i) issue();
    for (Gpu& g : gpus)
      FSDPSIM_CUDA(cudaEventRecord(g.stop[static_cast<std::size_t>(r)], g.stream));
    for (Gpu& g : gpus) open_gate(g.gate);
  }
  job.wait(cat("timing ", op, " ", d.name, " ", format_size(bytes), " on ", group.label));
  std::vector<float> local(static_cast<std::size_t>(o.repeats) + 1, 0.0F);
  for (Gpu& g : gpus) {
    for (std::size_t r = 0; r + 1 < local.size(); ++r)
      local[r] = std::max(local[r], per_launch_us(g.start[r], g.stop[r], inner));
    if (gate_timed_out(g.gate)) local.back() = 1.0F;
  }
  std::vector<float> worst = job.max_over_ranks(local);
  gate_timed_out_anywhere = gate_timed_out_anywhere || worst.back() > 0.0F;
  worst.pop_back();
  return worst;
}

}  // namespace

void measure_collectives(Job& job, const Options& o, const Plan& plan, Results& results,
                         const std::function<void()>& save) {
  const std::int64_t cap = buffer_cap(job, o, results.notes);
  job.ensure_buffers(cap);
  const std::vector<std::int64_t> sizes = sweep_sizes(o, plan, cap, results.notes);
  std::vector<Group> groups = job.make_groups(o.groups, o.shard_groups, false, results.notes);
  std::vector<GroupLayout> layouts;
  for (const Group& g : groups) layouts.push_back({g.ranks, g.ranks_per_node});
  if (std::string note = unmeasured_plan_layouts(plan, layouts); !note.empty()) {
    if (job.root()) std::fprintf(stderr, "fsdpsim-calibrate: note: %s\n", note.c_str());
    results.notes.push_back(std::move(note));
  }
  const std::size_t total = groups.size() * o.collectives.size() * o.dtypes.size();
  std::size_t done = 0;
  for (Group& group : groups) {
    for (const std::string& op : o.collectives) {
      for (const std::string& dtype : o.dtypes) {
        const Dtype d = dtype_of(dtype);
        SeriesResult series{op, d.name, group.label, group.ranks, group.ranks_per_node, "", {}};
        ++done;
        double peak_busbw = 0.0;
        bool gate_timed_out_anywhere = false;
        for (const std::int64_t size : sizes) {
          const std::int64_t bytes = rounded(size, group.ranks, d);
          if (bytes <= 0) continue;
          if (!series.points.empty() && series.points.back().bytes == bytes) continue;
          progress_line(
              job.root(),
              cat("[", done, "/", total, "] ", op, " ", d.name, " ", group.label, " (", group.ranks,
                  " ranks, ", group.ranks_per_node, " per node): ", format_size(bytes)),
              false);
          const PointResult p =
              point_from(time_one(job, o, group, op, d, bytes, gate_timed_out_anywhere), bytes);
          const double f = static_cast<double>(group.ranks - 1) / static_cast<double>(group.ranks);
          const double busbw = static_cast<double>(bytes) / (p.median_us * 1e-6) / 1e9 *
                               (op == "all_reduce" ? 2 * f : f);
          peak_busbw = std::max(peak_busbw, busbw);
          series.points.push_back(p);
        }
        progress_line(
            job.root(),
            cat("[", done, "/", total, "] ", op, " ", d.name, " ", group.label, " (", group.ranks,
                " ranks, ", group.ranks_per_node, " per node): ", series.points.size(),
                " sizes, peak busbw ",
                static_cast<double>(static_cast<std::int64_t>(peak_busbw * 10)) / 10.0, " GB/s"),
            true);
        if (gate_timed_out_anywhere)
          results.notes.push_back(gate_timeout_note(cat(op, " ", d.name, " on ", group.label)));
        results.collectives.push_back(std::move(series));
        save();
      }
    }
    job.free_group(group);
  }
  job.free_buffers();  // the GEMM phases need the memory
}

void measure_concurrent(Job& job, const Options& o, const Plan& plan, Results& results,
                        const std::function<void()>& save) {
  (void)plan;
  const std::int64_t cap = buffer_cap(job, o, results.notes);
  job.ensure_buffers(cap);
  const std::int64_t half = cap / 2;  // all-gather in the lower halves, reduce-scatter in the upper
  std::vector<Group> groups =
      job.make_groups({"world", "shard"}, o.shard_groups, true, results.notes);
  const Dtype d = dtype_of(o.dtypes.front());
  std::vector<Gpu>& gpus = job.gpus();
  for (Group& group : groups) {
    SeriesResult ag{"all_gather",         d.name,           group.label, group.ranks,
                    group.ranks_per_node, "reduce_scatter", {}};
    SeriesResult rs{"reduce_scatter",     d.name,       group.label, group.ranks,
                    group.ranks_per_node, "all_gather", {}};
    for (std::int64_t size = std::int64_t{1} << 20; size <= std::min(half, o.max_bytes);
         size *= 4) {
      const std::int64_t bytes = rounded(size, group.ranks, d);
      progress_line(
          job.root(),
          cat("interference ", group.label, ": all_gather + reduce_scatter ", format_size(bytes)),
          false);
      const int inner = inner_launches(bytes);
      const auto issue = [&]() {
        job.group_start();
        for (std::size_t i = 0; i < gpus.size(); ++i) {
          auto* send = static_cast<char*>(gpus[i].send);
          auto* recv = static_cast<char*>(gpus[i].recv);
          launch("all_gather", d, bytes, group.ranks, group.comms[i], gpus[i].stream, send, recv);
          launch("reduce_scatter", d, bytes, group.ranks, group.twins[i], gpus[i].side, send + half,
                 recv + half);
        }
        job.group_end();
      };
      for (int w = 0; w < o.warmup; ++w) issue();
      job.wait(cat("warming up concurrent collectives on ", group.label));
      for (int r = 0; r < o.repeats; ++r) {
        const auto at = static_cast<std::size_t>(r);
        // As time_one: the side stream waits for the start event, so one gate holds both.
        for (Gpu& g : gpus) close_gate(g.gate, g.stream);
        job.barrier();
        for (Gpu& g : gpus) {
          FSDPSIM_CUDA(cudaEventRecord(g.start[at], g.stream));
          FSDPSIM_CUDA(cudaStreamWaitEvent(g.side, g.start[at], 0));
          FSDPSIM_CUDA(cudaEventRecord(g.side_start[at], g.side));
        }
        for (int i = 0; i < inner; ++i) issue();
        for (Gpu& g : gpus) {
          FSDPSIM_CUDA(cudaEventRecord(g.stop[at], g.stream));
          FSDPSIM_CUDA(cudaEventRecord(g.side_stop[at], g.side));
        }
        for (Gpu& g : gpus) open_gate(g.gate);
      }
      job.wait(cat("timing concurrent collectives on ", group.label));
      bool timed_out = false;  // every local gate read, so that none carries its flag over
      for (Gpu& g : gpus) timed_out = gate_timed_out(g.gate) || timed_out;
      // The repeats' times and, last, whether a gate opened by its timeout: both the maximum over
      // every rank, as time_one takes them (the rank whose gate timed out need not be rank 0).
      std::vector<float> local(2 * static_cast<std::size_t>(o.repeats) + 1, 0.0F);
      local.back() = timed_out ? 1.0F : 0.0F;
      for (const Gpu& g : gpus) {
        for (std::size_t r = 0; r < static_cast<std::size_t>(o.repeats); ++r) {
          local[r] = std::max(local[r], per_launch_us(g.start[r], g.stop[r], inner));
          local[r + static_cast<std::size_t>(o.repeats)] =
              std::max(local[r + static_cast<std::size_t>(o.repeats)],
                       per_launch_us(g.side_start[r], g.side_stop[r], inner));
        }
      }
      const std::vector<float> worst = job.max_over_ranks(local);
      if (worst.back() > 0.0F) {
        results.notes.push_back(
            gate_timeout_note(cat("interference ", group.label, " ", format_size(bytes))));
      }
      ag.points.push_back(point_from({worst.begin(), worst.begin() + o.repeats}, bytes));
      rs.points.push_back(
          point_from({worst.begin() + o.repeats, worst.begin() + 2 * o.repeats}, bytes));
    }
    progress_line(job.root(), cat("interference ", group.label, ": ", ag.points.size(), " sizes"),
                  true);
    // A series of no point is not a measurement (fsdpsim refuses a profile that holds one): the
    // buffers, a --max-bytes of 1M say, left no size of 1 MiB or more for each of the two.
    if (ag.points.empty()) {
      results.notes.push_back(cat("interference ", group.label,
                                  " not measured: its all-gather and reduce-scatter need 1 MiB "
                                  "each and the buffers hold ",
                                  format_size(half), " each (--max-bytes 2M or more)"));
      job.free_group(group);
      continue;
    }
    results.collectives.push_back(std::move(ag));
    results.collectives.push_back(std::move(rs));
    save();
    job.free_group(group);
  }
  job.free_buffers();
}

}  // namespace fsdpsim::harness
