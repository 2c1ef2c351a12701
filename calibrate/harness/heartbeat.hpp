// The hang detector: the measuring thread reports progress; a watchdog thread ends the process
// with a clear message and exit code 3 when none came for --timeout seconds (a rank that died or
// hung leaves the others blocked in NCCL, which no error code would ever report). The profile on
// disk is rewritten after every measured series, so what was measured is kept.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace fsdpsim::harness {

class Heartbeat {
 public:
  Heartbeat() = default;
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  ~Heartbeat();

  // Progress was made; from now on the process is doing `activity` (named in the timeout message).
  void beat(const std::string& activity);
  void set_rank_label(const std::string& label);
  void start_watchdog(double timeout_s, const std::string& output);
  // A file the process removes if it times out (the NCCL id rank 0 wrote, which a relaunch must
  // not read); "" for none.
  void remove_on_timeout(const std::string& path);

 private:
  void watch();

  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::string activity_ = "starting";
  std::string rank_label_ = "rank ?";
  std::string output_;
  std::string remove_on_timeout_;
  double timeout_s_ = 0.0;
  std::thread thread_;
};

}  // namespace fsdpsim::harness
