// Lab 7 (composition), stage E: the cost model and the planner. Read notes/07-composition.md section 6.
//
// PredictStage is the ledger of section 4 as a formula: what one rank of stage p moves per axis in one step
// and holds after it, for every DpSharding. The hidden tests hold it equal to the ledgers of real runs
// (stages C and D). MakePlan enumerates the layouts of a world, predicts each one's memory and step time
// with an alpha-beta model of the links, and picks the fastest that fits.
//
// Vocabulary as in train3d.h: D, P, T, m, B, N = B / (D m) s rows per micro-batch, L_s = L / P,
// Psi_s(p) = the parameters one rank of stage p holds, S = ShardSize(numel, D) (Lab 4). Bytes are f32.
//
// The time model (every formula is pinned; the hidden tests recompute it):
//   ring times over n ranks of a link (0 when n == 1), bytes = payload S as comm::Stats counts it:
//     AllReduceTime(S, n) = 2 (n - 1) (alpha + S / (n beta))
//     GatherTime(S, n)    =   (n - 1) (alpha + S / (n beta))     (an all-gather or a reduce-scatter)
//     P2PTime(S)          =  alpha + S / beta
//   links: a node is G = gpus_per_node consecutive ranks. A group is charged the intra-node link iff the
//     ranks it occupies fit in one node, else the inter-node link; the model counts a dp group as occupying
//     the T D ranks of its tp and dp axes, and a pipeline (pp and emb) the whole world.
//   per micro-batch on stage p, with a = 4 N h the bytes of one activation:
//     F_p = 2 N Psi_s(p) / flops + 2 L_s AllReduceTime(a, T, tp link) + [p < P-1] P2PTime(a, pp link)
//     B_p = 4 N Psi_s(p) / flops + 2 L_s AllReduceTime(a, T, tp link) + [p > 0]   P2PTime(a, pp link)
//   (the sender pays the message: this runtime's Send returns when the receiver has it).
//     pipeline_s = the makespan of Lab 5's 1F1B (fused backward, nothing charged on the edges) with every
//                  stage charged the slowest stage's F_p and B_p
//     dp_s       = max_p 2 GatherTime(4 D S_s(p), D, dp link)          (ZeRO-1: one RS + one AG; 0 if D = 1)
//     emb_s      = AllReduceTime(4 V h, 2, emb link) if tied and P > 1, else 0
//     step_s     = pipeline_s + dp_s + emb_s
//   memory of a rank of stage p (ZeRO-1) = everything PredictStage counts it holding (its four byte
//     counts); a candidate's memory is the max over its stages, and it fits when that is <= memory_bytes.
// Left out (the note says why): overlap of the dp reduction with the backward, the optimizer's time,
// interleaving, recomputation, latency on the pipeline's dependency edges.
#ifndef DISTLAB_LABS_COMPOSITION_PLANNER_H_
#define DISTLAB_LABS_COMPOSITION_PLANNER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/composition/ledger.h"
#include "labs/composition/train3d.h"
#include "reference/nn/transformer.h"

namespace distlab::composition {

struct Link {
  double alpha_s = 0;         // latency per message, seconds
  double bytes_per_s = 1e12;  // bandwidth beta
};

struct Cluster {
  int gpus_per_node = 8;    // G
  double memory_bytes = 0;  // per rank
  double flops = 1e12;      // per rank, sustained
  Link intra, inter;
};

// The ring times above (given).
inline double AllReduceTime(double bytes, int n, const Link& link) {
  return n <= 1 ? 0 : 2.0 * (n - 1) * (link.alpha_s + bytes / (n * link.bytes_per_s));
}
inline double GatherTime(double bytes, int n, const Link& link) {
  return n <= 1 ? 0 : (n - 1) * (link.alpha_s + bytes / (n * link.bytes_per_s));
}
inline double P2PTime(double bytes, const Link& link) { return link.alpha_s + bytes / link.bytes_per_s; }

// One rank of stage `stage`: traffic per axis of one step (exactly what MeasureLedger reads: calls and
// payload bytes by kind, sends and receives) and memory after the step (parameters, gradients, optimizer
// state) and in flight: activation_bytes = A_p times the most micro-batches stage p holds between their F
// and their BW under Lab 5's 1F1B (the measured peak lies in [activation_bytes, activation_bytes + A_p]),
//   A_p = L_s BlockCacheBytes(cfg, N, T) + [p = P-1] 4 N (2h + 1 + V)  (the head's cache).
// ZeRO-1, ZeRO-3 reshard and keep:
//   ZeRO-1   dp 1 RS + 1 AG of 4 D S_s; params 4 Psi_s, grads 4 Psi_s, optimizer 8 S_s
//   reshard  per unit u: 2m AG + m RS of 4 D S_u; params 4 sum S_u, grads 4 sum S_u, optimizer 8 sum S_u
//   keep     per unit u: 1 AG + 1 RS of 4 D S_u; memory as reshard
// InvalidArgument as Trainer3D::Create for a layout it would refuse, and for a stage outside [0, P).
struct StagePrediction {
  std::array<Traffic, kNumAxes> traffic;  // by Axis
  int64_t params = 0;                     // Psi_s: parameters of the rank (its tp shard of the stage)
  uint64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  uint64_t activation_bytes = 0;
  uint64_t activation_unit = 0;  // A_p
  const Traffic& of(Axis a) const { return traffic[static_cast<int>(a)]; }
};
absl::StatusOr<StagePrediction> PredictStage(const nn::GptConfig& cfg, const Layout& layout,
                                             int64_t global_batch, int stage);

// Every ZeRO-1 layout of `world` ranks the trainer accepts: (dp, pp, tp) with dp pp tp = world, L % pp == 0,
// heads % tp == 0, inner % tp == 0, global_batch % dp == 0, and every m >= 1 dividing global_batch / dp;
// ordered by dp, then pp, then m, ascending (tp follows from dp and pp).
std::vector<Layout> EnumerateLayouts(const nn::GptConfig& cfg, int world, int64_t global_batch);

struct Candidate {
  Layout layout;
  double memory_bytes = 0;  // max over stages
  bool fits = false;
  // F_p and B_p of the slowest stage (the largest F_p + B_p; ties: the lowest p), which every stage is
  // charged.
  double forward_s = 0, backward_s = 0;
  double pipeline_s = 0, dp_s = 0, emb_s = 0, step_s = 0;
};

struct Plan {
  std::vector<Candidate> candidates;  // one per EnumerateLayouts entry, in its order
  int best = -1;  // index of the fitting candidate with the least step_s (ties: the first)
};

// InvalidArgument when world < 1 or no layout exists ("no layout of 6 ranks splits 4 blocks, 8 heads, ...");
// ResourceExhausted when none fits, naming the least memory any candidate needs and memory_bytes.
absl::StatusOr<Plan> MakePlan(const nn::GptConfig& cfg, int world, int64_t global_batch,
                              const Cluster& cluster);

}  // namespace distlab::composition

#endif  // DISTLAB_LABS_COMPOSITION_PLANNER_H_
