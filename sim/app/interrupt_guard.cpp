#include "sim/app/interrupt_guard.hpp"

#include <csignal>

namespace fsdpsim::app {
namespace {

// Touched from the signal handler: lock-free atomics only.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_interrupt(int signal) {
  // A second signal ends the process as it would have without the guard (signal and raise are
  // async-signal-safe).
  if (g_interrupted.load()) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  int none = 0;
  g_signal.compare_exchange_strong(none, signal);
  g_interrupted.store(true);
}

void restore(int signal, void (*previous)(int)) {
  std::signal(signal, previous == SIG_ERR ? SIG_DFL : previous);
}

// Handles `signal` unless the process was started ignoring it (nohup, a shell's background
// job ignores SIGINT): what it ignored it keeps ignoring. Returns the disposition there was.
void (*handle(int signal))(int) {
  void (*previous)(int) = std::signal(signal, on_interrupt);
  if (previous == SIG_IGN) std::signal(signal, SIG_IGN);
  return previous;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted.store(false);
  g_signal.store(0);
  previous_int_ = handle(SIGINT);
  previous_term_ = handle(SIGTERM);
}

InterruptGuard::~InterruptGuard() {
  restore(SIGINT, previous_int_);
  restore(SIGTERM, previous_term_);
}

const std::atomic<bool>& InterruptGuard::flag() { return g_interrupted; }

int InterruptGuard::exit_code() {
  constexpr int kShellSignalBase = 128;  // POSIX shells: 128 + the signal's number
  const int signal = g_signal.load();
  return kShellSignalBase + (signal == 0 ? SIGINT : signal);
}

}  // namespace fsdpsim::app
