// explanation_text (explain_step.hpp): the report `fsdpsim explain` prints.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "sim/app/explain_step.hpp"
#include "sim/app/retries_text.hpp"

namespace fsdpsim::app {
namespace {

// Seconds, milliseconds or microseconds, whichever reads best.
std::string format_time(Seconds t) {
  const double s = t.value();
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string share(Seconds part, Seconds whole) {
  return whole.value() > 0.0 ? fmt::format("{:.1f}%", 100.0 * ratio(part, whole)) : "-";
}

std::size_t rows(std::size_t available, std::size_t top) {
  return top == 0 ? available : std::min(available, top);
}

void critical_path_section(const Explanation& e, std::size_t top, std::string& out) {
  const CriticalPathSummary& c = e.critical_path;
  // The allocator's device calls are host work too; said apart, as the by-kind rows list them.
  out += fmt::format(
      "critical path   {} through {} ops and CPU steps: GPU compute {}, collectives {}, CPU "
      "launches {}, CPU host work {}{}\n",
      format_time(c.length), c.steps, share(c.gpu_compute, c.length),
      share(c.gpu_communication, c.length), share(c.cpu_launch, c.length),
      share(c.cpu_host, c.length),
      c.cpu_allocator.value() > 0.0
          ? fmt::format(", of which the caching allocator's calls {} (a kind of their own below)",
                        share(c.cpu_allocator, c.length))
          : std::string());
  out += fmt::format("  {:<40} {:>12} {:>7} {:>7}\n", "by kind", "time", "share", "steps");
  for (const CriticalPathShare& s : c.by_kind) {
    out += fmt::format("  {:<40} {:>12} {:>7} {:>7}\n", s.kind, format_time(s.time),
                       share(s.time, c.length), s.steps);
  }
  out += "  heaviest units (unit, kind)\n";
  const std::size_t n = rows(c.by_unit_kind.size(), top);
  for (std::size_t i = 0; i < n; ++i) {
    const CriticalPathShare& s = c.by_unit_kind[i];
    out += fmt::format("  {:<40} {:>12} {:>7} {:>7}\n", fmt::format("{:<16} {}", s.unit, s.kind),
                       format_time(s.time), share(s.time, c.length), s.steps);
  }
  if (n < c.by_unit_kind.size()) {
    out += fmt::format("  ({} more groups; --top 0 lists all)\n", c.by_unit_kind.size() - n);
  }
}

void communication_section(const Explanation& e, std::size_t top, std::string& out) {
  const ExposedCommunication& c = e.communication;
  out += "communication per unit (collective time; exposed: no compute-stream kernel running)\n";
  if (c.units.empty()) {
    out += "  no collectives in the step\n";
    return;
  }
  if (c.busy.value() == 0.0) {
    // Groups of one rank (FSDP1's NO_SHARD at world size 1 still all-reduces its gradients):
    // NCCL runs them as a local copy or not at all (collective_cost.cpp prices them at 0).
    std::int64_t collectives = 0;
    for (const UnitCommunication& u : c.units) collectives += u.collectives;
    out += fmt::format("  {} collectives in the step, none taking any time (groups of one rank)\n",
                       collectives);
    return;
  }
  std::vector<std::size_t> order(c.units.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return c.units[a].exposed > c.units[b].exposed;
  });
  const std::size_t n = rows(order.size(), top);
  out += fmt::format("  {:<16} {:>11} {:>12} {:>12} {:>11}\n", "unit", "collectives", "busy",
                     "exposed", "overlapped");
  const auto row = [&](const std::string& unit, std::int64_t collectives, Seconds busy,
                       Seconds exposed) {
    out += fmt::format("  {:<16} {:>11} {:>12} {:>12} {:>11}\n", unit, collectives,
                       format_time(busy), format_time(exposed), share(busy - exposed, busy));
  };
  for (std::size_t i = 0; i < n; ++i) {
    const UnitCommunication& u = c.units[order[i]];
    row(u.unit, u.collectives, u.busy, u.exposed);
  }
  if (n < order.size()) {
    Seconds rest{0.0};
    for (std::size_t i = n; i < order.size(); ++i) rest += c.units[order[i]].exposed;
    out += fmt::format("  ({} more units with {} exposed; --top 0 lists all)\n", order.size() - n,
                       format_time(rest));
  }
  std::int64_t collectives = 0;
  for (const UnitCommunication& u : c.units) collectives += u.collectives;
  row("sum", collectives, c.busy, c.exposed);
  out += fmt::format(
      "  wall clock: collectives running {}, exposed {} (concurrent collectives counted once: "
      "the step's exposed communication)\n",
      format_time(c.busy_wall), format_time(c.exposed_wall));
  if (!c.causes.empty()) {
    // Each collective's own exposed time, as in the rows above: concurrent ones each count.
    out += "  exposed by cause (each collective's own, as the rows above):";
    const std::size_t shown = rows(c.causes.size(), top);
    for (std::size_t i = 0; i < shown; ++i) {
      const ExposedCause& cause = c.causes[i];
      out +=
          fmt::format("{} {} {} ({}) {}", i == 0 ? "" : ",", cause.phase, cause.collective,
                      cause.inter_node ? "inter-node" : "intra-node", format_time(cause.exposed));
    }
    if (shown < c.causes.size())
      out += fmt::format(" ({} more; --top 0 lists all)", c.causes.size() - shown);
    out += "\n";
  }
}

}  // namespace

std::string explanation_text(const Explanation& e, std::size_t top) {
  const fsdp::StepResult& r = e.result;
  const fsdp::StepBreakdown& b = r.breakdown;
  const Seconds compute = b.compute_busy();
  std::string out;
  out += fmt::format("scenario        {}\n", e.scenario);
  out += fmt::format("step time       {}{}\n", format_time(r.step_time),
                     r.out_of_memory ? fmt::format("  (out of memory: {})", r.oom_reason) : "");
  out += fmt::format("diagnosis       {}\n", e.diagnosis);
  if (!e.calibration_line.empty()) out += e.calibration_line + "\n";
  if (e.straggler) {
    const fsdp::RankClassResult& k = e.straggler->ranks;
    out += fmt::format(
        "straggler       rank {} (compute speed {:g}, host speed {:g}{}) sets the pace: the "
        "others' collectives wait for it up to {} longer per step (beside their compute, where "
        "they have any); what follows describes rank {}\n",
        k.first_rank, k.compute_speed, k.host_speed,
        k.ranks > 1 ? fmt::format(", and {} more alike", k.ranks - 1) : "",
        format_time(e.straggler->others_wait), r.breakdown_rank);
  } else if (e.ranks_wait_alike) {
    out += fmt::format(
        "straggler       none sets the pace: the ranks differ in speed, but every class waits as "
        "long for the others; what follows describes rank {}\n",
        r.breakdown_rank);
  }
  if (r.reserved.alloc_retries > 0) {
    out += fmt::format(
        "allocator       {} per step: each time the caching allocator synchronized "
        "the device and freed its cache; its cudaMalloc/cudaFree calls take {} of the critical "
        "path, priced by segment size (a calibration profile's timings, else the preset's "
        "hardware.node.cuda_malloc_us and _per_GiB, timed on an H200), and how often the real "
        "allocator retries depends on fragmentation, so this step time is less certain\n",
        cuda_malloc_retries(r.reserved.alloc_retries), format_time(e.critical_path.cpu_allocator));
  }
  const std::string host_work = b.host_work.value() > 0.0
                                    ? fmt::format(", host work {}", share(b.host_work, r.step_time))
                                    : std::string();
  out += fmt::format("wall time       compute stream {}, exposed communication {}{}, idle {}\n\n",
                     share(compute, r.step_time), share(b.exposed_communication, r.step_time),
                     host_work, share(b.idle, r.step_time));
  critical_path_section(e, top, out);
  out += "\n";
  communication_section(e, top, out);
  return out;
}

}  // namespace fsdpsim::app
