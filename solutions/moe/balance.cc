// Lab 6 stage B, reference solution: the load-balancing loss at micro and global batch, and the z-loss.
#include "labs/moe/balance.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace distlab::moe {

std::vector<double> TokensPerExpert(const Routing& routing) {
  std::vector<double> counts(routing.experts, 0.0);
  for (int32_t e : routing.expert) counts[e] += 1;
  return counts;
}

struct LoadBalancingLoss::Impl {
  LblScope scope;
  int E, k;
  comm::Comm* dp;
  comm::Stream* stream;
  // Global scope: counts per expert summed over ranks and micro-batches of this step, then the token
  // count T summed the same way (E + 1 doubles, one all-reduce per micro-batch).
  std::vector<double> buffer;
  std::vector<double> f, P;
};

LoadBalancingLoss::LoadBalancingLoss(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadBalancingLoss::~LoadBalancingLoss() = default;

absl::StatusOr<std::unique_ptr<LoadBalancingLoss>> LoadBalancingLoss::Create(LblScope scope, int experts,
                                                                             int top_k, comm::Comm* dp,
                                                                             comm::Stream* stream) {
  if (experts < 1 || top_k < 1 || top_k > experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadBalancingLoss: need 1 <= k <= E, got E=", experts, " k=", top_k));
  }
  if ((dp == nullptr) != (stream == nullptr)) {
    return absl::InvalidArgumentError(
        "LoadBalancingLoss: pass both the data-parallel comm and its stream, or neither");
  }
  auto impl = std::make_unique<Impl>();
  impl->scope = scope, impl->E = experts, impl->k = top_k, impl->dp = dp, impl->stream = stream;
  impl->buffer.assign(experts + 1, 0.0);
  impl->f.assign(experts, 0.0);
  impl->P.assign(experts, 0.0);
  return std::make_unique<LoadBalancingLoss>(std::move(impl));
}

absl::StatusOr<double> LoadBalancingLoss::Compute(const Routing& routing, double coeff, Tensor& dlogits) {
  Impl& m = *impl_;
  const int64_t T = routing.tokens;
  const int E = m.E;
  if (routing.experts != E || routing.top_k != m.k) {
    return absl::InvalidArgumentError(absl::StrCat("LoadBalancingLoss: routing has E=", routing.experts,
                                                   " k=", routing.top_k, ", the loss was made for E=", E,
                                                   " k=", m.k));
  }
  if (dlogits.ndim() != 2 || dlogits.dim(0) != T || dlogits.dim(1) != E) {
    return absl::InvalidArgumentError(absl::StrCat("LoadBalancingLoss: dlogits must be [", T, ", ", E,
                                                   "], got ", tensor::ShapeString(dlogits.shape())));
  }

  // f_i: a count, so no gradient. Micro scope: this micro-batch. Global scope: all ranks, all micro-batches
  // of the step so far.
  std::vector<double> local = TokensPerExpert(routing);
  if (m.scope == LblScope::kMicroBatch) {
    for (int i = 0; i < E; ++i) m.f[i] = local[i] / (static_cast<double>(m.k) * T);
  } else {
    local.push_back(static_cast<double>(T));
    if (m.dp != nullptr && m.dp->size() > 1) {
      if (absl::Status s = m.dp->AllReduce(local.data(), local.data(), local.size(), comm::DataType::kF64,
                                           comm::RedOp::kSum, *m.stream);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = m.stream->Synchronize(); !s.ok()) return s;
    }
    for (int i = 0; i <= E; ++i) m.buffer[i] += local[i];
    for (int i = 0; i < E; ++i) m.f[i] = m.buffer[i] / (static_cast<double>(m.k) * m.buffer[E]);
  }

  // P_i: the local mean probability -- the only differentiable factor.
  std::fill(m.P.begin(), m.P.end(), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < E; ++i) m.P[i] += routing.probs[t * E + i];
  }
  if (T > 0) {
    for (int i = 0; i < E; ++i) m.P[i] /= T;
  }
  double sum = 0;
  for (int i = 0; i < E; ++i) sum += m.f[i] * m.P[i];
  const double loss = coeff * E * sum;

  // dLBL/dz[t, j] = coeff E / T * sum_i f_i dp_{t,i}/dz_{t,j} = coeff E / T * p_tj (f_j - sum_i f_i p_ti).
  float* dz = dlogits.f32();
  for (int64_t t = 0; t < T; ++t) {
    const float* p = routing.probs.data() + t * E;
    double fp = 0;
    for (int i = 0; i < E; ++i) fp += m.f[i] * p[i];
    for (int j = 0; j < E; ++j) dz[t * E + j] += static_cast<float>(coeff * E / T * p[j] * (m.f[j] - fp));
  }
  return loss;
}

void LoadBalancingLoss::OnOptimizerStep() { std::fill(impl_->buffer.begin(), impl_->buffer.end(), 0.0); }

const std::vector<double>& LoadBalancingLoss::fractions() const { return impl_->f; }
const std::vector<double>& LoadBalancingLoss::mean_probs() const { return impl_->P; }

absl::StatusOr<double> ZLoss(const Tensor& logits, double coeff, Tensor& dlogits) {
  if (logits.ndim() != 2 || dlogits.shape() != logits.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("ZLoss: logits [T, E] and dlogits of the same shape, got ",
                                                   tensor::ShapeString(logits.shape()), " and ",
                                                   tensor::ShapeString(dlogits.shape())));
  }
  const int64_t T = logits.dim(0), E = logits.dim(1);
  if (T == 0) return 0.0;
  const float* z = logits.f32();
  float* dz = dlogits.f32();
  double total = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* zt = z + t * E;
    const double zmax = *std::max_element(zt, zt + E);
    double s = 0;
    for (int64_t i = 0; i < E; ++i) s += std::exp(zt[i] - zmax);
    const double lse = zmax + std::log(s);
    total += lse * lse;
    // d(lse^2)/dz_i = 2 lse softmax_i.
    for (int64_t i = 0; i < E; ++i) {
      dz[t * E + i] += static_cast<float>(coeff * 2 * lse * std::exp(zt[i] - lse) / T);
    }
  }
  return coeff * total / T;
}

}  // namespace distlab::moe
