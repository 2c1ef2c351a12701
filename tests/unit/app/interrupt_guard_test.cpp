// InterruptGuard: the first SIGINT or SIGTERM raises the flag; the same request delivered twice
// (timeout(1) signals its child, then the child's process group) still only raises it; a second
// request ends the process, as it would without the guard.
#include "sim/app/interrupt_guard.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace fsdpsim::app {
namespace {

TEST(InterruptGuard, TheSameSignalFromTheSameSenderTwiceIsOneRequest) {
  const InterruptGuard guard;
  EXPECT_FALSE(InterruptGuard::flag().load());
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);  // delivered to this thread before kill returns
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_TRUE(InterruptGuard::flag().load());
  EXPECT_EQ(InterruptGuard::exit_code(), 128 + SIGTERM);
}

TEST(InterruptGuard, ASecondRequestEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "fast");
  // Later than the repeat window: the same sender asks again.
  EXPECT_EXIT(
      {
        const InterruptGuard guard;
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        ::kill(::getpid(), SIGINT);
        std::exit(0);
      },
      testing::KilledBySignal(SIGINT), "");
  // At once, from another process (a second `kill` from a shell). SIGTERM: system() ignores
  // SIGINT in its caller while the command runs.
  EXPECT_EXIT(
      {
        const InterruptGuard guard;
        const std::string kill_me = "kill -TERM " + std::to_string(::getpid());
        (void)std::system(kill_me.c_str());
        (void)std::system(kill_me.c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::exit(0);
      },
      testing::KilledBySignal(SIGTERM), "");
}

}  // namespace
}  // namespace fsdpsim::app
