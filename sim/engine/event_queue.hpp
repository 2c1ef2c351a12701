// Pending simulation events ordered by (time, priority, insertion sequence).
//
// A binary heap over a flat vector of small POD events: no allocation per event once the
// capacity is reserved, and a total order that never depends on addresses (STYLE.md
// "Determinism"). Same-time events are ordered by named priorities (gem5), then FIFO.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/units/sim_time.hpp"

namespace fsdpsim::engine {

// Lower value runs first among events at the same time.
enum class EventPriority : std::uint8_t {
  kOpFinish = 0,  // GPU work completes before anyone observes the time
  kCpuStep = 1,   // the CPU thread then sees those completions
};

enum class EventKind : std::uint8_t { kOpFinish, kCpuStep };

struct Event {
  SimTime time;
  EventPriority priority = EventPriority::kOpFinish;
  EventKind kind = EventKind::kOpFinish;
  std::uint16_t rank = 0;     // which simulated rank (class) it belongs to
  std::uint32_t index = 0;    // the op for kOpFinish; unused for kCpuStep
  std::uint32_t version = 0;  // kOpFinish: stale when the op was rescheduled since the push
  std::uint64_t sequence = 0;
};

class EventQueue {
 public:
  void reserve(std::size_t capacity) { heap_.reserve(capacity); }
  void push(SimTime time, EventPriority priority, EventKind kind, std::uint32_t index,
            std::uint32_t version = 0, std::uint16_t rank = 0);
  // Precondition: !empty().
  Event pop();
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const { return heap_.size(); }

 private:
  std::vector<Event> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace fsdpsim::engine
