// TinyLM: the small real model the parallelism labs train.
//
//   ids [N] -> Embedding E [V, h] -> L x (x + Mlp_l(x)) -> logits [N, V] -> softmax cross-entropy
//
// The output projection is x E^T when tie_embeddings (E is used twice: the tied-weights case data parallel
// must handle), or a separate Linear head. Its pieces are public so parallel wrappers (tensor parallel,
// FSDP, pipeline stages) can drive forward and backward layer by layer.
//
// SyntheticBatch gives a deterministic, learnable task: the target of token t is (a t + c) mod V, so the
// loss falls quickly and every rank can draw its own slice of a global batch.
#ifndef DISTLAB_REFERENCE_NN_MODEL_H_
#define DISTLAB_REFERENCE_NN_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "reference/nn/layers.h"

namespace distlab::nn {

struct TinyLMConfig {
  int64_t vocab = 32;
  int64_t hidden = 16;
  int64_t inner = 64;  // MLP size f
  int layers = 2;
  bool tie_embeddings = true;
  uint64_t seed = 1;
};

struct Batch {
  std::vector<int32_t> ids;
  std::vector<int32_t> targets;
};

// Global batch `step` of `size` examples; rows [begin, end) of it when a rank takes a slice.
Batch SyntheticBatch(int64_t vocab, uint64_t seed, int64_t step, int64_t size);
Batch Slice(const Batch& batch, int64_t begin, int64_t end);

class TinyLM {
 public:
  explicit TinyLM(const TinyLMConfig& cfg);
  // Mean loss over the batch; caches activations for Backward.
  float Forward(const Batch& batch);
  // Gradients of loss_scale * loss, accumulated into every Parameter::grad (in reverse layer order).
  void Backward(float loss_scale = 1.f);
  // Forward order: embedding, block 0 (fc1.w, fc1.b, fc2.w, fc2.b), ..., head (when untied).
  std::vector<Parameter*> Parameters();
  void ZeroGrad();
  void ClearCache();

  const TinyLMConfig& config() const { return cfg_; }
  Embedding& embedding() { return embedding_; }
  Mlp& block(int l) { return *blocks_[l]; }
  Linear* head() { return head_.get(); }
  SoftmaxCrossEntropy& loss() { return loss_; }

 private:
  TinyLMConfig cfg_;
  Embedding embedding_;
  std::vector<std::unique_ptr<Mlp>> blocks_;
  std::unique_ptr<Linear> head_;
  SoftmaxCrossEntropy loss_;
};

}  // namespace distlab::nn

#endif  // DISTLAB_REFERENCE_NN_MODEL_H_
