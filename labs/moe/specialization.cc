// Lab 6 (moe), given; not graded: the specialization experiment of stage D (see specialization.h).
#include "labs/moe/specialization.h"

#include <cmath>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/nn/optim.h"
#include "reference/tensor/random.h"

namespace distlab::moe {
namespace {

// The synthetic data: centres c_d [D, h] and maps A_d [D, h, h] from the seed; a token is drawn from its
// (stream, index), so every rank builds exactly its own micro-batches.
struct Domains {
  int D;
  int64_t h;
  uint64_t seed;
  std::vector<float> centre, map;
  Domains(int d, int64_t hidden, uint64_t s)
      : D(d), h(hidden), seed(s), centre(d * hidden), map(d * hidden * hidden) {
    for (size_t i = 0; i < centre.size(); ++i) centre[i] = static_cast<float>(tensor::NormalAt(seed, i));
    const double scale = 1.0 / std::sqrt(static_cast<double>(h));
    for (size_t i = 0; i < map.size(); ++i) {
      map[i] = static_cast<float>(scale * tensor::NormalAt(seed + 1, i));
    }
  }
  // T tokens of domain d from stream `batch`: x [T, h], target [T, h].
  void Draw(int d, int64_t T, uint64_t batch, Tensor& x, Tensor& target) const {
    x = Tensor({T, h});
    target = Tensor({T, h});
    for (int64_t t = 0; t < T; ++t) {
      float* xt = x.f32() + t * h;
      for (int64_t c = 0; c < h; ++c) {
        xt[c] = centre[d * h + c] + 0.5f * static_cast<float>(tensor::NormalAt(seed + 2 + batch, t * h + c));
      }
      const float* A = map.data() + d * h * h;
      float* yt = target.f32() + t * h;
      for (int64_t r = 0; r < h; ++r) {
        double acc = xt[r];
        for (int64_t c = 0; c < h; ++c) acc += A[r * h + c] * xt[c];
        yt[r] = static_cast<float>(acc);
      }
    }
  }
};

// Mean squared error per element and its gradient (scaled by `scale`).
double Mse(const Tensor& y, const Tensor& target, float scale, Tensor* dy) {
  double loss = 0;
  const int64_t N = y.numel();
  if (dy) *dy = Tensor(y.shape());
  for (int64_t i = 0; i < N; ++i) {
    const double d = y.f32()[i] - target.f32()[i];
    loss += d * d;
    if (dy) dy->f32()[i] = static_cast<float>(scale * 2 * d / N);
  }
  return loss / N;
}

}  // namespace

absl::StatusOr<ExperimentResult> RunSpecializationExperiment(const ExperimentConfig& cfg) {
  if (cfg.dp < 1 || cfg.micro_batches < 1 || cfg.tokens_per_micro < 1 || cfg.steps < 0 || cfg.domains < 1) {
    return absl::InvalidArgumentError("RunSpecializationExperiment: dp, M, T, D must be >= 1 and steps >= 0");
  }
  const Domains data(cfg.domains, cfg.hidden, cfg.seed);
  MoeConfig mc;
  mc.hidden = cfg.hidden, mc.inner = cfg.inner, mc.experts = cfg.experts, mc.top_k = cfg.top_k;
  mc.normalize_gates =
      cfg.top_k > 1;  // top-1 with a renormalised gate would give the router no task gradient
  mc.seed = cfg.seed;

  ExperimentResult result;
  std::mutex mu;
  const int n = cfg.dp, M = cfg.micro_batches;
  auto statuses = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<MoeLayer> layer, MoeLayer::Create(mc));
    ASSIGN_OR_RETURN(std::unique_ptr<LoadBalancingLoss> lbl,
                     LoadBalancingLoss::Create(cfg.scope, cfg.experts, cfg.top_k, &comm, &stream));
    std::vector<nn::Parameter*> params = layer->Parameters();
    nn::AdamWConfig adam;
    adam.lr = cfg.lr, adam.weight_decay = 0.f;
    nn::AdamW opt(params, adam);
    double last_loss = 0, last_lbl = 0;
    for (int step = 0; step < cfg.steps; ++step) {
      nn::ZeroGrads(params);
      last_loss = last_lbl = 0;
      for (int m = 0; m < M; ++m) {
        // Micro-batch (rank, m) of this step holds one domain; the n*M micro-batches cycle over all domains.
        const int slot = rank * M + m;
        const int d = (slot + step) % cfg.domains;
        Tensor x, target, dy;
        data.Draw(d, cfg.tokens_per_micro, static_cast<uint64_t>(step) * n * M + slot, x, target);
        ASSIGN_OR_RETURN(Tensor y, layer->Forward(x));
        last_loss += Mse(y, target, 1.f / M, &dy) / M;
        Tensor dlogits({cfg.tokens_per_micro, cfg.experts});
        ASSIGN_OR_RETURN(double aux, lbl->Compute(layer->routing(), cfg.lbl_coeff / M, dlogits));
        last_lbl += aux / (cfg.lbl_coeff / M);
        RETURN_IF_ERROR(layer->Backward(dy, &dlogits).status());
      }
      // Data parallel: average the gradients over the ranks (one flat all-reduce), then step.
      std::vector<float> flat;
      for (nn::Parameter* p : params) flat.insert(flat.end(), p->grad.f32(), p->grad.f32() + p->numel());
      RETURN_IF_ERROR(comm.AllReduce(flat.data(), flat.data(), flat.size(), comm::DataType::kF32,
                                     comm::RedOp::kAvg, stream));
      RETURN_IF_ERROR(stream.Synchronize());
      size_t off = 0;
      for (nn::Parameter* p : params) {
        std::copy_n(flat.data() + off, p->numel(), p->grad.f32());
        off += p->numel();
      }
      opt.Step();
      lbl->OnOptimizerStep();
    }
    double sum_loss = last_loss;
    RETURN_IF_ERROR(comm.AllReduce(&sum_loss, &sum_loss, 1, comm::DataType::kF64, comm::RedOp::kAvg, stream));
    RETURN_IF_ERROR(stream.Synchronize());
    if (rank != 0) return absl::OkStatus();

    // Held-out evaluation on rank 0: 64 tokens of every domain.
    const int64_t per = 64;
    Tensor x({per * cfg.domains, cfg.hidden}), target({per * cfg.domains, cfg.hidden});
    std::vector<int> domain;
    for (int d = 0; d < cfg.domains; ++d) {
      Tensor xd, td;
      data.Draw(d, per, 1000000 + d, xd, td);
      std::copy_n(xd.f32(), xd.numel(), x.f32() + d * per * cfg.hidden);
      std::copy_n(td.f32(), td.numel(), target.f32() + d * per * cfg.hidden);
      domain.insert(domain.end(), per, d);
    }
    ASSIGN_OR_RETURN(Tensor y, layer->Forward(x));
    ASSIGN_OR_RETURN(RoutingStats stats, ComputeRoutingStats(layer->routing(), domain, cfg.domains));
    std::lock_guard<std::mutex> lock(mu);
    result.eval = std::move(stats);
    result.eval_loss = Mse(y, target, 1.f, nullptr);
    result.final_train_loss = sum_loss;
    result.final_lbl = last_lbl / M;
    result.eval_domain = std::move(domain);
    return absl::OkStatus();
  });
  RETURN_IF_ERROR(comm::FirstError(statuses));
  return result;
}

}  // namespace distlab::moe
