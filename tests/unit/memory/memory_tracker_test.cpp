#include "sim/memory/memory_tracker.hpp"

#include <gtest/gtest.h>

namespace fsdpsim::memory {
namespace {

engine::TensorInfo tensor(std::int64_t bytes, MemoryCategory category) {
  engine::TensorInfo info;
  info.size = Bytes(bytes);
  info.category = static_cast<std::uint8_t>(category);
  return info;
}

SimTime ps(std::int64_t v) { return SimTime::from_picoseconds(v); }

TEST(MemoryTracker, BaselineCountsFromTheStart) {
  std::array<Bytes, kMemoryCategoryCount> baseline{};
  baseline[static_cast<std::size_t>(MemoryCategory::kParameters)] = Bytes(100);
  const MemoryTracker t(baseline, true);
  EXPECT_EQ(t.stats().peak_allocated.value(), 100);
  EXPECT_EQ(t.stats().peak_active.value(), 100);
  ASSERT_EQ(t.samples().size(), 1u);
}

TEST(MemoryTracker, AllocatedFallsAtFreeActiveAtRelease) {
  MemoryTracker t({}, true);
  const auto a = tensor(50, MemoryCategory::kActivations);
  const auto b = tensor(30, MemoryCategory::kParameters);
  t.on_allocate(ps(1), 0, a);
  t.on_free(ps(2), 0, a, true);  // record_stream: block still in use by another stream
  t.on_allocate(ps(3), 1, b);    // allocated 30, active 80
  t.on_release(ps(4), 0, a);
  EXPECT_EQ(t.stats().peak_allocated.value(), 50);
  EXPECT_EQ(t.stats().peak_active.value(), 80);
  EXPECT_EQ(t.stats().peak_active_time, ps(3));
  EXPECT_EQ(t.stats().peak_tensor, 1u);
  EXPECT_EQ(t.stats()
                .peak_active_by_category[static_cast<std::size_t>(MemoryCategory::kActivations)]
                .value(),
            50);
  EXPECT_EQ(t.stats()
                .peak_active_by_category[static_cast<std::size_t>(MemoryCategory::kParameters)]
                .value(),
            30);
  ASSERT_EQ(t.samples().size(), 5u);
  EXPECT_EQ(t.samples().back().active.value(), 30);
}

TEST(MemoryTracker, SamplesAtTheSameTimeMerge) {
  MemoryTracker t({}, true);
  const auto a = tensor(10, MemoryCategory::kGradients);
  t.on_allocate(ps(5), 0, a);
  t.on_allocate(ps(5), 1, a);
  ASSERT_EQ(t.samples().size(), 2u);
  EXPECT_EQ(t.samples().back().allocated.value(), 20);
}

TEST(MemoryTracker, NoSamplesUnlessAskedFor) {
  MemoryTracker t({}, false);
  t.on_allocate(ps(1), 0, tensor(10, MemoryCategory::kWorkspace));
  EXPECT_TRUE(t.samples().empty());
  EXPECT_EQ(t.stats().peak_allocated.value(), 10);
}

}  // namespace
}  // namespace fsdpsim::memory
