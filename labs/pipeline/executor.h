// Lab 5 (pipeline), stage C: run a schedule for real on p ranks (threads of the comm runtime).
//
// The model: a small MLP of L = p v blocks (v = 1 unless the schedule is interleaved), block k on virtual
// stage k (rank k mod p, chunk k / p): z = x W_k^T + b_k, y = GELU(z), W_k [h, h], b_k [h]; the last
// block's loss is the mean squared error over all rows of all microbatches:
//   L = 1/(2 R m) sum_i sum_rows |y_i - t_i|^2,  R = rows per microbatch.
// Each block is the course's layers (reference/nn): an nn::Linear and an nn::Gelu. Per op on block k for
// microbatch i (g = dL/dz):
//   F  x_i -> z_i = Linear::Forward(x_i), y_i = Gelu::Forward(z_i); keep x_i and z_i; send y_i on to
//      block k+1 (the last block computes dL/dy_i)
//   B  dy_i -> g_i = Gelu::BackwardAt(z_i, dy_i); dx_i = Linear::BackwardInput(g_i); send dx_i back to
//      block k-1; keep g_i for W
//   W  Linear::BackwardWeight(x_i, g_i): microbatch i's part of dL/dW_k (g_i^T x_i) and dL/db_k (the row
//      sum of g_i)
//   BW B then W.
// Communication: every activation and input gradient is one Send/Recv of R h floats between the ranks of
// neighbouring virtual stages (none when both are on one rank: p = 1 with v > 1).
// Send completes only when the matching Recv runs (no eager buffering), so the order in which a rank posts
// its sends and receives decides whether the pipeline deadlocks. Each rank runs a communication thread
// that posts its messages in one global order -- MessageOrder, the time order of the simulated schedule --
// so every pair of ranks agrees on which message comes next; the compute thread hands it outgoing buffers
// and takes incoming ones. Computation never waits for a peer to be ready to receive.
//
// What this leaves out: tensor/data parallel inside a stage, activation recomputation, the optimizer step.
#ifndef DISTLAB_LABS_PIPELINE_EXECUTOR_H_
#define DISTLAB_LABS_PIPELINE_EXECUTOR_H_

#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"

namespace distlab::pipeline {

// The parameters and data of one training step. Flat row-major float arrays.
struct PipelineProblem {
  int p = 0, m = 0;
  int hidden = 0;                          // h
  int rows = 0;                            // R rows per microbatch
  std::vector<std::vector<float>> weight;  // [p*v][h*h] W_k[o][i] at o*h + i, k = virtual stage
  std::vector<std::vector<float>> bias;    // [p*v][h]
  std::vector<std::vector<float>> input;   // [m][R*h]   x of microbatch i on stage 0
  std::vector<std::vector<float>> target;  // [m][R*h]
  int v = 1;                               // model chunks per rank (must equal the schedule's v)
};

// A deterministic problem of p v blocks (values in [-1, 1) from a counter-based hash of (seed, tensor,
// index)).
inline PipelineProblem MakeProblem(int p, int m, int hidden, int rows, uint64_t seed, int v = 1) {
  auto value = [seed](uint64_t stream, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xBF58476D1CE4E5B9ull + i * 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  };
  PipelineProblem pr;
  pr.p = p, pr.m = m, pr.hidden = hidden, pr.rows = rows, pr.v = v;
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(hidden > 0 ? hidden : 1));
  for (int s = 0; s < p * v; ++s) {
    pr.weight.emplace_back(static_cast<size_t>(hidden) * hidden);
    pr.bias.emplace_back(hidden);
    for (size_t k = 0; k < pr.weight[s].size(); ++k) pr.weight[s][k] = w_scale * value(1000 + s, k);
    for (int k = 0; k < hidden; ++k) pr.bias[s][k] = 0.1f * value(2000 + s, k);
  }
  for (int i = 0; i < m; ++i) {
    pr.input.emplace_back(static_cast<size_t>(rows) * hidden);
    pr.target.emplace_back(static_cast<size_t>(rows) * hidden);
    for (size_t k = 0; k < pr.input[i].size(); ++k) {
      pr.input[i][k] = value(3000 + i, k);
      pr.target[i][k] = 0.5f * value(4000 + i, k);
    }
  }
  return pr;
}

// One stage-to-stage message: the activation y_i (from s to s+1, sent after F i) or the input gradient
// dx_i (from s to s-1, sent after B i / BW i). Interleaved: from virtual stage k to k+1 (activation) or
// k-1 (gradient); `from` and `to` are the ranks those virtual stages live on (schedule.h: VirtualStage).
struct Message {
  int from = 0, to = 0;
  bool activation = true;
  int mb = 0;
  int chunk = 0;  // the sender's chunk (its virtual stage is chunk * p + from)
  bool operator==(const Message& o) const {
    return from == o.from && to == o.to && activation == o.activation && mb == o.mb && chunk == o.chunk;
  }
};

struct ExecutorOptions {
  // Artificial cost of each op in ms (0: just the arithmetic). An op lasts at least this long, so the run
  // can be compared with the simulator for the same costs.
  double forward_ms = 0, backward_ms = 0, weight_ms = 0;
  // Fill the artificial cost by sleeping (robust on a loaded machine) or by spinning (precise on idle cores).
  bool spin = false;
  // How long a rank waits for a message or a peer before failing with DEADLINE_EXCEEDED.
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

struct ExecResult {
  double loss = 0;                              // L of the whole step
  std::vector<std::vector<float>> weight_grad;  // [p*v][h*h]  dL/dW_k of the whole step's loss L
  std::vector<std::vector<float>> bias_grad;    // [p*v][h]
  std::vector<std::vector<TimedOp>> timeline;   // [s] ops in run order, ms since the step started
  double makespan_ms = 0;                       // latest end over stages
  double bubble_rate = 0;                       // 1 - mean_s(busy_s) / makespan (busy = sum of op durations)
};

// --- Stage C ------------------------------------------------------------------------------------------

// Every message the schedule sends between two ranks, in the order of the simulated time at which it is
// sent (the end of its op under `costs`); ties by sender stage, then receiver (then stably by the sender's
// timeline). Errors of Simulate pass through.
absl::StatusOr<std::vector<Message>> MessageOrder(const Schedule& schedule, const Costs& costs);

// Runs one training step of `problem` under `schedule` on p ranks of the threads backend and returns the
// gradients, the loss and each rank's timeline. Errors: invalid schedule; problem shapes that disagree
// with the schedule (p, m, v) or with each other; a deadlock or a lost peer (DEADLINE_EXCEEDED after
// options.timeout, naming the rank and what it waited for).
absl::StatusOr<ExecResult> RunPipeline(const Schedule& schedule, const PipelineProblem& problem,
                                       const ExecutorOptions& options);

}  // namespace distlab::pipeline

#endif  // DISTLAB_LABS_PIPELINE_EXECUTOR_H_
