// Lab 6 stage C, hidden: expert parallelism over n ranks equals the single-rank layer, forward and backward;
// every expert runs (forward and backward) on its owner only; counts travel before tokens.
//
// Every case draws its sizes (ranks within the test's 4, E, k, T, h, f), routings, dropped slots, capacity
// factors and inputs from the grading seed (distlab::testing::CaseRandom); a failure names the input and
// ends with how to draw it again. Draws are kept only when they exercise what the case is about: rows that
// cross ranks, and kept slots that a token-order combine would mix up.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>
#include <string>
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

using testing::CaseRandom;
using testing::SeedNote;
using testutil::FirstMismatch;
using testutil::List;
using testutil::Str;

// True when some rank's kept slots, read in token order, are not in expert order (a combine that takes the
// returned rows in token order would put some of them on the wrong token) and some kept row crosses ranks.
bool Exercises(const std::vector<Routing>& routing, int n) {
  bool unordered = false, crosses = false;
  for (int r = 0; r < n; ++r) {
    const Routing& rt = routing[r];
    const int per = rt.experts / n;
    int last = -1;
    for (size_t s = 0; s < rt.kept.size(); ++s) {
      if (!rt.kept[s]) continue;
      unordered = unordered || rt.expert[s] < last;
      last = rt.expert[s];
      crosses = crosses || rt.expert[s] / per != r;
    }
  }
  return unordered && crosses;
}

// "rank 0: experts [..] kept [..]; rank 1: ..."
std::string Routings(const std::vector<Routing>& routing) {
  std::string out;
  for (size_t r = 0; r < routing.size(); ++r) {
    out += Str(r ? "; " : "", "rank ", r, " experts ", List(routing[r].expert));
    if (std::count(routing[r].kept.begin(), routing[r].kept.end(), 0) > 0) {
      out += Str(" kept ", List(routing[r].kept));
    }
  }
  return out;
}

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

// Draws x and the routings of every rank (softmax of random logits, top-k; with drop_some, each slot dropped
// with probability 1/3 and at least one per rank), until they exercise the case.
void RunCase(CaseRandom& rnd, const Case& cs) {
  std::vector<Tensor> x;
  std::vector<Routing> routing;
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
    x.clear(), routing.clear();
    for (int r = 0; r < cs.n; ++r) {
      x.push_back(testutil::RandomTensor({cs.T, cs.h}, rnd.Next()));
      routing.push_back(testutil::RandomRouting(cs.T, cs.E, cs.k, rnd.Next()));
      if (cs.drop_some) {
        Routing& rt = routing[r];
        for (size_t s = 0; s < rt.kept.size(); ++s) rt.kept[s] = rnd.Chance(1.0 / 3) ? 0 : 1;
        rt.kept[rnd.Int(0, static_cast<int64_t>(rt.kept.size()) - 1)] = 0;
      }
    }
    if (Exercises(routing, cs.n)) break;
  }
  const std::string input =
      Str("expert-parallel forward on n = ", cs.n, " ranks, E = ", cs.E, ", k = ", cs.k, ", T = ", cs.T,
          ", h = ", cs.h, ", toy experts tanh(0.3 (e + 1) x + 0.1 e); ", Routings(routing));
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
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
  EXPECT_EQ(foreign.load(), 0) << "an expert ran on a rank that does not own it; " << input << "; "
                               << SeedNote();
  std::vector<std::vector<int64_t>> to(cs.n, std::vector<int64_t>(cs.n, 0));  // rows rank a sends to rank b
  for (int r = 0; r < cs.n; ++r) {
    ASSERT_EQ(y[r].shape(), x[r].shape()) << "rank " << r << "; " << input << "; " << SeedNote();
    std::vector<double> want = Dense(x[r], routing[r]);
    if (auto m = FirstMismatch(
            x[r].numel(), [&](int64_t i) { return y[r].Get(i); }, [&](int64_t i) { return want[i]; }, 1e-5)) {
      FAIL() << "rank " << r << " token " << m.index / cs.h << " column " << m.index % cs.h
             << ": y = " << m.got
             << " differs from the single-rank x + sum over kept slots of gate * expert(x); " << input << "; "
             << SeedNote();
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
    EXPECT_EQ(stats[r].rows_sent, sent)
        << "rank " << r << ": rows_sent counts the kept rows it sends to other "
        << "ranks; " << input << "; " << SeedNote();
    EXPECT_EQ(stats[r].rows_received, received)
        << "rank " << r << ": rows_received counts the rows other ranks send it; " << input << "; "
        << SeedNote();
  }
}

// n = 2, k = 2, E of 2, 4 or 6 (1 to 3 experts per rank).
TEST(ExpertParallelHidden, TwoRanksTopTwoMatchesSingleRank) {
  CaseRandom rnd;
  RunCase(rnd, {2, 2 * static_cast<int>(rnd.Int(1, 3)), 2, rnd.Int(4, 10), rnd.Int(2, 6), false});
}
// n = 4, E = 8, k of 1 to 3.
TEST(ExpertParallelHidden, FourRanksTwoExpertsEachMatchesSingleRank) {
  CaseRandom rnd;
  RunCase(rnd, {4, 8, static_cast<int>(rnd.Int(1, 3)), rnd.Int(5, 12), rnd.Int(2, 6), false});
}
// n = 4, E of 4 or 8, k of 1 or 2, each slot dropped with probability 1/3.
TEST(ExpertParallelHidden, DroppedSlotsAreNotSent) {
  CaseRandom rnd;
  RunCase(rnd, {4, 4 * static_cast<int>(rnd.Int(1, 2)), static_cast<int>(rnd.Int(1, 2)), rnd.Int(6, 12),
                rnd.Int(2, 6), true});
}

// Every E that n does not divide is InvalidArgument, on every rank.
TEST(ExpertParallelHidden, UnevenExpertsAreAnError) {
  CaseRandom rnd;
  const int n = static_cast<int>(rnd.Int(2, 4));
  int E;
  do {
    E = static_cast<int>(rnd.Int(1, 3 * n));
  } while (E % n == 0);
  const int k = static_cast<int>(rnd.Int(1, std::min(E, 2)));
  const int64_t T = rnd.Int(1, 4), h = rnd.Int(1, 4);
  const uint64_t seed = rnd.Next();
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(3);
  auto st = comm::RunRanks(
      n,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        Routing r = testutil::RandomRouting(T, E, k, seed + rank);
        Tensor x({T, h});
        auto out = ExpertParallelForward(x, r, ToyExpert, c, s);
        if (out.status().code() != absl::StatusCode::kInvalidArgument) {
          return absl::InternalError(Str("E = ", E, " over n = ", n, " ranks (k = ", k, ", T = ", T, ", h = ",
                                         h, ") must be InvalidArgument, got ", out.status().ToString()));
        }
        return absl::OkStatus();
      },
      opt);
  EXPECT_OK(comm::FirstError(st)) << SeedNote();
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
  uint64_t layer_seed = 0, router_seed = 0;
  std::string Describe() const {
    return Str("n = ", n, " ranks, MoeLayer {h = ", h, ", f = ", f, ", E = ", E, ", k = ", k, ", ",
               normalized ? "renormalised" : "raw", " gates, ",
               capacity_factor > 0 ? Str("capacity factor ", capacity_factor, " dropping by ",
                                         policy == DropPolicy::kByPosition ? "position" : "probability")
                                   : std::string("dropless"),
               "}, T = ", T, " tokens per rank, router weights, x and dy drawn N(0, 1)");
  }
};

MoeConfig ConfigOf(const GradCase& cs) {
  MoeConfig c;
  c.hidden = cs.h, c.inner = cs.f, c.experts = cs.E, c.top_k = cs.k, c.normalize_gates = cs.normalized;
  c.capacity_factor = cs.capacity_factor, c.drop_policy = cs.policy, c.seed = cs.layer_seed;
  return c;
}

std::unique_ptr<MoeLayer> MakeLayer(const GradCase& cs) {
  std::unique_ptr<MoeLayer> layer = MoeLayer::Create(ConfigOf(cs)).value();
  // Router weights of order 1: routing far from uniform, tokens spread over the experts.
  tensor::FillNormal(layer->router().weight().value, cs.router_seed, 1.0f);
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

// Draws the layer, x and dy of `cs` (until the single-rank routing exercises the case: rows that cross
// ranks, kept slots out of expert order, and dropped slots when there is a capacity), then checks the
// expert-parallel forward and backward against the single-rank layer and the dense reference.
void RunBackwardCase(CaseRandom& rnd, GradCase cs) {
  const int n = cs.n, per = cs.E / cs.n;
  std::vector<Tensor> x, dy;
  std::unique_ptr<MoeLayer> ref;
  std::vector<Tensor> y_ref(n), dx_ref(n);
  std::vector<std::vector<float>> router_ref(n);
  std::vector<std::vector<float>> expert_ref(cs.E);  // summed over the ranks
  std::vector<Routing> routing_ref(n);
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
    cs.layer_seed = rnd.Next(), cs.router_seed = rnd.Next();
    x.clear(), dy.clear();
    for (int r = 0; r < n; ++r) {
      x.push_back(testutil::RandomTensor({cs.T, cs.h}, rnd.Next()));
      dy.push_back(testutil::RandomTensor({cs.T, cs.h}, rnd.Next()));
    }
    ASSERT_OK(MoeLayer::Create(ConfigOf(cs)).status()) << cs.Describe() << "; " << SeedNote();
    ref = MakeLayer(cs);
    for (int r = 0; r < n; ++r) {
      ASSERT_OK(ref->Forward(x[r]).status()) << cs.Describe() << "; " << SeedNote();
      routing_ref[r] = ref->routing();
    }
    int dropped = 0;
    for (const Routing& rt : routing_ref)
      dropped += static_cast<int>(std::count(rt.kept.begin(), rt.kept.end(), 0));
    if (Exercises(routing_ref, n) && (cs.capacity_factor <= 0 || dropped > 0)) break;
  }
  const std::string input = cs.Describe();

  // The single-rank layer on each rank's tokens.
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
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
  EXPECT_EQ(foreign.load(), 0) << "an expert ran (forward or backward) on a rank that does not own it; "
                               << input << "; " << SeedNote();

  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(routing[r].kept == routing_ref[r].kept)
        << "rank " << r << ": routing differs from the single-rank layer's; " << input << "; " << SeedNote();
    ASSERT_EQ(y[r].shape(), x[r].shape()) << "rank " << r << "; " << input << "; " << SeedNote();
    ASSERT_EQ(dx[r].shape(), x[r].shape()) << "rank " << r << "; " << input << "; " << SeedNote();
    if (auto m = FirstMismatch(
            x[r].numel(), [&](int64_t i) { return y[r].Get(i); }, [&](int64_t i) { return y_ref[r].Get(i); },
            1e-5)) {
      FAIL() << "y, rank " << r << " token " << m.index / cs.h << " column " << m.index % cs.h << " = "
             << m.got << " differs from the single-rank layer's; " << input << "; " << SeedNote();
    }
    if (auto m = FirstMismatch(
            x[r].numel(), [&](int64_t i) { return dx[r].Get(i); },
            [&](int64_t i) { return dx_ref[r].Get(i); }, 1e-5, 1e-5)) {
      FAIL() << "dx, rank " << r << " token " << m.index / cs.h << " column " << m.index % cs.h << " = "
             << m.got << " differs from the single-rank layer's; " << input << "; " << SeedNote();
    }
    std::vector<float> router = layer[r]->router().weight().grad.ToVector();
    if (auto m = FirstMismatch(
            router.size(), [&](int64_t i) { return router[i]; }, [&](int64_t i) { return router_ref[r][i]; },
            1e-5, 1e-5)) {
      FAIL() << "router weight gradient on rank " << r << " [" << m.index / cs.h << ", " << m.index % cs.h
             << "] = " << m.got << " differs from the single-rank layer's (gate gradients go wrong here); "
             << input << "; " << SeedNote();
    }
    for (int e = 0; e < cs.E; ++e) {
      std::vector<float> g = Flat(layer[r]->expert(e).Parameters());
      const bool owner = e / per == r;
      if (auto m = FirstMismatch(
              g.size(), [&](int64_t i) { return g[i]; },
              [&](int64_t i) { return owner ? expert_ref[e][i] : 0.0; }, 5e-5, 5e-5)) {
        FAIL() << "expert " << e << " parameter gradient [" << m.index << "] on rank " << r << " = " << m.got
               << (owner ? " (its owner: the sum over every rank's tokens of the single-rank layer's)"
                         : " (not its owner: must stay 0)")
               << "; " << input << "; " << SeedNote();
      }
    }
    EXPECT_EQ(bwd_stats[r].rows_sent, fwd_stats[r].rows_sent)
        << "rank " << r << ": the backward sends back as many rows as the forward; " << input << "; "
        << SeedNote();
    EXPECT_EQ(bwd_stats[r].rows_received, fwd_stats[r].rows_received)
        << "rank " << r << ": the backward receives as many rows as the forward; " << input << "; "
        << SeedNote();
  }
  EXPECT_GT(backward_calls.load(), 0) << input << "; " << SeedNote();

  // The dense per-token reference, by central differences in double.
  const int64_t h = cs.h;
  const double eps = 1e-5;
  std::vector<double> W(cs.E * h);
  for (int64_t i = 0; i < cs.E * h; ++i) W[i] = ref->router().weight().value.Get(i);
  for (int r = 0; r < n; ++r) {
    std::vector<double> xr(cs.T * h);
    for (int64_t i = 0; i < cs.T * h; ++i) xr[i] = x[r].Get(i);
    std::vector<double> fd(cs.T * h);
    for (int64_t i = 0; i < cs.T * h; ++i) {
      std::vector<double> xp = xr, xm = xr;
      xp[i] += eps, xm[i] -= eps;
      fd[i] =
          (DenseLoss(*ref, W, xp, routing[r], dy[r]) - DenseLoss(*ref, W, xm, routing[r], dy[r])) / (2 * eps);
    }
    if (auto m = FirstMismatch(
            cs.T * h, [&](int64_t i) { return dx[r].Get(i); }, [&](int64_t i) { return fd[i]; }, 2e-4,
            2e-4)) {
      FAIL() << "dx, rank " << r << " token " << m.index / h << " column " << m.index % h << " = " << m.got
             << " differs from the central difference of the dense per-token loss (" << m.want << "); "
             << input << "; " << SeedNote();
    }
    std::vector<float> router = layer[r]->router().weight().grad.ToVector();
    std::vector<double> fdw(cs.E * h);
    for (int64_t i = 0; i < cs.E * h; ++i) {
      std::vector<double> wp = W, wm = W;
      wp[i] += eps, wm[i] -= eps;
      fdw[i] = (DenseLoss(*ref, wp, xr, routing[r], dy[r]) - DenseLoss(*ref, wm, xr, routing[r], dy[r])) /
               (2 * eps);
    }
    if (auto m = FirstMismatch(
            cs.E * h, [&](int64_t i) { return router[i]; }, [&](int64_t i) { return fdw[i]; }, 2e-4, 2e-4)) {
      FAIL() << "router weight gradient, rank " << r << " [" << m.index / h << ", " << m.index % h
             << "] = " << m.got << " differs from the central difference of the dense per-token loss ("
             << m.want << "); " << input << "; " << SeedNote();
    }
  }
}

// n = 2, E of 4 or 6, k = 2, renormalised gates, by position, capacity factor 0.75 or 1 with T >= E: then
// E C < k T, so some assignment is always dropped.
TEST(ExpertParallelBackwardHidden, TwoRanksTopTwoWithDropsMatchesSingleRankAndDense) {
  CaseRandom rnd;
  const int E = 2 * static_cast<int>(rnd.Int(2, 3));
  RunBackwardCase(rnd, {2, E, 2, rnd.Int(E, 9), rnd.Int(3, 6), rnd.Int(4, 10), true,
                        rnd.Pick(std::vector<double>{0.75, 1.0}), DropPolicy::kByPosition});
}
// n = 4, E of 4 or 8 (one or two experts per rank), k = 2, raw gates, dropless.
TEST(ExpertParallelBackwardHidden, FourRanksTopTwoDroplessMatchesSingleRankAndDense) {
  CaseRandom rnd;
  RunBackwardCase(rnd, {4, 4 * static_cast<int>(rnd.Int(1, 2)), 2, rnd.Int(4, 8), rnd.Int(3, 5),
                        rnd.Int(4, 8), false, 0, DropPolicy::kByProbability});
}
// n = 4, E = 4, k = 1, raw gates (the router's only task gradient), capacity factor 1 or 1.25 by
// probability (drawn until some assignment is dropped).
TEST(ExpertParallelBackwardHidden, FourRanksTopOneWithDropsMatchesSingleRankAndDense) {
  CaseRandom rnd;
  RunBackwardCase(rnd, {4, 4, 1, rnd.Int(6, 10), rnd.Int(3, 5), rnd.Int(4, 8), false,
                        rnd.Pick(std::vector<double>{1.0, 1.25}), DropPolicy::kByProbability});
}

// ----- Backward, one quantity at a time -----
//
// Linear experts: expert e maps a row to c_e row (c_e = (e + 1) / 2), so its backward maps drows to c_e
// drows. Per token t with kept slots j (expert e_j, gate g_j), by the header's backward:
//   dx[t]       = dy[t] (1 + sum over kept j of g_j c_{e_j})   (expert e_j's row got g_j dy[t])
//   dgate[t, j] = dy[t] . out_j = c_{e_j} (dy[t] . x[t]),  0 for a dropped slot
// Drawn: n of 2 to 4, one or two experts per rank, k of 2 or 3 (renormalised gates below 1), T, h, and each
// slot dropped with probability 1/3 (at least one per rank), until some row crosses ranks.
float LinearScale(int e) { return 0.5f * (e + 1); }

Tensor LinearExpert(int e, const Tensor& rows) {
  Tensor out(rows.shape());
  for (int64_t i = 0; i < rows.numel(); ++i) out.Set(i, LinearScale(e) * rows.Get(i));
  return out;
}

struct LinearRun {
  int n = 0, E = 0, k = 0;
  int64_t T = 0, h = 0;
  std::vector<Tensor> x, dy;
  std::vector<Routing> routing;
  std::vector<EpGrads> grads;
  std::string input;
};

void RunLinearExperts(LinearRun& run) {
  CaseRandom rnd;
  run.n = static_cast<int>(rnd.Int(2, 4)), run.E = run.n * static_cast<int>(rnd.Int(1, 2));
  run.k = static_cast<int>(rnd.Int(2, std::min(run.E, 3)));
  run.T = rnd.Int(4, 8), run.h = rnd.Int(2, 5);
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 1000) << "no usable draw; " << SeedNote();
    run.x.clear(), run.dy.clear(), run.routing.clear();
    bool crosses = false;
    for (int r = 0; r < run.n; ++r) {
      run.x.push_back(testutil::RandomTensor({run.T, run.h}, rnd.Next()));
      run.dy.push_back(testutil::RandomTensor({run.T, run.h}, rnd.Next()));
      run.routing.push_back(testutil::RandomRouting(run.T, run.E, run.k, rnd.Next()));
      Routing& rt = run.routing[r];
      for (size_t s = 0; s < rt.kept.size(); ++s) rt.kept[s] = rnd.Chance(1.0 / 3) ? 0 : 1;
      rt.kept[rnd.Int(0, static_cast<int64_t>(rt.kept.size()) - 1)] = 0;
      for (size_t s = 0; s < rt.kept.size(); ++s) {
        crosses = crosses || (rt.kept[s] && rt.expert[s] / (run.E / run.n) != r);
      }
    }
    if (crosses) break;
  }
  run.input = Str("expert-parallel backward on n = ", run.n, " ranks, E = ", run.E, ", k = ", run.k,
                  ", T = ", run.T, ", h = ", run.h,
                  ", linear experts c_e = (e + 1) / 2, x and dy drawn N(0, 1); ", Routings(run.routing));
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
  ASSERT_OK(comm::FirstError(st)) << run.input << "; " << SeedNote();
}

TEST(ExpertParallelBackwardHidden, ExpertRowsGetTheGatedOutputGradient) {
  LinearRun run;
  ASSERT_NO_FATAL_FAILURE(RunLinearExperts(run));
  for (int r = 0; r < run.n; ++r) {
    const Routing& rt = run.routing[r];
    ASSERT_EQ(run.grads[r].dx.shape(), run.x[r].shape())
        << "rank " << r << "; " << run.input << "; " << SeedNote();
    auto want = [&](int64_t i) {
      const int64_t t = i / run.h;
      double scale = 1;
      for (int j = 0; j < run.k; ++j) {
        const int64_t s = t * run.k + j;
        if (rt.kept[s]) scale += rt.gate[s] * LinearScale(rt.expert[s]);
      }
      return scale * run.dy[r].Get(i);
    };
    if (auto m = FirstMismatch(
            run.T * run.h, [&](int64_t i) { return run.grads[r].dx.Get(i); }, want, 1e-5, 1e-5)) {
      ADD_FAILURE() << "dx, rank " << r << " token " << m.index / run.h << " column " << m.index % run.h
                    << " = " << m.got
                    << ": dy (the residual) plus, per kept slot, the expert's backward of gate * dy; "
                    << run.input << "; " << SeedNote();
      return;
    }
  }
}

TEST(ExpertParallelBackwardHidden, GateGradientIsDyDotExpertOutput) {
  LinearRun run;
  ASSERT_NO_FATAL_FAILURE(RunLinearExperts(run));
  for (int r = 0; r < run.n; ++r) {
    const Routing& rt = run.routing[r];
    ASSERT_EQ(static_cast<int64_t>(run.grads[r].dgate.size()), run.T * run.k)
        << "rank " << r << "; " << run.input << "; " << SeedNote();
    auto want = [&](int64_t s) {
      const int64_t t = s / run.k;
      double dot = 0;
      for (int64_t col = 0; col < run.h; ++col)
        dot += run.dy[r].Get(t * run.h + col) * run.x[r].Get(t * run.h + col);
      return rt.kept[s] ? LinearScale(rt.expert[s]) * dot : 0.0;
    };
    if (auto m = FirstMismatch(
            run.T * run.k, [&](int64_t s) { return run.grads[r].dgate[s]; }, want, 1e-5, 1e-5)) {
      ADD_FAILURE() << "dgate, rank " << r << " token " << m.index / run.k << " slot " << m.index % run.k
                    << " = " << m.got
                    << (rt.kept[m.index] ? ": dy[t] . (the expert's output), with no gate factor"
                                         : ": a dropped slot's gate gradient is 0")
                    << "; " << run.input << "; " << SeedNote();
      return;
    }
  }
}

// Backward without a forward is FailedPrecondition; a dy that is not [T, h] of the forward is
// InvalidArgument.
TEST(ExpertParallelBackwardHidden, RejectsMissingForwardAndWrongShape) {
  CaseRandom rnd;
  const int n = static_cast<int>(rnd.Int(2, 4)), E = n * static_cast<int>(rnd.Int(1, 2));
  const int k = static_cast<int>(rnd.Int(1, std::min(E, 2)));
  const int64_t T = rnd.Int(1, 5), h = rnd.Int(2, 6);
  const bool more_rows = rnd.Chance(0.5);
  const int64_t rows = more_rows ? T + rnd.Int(1, 3) : T, cols = more_rows ? h : h + rnd.Int(1, 3);
  const uint64_t seed = rnd.Next();
  const std::string input =
      Str("n = ", n, " ranks, E = ", E, ", k = ", k, ", a forward of x [", T, ", ", h, "]");
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(3);
  auto st = comm::RunRanks(
      n,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        Routing r = testutil::RandomRouting(T, E, k, seed + 2 * rank);
        Tensor x = testutil::RandomTensor({T, h}, seed + 2 * rank + 1);
        ExpertBackwardFn bwd = [](int, const Tensor& d) { return d; };
        EpCache empty;
        auto none = ExpertParallelBackward(x, r, empty, bwd, c, s);
        if (none.status().code() != absl::StatusCode::kFailedPrecondition) {
          return absl::InternalError("backward without a forward must be FailedPrecondition, got " +
                                     none.status().ToString());
        }
        EpCache cache;
        RETURN_IF_ERROR(ExpertParallelForward(x, r, ToyExpert, c, s, nullptr, &cache).status());
        auto wrong = ExpertParallelBackward(Tensor({rows, cols}), r, cache, bwd, c, s);
        if (wrong.status().code() != absl::StatusCode::kInvalidArgument) {
          return absl::InternalError(Str("dy [", rows, ", ", cols, "] for a forward of [", T, ", ", h,
                                         "] must be InvalidArgument, got ", wrong.status().ToString()));
        }
        return absl::OkStatus();
      },
      opt);
  EXPECT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
}

}  // namespace
}  // namespace distlab::moe
