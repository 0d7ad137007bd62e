#include "reference/nn/model.h"

#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"

namespace distlab::nn {

Batch SyntheticBatch(int64_t vocab, uint64_t seed, int64_t step, int64_t size) {
  Batch b;
  const uint64_t stream = tensor::Mix64(seed * 1000003u + static_cast<uint64_t>(step));
  for (int64_t i = 0; i < size; ++i) {
    const int32_t t = static_cast<int32_t>(tensor::UniformAt(stream, static_cast<uint64_t>(i)) * vocab);
    b.ids.push_back(t);
    b.targets.push_back(static_cast<int32_t>((3 * t + 1) % vocab));
  }
  return b;
}

Batch Slice(const Batch& batch, int64_t begin, int64_t end) {
  if (begin < 0 || end < begin || end > static_cast<int64_t>(batch.ids.size())) {
    tensor::Fail("Slice", "rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") of a batch of " +
                              std::to_string(batch.ids.size()));
  }
  return Batch{{batch.ids.begin() + begin, batch.ids.begin() + end},
               {batch.targets.begin() + begin, batch.targets.begin() + end}};
}

TinyLM::TinyLM(const TinyLMConfig& cfg) : cfg_(cfg), embedding_("embed", cfg.vocab, cfg.hidden, cfg.seed) {
  for (int l = 0; l < cfg.layers; ++l) {
    blocks_.push_back(std::make_unique<Mlp>("layers." + std::to_string(l), cfg.hidden, cfg.inner, cfg.seed));
  }
  if (!cfg.tie_embeddings) {
    head_ = std::make_unique<Linear>("head", cfg.hidden, cfg.vocab, /*bias=*/false, cfg.seed);
  }
}

float TinyLM::Forward(const Batch& batch) {
  Tensor x = embedding_.Forward(batch.ids);
  for (auto& block : blocks_) {
    Tensor y = block->Forward(x);
    tensor::Axpy(1.f, x, y);  // residual: x + mlp(x)
    x = std::move(y);
  }
  Tensor logits = head_ ? head_->Forward(x) : embedding_.Project(x);
  return loss_.Forward(logits, batch.targets);
}

void TinyLM::Backward(float loss_scale) {
  Tensor dlogits = loss_.Backward(loss_scale);
  Tensor dx = head_ ? head_->Backward(dlogits) : embedding_.ProjectBackward(dlogits);
  for (int l = static_cast<int>(blocks_.size()) - 1; l >= 0; --l) {
    Tensor d = blocks_[l]->Backward(dx);
    tensor::Axpy(1.f, dx, d);  // the residual branch passes dy straight through
    dx = std::move(d);
  }
  embedding_.Backward(dx);
}

std::vector<Parameter*> TinyLM::Parameters() {
  std::vector<Parameter*> p{&embedding_.weight()};
  for (auto& block : blocks_) {
    for (Parameter* q : block->Parameters()) p.push_back(q);
  }
  if (head_) {
    for (Parameter* q : head_->Parameters()) p.push_back(q);
  }
  return p;
}

void TinyLM::ZeroGrad() { ZeroGrads(Parameters()); }

void TinyLM::ClearCache() {
  embedding_.ClearCache();
  for (auto& block : blocks_) block->ClearCache();
  if (head_) head_->ClearCache();
  loss_.ClearCache();
}

}  // namespace distlab::nn
