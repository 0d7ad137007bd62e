// Lab 5 (pipeline), stage A: what a pipeline schedule is, how to check one, and how to make one (GPipe,
// 1F1B). Stage B's schedules with a split backward (zero bubble) and the interleaved stretch are in
// zero_bubble.h.
//
// Vocabulary (used in every file of this lab):
//   p    = pipeline stages (stage s holds layers s*L/p .. (s+1)*L/p - 1; stage 0 sees the input)
//   m    = microbatches per step (microbatch i, 0 <= i < m)
//   F i  = forward of microbatch i on a stage
//   B i  = input-gradient backward of microbatch i (dL/dx: what the previous stage waits for)
//   W i  = weight-gradient backward of microbatch i (dL/dW: needed only by the optimizer)
//   BW i = the fused full backward (B i then W i as one operation), as GPipe and 1F1B run it
//   T_F, T_B, T_W = time of F, B, W of one microbatch on one stage; M_B = activation memory of one microbatch
//
// A schedule lists, per stage, the order in which that stage runs its operations. It says nothing about
// time: the simulator (simulator.h) turns an order plus costs into a timeline, the executor (executor.h) runs
// it for real.
//
// Interleaved schedules (virtual stages, Megatron-LM style): the model is cut into p*v chunks instead of p,
// and rank s holds the v chunks s, s+p, s+2p, ... -- model chunk c of rank s is **virtual stage** c*p + s.
// An op then names its chunk as well as its microbatch, and the data flow runs through the virtual stages:
// from the last rank's chunk c the activation goes on to rank 0's chunk c+1. With v = 1 (every chunk 0)
// this is the plain pipeline above. `stages[s]` always lists what *rank* s runs, all its chunks together.
#ifndef DISTLAB_LABS_PIPELINE_SCHEDULE_H_
#define DISTLAB_LABS_PIPELINE_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace distlab::pipeline {

enum class OpKind {
  kForward,       // F
  kBackward,      // B: input gradient only
  kWeight,        // W: weight gradient only
  kFullBackward,  // BW: B and W fused
};

struct Op {
  OpKind kind = OpKind::kForward;
  int mb = 0;     // microbatch
  int chunk = 0;  // model chunk on this rank (0 unless the schedule is interleaved, v > 1)
  bool operator==(const Op& o) const { return kind == o.kind && mb == o.mb && chunk == o.chunk; }
  bool operator!=(const Op& o) const { return !(*this == o); }
};

inline Op F(int mb) { return {OpKind::kForward, mb}; }
inline Op B(int mb) { return {OpKind::kBackward, mb}; }
inline Op W(int mb) { return {OpKind::kWeight, mb}; }
inline Op BW(int mb) { return {OpKind::kFullBackward, mb}; }
// The same ops on model chunk `chunk` (interleaved schedules).
inline Op F(int mb, int chunk) { return {OpKind::kForward, mb, chunk}; }
inline Op B(int mb, int chunk) { return {OpKind::kBackward, mb, chunk}; }
inline Op W(int mb, int chunk) { return {OpKind::kWeight, mb, chunk}; }
inline Op BW(int mb, int chunk) { return {OpKind::kFullBackward, mb, chunk}; }

// "F", "B", "W", "BW".
inline const char* KindName(OpKind kind) {
  switch (kind) {
    case OpKind::kForward:
      return "F";
    case OpKind::kBackward:
      return "B";
    case OpKind::kWeight:
      return "W";
    case OpKind::kFullBackward:
      return "BW";
  }
  return "?";
}
// "F3", "B3", "W3", "BW3"; on chunk c > 0 the chunk follows a dot: "F3.1" (microbatch 3, chunk 1).
inline std::string ToString(const Op& op) {
  std::string out = KindName(op.kind) + std::to_string(op.mb);
  if (op.chunk != 0) out += "." + std::to_string(op.chunk);
  return out;
}

struct Schedule {
  std::string name;                     // "1F1B", "ZB-H1", ...
  int p = 0;                            // stages
  int m = 0;                            // microbatches
  std::vector<std::vector<Op>> stages;  // stages[s] = the ops stage (rank) s runs, in order
  int v = 1;                            // model chunks per rank (virtual stages: p*v in all)
};

// The virtual stage of model chunk `chunk` on rank `s`: chunk * p + s. Virtual stage k lives on rank k % p
// as chunk k / p.
inline int VirtualStage(int s, int chunk, int p) { return chunk * p + s; }

// One line per stage: "stage 0: F0 F1 B0 ...".
inline std::string ToString(const Schedule& schedule) {
  std::string out;
  for (size_t s = 0; s < schedule.stages.size(); ++s) {
    out += "stage " + std::to_string(s) + ":";
    for (const Op& op : schedule.stages[s]) out += " " + ToString(op);
    out += "\n";
  }
  return out;
}

// The costs of one operation on one stage, and the latency of one stage-to-stage message.
struct Costs {
  double forward = 1;   // T_F
  double backward = 1;  // T_B
  double weight = 1;    // T_W (a fused BW costs T_B + T_W)
  double comm = 0;      // latency from the end of an op to its dependent op on the neighbouring stage
};

// --- Stage A ------------------------------------------------------------------------------------------

// OK when `schedule` can run: the shape is right (p >= 1, m >= 1, v >= 1, p stage lists, microbatches in
// [0, m), chunks in [0, v)), every stage runs F i exactly once and either BW i or both B i and W i exactly
// once -- per chunk when v > 1 -- and the dependencies (k = virtual stage, see VirtualStage; with v = 1,
// k = s)
//   F i on k        after F i on k-1
//   B i / BW i on k after B i / BW i on k+1, and after F i on k
//   W i on k        after B i on k
// can all be met by running each stage's list in order (no two stages waiting on each other).
// Otherwise InvalidArgument naming the first broken rule: stages are checked in order 0..p-1 and
// positions in order, shape and counts before order, order before cross-stage deadlock. Messages name ops
// as ToString writes them ("BW0", "F1.1") and stages as "stage <s>". A deadlock names every stage that
// cannot move, with its position, its next op and what that op waits for, e.g. for
//   stage 0: F0 BW0 F1 BW1      stage 1: F0 F1 BW0 BW1
//   "invalid schedule: deadlock: stage 0 waits at position 1 (BW0) for the backward of microbatch 0 on
//    stage 1; stage 1 waits at position 1 (F1) for F1 on stage 0; reorder so that each dependency runs first"
// (a gradient from chunk c > 0 is "the backward of microbatch 0 of chunk 1 on stage 1").
absl::Status ValidateSchedule(const Schedule& schedule);

// GPipe: every stage runs F 0..m-1, then BW 0..m-1 ("all forward, all backward"). Peak memory m * M_B.
absl::StatusOr<Schedule> GPipe(int p, int m);

// 1F1B: stage s runs min(p-s-1, m) warm-up forwards, then alternates one forward and one fused backward
// (F, BW, F, BW, ...), each backward of the oldest microbatch in flight, then the cool-down backwards. At
// most p-s microbatches are in flight on stage s.
absl::StatusOr<Schedule> OneFOneB(int p, int m);

// GPipe's bubble fraction for comm = 0 and any costs: the share of the step each stage idles, i.e. its idle
// time over the makespan (not over the ideal work m (T_F+T_B+T_W)). A closed form in p and m; derive it in
// notes/05-pipeline.md section 2 (schedule_test: Simulate.GPipeBubbleFraction draws a timeline).
double GPipeBubbleFraction(int p, int m);

// The makespan of 1F1B with fused backward (a BW costs T_B + T_W) and no communication latency, for any
// p, m >= 1. A closed form in p, m and the costs; derive it in notes/05-pipeline.md section 3 (schedule_test:
// Simulate.OneFOneBTimelineByHand draws the timeline of p = 3, m = 4).
double OneFOneBMakespan(int p, int m, const Costs& costs);

}  // namespace distlab::pipeline

#endif  // DISTLAB_LABS_PIPELINE_SCHEDULE_H_
