#include "sim/memory/memory_model.hpp"

#include <gtest/gtest.h>

namespace fsdpsim::memory {
namespace {

engine::TensorInfo tensor(Bytes size, engine::StreamId stream) {
  engine::TensorInfo info;
  info.size = size;
  info.stream = stream;
  info.category = static_cast<std::uint8_t>(MemoryCategory::kParameters);
  return info;
}

MemoryModelOptions options(Bytes capacity) {
  MemoryModelOptions o;
  AllocatorConfig config;
  config.capacity = capacity;
  o.allocator = config;
  o.device_call_cost = SimTime::from_picoseconds(1'000'000);  // 1 us per cudaMalloc / cudaFree
  return o;
}

// The cross-stream case behind FSDP's rate limiter: a 60 MiB block freed on the unshard stream
// while the compute stream still uses it cannot serve the compute stream's 60 MiB request on a
// 100 MiB device. PyTorch synchronizes (the block's use completes), frees the cached segment and
// retries: one retry, one cudaFree and one cudaMalloc on the CPU's clock.
TEST(MemoryModel, CrossStreamReuseNeedsASynchronizedRetry) {
  MemoryModel m(options(mib(100)));
  const auto gathered = tensor(mib(60), 1);
  const auto activation = tensor(mib(60), 0);
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, gathered).status, engine::AllocationStatus::kAllocated);
  m.on_free(SimTime{}, 0, gathered, /*release_pending=*/true);
  EXPECT_EQ(m.on_allocate(SimTime{}, 1, activation).status, engine::AllocationStatus::kSynchronize);
  m.on_release(SimTime{}, 0, gathered);  // the GPU passed the free
  const engine::AllocationOutcome retried = m.on_allocate(SimTime{}, 1, activation);
  EXPECT_EQ(retried.status, engine::AllocationStatus::kAllocated);
  EXPECT_EQ(retried.cpu_cost.picoseconds(), 2'000'000);
  EXPECT_EQ(m.reserved().alloc_retries, 1);
  EXPECT_EQ(m.reserved().peak_reserved, mib(60));
  EXPECT_FALSE(m.reserved().out_of_memory);
}

// Reserved memory peaks on a plateau: the warm-up step leaves 80 MiB cached and the measured
// step reuses it without growing it. The cached-but-unused figure belongs to the plateau's busiest
// instant (40 + 30 MiB active, the 30 MiB request splitting a 40 MiB block: 10 MiB unused), not
// to its first instant (the measured step's first 40 MiB tensor: 40 MiB unused).
TEST(MemoryModel, FragmentationIsTakenAtTheBusiestInstantOfPeakReserved) {
  MemoryModelOptions o = options(mib(1000));
  o.measure_from = 2;
  MemoryModel m(o);
  const auto forty = tensor(mib(40), 0);
  const auto thirty = tensor(mib(30), 0);
  m.on_allocate(SimTime{}, 0, forty);  // warm-up step: two 40 MiB segments
  m.on_allocate(SimTime{}, 1, forty);
  m.on_free(SimTime{}, 0, forty, false);
  m.on_release(SimTime{}, 0, forty);
  m.on_free(SimTime{}, 1, forty, false);
  m.on_release(SimTime{}, 1, forty);
  m.on_allocate(SimTime{}, 2, forty);  // measured step: both from the cache
  m.on_allocate(SimTime{}, 3, thirty);
  EXPECT_EQ(m.reserved().peak_reserved, mib(80));
  EXPECT_EQ(m.reserved().fragmentation_at_peak, mib(10));
  EXPECT_EQ(m.reserved().alloc_retries, 0);
}

// A retry without pending stream uses needs no wait for events, but its cudaFree of the other
// stream's cached 60 MiB segment synchronizes the device; a cache hit does not.
TEST(MemoryModel, ARetryThatGivesSegmentsBackSynchronizesTheDevice) {
  MemoryModel m(options(mib(100)));
  const auto gathered = tensor(mib(60), 1);
  const auto activation = tensor(mib(60), 0);
  EXPECT_FALSE(m.on_allocate(SimTime{}, 0, gathered).synchronizes_device);
  m.on_free(SimTime{}, 0, gathered, /*release_pending=*/false);
  m.on_release(SimTime{}, 0, gathered);
  const engine::AllocationOutcome retried = m.on_allocate(SimTime{}, 1, activation);
  EXPECT_EQ(retried.status, engine::AllocationStatus::kAllocated);
  EXPECT_TRUE(retried.synchronizes_device);
  EXPECT_EQ(retried.cpu_cost.picoseconds(), 2'000'000);
  EXPECT_EQ(m.reserved().alloc_retries, 1);
  m.on_free(SimTime{}, 1, activation, false);
  m.on_release(SimTime{}, 1, activation);
  EXPECT_FALSE(m.on_allocate(SimTime{}, 2, activation).synchronizes_device);
}

TEST(MemoryModel, OutOfMemoryIsRecordedWithTheTensor) {
  MemoryModel m(options(mib(100)));
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, tensor(mib(120), 0)).status,
            engine::AllocationStatus::kOutOfMemory);
  EXPECT_TRUE(m.reserved().out_of_memory);
  EXPECT_EQ(m.reserved().oom_tensor, 0u);
  EXPECT_NE(m.reserved().oom_message.find("120"), std::string::npos) << m.reserved().oom_message;
}

TEST(MemoryModel, BaselineOccupiesTheAllocatorBeforeTheStep) {
  MemoryModelOptions o = options(mib(100));
  o.baseline[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = mib(50);
  MemoryModel m(o);
  EXPECT_EQ(m.reserved().peak_reserved, mib(50));
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, tensor(mib(60), 0)).status,
            engine::AllocationStatus::kOutOfMemory);
}

TEST(MemoryModel, WithoutAnAllocatorOnlyLifetimesAreCounted) {
  MemoryModelOptions o;
  MemoryModel m(o);
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, tensor(gib(500), 0)).status,
            engine::AllocationStatus::kAllocated);
  EXPECT_FALSE(m.models_reserved());
  EXPECT_EQ(m.stats().peak_allocated, gib(500));
}

}  // namespace
}  // namespace fsdpsim::memory
