// Lab 4 stage D (solution): the memory and communication formulas.
#include "labs/parallel/memory_model.h"

#include <string>

#include "absl/status/status.h"

namespace distlab::parallel {

int64_t ParameterCount(const TransformerShape& s) {
  const int64_t h = s.hidden;
  const int64_t kv = h * s.kv_heads / s.heads;            // k and v project to k heads of h/a each
  const int64_t attention = 2 * h * h + 2 * h * kv;       // q, o and k, v
  const int64_t mlp = (s.gated_mlp ? 3 : 2) * h * s.ffn;  // gate, up, down (or up, down)
  const int64_t per_layer = attention + mlp + 2 * h;      // + two RMSNorm weights
  const int64_t embeddings = (s.tied_embeddings ? 1 : 2) * s.vocab * h;
  return embeddings + s.layers * per_layer + h;  // + final norm
}

ModelStateBytes ZeroModelStates(double psi, int n, int stage, bool mixed_precision) {
  // Bytes per parameter: weights, gradients, optimizer state (mixed: 2, 2, 12; f32: 4, 4, 8).
  const double wp = mixed_precision ? 2 : 4, wg = mixed_precision ? 2 : 4, wo = mixed_precision ? 12 : 8;
  ModelStateBytes b{wp * psi, wg * psi, wo * psi};
  if (stage >= 1) b.optimizer /= n;
  if (stage >= 2) b.grads /= n;
  if (stage >= 3) b.params /= n;
  return b;
}

double ActivationBytesPerLayer(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, int tp) {
  const double sbh = static_cast<double>(seq) * micro_batch * shape.hidden;
  double bytes = 0;
  switch (recompute) {
    case Recompute::kNone:
      bytes = sbh * (34.0 + 5.0 * shape.heads * seq / shape.hidden);
      break;
    case Recompute::kSelective:  // recompute the attention core (the 5 a s / h term)
      bytes = sbh * 34.0;
      break;
    case Recompute::kFull:  // keep each layer's bf16 input only
      bytes = sbh * 2.0;
      break;
  }
  return bytes / tp;
}

MemoryBreakdown EstimateMemory(const TransformerShape& shape, int64_t seq, int64_t micro_batch,
                               Recompute recompute, const Parallelism& par) {
  MemoryBreakdown m;
  const double psi = static_cast<double>(ParameterCount(shape)) / (par.tp * par.pp);
  m.states = ZeroModelStates(psi, par.dp, par.zero_stage, par.mixed_precision);
  m.activations = shape.layers * ActivationBytesPerLayer(shape, seq, micro_batch, recompute, par.tp);
  return m;
}

double CommElementsPerRank(double psi, int n, int stage) {
  const double ring = static_cast<double>(n - 1) / n;
  return (stage >= 3 ? 3.0 : 2.0) * psi * ring;
}

absl::StatusOr<NoiseScale> GradientNoiseScale(const std::vector<std::vector<float>>& per_example) {
  const size_t m = per_example.size();
  if (m < 2) {
    return absl::InvalidArgumentError("the noise scale needs at least 2 per-example gradients, got " +
                                      std::to_string(m));
  }
  const size_t p = per_example[0].size();
  for (size_t i = 0; i < m; ++i) {
    if (per_example[i].empty() || per_example[i].size() != p) {
      return absl::InvalidArgumentError("per-example gradient " + std::to_string(i) + " has " +
                                        std::to_string(per_example[i].size()) + " elements, gradient 0 has " +
                                        std::to_string(p) + " (they must be equal and non-zero)");
    }
  }
  std::vector<double> mean(p, 0.0);
  for (const auto& g : per_example)
    for (size_t j = 0; j < p; ++j) mean[j] += g[j];
  double mean_sq = 0;
  for (double& x : mean) {
    x /= static_cast<double>(m);
    mean_sq += x * x;
  }
  // Sample variance summed over coordinates: m - 1 because the mean was estimated from the same examples.
  double dev = 0;
  for (const auto& g : per_example)
    for (size_t j = 0; j < p; ++j) dev += (g[j] - mean[j]) * (g[j] - mean[j]);
  NoiseScale ns;
  ns.trace_sigma = dev / static_cast<double>(m - 1);
  // |G^|^2 overestimates |G|^2 by the variance of the mean, tr(Sigma) / m.
  ns.grad_norm_sq = mean_sq - ns.trace_sigma / static_cast<double>(m);
  if (ns.grad_norm_sq <= 0) {
    return absl::FailedPreconditionError("the |G|^2 estimate is " + std::to_string(ns.grad_norm_sq) +
                                         " <= 0: " + std::to_string(m) +
                                         " examples do not resolve the gradient from its noise");
  }
  ns.b_simple = ns.trace_sigma / ns.grad_norm_sq;
  return ns;
}

}  // namespace distlab::parallel
