#include "reference/nn/parameter.h"

#include "reference/tensor/ops.h"

namespace distlab::nn {

Parameter::Parameter(std::string name, Shape shape)
    : value(shape, tensor::DType::kF32, MemCategory::kParameters),
      grad(shape, tensor::DType::kF32, MemCategory::kGradients),
      name_(std::move(name)) {}

void Parameter::GradAccumulated() {
  if (pending_uses_ <= 0) {
    tensor::Fail("Parameter::GradAccumulated",
                 "parameter '" + name_ + "' got a gradient contribution without a matching forward use");
  }
  if (--pending_uses_ == 0 && on_grad_ready) on_grad_ready(*this);
}

void Parameter::ZeroGrad() {
  grad.Allocate();
  tensor::Fill(grad, 0.f);
  pending_uses_ = 0;
}

int64_t CountParameters(const std::vector<Parameter*>& params) {
  int64_t n = 0;
  for (const Parameter* p : params) n += p->numel();
  return n;
}

void ZeroGrads(const std::vector<Parameter*>& params) {
  for (Parameter* p : params) p->ZeroGrad();
}

}  // namespace distlab::nn
