#include "sim/engine/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "sim/engine/event_queue.hpp"
#include "sim/engine/op_graph.hpp"

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

// What every simulated rank reads of the program: for each op, the ops waiting on it and the
// tensors released after it. Built once, shared by the ranks.
struct ProgramIndex {
  Csr dependents;
  Csr releases;
  std::vector<std::uint32_t> dependencies;  // per op: how many ops it waits for

  explicit ProgramIndex(const Program& p) {
    if (p.launch_queue_depth == 0) throw std::logic_error("engine: a launch queue holds no op");
    const std::size_t n = p.ops.size();
    dependencies.resize(n);
    for (OpId op = 0; op < n; ++op) {
      const Op& o = p.ops[op];
      dependencies[op] = o.deps_end - o.deps_begin;
      for (std::uint32_t d = o.deps_begin; d < o.deps_end; ++d) {
        if (p.deps[d] >= n) throw std::logic_error(fmt::format("op {} depends on unknown op", op));
      }
      if (o.stream >= p.stream_names.size())
        throw std::logic_error(fmt::format("op {} on unknown stream", op));
      if (o.channel != kNoChannel && static_cast<std::size_t>(o.channel) >= p.channel_names.size())
        throw std::logic_error(fmt::format("op {} on unknown channel", op));
    }
    dependents = build_csr(n, p.deps.size(), [&](auto&& emit) {
      for (OpId op = 0; op < n; ++op) {
        for (std::uint32_t d = p.ops[op].deps_begin; d < p.ops[op].deps_end; ++d)
          emit(p.deps[d], op);
      }
    });
    std::size_t deferred = 0;
    for (const CpuStep& s : p.cpu)
      deferred += (s.kind == CpuStepKind::kFree && s.after_op != kNoOp);
    releases = build_csr(n, deferred, [&](auto&& emit) {
      for (const CpuStep& s : p.cpu) {
        if (s.kind == CpuStepKind::kFree && s.after_op != kNoOp) emit(s.after_op, s.target);
      }
    });
  }
};

// Where a rank's collective waits for the other ranks of its group (multi-rank executions).
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // `rank` has started collective `op` (its NCCL kernel runs, waiting for its peers).
  virtual void arrive(std::uint16_t rank, OpId op, SimTime now) = 0;
  // `rank` has moved its share of collective `op`'s bytes; the collective ends when its peers
  // have too.
  virtual void transferred(std::uint16_t rank, OpId op, SimTime now) = 0;
};

SimTime at_speed(SimTime t, double speed) {
  if (speed == 1.0) return t;
  return SimTime::from_picoseconds(std::llround(static_cast<double>(t.picoseconds()) / speed));
}

// One simulated rank. kRanks: one of several (execute_ranks), at its own speed, its
// collectives meeting at a Rendezvous; otherwise the single rank of execute(), compiled without
// either.
template <bool kRanks>
class Execution {
 public:
  // `shared`: the queue of every rank (kRanks), unused by a single rank, which keeps its own.
  Execution(const Program& program, const ProgramIndex& index, MemoryObserver* memory,
            EventQueue* shared, std::uint16_t rank, RankSpeed speed, Rendezvous* rendezvous)
      : p_(program),
        dependents_(index.dependents),
        releases_(index.releases),
        memory_(memory),
        queue_(queue_of(shared)),
        rank_(rank),
        speed_(speed),
        rendezvous_(rendezvous) {
    const std::size_t n = p_.ops.size();
    timeline_.ops.assign(n, OpTiming{});
    timeline_.cpu.assign(p_.cpu.size(), CpuStepTiming{});
    if constexpr (kRanks) timeline_.transferred.assign(n, SimTime{});
    remaining_deps_ = index.dependencies;
    state_.assign(n, State::kNotIssued);
    streams_.assign(p_.stream_names.size(), Fifo{});
    channels_.assign(p_.channel_names.size(), Fifo{});
    pending_release_.assign(p_.tensors.size(), false);
    version_.assign(n, 0);
    progress_.assign(n, 0.0);
    progress_since_.assign(n, SimTime{});
    rate_duration_.assign(n, SimTime{});
    sm_running_.reserve(p_.stream_names.size());
    network_running_.reserve(p_.channel_names.size());
  }

  void begin() { push(SimTime{}, EventPriority::kCpuStep, EventKind::kCpuStep, 0); }

  // The single rank's whole execution.
  Timeline run() requires(!kRanks) {
    queue_.reserve(64);
    begin();
    while (!queue_.empty()) handle(queue_.pop());
    return end();
  }

  void handle(const Event& e) {
    now_ = e.time;
    if (e.kind == EventKind::kOpFinish) {
      if (e.version != version_[e.index]) return;
      if constexpr (kRanks) {
        if (state_[e.index] == State::kRunning && p_.ops[e.index].kind == OpKind::kCommunication) {
          return end_transfer(e.index);
        }
      }
      finish(e.index);
    } else {
      advance_cpu();
    }
  }

  // Every rank of the group has reached collective `op`: its transfer runs from `now`. One that
  // crosses the nodes' NICs shares them with the others doing so (Op::network_time): each
  // progresses at the rate its duration has with that many transfers on the NICs, and all are
  // rescheduled when one starts or ends.
  void transfer(OpId op, SimTime now) {
    const Op& o = p_.ops[op];
    if (o.network_time.picoseconds() <= 0) {
      push(now + o.duration, EventPriority::kOpFinish, EventKind::kOpFinish, op, version_[op]);
      return;
    }
    credit_network_progress(now);
    network_running_.push_back(op);
    progress_[op] = 0.0;
    progress_since_[op] = now;
    reschedule_network(now);
  }

  // Every rank of the group has moved its bytes: collective `op` ends at `now` (a ring or tree
  // completes on all its ranks together, at the pace of its slowest link).
  void complete(OpId op, SimTime now) requires kRanks {
    push(now, EventPriority::kOpFinish, EventKind::kOpFinish, op, ++version_[op]);
  }

  Timeline end() {
    check_finished();
    timeline_.makespan = cpu_time_;
    for (const OpTiming& t : timeline_.ops)
      timeline_.makespan = std::max(timeline_.makespan, t.end);
    return std::move(timeline_);
  }

 private:
  // kTransferred (multi-rank executions): a collective whose bytes this rank has moved, waiting
  // for its peers to have moved theirs.
  enum class State : std::uint8_t { kNotIssued, kIssued, kRunning, kTransferred, kFinished };
  // What the CPU thread is doing while simulated time passes.
  enum class CpuState : std::uint8_t {
    kReady,
    kLaunching,
    kWorking,
    kBlocked,
    kQueueFull,  // a launch waits for its stream's oldest op (Program::launch_queue_depth)
    kResuming,
    kAwaitingReleases,  // an allocation waits for every pending stream use, then is retried
    // An allocation's cudaFree waits for the device to be idle, or its unmaps for their
    // streams (freeing_device_, freeing_streams_).
    kFreeingSegments
  };

  // The device calls of the allocation in kFreeingSegments may run: what they synchronize has
  // finished its issued work.
  [[nodiscard]] bool segments_can_be_freed() const {
    if (freeing_device_) return outstanding_ == 0;
    if (freeing_streams_ == 0) return true;
    for (std::size_t s = 0; s < streams_.size() && s < 64; ++s) {
      if ((freeing_streams_ >> s & 1U) != 0 && streams_[s].head != streams_[s].ops.size())
        return false;
    }
    return true;
  }

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
      credit_sm_progress();
      if (communication_running_++ == 0) reschedule_sm_ops();
      // Its kernel runs (and holds its SMs) from now; the transfer waits for the group.
      if constexpr (kRanks) return rendezvous_->arrive(rank_, op, now_);
      transfer(op, now_);
      return;
    }
    if (uses_sms(o)) {
      credit_sm_progress();
      sm_running_.push_back(op);
      progress_[op] = 0.0;
      progress_since_[op] = now_;
      rate_duration_[op] = SimTime::from_picoseconds(-1);  // none yet: scheduled below
      reschedule_sm_ops();
      return;
    }
    push(now_ + o.duration, EventPriority::kOpFinish, EventKind::kOpFinish, op);
  }

  void push(SimTime time, EventPriority priority, EventKind kind, std::uint32_t index,
            std::uint32_t version = 0) {
    queue_.push(time, priority, kind, index, version, rank_);
  }

  using Queue = std::conditional_t<kRanks, EventQueue&, EventQueue>;
  static Queue queue_of(EventQueue* shared) {
    if constexpr (kRanks) {
      return *shared;
    } else {
      return EventQueue{};
    }
  }

  // Device time of a compute op, CPU time of a launch or host work, at this rank's speed.
  [[nodiscard]] SimTime gpu_time(SimTime t) const {
    if constexpr (kRanks) return at_speed(t, speed_.compute);
    return t;
  }
  [[nodiscard]] SimTime host_time(SimTime t) const {
    if constexpr (kRanks) return at_speed(t, speed_.host);
    return t;
  }

  // Kernels (kCompute) and device-to-device copies (kCopy: casts, pads, FSDP's copy-in and
  // copy-out) run on the SMs; host transfers run on the copy engines, and a collective's use of
  // the SMs is in the others' contended_duration.
  static bool uses_sms(const Op& o) {
    return o.kind == OpKind::kCompute || o.kind == OpKind::kCopy;
  }
  static bool contended(const Op& o) {
    return o.kind == OpKind::kCompute && o.contended_duration.picoseconds() > 0 &&
           o.contended_duration != o.duration;
  }
  // An SM op's device time at the current rate. Alone, or slowed by a running collective
  // (contended_duration); and the SMs time-shared among the SM ops running at once, each at 1/n
  // of its rate. CUDA gives a kernel's thread blocks to SMs with room for them, and a GEMM's
  // blocks (one per SM, most of its shared memory and registers) leave none: a kernel on
  // another stream runs in the SM time the GEMM does not get (the block scheduler's "left-over"
  // policy, Pai et al., "Improving GPGPU Concurrency with Elastic Kernels", ASPLOS 2013), so
  // the SM work of both is done one after the other, whichever order the blocks take.
  [[nodiscard]] SimTime shared_duration(const Op& o) const {
    SimTime alone = o.duration;
    if (o.kind == OpKind::kCompute) {
      alone =
          gpu_time(communication_running_ > 0 && contended(o) ? o.contended_duration : o.duration);
    }
    return SimTime::from_picoseconds(alone.picoseconds() *
                                     static_cast<std::int64_t>(sm_running_.size()));
  }

  // Credits the running SM ops with their progress since the last change, at their rates.
  void credit_sm_progress() {
    for (OpId op : sm_running_) {
      // A zero-length op ends at its start (its event is due now); one just started has none.
      if (rate_duration_[op].picoseconds() > 0) {
        progress_[op] += static_cast<double>((now_ - progress_since_[op]).picoseconds()) /
                         static_cast<double>(rate_duration_[op].picoseconds());
      }
      progress_since_[op] = now_;
    }
  }

  // Reschedules the rest of every running SM op whose rate has changed (an SM op or a
  // collective started or ended); credit_sm_progress first.
  void reschedule_sm_ops() {
    for (OpId op : sm_running_) {
      const SimTime duration = shared_duration(p_.ops[op]);
      if (duration == rate_duration_[op]) continue;
      rate_duration_[op] = duration;
      const double left = std::max(0.0, 1.0 - progress_[op]);
      const auto remaining = static_cast<std::int64_t>(
          std::llround(left * static_cast<double>(duration.picoseconds())));
      push(now_ + SimTime::from_picoseconds(remaining), EventPriority::kOpFinish,
           EventKind::kOpFinish, op, ++version_[op]);
    }
  }

  // A collective's duration while `transfers` collectives (itself included) cross the NICs.
  [[nodiscard]] static SimTime network_shared_duration(const Op& o, std::size_t transfers) {
    const auto extra = static_cast<std::int64_t>(transfers > 1 ? transfers - 1 : 0);
    return o.duration + SimTime::from_picoseconds(o.network_time.picoseconds() * extra);
  }

  // Credits the transfers on the NICs with their progress since the last change, at the rate
  // of the current number of them.
  void credit_network_progress(SimTime now) {
    for (OpId op : network_running_) {
      const SimTime duration = network_shared_duration(p_.ops[op], network_running_.size());
      progress_[op] += static_cast<double>((now - progress_since_[op]).picoseconds()) /
                       static_cast<double>(duration.picoseconds());
      progress_since_[op] = now;
    }
  }

  // Schedules the rest of every transfer on the NICs at the rate of their current number.
  void reschedule_network(SimTime now) {
    for (OpId op : network_running_) {
      const double left = std::max(0.0, 1.0 - progress_[op]);
      const auto remaining = static_cast<std::int64_t>(std::llround(
          left * static_cast<double>(
                     network_shared_duration(p_.ops[op], network_running_.size()).picoseconds())));
      push(now + SimTime::from_picoseconds(remaining), EventPriority::kOpFinish,
           EventKind::kOpFinish, op, ++version_[op]);
    }
  }

  // A collective's transfer has ended on this rank: it leaves the NICs, whose other transfers
  // speed up.
  void release_network(OpId op) {
    if (p_.ops[op].network_time.picoseconds() <= 0) return;
    credit_network_progress(now_);
    network_running_.erase(std::find(network_running_.begin(), network_running_.end(), op));
    reschedule_network(now_);
  }

  // This rank has moved its share of collective `op`: its NICs are free of it, but the op ends
  // with its group's last transfer (Rendezvous::transferred), which may pass through a NIC more
  // loaded than this rank's.
  void end_transfer(OpId op) requires kRanks {
    state_[op] = State::kTransferred;
    timeline_.transferred[op] = now_;
    release_network(op);
    rendezvous_->transferred(rank_, op, now_);
  }

  void finish(OpId op) {
    const Op& o = p_.ops[op];
    if constexpr (!kRanks) {
      if (o.kind == OpKind::kCommunication) release_network(op);
    }
    state_[op] = State::kFinished;
    --outstanding_;
    timeline_.ops[op].end = now_;
    if (o.kind == OpKind::kCommunication) {
      credit_sm_progress();
      if (--communication_running_ == 0) reschedule_sm_ops();
    } else if (uses_sms(o)) {
      sm_running_.erase(std::find(sm_running_.begin(), sm_running_.end(), op));
      credit_sm_progress();
      reschedule_sm_ops();
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
    // Several ops may finish at this instant: the CPU is woken once (a second wake would end the
    // retried allocation's device calls, or the launch after it, at once).
    if (!cpu_wake_queued_ &&
        ((cpu_state_ == CpuState::kAwaitingReleases && pending_releases_ == 0) ||
         (cpu_state_ == CpuState::kFreeingSegments && segments_can_be_freed()))) {
      cpu_wake_queued_ = true;
      push(now_, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
    }
    if (cpu_blocked_on_ == op) {
      cpu_blocked_on_ = kNoOp;
      // A wait is over; a launch into a full queue is tried again.
      cpu_state_ = cpu_state_ == CpuState::kQueueFull ? CpuState::kReady : CpuState::kResuming;
      push(now_, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
    }
  }

  // Runs CPU steps from the program counter until the CPU must let time pass.
  void advance_cpu() {
    cpu_wake_queued_ = false;
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
          push(now_ + allocation_cost_, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
          return;
        }
        timeline_.cpu[pc_].end = now_;
        ++pc_;
        break;
      case CpuState::kAwaitingReleases:  // every stream use has passed: retry the allocation
      case CpuState::kReady:
      case CpuState::kBlocked:
      case CpuState::kQueueFull:
        break;
    }
    cpu_state_ = CpuState::kReady;
    cpu_time_ = now_;
    while (pc_ < p_.cpu.size()) {
      const CpuStep& s = p_.cpu[pc_];
      timeline_.cpu[pc_].start = now_;
      switch (s.kind) {
        case CpuStepKind::kLaunch: {
          const Fifo& queue = streams_[p_.ops[s.target].stream];
          if (queue.ops.size() - queue.head >= p_.launch_queue_depth) {
            cpu_state_ = CpuState::kQueueFull;
            cpu_blocked_on_ = queue.front();
            return;
          }
          cpu_state_ = CpuState::kLaunching;
          push(now_ + host_time(p_.ops[s.target].launch_cost), EventPriority::kCpuStep,
               EventKind::kCpuStep, 0);
          return;
        }
        case CpuStepKind::kWork:
          cpu_state_ = CpuState::kWorking;
          push(now_ + host_time(s.duration), EventPriority::kCpuStep, EventKind::kCpuStep, 0);
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
          if (memory_ == nullptr) {  // lifetimes only: the allocation takes no CPU time
            timeline_.cpu[pc_].end = now_;
            break;
          }
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
          freeing_device_ = outcome.synchronizes_device;
          freeing_streams_ = outcome.synchronized_streams;
          if (!segments_can_be_freed()) {
            cpu_state_ = CpuState::kFreeingSegments;
            allocation_cost_ = outcome.cpu_cost;
            return;
          }
          if (outcome.cpu_cost.picoseconds() > 0) {
            cpu_state_ = CpuState::kWorking;
            push(now_ + outcome.cpu_cost, EventPriority::kCpuStep, EventKind::kCpuStep, 0);
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
      if (cpu_state_ == CpuState::kQueueFull) {
        const Op& oldest = p_.ops[cpu_blocked_on_];
        cpu = fmt::format("the CPU waits for room in stream {}'s launch queue, behind '{}'",
                          p_.stream_names[oldest.stream], p_.names[oldest.name]);
      } else if (cpu_blocked_on_ != kNoOp) {
        cpu = fmt::format("the CPU is blocked waiting for '{}'",
                          p_.names[p_.ops[cpu_blocked_on_].name]);
      } else if (cpu_state_ == CpuState::kAwaitingReleases ||
                 cpu_state_ == CpuState::kFreeingSegments) {
        cpu = fmt::format(
            "the CPU's allocation of '{}' waits for {}",
            p_.names[p_.tensors[p_.cpu[pc_].target].name],
            cpu_state_ == CpuState::kAwaitingReleases
                ? "the pending stream uses of the blocks it would free"
                : "the device (or the streams) it synchronizes before its cudaFree to be idle");
      }
      throw DeadlockError(fmt::format("deadlock at t={:.3f} us: {}; unfinished ops ({} in all): {}",
                                      now_.microseconds(), cpu, listed, stuck));
    }
  }

  const Program& p_;
  const Csr& dependents_;
  const Csr& releases_;
  MemoryObserver* memory_;
  Queue queue_;
  std::uint16_t rank_;
  RankSpeed speed_;
  // finish() has queued the wake of a CPU awaiting releases or freeing segments.
  bool cpu_wake_queued_ = false;
  Rendezvous* rendezvous_;  // kRanks only: where collectives wait for the group
  Timeline timeline_;
  SimTime now_;
  SimTime cpu_time_;
  std::vector<std::uint32_t> remaining_deps_;
  std::vector<State> state_;
  std::vector<Fifo> streams_;
  std::vector<Fifo> channels_;
  std::vector<bool> pending_release_;
  std::vector<std::uint32_t> version_;   // bumped when an op is rescheduled (SM share, NIC)
  std::vector<double> progress_;         // fraction of a running SM op or NIC transfer done
  std::vector<SimTime> progress_since_;  // when progress_ was last credited
  std::vector<SimTime> rate_duration_;   // an SM op's whole duration at its current rate
  std::vector<OpId> sm_running_;         // running kernels and device copies (uses_sms)
  std::vector<OpId> network_running_;    // collectives whose transfers are on the NICs
  int communication_running_ = 0;
  std::size_t outstanding_ = 0;       // issued ops not yet finished
  std::size_t pending_releases_ = 0;  // freed tensors awaiting a stream use
  std::size_t pc_ = 0;
  CpuState cpu_state_ = CpuState::kReady;
  OpId cpu_blocked_on_ = kNoOp;
  SimTime allocation_cost_;            // of the allocation waiting in kFreeingSegments
  bool freeing_device_ = false;        // it synchronizes the device
  std::uint64_t freeing_streams_ = 0;  // it synchronizes these streams (bit per StreamId)
};

// Collectives of every rank class, matched per communicator group: the transfer starts when the
// last class of the group has started its kernel, and the collective ends when the last class
// has moved its bytes.
class GroupRendezvous final : public Rendezvous {
 public:
  GroupRendezvous(const Program& program, const RankClasses& classes,
                  std::vector<std::unique_ptr<Execution<true>>>& ranks)
      : p_(program), classes_(classes), ranks_(ranks) {
    if (classes.peers.size() != program.channel_names.size()) {
      throw std::logic_error("engine: rank classes computed for another program's channels");
    }
    for (Slots* slots : {&arrived_, &transferred_}) {
      slots->resize(classes.peers.size());
      for (auto& per_class : *slots) per_class.assign(classes.count(), Waiting{});
    }
  }

  void arrive(std::uint16_t rank, OpId op, SimTime now) override {
    meet(arrived_, rank, op, [&](Execution<true>& peer) { peer.transfer(op, now); });
  }

  void transferred(std::uint16_t rank, OpId op, SimTime now) override {
    meet(transferred_, rank, op, [&](Execution<true>& peer) { peer.complete(op, now); });
  }

 private:
  struct Waiting {
    OpId op = kNoOp;
    std::size_t count = 0;
  };
  using Slots = std::vector<std::vector<Waiting>>;  // [channel][lowest class of the group]

  // `rank` has reached `op` in `slots`; once every class of its group has, `then` runs for each.
  // One slot per group, held by its lowest class: a communicator runs its collectives in issue
  // order, so a group meets at most one at a time in each of the two.
  template <typename Then>
  void meet(Slots& slots, std::uint16_t rank, OpId op, Then then) {
    const ChannelId channel = p_.ops[op].channel;
    if (channel == kNoChannel) {
      throw std::logic_error(
          fmt::format("engine: collective '{}' has no communicator", p_.names[p_.ops[op].name]));
    }
    const std::vector<std::int32_t>& peers =
        classes_.peers[static_cast<std::size_t>(channel)][rank];
    Waiting& w = slots[static_cast<std::size_t>(channel)][static_cast<std::size_t>(peers.front())];
    if (w.count == 0) {
      w.op = op;
    } else if (w.op != op) {
      throw std::logic_error("engine: ranks of one group reached different collectives");
    }
    if (++w.count < peers.size()) return;
    w.count = 0;
    for (const std::int32_t peer : peers) then(*ranks_[static_cast<std::size_t>(peer)]);
  }

  const Program& p_;
  const RankClasses& classes_;
  std::vector<std::unique_ptr<Execution<true>>>& ranks_;
  Slots arrived_;      // collectives whose kernels have started
  Slots transferred_;  // collectives whose bytes have moved
};

// A program that stalls is checked for a cycle only then, to name the ops that wait on each
// other (op_graph.hpp); building that graph for every program cost 6-7 % of a simulation's CPU
// time (reports/performance.md). A stall that is no cycle keeps the executor's account of it.
template <typename Run>
auto naming_any_cycle(const Program& program, Run run) {
  try {
    return run();
  } catch (const DeadlockError&) {
    check_for_deadlock(program);
    throw;
  }
}

}  // namespace

Timeline execute(const Program& program, MemoryObserver* memory) {
  return naming_any_cycle(program, [&] {
    const ProgramIndex index(program);
    return Execution<false>(program, index, memory, nullptr, 0, RankSpeed{}, nullptr).run();
  });
}

std::vector<Timeline> execute_ranks(const Program& program, const RankClasses& classes,
                                    const std::vector<MemoryObserver*>& memory) {
  const std::size_t n = classes.count();
  if (n == 0 || n > std::numeric_limits<std::uint16_t>::max() || memory.size() != n) {
    throw std::logic_error("engine: execute_ranks needs 1 to 65535 classes, one observer each");
  }
  return naming_any_cycle(program, [&] {
    const ProgramIndex index(program);
    EventQueue queue;
    queue.reserve(64 * n);
    std::vector<std::unique_ptr<Execution<true>>> ranks;
    ranks.reserve(n);
    GroupRendezvous rendezvous(program, classes, ranks);
    for (std::size_t k = 0; k < n; ++k) {
      ranks.push_back(std::make_unique<Execution<true>>(program, index, memory[k], &queue,
                                                        static_cast<std::uint16_t>(k),
                                                        classes.speed[k], &rendezvous));
    }
    for (auto& rank : ranks) rank->begin();
    while (!queue.empty()) {
      const Event e = queue.pop();
      ranks[e.rank]->handle(e);
    }
    std::vector<Timeline> timelines;
    timelines.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      try {
        timelines.push_back(ranks[k]->end());
      } catch (const DeadlockError& e) {
        throw DeadlockError(
            fmt::format("rank {}: {}", classes.representative[k], std::string(e.what())));
      }
    }
    return timelines;
  });
}

}  // namespace fsdpsim::engine
