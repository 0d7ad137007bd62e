// Lab 6 (moe), stages A and C: routing, its backward, capacity and the single-rank MoE layer -- your
// implementation.
//
// Read labs/moe/moe_layer.h and notes/06-moe.md sections 1 and 3. Runtime pieces you need: nn::Linear (the
// router, no bias), nn::Mlp (the experts), tensor::Axpy, Tensor::f32().
#include "labs/moe/moe_layer.h"

#include "reference/base/status.h"

namespace distlab::moe {

// TODO(moe stage A): Route -- contract: moe_layer.h (Route, Routing); idea: notes/06-moe.md §1.
//   Tensor::f32() reads the logits row-major; std::exp of a large logit overflows a float.
//   Which rule of the header decides between two experts of equal probability?
absl::StatusOr<Routing> Route(const Tensor& logits, int top_k, bool normalize_gates) {
  return Unimplemented("moe", "A", "Route");
}

// TODO(moe stage A): RouterBackward -- contract: moe_layer.h (RouterBackward); idea: notes/06-moe.md §1
//   ("Backward through the gates"). The routing holds all the forward computed; no logits are needed.
//   Through which quantities does one gate depend on the logits, and which of them did top-k freeze?
absl::StatusOr<Tensor> RouterBackward(const Routing& routing, const std::vector<float>& dgate) {
  return Unimplemented("moe", "A", "RouterBackward");
}

// TODO(moe stage C): ExpertCapacity -- contract: moe_layer.h (ExpertCapacity, CapacityFormula); idea:
//   notes/06-moe.md §3. The header's rule and its four examples are exact: compute in doubles, in its order.
absl::StatusOr<int64_t> ExpertCapacity(int64_t tokens, int experts, int top_k, double capacity_factor,
                                       CapacityFormula formula) {
  return Unimplemented("moe", "C", "ExpertCapacity");
}

// TODO(moe stage C): ApplyCapacity -- contract: moe_layer.h (ApplyCapacity, DropPolicy); idea:
//   notes/06-moe.md §3. Only routing.kept changes; slot s = t*k + j is an assignment to routing.expert[s].
//   For one over-full expert, which assignments compete, and how does each policy rank them?
absl::Status ApplyCapacity(Routing& routing, int64_t capacity, DropPolicy policy) {
  return Unimplemented("moe", "C", "ApplyCapacity");
}

// Yours to define: what Create, Forward and Backward share. The accessors return references into it, valid
// until the next Forward.
struct MoeLayer::Impl {};

MoeLayer::MoeLayer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MoeLayer::~MoeLayer() = default;

// TODO(moe stage A): MoeLayer::Create -- contract: moe_layer.h (Create, the parameter list above MoeLayer).
//   Tests rebuild the layer from the names, seed and init_std given there: use exactly those.
absl::StatusOr<std::unique_ptr<MoeLayer>> MoeLayer::Create(const MoeConfig& config) {
  return Unimplemented("moe", "A", "MoeLayer::Create");
}

// TODO(moe stage A): MoeLayer::Forward -- contract: moe_layer.h (the formula of the file comment, Forward);
//   idea: notes/06-moe.md §1 (capacity, stage C: §3). Route, ExpertCapacity and ApplyCapacity are yours.
//   nn::Mlp::Forward caches its input for one Backward: run each expert once, on a gathered [R, h] block.
//   What will Backward need to find, per expert, to send each row's gradient back to its token?
absl::StatusOr<Tensor> MoeLayer::Forward(const Tensor& x) {
  return Unimplemented("moe", "A", "MoeLayer::Forward");
}

// TODO(moe stage A): MoeLayer::Backward -- contract: moe_layer.h (Backward); idea: notes/06-moe.md §1
//   ("Backward through the layer"). nn::Mlp::Backward and nn::Linear::Backward use the input of their last
//   Forward and add into Parameter::grad; tensor::Axpy adds one tensor into another.
//   Along which paths does x reach y: through the residual, the experts, the router?
absl::StatusOr<Tensor> MoeLayer::Backward(const Tensor& dy, const Tensor* extra_dlogits) {
  return Unimplemented("moe", "A", "MoeLayer::Backward");
}

// TODO(moe stage A): the accessors -- contract: moe_layer.h (they return the last Forward's state).
const MoeConfig& MoeLayer::config() const { throw NotImplementedError("moe", "A", "MoeLayer::config"); }
const Routing& MoeLayer::routing() const { throw NotImplementedError("moe", "A", "MoeLayer::routing"); }
const Tensor& MoeLayer::logits() const { throw NotImplementedError("moe", "A", "MoeLayer::logits"); }
nn::Linear& MoeLayer::router() { throw NotImplementedError("moe", "A", "MoeLayer::router"); }
nn::Mlp& MoeLayer::expert(int e) { throw NotImplementedError("moe", "A", "MoeLayer::expert"); }
std::vector<nn::Parameter*> MoeLayer::Parameters() {
  throw NotImplementedError("moe", "A", "MoeLayer::Parameters");
}

}  // namespace distlab::moe
