// Lab 7 (composition), stage E (solution): the cost model and the planner.
#include "labs/composition/planner.h"

#include <algorithm>
#include <string>

#include "labs/parallel/zero.h"
#include "reference/base/status.h"

namespace distlab::composition {

namespace {

constexpr uint64_t e = 4;  // bytes per f32

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// Trainer3D::Create's checks on a layout (without a grid).
absl::Status CheckLayout(const nn::GptConfig& cfg, const Layout& l, int64_t global_batch) {
  const GridShape& g = l.grid;
  if (g.dp < 1 || g.pp < 1 || g.tp < 1) {
    return Invalid("grid sizes must be >= 1 (got dp " + std::to_string(g.dp) + ", pp " +
                   std::to_string(g.pp) + ", tp " + std::to_string(g.tp) + ")");
  }
  if (l.micro_batches < 1)
    return Invalid("micro_batches must be >= 1 (got " + std::to_string(l.micro_batches) + ")");
  if (cfg.layers % g.pp != 0) {
    return Invalid(std::to_string(cfg.layers) + " blocks do not split into " + std::to_string(g.pp) +
                   " pipeline stages");
  }
  if (global_batch % (static_cast<int64_t>(g.dp) * l.micro_batches) != 0) {
    return Invalid("a global batch of " + std::to_string(global_batch) + " sequences does not split into " +
                   std::to_string(g.dp) + " replicas x " + std::to_string(l.micro_batches) +
                   " micro-batches");
  }
  if (cfg.heads % g.tp != 0 || cfg.inner % g.tp != 0) {
    return Invalid(std::to_string(cfg.heads) + " heads and inner size " + std::to_string(cfg.inner) +
                   " are not both divisible by " + std::to_string(g.tp) + " tp ranks");
  }
  if (cfg.tie_embeddings && l.sharding != DpSharding::kZero1) {
    return Invalid(std::string("tied embeddings cannot be sharded with ") + Name(l.sharding));
  }
  return absl::OkStatus();
}

// The parameters of each unit of stage p on one tp rank (train3d.h: embed, blocks, head).
std::vector<int64_t> Units(const nn::GptConfig& cfg, const GridShape& g, int p) {
  const int64_t h = cfg.hidden, V = cfg.vocab, s = cfg.seq;
  std::vector<int64_t> u;
  if (p == 0) u.push_back(V * h + s * h);
  for (int b = 0; b < cfg.layers / g.pp; ++b) u.push_back(nn::BlockParameters(cfg, g.tp));
  if (p == g.pp - 1) u.push_back(2 * h + (cfg.tie_embeddings && g.pp == 1 ? 0 : V * h));
  return u;
}

bool Intra(int ranks, const Cluster& c) { return ranks <= c.gpus_per_node; }

}  // namespace

absl::StatusOr<StagePrediction> PredictStage(const nn::GptConfig& cfg, const Layout& layout,
                                             int64_t global_batch, int stage) {
  RETURN_IF_ERROR(CheckLayout(cfg, layout, global_batch));
  const GridShape& g = layout.grid;
  if (stage < 0 || stage >= g.pp) {
    return Invalid("stage " + std::to_string(stage) + " is outside [0, " + std::to_string(g.pp) + ")");
  }
  const int D = g.dp, P = g.pp, T = g.tp, m = layout.micro_batches, p = stage;
  const int64_t h = cfg.hidden, V = cfg.vocab, Ls = cfg.layers / P;
  const int64_t n = global_batch / (static_cast<int64_t>(D) * m) * cfg.seq;
  const uint64_t act = e * n * h;
  StagePrediction x;
  const std::vector<int64_t> units = Units(cfg, g, p);
  int64_t sum_shards = 0;
  for (int64_t u : units) x.params += u, sum_shards += parallel::ShardSize(u, D);
  const int64_t shard = parallel::ShardSize(x.params, D);

  Traffic& tp = x.traffic[static_cast<int>(Axis::kTp)];
  if (T > 1) tp.calls = 4 * m * Ls, tp.all_reduce = 4 * m * Ls * act;
  Traffic& pp = x.traffic[static_cast<int>(Axis::kPp)];
  pp.sends = pp.recvs = m * ((p < P - 1 ? 1 : 0) + (p > 0 ? 1 : 0));
  pp.bytes_sent = pp.bytes_received = pp.sends * act;
  Traffic& dp = x.traffic[static_cast<int>(Axis::kDp)];
  Traffic& emb = x.traffic[static_cast<int>(Axis::kEmb)];
  if (cfg.tie_embeddings && P > 1 && (p == 0 || p == P - 1)) emb.calls = 1, emb.all_reduce = e * V * h;

  if (layout.sharding == DpSharding::kZero1) {
    if (D > 1) dp.calls = 2, dp.reduce_scatter = dp.all_gather = e * D * shard;
    x.param_bytes = x.grad_bytes = e * x.params;
    x.optimizer_bytes = 2 * e * shard;
  } else {
    const bool reshard = layout.sharding == DpSharding::kZero3Reshard;
    if (D > 1) {
      const uint64_t gathers = reshard ? 2 * m : 1, reduces = reshard ? m : 1;
      dp.calls = (gathers + reduces) * units.size();
      dp.all_gather = gathers * e * D * sum_shards;
      dp.reduce_scatter = reduces * e * D * sum_shards;
    }
    x.param_bytes = x.grad_bytes = e * sum_shards;
    x.optimizer_bytes = 2 * e * sum_shards;
  }
  x.activation_unit = Ls * nn::BlockCacheBytes(cfg, n, T) + (p == P - 1 ? e * n * (2 * h + 1 + V) : 0);
  x.activation_bytes = static_cast<uint64_t>(std::min(P - p, m)) * x.activation_unit;
  return x;
}

std::vector<Layout> EnumerateLayouts(const nn::GptConfig& cfg, int world, int64_t global_batch) {
  std::vector<Layout> out;
  for (int dp = 1; dp <= world; ++dp) {
    if (world % dp != 0 || global_batch % dp != 0) continue;
    for (int pp = 1; pp <= world / dp; ++pp) {
      if ((world / dp) % pp != 0 || cfg.layers % pp != 0) continue;
      const int tp = world / (dp * pp);
      if (cfg.heads % tp != 0 || cfg.inner % tp != 0) continue;
      const int64_t per_replica = global_batch / dp;
      for (int m = 1; m <= per_replica; ++m) {
        if (per_replica % m == 0) out.push_back({{dp, pp, tp}, m, DpSharding::kZero1});
      }
    }
  }
  return out;
}

absl::StatusOr<Plan> MakePlan(const nn::GptConfig& cfg, int world, int64_t global_batch,
                              const Cluster& cluster) {
  if (world < 1) return Invalid("world must be >= 1 (got " + std::to_string(world) + ")");
  Plan plan;
  const std::vector<Layout> layouts = EnumerateLayouts(cfg, world, global_batch);
  if (layouts.empty()) {
    return Invalid("no layout of " + std::to_string(world) + " ranks splits " + std::to_string(cfg.layers) +
                   " blocks, " + std::to_string(cfg.heads) + " heads and a global batch of " +
                   std::to_string(global_batch) + " sequences");
  }
  double least = -1;
  for (const Layout& l : layouts) {
    const GridShape& g = l.grid;
    const int D = g.dp, P = g.pp, T = g.tp, m = l.micro_batches;
    const Link& tp_link = Intra(T, cluster) ? cluster.intra : cluster.inter;
    const Link& dp_link = Intra(T * D, cluster) ? cluster.intra : cluster.inter;
    const Link& pp_link = Intra(world, cluster) ? cluster.intra : cluster.inter;
    const int64_t n = global_batch / (static_cast<int64_t>(D) * m) * cfg.seq;
    const double act = static_cast<double>(e * n * cfg.hidden);
    const int Ls = cfg.layers / P;
    Candidate c;
    c.layout = l;
    double slowest = -1;
    for (int p = 0; p < P; ++p) {
      ASSIGN_OR_RETURN(StagePrediction s, PredictStage(cfg, l, global_batch, p));
      const double mem =
          static_cast<double>(s.param_bytes + s.grad_bytes + s.optimizer_bytes + s.activation_bytes);
      c.memory_bytes = std::max(c.memory_bytes, mem);
      const double compute = 2.0 * static_cast<double>(n) * static_cast<double>(s.params) / cluster.flops;
      const double tp_s = 2.0 * Ls * AllReduceTime(act, T, tp_link);
      const double f = compute + tp_s + (p < P - 1 ? P2PTime(act, pp_link) : 0);
      const double b = 2 * compute + tp_s + (p > 0 ? P2PTime(act, pp_link) : 0);
      if (f + b > slowest) slowest = f + b, c.forward_s = f, c.backward_s = b;
      const double shard = static_cast<double>(parallel::ShardSize(s.params, D));
      c.dp_s = std::max(c.dp_s, 2 * GatherTime(static_cast<double>(e) * D * shard, D, dp_link));
    }
    c.pipeline_s = (m + P - 1) * (c.forward_s + c.backward_s);
    c.emb_s = cfg.tie_embeddings && P > 1
                  ? AllReduceTime(static_cast<double>(e * cfg.vocab * cfg.hidden), 2, pp_link)
                  : 0;
    c.step_s = c.pipeline_s + c.dp_s + c.emb_s;
    c.fits = c.memory_bytes <= cluster.memory_bytes;
    if (least < 0 || c.memory_bytes < least) least = c.memory_bytes;
    if (c.fits && (plan.best < 0 || c.step_s < plan.candidates[plan.best].step_s)) {
      plan.best = static_cast<int>(plan.candidates.size());
    }
    plan.candidates.push_back(c);
  }
  if (plan.best < 0) {
    return absl::ResourceExhaustedError(
        "no layout fits: the smallest needs " + std::to_string(static_cast<uint64_t>(least)) +
        " bytes per rank, " + std::to_string(static_cast<uint64_t>(cluster.memory_bytes)) + " are available");
  }
  return plan;
}

}  // namespace distlab::composition
