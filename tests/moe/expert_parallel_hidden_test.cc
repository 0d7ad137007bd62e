// Lab 6 stage C, hidden: expert parallelism over n ranks equals the single-rank layer, every expert runs on
// its owner only, counts travel before tokens.
#include <atomic>
#include <cmath>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/expert_parallel.h"
#include "reference/comm/comm.h"
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
  auto st = comm::RunRanks(cs.n, [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
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
  }, opt);
  ASSERT_OK(comm::FirstError(st));
  EXPECT_EQ(foreign.load(), 0) << "an expert ran on a rank that does not own it";
  std::vector<std::vector<int64_t>> to(cs.n, std::vector<int64_t>(cs.n, 0));  // rows rank a sends to rank b
  for (int r = 0; r < cs.n; ++r) {
    ASSERT_EQ(y[r].shape(), x[r].shape());
    std::vector<double> want = Dense(x[r], routing[r]);
    for (int64_t i = 0; i < x[r].numel(); ++i) {
      ASSERT_NEAR(y[r].Get(i), want[i], 1e-5) << "rank " << r << " token " << i / cs.h << " column " << i % cs.h;
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
  auto st = comm::RunRanks(3, [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
    Routing r = testutil::RandomRouting(2, 4, 1, 9);
    Tensor x({2, 3});
    auto out = ExpertParallelForward(x, r, ToyExpert, c, s);
    if (out.status().code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError("E = 4 over n = 3 ranks must be InvalidArgument, got " + out.status().ToString());
    }
    return absl::OkStatus();
  }, opt);
  EXPECT_OK(comm::FirstError(st));
}

}  // namespace
}  // namespace distlab::moe
