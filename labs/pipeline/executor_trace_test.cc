// Lab 5 (pipeline), stage C, public: your executor seen through a trace (exec_trace.h, given) -- F, B and W
// per stage and microbatch beside the Send/Recv events the runtime records -- and the bubble measured back
// from that trace within 5 % of the simulator's for 1F1B and ZB-H1.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/exec_trace.h"
#include "labs/pipeline/executor.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"
#include "labs/pipeline/zero_bubble.h"
#include "nlohmann/json.hpp"
#include "reference/trace/trace.h"
#include "reference/trace/trace_file.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

// One traced step: the executor's run, its timeline recorded as trace events, the trace read back.
struct TracedRun {
  ExecResult result;
  trace::TraceDoc doc;
};

absl::StatusOr<TracedRun> RunTraced(const Schedule& sc, const PipelineProblem& pr, const ExecutorOptions& o) {
  trace::Start();
  const int64_t origin = trace::NowNs();
  absl::StatusOr<ExecResult> result = RunPipeline(sc, pr, o);
  if (result.ok()) RecordExecTrace(*result, origin);
  (void)trace::Stop();
  const std::string text = trace::Json();
  trace::Clear();
  if (!result.ok()) return result.status();
  for (const std::string& p : trace::CheckTrace(nlohmann::json::parse(text))) ADD_FAILURE() << p;
  absl::StatusOr<trace::TraceDoc> doc = trace::ParseTrace(text);
  if (!doc.ok()) return doc.status();
  return TracedRun{*std::move(result), *std::move(doc)};
}

// 1F1B on 3 ranks, 4 microbatches: every op is one "pipeline" event on its stage's track, and every
// message one Send on the sender and one Recv on the receiver, which starts after the op that made it.
//   rank 0: F0 F1 F2 BW0 F3 BW1 BW2 BW3     rank 2: F0 BW0 F1 BW1 F2 BW2 F3 BW3
TEST(ExecutorTrace, EveryOpAndEveryMessageIsInTheTrace) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(3, 4));
  ExecutorOptions o;
  o.forward_ms = o.backward_ms = 1;
  ASSERT_OK_AND_ASSIGN(TracedRun run, RunTraced(sc, MakeProblem(3, 4, 8, 2, 5), o));
  std::map<int, std::vector<trace::TraceEvent>> ops, sends, recvs;
  for (const trace::TraceEvent& e : run.doc.events) {
    if (e.cat == "pipeline") ops[e.pid].push_back(e);
    if (e.cat == "comm" && e.name == "Send") sends[e.pid].push_back(e);
    if (e.cat == "comm" && e.name == "Recv") recvs[e.pid].push_back(e);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<Message> order, MessageOrder(sc, Costs{1, 1, 1, 0}));
  size_t total_sends = 0, total_recvs = 0;
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(ops[s].size(), sc.stages[s].size()) << "stage " << s;
    for (size_t k = 0; k < ops[s].size(); ++k) {
      EXPECT_EQ(ops[s][k].name, ToString(sc.stages[s][k])) << "stage " << s << " op " << k;
      EXPECT_EQ(ops[s][k].tid, ComputeTrack(s));
      EXPECT_EQ(ops[s][k].args["microbatch"], sc.stages[s][k].mb);
    }
    EXPECT_EQ(run.doc.thread_names.at({s, ComputeTrack(s)}), "stage " + std::to_string(s) + " compute");
    total_sends += sends[s].size();
    total_recvs += recvs[s].size();
    // Each activation of stage s leaves after the F that made it: the k-th Send to s+1 after the k-th F.
    std::vector<double> f_ends;
    for (const trace::TraceEvent& e : ops[s]) {
      if (e.name[0] == 'F') f_ends.push_back(e.end());
    }
    size_t k = 0;
    for (const trace::TraceEvent& e : sends[s]) {
      if (e.args["peer"] != s + 1) continue;
      ASSERT_LT(k, f_ends.size());
      EXPECT_GE(e.ts, f_ends[k] - 1e-3)
          << "stage " << s << ": activation " << k << " sent before its F ended";
      ++k;
    }
  }
  EXPECT_EQ(total_sends, order.size());
  EXPECT_EQ(total_recvs, order.size());
}

// The step's bubble rate from the trace equals the executor's own, and is within 5 % of the simulator's for
// the same schedule with the costs the run actually had, all read from the trace: the ops' mean durations
// (a busy machine stretches every sleep alike) and the mean time a waiting op waited for its message
// after the op that sent it ended (the hand-offs through both ranks' communication threads). A run on a
// loaded machine can still miss (one late wake-up on the critical path); up to 5 runs, each reported.
// Under a sanitizer the ops' bookkeeping costs more than their sleeps in uneven amounts, so the comparison
// says nothing there and is skipped (the trace's own checks above still run).
void ExpectBubbleNearTheSimulator(const Schedule& sc) {
  if (const std::string sanitizer = distlab::testing::Sanitizer(); !sanitizer.empty()) {
    GTEST_SKIP() << "timing comparison skipped under " << sanitizer;
  }
  ExecutorOptions o;
  o.forward_ms = o.backward_ms = o.weight_ms = 30;
  o.timeout = distlab::testing::Scaled(std::chrono::seconds(20));
  const PipelineProblem pr = MakeProblem(sc.p, sc.m, 8, 2, 11);
  std::string attempts;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    ASSERT_OK_AND_ASSIGN(TracedRun run, RunTraced(sc, pr, o));
    ASSERT_OK_AND_ASSIGN(TraceBubble b, BubbleFromTrace(run.doc));
    EXPECT_NEAR(b.bubble_rate, run.result.bubble_rate, 1e-3) << "the trace and ExecResult disagree";
    EXPECT_NEAR(b.makespan_ms, run.result.makespan_ms, 1e-2);
    Costs c{b.mean_f_ms, b.mean_b_ms, b.mean_w_ms, b.comm_ms};
    if (b.mean_b_ms == 0) c.backward = c.weight = b.mean_bw_ms / 2;  // only fused BW ops: T_B = T_W here
    ASSERT_OK_AND_ASSIGN(SimResult sim, Simulate(sc, c));
    const double rel = std::fabs(b.bubble_rate - sim.bubble_rate) / sim.bubble_rate;
    attempts += "  run " + std::to_string(attempt) + ": trace " + std::to_string(b.bubble_rate) +
                ", simulator " + std::to_string(sim.bubble_rate) + " (relative difference " +
                std::to_string(rel) + "; costs F " + std::to_string(c.forward) + " B " +
                std::to_string(c.backward) + " W " + std::to_string(c.weight) + " comm " +
                std::to_string(c.comm) + " ms from " + std::to_string(b.comm_samples) + " waits)\n";
    if (rel <= 0.05) {
      std::cout << attempts;
      return;
    }
  }
  ADD_FAILURE() << "the bubble rate from the trace is not within 5 % of the simulator's:\n" << attempts;
}

TEST(ExecutorTrace, BubbleWithinFivePercentOfTheSimulatorFor1F1B) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(4, 8));
  ExpectBubbleNearTheSimulator(sc);
}

TEST(ExecutorTrace, BubbleWithinFivePercentOfTheSimulatorForZBH1) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(4, 8));
  ExpectBubbleNearTheSimulator(sc);
}

}  // namespace
}  // namespace distlab::pipeline
