// Shared pieces of the Lab 4 hidden tests: dense single-process references to compare against.
#ifndef DISTLAB_TESTS_PARALLEL_HARNESS_H_
#define DISTLAB_TESTS_PARALLEL_HARNESS_H_

#include <vector>

#include "reference/nn/model.h"
#include "reference/nn/optim.h"

namespace distlab::parallel::testing {

// All parameters of `model`, concatenated in Parameters() order.
inline std::vector<float> Flatten(nn::TinyLM& model) {
  std::vector<float> out;
  for (nn::Parameter* p : model.Parameters()) {
    const std::vector<float> v = p->value.ToVector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Trains one TinyLM on the whole global batch of every step (the single-process reference).
inline std::vector<float> TrainDense(const nn::TinyLMConfig& cfg, int steps, int64_t batch,
                                     uint64_t data_seed, const nn::AdamWConfig& adam) {
  nn::TinyLM model(cfg);
  nn::AdamW opt(model.Parameters(), adam);
  for (int step = 0; step < steps; ++step) {
    model.ZeroGrad();
    model.Forward(nn::SyntheticBatch(cfg.vocab, data_seed, step, batch));
    model.Backward();
    opt.Step();
  }
  return Flatten(model);
}

// Rank r's rows of global batch `step` split evenly over n ranks.
inline nn::Batch RankBatch(const nn::TinyLMConfig& cfg, uint64_t data_seed, int step, int64_t batch, int rank,
                           int n) {
  const int64_t per = batch / n;
  return nn::Slice(nn::SyntheticBatch(cfg.vocab, data_seed, step, batch), rank * per, (rank + 1) * per);
}

}  // namespace distlab::parallel::testing

#endif  // DISTLAB_TESTS_PARALLEL_HARNESS_H_
