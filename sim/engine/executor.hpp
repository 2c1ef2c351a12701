// Replays a Program as a discrete-event simulation.
//
// Semantics (CUDA streams + one host thread):
// - The CPU runs Program::cpu in order. Launching op X takes X.launch_cost of CPU time; X is
//   issued when that ends. A wait blocks the CPU until its op has finished.
// - An issued op starts when (a) every op it depends on has finished (cross-stream event waits),
//   (b) every op issued before it on its stream has finished (FIFO), and (c) if it has a
//   channel, every op issued before it on that channel has finished (NCCL runs all collectives
//   of one communicator on one internal stream, in issue order).
// - A stream holds at most Program::launch_queue_depth issued, unfinished ops: a launch into a
//   full stream blocks the CPU until the stream's oldest op finishes.
// - Compute ops share the GPU with communication: while any communication op runs, a compute op
//   with a contended_duration progresses at that slower rate (fluid model: progress is credited
//   and the finish rescheduled whenever communication starts or stops).
// - Tensors are allocated and freed at the CPU's time; a free with `after_op` releases its
//   block once that op has finished.
// Cost: O((ops + cpu steps) log(ops)) time; memory is reserved once up front.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/engine/memory_observer.hpp"
#include "sim/engine/program.hpp"
#include "sim/engine/rank_classes.hpp"
#include "sim/engine/timeline.hpp"

namespace fsdpsim::engine {

// The program can never finish: some op waits for work that cannot happen.
class DeadlockError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws DeadlockError naming the ops that wait on each other when the program has a cycle
// (check_for_deadlock, op_graph.hpp), else the stuck ops and where the CPU is blocked.
Timeline execute(const Program& program, MemoryObserver* memory = nullptr);

// Every rank of a world runs `program` at its own speed (rank_classes.hpp), one representative
// per class, with one memory observer each. A collective's kernel starts on each rank as above
// and holds its SMs; its transfer starts when the last rank of its communicator group has
// started it, and takes the op's duration from then (NCCL kernels wait for their peers). Each
// rank's transfer shares that rank's NICs (Op::network_time) and leaves them when done; the
// collective ends on every rank of the group when the last of them is done (a ring or tree
// moves at the pace of its slowest link).
// Compute ops take duration / speed.compute (contended_duration too), launches and host work
// launch_cost or duration / speed.host; copies, collectives and allocator calls are not scaled.
// Returns one timeline per class, in class order; a stall throws as execute() does.
std::vector<Timeline> execute_ranks(const Program& program, const RankClasses& classes,
                                    const std::vector<MemoryObserver*>& memory);

}  // namespace fsdpsim::engine
