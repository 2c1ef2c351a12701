#include "sim/engine/event_queue.hpp"

#include <algorithm>
#include <tuple>

namespace fsdpsim::engine {
namespace {

// std heaps are max-heaps: "a after b" puts the earliest event on top.
bool runs_after(const Event& a, const Event& b) {
  return std::tie(a.time, a.priority, a.sequence) > std::tie(b.time, b.priority, b.sequence);
}

}  // namespace

void EventQueue::push(SimTime time, EventPriority priority, EventKind kind, std::uint32_t index,
                      std::uint32_t version, std::uint16_t rank) {
  heap_.push_back(Event{time, priority, kind, rank, index, version, next_sequence_++});
  std::push_heap(heap_.begin(), heap_.end(), runs_after);
}

Event EventQueue::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), runs_after);
  Event event = heap_.back();
  heap_.pop_back();
  return event;
}

}  // namespace fsdpsim::engine
