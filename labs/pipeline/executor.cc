// Lab 5 (pipeline), stage C: the executor. Read executor.h (the model, the ops, the message rule) and
// notes/05-pipeline.md section 7 first.
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
  // TODO(pipeline stage C): MessageOrder -- contract: executor.h (MessageOrder, Message);
  //   idea: notes/05-pipeline.md §7. Simulate(schedule, costs) gives every op's end (its errors pass
  //   through); a Message names ranks and the sender's chunk, and VirtualStage says where chunks live.
  //   Which ops hand a tensor to another rank, and which rank is that?
  (void)schedule, (void)costs;
  return Unimplemented("pipeline", "C", "MessageOrder");
}

absl::StatusOr<ExecResult> RunPipeline(const Schedule& schedule, const PipelineProblem& problem,
                                       const ExecutorOptions& options) {
  // TODO(pipeline stage C): RunPipeline -- contract: executor.h (RunPipeline); idea: notes/05-pipeline.md §7.
  //   comm::RunRanks runs one thread per rank; comm.Send/Recv then stream.Synchronize (a Send completes only
  //   when the peer's Recv runs, and its buffer must live until Synchronize returns); comm.Abort() frees
  //   peers blocked on a failed rank. nn::Linear and nn::Gelu (reference/nn/layers.h) cache only their
  //   latest input: BackwardInput, BackwardWeight and Gelu::BackwardAt take what you kept instead.
  //   What must a rank keep for microbatch i between its F and its B, and between its B and its W?
  (void)schedule, (void)problem, (void)options;
  return Unimplemented("pipeline", "C", "RunPipeline");
}

}  // namespace distlab::pipeline
