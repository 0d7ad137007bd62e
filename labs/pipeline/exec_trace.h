// Lab 5 (pipeline), given; not graded: an executor run as trace events (reference/trace/trace.h), beside the
// Send/Recv events the runtime records by itself, and the bubble measured back from such a trace.
//
// Your RunPipeline reports each op's start and end (ExecResult::timeline); RecordExecTrace turns them into
// one complete event per op, so a DISTLAB_TRACE file (or trace::Json()) shows F, B and W per stage and
// microbatch next to the messages that connect them. Open it in Perfetto or chrome://tracing.
//
// Vocabulary: p = stages (ranks), m = microbatches.
#ifndef DISTLAB_LABS_PIPELINE_EXEC_TRACE_H_
#define DISTLAB_LABS_PIPELINE_EXEC_TRACE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/pipeline/executor.h"
#include "reference/trace/trace_file.h"

namespace distlab::pipeline {

// The trace track (tid) of stage s's ops: a track of its own under pid s, named "stage s compute".
inline int ComputeTrack(int s) { return 1000000 + s; }

// One complete event per op of result.timeline[s]: name ToString(op) ("F3", "BW2", "F3.1"), category
// "pipeline", pid s (the rank that ran it), tid ComputeTrack(s), args {stage, microbatch, chunk, kind},
// placed at origin_ns + (start in ms) on the trace clock. Nothing happens while recording is off.
//
// origin_ns is the trace time of the timeline's zero. RunPipeline shifts its timeline so that the first op
// starts at 0 and does not report when that was; pass trace::NowNs() taken just before calling it. Each box
// is then drawn at most the ranks' start-up time (threads and communicators: a fraction of a millisecond)
// earlier than it ran -- never later, so never after a message it caused.
void RecordExecTrace(const ExecResult& result, int64_t origin_ns);

// The bubble of a step measured back from a trace: the "pipeline" events of every pid (stage),
//   busy_s = sum of the durations of stage s's events, makespan = latest end - earliest start over all,
//   bubble_rate = 1 - mean_s(busy_s) / makespan        (ExecResult's and Simulate's definition)
// and the communication cost the run paid, for simulating it with the costs it actually had:
//   comm_ms = the mean, over the ops that sat idle waiting for a message (their stage's previous op had
//             ended before the op that sent it), of (start of the op - end of the op that sent it):
//             activations from F i of virtual stage k to F i of k+1, gradients from B i / BW i of k to
//             B i / BW i of k-1 (0 when no op waited).
// An error when the trace has no pipeline events.
struct TraceBubble {
  int stages = 0;
  double makespan_ms = 0;
  std::vector<double> busy_ms;  // [s]
  double bubble_rate = 0;
  // Mean measured duration of each kind of op, ms (0 where the kind did not run): F, B, W, BW.
  double mean_f_ms = 0, mean_b_ms = 0, mean_w_ms = 0, mean_bw_ms = 0;
  double comm_ms = 0;
  int comm_samples = 0;  // how many waiting ops comm_ms is the mean over
};
absl::StatusOr<TraceBubble> BubbleFromTrace(const trace::TraceDoc& doc);

}  // namespace distlab::pipeline

#endif  // DISTLAB_LABS_PIPELINE_EXEC_TRACE_H_
