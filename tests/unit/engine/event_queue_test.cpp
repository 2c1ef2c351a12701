#include "sim/engine/event_queue.hpp"

#include <gtest/gtest.h>

namespace fsdpsim::engine {
namespace {

SimTime ps(std::int64_t v) { return SimTime::from_picoseconds(v); }

TEST(EventQueue, PopsInTimeOrder) {
  EventQueue q;
  q.push(ps(30), EventPriority::kOpFinish, EventKind::kOpFinish, 3);
  q.push(ps(10), EventPriority::kOpFinish, EventKind::kOpFinish, 1);
  q.push(ps(20), EventPriority::kOpFinish, EventKind::kOpFinish, 2);
  EXPECT_EQ(q.pop().index, 1u);
  EXPECT_EQ(q.pop().index, 2u);
  EXPECT_EQ(q.pop().index, 3u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, SameTimeEventsPopByPriorityThenInsertionOrder) {
  EventQueue q;
  q.push(ps(5), EventPriority::kCpuStep, EventKind::kCpuStep, 0);
  q.push(ps(5), EventPriority::kOpFinish, EventKind::kOpFinish, 7);
  q.push(ps(5), EventPriority::kOpFinish, EventKind::kOpFinish, 8);
  EXPECT_EQ(q.pop().index, 7u);
  EXPECT_EQ(q.pop().index, 8u);
  EXPECT_EQ(q.pop().kind, EventKind::kCpuStep);
}

}  // namespace
}  // namespace fsdpsim::engine
