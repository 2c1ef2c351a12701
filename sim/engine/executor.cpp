#include "sim/engine/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/engine/event_queue.hpp"

namespace fsdpsim::engine {
namespace {

// A FIFO of ops in issue order, drained from the front as they finish.
struct Fifo {
  std::vector<OpId> ops;
  std::size_t head = 0;
  [[nodiscard]] OpId front() const { return head < ops.size() ? ops[head] : kNoOp; }
};

// Compressed lists: for each op, the ops waiting on it and the tensors released after it.
struct Csr {
  std::vector<std::uint32_t> offsets;
  std::vector<std::uint32_t> items;
  [[nodiscard]] auto range(std::size_t i) const {
    struct Range {
      const std::uint32_t* b;
      const std::uint32_t* e;
      [[nodiscard]] const std::uint32_t* begin() const { return b; }
      [[nodiscard]] const std::uint32_t* end() const { return e; }
    };
    return Range{items.data() + offsets[i], items.data() + offsets[i + 1]};
  }
};

template <typename ForEachPair>
Csr build_csr(std::size_t n, std::size_t pairs, ForEachPair for_each_pair) {
  Csr csr;
  csr.offsets.assign(n + 1, 0);
  for_each_pair([&](std::uint32_t key, std::uint32_t) { ++csr.offsets[key + 1]; });
  for (std::size_t i = 0; i < n; ++i) csr.offsets[i + 1] += csr.offsets[i];
  csr.items.resize(pairs);
  std::vector<std::uint32_t> fill(csr.offsets.begin(), csr.offsets.end() - 1);
  for_each_pair([&](std::uint32_t key, std::uint32_t value) { csr.items[fill[key]++] = value; });
  return csr;
}

class Execution {
 public:
  Execution(const Program& program, MemoryObserver* memory) : p_(program), memory_(memory) {
    const std::size_t n = p_.ops.size();
    timeline_.ops.assign(n, OpTiming{});
    timeline_.cpu.assign(p_.cpu.size(), CpuStepTiming{});
    remaining_deps_.assign(n, 0);
    state_.assign(n, State::kNotIssued);
    streams_.assign(p_.stream_names.size(), Fifo{});
    channels_.assign(p_.channel_names.size(), Fifo{});
    pending_release_.assign(p_.tensors.size(), false);
    version_.assign(n, 0);
    progress_.assign(n, 0.0);
    progress_since_.assign(n, SimTime{});
    for (OpId op = 0; op < n; ++op) {
      const Op& o = p_.ops[op];
      remaining_deps_[op] = o.deps_end - o.deps_begin;
      for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d) {
        if (p_.deps[d] >= n) throw std::logic_error(fmt::format("op {} depends on unknown op", op));
      }
      if (o.stream >= streams_.size())
        throw std::logic_error(fmt::format("op {} on unknown stream", op));
    }
    dependents_ = build_csr(n, p_.deps.size(), [&](auto&& emit) {
      for (OpId op = 0; op < n; ++op) {
        for (std::uint32_t d = p_.ops[op].deps_begin; d < p_.ops[op].deps_end; ++d)
          emit(p_.deps[d], op);
      }
    });
    std::size_t deferred = 0;
    for (const CpuStep& s : p_.cpu)
      deferred += (s.kind == CpuStepKind::kFree && s.after_op != kNoOp);
    releases_ = build_csr(n, deferred, [&](auto&& emit) {
      for (const CpuStep& s : p_.cpu) {
        if (s.kind == CpuStepKind::kFree && s.after_op != kNoOp) emit(s.after_op, s.target);
      }
    });
    queue_.reserve(64);
    contended_running_.reserve(p_.stream_names.size());
  }

  Timeline run() {
    queue_.push(SimTime{}, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
    while (!queue_.empty()) {
      const Event e = queue_.pop();
      now_ = e.time;
      if (e.kind == EventKind::kOpFinish) {
        if (e.version == version_[e.index]) finish(e.index);
      } else {
        advance_cpu();
      }
    }
    check_finished();
    timeline_.makespan = cpu_time_;
    for (const OpTiming& t : timeline_.ops)
      timeline_.makespan = std::max(timeline_.makespan, t.end);
    return std::move(timeline_);
  }

 private:
  enum class State : std::uint8_t { kNotIssued, kIssued, kRunning, kFinished };
  // What the CPU thread is doing while simulated time passes.
  enum class CpuState : std::uint8_t {
    kReady,
    kLaunching,
    kWorking,
    kBlocked,
    kResuming,
    kAwaitingReleases,  // an allocation waits for every pending stream use, then is retried
    kFreeingSegments    // an allocation's cudaFree waits for the device to be idle
  };

  void issue(OpId op) {
    const Op& o = p_.ops[op];
    state_[op] = State::kIssued;
    ++outstanding_;
    timeline_.ops[op].issue = now_;
    streams_[o.stream].ops.push_back(op);
    if (o.channel != kNoChannel)
      channels_.at(static_cast<std::size_t>(o.channel)).ops.push_back(op);
    try_start(op);
  }

  void try_start(OpId op) {
    if (op == kNoOp || state_[op] != State::kIssued || remaining_deps_[op] != 0) return;
    const Op& o = p_.ops[op];
    if (streams_[o.stream].front() != op) return;
    if (o.channel != kNoChannel && channels_[static_cast<std::size_t>(o.channel)].front() != op)
      return;
    state_[op] = State::kRunning;
    timeline_.ops[op].start = now_;
    if (o.kind == OpKind::kCommunication) {
      if (communication_running_++ == 0) reschedule_contended();
    } else if (contended(o)) {
      contended_running_.push_back(op);
      progress_since_[op] = now_;
      queue_.push(now_ + current_duration(o), EventPriority::kOpFinish, EventKind::kOpFinish, op,
                  version_[op]);
      return;
    }
    queue_.push(now_ + o.duration, EventPriority::kOpFinish, EventKind::kOpFinish, op);
  }

  static bool contended(const Op& o) {
    return o.kind == OpKind::kCompute && o.contended_duration.picoseconds() > 0 &&
           o.contended_duration != o.duration;
  }
  [[nodiscard]] SimTime current_duration(const Op& o) const {
    return communication_running_ > 0 ? o.contended_duration : o.duration;
  }

  // The rate of contended compute ops changes when communication starts or stops: credit the
  // progress made at the old rate and reschedule the rest at the new one.
  void reschedule_contended() {
    for (OpId op : contended_running_) {
      const Op& o = p_.ops[op];
      const SimTime old_duration = communication_running_ > 0 ? o.duration : o.contended_duration;
      progress_[op] += static_cast<double>((now_ - progress_since_[op]).picoseconds()) /
                       static_cast<double>(old_duration.picoseconds());
      progress_since_[op] = now_;
      const double left = std::max(0.0, 1.0 - progress_[op]);
      const auto remaining = static_cast<std::int64_t>(
          std::llround(left * static_cast<double>(current_duration(o).picoseconds())));
      queue_.push(now_ + SimTime::from_picoseconds(remaining), EventPriority::kOpFinish,
                  EventKind::kOpFinish, op, ++version_[op]);
    }
  }

  void finish(OpId op) {
    const Op& o = p_.ops[op];
    state_[op] = State::kFinished;
    --outstanding_;
    timeline_.ops[op].end = now_;
    if (o.kind == OpKind::kCommunication) {
      if (--communication_running_ == 0) reschedule_contended();
    } else if (contended(o)) {
      contended_running_.erase(std::find(contended_running_.begin(), contended_running_.end(), op));
    }
    ++streams_[o.stream].head;
    if (o.channel != kNoChannel) ++channels_[static_cast<std::size_t>(o.channel)].head;
    for (std::uint32_t waiter : dependents_.range(op)) {
      --remaining_deps_[waiter];
      try_start(waiter);
    }
    try_start(streams_[o.stream].front());
    if (o.channel != kNoChannel) try_start(channels_[static_cast<std::size_t>(o.channel)].front());
    for (std::uint32_t tensor : releases_.range(op)) {
      if (pending_release_[tensor]) {
        pending_release_[tensor] = false;
        --pending_releases_;
        if (memory_ != nullptr) memory_->on_release(now_, tensor, p_.tensors[tensor]);
      }
    }
    if ((cpu_state_ == CpuState::kAwaitingReleases && pending_releases_ == 0) ||
        (cpu_state_ == CpuState::kFreeingSegments && outstanding_ == 0)) {
      queue_.push(now_, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
    }
    if (cpu_blocked_on_ == op) {
      cpu_blocked_on_ = kNoOp;
      cpu_state_ = CpuState::kResuming;
      queue_.push(now_, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
    }
  }

  // Runs CPU steps from the program counter until the CPU must let time pass.
  void advance_cpu() {
    switch (cpu_state_) {
      case CpuState::kLaunching:  // the launch in progress completes now
        timeline_.cpu[pc_].end = now_;
        issue(p_.cpu[pc_].target);
        ++pc_;
        break;
      case CpuState::kWorking:
      case CpuState::kResuming:  // host work done, or the awaited op finished
        timeline_.cpu[pc_].end = now_;
        ++pc_;
        break;
      case CpuState::kFreeingSegments:  // the device is idle: the device calls take their time
        timeline_.cpu[pc_].start = now_;
        if (allocation_cost_.picoseconds() > 0) {
          cpu_state_ = CpuState::kWorking;
          cpu_time_ = now_;
          queue_.push(now_ + allocation_cost_, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
          return;
        }
        timeline_.cpu[pc_].end = now_;
        ++pc_;
        break;
      case CpuState::kAwaitingReleases:  // every stream use has passed: retry the allocation
      case CpuState::kReady:
      case CpuState::kBlocked:
        break;
    }
    cpu_state_ = CpuState::kReady;
    cpu_time_ = now_;
    while (pc_ < p_.cpu.size()) {
      const CpuStep& s = p_.cpu[pc_];
      timeline_.cpu[pc_].start = now_;
      switch (s.kind) {
        case CpuStepKind::kLaunch:
          cpu_state_ = CpuState::kLaunching;
          queue_.push(now_ + p_.ops[s.target].launch_cost, EventPriority::kCpuStep,
                      EventKind::kCpuStep, 0);
          return;
        case CpuStepKind::kWork:
          cpu_state_ = CpuState::kWorking;
          queue_.push(now_ + s.duration, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
          return;
        case CpuStepKind::kWait:
          if (state_.at(s.target) != State::kFinished) {
            if (state_[s.target] == State::kNotIssued) {
              throw DeadlockError(
                  fmt::format("the CPU waits for op '{}', which is issued after the wait",
                              p_.names[p_.ops[s.target].name]));
            }
            cpu_state_ = CpuState::kBlocked;
            cpu_blocked_on_ = s.target;
            return;
          }
          timeline_.cpu[pc_].end = now_;
          break;
        case CpuStepKind::kAlloc: {
          if (memory_ == nullptr) break;
          AllocationOutcome outcome = memory_->on_allocate(now_, s.target, p_.tensors.at(s.target));
          if (outcome.status == AllocationStatus::kSynchronize) {
            // synchronize_and_free_events: cudaEventSynchronize on the event of every block
            // freed with a pending stream use, then allocate again.
            if (pending_releases_ > 0) {
              cpu_state_ = CpuState::kAwaitingReleases;
              return;
            }
            outcome = memory_->on_allocate(now_, s.target, p_.tensors.at(s.target));
          }
          if (outcome.synchronizes_device && outstanding_ > 0) {
            cpu_state_ = CpuState::kFreeingSegments;
            allocation_cost_ = outcome.cpu_cost;
            return;
          }
          if (outcome.cpu_cost.picoseconds() > 0) {
            cpu_state_ = CpuState::kWorking;
            queue_.push(now_ + outcome.cpu_cost, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
            return;
          }
          timeline_.cpu[pc_].end = now_;
          break;
        }
        case CpuStepKind::kFree: {
          const TensorInfo& info = p_.tensors.at(s.target);
          const bool pending = s.after_op != kNoOp && state_.at(s.after_op) != State::kFinished;
          if (memory_ != nullptr) memory_->on_free(now_, s.target, info, pending);
          if (!pending) {
            if (memory_ != nullptr) memory_->on_release(now_, s.target, info);
          } else {
            pending_release_[s.target] = true;
            ++pending_releases_;
          }
          timeline_.cpu[pc_].end = now_;
          break;
        }
      }
      ++pc_;
    }
  }

  void check_finished() const {
    std::string stuck;
    int listed = 0;
    for (OpId op = 0; op < p_.ops.size(); ++op) {
      if (state_[op] == State::kFinished) continue;
      if (listed++ < 8) {
        stuck += fmt::format("{}'{}' on stream {}", stuck.empty() ? "" : ", ",
                             p_.names[p_.ops[op].name], p_.stream_names[p_.ops[op].stream]);
      }
    }
    if (pc_ < p_.cpu.size() || !stuck.empty()) {
      std::string cpu = "the CPU finished its program";
      if (cpu_blocked_on_ != kNoOp) {
        cpu = fmt::format("the CPU is blocked waiting for '{}'",
                          p_.names[p_.ops[cpu_blocked_on_].name]);
      }
      throw DeadlockError(fmt::format("deadlock at t={:.3f} us: {}; unfinished ops ({} in all): {}",
                                      now_.microseconds(), cpu, listed, stuck));
    }
  }

  const Program& p_;
  MemoryObserver* memory_;
  Timeline timeline_;
  EventQueue queue_;
  SimTime now_;
  SimTime cpu_time_;
  std::vector<std::uint32_t> remaining_deps_;
  std::vector<State> state_;
  std::vector<Fifo> streams_;
  std::vector<Fifo> channels_;
  std::vector<bool> pending_release_;
  std::vector<std::uint32_t> version_;   // bumped when a contended op is rescheduled
  std::vector<double> progress_;         // fraction of a contended op done
  std::vector<SimTime> progress_since_;  // when progress_ was last credited
  std::vector<OpId> contended_running_;  // running ops slowed by communication
  int communication_running_ = 0;
  std::size_t outstanding_ = 0;       // issued ops not yet finished
  std::size_t pending_releases_ = 0;  // freed tensors awaiting a stream use
  Csr dependents_;
  Csr releases_;
  std::size_t pc_ = 0;
  CpuState cpu_state_ = CpuState::kReady;
  OpId cpu_blocked_on_ = kNoOp;
  SimTime allocation_cost_;  // of the allocation waiting in kFreeingSegments
};

}  // namespace

Timeline execute(const Program& program, MemoryObserver* memory) {
  return Execution(program, memory).run();
}

}  // namespace fsdpsim::engine
