// Lab 6 (moe), stage B: the auxiliary load-balancing loss (LBL), micro-batch vs global-batch, and the z-loss.
//
// Vocabulary: T = tokens of this rank's micro-batch, E = experts, k = top-k, n = data-parallel ranks,
// M = gradient-accumulation micro-batches per optimizer step.
//
//   LBL = coeff * E * sum_i f_i * P_i
//   f_i = (assignments routed to expert i) / (k T)      -- counted from the router's top-k choices
//   P_i = (1/T) sum_t probs[t, i]                       -- the mean router probability
// Both sum to 1, so a perfectly balanced router scores coeff whatever E and k are. (Megatron-LM divides by
// k T as here; Hugging Face's Mixtral loss divides the counts by T only, so its balanced value is k coeff.)
//
// Micro-batch LBL takes f_i from the micro-batch alone. When a micro-batch holds a few sequences of one
// domain, that forces every domain to spread evenly over all experts and blocks specialization ("Demons in
// the Detail", Qwen 2025). Global-batch LBL (in the spirit of Megatron-LM's global aux loss) takes the counts
// summed over the n data-parallel ranks and accumulated over the micro-batches of the step so far, in a
// buffer that covers one optimizer step. Averaged over ranks, it is the LBL of the whole batch. Counts are
// routed assignments, before capacity drops any. Exactly:
//   - each Compute runs ONE AllReduce (sum) of E + 1 numbers: the E local counts and the local T, so ranks
//     with different T still give fractions that sum to 1 (with n = 1, or dp null, there is none);
//   - the buffer adds them up over the step: f_i = buffer_i / (k buffer_T) after micro-batch j holds
//     micro-batches 1..j of every rank -- also on a single rank (dp null), where global scope is the
//     gradient-accumulation batch of the step so far and differs from micro scope from the second
//     micro-batch on.
// Megatron-LM differs in two details: it all-reduces only the E counts (over the tensor-, data- and
// context-parallel group) and takes T as the local count times the group size, and across micro-batches it
// uses the accumulated counts divided by the number of micro-batches so far over the current micro-batch's
// tokens. With equal T everywhere both give this f.
//
//   z-loss = coeff * (1/T) sum_t logsumexp(logits[t, :])^2      (ST-MoE: keeps router logits small)
#ifndef DISTLAB_LABS_MOE_BALANCE_H_
#define DISTLAB_LABS_MOE_BALANCE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labs/moe/moe_layer.h"
#include "reference/comm/comm.h"

namespace distlab::moe {

enum class LblScope { kMicroBatch, kGlobalBatch };

class LoadBalancingLoss {
 public:
  // dp, stream: the data-parallel group (both null: one rank). Global scope with n ranks all-reduces.
  // Errors: InvalidArgument for E < 1, k < 1, k > E, or exactly one of dp/stream null.
  static absl::StatusOr<std::unique_ptr<LoadBalancingLoss>> Create(LblScope scope, int experts, int top_k,
                                                                   comm::Comm* dp = nullptr,
                                                                   comm::Stream* stream = nullptr);
  ~LoadBalancingLoss();

  // The LBL of this micro-batch (formula above, scaled by coeff); adds its gradient with respect to the
  // logits (routing.probs is their softmax) into dlogits [T, E]. Global scope: every rank of dp must call it
  // for each micro-batch (it runs one all-reduce of E + 1 numbers).
  // Errors: InvalidArgument when routing's E or k differ from the loss's, or dlogits is not [T, E].
  absl::StatusOr<double> Compute(const Routing& routing, double coeff, Tensor& dlogits);

  // Call once per optimizer step, after it: the next Compute is the first micro-batch of a new step (global
  // scope; nothing changes for micro scope).
  void OnOptimizerStep();

  // f and P of the last Compute ([E] each).
  const std::vector<double>& fractions() const;
  const std::vector<double>& mean_probs() const;

  struct Impl;
  explicit LoadBalancingLoss(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Assignments per expert over all T*k slots (kept or dropped) [E].
std::vector<double> TokensPerExpert(const Routing& routing);

// z-loss of logits [T, E] (formula above, with lse_t = logsumexp(logits[t, :])); adds its gradient into
// dlogits [T, E]. T = 0 gives 0. Errors: InvalidArgument when logits is not [T, E] or dlogits differs in
// shape.
absl::StatusOr<double> ZLoss(const Tensor& logits, double coeff, Tensor& dlogits);

}  // namespace distlab::moe

#endif  // DISTLAB_LABS_MOE_BALANCE_H_
