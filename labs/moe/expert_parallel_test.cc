// Lab 6 stage C, public tests: capacity and a two-rank expert-parallel forward and backward.
#include "labs/moe/expert_parallel.h"

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
  // The forward above, then dy = 1 everywhere. Expert e is out = a x with a = 10 (e + 1), so its backward is
  // dx_rows = a * drows; with gate 1: dgate[t] = dy[t] . out[t] and dx[t] = dy[t] + a dy[t]:
  //   rank 0: out = [10, 40]  dgate = [10, 40]  dx = [1 + 10, 1 + 20]
  //   rank 1: out = [30, 80]  dgate = [30, 80]  dx = [1 + 10, 1 + 20]
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

}  // namespace
}  // namespace distlab::moe
