// Lab 6 (moe), stage B: the load-balancing loss at micro and global batch, and the z-loss -- your
// implementation.
//
// Read labs/moe/balance.h and notes/06-moe.md section 2. Runtime pieces you need: comm::Comm::AllReduce
// (f64, sum) and comm::Stream::Synchronize.
#include "labs/moe/balance.h"

#include "reference/base/status.h"

namespace distlab::moe {

// TODO(moe stage B): TokensPerExpert -- contract: balance.h (TokensPerExpert); idea: notes/06-moe.md §2.
std::vector<double> TokensPerExpert(const Routing& routing) {
  throw NotImplementedError("moe", "B", "TokensPerExpert");
}

// Yours to define: what the loss keeps between Create, its Computes and OnOptimizerStep. fractions() and
// mean_probs() return references into it.
struct LoadBalancingLoss::Impl {};

LoadBalancingLoss::LoadBalancingLoss(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadBalancingLoss::~LoadBalancingLoss() = default;

// TODO(moe stage B): LoadBalancingLoss::Create -- contract: balance.h (Create and its errors).
absl::StatusOr<std::unique_ptr<LoadBalancingLoss>> LoadBalancingLoss::Create(LblScope scope, int experts,
                                                                             int top_k, comm::Comm* dp,
                                                                             comm::Stream* stream) {
  return Unimplemented("moe", "B", "LoadBalancingLoss::Create");
}

// TODO(moe stage B): LoadBalancingLoss::Compute -- contract: balance.h (the file comment, Compute); idea:
//   notes/06-moe.md §2. dp->AllReduce may run in place (send == recv) and completes on the stream:
//   Synchronize before you read the result. dlogits is added to, not overwritten.
//   Data parallelism averages the ranks' gradients: what must each rank's loss be for that average to be
//   the gradient of the global batch's LBL?
absl::StatusOr<double> LoadBalancingLoss::Compute(const Routing& routing, double coeff, Tensor& dlogits) {
  return Unimplemented("moe", "B", "LoadBalancingLoss::Compute");
}

// TODO(moe stage B): OnOptimizerStep -- contract: balance.h (OnOptimizerStep and the global-batch buffer).
void LoadBalancingLoss::OnOptimizerStep() { throw NotImplementedError("moe", "B", "OnOptimizerStep"); }

const std::vector<double>& LoadBalancingLoss::fractions() const {
  throw NotImplementedError("moe", "B", "LoadBalancingLoss::fractions");
}
const std::vector<double>& LoadBalancingLoss::mean_probs() const {
  throw NotImplementedError("moe", "B", "LoadBalancingLoss::mean_probs");
}

// TODO(moe stage B): ZLoss -- contract: balance.h (the z-loss formula, ZLoss); idea: notes/06-moe.md §2.
//   logsumexp of large logits overflows unless you compute it stably; dlogits is added to.
absl::StatusOr<double> ZLoss(const Tensor& logits, double coeff, Tensor& dlogits) {
  return Unimplemented("moe", "B", "ZLoss");
}

}  // namespace distlab::moe
