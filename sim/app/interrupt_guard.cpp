#include "sim/app/interrupt_guard.hpp"

#include <signal.h>
#include <time.h>

#include <cstdint>

namespace fsdpsim::app {
namespace {

// Touched from the signal handler: lock-free atomics only.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};
std::atomic<pid_t> g_sender{0};           // who sent the first signal (kill()), else 0
std::atomic<std::int64_t> g_first_ns{0};  // when it came, on CLOCK_MONOTONIC
static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<pid_t>::is_always_lock_free);
static_assert(std::atomic<std::int64_t>::is_always_lock_free);

// One request delivered twice comes within this of the first: timeout(1) signals its child and
// then its whole process group, the child included (coreutils src/timeout.c, cleanup), and
// under load the child can handle the first before the second arrives instead of the two
// merging into one pending signal. A person's second Ctrl-C comes from the terminal (the
// kernel), never counts as a repeat, and ends the process whenever it comes.
constexpr std::int64_t kRepeatWindowNs = 1'000'000'000;

std::int64_t monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  constexpr std::int64_t kNsPerS = 1'000'000'000;
  return static_cast<std::int64_t>(t.tv_sec) * kNsPerS + static_cast<std::int64_t>(t.tv_nsec);
}

// The first request's signal again, from the same kill() sender, soon after it.
bool repeats_first_request(int signal, const siginfo_t* info) {
  return info != nullptr && info->si_code == SI_USER && info->si_pid != 0 &&
         signal == g_signal.load() && info->si_pid == g_sender.load() &&
         monotonic_ns() - g_first_ns.load() < kRepeatWindowNs;
}

extern "C" void on_interrupt(int signal, siginfo_t* info, void* /*context*/) {
  if (g_interrupted.load()) {
    if (repeats_first_request(signal, info)) return;
    // A second signal ends the process as it would have without the guard (sigaction and raise
    // are async-signal-safe; the signal, blocked while this handler runs, is taken on return).
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    ::sigemptyset(&default_action.sa_mask);
    ::sigaction(signal, &default_action, nullptr);
    ::raise(signal);
    return;
  }
  const bool sent_by_kill = info != nullptr && info->si_code == SI_USER;
  g_sender.store(sent_by_kill ? info->si_pid : 0);
  g_first_ns.store(monotonic_ns());
  int none = 0;
  g_signal.compare_exchange_strong(none, signal);
  g_interrupted.store(true);
}

// Handles `signal` unless the process was started ignoring it (nohup, a shell's background
// job ignores SIGINT): what it ignored it keeps ignoring. Returns the disposition there was.
struct sigaction handle(int signal) {
  struct sigaction previous {};
  ::sigaction(signal, nullptr, &previous);
  if (previous.sa_handler == SIG_IGN && (previous.sa_flags & SA_SIGINFO) == 0) return previous;
  struct sigaction guard {};
  guard.sa_sigaction = on_interrupt;
  guard.sa_flags = SA_SIGINFO;
  ::sigemptyset(&guard.sa_mask);
  ::sigaction(signal, &guard, nullptr);
  return previous;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted.store(false);
  g_signal.store(0);
  g_sender.store(0);
  g_first_ns.store(0);
  previous_int_ = handle(SIGINT);
  previous_term_ = handle(SIGTERM);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &previous_int_, nullptr);
  ::sigaction(SIGTERM, &previous_term_, nullptr);
}

const std::atomic<bool>& InterruptGuard::flag() { return g_interrupted; }

int InterruptGuard::exit_code() {
  constexpr int kShellSignalBase = 128;  // POSIX shells: 128 + the signal's number
  const int signal = g_signal.load();
  return kShellSignalBase + (signal == 0 ? SIGINT : signal);
}

}  // namespace fsdpsim::app
