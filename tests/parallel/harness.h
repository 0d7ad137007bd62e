// Shared pieces of the Lab 4 hidden tests: dense single-process references to compare against, the TinyLM
// shapes the cases draw from the grading seed, and the words their failure messages use.
#ifndef DISTLAB_TESTS_PARALLEL_HARNESS_H_
#define DISTLAB_TESTS_PARALLEL_HARNESS_H_

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "reference/nn/model.h"
#include "reference/nn/optim.h"
#include "tools/testing/test_support.h"

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

// "TinyLM {vocab 27, hidden 5, inner 11, 2 layers, tied, seed 8}": a drawn model, in a failure message.
inline std::string Describe(const nn::TinyLMConfig& cfg) {
  std::ostringstream o;
  o << "TinyLM {vocab " << cfg.vocab << ", hidden " << cfg.hidden << ", inner " << cfg.inner << ", "
    << cfg.layers << (cfg.layers == 1 ? " layer, " : " layers, ") << (cfg.tie_embeddings ? "tied" : "untied")
    << ", seed " << cfg.seed << "}";
  return o.str();
}

// The units of zero.h, in order: embedding (V h), one per block (2 h f + f + h), the untied head (V h).
inline std::vector<int64_t> UnitSizes(const nn::TinyLMConfig& cfg) {
  std::vector<int64_t> units = {cfg.vocab * cfg.hidden};
  for (int l = 0; l < cfg.layers; ++l) units.push_back(2 * cfg.hidden * cfg.inner + cfg.inner + cfg.hidden);
  if (!cfg.tie_embeddings) units.push_back(cfg.vocab * cfg.hidden);
  return units;
}

// Where flat parameter index i (Parameters() order) lives: "layers.1.fc2.weight[17]".
inline std::string Locate(const nn::TinyLMConfig& cfg, size_t i) {
  nn::TinyLM model(cfg);
  for (nn::Parameter* p : model.Parameters()) {
    if (i < static_cast<size_t>(p->numel())) return p->name() + "[" + std::to_string(i) + "]";
    i -= static_cast<size_t>(p->numel());
  }
  return "past the end";
}

// A TinyLM drawn within the given ranges (both ends included); the model seed is drawn too.
struct TinyLMRanges {
  int64_t vocab_lo, vocab_hi, hidden_lo, hidden_hi, inner_lo, inner_hi;
  int layers_lo, layers_hi;
};
inline nn::TinyLMConfig DrawTinyLM(distlab::testing::CaseRandom& rng, const TinyLMRanges& r, bool tied) {
  nn::TinyLMConfig cfg;
  cfg.vocab = rng.Int(r.vocab_lo, r.vocab_hi);
  cfg.hidden = rng.Int(r.hidden_lo, r.hidden_hi);
  cfg.inner = rng.Int(r.inner_lo, r.inner_hi);
  cfg.layers = static_cast<int>(rng.Int(r.layers_lo, r.layers_hi));
  cfg.tie_embeddings = tied;
  cfg.seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  return cfg;
}

// Compares `got` with the single-process `want`, element by element, within tol * (1 + |want|). Returns ""
// when all agree, else the first element that does not and how many do not ("layers.0.fc1.bias[3] is
// 0.1234 where the single process has 0.1201 (tolerance ...); 7 of 341 elements differ").
inline std::string FirstDifference(const nn::TinyLMConfig& cfg, const std::vector<float>& got,
                                   const std::vector<float>& want, float tol) {
  std::ostringstream o;
  if (got.size() != want.size()) {
    o << got.size() << " parameters where the model has " << want.size();
    return o.str();
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol * (1.f + std::fabs(want[i]))) && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  o.precision(7);
  o << Locate(cfg, first) << " is " << got[first] << " where the single process has " << want[first]
    << " (tolerance " << tol << " x (1 + |value|)); " << bad << " of " << want.size() << " elements differ";
  return o.str();
}

}  // namespace distlab::parallel::testing

#endif  // DISTLAB_TESTS_PARALLEL_HARNESS_H_
