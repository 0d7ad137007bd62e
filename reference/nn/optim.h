// Optimizers: SGD (with momentum and weight decay) and AdamW (decoupled weight decay, bias-corrected).
//
// The update rules are also exposed as kernels over flat float ranges (SgdUpdate, AdamWUpdate) so sharded
// optimizers (ZeRO) apply exactly the same arithmetic to the slice a rank owns. Optimizer state tensors are
// counted under MemCategory::kOptimizerState: AdamW keeps m and v, 8 bytes per parameter in f32.
#ifndef DISTLAB_REFERENCE_NN_OPTIM_H_
#define DISTLAB_REFERENCE_NN_OPTIM_H_

#include <cstdint>
#include <vector>

#include "reference/nn/parameter.h"

namespace distlab::nn {

struct SgdConfig {
  float lr = 0.1f;
  float momentum = 0.f;
  float weight_decay = 0.f;  // coupled (added to the gradient), as torch.optim.SGD
};

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // decoupled: p -= lr * wd * p
};

// buf (momentum) may be null when momentum == 0.
//   g' = g + wd p;  buf = momentum buf + g' (buf = g' at step 1);  p -= lr * (momentum ? buf : g').
void SgdUpdate(const SgdConfig& cfg, int64_t step, float* p, const float* g, float* buf, int64_t n);
// step t >= 1:  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr * wd * p;  p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
void AdamWUpdate(const AdamWConfig& cfg, int64_t step, float* p, const float* g, float* m, float* v,
                 int64_t n);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter from its grad.
  virtual void Step() = 0;
  virtual int64_t step() const = 0;
  // Bytes of optimizer state held (equal to the tracker's kOptimizerState share of this optimizer).
  virtual size_t StateBytes() const = 0;
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<Parameter*> params, SgdConfig cfg);
  void Step() override;
  int64_t step() const override { return step_; }
  size_t StateBytes() const override;

 private:
  std::vector<Parameter*> params_;
  SgdConfig cfg_;
  std::vector<Tensor> momentum_;
  int64_t step_ = 0;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Parameter*> params, AdamWConfig cfg);
  void Step() override;
  int64_t step() const override { return step_; }
  size_t StateBytes() const override;

 private:
  std::vector<Parameter*> params_;
  AdamWConfig cfg_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
};

}  // namespace distlab::nn

#endif  // DISTLAB_REFERENCE_NN_OPTIM_H_
