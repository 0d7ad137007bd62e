// Helpers of the Lab 6 tests: a hand-made Routing, a dense per-token MoE reference, seeded tensors, and
// what the seeded cases need to describe a drawn input and its first difference.
#ifndef DISTLAB_TESTS_MOE_TEST_UTIL_H_
#define DISTLAB_TESTS_MOE_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "labs/moe/moe_layer.h"
#include "reference/tensor/random.h"

namespace distlab::moe::testutil {

inline Tensor RandomTensor(tensor::Shape shape, uint64_t seed, float std = 1.f) {
  Tensor t(shape);
  tensor::FillNormal(t, seed, std);
  return t;
}

// A routing from explicit probabilities and choices (gates = normalised chosen probabilities).
inline Routing MakeRouting(int64_t T, int E, int k, std::vector<float> probs, std::vector<int32_t> expert) {
  Routing r;
  r.tokens = T, r.experts = E, r.top_k = k, r.normalized = true;
  r.probs = std::move(probs);
  r.expert = std::move(expert);
  r.gate.resize(T * k);
  r.kept.assign(T * k, 1);
  for (int64_t t = 0; t < T; ++t) {
    double s = 0;
    for (int j = 0; j < k; ++j) s += r.probs[t * E + r.expert[t * k + j]];
    for (int j = 0; j < k; ++j)
      r.gate[t * k + j] = static_cast<float>(r.probs[t * E + r.expert[t * k + j]] / s);
  }
  return r;
}

// A seeded random routing: softmax of random logits, top-k by probability.
inline Routing RandomRouting(int64_t T, int E, int k, uint64_t seed) {
  std::vector<float> probs(T * E);
  std::vector<int32_t> expert(T * k);
  for (int64_t t = 0; t < T; ++t) {
    double s = 0;
    for (int i = 0; i < E; ++i) s += probs[t * E + i] = std::exp(2.0 * tensor::NormalAt(seed, t * E + i));
    for (int i = 0; i < E; ++i) probs[t * E + i] = static_cast<float>(probs[t * E + i] / s);
    std::vector<int32_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return probs[t * E + a] > probs[t * E + b]; });
    for (int j = 0; j < k; ++j) expert[t * k + j] = order[j];
  }
  return MakeRouting(T, E, k, probs, expert);
}

inline double GeluRef(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

// y = W x + b for one row; W [out, in].
inline std::vector<double> LinearRef(const Tensor& W, const Tensor* b, const std::vector<double>& x) {
  const int64_t out = W.dim(0), in = W.dim(1);
  std::vector<double> y(out, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    double acc = b ? b->Get(o) : 0.0;
    for (int64_t i = 0; i < in; ++i) acc += W.Get(o * in + i) * x[i];
    y[o] = acc;
  }
  return y;
}

// Expert e of `layer` applied to one row, in double.
inline std::vector<double> ExpertRef(MoeLayer& layer, int e, const std::vector<double>& x) {
  nn::Mlp& m = layer.expert(e);
  const Tensor* b1 = m.fc1().bias() ? &m.fc1().bias()->value : nullptr;
  const Tensor* b2 = m.fc2().bias() ? &m.fc2().bias()->value : nullptr;
  std::vector<double> h = LinearRef(m.fc1().weight().value, b1, x);
  for (double& v : h) v = GeluRef(v);
  return LinearRef(m.fc2().weight().value, b2, h);
}

inline std::vector<double> Row(const Tensor& x, int64_t t) {
  const int64_t h = x.dim(1);
  std::vector<double> r(h);
  for (int64_t c = 0; c < h; ++c) r[c] = x.Get(t * h + c);
  return r;
}

// Its arguments printed one after another, as an ostream prints them.
template <typename... A>
std::string Str(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}

// "[a b c]".
template <typename T>
std::string List(const std::vector<T>& v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? " " : "") << +v[i];
  o << "]";
  return o.str();
}

// The first index i in [0, n) where got(i) and want(i) differ by more than atol + rtol * |want(i)| (a NaN
// always differs), with both values; index -1 when none does. A seeded case reports this one element and
// the input that produced it, not the whole expected array.
struct Mismatch {
  int64_t index = -1;
  double got = 0, want = 0;
  explicit operator bool() const { return index >= 0; }
};

inline Mismatch FirstMismatch(int64_t n, const std::function<double(int64_t)>& got,
                              const std::function<double(int64_t)>& want, double atol, double rtol = 0) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = got(i), w = want(i);
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) return {i, g, w};
  }
  return {};
}

// The smallest gap between neighbours among the k + 1 largest of `row` (the k largest when k = E): a
// perturbation smaller than half of it changes neither the top-k set nor its order.
inline double TopKMargin(std::vector<double> row, int k) {
  std::sort(row.begin(), row.end(), std::greater<double>());
  double m = HUGE_VAL;
  for (int j = 0; j < k && j + 1 < static_cast<int>(row.size()); ++j) m = std::min(m, row[j] - row[j + 1]);
  return m;
}

// The k experts of the largest `probs` (ties: lower index first), by descending probability.
inline std::vector<int> TopK(const std::vector<double>& probs, int k) {
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  order.resize(k);
  return order;
}

// softmax of one row, in double.
inline std::vector<double> SoftmaxRef(std::vector<double> z) {
  const double zmax = *std::max_element(z.begin(), z.end());
  double s = 0;
  for (double& v : z) s += (v = std::exp(v - zmax));
  for (double& v : z) v /= s;
  return z;
}

}  // namespace distlab::moe::testutil

#endif  // DISTLAB_TESTS_MOE_TEST_UTIL_H_
