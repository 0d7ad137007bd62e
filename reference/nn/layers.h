// Layers with explicit backward: Linear, GELU, the MLP block, embedding (with a tied output projection)
// and softmax cross-entropy.
//
// Vocabulary: N = rows (tokens = batch x sequence), h = hidden size, f = MLP inner size (4h usually),
// V = vocabulary. Activations are [N, features] f32 tensors. Forward caches what backward needs (under
// MemCategory::kActivations); Backward(dy) adds the parameters' gradients into Parameter::grad (so several
// backward passes accumulate, as gradient accumulation needs) and returns dx.
//
// Initialization is deterministic: every weight is drawn from the counter-based stream of
// SeedFor(seed, name), so the same (seed, name) gives the same matrix on every rank and every run.
#ifndef DISTLAB_REFERENCE_NN_LAYERS_H_
#define DISTLAB_REFERENCE_NN_LAYERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference/nn/parameter.h"
#include "reference/tensor/tensor.h"

namespace distlab::nn {

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor Forward(const Tensor& x) = 0;
  virtual Tensor Backward(const Tensor& dy) = 0;
  // In forward order (the order buckets are built in reverse of).
  virtual std::vector<Parameter*> Parameters() { return {}; }
  // Drops the cached activations (to measure or to free memory between steps).
  virtual void ClearCache() {}
};

// y = x W^T + b;  W [out, in] (PyTorch layout), b [out].
// Backward: dW += dy^T x,  db += sum_rows dy,  dx = dy W.
// The two halves of the backward are also separate calls, for schedules that run them at different times
// (a zero-bubble pipeline runs dx = dy W as soon as dy arrives -- the previous stage waits for it -- and the
// weight gradient later, to fill a bubble). With several microbatches in flight, the caller keeps each
// one's input x: the layer caches only the latest.
class Linear : public Module {
 public:
  // W ~ Normal(0, init_std) (init_std <= 0 means 1/sqrt(in)), b = 0.
  Linear(std::string name, int64_t in, int64_t out, bool bias, uint64_t seed, float init_std = 0.f);
  Tensor Forward(const Tensor& x) override;
  // Forward without the cache (marks the uses as Forward does): for callers that keep each micro-batch's
  // input themselves and run BackwardInput + BackwardWeight(x, dy).
  Tensor Apply(const Tensor& x);
  // Backward(dy) == BackwardInput(dy), then BackwardWeight(the cached input, dy).
  Tensor Backward(const Tensor& dy) override;
  // dx = dy W only: reads no cache and touches no gradient.
  Tensor BackwardInput(const Tensor& dy) const;
  // dW += dy^T x, db += sum_rows dy (each parameter's GradAccumulated, as Backward), where x is the input of
  // the forward dy belongs to ([N, in], N = dy's rows).
  void BackwardWeight(const Tensor& x, const Tensor& dy);
  std::vector<Parameter*> Parameters() override;
  void ClearCache() override { x_ = Tensor(); }
  Parameter& weight() { return weight_; }
  const Parameter& weight() const { return weight_; }
  Parameter* bias() { return bias_ ? bias_.get() : nullptr; }
  const Parameter* bias() const { return bias_ ? bias_.get() : nullptr; }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  int64_t in_, out_;
  Parameter weight_;
  std::unique_ptr<Parameter> bias_;
  Tensor x_;
};

// GELU (tanh approximation), elementwise.
class Gelu : public Module {
 public:
  Tensor Forward(const Tensor& x) override;
  Tensor Backward(const Tensor& dy) override;
  // dx = dy * GELU'(x) for an explicit input x (no cache: for callers that keep several inputs in flight).
  static Tensor BackwardAt(const Tensor& x, const Tensor& dy);
  void ClearCache() override { x_ = Tensor(); }

 private:
  Tensor x_;
};

// The transformer MLP: y = fc2(GELU(fc1(x))), fc1: h -> f, fc2: f -> h (no residual; the model adds it).
class Mlp : public Module {
 public:
  Mlp(std::string name, int64_t hidden, int64_t inner, uint64_t seed, bool bias = true);
  Tensor Forward(const Tensor& x) override;
  Tensor Backward(const Tensor& dy) override;
  std::vector<Parameter*> Parameters() override;
  void ClearCache() override;
  Linear& fc1() { return fc1_; }
  Linear& fc2() { return fc2_; }

 private:
  Linear fc1_;
  Gelu gelu_;
  Linear fc2_;
};

// Token embedding E [V, h]: Forward(ids) = rows of E. Project(x) = x E^T is the tied output projection
// (logits [N, V]); both uses accumulate into the same gradient.
class Embedding {
 public:
  Embedding(std::string name, int64_t vocab, int64_t hidden, uint64_t seed, float init_std = 0.f);
  // ids: N token ids in [0, V). Returns [N, h]. Aborts on an id out of range, naming it.
  Tensor Forward(const std::vector<int32_t>& ids);
  // dE[ids[r], :] += dy[r, :].
  void Backward(const Tensor& dy);
  // The same without the cache (the caller keeps the ids of each micro-batch in flight).
  Tensor Lookup(const std::vector<int32_t>& ids);
  void BackwardAt(const std::vector<int32_t>& ids, const Tensor& dy);
  Tensor Project(const Tensor& x);
  // dE += dlogits^T x; returns dx = dlogits E.
  Tensor ProjectBackward(const Tensor& dlogits);
  Parameter& weight() { return weight_; }
  void ClearCache();

 private:
  int64_t vocab_, hidden_;
  Parameter weight_;
  std::vector<int32_t> ids_;
  Tensor x_;
};

// Mean over N rows of -log softmax(logits)[target].
class SoftmaxCrossEntropy {
 public:
  // logits [N, V]; targets: N ids in [0, V).
  float Forward(const Tensor& logits, const std::vector<int32_t>& targets);
  // dlogits = scale * (softmax - onehot) / N.
  Tensor Backward(float scale = 1.f);
  // The same without the cache: ForwardAt returns the loss and writes softmax(logits) into *probs.
  static float ForwardAt(const Tensor& logits, const std::vector<int32_t>& targets, Tensor* probs);
  static Tensor BackwardAt(const Tensor& probs, const std::vector<int32_t>& targets, float scale);
  void ClearCache() { probs_ = Tensor(); }

 private:
  Tensor probs_;
  std::vector<int32_t> targets_;
};

}  // namespace distlab::nn

#endif  // DISTLAB_REFERENCE_NN_LAYERS_H_
