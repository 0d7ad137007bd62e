// Hidden tests of Lab 7 stage E: the cost model against the ledgers of real runs (stages C and D), and the
// planner against brute force -- this file enumerates the layouts itself, recomputes every formula of
// planner.h and runs its own 1F1B event simulation of each candidate's pipeline (notes/07-composition.md
// section 6). Every case draws its inputs from the grading seed: the layouts and seeds of the runs whose
// ledgers it predicts, and the world, the batch and the cluster (node size, flops, links, memory) it plans.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/planner.h"
#include "tests/composition/test_util.h"

namespace distlab::composition {
namespace {

using tensor::MemCategory;
using testing::Again;
using testing::CaseRandom;
using testing::RankRun;
using testing::Training;

constexpr uint64_t e = 4;

std::string Label(const Layout& l) {
  return "(" + std::to_string(l.grid.dp) + ", " + std::to_string(l.grid.pp) + ", " +
         std::to_string(l.grid.tp) + "), m " + std::to_string(l.micro_batches) + ", " + Name(l.sharding);
}

void ExpectPredictsRun(const Training& t) {
  auto runs = testing::RunLayout(t);
  ASSERT_OK(runs.status()) << t.Label() << Again();
  for (size_t r = 0; r < runs->size(); ++r) {
    const RankRun& run = (*runs)[r];
    auto pred = PredictStage(t.cfg, t.layout, testing::kBatch, run.coord.pp);
    ASSERT_OK(pred.status()) << t.Label() << ", stage " << run.coord.pp << Again();
    const std::string where = t.Label() + ", B " + std::to_string(testing::kBatch) + ", rank " +
                              std::to_string(r) + " (stage " + std::to_string(run.coord.pp) + ")";
    for (Axis a : kAllAxes) {
      EXPECT_TRUE(run.ledger.of(a) == pred->of(a))
          << where << ", axis " << Name(a) << ": the run's ledger is " << run.ledger.of(a).ToString()
          << "; the prediction's " << testing::Differences(pred->of(a), run.ledger.of(a)) << " differ"
          << Again();
    }
    const MemoryUse& mem = run.ledger.memory;
    EXPECT_EQ(pred->param_bytes, mem.current_of(MemCategory::kParameters))
        << where << ": param_bytes, against the run's parameter bytes after a step" << Again();
    EXPECT_EQ(pred->grad_bytes, mem.current_of(MemCategory::kGradients))
        << where << ": grad_bytes, against the run's gradient bytes after a step" << Again();
    EXPECT_EQ(pred->optimizer_bytes, mem.current_of(MemCategory::kOptimizerState))
        << where << ": optimizer_bytes, against the run's optimizer bytes after a step" << Again();
    const size_t peak = mem.peak_of(MemCategory::kActivations);
    EXPECT_GE(peak, pred->activation_bytes)
        << where << ": the run's activation peak is below activation_bytes (" << pred->activation_bytes
        << " = " << static_cast<double>(pred->activation_bytes) / pred->activation_unit << " A_p)" << Again();
    EXPECT_LE(peak, pred->activation_bytes + pred->activation_unit)
        << where << ": the run's activation peak is above activation_bytes + activation_unit" << Again();
  }
}

Training DrawTraining(CaseRandom& rng, const std::vector<GridShape>& grids, DpSharding mode, bool tied,
                      std::vector<int> ms = {}) {
  Training t;
  t.cfg.tie_embeddings = tied;
  const GridShape grid = rng.Pick(grids);
  std::vector<int> allowed;
  for (int m : testing::MicroBatchesOf(grid)) {
    if (ms.empty() || std::find(ms.begin(), ms.end(), m) != ms.end()) allowed.push_back(m);
  }
  t.layout = {grid, rng.Pick(allowed), mode};
  testing::DrawSeeds(rng, &t);
  return t;
}

std::vector<GridShape> Grids(int world, bool (*keep)(const GridShape&)) {
  std::vector<GridShape> out;
  for (const GridShape& g : testing::ShapesOf(world)) {
    if (keep(g)) out.push_back(g);
  }
  return out;
}

// Two untied layouts of 8 ranks (the first with m = 4 or 8 micro-batches, dp <= 2) and a tied one of 4 ranks
// over several stages.
TEST(PlannerHidden, PredictsTheLedgersOfStageC) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectPredictsRun(DrawTraining(rng, Grids(8, [](const GridShape& g) { return g.dp <= 2; }),
                                 DpSharding::kZero1, false, {4, 8}));
  ExpectPredictsRun(DrawTraining(rng, testing::ShapesOf(8), DpSharding::kZero1, false));
  ExpectPredictsRun(
      DrawTraining(rng, Grids(4, [](const GridShape& g) { return g.pp > 1; }), DpSharding::kZero1, true));
}

// Reshard with m = 4 on (2, 2, 1) or (2, 1, 2); keep-gathered on any layout of 4 ranks with dp > 1.
TEST(PlannerHidden, PredictsTheLedgersOfStageD) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTrainer);
  CaseRandom rng;
  ExpectPredictsRun(DrawTraining(rng, Grids(4, [](const GridShape& g) { return g.dp == 2; }),
                                 DpSharding::kZero3Reshard, false, {4}));
  ExpectPredictsRun(DrawTraining(rng, Grids(4, [](const GridShape& g) { return g.dp > 1; }),
                                 DpSharding::kZero3KeepGathered, false));
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
                            const std::string& inputs, unsigned checks = kEverything) {
  const std::vector<Layout> all = AllLayouts(cfg, world, batch);
  const std::vector<Layout> theirs = EnumerateLayouts(cfg, world, batch);
  EXPECT_EQ(theirs.size(), all.size()) << inputs << ": EnumerateLayouts lists a different set" << Again();
  auto plan = MakePlan(cfg, world, batch, c);
  EXPECT_OK(plan.status()) << inputs << Again();
  if (!plan.ok() || theirs.size() != all.size() || plan->candidates.size() != all.size()) return -1;
  int best = -1;
  std::vector<Mine> mine;
  for (size_t i = 0; i < all.size(); ++i) {
    const Layout& l = all[i];
    const Layout& t = theirs[i];
    EXPECT_TRUE(l.grid.dp == t.grid.dp && l.grid.pp == t.grid.pp && l.grid.tp == t.grid.tp &&
                l.micro_batches == t.micro_batches)
        << inputs << ": EnumerateLayouts' entry " << i << " is " << Label(t) << ", expected " << Label(l)
        << Again();
    mine.push_back(Evaluate(cfg, l, batch, c, true));
    const Candidate& x = plan->candidates[i];
    if (checks & kMicroBatchTimes) {
      const std::string links = std::string(" (links: tp ") + LinkName(mine[i].tp_intra) + "-node, pp " +
                                LinkName(mine[i].pp_intra) + "-node, nodes of " +
                                std::to_string(c.gpus_per_node) + ")";
      EXPECT_TRUE(Near(x.forward_s, mine[i].forward))
          << inputs << ", " << Label(l) << ": forward_s " << x.forward_s
          << ", expected F_p = " << mine[i].forward << links << Again();
      EXPECT_TRUE(Near(x.backward_s, mine[i].backward))
          << inputs << ", " << Label(l) << ": backward_s " << x.backward_s
          << ", expected B_p = " << mine[i].backward << links << Again();
    }
    if (checks & kPipeline) {
      // Against the candidate's own F and B, so that this checks the schedule alone.
      const double sim = Simulate1F1B(l.grid.pp, l.micro_batches, x.forward_s, x.backward_s);
      EXPECT_TRUE(Near(x.pipeline_s, sim))
          << inputs << ", " << Label(l) << ": pipeline_s " << x.pipeline_s << ", but 1F1B over " << l.grid.pp
          << " stages and " << l.micro_batches << " micro-batches of its own F " << x.forward_s << " and B "
          << x.backward_s << " takes " << sim << " (the warm-up and drain included)" << Again();
    }
    if (checks & kMemory) {
      EXPECT_TRUE(Near(x.memory_bytes, mine[i].memory))
          << inputs << ", " << Label(l) << ": memory " << x.memory_bytes << ", expected " << mine[i].memory
          << " (max over stages of 8 Psi_s + 8 S_s + min(P - p, m) A_p)" << Again();
    }
    if (checks & kStepAndPick) {
      EXPECT_TRUE(Near(x.step_s, mine[i].step)) << inputs << ", " << Label(l) << ": step_s " << x.step_s
                                                << ", expected " << mine[i].step << Again();
    }
    const bool fits = mine[i].memory <= c.memory_bytes;
    if (fits && (best < 0 || mine[i].step < mine[best].step)) best = static_cast<int>(i);
  }
  if (best >= 0) {
    std::printf("%zu layouts of %d ranks; best %s: step %.4g s, memory %.4g bytes\n", all.size(), world,
                Label(all[best]).c_str(), mine[best].step, mine[best].memory);
  }
  if (checks & kStepAndPick) {
    EXPECT_EQ(plan->best, best) << inputs << ": the planner picks "
                                << (plan->best >= 0 && plan->best < static_cast<int>(all.size())
                                        ? Label(all[plan->best])
                                        : "none")
                                << ", brute force " << (best >= 0 ? Label(all[best]) : "none") << Again();
  }
  return best;
}

// A planning problem: `world` ranks in nodes of c.gpus_per_node, B = batch sequences a step, the cluster.
struct Problem {
  int world = 8;
  int64_t batch = 8;
  Cluster c;
  // "8 ranks in nodes of 4, B 8, flops 2e+08/s, intra 2e-06 s + 5e+10 B/s, inter 2e-05 s + 2e+09 B/s, memory
  // 1e+09 B"
  std::string Label() const {
    std::ostringstream out;
    out << std::setprecision(4) << world << " ranks in nodes of " << c.gpus_per_node << ", B " << batch
        << ", flops " << c.flops << "/s, intra " << c.intra.alpha_s << " s + " << c.intra.bytes_per_s
        << " B/s, inter " << c.inter.alpha_s << " s + " << c.inter.bytes_per_s << " B/s, memory "
        << c.memory_bytes << " B";
    return out.str();
  }
};

double LogUniform(CaseRandom& rng, double lo, double hi) {
  return std::exp(rng.Real(std::log(lo), std::log(hi)));
}

// The test model's problems: 8 or 16 ranks in nodes of 2 or 4 (so tp groups of up to a node stay in it while
// every pipeline crosses nodes), B 8 or 16, flops and links drawn around TwoNodes' (2e8 flops, intra 2e-6 s
// and 5e10 B/s, inter 2e-5 s and 2e9 B/s), memory 1e9 (everything fits).
Problem DrawTestProblem(CaseRandom& rng) {
  Problem p;
  p.world = rng.Pick(std::vector<int>{8, 16});
  p.batch = rng.Pick(std::vector<int64_t>{8, 16});
  p.c.gpus_per_node = rng.Pick(std::vector<int>{2, 4});
  p.c.memory_bytes = 1e9;
  p.c.flops = LogUniform(rng, 1e8, 1e9);
  p.c.intra = {LogUniform(rng, 5e-7, 5e-6), LogUniform(rng, 1e10, 1e11)};
  p.c.inter = {LogUniform(rng, 5e-6, 5e-5), LogUniform(rng, 1e9, 1e10)};
  return p;
}

// The test model, untied and tied, on a drawn problem.
void ExpectOnTheTestModel(unsigned checks) {
  CaseRandom rng;
  const Problem p = DrawTestProblem(rng);
  const int best =
      ExpectMatchesBruteForce(nn::GptConfig{}, p.world, p.batch, p.c, "untied, " + p.Label(), checks);
  EXPECT_GE(best, 0) << p.Label() << ": brute force finds no layout that fits" << Again();
  nn::GptConfig tied;
  tied.tie_embeddings = true;
  ExpectMatchesBruteForce(tied, p.world, p.batch, p.c, "tied, " + p.Label(), checks);
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

// A Llama-3-8B-sized model (untied, plain GELU MLP of 14336) on 32 or 64 GPUs in nodes of 8, B 128 or 256
// sequences of 4096 tokens; flops, links and memory drawn around an H100's (4.9e14 flops, NVLink 5e-6 s and
// 4e11 B/s, the network 1.5e-5 s and 4.5e10 B/s, 72 GB), the memory raised where no layout would fit.
TEST(PlannerHidden, MatchesBruteForceAtScale) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  CaseRandom rng;
  nn::GptConfig cfg;
  cfg.vocab = 128256, cfg.hidden = 4096, cfg.heads = 32, cfg.inner = 14336, cfg.seq = 4096, cfg.layers = 32;
  Problem p;
  p.world = rng.Pick(std::vector<int>{32, 64});
  p.batch = rng.Pick(std::vector<int64_t>{128, 256});
  p.c.gpus_per_node = 8;
  p.c.memory_bytes = rng.Real(48e9, 96e9);
  p.c.flops = LogUniform(rng, 2.5e14, 1e15);
  p.c.intra = {LogUniform(rng, 2e-6, 1e-5), LogUniform(rng, 2e11, 9e11)};
  p.c.inter = {LogUniform(rng, 5e-6, 3e-5), LogUniform(rng, 2.5e10, 1e11)};
  double least = -1;
  for (const Layout& l : AllLayouts(cfg, p.world, p.batch)) {
    const double mem = Evaluate(cfg, l, p.batch, p.c, true).memory;
    if (least < 0 || mem < least) least = mem;
  }
  if (least > p.c.memory_bytes) {
    std::printf("no layout fits in %.4g B: memory raised\n", p.c.memory_bytes);
    p.c.memory_bytes = least * rng.Real(1.05, 1.5);
  }
  const int best = ExpectMatchesBruteForce(cfg, p.world, p.batch, p.c, "the 8B model, " + p.Label());
  EXPECT_GE(best, 0) << p.Label() << ": brute force finds no layout of the 8B model that fits" << Again();
}

// Memory so tight that the fastest layout by weights and optimizer alone has no room for its activations.
// On a drawn test-model problem (drawn again, up to 20 times, until some layout fits that memory; else the
// fixed one of 8 ranks in nodes of 4).
TEST(PlannerHidden, MemoryTightCaseCountsActivations) {
  PRIOR_WORK_OR_RETURN(testing::prior::kPlanner);
  CaseRandom rng;
  const nn::GptConfig cfg;
  Problem p;
  int naive = -1;
  std::vector<Layout> all;
  for (int attempt = 0; attempt <= 20; ++attempt) {
    if (attempt < 20) {
      p = DrawTestProblem(rng);
    } else {
      p = Problem();
      p.c.gpus_per_node = 4;
      p.c.flops = 2e8;
      p.c.intra = {2e-6, 5e10};
      p.c.inter = {2e-5, 2e9};
    }
    all = AllLayouts(cfg, p.world, p.batch);
    // The fastest layout at unlimited memory; then memory just below what it needs with activations, but
    // above its weights and optimizer.
    p.c.memory_bytes = 1e18;
    naive = -1;
    std::vector<Mine> with, without;
    for (size_t i = 0; i < all.size(); ++i) {
      with.push_back(Evaluate(cfg, all[i], p.batch, p.c, true));
      without.push_back(Evaluate(cfg, all[i], p.batch, p.c, false));
      if (naive < 0 || with[i].step < with[naive].step) naive = static_cast<int>(i);
    }
    ASSERT_LT(without[naive].memory, with[naive].memory);
    p.c.memory_bytes = (without[naive].memory + with[naive].memory) / 2;
    bool some_fit = false;
    for (const Mine& x : with) some_fit = some_fit || x.memory <= p.c.memory_bytes;
    if (some_fit) {
      std::printf("a tight problem after %d draws: %s\n", attempt + 1, p.Label().c_str());
      break;
    }
  }
  const int best = ExpectMatchesBruteForce(cfg, p.world, p.batch, p.c, p.Label());
  ASSERT_GE(best, 0) << p.Label() << Again();
  EXPECT_NE(best, naive) << p.Label() << ": " << Label(all[naive])
                         << " does not fit once its activations count" << Again();
}

// PredictStage and MakePlan refuse what Trainer3D::Create refuses, on drawn numbers: a stage outside [0, P),
// blocks that P = 3 or 5 stages do not split (the message names both), a world below 1, and a model no
// layout of a power of two ranks can split.
TEST(PlannerHidden, BadInputsAreClearErrors) {
  CaseRandom rng;
  const nn::GptConfig cfg;
  const GridShape grid = rng.Pick(testing::ShapesOf(8));
  const int stage =
      rng.Chance(0.5) ? grid.pp + static_cast<int>(rng.Int(0, 2)) : -static_cast<int>(rng.Int(1, 3));
  EXPECT_EQ(PredictStage(cfg, {grid, 1}, 8, stage).status().code(), absl::StatusCode::kInvalidArgument)
      << "PredictStage of stage " << stage << " of " << testing::Str(grid) << Again();
  const int P = rng.Pick(std::vector<int>{3, 5});
  nn::GptConfig uneven = cfg;
  uneven.layers = static_cast<int>(rng.Int(P + 1, 3 * P - 1));
  if (uneven.layers == 2 * P) ++uneven.layers;
  const std::string want =
      std::to_string(uneven.layers) + " blocks do not split into " + std::to_string(P) + " pipeline stages";
  EXPECT_EQ(PredictStage(uneven, {{1, P, 1}, 1}, 8, 0).status().message(), want)
      << "PredictStage of " << uneven.layers << " blocks on (dp 1, pp " << P << ", tp 1)" << Again();
  const int world = static_cast<int>(rng.Int(-3, 0));
  EXPECT_EQ(MakePlan(cfg, world, 8, Problem().c).status().code(), absl::StatusCode::kInvalidArgument)
      << "MakePlan on a world of " << world << Again();
  nn::GptConfig odd = cfg;
  odd.layers = 3, odd.heads = 3, odd.inner = 129;
  const int big = rng.Pick(std::vector<int>{16, 32, 64});
  EXPECT_EQ(MakePlan(odd, big, 8, Problem().c).status().code(), absl::StatusCode::kInvalidArgument)
      << "no layout of " << big << " ranks exists for 3 blocks, 3 heads, inner 129, B 8" << Again();
}

}  // namespace
}  // namespace distlab::composition
