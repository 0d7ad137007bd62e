// Lab 6 stage C, hidden: expert parallelism over n ranks equals the single-rank layer, forward and backward;
// every expert runs (forward and backward) on its owner only; counts travel before tokens.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/expert_parallel.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/nn/parameter.h"
#include "reference/tensor/random.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

// A cheap, nonlinear, expert-specific function of a row.
Tensor ToyExpert(int e, const Tensor& rows) {
  Tensor out(rows.shape());
  for (int64_t i = 0; i < rows.numel(); ++i) out.Set(i, std::tanh(0.3f * (e + 1) * rows.Get(i) + 0.1f * e));
  return out;
}

// Dense reference on one rank: y[t] = x[t] + sum over kept j of gate * ToyExpert(e, x[t]).
std::vector<double> Dense(const Tensor& x, const Routing& r) {
  const int64_t h = x.dim(1);
  std::vector<double> y(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) y[i] = x.Get(i);
  for (int64_t t = 0; t < r.tokens; ++t) {
    Tensor row({1, h});
    for (int64_t c = 0; c < h; ++c) row.Set(c, x.Get(t * h + c));
    for (int j = 0; j < r.top_k; ++j) {
      if (!r.kept[t * r.top_k + j]) continue;
      Tensor o = ToyExpert(r.expert[t * r.top_k + j], row);
      for (int64_t c = 0; c < h; ++c) y[t * h + c] += r.gate[t * r.top_k + j] * o.Get(c);
    }
  }
  return y;
}

struct Case {
  int n, E, k;
  int64_t T, h;
  bool drop_some;
};

void RunCase(const Case& cs) {
  std::vector<Tensor> x;
  std::vector<Routing> routing;
  for (int r = 0; r < cs.n; ++r) {
    x.push_back(testutil::RandomTensor({cs.T, cs.h}, 40 + r));
    routing.push_back(testutil::RandomRouting(cs.T, cs.E, cs.k, 60 + r));
    if (cs.drop_some) {
      for (size_t s = 0; s < routing[r].kept.size(); s += 3) routing[r].kept[s] = 0;
    }
  }
  std::vector<Tensor> y(cs.n);
  std::vector<EpStats> stats(cs.n);
  std::atomic<int> foreign{0};
  std::mutex mu;
  testing::Activity activity("expert-parallel forward (counts all-to-all, then grouped Send/Recv)");
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(3);
  auto st = comm::RunRanks(
      cs.n,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        const int per = cs.E / cs.n;
        ExpertFn fn = [&, rank](int e, const Tensor& rows) {
          if (e / per != rank) foreign++;
          return ToyExpert(e, rows);
        };
        EpStats es;
        auto out = ExpertParallelForward(x[rank], routing[rank], fn, c, s, &es);
        if (!out.ok()) return out.status();
        std::lock_guard<std::mutex> lock(mu);
        y[rank] = *out, stats[rank] = es;
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  EXPECT_EQ(foreign.load(), 0) << "an expert ran on a rank that does not own it";
  std::vector<std::vector<int64_t>> to(cs.n, std::vector<int64_t>(cs.n, 0));  // rows rank a sends to rank b
  for (int r = 0; r < cs.n; ++r) {
    ASSERT_EQ(y[r].shape(), x[r].shape());
    std::vector<double> want = Dense(x[r], routing[r]);
    for (int64_t i = 0; i < x[r].numel(); ++i) {
      ASSERT_NEAR(y[r].Get(i), want[i], 1e-5)
          << "rank " << r << " token " << i / cs.h << " column " << i % cs.h;
    }
    for (size_t s = 0; s < routing[r].kept.size(); ++s) {
      if (routing[r].kept[s]) to[r][routing[r].expert[s] / (cs.E / cs.n)]++;
    }
  }
  for (int r = 0; r < cs.n; ++r) {
    int64_t sent = 0, received = 0;
    for (int p = 0; p < cs.n; ++p) {
      if (p == r) continue;
      sent += to[r][p], received += to[p][r];
    }
    EXPECT_EQ(stats[r].rows_sent, sent) << "rank " << r;
    EXPECT_EQ(stats[r].rows_received, received) << "rank " << r;
  }
}

TEST(ExpertParallelHidden, TwoRanksTopTwoMatchesSingleRank) { RunCase({2, 4, 2, 7, 5, false}); }
TEST(ExpertParallelHidden, FourRanksTwoExpertsEachMatchesSingleRank) { RunCase({4, 8, 2, 9, 3, false}); }
TEST(ExpertParallelHidden, DroppedSlotsAreNotSent) { RunCase({4, 4, 1, 10, 4, true}); }

TEST(ExpertParallelHidden, UnevenExpertsAreAnError) {
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(3);
  auto st = comm::RunRanks(
      3,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        Routing r = testutil::RandomRouting(2, 4, 1, 9);
        Tensor x({2, 3});
        auto out = ExpertParallelForward(x, r, ToyExpert, c, s);
        if (out.status().code() != absl::StatusCode::kInvalidArgument) {
          return absl::InternalError("E = 4 over n = 3 ranks must be InvalidArgument, got " +
                                     out.status().ToString());
        }
        return absl::OkStatus();
      },
      opt);
  EXPECT_OK(comm::FirstError(st));
}

// ----- Backward -----
//
// Every rank r holds tokens x_r and output gradients dy_r (L = sum_r sum_t dy_r[t] . y_r[t]) and its own copy
// of the same layer (same config and seed); the experts run through ExpertParallelForward/Backward on their
// owners only, the router on the token's rank: RouterBackward(dgate), then the router's backward.
// Expected, from a single-rank MoeLayer run on each x_r:
//   y_r, dx_r and the router's gradient on rank r   = the single-rank layer's on x_r
//   expert e's gradients on its owner                = the sum over r of the single-rank layer's on x_r
//   expert e's gradients on any other rank           = 0 (it never ran there)
// and, independently of MoeLayer, dx_r and the router's gradient equal central differences of a dense
// per-token loss in double (choices and dropped slots held fixed: top-k and capacity have no gradient).

struct GradCase {
  int n, E, k;
  int64_t T, h, f;
  bool normalized;
  double capacity_factor;  // <= 0: dropless
  DropPolicy policy;
};

MoeConfig ConfigOf(const GradCase& cs) {
  MoeConfig c;
  c.hidden = cs.h, c.inner = cs.f, c.experts = cs.E, c.top_k = cs.k, c.normalize_gates = cs.normalized;
  c.capacity_factor = cs.capacity_factor, c.drop_policy = cs.policy, c.seed = 11;
  return c;
}

std::unique_ptr<MoeLayer> MakeLayer(const GradCase& cs) {
  std::unique_ptr<MoeLayer> layer = MoeLayer::Create(ConfigOf(cs)).value();
  // Router weights of order 1: routing far from uniform, tokens spread over the experts.
  tensor::FillNormal(layer->router().weight().value, 123, 1.0f);
  nn::ZeroGrads(layer->Parameters());
  return layer;
}

std::vector<float> Flat(const std::vector<nn::Parameter*>& params) {
  std::vector<float> v;
  for (const nn::Parameter* p : params) {
    std::vector<float> g = p->grad.ToVector();
    v.insert(v.end(), g.begin(), g.end());
  }
  return v;
}

// sum_t dy[t] . y_t in double, y_t = x_t + sum over kept j of g_j(W x_t) Expert_{e_j}(x_t); W is [E, h].
double DenseLoss(MoeLayer& layer, const std::vector<double>& W, const std::vector<double>& x,
                 const Routing& r, const Tensor& dy) {
  const int E = r.experts, k = r.top_k;
  const int64_t h = layer.config().hidden;
  double loss = 0;
  for (int64_t t = 0; t < r.tokens; ++t) {
    std::vector<double> xt(x.begin() + t * h, x.begin() + (t + 1) * h);
    std::vector<double> p(E);
    for (int e = 0; e < E; ++e) {
      p[e] = 0;
      for (int64_t c = 0; c < h; ++c) p[e] += W[e * h + c] * xt[c];
    }
    const double zmax = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - zmax));
    for (double& v : p) v /= sum;
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += p[r.expert[t * k + j]];
    std::vector<double> yt = xt;
    for (int j = 0; j < k; ++j) {
      if (!r.kept[t * k + j]) continue;
      const int e = r.expert[t * k + j];
      const double g = r.normalized ? p[e] / chosen : p[e];
      std::vector<double> o = testutil::ExpertRef(layer, e, xt);
      for (int64_t c = 0; c < h; ++c) yt[c] += g * o[c];
    }
    for (int64_t c = 0; c < h; ++c) loss += dy.Get(t * h + c) * yt[c];
  }
  return loss;
}

void RunBackwardCase(const GradCase& cs) {
  const int n = cs.n, per = cs.E / cs.n;
  std::vector<Tensor> x, dy;
  for (int r = 0; r < n; ++r) {
    x.push_back(testutil::RandomTensor({cs.T, cs.h}, 300 + r));
    dy.push_back(testutil::RandomTensor({cs.T, cs.h}, 400 + r));
  }

  // The single-rank layer on each rank's tokens.
  std::unique_ptr<MoeLayer> ref = MakeLayer(cs);
  std::vector<Tensor> y_ref(n), dx_ref(n);
  std::vector<std::vector<float>> router_ref(n);
  std::vector<std::vector<float>> expert_ref(cs.E);  // summed over the ranks
  std::vector<Routing> routing_ref(n);
  for (int r = 0; r < n; ++r) {
    nn::ZeroGrads(ref->Parameters());
    ASSERT_OK_AND_ASSIGN(y_ref[r], ref->Forward(x[r]));
    routing_ref[r] = ref->routing();
    ASSERT_OK_AND_ASSIGN(dx_ref[r], ref->Backward(dy[r]));
    router_ref[r] = ref->router().weight().grad.ToVector();
    for (int e = 0; e < cs.E; ++e) {
      std::vector<float> g = Flat(ref->expert(e).Parameters());
      if (expert_ref[e].empty()) expert_ref[e].assign(g.size(), 0.f);
      for (size_t i = 0; i < g.size(); ++i) expert_ref[e][i] += g[i];
    }
  }

  // Expert parallel: each rank its own copy of the layer; experts only through the EP functions.
  std::vector<std::unique_ptr<MoeLayer>> layer;
  for (int r = 0; r < n; ++r) layer.push_back(MakeLayer(cs));
  std::vector<Tensor> y(n), dx(n);
  std::vector<Routing> routing(n);
  std::vector<EpStats> fwd_stats(n), bwd_stats(n);
  std::atomic<int> foreign{0}, backward_calls{0};
  testing::Activity activity("expert-parallel forward and backward (grouped Send/Recv both ways)");
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(3);
  auto st = comm::RunRanks(
      n,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        MoeLayer& L = *layer[rank];
        // The router on the token's rank.
        Tensor logits = L.router().Forward(x[rank]);
        ASSIGN_OR_RETURN(Routing rt, Route(logits, cs.k, cs.normalized));
        if (cs.capacity_factor > 0) {
          ASSIGN_OR_RETURN(int64_t cap, ExpertCapacity(cs.T, cs.E, cs.k, cs.capacity_factor));
          RETURN_IF_ERROR(ApplyCapacity(rt, cap, cs.policy));
        }
        ExpertFn fwd = [&, rank](int e, const Tensor& rows) {
          if (e / per != rank) foreign++;
          return L.expert(e).Forward(rows);
        };
        ExpertBackwardFn bwd = [&, rank](int e, const Tensor& drows) {
          if (e / per != rank) foreign++;
          backward_calls++;
          return L.expert(e).Backward(drows);
        };
        EpCache cache;
        ASSIGN_OR_RETURN(Tensor out, ExpertParallelForward(x[rank], rt, fwd, c, s, &fwd_stats[rank], &cache));
        ASSIGN_OR_RETURN(EpGrads g, ExpertParallelBackward(dy[rank], rt, cache, bwd, c, s, &bwd_stats[rank]));
        if (g.dx.shape() != x[rank].shape() || static_cast<int64_t>(g.dgate.size()) != cs.T * cs.k) {
          return absl::InternalError("ExpertParallelBackward returned dx or dgate of the wrong size");
        }
        // The router's gradient, on the token's rank.
        ASSIGN_OR_RETURN(Tensor dlogits, RouterBackward(rt, g.dgate));
        Tensor dxr = L.router().Backward(dlogits);
        for (int64_t i = 0; i < dxr.numel(); ++i) g.dx.Set(i, g.dx.Get(i) + dxr.Get(i));
        y[rank] = out, dx[rank] = g.dx, routing[rank] = rt;  // each rank writes its own slots
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  EXPECT_EQ(foreign.load(), 0) << "an expert ran (forward or backward) on a rank that does not own it";

  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(routing[r].kept, routing_ref[r].kept)
        << "rank " << r << ": routing differs from the single-rank layer's";
    ASSERT_EQ(y[r].shape(), x[r].shape());
    ASSERT_EQ(dx[r].shape(), x[r].shape());
    for (int64_t i = 0; i < x[r].numel(); ++i) {
      ASSERT_NEAR(y[r].Get(i), y_ref[r].Get(i), 1e-5) << "y, rank " << r << " element " << i;
      ASSERT_NEAR(dx[r].Get(i), dx_ref[r].Get(i), 1e-5 * std::max(1.f, std::fabs(dx_ref[r].Get(i))))
          << "dx, rank " << r << " token " << i / cs.h << " column " << i % cs.h;
    }
    std::vector<float> router = layer[r]->router().weight().grad.ToVector();
    for (size_t i = 0; i < router.size(); ++i) {
      ASSERT_NEAR(router[i], router_ref[r][i], 1e-5 * std::max(1.f, std::fabs(router_ref[r][i])))
          << "router weight gradient on rank " << r << " [" << i << "] (gate gradients go wrong here)";
    }
    for (int e = 0; e < cs.E; ++e) {
      std::vector<float> g = Flat(layer[r]->expert(e).Parameters());
      const bool owner = e / per == r;
      for (size_t i = 0; i < g.size(); ++i) {
        const float want = owner ? expert_ref[e][i] : 0.f;
        ASSERT_NEAR(g[i], want, 5e-5 * std::max(1.f, std::fabs(want)))
            << "expert " << e << " parameter gradient [" << i << "] on rank " << r
            << (owner ? " (its owner: the sum over every rank's tokens)" : " (not its owner: must stay 0)");
      }
    }
    EXPECT_EQ(bwd_stats[r].rows_sent, fwd_stats[r].rows_sent) << "rank " << r;
    EXPECT_EQ(bwd_stats[r].rows_received, fwd_stats[r].rows_received) << "rank " << r;
  }
  EXPECT_GT(backward_calls.load(), 0);
  int dropped = 0;
  for (int r = 0; r < n; ++r) {
    dropped += static_cast<int>(std::count(routing[r].kept.begin(), routing[r].kept.end(), 0));
  }
  if (cs.capacity_factor > 0) {
    EXPECT_GT(dropped, 0) << "the case should drop some assignments";
  }

  // The dense per-token reference, by central differences in double.
  const int64_t h = cs.h;
  const double eps = 1e-5;
  std::vector<double> W(cs.E * h);
  for (int64_t i = 0; i < cs.E * h; ++i) W[i] = ref->router().weight().value.Get(i);
  for (int r = 0; r < n; ++r) {
    std::vector<double> xr(cs.T * h);
    for (int64_t i = 0; i < cs.T * h; ++i) xr[i] = x[r].Get(i);
    for (int64_t i = 0; i < cs.T * h; ++i) {
      std::vector<double> xp = xr, xm = xr;
      xp[i] += eps, xm[i] -= eps;
      const double fd =
          (DenseLoss(*ref, W, xp, routing[r], dy[r]) - DenseLoss(*ref, W, xm, routing[r], dy[r])) / (2 * eps);
      ASSERT_NEAR(dx[r].Get(i), fd, 2e-4 * std::max(1.0, std::fabs(fd)))
          << "dx against the dense reference, rank " << r << " token " << i / h << " column " << i % h;
    }
    std::vector<float> router = layer[r]->router().weight().grad.ToVector();
    for (int64_t i = 0; i < cs.E * h; ++i) {
      std::vector<double> wp = W, wm = W;
      wp[i] += eps, wm[i] -= eps;
      const double fd =
          (DenseLoss(*ref, wp, xr, routing[r], dy[r]) - DenseLoss(*ref, wm, xr, routing[r], dy[r])) /
          (2 * eps);
      ASSERT_NEAR(router[i], fd, 2e-4 * std::max(1.0, std::fabs(fd)))
          << "router weight gradient against the dense reference, rank " << r << " [" << i << "]";
    }
  }
}

// n = 2, E = 4, k = 2, renormalised gates, capacity C = ceil(T / E) = 2 of 14 assignments per expert, by
// position.
TEST(ExpertParallelBackwardHidden, TwoRanksTopTwoWithDropsMatchesSingleRankAndDense) {
  RunBackwardCase({2, 4, 2, 7, 5, 8, true, 1.0, DropPolicy::kByPosition});
}
// n = 4, E = 8 (two experts per rank), k = 2, raw gates, dropless.
TEST(ExpertParallelBackwardHidden, FourRanksTopTwoDroplessMatchesSingleRankAndDense) {
  RunBackwardCase({4, 8, 2, 6, 4, 6, false, 0, DropPolicy::kByProbability});
}
// n = 4, E = 4, k = 1, raw gates (the router's only task gradient), capacity C = ceil(9 / 4 * 1.25) = 3, by
// probability.
TEST(ExpertParallelBackwardHidden, FourRanksTopOneWithDropsMatchesSingleRankAndDense) {
  RunBackwardCase({4, 4, 1, 9, 3, 5, false, 1.25, DropPolicy::kByProbability});
}

// ----- Backward, one quantity at a time -----
//
// Linear experts: expert e maps a row to c_e row (c_e = (e + 1) / 2), so its backward maps drows to c_e
// drows. Per token t with kept slots j (expert e_j, gate g_j), by the header's backward:
//   dx[t]       = dy[t] (1 + sum over kept j of g_j c_{e_j})   (expert e_j's row got g_j dy[t])
//   dgate[t, j] = dy[t] . out_j = c_{e_j} (dy[t] . x[t]),  0 for a dropped slot
// n = 2, E = 4, k = 2, T = 6, h = 3; slots 1, 4, 7, 10 of every rank are dropped.
float LinearScale(int e) { return 0.5f * (e + 1); }

Tensor LinearExpert(int e, const Tensor& rows) {
  Tensor out(rows.shape());
  for (int64_t i = 0; i < rows.numel(); ++i) out.Set(i, LinearScale(e) * rows.Get(i));
  return out;
}

struct LinearRun {
  int n = 2, E = 4, k = 2;
  int64_t T = 6, h = 3;
  std::vector<Tensor> x, dy;
  std::vector<Routing> routing;
  std::vector<EpGrads> grads;
};

void RunLinearExperts(LinearRun& run) {
  for (int r = 0; r < run.n; ++r) {
    run.x.push_back(testutil::RandomTensor({run.T, run.h}, 500 + r));
    run.dy.push_back(testutil::RandomTensor({run.T, run.h}, 600 + r));
    run.routing.push_back(testutil::RandomRouting(run.T, run.E, run.k, 700 + r));
    for (size_t s = 1; s < run.routing[r].kept.size(); s += 3) run.routing[r].kept[s] = 0;
  }
  run.grads.resize(run.n);
  testing::Activity activity("expert-parallel forward and backward with linear experts");
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(3);
  auto st = comm::RunRanks(
      run.n,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        EpCache cache;
        RETURN_IF_ERROR(
            ExpertParallelForward(run.x[rank], run.routing[rank], LinearExpert, c, s, nullptr, &cache)
                .status());
        ASSIGN_OR_RETURN(run.grads[rank],
                         ExpertParallelBackward(run.dy[rank], run.routing[rank], cache, LinearExpert, c, s));
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
}

TEST(ExpertParallelBackwardHidden, ExpertRowsGetTheGatedOutputGradient) {
  LinearRun run;
  ASSERT_NO_FATAL_FAILURE(RunLinearExperts(run));
  for (int r = 0; r < run.n; ++r) {
    const Routing& rt = run.routing[r];
    ASSERT_EQ(run.grads[r].dx.shape(), run.x[r].shape()) << "rank " << r;
    for (int64_t t = 0; t < run.T; ++t) {
      double scale = 1;
      for (int j = 0; j < run.k; ++j) {
        const int64_t s = t * run.k + j;
        if (rt.kept[s]) scale += rt.gate[s] * LinearScale(rt.expert[s]);
      }
      for (int64_t col = 0; col < run.h; ++col) {
        const double want = scale * run.dy[r].Get(t * run.h + col);
        EXPECT_NEAR(run.grads[r].dx.Get(t * run.h + col), want, 1e-5 * std::max(1.0, std::fabs(want)))
            << "dx, rank " << r << " token " << t << " column " << col
            << ": dy (the residual) plus, per kept slot, the expert's backward of gate * dy";
      }
    }
  }
}

TEST(ExpertParallelBackwardHidden, GateGradientIsDyDotExpertOutput) {
  LinearRun run;
  ASSERT_NO_FATAL_FAILURE(RunLinearExperts(run));
  for (int r = 0; r < run.n; ++r) {
    const Routing& rt = run.routing[r];
    ASSERT_EQ(static_cast<int64_t>(run.grads[r].dgate.size()), run.T * run.k) << "rank " << r;
    for (int64_t t = 0; t < run.T; ++t) {
      double dot = 0;
      for (int64_t col = 0; col < run.h; ++col)
        dot += run.dy[r].Get(t * run.h + col) * run.x[r].Get(t * run.h + col);
      for (int j = 0; j < run.k; ++j) {
        const int64_t s = t * run.k + j;
        const double want = rt.kept[s] ? LinearScale(rt.expert[s]) * dot : 0.0;
        EXPECT_NEAR(run.grads[r].dgate[s], want, 1e-5 * std::max(1.0, std::fabs(want)))
            << "dgate, rank " << r << " token " << t << " slot " << j
            << (rt.kept[s] ? ": dy[t] . (the expert's output), with no gate factor" : ": a dropped slot");
      }
    }
  }
}

TEST(ExpertParallelBackwardHidden, RejectsMissingForwardAndWrongShape) {
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(3);
  auto st = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        Routing r = testutil::RandomRouting(3, 2, 1, 5 + rank);
        Tensor x = testutil::RandomTensor({3, 4}, 6 + rank);
        ExpertBackwardFn bwd = [](int, const Tensor& d) { return d; };
        EpCache empty;
        auto none = ExpertParallelBackward(x, r, empty, bwd, c, s);
        if (none.status().code() != absl::StatusCode::kFailedPrecondition) {
          return absl::InternalError("backward without a forward must be FailedPrecondition, got " +
                                     none.status().ToString());
        }
        EpCache cache;
        RETURN_IF_ERROR(ExpertParallelForward(x, r, ToyExpert, c, s, nullptr, &cache).status());
        auto wrong = ExpertParallelBackward(Tensor({3, 5}), r, cache, bwd, c, s);
        if (wrong.status().code() != absl::StatusCode::kInvalidArgument) {
          return absl::InternalError("dy [3, 5] for a forward of [3, 4] must be InvalidArgument, got " +
                                     wrong.status().ToString());
        }
        return absl::OkStatus();
      },
      opt);
  EXPECT_OK(comm::FirstError(st));
}

}  // namespace
}  // namespace distlab::moe
