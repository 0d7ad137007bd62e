// Lab 6 (moe), stage B: the load-balancing loss at micro and global batch, and the z-loss -- your
// implementation.
//
// Read labs/moe/balance.h and notes/06-moe.md section 2. Runtime pieces you need: comm::Comm::AllReduce
// (f64, sum) and comm::Stream::Synchronize.
#include "labs/moe/balance.h"

#include "reference/base/status.h"

namespace distlab::moe {

// TODO(moe stage B): TokensPerExpert -- count every one of the T*k slots (kept or dropped) per expert.
std::vector<double> TokensPerExpert(const Routing& routing) {
  throw NotImplementedError("moe", "B", "TokensPerExpert");
}

// Your state: scope, E, k, the comm and stream, the global buffer (per-expert counts and the token count of
// this step), f and P of the last Compute.
struct LoadBalancingLoss::Impl {};

LoadBalancingLoss::LoadBalancingLoss(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadBalancingLoss::~LoadBalancingLoss() = default;

// TODO(moe stage B): Create -- validate (1 <= k <= E; dp and stream both set or both null).
absl::StatusOr<std::unique_ptr<LoadBalancingLoss>> LoadBalancingLoss::Create(LblScope scope, int experts,
                                                                             int top_k, comm::Comm* dp,
                                                                             comm::Stream* stream) {
  return Unimplemented("moe", "B", "LoadBalancingLoss::Create");
}

// TODO(moe stage B): Compute
//  1. Check routing's E and k, and dlogits [T, E].
//  2. f: micro scope: counts / (k T). Global scope: one all-reduce (sum) of the E + 1 numbers
//     [counts..., T] over dp (when it has more than one rank), add into the step's buffer -- with or without
//     dp, the buffer accumulates until OnOptimizerStep -- and f_i = buffer_i / (k * buffer_T). Never
//     all-reduce P.
//  3. P_i = mean over t of probs[t, i] (local). loss = coeff E sum_i f_i P_i.
//  4. dlogits[t, j] += coeff E / T * p_tj (f_j - sum_i f_i p_ti)  (f is a constant).
absl::StatusOr<double> LoadBalancingLoss::Compute(const Routing& routing, double coeff, Tensor& dlogits) {
  return Unimplemented("moe", "B", "LoadBalancingLoss::Compute");
}

// TODO(moe stage B): OnOptimizerStep -- reset the global buffer (counts and tokens) to zero.
void LoadBalancingLoss::OnOptimizerStep() { throw NotImplementedError("moe", "B", "OnOptimizerStep"); }

const std::vector<double>& LoadBalancingLoss::fractions() const {
  throw NotImplementedError("moe", "B", "LoadBalancingLoss::fractions");
}
const std::vector<double>& LoadBalancingLoss::mean_probs() const {
  throw NotImplementedError("moe", "B", "LoadBalancingLoss::mean_probs");
}

// TODO(moe stage B): ZLoss
//  1. logits [T, E], dlogits the same shape. T = 0 returns 0.
//  2. lse_t = logsumexp(logits[t]) (stable); loss = coeff * mean_t lse_t^2.
//  3. dlogits[t, i] += coeff * 2 lse_t softmax(logits[t])_i / T.
absl::StatusOr<double> ZLoss(const Tensor& logits, double coeff, Tensor& dlogits) {
  return Unimplemented("moe", "B", "ZLoss");
}

}  // namespace distlab::moe
