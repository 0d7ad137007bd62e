// Lab 6 stage C, public tests: capacity and dropping by hand, and two-rank expert-parallel forwards and
// backwards with their dispatch tables.
#include "labs/moe/expert_parallel.h"

#include <cmath>
#include <mutex>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

TEST(ExpertCapacity, RoundsUp) {
  // T = 10 tokens, E = 4 experts, k = 1, factor 1: 2.5 tokens per expert -> capacity 3.
  ASSERT_OK_AND_ASSIGN(int64_t c, ExpertCapacity(10, 4, 1, 1.0));
  EXPECT_EQ(c, 3);
}

TEST(ExpertCapacity, ForgivesTheRoundingErrorOfTheFactor) {
  // x = load * factor / E in doubles, then ceil, but an x within 1e-9 (relative) above an integer is that
  // integer (moe_layer.h):
  //   100 * 1.1 / 10 = 11.000000000000002 -> 11     500 * 1.1 / 10 = 55 -> 55 (Megatron-LM's order: 56)
  //   100 * 1.1 / 2 = 55.00000000000001 -> 55       8 * 1.1 / 4 = 2.2 -> 3
  EXPECT_EQ(ExpertCapacity(100, 10, 1, 1.1).value(), 11);
  EXPECT_EQ(ExpertCapacity(500, 10, 1, 1.1).value(), 55);
  EXPECT_EQ(ExpertCapacity(100, 2, 1, 1.1).value(), 55);
  EXPECT_EQ(ExpertCapacity(8, 4, 1, 1.1).value(), 3);
  EXPECT_EQ(ExpertCapacity(100, 10, 2, 1.1, CapacityFormula::kAssignments).value(), 22);
}

TEST(ExpertCapacity, CountsTokensUnlessToldToCountAssignments) {
  // T = 8, E = 4, k = 2, factor 1.25: the default sizes an expert for T / E = 2 tokens -> ceil(2.5) = 3;
  // kAssignments for k T / E = 4 assignments -> 5.
  EXPECT_EQ(ExpertCapacity(8, 4, 2, 1.25).value(), 3);
  EXPECT_EQ(ExpertCapacity(8, 4, 2, 1.25, CapacityFormula::kAssignments).value(), 5);
}

TEST(ApplyCapacity, DropsByProbabilityOrByPosition) {
  // E = 2, k = 1, T = 4, every token on expert 0 with p(expert 0) = .6 .8 .6 .9; capacity 2:
  //   by probability: keeps tokens 3 (.9) and 1 (.8)           kept = [0 1 0 1]
  //   by position:    keeps tokens 0 and 1                     kept = [1 1 0 0]
  //   capacity 3 by probability: .9 .8, then the tie .6/.6 goes to the earlier token 0   kept = [1 1 0 1]
  auto routing = [] {
    Routing r;
    r.tokens = 4, r.experts = 2, r.top_k = 1;
    r.probs = {.6f, .4f, .8f, .2f, .6f, .4f, .9f, .1f};
    r.expert = {0, 0, 0, 0};
    r.gate = {1, 1, 1, 1};
    r.kept = {1, 1, 1, 1};
    return r;
  };
  Routing a = routing(), b = routing(), c = routing();
  ASSERT_OK(ApplyCapacity(a, 2, DropPolicy::kByProbability));
  ASSERT_OK(ApplyCapacity(b, 2, DropPolicy::kByPosition));
  ASSERT_OK(ApplyCapacity(c, 3, DropPolicy::kByProbability));
  EXPECT_EQ(a.kept, (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(b.kept, (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(c.kept, (std::vector<uint8_t>{1, 1, 0, 1}));
}

TEST(ApplyCapacity, TopTwoTableByHand) {
  // T = 4, E = 3, k = 2, capacity 2. Slot (t, j) is expert[t, j] with probability p[t, expert]:
  //
  //   token  p               slots (expert: p)    kept by probability   kept by position
  //   0      [.5  .3  .2 ]   0: .5    1: .3       1 0                   1 1
  //   1      [.3  .6  .1 ]   1: .6    0: .3       1 0                   1 1
  //   2      [.7  .1  .2 ]   0: .7    2: .2       1 1                   0 1
  //   3      [.4  .35 .25]   0: .4    1: .35      0 1                   0 0
  //
  //   expert 0 holds 4 slots: by probability it keeps .7 (token 2) and .5 (token 0), by position tokens 0, 1;
  //   expert 1 holds 3 slots: by probability .6 (token 1) and .35 (token 3), by position tokens 0, 1;
  //   expert 2 holds 1 slot and keeps it. Capacity 0 drops every slot. Gates never change.
  auto routing = [] {
    Routing r;
    r.tokens = 4, r.experts = 3, r.top_k = 2;
    r.probs = {.5f, .3f, .2f, .3f, .6f, .1f, .7f, .1f, .2f, .4f, .35f, .25f};
    r.expert = {0, 1, 1, 0, 0, 2, 0, 1};
    r.gate = {.625f, .375f, .667f, .333f, .778f, .222f, .533f, .467f};
    r.kept.assign(8, 1);
    return r;
  };
  Routing by_p = routing(), by_pos = routing(), none = routing();
  ASSERT_OK(ApplyCapacity(by_p, 2, DropPolicy::kByProbability));
  ASSERT_OK(ApplyCapacity(by_pos, 2, DropPolicy::kByPosition));
  ASSERT_OK(ApplyCapacity(none, 0, DropPolicy::kByProbability));
  EXPECT_EQ(by_p.kept, (std::vector<uint8_t>{1, 0, 1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(by_pos.kept, (std::vector<uint8_t>{1, 1, 1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(none.kept, (std::vector<uint8_t>(8, 0)));
  EXPECT_EQ(by_p.gate, routing().gate);
  EXPECT_EQ(by_pos.gate, routing().gate);
}

TEST(ExpertParallel, TwoRanksEachSendOneTokenAcross) {
  // E = 2 experts, n = 2 ranks (rank r owns expert r), k = 1, h = 1, two tokens per rank:
  //   rank 0: x = [1, 2], experts [0, 1]      rank 1: x = [3, 4], experts [0, 1]
  // expert e multiplies by 10 (e + 1); gate 1; y = x + expert(x):
  //   rank 0: y = [1 + 10, 2 + 40]            rank 1: y = [3 + 30, 4 + 80]
  std::vector<Tensor> y(2);
  std::mutex mu;
  auto st = comm::RunRanks(2, [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
    Routing r;
    r.tokens = 2, r.experts = 2, r.top_k = 1;
    r.probs = {.5f, .5f, .5f, .5f};
    r.expert = {0, 1};
    r.gate = {1.f, 1.f};
    r.kept = {1, 1};
    Tensor x = Tensor::FromVector({2, 1}, {1.f + 2 * rank, 2.f + 2 * rank});
    ExpertFn fn = [](int e, const Tensor& rows) {
      Tensor out = rows;
      for (int64_t i = 0; i < out.numel(); ++i) out.Set(i, 10.f * (e + 1) * rows.Get(i));
      return out;
    };
    auto out = ExpertParallelForward(x, r, fn, c, s);
    if (!out.ok()) return out.status();
    std::lock_guard<std::mutex> lock(mu);
    y[rank] = *out;
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
  EXPECT_EQ(y[0].ToVector(), (std::vector<float>{11, 42}));
  EXPECT_EQ(y[1].ToVector(), (std::vector<float>{33, 84}));
}

TEST(ExpertParallel, TwoRanksBackwardBringsGradientsBack) {
  // The forward above, then dy = 1 everywhere. Expert e is out = a x with a = 10 (e + 1), so its backward
  // maps a gradient row d to a d. Gates are 1:
  //   rank 0: out = [10, 40]  dgate = [10, 40]  dx = [11, 21]
  //   rank 1: out = [30, 80]  dgate = [30, 80]  dx = [11, 21]
  // (ExpertParallel.DispatchTableTwoRanksTopTwo has gates that are not 1.)
  std::vector<EpGrads> grads(2);
  auto st = comm::RunRanks(2, [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
    Routing r;
    r.tokens = 2, r.experts = 2, r.top_k = 1;
    r.probs = {.5f, .5f, .5f, .5f};
    r.expert = {0, 1};
    r.gate = {1.f, 1.f};
    r.kept = {1, 1};
    Tensor x = Tensor::FromVector({2, 1}, {1.f + 2 * rank, 2.f + 2 * rank});
    auto scale = [](int e, const Tensor& rows) {
      Tensor out = rows;
      for (int64_t i = 0; i < out.numel(); ++i) out.Set(i, 10.f * (e + 1) * rows.Get(i));
      return out;
    };
    EpCache cache;
    auto y = ExpertParallelForward(x, r, scale, c, s, nullptr, &cache);
    if (!y.ok()) return y.status();
    auto g = ExpertParallelBackward(Tensor::FromVector({2, 1}, {1.f, 1.f}), r, cache, scale, c, s);
    if (!g.ok()) return g.status();
    grads[rank] = *g;  // each rank its own element
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
  EXPECT_EQ(grads[0].dgate, (std::vector<float>{10, 40}));
  EXPECT_EQ(grads[1].dgate, (std::vector<float>{30, 80}));
  EXPECT_EQ(grads[0].dx.ToVector(), (std::vector<float>{11, 21}));
  EXPECT_EQ(grads[1].dx.ToVector(), (std::vector<float>{11, 21}));
}

// The dispatch of ExpertParallel.DispatchTableTwoRanksTopTwo: n = 2 ranks, E = 4 (rank 0 owns experts 0 and
// 1, rank 1 owns 2 and 3), k = 2, h = 1, T = 3 tokens per rank, every gate .5; expert e multiplies by 10^e.
//
//   rank 0: x = [1 2 3]                      rank 1: x = [4 5 6]
//     token 0: experts {2, 0}                  token 0: experts {0, 3}
//     token 1: experts {1, 3}                  token 1: experts {3, 2}
//     token 2: experts {2, 1}, the second      token 2: experts {1, 3}
//              slot dropped by capacity
struct DispatchCase {
  std::vector<Routing> routing;
  std::vector<Tensor> x;
  DispatchCase() {
    const std::vector<std::vector<int32_t>> expert = {{2, 0, 1, 3, 2, 1}, {0, 3, 3, 2, 1, 3}};
    for (int rank = 0; rank < 2; ++rank) {
      Routing r;
      r.tokens = 3, r.experts = 4, r.top_k = 2;
      r.probs.assign(12, .25f);
      r.expert = expert[rank];
      r.gate.assign(6, .5f);
      r.kept.assign(6, 1);
      if (rank == 0) r.kept[5] = 0;
      routing.push_back(r);
      const float first = 1.f + 3 * rank;
      x.push_back(Tensor::FromVector({3, 1}, {first, first + 1, first + 2}));
    }
  }
};

Tensor TimesPowerOfTen(int e, const Tensor& rows) {
  Tensor out = rows;
  for (int64_t i = 0; i < out.numel(); ++i) out.Set(i, std::pow(10.f, static_cast<float>(e)) * rows.Get(i));
  return out;
}

TEST(ExpertParallel, DispatchTableTwoRanksTopTwo) {
  // The rows each local expert receives (peer 0's first, each peer's in token order), as x values:
  //
  //   expert (owner)   from rank 0      from rank 1      rows
  //   0 (rank 0)       token 0: 1       token 0: 4       [1 4]
  //   1 (rank 0)       token 1: 2       token 2: 6       [2 6]       (rank 0's token 2 slot 1 was dropped)
  //   2 (rank 1)       tokens 0, 2: 1 3 token 1: 5       [1 3 5]
  //   3 (rank 1)       token 1: 2       tokens 0-2: 4 5 6  [2 4 5 6]
  //
  //   rows that cross ranks: rank 0 sends 3 (to experts 2, 2, 3) and receives 2; rank 1 sends 2, receives 3
  //   y = x + .5 * (sum over kept slots of 10^e x):
  //     rank 0: [1 + .5 (100 + 1), 2 + .5 (10 + 1000), 3 + .5 * 300]        = [51.5 1012 153]
  //     rank 1: [4 + .5 (4 + 4000), 5 + .5 (5000 + 500), 6 + .5 (60 + 6000)] = [2006 2755 3036]
  DispatchCase cs;
  std::vector<std::vector<float>> rows(4);
  std::vector<Tensor> y(2);
  std::vector<EpStats> stats(2);
  std::mutex mu;
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  auto st = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        ExpertFn fn = [&](int e, const Tensor& in) {
          std::lock_guard<std::mutex> lock(mu);
          std::vector<float> v = in.ToVector();
          rows[e].insert(rows[e].end(), v.begin(), v.end());
          return TimesPowerOfTen(e, in);
        };
        // Each rank writes its own elements of y and stats.
        absl::StatusOr<Tensor> out =
            ExpertParallelForward(cs.x[rank], cs.routing[rank], fn, c, s, &stats[rank]);
        if (out.ok()) y[rank] = *std::move(out);
        return out.status();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  EXPECT_EQ(rows[0], (std::vector<float>{1, 4})) << "expert 0's rows";
  EXPECT_EQ(rows[1], (std::vector<float>{2, 6})) << "expert 1's rows";
  EXPECT_EQ(rows[2], (std::vector<float>{1, 3, 5})) << "expert 2's rows";
  EXPECT_EQ(rows[3], (std::vector<float>{2, 4, 5, 6})) << "expert 3's rows";
  EXPECT_EQ(stats[0].rows_sent, 3);
  EXPECT_EQ(stats[0].rows_received, 2);
  EXPECT_EQ(stats[1].rows_sent, 2);
  EXPECT_EQ(stats[1].rows_received, 3);
  EXPECT_EQ(y[0].ToVector(), (std::vector<float>{51.5f, 1012, 153}));
  EXPECT_EQ(y[1].ToVector(), (std::vector<float>{2006, 2755, 3036}));
}

TEST(ExpertParallel, BackwardTableTwoRanksTopTwo) {
  // The forward of ExpertParallel.DispatchTableTwoRanksTopTwo, then dy = 1 on rank 0's tokens and 2 on rank
  // 1's. Expert e's backward maps a gradient row d to 10^e d.
  //
  //   the gradient rows each expert's backward receives (in the order of its forward rows):
  //     expert 0: [.5 1]   expert 1: [.5 1]   expert 2: [.5 .5 1]   expert 3: [.5 1 1 1]
  //   dgate (slot by slot; the dropped slot 0):
  //     rank 0: [100 1 | 20 2000 | 300 0]        rank 1: [8 8000 | 10000 1000 | 120 12000]
  //   dx:
  //     rank 0: [51.5 506 51]                    rank 1: [1003 1102 1012]
  DispatchCase cs;
  std::vector<std::vector<float>> drows(4);
  std::vector<EpGrads> grads(2);
  std::vector<EpStats> fwd(2), bwd(2);
  std::mutex mu;
  comm::CommOptions opt;
  opt.timeout = std::chrono::seconds(5);
  auto st = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        ExpertBackwardFn back = [&](int e, const Tensor& d) {
          std::lock_guard<std::mutex> lock(mu);
          std::vector<float> v = d.ToVector();
          drows[e].insert(drows[e].end(), v.begin(), v.end());
          return TimesPowerOfTen(e, d);
        };
        EpCache cache;
        EpStats f, b;
        auto y = ExpertParallelForward(cs.x[rank], cs.routing[rank], TimesPowerOfTen, c, s, &f, &cache);
        if (!y.ok()) return y.status();
        const float g = 1.f + rank;
        auto gr = ExpertParallelBackward(Tensor::FromVector({3, 1}, {g, g, g}), cs.routing[rank], cache, back,
                                         c, s, &b);
        if (!gr.ok()) return gr.status();
        std::lock_guard<std::mutex> lock(mu);
        grads[rank] = *gr, fwd[rank] = f, bwd[rank] = b;
        return absl::OkStatus();
      },
      opt);
  ASSERT_OK(comm::FirstError(st));
  EXPECT_EQ(drows[0], (std::vector<float>{.5f, 1}));
  EXPECT_EQ(drows[1], (std::vector<float>{.5f, 1}));
  EXPECT_EQ(drows[2], (std::vector<float>{.5f, .5f, 1}));
  EXPECT_EQ(drows[3], (std::vector<float>{.5f, 1, 1, 1}));
  EXPECT_EQ(grads[0].dgate, (std::vector<float>{100, 1, 20, 2000, 300, 0}));
  EXPECT_EQ(grads[1].dgate, (std::vector<float>{8, 8000, 10000, 1000, 120, 12000}));
  EXPECT_EQ(grads[0].dx.ToVector(), (std::vector<float>{51.5f, 506, 51}));
  EXPECT_EQ(grads[1].dx.ToVector(), (std::vector<float>{1003, 1102, 1012}));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(bwd[r].rows_sent, fwd[r].rows_sent) << "rank " << r;
    EXPECT_EQ(bwd[r].rows_received, fwd[r].rows_received) << "rank " << r;
  }
}

}  // namespace
}  // namespace distlab::moe
