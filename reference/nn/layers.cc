#include "reference/nn/layers.h"

#include <algorithm>
#include <cmath>

#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"

namespace distlab::nn {

using tensor::DType;
using tensor::Fail;
using tensor::ShapeString;

namespace {
void CheckRows(const Tensor& x, int64_t cols, const std::string& who) {
  if (x.ndim() != 2 || x.dim(1) != cols) {
    Fail(who, "expects [N, " + std::to_string(cols) + "], got " + ShapeString(x.shape()));
  }
}
}  // namespace

// ----- Linear -----

Linear::Linear(std::string name, int64_t in, int64_t out, bool bias, uint64_t seed, float init_std)
    : in_(in), out_(out), weight_(name + ".weight", {out, in}) {
  const float std = init_std > 0.f ? init_std : 1.f / std::sqrt(static_cast<float>(std::max<int64_t>(in, 1)));
  tensor::FillNormal(weight_.value, tensor::SeedFor(seed, weight_.name().c_str()), std);
  if (bias) bias_ = std::make_unique<Parameter>(name + ".bias", Shape{out});
}

Tensor Linear::Forward(const Tensor& x) {
  CheckRows(x, in_, "Linear(" + weight_.name() + ")::Forward");
  x_ = x;
  return Apply(x);
}

Tensor Linear::Apply(const Tensor& x) {
  CheckRows(x, in_, "Linear(" + weight_.name() + ")::Apply");
  Tensor y({x.dim(0), out_});
  tensor::Gemm(false, true, 1.f, x, weight_.value, 0.f, y);  // [N, in] x [out, in]^T
  weight_.MarkUsed();
  if (bias_) {
    tensor::AddRowBias(bias_->value, y);
    bias_->MarkUsed();
  }
  return y;
}

Tensor Linear::Backward(const Tensor& dy) {
  CheckRows(dy, out_, "Linear(" + weight_.name() + ")::Backward");
  if (!x_.allocated() || x_.dim(0) != dy.dim(0)) {
    Fail("Linear(" + weight_.name() + ")::Backward",
         "no cached input of " + std::to_string(dy.dim(0)) + " rows: call Forward first");
  }
  // dx first: a data-parallel hook may start communicating the weight's gradient as soon as it is ready.
  Tensor dx = BackwardInput(dy);
  BackwardWeight(x_, dy);
  return dx;
}

Tensor Linear::BackwardInput(const Tensor& dy) const {
  CheckRows(dy, out_, "Linear(" + weight_.name() + ")::BackwardInput");
  return tensor::MatMul(dy, weight_.value);  // [N, out] x [out, in]
}

void Linear::BackwardWeight(const Tensor& x, const Tensor& dy) {
  CheckRows(dy, out_, "Linear(" + weight_.name() + ")::BackwardWeight");
  CheckRows(x, in_, "Linear(" + weight_.name() + ")::BackwardWeight");
  if (x.dim(0) != dy.dim(0)) {
    Fail("Linear(" + weight_.name() + ")::BackwardWeight",
         "x has " + std::to_string(x.dim(0)) + " rows but dy has " + std::to_string(dy.dim(0)));
  }
  if (bias_) {
    tensor::SumRowsInto(dy, bias_->grad);
    bias_->GradAccumulated();
  }
  tensor::Gemm(true, false, 1.f, dy, x, 1.f, weight_.grad);  // [out, N] x [N, in]
  weight_.GradAccumulated();
}

std::vector<Parameter*> Linear::Parameters() {
  std::vector<Parameter*> p{&weight_};
  if (bias_) p.push_back(bias_.get());
  return p;
}

// ----- GELU -----

Tensor Gelu::Forward(const Tensor& x) {
  x_ = x;
  Tensor y(x.shape());
  tensor::GeluForward(x, y);
  return y;
}

Tensor Gelu::Backward(const Tensor& dy) {
  if (!x_.allocated() || x_.shape() != dy.shape()) {
    Fail("Gelu::Backward", "no cached input of shape " + ShapeString(dy.shape()) + ": call Forward first");
  }
  return BackwardAt(x_, dy);
}

Tensor Gelu::BackwardAt(const Tensor& x, const Tensor& dy) {
  if (x.shape() != dy.shape()) {
    Fail("Gelu::BackwardAt",
         "x " + ShapeString(x.shape()) + " and dy " + ShapeString(dy.shape()) + " differ");
  }
  Tensor dx(dy.shape());
  tensor::GeluBackward(x, dy, dx);
  return dx;
}

// ----- MLP -----

Mlp::Mlp(std::string name, int64_t hidden, int64_t inner, uint64_t seed, bool bias)
    : fc1_(name + ".fc1", hidden, inner, bias, seed), fc2_(name + ".fc2", inner, hidden, bias, seed) {}

Tensor Mlp::Forward(const Tensor& x) { return fc2_.Forward(gelu_.Forward(fc1_.Forward(x))); }

Tensor Mlp::Backward(const Tensor& dy) { return fc1_.Backward(gelu_.Backward(fc2_.Backward(dy))); }

std::vector<Parameter*> Mlp::Parameters() {
  std::vector<Parameter*> p = fc1_.Parameters();
  for (Parameter* q : fc2_.Parameters()) p.push_back(q);
  return p;
}

void Mlp::ClearCache() {
  fc1_.ClearCache();
  gelu_.ClearCache();
  fc2_.ClearCache();
}

// ----- Embedding -----

Embedding::Embedding(std::string name, int64_t vocab, int64_t hidden, uint64_t seed, float init_std)
    : vocab_(vocab), hidden_(hidden), weight_(name + ".weight", {vocab, hidden}) {
  const float std =
      init_std > 0.f ? init_std : 1.f / std::sqrt(static_cast<float>(std::max<int64_t>(hidden, 1)));
  tensor::FillNormal(weight_.value, tensor::SeedFor(seed, weight_.name().c_str()), std);
}

Tensor Embedding::Forward(const std::vector<int32_t>& ids) {
  Tensor y = Lookup(ids);
  ids_ = ids;
  return y;
}

Tensor Embedding::Lookup(const std::vector<int32_t>& ids) {
  Tensor y({static_cast<int64_t>(ids.size()), hidden_});
  const float* e = weight_.value.f32();
  float* py = y.f32();
  for (size_t r = 0; r < ids.size(); ++r) {
    if (ids[r] < 0 || ids[r] >= vocab_) {
      Fail("Embedding::Forward", "token id " + std::to_string(ids[r]) + " at row " + std::to_string(r) +
                                     " is outside the vocabulary [0, " + std::to_string(vocab_) + ")");
    }
    std::copy(e + ids[r] * hidden_, e + (ids[r] + 1) * hidden_, py + r * hidden_);
  }
  weight_.MarkUsed();
  return y;
}

void Embedding::Backward(const Tensor& dy) {
  CheckRows(dy, hidden_, "Embedding::Backward");
  if (static_cast<int64_t>(ids_.size()) != dy.dim(0)) {
    Fail("Embedding::Backward", "dy has " + std::to_string(dy.dim(0)) + " rows but the last Forward saw " +
                                    std::to_string(ids_.size()) + " ids");
  }
  BackwardAt(ids_, dy);
}

void Embedding::BackwardAt(const std::vector<int32_t>& ids, const Tensor& dy) {
  CheckRows(dy, hidden_, "Embedding::BackwardAt");
  if (static_cast<int64_t>(ids.size()) != dy.dim(0)) {
    Fail("Embedding::BackwardAt",
         "dy has " + std::to_string(dy.dim(0)) + " rows for " + std::to_string(ids.size()) + " ids");
  }
  float* g = weight_.grad.f32();
  const float* pdy = dy.f32();
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t c = 0; c < hidden_; ++c) g[ids[r] * hidden_ + c] += pdy[r * hidden_ + c];
  }
  weight_.GradAccumulated();
}

Tensor Embedding::Project(const Tensor& x) {
  CheckRows(x, hidden_, "Embedding::Project");
  x_ = x;
  Tensor logits({x.dim(0), vocab_});
  tensor::Gemm(false, true, 1.f, x, weight_.value, 0.f, logits);  // [N, h] x [V, h]^T
  weight_.MarkUsed();
  return logits;
}

Tensor Embedding::ProjectBackward(const Tensor& dlogits) {
  CheckRows(dlogits, vocab_, "Embedding::ProjectBackward");
  if (!x_.allocated() || x_.dim(0) != dlogits.dim(0)) {
    Fail("Embedding::ProjectBackward", "no cached input: call Project first");
  }
  Tensor dx = tensor::MatMul(dlogits, weight_.value);              // [N, V] x [V, h]
  tensor::Gemm(true, false, 1.f, dlogits, x_, 1.f, weight_.grad);  // [V, N] x [N, h]
  weight_.GradAccumulated();
  return dx;
}

void Embedding::ClearCache() {
  ids_.clear();
  x_ = Tensor();
}

// ----- Softmax cross-entropy -----

float SoftmaxCrossEntropy::Forward(const Tensor& logits, const std::vector<int32_t>& targets) {
  const float loss = ForwardAt(logits, targets, &probs_);
  targets_ = targets;
  return loss;
}

float SoftmaxCrossEntropy::ForwardAt(const Tensor& logits, const std::vector<int32_t>& targets,
                                     Tensor* probs) {
  if (logits.ndim() != 2 || logits.dim(0) != static_cast<int64_t>(targets.size())) {
    Fail("SoftmaxCrossEntropy::Forward",
         "logits " + ShapeString(logits.shape()) + " for " + std::to_string(targets.size()) + " targets");
  }
  const int64_t n = logits.dim(0), v = logits.dim(1);
  *probs = Tensor(logits.shape());
  const float* pl = logits.f32();
  float* pp = probs->f32();
  double loss = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] < 0 || targets[r] >= v) {
      Fail("SoftmaxCrossEntropy::Forward", "target " + std::to_string(targets[r]) + " at row " +
                                               std::to_string(r) + " is outside [0, " + std::to_string(v) +
                                               ")");
    }
    // Subtract the row max so exp never overflows (log-sum-exp trick).
    float mx = pl[r * v];
    for (int64_t c = 1; c < v; ++c) mx = std::max(mx, pl[r * v + c]);
    double sum = 0;
    for (int64_t c = 0; c < v; ++c) {
      pp[r * v + c] = std::exp(pl[r * v + c] - mx);
      sum += pp[r * v + c];
    }
    for (int64_t c = 0; c < v; ++c) pp[r * v + c] = static_cast<float>(pp[r * v + c] / sum);
    loss += -(pl[r * v + targets[r]] - mx - std::log(sum));
  }
  return n == 0 ? 0.f : static_cast<float>(loss / n);
}

Tensor SoftmaxCrossEntropy::Backward(float scale) {
  if (!probs_.allocated()) Fail("SoftmaxCrossEntropy::Backward", "call Forward first");
  return BackwardAt(probs_, targets_, scale);
}

Tensor SoftmaxCrossEntropy::BackwardAt(const Tensor& probs, const std::vector<int32_t>& targets,
                                       float scale) {
  if (!probs.allocated() || probs.dim(0) != static_cast<int64_t>(targets.size())) {
    Fail("SoftmaxCrossEntropy::BackwardAt",
         "probs " + ShapeString(probs.shape()) + " for " + std::to_string(targets.size()) + " targets");
  }
  Tensor d = probs;
  const int64_t n = d.dim(0), v = d.dim(1);
  float* pd = d.f32();
  for (int64_t r = 0; r < n; ++r) pd[r * v + targets[r]] -= 1.f;
  if (n > 0) tensor::Scale(d, scale / static_cast<float>(n));
  return d;
}

}  // namespace distlab::nn
