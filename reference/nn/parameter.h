// A trainable parameter: its value, its gradient, and the "gradient ready" hook data parallelism needs.
//
// Readiness: a layer calls MarkUsed() each time its forward reads the parameter and GradAccumulated() each
// time its backward has added one use's contribution to `grad`. When the count of pending uses falls to
// zero the gradient is final for this step and `on_grad_ready` runs (PyTorch's post-accumulate-grad hook).
// Forward passes without a backward (evaluation, finite differences) leave uses pending; ZeroGrad() resets
// the count, so a training step starts with ZeroGrad.
// A tied weight (the embedding reused as the output projection) is used twice, so it becomes ready only
// after its second contribution -- the case a bucketed all-reduce must not get wrong.
#ifndef DISTLAB_REFERENCE_NN_PARAMETER_H_
#define DISTLAB_REFERENCE_NN_PARAMETER_H_

#include <functional>
#include <string>
#include <vector>

#include "reference/tensor/tensor.h"

namespace distlab::nn {

using tensor::MemCategory;
using tensor::Shape;
using tensor::Tensor;

class Parameter {
 public:
  // value (kParameters) and grad (kGradients), both zero-filled f32 of `shape`.
  Parameter(std::string name, Shape shape);

  const std::string& name() const { return name_; }
  Tensor value;
  Tensor grad;
  // Called with this parameter when its gradient for the step is complete (see the file comment).
  std::function<void(Parameter&)> on_grad_ready;

  void MarkUsed() { ++pending_uses_; }
  // Aborts when called more often than MarkUsed (a backward without its forward).
  void GradAccumulated();
  int pending_uses() const { return pending_uses_; }
  // grad = 0 (allocating it when it was released) and forget pending uses.
  void ZeroGrad();
  int64_t numel() const { return value.numel(); }

 private:
  std::string name_;
  int pending_uses_ = 0;
};

// Sum of numel over `params`: the model size Psi of the memory formulas.
int64_t CountParameters(const std::vector<Parameter*>& params);
void ZeroGrads(const std::vector<Parameter*>& params);

}  // namespace distlab::nn

#endif  // DISTLAB_REFERENCE_NN_PARAMETER_H_
