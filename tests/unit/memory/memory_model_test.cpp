#include "sim/memory/memory_model.hpp"

#include <gtest/gtest.h>

#include "sim/engine/executor.hpp"
#include "sim/engine/program_builder.hpp"

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
  o.malloc_call_cost = SimTime::from_picoseconds(1'000'000);  // 1 us per cudaMalloc
  o.free_call_cost = SimTime::from_picoseconds(1'000'000);    // and per cudaFree
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

// Size-dependent device calls (a calibration profile's fitted lines): the same retry as above,
// a 60 MiB cudaFree and a 60 MiB cudaMalloc, with 1 us + 10 us/MiB for cudaMalloc and 2 us +
// 20 us/MiB for cudaFree: 601 + 1202 = 1803 us.
TEST(MemoryModel, DeviceCallsCostTheirFixedPartPlusTheirSize) {
  MemoryModelOptions o = options(mib(100));
  o.free_call_cost = SimTime::from_picoseconds(2'000'000);
  o.malloc_ps_per_byte = 10e6 / static_cast<double>(mib(1).value());
  o.free_ps_per_byte = 20e6 / static_cast<double>(mib(1).value());
  MemoryModel m(o);
  const auto gathered = tensor(mib(60), 1);
  const auto activation = tensor(mib(60), 0);
  const engine::AllocationOutcome first = m.on_allocate(SimTime{}, 0, gathered);
  EXPECT_EQ(first.cpu_cost.picoseconds(), 601'000'000);  // one 60 MiB cudaMalloc
  m.on_free(SimTime{}, 0, gathered, /*release_pending=*/true);
  EXPECT_EQ(m.on_allocate(SimTime{}, 1, activation).status, engine::AllocationStatus::kSynchronize);
  m.on_release(SimTime{}, 0, gathered);
  const engine::AllocationOutcome retried = m.on_allocate(SimTime{}, 1, activation);
  EXPECT_EQ(retried.cpu_cost.picoseconds(), 1'803'000'000);
}

// The measured step's reserved peak starts from what is reserved at its start, as
// torch.cuda.reset_peak_memory_stats sets the peak to the current value: a first cudaMalloc of
// the step that flushes the cache does not lower it.
TEST(MemoryModel, TheMeasuredPeakStartsFromWhatIsReservedAtTheStepBoundary) {
  MemoryModelOptions o = options(mib(100));
  o.measure_from = 1;
  MemoryModel m(o);
  const auto cached = tensor(mib(80), 1);
  const auto next = tensor(mib(40), 0);
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, cached).status, engine::AllocationStatus::kAllocated);
  m.on_free(SimTime{}, 0, cached, /*release_pending=*/false);  // 80 MiB cached on stream 1
  const engine::AllocationOutcome flushed = m.on_allocate(SimTime{}, 1, next);
  ASSERT_EQ(flushed.status, engine::AllocationStatus::kAllocated);
  EXPECT_EQ(m.reserved().alloc_retries, 1);
  EXPECT_EQ(m.reserved().peak_reserved, mib(80));
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

// With expandable segments the same retry unmaps the other stream's pages instead of freeing its
// segment: that stream is synchronized (ExpandableSegment::unmapHandles), not the device.
TEST(MemoryModel, AnUnmapSynchronizesTheSegmentsStreamOnly) {
  MemoryModelOptions o = options(mib(100));
  o.allocator->expandable_segments = true;
  MemoryModel m(o);
  const auto gathered = tensor(mib(60), 1);
  const auto activation = tensor(mib(60), 0);
  m.on_allocate(SimTime{}, 0, gathered);
  m.on_free(SimTime{}, 0, gathered, /*release_pending=*/false);
  m.on_release(SimTime{}, 0, gathered);
  const engine::AllocationOutcome retried = m.on_allocate(SimTime{}, 1, activation);
  EXPECT_EQ(retried.status, engine::AllocationStatus::kAllocated);
  EXPECT_FALSE(retried.synchronizes_device);
  EXPECT_EQ(retried.synchronized_streams, std::uint64_t{1} << 1);
  EXPECT_EQ(m.reserved().alloc_retries, 1);
}

// With max_split_size_mb, malloc's out-of-memory path first frees this stream's cached oversize
// blocks (release_available_cached_blocks: the 30 MiB segment, one cudaFree) and only then
// finds it must synchronize on the 60 MiB block still in use on the other stream. That cudaFree
// is priced with the rest when the request goes through after the synchronize: two cudaFree
// calls and one cudaMalloc, 3 us, and the device synchronizes.
TEST(MemoryModel, DeviceCallsBeforeASynchronizeArePricedWithTheRetry) {
  MemoryModelOptions o = options(mib(100));
  o.allocator->max_split_size_mb = 20;
  MemoryModel m(o);
  const auto cached = tensor(mib(30), 0);
  const auto in_use = tensor(mib(60), 1);
  const auto request = tensor(mib(50), 0);
  m.on_allocate(SimTime{}, 0, cached);
  m.on_free(SimTime{}, 0, cached, /*release_pending=*/false);
  m.on_release(SimTime{}, 0, cached);
  m.on_allocate(SimTime{}, 1, in_use);
  m.on_free(SimTime{}, 1, in_use, /*release_pending=*/true);
  EXPECT_EQ(m.on_allocate(SimTime{}, 2, request).status, engine::AllocationStatus::kSynchronize);
  m.on_release(SimTime{}, 1, in_use);
  const engine::AllocationOutcome retried = m.on_allocate(SimTime{}, 2, request);
  EXPECT_EQ(retried.status, engine::AllocationStatus::kAllocated);
  EXPECT_EQ(retried.cpu_cost.picoseconds(), 3'000'000);
  EXPECT_TRUE(retried.synchronizes_device);
}

TEST(MemoryModel, OutOfMemoryIsRecordedWithTheTensor) {
  MemoryModel m(options(mib(100)));
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, tensor(mib(120), 0)).status,
            engine::AllocationStatus::kOutOfMemory);
  EXPECT_TRUE(m.reserved().out_of_memory);
  EXPECT_EQ(m.reserved().oom_tensor, std::optional<engine::TensorId>(0));
  EXPECT_NE(m.reserved().oom_message.find("120"), std::string::npos) << m.reserved().oom_message;
}

// State held from before the step (parameters, gradients, optimizer state) that does not fit is
// named by its category, not blamed on a tensor of the step.
TEST(MemoryModel, OutOfMemoryBeforeTheStepNamesTheStateThatDidNotFit) {
  MemoryModelOptions o = options(mib(100));
  o.baseline[static_cast<std::size_t>(MemoryCategory::kParameters)] = mib(30);
  o.baseline[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = mib(80);
  MemoryModel m(o);
  EXPECT_TRUE(m.reserved().out_of_memory);
  EXPECT_FALSE(m.reserved().oom_tensor.has_value());
  EXPECT_EQ(m.reserved().oom_message.rfind("allocating the optimizer_state held from before the "
                                           "step (0.08 GiB, from model init and the first step): "
                                           "CUDA out of memory. Tried to allocate 80.00 MiB",
                                           0),
            0U)
      << m.reserved().oom_message;
}

// After the first failure the step goes on as if the device had room: a later request that
// would fail too costs no flush, synchronize or retry, the reserved figures stay those of the
// failure, and the allocated peak goes on counting what the step needs.
TEST(MemoryModel, AfterTheFirstFailureTheStepGoesOnAsOnALargerDevice) {
  MemoryModel m(options(mib(100)));
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, tensor(mib(60), 0)).status,
            engine::AllocationStatus::kAllocated);
  m.on_free(SimTime{}, 0, tensor(mib(60), 0), false);  // 60 MiB cached
  m.on_release(SimTime{}, 0, tensor(mib(60), 0));
  EXPECT_EQ(m.on_allocate(SimTime{}, 1, tensor(mib(50), 1)).status,
            engine::AllocationStatus::kAllocated);  // another stream: flush the cache, retry
  EXPECT_EQ(m.reserved().alloc_retries, 1);
  const engine::AllocationOutcome failed = m.on_allocate(SimTime{}, 2, tensor(mib(70), 0));
  EXPECT_EQ(failed.status, engine::AllocationStatus::kOutOfMemory);
  EXPECT_EQ(m.reserved().alloc_retries, 2);
  EXPECT_EQ(m.reserved().peak_reserved, mib(60));
  const engine::AllocationOutcome later = m.on_allocate(SimTime{}, 3, tensor(mib(80), 0));
  EXPECT_EQ(later.status, engine::AllocationStatus::kAllocated);
  EXPECT_EQ(later.cpu_cost.picoseconds(), 0);
  EXPECT_FALSE(later.synchronizes_device);
  EXPECT_EQ(m.reserved().alloc_retries, 2);
  EXPECT_EQ(m.reserved().peak_reserved, mib(60));
  EXPECT_EQ(m.reserved().oom_tensor, std::optional<engine::TensorId>(2));
  EXPECT_EQ(m.stats().peak_allocated, mib(50 + 70 + 80));
}

// A failure in the warm-up step reports the most reserved before it: 60 MiB, not the 50 MiB left
// after the retry that flushed the cache on the way to the failure; and its retries.
TEST(MemoryModel, AFailureInTheWarmUpStepReportsItsPeakBeforeTheFlush) {
  MemoryModelOptions o = options(mib(100));
  o.measure_from = 5;  // a tensor the warm-up step never reaches
  MemoryModel m(o);
  m.on_allocate(SimTime{}, 0, tensor(mib(60), 0));
  m.on_free(SimTime{}, 0, tensor(mib(60), 0), false);
  m.on_release(SimTime{}, 0, tensor(mib(60), 0));
  m.on_allocate(SimTime{}, 1, tensor(mib(50), 1));  // flushes the 60 MiB segment
  EXPECT_EQ(m.on_allocate(SimTime{}, 2, tensor(mib(70), 0)).status,
            engine::AllocationStatus::kOutOfMemory);
  EXPECT_EQ(m.reserved().peak_reserved, mib(60));
  EXPECT_EQ(m.reserved().alloc_retries, 2);  // the flush and the failed allocation's
  EXPECT_GT(m.reserved().device_frees, 0);
  m.on_allocate(SimTime{}, 5, tensor(mib(10), 0));  // the measured step starts after the failure
  EXPECT_EQ(m.reserved().peak_reserved, mib(60));
  // The warm-up's allocator work up to the failure, as torch.cuda.memory_stats() read after the
  // OutOfMemoryError: the retries and device calls the failure ended with, not none.
  EXPECT_EQ(m.reserved().alloc_retries, 2);
  EXPECT_GT(m.reserved().device_frees, 0);
  EXPECT_GT(m.reserved().device_allocs, 0);
}

TEST(MemoryModel, BaselineOccupiesTheAllocatorBeforeTheStep) {
  MemoryModelOptions o = options(mib(100));
  o.baseline[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = mib(50);
  MemoryModel m(o);
  EXPECT_EQ(m.reserved().peak_reserved, mib(50));
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, tensor(mib(60), 0)).status,
            engine::AllocationStatus::kOutOfMemory);
}

// torch.cuda.max_memory_allocated() counts the blocks handed out (alloc_found_block adds
// block->size), not the sizes asked for: 1000 bytes take a 1024-byte block of the small pool;
// 19.5 MiB take a whole 20 MiB segment (splitting would leave 0.5 MiB, under the 1 MiB a large
// block must keep: should_split). Without an allocator model, the sizes asked for.
TEST(MemoryModel, AllocatedAndActiveCountTheAllocatorsBlocks) {
  MemoryModel m(options(mib(100)));
  ASSERT_EQ(m.on_allocate(SimTime{}, 0, tensor(Bytes(1000), 0)).status,
            engine::AllocationStatus::kAllocated);
  EXPECT_EQ(m.stats().peak_allocated.value(), 1024);
  const auto large = tensor(mib(19) + Bytes(512 * 1024), 0);
  ASSERT_EQ(m.on_allocate(SimTime{}, 1, large).status, engine::AllocationStatus::kAllocated);
  EXPECT_EQ(m.stats().peak_allocated, Bytes(1024) + mib(20));
  EXPECT_EQ(m.stats().peak_active, Bytes(1024) + mib(20));
  m.on_free(SimTime{}, 1, large, /*release_pending=*/false);
  // Once the step is out of memory its tensors get no blocks; they count rounded as the
  // allocator rounds them (a 90 MiB segment, then 20 MiB that do not fit, then 1000 B).
  MemoryModel full(options(mib(100)));
  ASSERT_EQ(full.on_allocate(SimTime{}, 0, tensor(mib(90), 0)).status,
            engine::AllocationStatus::kAllocated);
  ASSERT_EQ(full.on_allocate(SimTime{}, 1, tensor(mib(20), 0)).status,
            engine::AllocationStatus::kOutOfMemory);
  (void)full.on_allocate(SimTime{}, 2, tensor(Bytes(1000), 0));
  EXPECT_EQ(full.stats().peak_allocated, mib(110) + Bytes(1024));
  MemoryModel without(MemoryModelOptions{});
  (void)without.on_allocate(SimTime{}, 0, tensor(Bytes(1000), 0));
  (void)without.on_allocate(SimTime{}, 1, large);
  EXPECT_EQ(without.stats().peak_allocated, Bytes(1000) + mib(19) + Bytes(512 * 1024));
}

TEST(MemoryModel, WithoutAnAllocatorOnlyLifetimesAreCounted) {
  MemoryModelOptions o;
  MemoryModel m(o);
  EXPECT_EQ(m.on_allocate(SimTime{}, 0, tensor(gib(500), 0)).status,
            engine::AllocationStatus::kAllocated);
  EXPECT_FALSE(m.models_reserved());
  EXPECT_EQ(m.stats().peak_allocated, gib(500));
}

// The limiter-off pattern end to end (executor + allocator), on a timeline checkable by hand.
// Twelve units: the CPU allocates a 2 GiB all-gather output on the unshard stream (cudaMalloc,
// 1 us), launches the all-gather (1 us launch, 10 us on the GPU) and the unit's compute (1 us
// launch, 100 us), and frees the output with record_stream on the compute stream
// (FlatParamHandle._free_unsharded_flat_param). Without a memory limit the GPU is the bottleneck:
// compute k runs [12 + 100k, 112 + 100k] us, the last ends at 1212 us.
// On a 10 GiB device five outputs fill the cache. Unit 5's malloc (CPU at 15 us) needs
// release_cached_blocks: the CPU waits in synchronize_and_free_events until compute 4 ends
// (512 us), then cudaFrees 5 segments and cudaMallocs 1 (6 us); the GPU, drained, waits for that,
// the all-gather's launch (1 us) and the all-gather itself (10 us): 17 us idle. Units 6-9 refill
// the cache; unit 10 (CPU at 532 us) retries the same way at 1029 us. Two retries, each costing
// the step 17 us, however far ahead the CPU was: 1212 + 2 x 17 = 1246 us.
TEST(MemoryModel, ARunAheadCpuRetriesOncePerCacheFillAndEachRetryCostsOnlyTheRefill) {
  const auto us = [](double v) { return to_sim_time(microseconds(v)); };
  const auto run = [&](Bytes capacity, engine::Timeline* timeline) {
    engine::ProgramBuilder b;
    const engine::StreamId compute = b.add_stream("compute");
    const engine::StreamId unshard = b.add_stream("unshard");
    engine::LaunchSpec ag;
    ag.name = "all_gather";
    ag.stream = unshard;
    ag.kind = engine::OpKind::kCommunication;
    ag.duration = us(10);
    ag.launch_cost = us(1);
    engine::LaunchSpec fwd;
    fwd.name = "forward";
    fwd.stream = compute;
    fwd.duration = us(100);
    fwd.launch_cost = us(1);
    for (int unit = 0; unit < 12; ++unit) {
      const engine::TensorId out = b.allocate("full_param", gib(2), unshard, 0);
      b.launch(ag);
      b.wait_stream(compute, unshard);
      b.launch(fwd);
      b.free(out, b.record_event(compute));
    }
    MemoryModel m(options(capacity));
    *timeline = engine::execute(b.program(), &m);
    return m.reserved();
  };
  engine::Timeline unlimited;
  EXPECT_EQ(run(gib(100), &unlimited).alloc_retries, 0);
  EXPECT_EQ(unlimited.makespan, us(1212));
  engine::Timeline limited;
  const ReservedStats r = run(gib(10), &limited);
  EXPECT_EQ(r.alloc_retries, 2);
  EXPECT_EQ(r.peak_reserved, gib(10));
  EXPECT_EQ(r.device_allocs, 12);  // every output cudaMalloc'ed
  EXPECT_EQ(r.device_frees, 10);   // two flushes of five
  EXPECT_EQ(limited.makespan, us(1246));
}

}  // namespace
}  // namespace fsdpsim::memory
