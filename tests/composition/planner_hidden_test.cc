// Hidden tests of Lab 7 stage E: the cost model against the ledgers of real runs (stages C and D), and the
// planner against brute force -- this file enumerates the layouts itself, recomputes every formula of
// planner.h and runs its own 1F1B event simulation of each candidate's pipeline (notes/07-composition.md
// section 6).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/planner.h"
#include "tests/composition/test_util.h"

namespace distlab::composition {
namespace {

using tensor::MemCategory;
using testing::RankRun;
using testing::RunLayout;

constexpr uint64_t e = 4;

std::string Label(const Layout& l) {
  return "(" + std::to_string(l.grid.dp) + ", " + std::to_string(l.grid.pp) + ", " +
         std::to_string(l.grid.tp) + "), m " + std::to_string(l.micro_batches) + ", " + Name(l.sharding);
}

void ExpectPredictsRun(const nn::GptConfig& cfg, const Layout& layout) {
  auto runs = RunLayout(cfg, layout);
  ASSERT_OK(runs.status()) << Label(layout);
  for (size_t r = 0; r < runs->size(); ++r) {
    const RankRun& run = (*runs)[r];
    auto pred = PredictStage(cfg, layout, testing::kBatch, run.coord.pp);
    ASSERT_OK(pred.status()) << Label(layout);
    const std::string where = Label(layout) + ", rank " + std::to_string(r);
    for (Axis a : kAllAxes) {
      EXPECT_TRUE(run.ledger.of(a) == pred->of(a))
          << where << ", axis " << Name(a) << ":\n  measured  " << run.ledger.of(a).ToString()
          << "\n  predicted " << pred->of(a).ToString();
    }
    const MemoryUse& mem = run.ledger.memory;
    EXPECT_EQ(mem.current_of(MemCategory::kParameters), pred->param_bytes) << where;
    EXPECT_EQ(mem.current_of(MemCategory::kGradients), pred->grad_bytes) << where;
    EXPECT_EQ(mem.current_of(MemCategory::kOptimizerState), pred->optimizer_bytes) << where;
    const size_t peak = mem.peak_of(MemCategory::kActivations);
    EXPECT_GE(peak, pred->activation_bytes) << where << ": measured activation peak below the prediction";
    EXPECT_LE(peak, pred->activation_bytes + pred->activation_unit) << where;
  }
}

TEST(PlannerHidden, PredictsTheLedgersOfStageC) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  const nn::GptConfig cfg;
  ExpectPredictsRun(cfg, {{2, 2, 2}, 2});
  ExpectPredictsRun(cfg, {{1, 4, 2}, 4});
  nn::GptConfig tied;
  tied.tie_embeddings = true;
  ExpectPredictsRun(tied, {{1, 2, 2}, 2});
}

TEST(PlannerHidden, PredictsTheLedgersOfStageD) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  const nn::GptConfig cfg;
  ExpectPredictsRun(cfg, {{2, 2, 1}, 4, DpSharding::kZero3Reshard});
  ExpectPredictsRun(cfg, {{2, 2, 1}, 2, DpSharding::kZero3KeepGathered});
}

// ---- brute force --------------------------------------------------------------------------------------

std::vector<Layout> AllLayouts(const nn::GptConfig& cfg, int world, int64_t batch) {
  std::vector<Layout> out;
  for (int dp = 1; dp <= world; ++dp) {
    for (int pp = 1; pp <= world; ++pp) {
      for (int tp = 1; tp <= world; ++tp) {
        if (dp * pp * tp != world || batch % dp || cfg.layers % pp || cfg.heads % tp || cfg.inner % tp)
          continue;
        for (int m = 1; m <= batch / dp; ++m) {
          if ((batch / dp) % m == 0) out.push_back({{dp, pp, tp}, m});
        }
      }
    }
  }
  return out;  // already in the order dp, pp, m (tp follows)
}

// 1F1B on P stages with every F costing f and every BW b, no latency on the edges: an event simulation.
double Simulate1F1B(int P, int m, double f, double b) {
  std::vector<std::vector<std::pair<bool, int>>> ops(P);  // (is forward, micro-batch)
  for (int p = 0; p < P; ++p) {
    const int warm = std::min(P - p - 1, m);
    int nf = 0, nb = 0;
    for (; nf < warm; ++nf) ops[p].push_back({true, nf});
    while (nb < m) {
      if (nf < m) ops[p].push_back({true, nf++});
      ops[p].push_back({false, nb++});
    }
  }
  std::vector<std::vector<double>> fend(P, std::vector<double>(m, -1)), bend = fend;
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0);
  double makespan = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (int p = 0; p < P; ++p) {
      while (next[p] < ops[p].size()) {
        const auto [fwd, i] = ops[p][next[p]];
        double ready = free_at[p];
        if (fwd && p > 0) {
          if (fend[p - 1][i] < 0) break;
          ready = std::max(ready, fend[p - 1][i]);
        }
        if (!fwd && p < P - 1) {
          if (bend[p + 1][i] < 0) break;
          ready = std::max(ready, bend[p + 1][i]);
        }
        const double end = ready + (fwd ? f : b);
        (fwd ? fend : bend)[p][i] = end;
        free_at[p] = end;
        makespan = std::max(makespan, end);
        ++next[p];
        moved = true;
      }
    }
  }
  for (int p = 0; p < P; ++p) EXPECT_EQ(next[p], ops[p].size()) << "the 1F1B simulation deadlocked";
  return makespan;
}

struct Mine {
  double memory = 0, step = 0, pipeline = 0;
  double forward = 0, backward = 0;         // F_p and B_p of the slowest stage
  bool tp_intra = false, pp_intra = false;  // whether the tp and pp links are intra-node
};

// planner.h's model, recomputed from scratch (activations counted or not).
Mine Evaluate(const nn::GptConfig& cfg, const Layout& l, int64_t batch, const Cluster& c, bool activations) {
  const int D = l.grid.dp, P = l.grid.pp, T = l.grid.tp, m = l.micro_batches, world = D * P * T;
  const int64_t h = cfg.hidden, V = cfg.vocab, s = cfg.seq, Ls = cfg.layers / P;
  const int64_t n = batch / (D * m) * s;
  const double act = 4.0 * n * h;
  const Link& tp = T <= c.gpus_per_node ? c.intra : c.inter;
  const Link& dp = T * D <= c.gpus_per_node ? c.intra : c.inter;
  const Link& pp = world <= c.gpus_per_node ? c.intra : c.inter;
  Mine x;
  x.tp_intra = &tp == &c.intra, x.pp_intra = &pp == &c.intra;
  double worst = -1, f = 0, b = 0, dp_s = 0;
  for (int p = 0; p < P; ++p) {
    const int64_t psi = (p == 0 ? V * h + s * h : 0) + Ls * nn::BlockParameters(cfg, T) +
                        (p == P - 1 ? 2 * h + (cfg.tie_embeddings && P == 1 ? 0 : V * h) : 0);
    const int64_t shard = (psi + D - 1) / D;
    const double a_p = static_cast<double>(Ls * nn::BlockCacheBytes(cfg, n, T)) +
                       (p == P - 1 ? 4.0 * n * (2 * h + 1 + V) : 0);
    double mem = 8.0 * psi + 8.0 * shard;
    if (activations) mem += std::min(P - p, m) * a_p;
    x.memory = std::max(x.memory, mem);
    const double compute = 2.0 * n * psi / c.flops;
    const double tp_s = 2.0 * Ls * 2.0 * (T - 1) * (tp.alpha_s + act / (T * tp.bytes_per_s));
    const double p2p = pp.alpha_s + act / pp.bytes_per_s;
    const double fp = compute + tp_s + (p < P - 1 ? p2p : 0), bp = 2 * compute + tp_s + (p > 0 ? p2p : 0);
    if (fp + bp > worst) worst = fp + bp, f = fp, b = bp;
    if (D > 1) dp_s = std::max(dp_s, 2.0 * (D - 1) * (dp.alpha_s + 4.0 * D * shard / (D * dp.bytes_per_s)));
  }
  x.forward = f, x.backward = b;
  x.pipeline = Simulate1F1B(P, m, f, b);
  const double emb =
      cfg.tie_embeddings && P > 1 ? 2.0 * (pp.alpha_s + 4.0 * V * h / (2 * pp.bytes_per_s)) : 0;
  x.step = x.pipeline + dp_s + emb;
  return x;
}

bool Near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); }

// What ExpectMatchesBruteForce holds each candidate to (the enumeration always). The cases on the test model
// check one property each, so that a failure names what is wrong; the others check all of them.
enum Check : unsigned {
  kMicroBatchTimes = 1,  // forward_s, backward_s: F_p and B_p of the slowest stage, each axis on its link
  kPipeline = 2,         // pipeline_s: the 1F1B makespan of the candidate's own forward_s and backward_s
  kMemory = 4,           // memory_bytes: weights, gradients, optimizer state and activations in flight
  kStepAndPick = 8,      // step_s from scratch, and the pick: the first least step_s among those fitting
  kEverything = 15,
};

const char* LinkName(bool intra) { return intra ? "intra" : "inter"; }

// Returns the index the brute force picks (the first least step among those fitting).
int ExpectMatchesBruteForce(const nn::GptConfig& cfg, int world, int64_t batch, const Cluster& c,
                            unsigned checks = kEverything) {
  const std::vector<Layout> all = AllLayouts(cfg, world, batch);
  const std::vector<Layout> theirs = EnumerateLayouts(cfg, world, batch);
  EXPECT_EQ(theirs.size(), all.size()) << "EnumerateLayouts lists a different set";
  auto plan = MakePlan(cfg, world, batch, c);
  EXPECT_OK(plan.status());
  if (!plan.ok() || theirs.size() != all.size() || plan->candidates.size() != all.size()) return -1;
  int best = -1;
  std::vector<Mine> mine;
  for (size_t i = 0; i < all.size(); ++i) {
    const Layout& l = all[i];
    const Layout& t = theirs[i];
    EXPECT_TRUE(l.grid.dp == t.grid.dp && l.grid.pp == t.grid.pp && l.grid.tp == t.grid.tp &&
                l.micro_batches == t.micro_batches)
        << "entry " << i << ": expected " << Label(l) << ", got " << Label(t);
    mine.push_back(Evaluate(cfg, l, batch, c, true));
    const Candidate& x = plan->candidates[i];
    if (checks & kMicroBatchTimes) {
      const std::string links = std::string(" (links: tp ") + LinkName(mine[i].tp_intra) + "-node, pp " +
                                LinkName(mine[i].pp_intra) + "-node, nodes of " +
                                std::to_string(c.gpus_per_node) + ")";
      EXPECT_TRUE(Near(x.forward_s, mine[i].forward))
          << Label(l) << ": forward_s " << x.forward_s << ", expected F_p = " << mine[i].forward << links;
      EXPECT_TRUE(Near(x.backward_s, mine[i].backward))
          << Label(l) << ": backward_s " << x.backward_s << ", expected B_p = " << mine[i].backward << links;
    }
    if (checks & kPipeline) {
      // Against the candidate's own F and B, so that this checks the schedule alone.
      const double sim = Simulate1F1B(l.grid.pp, l.micro_batches, x.forward_s, x.backward_s);
      EXPECT_TRUE(Near(x.pipeline_s, sim))
          << Label(l) << ": pipeline_s " << x.pipeline_s << ", but 1F1B over " << l.grid.pp << " stages and "
          << l.micro_batches << " micro-batches of its own F " << x.forward_s << " and B " << x.backward_s
          << " takes " << sim << " (the warm-up and drain included)";
    }
    if (checks & kMemory) {
      EXPECT_TRUE(Near(x.memory_bytes, mine[i].memory))
          << Label(l) << ": memory " << x.memory_bytes << ", expected " << mine[i].memory
          << " (max over stages of 8 Psi_s + 8 S_s + min(P - p, m) A_p)";
    }
    if (checks & kStepAndPick) {
      EXPECT_TRUE(Near(x.step_s, mine[i].step))
          << Label(l) << ": step_s " << x.step_s << ", expected " << mine[i].step;
    }
    const bool fits = mine[i].memory <= c.memory_bytes;
    if (fits && (best < 0 || mine[i].step < mine[best].step)) best = static_cast<int>(i);
  }
  if (best >= 0) {
    std::printf("%zu layouts of %d ranks; best %s: step %.4g s, memory %.4g bytes\n", all.size(), world,
                Label(all[best]).c_str(), mine[best].step, mine[best].memory);
  }
  if (checks & kStepAndPick) {
    EXPECT_EQ(plan->best, best) << "the planner picks " << (plan->best >= 0 ? Label(all[plan->best]) : "none")
                                << ", brute force " << (best >= 0 ? Label(all[best]) : "none");
  }
  return best;
}

Cluster TwoNodes() {  // 8 ranks in nodes of 4
  Cluster c;
  c.gpus_per_node = 4;
  c.memory_bytes = 1e9;
  c.flops = 2e8;
  c.intra = {2e-6, 5e10};
  c.inter = {2e-5, 2e9};
  return c;
}

// The test model, untied and tied, on 8 ranks in nodes of 4: tp groups of up to 4 ranks stay in a node
// while every pipeline crosses nodes.
void ExpectOnTheTestModel(unsigned checks) {
  const int best = ExpectMatchesBruteForce(nn::GptConfig{}, 8, 8, TwoNodes(), checks);
  EXPECT_GE(best, 0);
  nn::GptConfig tied;
  tied.tie_embeddings = true;
  ExpectMatchesBruteForce(tied, 8, 8, TwoNodes(), checks);
}

TEST(PlannerHidden, MicroBatchTimesOnTheTestModel) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  ExpectOnTheTestModel(kMicroBatchTimes);
}

TEST(PlannerHidden, PipelineTimeIsThe1F1BMakespan) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  ExpectOnTheTestModel(kPipeline);
}

TEST(PlannerHidden, MemoryOnTheTestModel) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  ExpectOnTheTestModel(kMemory);
}

TEST(PlannerHidden, MatchesBruteForceOnTheTestModel) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  ExpectOnTheTestModel(kStepAndPick);
}

// A Llama-3-8B-sized model (untied, plain GELU MLP of 14336) on 64 GPUs in nodes of 8, 1M tokens a step.
TEST(PlannerHidden, MatchesBruteForceAtScale) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  nn::GptConfig cfg;
  cfg.vocab = 128256, cfg.hidden = 4096, cfg.heads = 32, cfg.inner = 14336, cfg.seq = 4096, cfg.layers = 32;
  Cluster c;
  c.gpus_per_node = 8;
  c.memory_bytes = 72e9;
  c.flops = 4.9e14;
  c.intra = {5e-6, 4e11};
  c.inter = {1.5e-5, 4.5e10};
  const int best = ExpectMatchesBruteForce(cfg, 64, 256, c);
  EXPECT_GE(best, 0) << "some layout of the 8B model fits in 72 GB";
}

// Memory so tight that the fastest layout by weights and optimizer alone has no room for its activations.
TEST(PlannerHidden, MemoryTightCaseCountsActivations) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  const nn::GptConfig cfg;
  Cluster c = TwoNodes();
  const std::vector<Layout> all = AllLayouts(cfg, 8, 8);
  // The fastest layout when activations are ignored, at unlimited memory; then memory just below what it
  // needs with activations, but above its weights and optimizer.
  c.memory_bytes = 1e18;
  int naive = -1;
  std::vector<Mine> with, without;
  for (size_t i = 0; i < all.size(); ++i) {
    with.push_back(Evaluate(cfg, all[i], 8, c, true));
    without.push_back(Evaluate(cfg, all[i], 8, c, false));
    if (naive < 0 || with[i].step < with[naive].step) naive = static_cast<int>(i);
  }
  ASSERT_LT(without[naive].memory, with[naive].memory);
  c.memory_bytes = (without[naive].memory + with[naive].memory) / 2;
  const int best = ExpectMatchesBruteForce(cfg, 8, 8, c);
  ASSERT_GE(best, 0);
  EXPECT_NE(best, naive) << Label(all[naive]) << " does not fit once its activations count";
}

TEST(PlannerHidden, BadInputsAreClearErrors) {
  const nn::GptConfig cfg;
  EXPECT_EQ(PredictStage(cfg, {{2, 2, 2}, 2}, 8, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PredictStage(cfg, {{1, 3, 1}, 1}, 8, 0).status().message(),
            "4 blocks do not split into 3 pipeline stages");
  EXPECT_EQ(MakePlan(cfg, 0, 8, TwoNodes()).status().code(), absl::StatusCode::kInvalidArgument);
  nn::GptConfig odd = cfg;
  odd.layers = 3, odd.heads = 3, odd.inner = 129;
  EXPECT_EQ(MakePlan(odd, 16, 8, TwoNodes()).status().code(), absl::StatusCode::kInvalidArgument)
      << "no layout of 16 ranks exists";
}

}  // namespace
}  // namespace distlab::composition
