#include "reference/nn/optim.h"

#include <cmath>

namespace distlab::nn {

void SgdUpdate(const SgdConfig& cfg, int64_t step, float* p, const float* g, float* buf, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] + cfg.weight_decay * p[i];
    if (cfg.momentum != 0.f) {
      buf[i] = step <= 1 ? d : cfg.momentum * buf[i] + d;
      d = buf[i];
    }
    p[i] -= cfg.lr * d;
  }
}

void AdamWUpdate(const AdamWConfig& cfg, int64_t step, float* p, const float* g, float* m, float* v,
                 int64_t n) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), static_cast<double>(step));
  for (int64_t i = 0; i < n; ++i) {
    m[i] = cfg.beta1 * m[i] + (1.f - cfg.beta1) * g[i];
    v[i] = cfg.beta2 * v[i] + (1.f - cfg.beta2) * g[i] * g[i];
    p[i] -= cfg.lr * cfg.weight_decay * p[i];
    const float mhat = static_cast<float>(m[i] / bc1);
    const float vhat = static_cast<float>(v[i] / bc2);
    p[i] -= cfg.lr * mhat / (std::sqrt(vhat) + cfg.eps);
  }
}

Sgd::Sgd(std::vector<Parameter*> params, SgdConfig cfg) : params_(std::move(params)), cfg_(cfg) {
  if (cfg_.momentum != 0.f) {
    for (Parameter* p : params_) {
      momentum_.emplace_back(p->value.shape(), tensor::DType::kF32, MemCategory::kOptimizerState);
    }
  }
}

void Sgd::Step() {
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter* p = params_[i];
    SgdUpdate(cfg_, step_, p->value.f32(), p->grad.f32(), momentum_.empty() ? nullptr : momentum_[i].f32(),
              p->numel());
  }
}

size_t Sgd::StateBytes() const {
  size_t b = 0;
  for (const Tensor& t : momentum_) b += t.bytes();
  return b;
}

AdamW::AdamW(std::vector<Parameter*> params, AdamWConfig cfg) : params_(std::move(params)), cfg_(cfg) {
  for (Parameter* p : params_) {
    m_.emplace_back(p->value.shape(), tensor::DType::kF32, MemCategory::kOptimizerState);
    v_.emplace_back(p->value.shape(), tensor::DType::kF32, MemCategory::kOptimizerState);
  }
}

void AdamW::Step() {
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter* p = params_[i];
    AdamWUpdate(cfg_, step_, p->value.f32(), p->grad.f32(), m_[i].f32(), v_[i].f32(), p->numel());
  }
}

size_t AdamW::StateBytes() const {
  size_t b = 0;
  for (size_t i = 0; i < m_.size(); ++i) b += m_[i].bytes() + v_[i].bytes();
  return b;
}

}  // namespace distlab::nn
