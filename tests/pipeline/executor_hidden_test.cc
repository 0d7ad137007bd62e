// Hidden tests of Lab 5 stage C: the executor against a dense, unpipelined reference written here, and the
// message order that keeps it free of deadlocks.
//
// Every case draws its schedule (p, m, chunks, or a random valid schedule) and its problem (hidden size,
// rows, values) from the grading seed (test_util.h), within at most 4 ranks. A gradient that differs from the
// unpipelined model's is reported by block and element with the size of its error, a message order against
// one worked out here from a brute-force simulation by its first misplaced message.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/executor.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/zero_bubble.h"
#include "tests/pipeline/test_util.h"
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

using test::CaseRandom;
using test::Drawn;

// A drawn problem for p v blocks and m microbatches: hidden size, rows and the values' seed.
struct Drawing {
  PipelineProblem problem;
  std::string text;
};
Drawing DrawProblem(CaseRandom& rnd, int p, int m, int v = 1) {
  const int hidden = rnd.Int(3, 8), rows = rnd.Int(1, 4);
  const uint64_t seed = rnd.Int(1, 1 << 30);
  return {MakeProblem(p, m, hidden, rows, seed, v),
          "MakeProblem(" + std::to_string(p) + ", " + std::to_string(m) + ", " + std::to_string(hidden) +
              ", " + std::to_string(rows) + ", " + std::to_string(seed) +
              (v == 1 ? ")" : ", " + std::to_string(v) + ")")};
}

// |got - want| within an absolute floor plus a relative tolerance; else false, and how many times the
// tolerance it is off by (two digits: the size of the mistake, not the value expected).
bool Close(double got, double want, double floor, double rel, std::string* off) {
  const double tolerance = floor + rel * std::abs(want);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", std::abs(got - want) / tolerance);
  *off = buf;
  return std::abs(got - want) <= tolerance;
}

// f32 arithmetic against the double reference: relative 1e-4 with an absolute floor. The first element that
// differs is named by block and index with the size of its error, not its expected value.
void ExpectMatchesDense(const Schedule& sc, const PipelineProblem& pr) {
  const Dense want = DenseReference(pr);
  testing::Activity activity("RunPipeline " + sc.name);
  ASSERT_OK_AND_ASSIGN(ExecResult got, RunPipeline(sc, pr, Fast()));
  std::string off;
  EXPECT_HOLDS(Close(got.loss, want.loss, 1e-5, 1e-4, &off))
      << "the loss " << got.loss << " differs from the unpipelined model's (off by " << off
      << " times the tolerance, 1e-5 + 1e-4 relative)";
  ASSERT_EQ(static_cast<int>(got.weight_grad.size()), pr.p * pr.v) << "one weight gradient per block";
  ASSERT_EQ(static_cast<int>(got.bias_grad.size()), pr.p * pr.v) << "one bias gradient per block";
  for (int s = 0; s < pr.p * pr.v; ++s) {
    ASSERT_EQ(got.weight_grad[s].size(), want.dw[s].size()) << "block " << s << ": dW has h*h elements";
    ASSERT_EQ(got.bias_grad[s].size(), want.db[s].size()) << "block " << s << ": db has h elements";
    for (size_t k = 0; k < want.dw[s].size(); ++k) {
      if (!Close(got.weight_grad[s][k], want.dw[s][k], 1e-6, 1e-4, &off)) {
        ADD_FAILURE() << "block " << s << " (rank " << s % pr.p << ", chunk " << s / pr.p << "): dW[" << k
                      << "] = " << got.weight_grad[s][k]
                      << " differs from the unpipelined model's gradient (off by " << off
                      << " times the tolerance, 1e-6 + 1e-4 relative)";
        return;
      }
    }
    for (size_t k = 0; k < want.db[s].size(); ++k) {
      if (!Close(got.bias_grad[s][k], want.db[s][k], 1e-6, 1e-4, &off)) {
        ADD_FAILURE() << "block " << s << " (rank " << s % pr.p << ", chunk " << s / pr.p << "): db[" << k
                      << "] = " << got.bias_grad[s][k]
                      << " differs from the unpipelined model's gradient (off by " << off
                      << " times the tolerance, 1e-6 + 1e-4 relative)";
        return;
      }
    }
  }
}

std::string Call(const std::string& fn, int p, int m) {
  return fn + "(" + std::to_string(p) + ", " + std::to_string(m) + ")";
}

// GPipe on 3 or 4 ranks (where a message order by sender instead of by time deadlocks), m >= 2.
TEST(RunPipeline, GPipeGradientsMatchUnpipelined) {
  CaseRandom rnd;
  const int p = rnd.Int(3, 4), m = rnd.Int(2, 8);
  const Drawing d = DrawProblem(rnd, p, m);
  SCOPED_TRACE(Drawn(Call("GPipe", p, m) + " on " + d.text));
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(p, m));
  ExpectMatchesDense(sc, d.problem);
}

// 1F1B, ZB-H1: 2 to 4 ranks, m > p (stage 0 runs a backward before its last forward).
TEST(RunPipeline, OneFOneBGradientsMatchUnpipelined) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 4), m = rnd.Int(p + 1, 8);
  const Drawing d = DrawProblem(rnd, p, m);
  SCOPED_TRACE(Drawn(Call("OneFOneB", p, m) + " on " + d.text));
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
  ExpectMatchesDense(sc, d.problem);
}

TEST(RunPipeline, ZeroBubbleH1GradientsMatchUnpipelined) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 4), m = rnd.Int(p + 1, 8);
  const Drawing d = DrawProblem(rnd, p, m);
  SCOPED_TRACE(Drawn(Call("ZeroBubbleH1", p, m) + " on " + d.text));
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(p, m));
  ExpectMatchesDense(sc, d.problem);
}

// ZB-H2: m >= 2p (stage 0's 2p - 1 warm-up forwards, then a B before its last F).
TEST(RunPipeline, ZeroBubbleH2GradientsMatchUnpipelined) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 4), m = rnd.Int(2 * p, 2 * p + 2);
  const Drawing d = DrawProblem(rnd, p, m);
  SCOPED_TRACE(Drawn(Call("ZeroBubbleH2", p, m) + " on " + d.text));
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH2(p, m));
  ExpectMatchesDense(sc, d.problem);
}

// True when stage 0 runs a backward before its last forward.
bool BackwardBeforeLastForward(const std::vector<Op>& ops) {
  bool backward = false;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kForward && backward) return true;
    backward = backward || op.kind != OpKind::kForward;
  }
  return false;
}

// A random valid schedule on one stage, and one on 2 or 3 stages -- fused on some microbatches, split on
// others with their Ws late and out of order -- whose stage 0 runs a backward before its last forward.
TEST(RunPipeline, SingleStageAndHandWrittenSchedules) {
  CaseRandom rnd;
  {
    const Schedule one = test::DrawValid(rnd, 1, 1, 2, 4, 1, 1, 0.5);
    const Drawing d = DrawProblem(rnd, 1, one.m);
    SCOPED_TRACE(Drawn("the schedule " + test::ScheduleText(one) + " on " + d.text));
    ExpectMatchesDense(one, d.problem);
  }
  Schedule mixed = test::DrawValid(rnd, 2, 3, 2, 4, 1, 1, 0.5);
  for (int again = 0; again < 100 && !BackwardBeforeLastForward(mixed.stages[0]); ++again) {
    mixed = test::DrawValid(rnd, 2, 3, 2, 4, 1, 1, 0.5);
  }
  const Drawing d = DrawProblem(rnd, mixed.p, mixed.m);
  SCOPED_TRACE(Drawn("the schedule " + test::ScheduleText(mixed) + " on " + d.text));
  ExpectMatchesDense(mixed, d.problem);
}

TEST(RunPipeline, TimelineFollowsTheSchedule) {
  CaseRandom rnd;
  const int kind = rnd.Int(0, 2), p = rnd.Int(2, 4), m = rnd.Int(2 * p, 2 * p + 2);
  const char* names[3] = {"ZeroBubbleH2", "ZeroBubbleH1", "OneFOneB"};
  const Drawing d = DrawProblem(rnd, p, m);
  SCOPED_TRACE(Drawn(Call(names[kind], p, m) + " on " + d.text));
  ASSERT_OK_AND_ASSIGN(Schedule sc, kind == 0   ? ZeroBubbleH2(p, m)
                                    : kind == 1 ? ZeroBubbleH1(p, m)
                                                : OneFOneB(p, m));
  ASSERT_OK_AND_ASSIGN(ExecResult r, RunPipeline(sc, d.problem, Fast()));
  ASSERT_EQ(static_cast<int>(r.timeline.size()), p) << "one timeline row per rank";
  double latest = 0;
  for (int s = 0; s < p; ++s) {
    ASSERT_EQ(r.timeline[s].size(), sc.stages[s].size()) << "stage " << s << ": ops in the timeline";
    for (size_t k = 0; k < r.timeline[s].size(); ++k) {
      EXPECT_EQ(r.timeline[s][k].op, sc.stages[s][k]) << "stage " << s << " position " << k;
      EXPECT_LE(r.timeline[s][k].start, r.timeline[s][k].end) << "stage " << s << " position " << k;
      if (k > 0) {
        EXPECT_GE(r.timeline[s][k].start, r.timeline[s][k - 1].end - 1e-9)
            << "stage " << s << ": position " << k << " starts before position " << k - 1 << " ends";
      }
      latest = std::max(latest, r.timeline[s][k].end);
    }
  }
  EXPECT_NEAR(r.makespan_ms, latest, 1e-9) << "the makespan is the latest end";
}

// With artificial costs of a few ms per op, the run is at least as long as the simulator's makespan for
// those costs, and every op lasts at least its cost.
TEST(RunPipeline, ArtificialCostsAreHonoured) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 3), m = rnd.Int(p + 1, p + 2);
  ExecutorOptions o = Fast();
  o.forward_ms = test::Quarters(rnd, 4, 10), o.backward_ms = test::Quarters(rnd, 4, 12);
  o.weight_ms = test::Quarters(rnd, 2, 6);
  const Drawing d = DrawProblem(rnd, p, m);
  SCOPED_TRACE(Drawn(Call("OneFOneB", p, m) + " on " + d.text + ", F " + test::Num(o.forward_ms) + " ms, B " +
                     test::Num(o.backward_ms) + " ms, W " + test::Num(o.weight_ms) + " ms"));
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
  ASSERT_OK_AND_ASSIGN(ExecResult r, RunPipeline(sc, d.problem, o));
  ASSERT_OK_AND_ASSIGN(SimResult sim, Simulate(sc, Costs{o.forward_ms, o.backward_ms, o.weight_ms, 0}));
  EXPECT_GE(r.makespan_ms, sim.makespan - 1e-6) << "shorter than the simulated step";
  for (const auto& row : r.timeline) {
    for (const TimedOp& t : row) {
      const double cost = t.op.kind == OpKind::kForward ? o.forward_ms : o.backward_ms + o.weight_ms;
      EXPECT_GE(t.end - t.start, cost - 1e-3) << ToString(t.op) << " is shorter than its cost";
    }
  }
}

TEST(RunPipeline, RejectsMismatchedInput) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 3), m = rnd.Int(2, 4);
  const Drawing d = DrawProblem(rnd, p, m);
  const PipelineProblem& pr = d.problem;
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(p, m));
  const std::string at = Call("GPipe", p, m) + " on ";
  const int other_p = rnd.Chance(0.5) ? p + 1 : p - 1;
  EXPECT_EQ(RunPipeline(sc, MakeProblem(other_p, m, pr.hidden, pr.rows, 1), Fast()).status().code(),
            absl::StatusCode::kInvalidArgument)
      << Drawn(at + "a problem of p = " + std::to_string(other_p));
  EXPECT_EQ(RunPipeline(sc, MakeProblem(p, m + 1, pr.hidden, pr.rows, 1), Fast()).status().code(),
            absl::StatusCode::kInvalidArgument)
      << Drawn(at + "a problem of m = " + std::to_string(m + 1));
  PipelineProblem short_row = pr;
  const int i = rnd.Int(0, m - 1);
  short_row.input[i].pop_back();
  EXPECT_EQ(RunPipeline(sc, short_row, Fast()).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(at + d.text + " with the input of microbatch " + std::to_string(i) + " one value short");
  Schedule bad = sc;
  const int s = rnd.Int(0, p - 1), k = rnd.Int(0, 2 * m - 1);
  const Op gone = bad.stages[s][k];
  bad.stages[s].erase(bad.stages[s].begin() + k);
  EXPECT_EQ(RunPipeline(bad, pr, Fast()).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn("GPipe's rows without " + ToString(gone) + " on stage " + std::to_string(s) + " on " + d.text);
}

std::string MessageText(const Message& msg) {
  return std::to_string(msg.from) + "->" + std::to_string(msg.to) +
         (msg.activation ? " activation" : " gradient") + " of microbatch " + std::to_string(msg.mb) +
         (msg.chunk > 0 ? " from chunk " + std::to_string(msg.chunk) : "");
}

// MessageOrder of executor.h, worked out from the brute-force timeline: every message in the order of the
// time its op ends, ties by sender, then receiver, then the sender's timeline.
std::vector<Message> ReferenceOrder(const Schedule& sc, const Costs& c) {
  const test::Placed placed = test::ReferenceTimeline(sc, c);
  const int p = sc.p, n = p * sc.v;
  struct Timed {
    double t;
    Message msg;
  };
  std::vector<Timed> all;
  for (int s = 0; s < p; ++s) {
    for (const TimedOp& t : placed.timeline[s]) {
      const int k = VirtualStage(s, t.op.chunk, p);
      int to = -1;
      if (t.op.kind == OpKind::kForward && k + 1 < n) to = (k + 1) % p;
      if (test::IsBackward(t.op.kind) && k > 0) to = (k - 1) % p;
      if (to >= 0 && to != s)
        all.push_back({t.end, {s, to, t.op.kind == OpKind::kForward, t.op.mb, t.op.chunk}});
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Timed& a, const Timed& b) {
    if (a.t != b.t) return a.t < b.t;
    if (a.msg.from != b.msg.from) return a.msg.from < b.msg.from;
    return a.msg.to < b.msg.to;
  });
  std::vector<Message> out;
  for (const Timed& t : all) out.push_back(t.msg);
  return out;
}

void ExpectOrder(const std::vector<Message>& got, const std::vector<Message>& want) {
  for (size_t k = 0; k < std::max(got.size(), want.size()); ++k) {
    if (k >= got.size() || k >= want.size() || !(got[k] == want[k])) {
      ADD_FAILURE() << "message " << k << " of " << want.size() << " is "
                    << (k < got.size() ? MessageText(got[k]) : "missing")
                    << ": not the next in the order of the simulated send times (ties: sender, then receiver)"
                    << (k < got.size() && k < want.size() ? "" : "; you list " + std::to_string(got.size()));
      return;
    }
  }
}

// GPipe on two stages, drawn m and costs.
TEST(MessageOrder, GPipeOnTwoStages) {
  CaseRandom rnd;
  const int m = rnd.Int(1, 5);
  const Costs c{test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8),
                test::Quarters(rnd, 0, 4)};
  SCOPED_TRACE(Drawn(Call("GPipe", 2, m) + ", " + test::CostsText(c)));
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(2, m));
  ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, c));
  ExpectOrder(order, ReferenceOrder(sc, c));
}

// Causality on every rank: a message a stage sends after op k comes after every message that stage
// received for ops 0..k. (Both ends then meet their messages in the same order: no deadlock.) 1F1B, ZB-H1 and
// ZB-H2 on drawn p >= 3, m and costs.
TEST(MessageOrder, EveryRankMeetsItsInputsBeforeItsOutputs) {
  CaseRandom rnd;
  for (auto make : {&OneFOneB, &ZeroBubbleH1, &ZeroBubbleH2}) {
    const int p = rnd.Int(3, 5), m = rnd.Int(p, 2 * p + 2);
    const Costs c{test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8),
                  test::Quarters(rnd, 0, 4)};
    ASSERT_OK_AND_ASSIGN(Schedule sc, make(p, m));
    SCOPED_TRACE(Drawn(Call(sc.name, p, m) + ", " + test::CostsText(c)));
    ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, c));
    EXPECT_EQ(static_cast<int>(order.size()), 2 * (p - 1) * m)
        << "an activation and a gradient per boundary and mb";
    auto index_of = [&](const Message& msg) {
      return static_cast<int>(std::find(order.begin(), order.end(), msg) - order.begin());
    };
    for (int s = 0; s < p; ++s) {
      int latest_input = -1;
      for (const Op& op : sc.stages[s]) {
        const bool grad = op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward;
        if (op.kind == OpKind::kForward && s > 0)
          latest_input = std::max(latest_input, index_of({s - 1, s, true, op.mb}));
        if (grad && s < p - 1) latest_input = std::max(latest_input, index_of({s + 1, s, false, op.mb}));
        int out = -1;
        if (op.kind == OpKind::kForward && s < p - 1) out = index_of({s, s + 1, true, op.mb});
        if (grad && s > 0) out = index_of({s, s - 1, false, op.mb});
        if (out >= 0) {
          EXPECT_LT(out, static_cast<int>(order.size()))
              << "stage " << s << " " << ToString(op) << ": not sent";
          EXPECT_GT(out, latest_input) << "stage " << s << " sends the output of " << ToString(op)
                                       << " before a message it received earlier in its list";
        }
      }
    }
    if (HasFailure()) return;
  }
}

// Interleaved: p v blocks, chunk c of rank s is block c p + s; activations wrap from the last rank to rank 0.
// InterleavedOneFOneB on drawn p, m (a multiple of p) and v, then a random valid schedule on one rank with
// several chunks, which hands the tensor over without a message.
TEST(RunPipeline, InterleavedGradientsMatchUnpipelined) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    const int p = rnd.Int(2, 3), v = rnd.Int(2, 3), m = p * static_cast<int>(rnd.Int(1, 2));
    const Drawing d = DrawProblem(rnd, p, m, v);
    SCOPED_TRACE(Drawn("InterleavedOneFOneB(" + std::to_string(p) + ", " + std::to_string(m) + ", " +
                       std::to_string(v) + ") on " + d.text));
    ASSERT_OK_AND_ASSIGN(Schedule sc, InterleavedOneFOneB(p, m, v));
    ExpectMatchesDense(sc, d.problem);
    // The problem must have the schedule's v.
    EXPECT_EQ(RunPipeline(sc, MakeProblem(p, m, 4, 2, 1), Fast()).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "a problem of v = 1 for a schedule of v = " << v;
  }
  const Schedule one = test::DrawValid(rnd, 1, 1, 1, 3, 2, 3, 0.5);
  const Drawing d = DrawProblem(rnd, 1, one.m, one.v);
  SCOPED_TRACE(Drawn("the schedule " + test::ScheduleText(one) + " on " + d.text));
  ExpectMatchesDense(one, d.problem);
}

// Interleaved schedules on 2 or 3 ranks with 2 or 3 chunks -- every rank's forwards chunk by chunk and its
// backwards from the last chunk down, then a random valid one -- at drawn costs: the message order against
// the one worked out here (rank s's chunk c feeds virtual stage c p + s + 1, on rank 0 when s is the last).
// One rank: no messages at all.
TEST(MessageOrder, InterleavedWrapsFromTheLastRankToTheFirst) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 3), v = rnd.Int(2, 3), m = rnd.Int(1, 2);
  Schedule chunked{"x", p, m, std::vector<std::vector<Op>>(p), v};
  for (int s = 0; s < p; ++s) {
    for (int c = 0; c < v; ++c) {
      for (int i = 0; i < m; ++i) chunked.stages[s].push_back(F(i, c));
    }
    for (int c = v - 1; c >= 0; --c) {
      for (int i = 0; i < m; ++i) chunked.stages[s].push_back(BW(i, c));
    }
  }
  const Schedule drawn = test::DrawValid(rnd, 2, 3, 1, 2, 2, 3, 0.5);
  const Costs c{test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8),
                test::Quarters(rnd, 0, 4)};
  for (const Schedule* sc : std::vector<const Schedule*>{&chunked, &drawn}) {
    SCOPED_TRACE(Drawn("the schedule " + test::ScheduleText(*sc) + ", " + test::CostsText(c)));
    ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(*sc, c));
    ExpectOrder(order, ReferenceOrder(*sc, c));
    if (HasFailure()) return;
  }
  const Schedule one = test::DrawValid(rnd, 1, 1, 1, 2, 2, 3, 0.5);
  SCOPED_TRACE(Drawn("the schedule " + test::ScheduleText(one) + ", " + test::CostsText(c)));
  ASSERT_OK_AND_ASSIGN(std::vector<Message> none, MessageOrder(one, c));
  EXPECT_TRUE(none.empty()) << "one rank sends nothing; you list " << none.size() << " messages";
}

}  // namespace
}  // namespace distlab::pipeline
