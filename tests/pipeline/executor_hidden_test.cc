// Hidden tests of Lab 5 stage C: the executor against a dense, unpipelined reference written here, and the
// message order that keeps it free of deadlocks.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/executor.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/zero_bubble.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

struct Dense {
  double loss = 0;
  std::vector<std::vector<double>> dw, db;
};

double GeluD(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double GeluGradD(double x) {
  const double k = std::sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

// The whole model on one thread, in double: forward all p v blocks, MSE loss, backward, summed over
// microbatches.
Dense DenseReference(const PipelineProblem& pr) {
  const int p = pr.p * pr.v, h = pr.hidden, R = pr.rows;
  Dense d;
  d.dw.assign(p, std::vector<double>(h * h, 0));
  d.db.assign(p, std::vector<double>(h, 0));
  for (int i = 0; i < pr.m; ++i) {
    std::vector<std::vector<double>> xs(p + 1), zs(p);
    xs[0].assign(pr.input[i].begin(), pr.input[i].end());
    for (int s = 0; s < p; ++s) {
      zs[s].assign(R * h, 0);
      xs[s + 1].assign(R * h, 0);
      for (int r = 0; r < R; ++r) {
        for (int o = 0; o < h; ++o) {
          double acc = pr.bias[s][o];
          for (int k = 0; k < h; ++k) acc += xs[s][r * h + k] * pr.weight[s][o * h + k];
          zs[s][r * h + o] = acc;
          xs[s + 1][r * h + o] = GeluD(acc);
        }
      }
    }
    std::vector<double> dy(R * h);
    for (int k = 0; k < R * h; ++k) {
      const double diff = xs[p][k] - pr.target[i][k];
      d.loss += 0.5 * diff * diff / (R * pr.m);
      dy[k] = diff / (R * pr.m);
    }
    for (int s = p - 1; s >= 0; --s) {
      std::vector<double> g(R * h), dx(R * h, 0);
      for (int k = 0; k < R * h; ++k) g[k] = dy[k] * GeluGradD(zs[s][k]);
      for (int r = 0; r < R; ++r) {
        for (int o = 0; o < h; ++o) {
          d.db[s][o] += g[r * h + o];
          for (int k = 0; k < h; ++k) {
            d.dw[s][o * h + k] += g[r * h + o] * xs[s][r * h + k];
            dx[r * h + k] += g[r * h + o] * pr.weight[s][o * h + k];
          }
        }
      }
      dy = dx;
    }
  }
  return d;
}

ExecutorOptions Fast() {
  ExecutorOptions o;
  o.timeout = testing::Scaled(std::chrono::milliseconds(3000));
  return o;
}

void ExpectMatchesDense(const Schedule& sc, const PipelineProblem& pr) {
  const Dense want = DenseReference(pr);
  testing::Activity activity("RunPipeline " + sc.name);
  ASSERT_OK_AND_ASSIGN(ExecResult got, RunPipeline(sc, pr, Fast()));
  // f32 arithmetic against a double reference: relative 1e-4 with an absolute floor.
  EXPECT_NEAR(got.loss, want.loss, 1e-5 + 1e-4 * std::abs(want.loss)) << sc.name;
  ASSERT_EQ(static_cast<int>(got.weight_grad.size()), pr.p * pr.v) << sc.name;
  ASSERT_EQ(static_cast<int>(got.bias_grad.size()), pr.p * pr.v) << sc.name;
  for (int s = 0; s < pr.p * pr.v; ++s) {
    ASSERT_EQ(got.weight_grad[s].size(), want.dw[s].size()) << sc.name;
    ASSERT_EQ(got.bias_grad[s].size(), want.db[s].size()) << sc.name;
    for (size_t k = 0; k < want.dw[s].size(); ++k) {
      ASSERT_NEAR(got.weight_grad[s][k], want.dw[s][k], 1e-6 + 1e-4 * std::abs(want.dw[s][k]))
          << sc.name << " stage " << s << " dW[" << k << "]";
    }
    for (size_t k = 0; k < want.db[s].size(); ++k) {
      ASSERT_NEAR(got.bias_grad[s][k], want.db[s][k], 1e-6 + 1e-4 * std::abs(want.db[s][k]))
          << sc.name << " stage " << s << " db[" << k << "]";
    }
  }
}

TEST(RunPipeline, GPipeGradientsMatchUnpipelined) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(4, 6));
  ExpectMatchesDense(sc, MakeProblem(4, 6, 6, 3, 11));
}

TEST(RunPipeline, OneFOneBGradientsMatchUnpipelined) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(4, 6));
  ExpectMatchesDense(sc, MakeProblem(4, 6, 6, 3, 12));
}

TEST(RunPipeline, ZeroBubbleH1GradientsMatchUnpipelined) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(4, 6));
  ExpectMatchesDense(sc, MakeProblem(4, 6, 6, 3, 13));
}

TEST(RunPipeline, ZeroBubbleH2GradientsMatchUnpipelined) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH2(4, 8));
  ExpectMatchesDense(sc, MakeProblem(4, 8, 5, 2, 14));
}

TEST(RunPipeline, SingleStageAndHandWrittenSchedules) {
  ASSERT_OK_AND_ASSIGN(Schedule one, OneFOneB(1, 3));
  ExpectMatchesDense(one, MakeProblem(1, 3, 4, 2, 15));
  // Split on stage 1 with its Ws late and out of order, fused on stage 0.
  const Schedule mixed{
      "mixed",
      2,
      3,
      {{F(0), F(1), BW(0), F(2), BW(1), BW(2)}, {F(0), B(0), F(1), B(1), F(2), B(2), W(2), W(0), W(1)}}};
  ExpectMatchesDense(mixed, MakeProblem(2, 3, 4, 2, 16));
}

TEST(RunPipeline, TimelineFollowsTheSchedule) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH2(3, 5));
  ASSERT_OK_AND_ASSIGN(ExecResult r, RunPipeline(sc, MakeProblem(3, 5, 4, 2, 17), Fast()));
  ASSERT_EQ(r.timeline.size(), 3u);
  double latest = 0;
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(r.timeline[s].size(), sc.stages[s].size());
    for (size_t k = 0; k < r.timeline[s].size(); ++k) {
      EXPECT_EQ(r.timeline[s][k].op, sc.stages[s][k]) << "stage " << s << " position " << k;
      EXPECT_LE(r.timeline[s][k].start, r.timeline[s][k].end);
      if (k > 0) {
        EXPECT_GE(r.timeline[s][k].start, r.timeline[s][k - 1].end - 1e-9);
      }
      latest = std::max(latest, r.timeline[s][k].end);
    }
  }
  EXPECT_NEAR(r.makespan_ms, latest, 1e-9);
}

// With artificial costs of a few ms per op, the run is at least as long as the simulator's makespan for
// those costs, and every op lasts at least its cost.
TEST(RunPipeline, ArtificialCostsAreHonoured) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(2, 3));
  ExecutorOptions o = Fast();
  o.forward_ms = 2, o.backward_ms = 3, o.weight_ms = 1;
  ASSERT_OK_AND_ASSIGN(ExecResult r, RunPipeline(sc, MakeProblem(2, 3, 4, 2, 18), o));
  ASSERT_OK_AND_ASSIGN(SimResult sim, Simulate(sc, Costs{2, 3, 1, 0}));
  EXPECT_GE(r.makespan_ms, sim.makespan - 1e-6);
  for (const auto& row : r.timeline) {
    for (const TimedOp& t : row) {
      EXPECT_GE(t.end - t.start, (t.op.kind == OpKind::kForward ? 2.0 : 4.0) - 1e-3) << ToString(t.op);
    }
  }
}

TEST(RunPipeline, RejectsMismatchedInput) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(2, 2));
  EXPECT_EQ(RunPipeline(sc, MakeProblem(3, 2, 4, 2, 1), Fast()).status().code(),
            absl::StatusCode::kInvalidArgument);
  PipelineProblem pr = MakeProblem(2, 2, 4, 2, 1);
  pr.input[1].pop_back();
  EXPECT_EQ(RunPipeline(sc, pr, Fast()).status().code(), absl::StatusCode::kInvalidArgument);
  const Schedule bad{"bad", 2, 2, {{F(0), F(1), BW(1)}, {F(0), F(1), BW(0), BW(1)}}};
  EXPECT_EQ(RunPipeline(bad, MakeProblem(2, 2, 4, 2, 1), Fast()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// GPipe, p = 2, m = 2, unit costs: act 0 at t=1, act 1 at t=2, grad 0 at t=5 (stage 1's BW0 ends), grad 1
// at 7.
TEST(MessageOrder, GPipeOnTwoStages) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(2, 2));
  ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, Costs{1, 1, 1, 0}));
  const std::vector<Message> want = {{0, 1, true, 0}, {0, 1, true, 1}, {1, 0, false, 0}, {1, 0, false, 1}};
  EXPECT_EQ(order, want);
}

// Causality on every rank: a message a stage sends after op k comes after every message that stage
// received for ops 0..k. (Both ends then meet their messages in the same order: no deadlock.)
TEST(MessageOrder, EveryRankMeetsItsInputsBeforeItsOutputs) {
  for (auto make : {&OneFOneB, &ZeroBubbleH1, &ZeroBubbleH2}) {
    ASSERT_OK_AND_ASSIGN(Schedule sc, make(4, 8));
    ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, Costs{1, 2, 1, 0}));
    EXPECT_EQ(order.size(), 2u * 3 * 8);
    auto index_of = [&](const Message& msg) {
      return static_cast<int>(std::find(order.begin(), order.end(), msg) - order.begin());
    };
    for (int s = 0; s < 4; ++s) {
      int latest_input = -1;
      for (const Op& op : sc.stages[s]) {
        const bool grad = op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward;
        if (op.kind == OpKind::kForward && s > 0)
          latest_input = std::max(latest_input, index_of({s - 1, s, true, op.mb}));
        if (grad && s < 3) latest_input = std::max(latest_input, index_of({s + 1, s, false, op.mb}));
        int out = -1;
        if (op.kind == OpKind::kForward && s < 3) out = index_of({s, s + 1, true, op.mb});
        if (grad && s > 0) out = index_of({s, s - 1, false, op.mb});
        if (out >= 0) {
          EXPECT_LT(out, static_cast<int>(order.size()));
          EXPECT_GT(out, latest_input) << sc.name << " stage " << s << " " << ToString(op);
        }
      }
    }
  }
}

// Interleaved: p v blocks, chunk c of rank s is block c p + s; activations wrap from the last rank to rank 0.
// One rank with two chunks hands the tensor over without a message.
TEST(RunPipeline, InterleavedGradientsMatchUnpipelined) {
  ASSERT_OK_AND_ASSIGN(Schedule two, InterleavedOneFOneB(2, 4, 2));
  ExpectMatchesDense(two, MakeProblem(2, 4, 5, 2, 21, 2));
  ASSERT_OK_AND_ASSIGN(Schedule three, InterleavedOneFOneB(3, 6, 3));
  ExpectMatchesDense(three, MakeProblem(3, 6, 4, 2, 22, 3));
  const Schedule one{"one rank",
                     1,
                     2,
                     {{F(0), F(0, 1), F(1), B(0, 1), F(1, 1), BW(0), B(1, 1), BW(1), W(1, 1), W(0, 1)}},
                     2};
  ExpectMatchesDense(one, MakeProblem(1, 2, 4, 2, 23, 2));
  // The problem must have the schedule's v.
  EXPECT_EQ(RunPipeline(two, MakeProblem(2, 4, 5, 2, 21), Fast()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// p = 2, v = 2, m = 1, unit costs (BW = 2):
//   rank 0: F0 [0,1]  F0.1 [2,3]  BW0.1 [6,8]  BW0 [10,12]
//   rank 1: F0 [1,2]  F0.1 [3,4]  BW0.1 [4,6]  BW0 [8,10]
// Rank 1's F0 feeds rank 0's chunk 1; chunk 1 of rank 0 sends its gradient to chunk 0 of rank 1.
TEST(MessageOrder, InterleavedWrapsFromTheLastRankToTheFirst) {
  const Schedule sc{"x", 2, 1, {{F(0), F(0, 1), BW(0, 1), BW(0)}, {F(0), F(0, 1), BW(0, 1), BW(0)}}, 2};
  ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, Costs{1, 1, 1, 0}));
  const std::vector<Message> want = {{0, 1, true, 0, 0},  {1, 0, true, 0, 0},  {0, 1, true, 0, 1},
                                     {1, 0, false, 0, 1}, {0, 1, false, 0, 1}, {1, 0, false, 0, 0}};
  EXPECT_EQ(order, want);
  // One rank: no messages at all.
  const Schedule one{"x", 1, 1, {{F(0), F(0, 1), BW(0, 1), BW(0)}}, 2};
  ASSERT_OK_AND_ASSIGN(std::vector<Message> none, MessageOrder(one, Costs{1, 1, 1, 0}));
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace distlab::pipeline
