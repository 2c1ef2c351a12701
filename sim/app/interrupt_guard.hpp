// Ctrl-C (SIGINT) and SIGTERM (`timeout`, Slurm at a job's time limit) for the commands that can
// stop cleanly: while an InterruptGuard lives, either signal only raises a flag that the command
// polls; it then finishes what must be finished (sweep writes the rows done so far, report
// removes its scratch folder) and exits 128 + the signal's number, as a shell reports it. A
// second signal ends the process at once, as without the guard (what runs too long to poll the
// flag can still be stopped), unless it is the first one delivered again: the same signal from
// the same kill() sender within a second, as timeout(1) sends it to its child and then to the
// child's process group. A signal the process was started ignoring (nohup, a shell's
// background job) stays ignored.
#pragma once

#include <signal.h>

#include <atomic>

namespace fsdpsim::app {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers and lowers the flag
  ~InterruptGuard();  // puts back the handlers there were
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // Raised by the first SIGINT or SIGTERM since the guard was made.
  static const std::atomic<bool>& flag();
  // 130 after SIGINT, 143 after SIGTERM.
  static int exit_code();

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace fsdpsim::app
