// Lab 6 stages A and C, reference solution: routing, its backward, capacity, the single-rank MoE layer.
#include "labs/moe/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "reference/tensor/ops.h"

namespace distlab::moe {
namespace {

absl::Status CheckTopK(int experts, int top_k) {
  if (experts < 1) return absl::InvalidArgumentError(absl::StrCat("need E >= 1 experts, got ", experts));
  if (top_k < 1 || top_k > experts) {
    return absl::InvalidArgumentError(absl::StrCat("top-k must be in [1, E=", experts, "], got k=", top_k));
  }
  return absl::OkStatus();
}

}  // namespace

// ----- Stage A: routing -----

absl::StatusOr<Routing> Route(const Tensor& logits, int top_k, bool normalize_gates) {
  if (logits.ndim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Route: logits must be [T, E], got ", tensor::ShapeString(logits.shape())));
  }
  const int64_t T = logits.dim(0);
  const int E = static_cast<int>(logits.dim(1));
  if (absl::Status s = CheckTopK(E, top_k); !s.ok()) return s;

  Routing r;
  r.tokens = T, r.experts = E, r.top_k = top_k, r.normalized = normalize_gates;
  r.probs.resize(T * E);
  r.expert.resize(T * top_k);
  r.gate.resize(T * top_k);
  r.kept.assign(T * top_k, 1);
  const float* z = logits.f32();
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    // Softmax with the row maximum subtracted: exp never overflows.
    const float* zt = z + t * E;
    float* pt = r.probs.data() + t * E;
    const float zmax = *std::max_element(zt, zt + E);
    double sum = 0;
    for (int i = 0; i < E; ++i) sum += (pt[i] = std::exp(zt[i] - zmax));
    for (int i = 0; i < E; ++i) pt[i] = static_cast<float>(pt[i] / sum);

    // Top-k by descending probability; ties go to the lower expert index (a stable, reproducible choice).
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int32_t a, int32_t b) { return pt[a] > pt[b] || (pt[a] == pt[b] && a < b); });
    double chosen = 0;
    for (int j = 0; j < top_k; ++j) chosen += pt[order[j]];
    for (int j = 0; j < top_k; ++j) {
      r.expert[t * top_k + j] = order[j];
      r.gate[t * top_k + j] = normalize_gates ? static_cast<float>(pt[order[j]] / chosen) : pt[order[j]];
    }
  }
  return r;
}

absl::StatusOr<Tensor> RouterBackward(const Routing& routing, const std::vector<float>& dgate) {
  const int64_t T = routing.tokens;
  const int E = routing.experts, k = routing.top_k;
  if (static_cast<int64_t>(dgate.size()) != T * k) {
    return absl::InvalidArgumentError(
        absl::StrCat("RouterBackward: dgate holds ", dgate.size(), " values, expected T*k = ", T * k));
  }
  Tensor dlogits({T, E});
  float* dz = dlogits.f32();
  std::vector<double> dp(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* p = routing.probs.data() + t * E;
    const int32_t* e = routing.expert.data() + t * k;
    const float* g = routing.gate.data() + t * k;
    const float* dg = dgate.data() + t * k;
    std::fill(dp.begin(), dp.end(), 0.0);
    if (routing.normalized) {
      // g_j = p_{e_j} / S, S = sum_l p_{e_l}:  dL/dp_{e_j} = (dg_j - sum_l dg_l g_l) / S.
      double S = 0, dot = 0;
      for (int j = 0; j < k; ++j) S += p[e[j]], dot += dg[j] * g[j];
      for (int j = 0; j < k; ++j) dp[e[j]] += (dg[j] - dot) / S;
    } else {
      for (int j = 0; j < k; ++j) dp[e[j]] += dg[j];
    }
    // Softmax backward: dz_i = p_i (dp_i - sum_m p_m dp_m).
    double pdp = 0;
    for (int i = 0; i < E; ++i) pdp += p[i] * dp[i];
    for (int i = 0; i < E; ++i) dz[t * E + i] = static_cast<float>(p[i] * (dp[i] - pdp));
  }
  return dlogits;
}

// ----- Stage C: capacity -----

absl::StatusOr<int64_t> ExpertCapacity(int64_t tokens, int experts, int top_k, double capacity_factor,
                                       CapacityFormula formula) {
  if (tokens < 0) return absl::InvalidArgumentError(absl::StrCat("ExpertCapacity: T = ", tokens, " < 0"));
  if (absl::Status s = CheckTopK(experts, top_k); !s.ok()) return s;
  if (capacity_factor <= 0) return tokens;  // dropless
  // kTokens sizes an expert for its share of the tokens, kAssignments for its share of the k T assignments.
  const double load = formula == CapacityFormula::kAssignments ? static_cast<double>(top_k) * tokens : tokens;
  const double exact = load * capacity_factor / experts;
  // ceil, forgiving the rounding error of factors like 1.1 that have no exact binary value.
  double c = std::ceil(exact);
  if (c - 1 >= exact - 1e-9 * std::max(1.0, exact)) c -= 1;
  return static_cast<int64_t>(c);
}

absl::Status ApplyCapacity(Routing& routing, int64_t capacity, DropPolicy policy) {
  if (capacity < 0)
    return absl::InvalidArgumentError(absl::StrCat("ApplyCapacity: capacity ", capacity, " < 0"));
  const int64_t T = routing.tokens;
  const int E = routing.experts, k = routing.top_k;
  std::vector<std::vector<int64_t>> slots(E);  // slot s = t*k + j, in token order
  for (int64_t s = 0; s < T * k; ++s) {
    if (routing.kept[s]) slots[routing.expert[s]].push_back(s);
  }
  for (int e = 0; e < E; ++e) {
    auto& q = slots[e];
    if (static_cast<int64_t>(q.size()) <= capacity) continue;
    if (policy == DropPolicy::kByProbability) {
      std::stable_sort(q.begin(), q.end(), [&](int64_t a, int64_t b) {
        return routing.probs[(a / k) * E + e] > routing.probs[(b / k) * E + e];
      });
    }
    for (size_t i = capacity; i < q.size(); ++i) routing.kept[q[i]] = 0;
  }
  return absl::OkStatus();
}

// ----- The layer -----

struct MoeLayer::Impl {
  MoeConfig config;
  nn::Linear router;
  std::vector<std::unique_ptr<nn::Mlp>> experts;
  // Caches of the last Forward.
  Tensor x, logits;
  Routing routing;
  std::vector<std::vector<int64_t>> slots;  // per expert: the kept slots t*k+j it ran on, in token order
  std::vector<Tensor> out;                  // per expert: its output rows [slots[e].size(), h]

  explicit Impl(const MoeConfig& c)
      : config(c), router("moe.router", c.hidden, c.experts, /*bias=*/false, c.seed, 0.02f) {
    for (int e = 0; e < c.experts; ++e) {
      experts.push_back(
          std::make_unique<nn::Mlp>("moe.expert." + std::to_string(e), c.hidden, c.inner, c.seed));
    }
  }
};

MoeLayer::MoeLayer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MoeLayer::~MoeLayer() = default;

absl::StatusOr<std::unique_ptr<MoeLayer>> MoeLayer::Create(const MoeConfig& config) {
  if (config.hidden < 1 || config.inner < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoeLayer: need h >= 1 and f >= 1, got h=", config.hidden, " f=", config.inner));
  }
  if (absl::Status s = CheckTopK(config.experts, config.top_k); !s.ok()) return s;
  return std::make_unique<MoeLayer>(std::make_unique<Impl>(config));
}

absl::StatusOr<Tensor> MoeLayer::Forward(const Tensor& x) {
  Impl& m = *impl_;
  const int64_t h = m.config.hidden;
  if (x.ndim() != 2 || x.dim(1) != h) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoeLayer::Forward: x must be [T, ", h, "], got ", tensor::ShapeString(x.shape())));
  }
  const int64_t T = x.dim(0);
  const int E = m.config.experts, k = m.config.top_k;
  m.x = x;
  m.logits = m.router.Forward(x);  // [T, E]
  auto routed = Route(m.logits, k, m.config.normalize_gates);
  if (!routed.ok()) return routed.status();
  m.routing = std::move(routed).value();
  if (m.config.capacity_factor > 0) {
    auto cap = ExpertCapacity(T, E, k, m.config.capacity_factor, m.config.capacity_formula);
    if (!cap.ok()) return cap.status();
    if (absl::Status s = ApplyCapacity(m.routing, *cap, m.config.drop_policy); !s.ok()) return s;
  }

  // Dispatch: each expert's kept slots, in token order.
  m.slots.assign(E, {});
  m.out.assign(E, Tensor());
  for (int64_t s = 0; s < T * k; ++s) {
    if (m.routing.kept[s]) m.slots[m.routing.expert[s]].push_back(s);
  }
  // y starts as the residual: a token whose every slot was dropped leaves the layer as it came in.
  Tensor y = x;
  const float* xs = x.f32();
  float* ys = y.f32();
  for (int e = 0; e < E; ++e) {
    const auto& q = m.slots[e];
    if (q.empty()) continue;
    Tensor rows({static_cast<int64_t>(q.size()), h});
    for (size_t r = 0; r < q.size(); ++r) std::copy_n(xs + (q[r] / k) * h, h, rows.f32() + r * h);
    m.out[e] = m.experts[e]->Forward(rows);
    // Combine: y[t] += gate[t, j] * Expert_e(x[t]).
    const float* o = m.out[e].f32();
    for (size_t r = 0; r < q.size(); ++r) {
      const float g = m.routing.gate[q[r]];
      float* yt = ys + (q[r] / k) * h;
      for (int64_t c = 0; c < h; ++c) yt[c] += g * o[r * h + c];
    }
  }
  return y;
}

absl::StatusOr<Tensor> MoeLayer::Backward(const Tensor& dy, const Tensor* extra_dlogits) {
  Impl& m = *impl_;
  const int64_t h = m.config.hidden, T = m.routing.tokens;
  const int E = m.config.experts, k = m.config.top_k;
  if (!m.x.allocated() || dy.ndim() != 2 || dy.dim(0) != T || dy.dim(1) != h) {
    return absl::InvalidArgumentError(absl::StrCat("MoeLayer::Backward: dy must be [", T, ", ", h,
                                                   "] of the last Forward, got ",
                                                   tensor::ShapeString(dy.shape())));
  }
  if (extra_dlogits &&
      (extra_dlogits->ndim() != 2 || extra_dlogits->dim(0) != T || extra_dlogits->dim(1) != E)) {
    return absl::InvalidArgumentError(absl::StrCat("MoeLayer::Backward: extra_dlogits must be [", T, ", ", E,
                                                   "], got ", tensor::ShapeString(extra_dlogits->shape())));
  }
  Tensor dx = dy;  // the residual's share
  const float* dys = dy.f32();
  float* dxs = dx.f32();
  std::vector<float> dgate(T * k, 0.f);
  for (int e = 0; e < E; ++e) {
    const auto& q = m.slots[e];
    if (q.empty()) continue;
    const float* o = m.out[e].f32();
    Tensor dout({static_cast<int64_t>(q.size()), h});
    float* d = dout.f32();
    for (size_t r = 0; r < q.size(); ++r) {
      const float* dyt = dys + (q[r] / k) * h;
      const float g = m.routing.gate[q[r]];
      double dot = 0;
      for (int64_t c = 0; c < h; ++c) dot += dyt[c] * o[r * h + c], d[r * h + c] = g * dyt[c];
      dgate[q[r]] = static_cast<float>(dot);  // dL/dgate[t, j] = dy[t] . Expert_e(x[t])
    }
    Tensor dxe = m.experts[e]->Backward(dout);
    const float* de = dxe.f32();
    for (size_t r = 0; r < q.size(); ++r) {
      float* dxt = dxs + (q[r] / k) * h;
      for (int64_t c = 0; c < h; ++c) dxt[c] += de[r * h + c];
    }
  }
  auto dlogits = RouterBackward(m.routing, dgate);
  if (!dlogits.ok()) return dlogits.status();
  if (extra_dlogits) tensor::Axpy(1.f, *extra_dlogits, *dlogits);
  Tensor dxr = m.router.Backward(*dlogits);
  tensor::Axpy(1.f, dxr, dx);
  return dx;
}

const MoeConfig& MoeLayer::config() const { return impl_->config; }
const Routing& MoeLayer::routing() const { return impl_->routing; }
const Tensor& MoeLayer::logits() const { return impl_->logits; }
nn::Linear& MoeLayer::router() { return impl_->router; }
nn::Mlp& MoeLayer::expert(int e) { return *impl_->experts.at(e); }

std::vector<nn::Parameter*> MoeLayer::Parameters() {
  std::vector<nn::Parameter*> params = impl_->router.Parameters();
  for (auto& e : impl_->experts) {
    for (nn::Parameter* p : e->Parameters()) params.push_back(p);
  }
  return params;
}

}  // namespace distlab::moe
