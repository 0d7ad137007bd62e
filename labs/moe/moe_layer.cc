// Lab 6 (moe), stages A and C: routing, its backward, capacity and the single-rank MoE layer -- your
// implementation.
//
// Read labs/moe/moe_layer.h and notes/06-moe.md sections 1 and 3. Runtime pieces you need: nn::Linear (the
// router, no bias), nn::Mlp (the experts), tensor::Axpy, Tensor::f32().
#include "labs/moe/moe_layer.h"

#include "reference/base/status.h"

namespace distlab::moe {

// TODO(moe stage A): Route
//  1. logits must be [T, E] and 1 <= k <= E, else InvalidArgument naming the shape / k.
//  2. probs[t] = softmax(logits[t]) (subtract the row maximum first).
//  3. expert[t, 0..k) = the k largest probabilities, descending; ties go to the lower expert index.
//  4. gate[t, j] = p[e_j] / sum_l p[e_l] when normalize_gates, else p[e_j]. kept = all 1.
absl::StatusOr<Routing> Route(const Tensor& logits, int top_k, bool normalize_gates) {
  return Unimplemented("moe", "A", "Route");
}

// TODO(moe stage A): RouterBackward
//  1. dgate.size() must be T*k.
//  2. dL/dp: normalized: dp[e_j] = (dg_j - sum_l dg_l g_l) / sum_l p[e_l]; unnormalized: dp[e_j] = dg_j;
//     0 for experts not chosen.
//  3. Softmax backward: dlogits[t, i] = p_i (dp_i - sum_m p_m dp_m).
absl::StatusOr<Tensor> RouterBackward(const Routing& routing, const std::vector<float>& dgate) {
  return Unimplemented("moe", "A", "RouterBackward");
}

// TODO(moe stage C): ExpertCapacity
//  1. InvalidArgument for T < 0, E < 1, k outside [1, E].
//  2. capacity_factor <= 0: dropless, return T.
//  3. kTokens (the default): load = T; kAssignments: load = k T. x = load * capacity_factor / E (multiply
//     first, in doubles); C = ceil(x), but an x within 1e-9 * max(1, x) above an integer n gives n.
//     Ceil, not floor: T=8, E=4, factor 1.1 gives 3. And exact: T=100, E=10, factor 1.1 computes as
//     11.000000000000002 in doubles, but C = 11, not 12 (moe_layer.h lists more cases).
absl::StatusOr<int64_t> ExpertCapacity(int64_t tokens, int experts, int top_k, double capacity_factor,
                                       CapacityFormula formula) {
  return Unimplemented("moe", "C", "ExpertCapacity");
}

// TODO(moe stage C): ApplyCapacity
//  1. capacity < 0: InvalidArgument.
//  2. For each expert, its kept slots (t*k + j) in token order; when more than `capacity`:
//     kByProbability keeps the highest probs[t, e] (ties: earlier token), kByPosition the earliest tokens;
//     set kept = 0 for the rest. Gates stay as they are.
absl::Status ApplyCapacity(Routing& routing, int64_t capacity, DropPolicy policy) {
  return Unimplemented("moe", "C", "ApplyCapacity");
}

// Your state: the config, the router (nn::Linear), the experts (nn::Mlp each), and the caches Backward needs
// (x, logits, routing, each expert's slots and output rows).
struct MoeLayer::Impl {};

MoeLayer::MoeLayer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MoeLayer::~MoeLayer() = default;

// TODO(moe stage A): Create -- validate (h, f >= 1; 1 <= k <= E); build the router and experts with the
// names, seed and init_std the header gives (tests compare against layers built the same way).
absl::StatusOr<std::unique_ptr<MoeLayer>> MoeLayer::Create(const MoeConfig& config) {
  return Unimplemented("moe", "A", "MoeLayer::Create");
}

// TODO(moe stage A): Forward
//  1. x must be [T, h]. logits = router(x); routing = Route(...).
//  2. Stage C: with capacity_factor > 0, ApplyCapacity(ExpertCapacity(T, E, k, factor, capacity_formula),
//     drop_policy).
//  3. Per expert: gather the rows of its kept slots, run the expert once (skip an expert with no rows).
//  4. y = x (the residual: a fully dropped token passes through), then y[t] += gate[t, j] * out rows.
absl::StatusOr<Tensor> MoeLayer::Forward(const Tensor& x) {
  return Unimplemented("moe", "A", "MoeLayer::Forward");
}

// TODO(moe stage A): Backward
//  1. dy must be [T, h] of the last Forward; extra_dlogits null or [T, E].
//  2. dx = dy (residual). Per expert: dgate[t, j] = dy[t] . out row; expert's dy rows = gate * dy[t];
//     dx[t] += the expert's dx rows.
//  3. dlogits = RouterBackward(dgate) + extra_dlogits; dx += router.Backward(dlogits).
absl::StatusOr<Tensor> MoeLayer::Backward(const Tensor& dy, const Tensor* extra_dlogits) {
  return Unimplemented("moe", "A", "MoeLayer::Backward");
}

// TODO(moe stage A): the accessors.
const MoeConfig& MoeLayer::config() const { throw NotImplementedError("moe", "A", "MoeLayer::config"); }
const Routing& MoeLayer::routing() const { throw NotImplementedError("moe", "A", "MoeLayer::routing"); }
const Tensor& MoeLayer::logits() const { throw NotImplementedError("moe", "A", "MoeLayer::logits"); }
nn::Linear& MoeLayer::router() { throw NotImplementedError("moe", "A", "MoeLayer::router"); }
nn::Mlp& MoeLayer::expert(int e) { throw NotImplementedError("moe", "A", "MoeLayer::expert"); }
std::vector<nn::Parameter*> MoeLayer::Parameters() {
  throw NotImplementedError("moe", "A", "MoeLayer::Parameters");
}

}  // namespace distlab::moe
