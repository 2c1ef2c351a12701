#include "calibrate/harness/heartbeat.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "calibrate/harness/util.hpp"

namespace fsdpsim::harness {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Heartbeat::~Heartbeat() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::beat(const std::string& activity) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    activity_ = activity;
  }
  last_ns_.store(now_ns());
}

void Heartbeat::set_rank_label(const std::string& label) {
  const std::lock_guard<std::mutex> lock(mutex_);
  rank_label_ = label;
}

void Heartbeat::remove_on_timeout(const std::string& path) {
  const std::lock_guard<std::mutex> lock(mutex_);
  remove_on_timeout_ = path;
}

void Heartbeat::start_watchdog(double timeout_s, const std::string& output) {
  timeout_s_ = timeout_s;
  output_ = output;
  last_ns_.store(now_ns());
  thread_ = std::thread([this] { watch(); });
}

void Heartbeat::watch() {
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double idle_s = static_cast<double>(now_ns() - last_ns_.load()) * 1e-9;
    if (idle_s < timeout_s_) continue;
    std::string activity;
    std::string label;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      activity = activity_;
      label = rank_label_;
      if (!remove_on_timeout_.empty()) std::remove(remove_on_timeout_.c_str());
    }
    std::fprintf(stderr,
                 "\nfsdpsim-calibrate: %s: timed out: no progress for %.0f s while %s. Another "
                 "rank failed or "
                 "hung (check its output; NCCL_DEBUG=WARN says more), or --timeout is too short "
                 "for this size. "
                 "What was measured so far is in %s (\"complete\": false).\n",
                 label.c_str(), idle_s, activity.c_str(), output_.c_str());
    std::fflush(stderr);
    std::_Exit(kExitTimeout);
  }
}

}  // namespace fsdpsim::harness
