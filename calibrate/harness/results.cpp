#include "calibrate/harness/results.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "calibrate/harness/json_writer.hpp"
#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {
namespace {

// nccl-tests busbw factors (doc/PERFORMANCE.md).
double busbw_factor(const std::string& collective, std::int32_t ranks) {
  if (ranks <= 1) return 0.0;
  const double f = static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  return collective == "all_reduce" ? 2.0 * f : f;
}

void optional_field(JsonWriter& w, const char* key, const std::optional<double>& v) {
  if (v) w.field(key, *v);
}

}  // namespace

std::string to_json(const Results& r) {
  JsonWriter w;
  w.begin_object();
  w.field("schema_version", std::int64_t{1});
  w.field("kind", "fsdpsim_calibration_profile");
  w.field("name", r.name);
  w.field("created", r.created);
  w.field("tool", r.tool);
  w.field("complete", r.complete);
  w.key("device").begin_object();
  w.field("name", r.device_name);
  w.field("compute_capability", r.compute_capability);
  w.field("sm_count", std::int64_t{r.sm_count});
  w.field("memory_bytes", r.memory_bytes);
  w.end_object();
  w.key("software").begin_object();
  w.field("driver", r.driver);
  w.field("cuda_runtime", r.cuda_runtime);
  w.field("nccl", r.nccl);
  w.field("cublaslt", r.cublaslt);
  w.end_object();
  w.key("topology").begin_object();
  w.field("nodes", std::int64_t{r.nodes});
  w.field("gpus_per_node", std::int64_t{r.gpus_per_node});
  w.key("hosts").begin_array();
  for (const std::string& h : r.hosts) w.value(h);
  w.end_array();
  w.end_object();
  w.key("notes").begin_array();
  for (const std::string& n : r.notes) w.value(n);
  w.end_array();
  w.key("collectives").begin_array();
  for (const SeriesResult& s : r.collectives) {
    w.begin_object();
    w.field("collective", s.collective);
    w.field("dtype", s.dtype);
    w.field("ranks", std::int64_t{s.ranks});
    w.field("ranks_per_node", std::int64_t{s.ranks_per_node});
    w.field("group", s.group);
    if (!s.concurrent_with.empty()) w.field("concurrent_with", s.concurrent_with);
    w.field("origin", "measured");
    w.field("source", cat(r.tool, " on ", r.hosts.empty() ? std::string("?") : r.hosts.front(),
                          r.hosts.size() > 1 ? cat(" and ", r.hosts.size() - 1, " more hosts")
                                             : std::string()));
    w.key("points").begin_array();
    for (const PointResult& p : s.points) {
      const double algbw = static_cast<double>(p.bytes) / (p.median_us * 1e-6) / 1e9;
      w.begin_object(true);
      w.field("bytes", p.bytes);
      w.field("time_us", p.median_us);
      w.field("min_us", p.min_us);
      w.field("max_us", p.max_us);
      w.field("repeats", std::int64_t{p.repeats});
      w.field("algbw_GBps", algbw);
      w.field("busbw_GBps", algbw * busbw_factor(s.collective, s.ranks));
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("gemms").begin_array();
  for (const GemmResult& g : r.gemms) {
    w.begin_object(true);
    w.field("dtype", g.dtype);
    w.field("m", g.m);
    w.field("n", g.n);
    w.field("k", g.k);
    w.field("batch", g.batch);
    w.field("layout", "TN");
    w.field("time_us", g.median_us);
    w.field("min_us", g.min_us);
    w.field("max_us", g.max_us);
    w.field("repeats", std::int64_t{g.repeats});
    optional_field(w, "under_nccl_time_us", g.under_nccl_us);
    optional_field(w, "alone_beside_nccl_time_us", g.alone_beside_nccl_us);
    w.field("tflops", 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) *
                          static_cast<double>(g.k) * static_cast<double>(g.batch) /
                          (g.median_us * 1e-6) / 1e12);
    w.field("source", g.source);
    w.end_object();
  }
  w.end_array();
  if (r.rank_speeds) {
    const RankSpeedsResult& g = *r.rank_speeds;
    w.key("rank_speeds").begin_object();
    w.field("dtype", g.dtype);
    w.field("m", g.side);
    w.field("n", g.side);
    w.field("k", g.side);
    w.field("layout", "TN");
    w.field("held_ms", g.held_ms);
    w.field("repeats", std::int64_t{g.repeats});
    w.field("launches", std::int64_t{g.launches});
    w.key("ranks").begin_array();
    for (const RankSpeedResult& t : g.ranks) {
      w.begin_object(true);
      w.field("rank", std::int64_t{t.rank});
      w.field("host", t.host);
      w.field("gemm_us", t.gemm_us);
      w.field("gemm_min_us", t.gemm_min_us);
      w.field("gemm_max_us", t.gemm_max_us);
      w.field("gemm_short_us", t.gemm_short_us);
      w.field("launch_us", t.launch_us);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.key("memory").begin_object();
  optional_field(w, "device_copy_GBps", r.device_copy_GBps);
  optional_field(w, "h2d_pinned_GBps", r.h2d_pinned_GBps);
  optional_field(w, "d2h_pinned_GBps", r.d2h_pinned_GBps);
  optional_field(w, "kernel_launch_us", r.kernel_launch_us);
  if (!r.allocations.empty()) {
    w.key("allocations").begin_array();
    for (const AllocationResult& a : r.allocations) {
      w.begin_object(true);
      w.field("bytes", a.bytes);
      w.field("malloc_us", a.malloc_us);
      w.field("free_us", a.free_us);
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
  w.end_object();
  return w.str() + "\n";
}

namespace {

// The temporary file write_atomically writes before its rename, in the output's folder.
std::string temporary_for(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  return cat(folder, ".", file, ".", ::getpid(), ".tmp");
}

}  // namespace

void check_writable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(cat("-o ", path, ": is a folder; name the profile file to write"));
  const std::string temporary = temporary_for(path);
  const bool writable = std::ofstream(temporary, std::ios::binary | std::ios::trunc).good();
  std::remove(temporary.c_str());
  if (!writable) {
    throw UsageError(cat("-o ", path, ": cannot write ", temporary,
                         " (does the folder exist and is it writable?)"));
  }
}

void check_output_is_not_the_plan(const std::string& output, const std::string& plan) {
  std::error_code ec;
  if (!plan.empty() && std::filesystem::equivalent(output, plan, ec) && !ec) {
    throw UsageError(
        cat("-o ", output, ": is the --plan file ", plan, "; the profile would replace the plan"));
  }
}

void write_atomically(const std::string& path, const std::string& content) {
  const std::string temporary = temporary_for(path);
  // Each step's error is checked, fsync and close included: NFS and quota'd file systems may
  // report a full disk only there, and a truncated profile must not replace the last whole one.
  const auto fail = [&](const char* step, int fd) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    std::remove(temporary.c_str());
    throw HarnessError(cat("cannot write ", temporary, " (", step, ": ", std::strerror(error),
                           "); the profile at ", path, " is left as it was"));
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("open", -1);
  for (std::size_t written = 0; written < content.size();) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", fd);
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync", fd);
  if (::close(fd) != 0) fail("close", -1);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw HarnessError(cat("cannot move the profile into place at ", path));
  }
}

}  // namespace fsdpsim::harness
