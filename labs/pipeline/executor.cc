// Lab 5 (pipeline), stage C: the executor. Read executor.h (the model, the ops, the message rule) and
// notes/05-pipeline.md section 5 first.
#include "labs/pipeline/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/nn/layers.h"
#include "reference/tensor/tensor.h"

namespace distlab::pipeline {

absl::StatusOr<std::vector<Message>> MessageOrder(const Schedule& schedule, const Costs& costs) {
  // TODO(pipeline stage C): the global order in which the ranks post their sends and receives.
  //  1. Simulate(schedule, costs) (its errors pass through).
  //  2. For each stage s and each of its timed ops: F i with s < p-1 sends the activation {s, s+1, true, i};
  //     B i / BW i with s > 0 sends the input gradient {s, s-1, false, i}; the message's time is the op's
  //     end. Interleaved (v > 1): op.chunk of s is virtual stage k = VirtualStage(s, chunk, p); F sends to
  //     the rank of k+1, B / BW to the rank of k-1, with chunk = op.chunk ({s, to, true, i, chunk}); none
  //     past the model's ends, and none when both ends are the same rank (p = 1).
  //  3. Sort by (time, from, to), stably. Why this cannot deadlock: a message is sent after everything its
  //     op needed has arrived, so every rank meets its messages in an order both ends agree on.
  (void)schedule, (void)costs;
  return Unimplemented("pipeline", "C", "MessageOrder");
}

absl::StatusOr<ExecResult> RunPipeline(const Schedule& schedule, const PipelineProblem& problem,
                                       const ExecutorOptions& options) {
  // TODO(pipeline stage C): one training step on p ranks (comm::RunRanks, threads backend).
  //  1. ValidateSchedule; check problem.p/m against the schedule and every array's size (InvalidArgument).
  //  2. order = MessageOrder(schedule, the artificial costs, or unit costs where they are 0).
  //  3. Per rank s, a communication thread walks `order`: for a message from s, take the buffer the compute
  //     thread produced and comm.Send it, then stream.Synchronize(); for a message to s, comm.Recv it,
  //     Synchronize, and hand it to the compute thread. (A mutex + condition variable mailbox keyed by
  //     (activation?, microbatch, chunk) works; waits give up after options.timeout with DEADLINE_EXCEEDED.)
  //  4. The compute thread runs schedule.stages[s] in order on this rank's blocks: one nn::Linear (bias) and
  //     one nn::Gelu per chunk (reference/nn/layers.h), the Linear's values copied from problem.weight/bias
  //     of the chunk's virtual stage. The layers cache only their latest input and several microbatches are
  //     in flight, so keep x and z per microbatch yourself: F = Linear::Forward, Gelu::Forward; B =
  //     Gelu::BackwardAt(z, dy), Linear::BackwardInput; W = Linear::BackwardWeight(x, g). Wait for the
  //     input (not timed), record the start, compute, hand off the output, pad to the artificial cost
  //     (sleep_until or spin), record the end in the timeline.
  //  5. W accumulates: the step's gradient is the sum over microbatches (BackwardWeight adds).
  //  6. On any error: unblock and join the communication thread, comm.Abort(), return the error.
  //  7. Result: gradients per virtual stage (p v blocks), loss, timelines shifted so the first op starts
  //     at 0, makespan, bubble_rate = 1 - mean busy / makespan.
  (void)schedule, (void)problem, (void)options;
  return Unimplemented("pipeline", "C", "RunPipeline");
}

}  // namespace distlab::pipeline
