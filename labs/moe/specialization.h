// Lab 6 (moe), given; not graded: the specialization experiment of stage D (it runs on your layer, loss and
// statistics).
//
// A toy MoE layer learns a multi-domain regression: a token of domain d is x = c_d + noise (each domain has
// its own centre c_d, a feature a router can key on) and its target is x + A_d x (each domain has its own
// map, so an expert that sees one domain only can fit it best). Training is data parallel over n = dp ranks
// with M micro-batches per rank and step; each micro-batch holds the tokens of ONE domain (a few sequences
// of one source, as in real pre-training data), and the n*M micro-batches of a step cover every domain.
//
// The only difference between the two runs is the scope of the load-balancing loss (same coefficient):
//   micro-batch LBL: f_i of the micro-batch -- one domain must spread over all experts;
//   global-batch LBL: f_i over the whole step -- the batch must be balanced, a domain need not be.
// After training, rank 0 routes a held-out batch with every domain and reports ComputeRoutingStats.
#ifndef DISTLAB_LABS_MOE_SPECIALIZATION_H_
#define DISTLAB_LABS_MOE_SPECIALIZATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/moe/balance.h"
#include "labs/moe/routing_stats.h"

namespace distlab::moe {

struct ExperimentConfig {
  LblScope scope = LblScope::kGlobalBatch;
  double lbl_coeff = 0.1;
  int dp = 4;                 // n ranks
  int micro_batches = 2;      // M per rank and step
  int tokens_per_micro = 32;  // T
  int steps = 150;
  int domains = 4;  // D
  int experts = 4;  // E
  int top_k = 1;
  int64_t hidden = 16;
  int64_t inner = 32;
  float lr = 0.01f;
  uint64_t seed = 7;
};

struct ExperimentResult {
  RoutingStats eval;             // on the held-out batch
  double eval_loss = 0;          // mean squared error per element, held-out batch
  double final_train_loss = 0;   // mean over the last step's micro-batches and ranks
  double final_lbl = 0;          // LBL / coeff of the last step (rank 0, mean over micro-batches)
  std::vector<int> eval_domain;  // domain of each held-out token
};

absl::StatusOr<ExperimentResult> RunSpecializationExperiment(const ExperimentConfig& config);

}  // namespace distlab::moe

#endif  // DISTLAB_LABS_MOE_SPECIALIZATION_H_
