// Hidden tests of Lab 5 stage A: GPipe and 1F1B generators, the validator, the closed forms.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/zero_bubble.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

std::string Row(const Schedule& sc, int s) {
  std::string out;
  for (const Op& op : sc.stages[s]) out += (out.empty() ? "" : " ") + ToString(op);
  return out;
}

bool Contains(const absl::Status& st, const std::string& text) {
  return std::string(st.message()).find(text) != std::string::npos;
}

// Forwards a stage runs before its first backward (fused or split).
int ForwardsBeforeFirstBackward(const std::vector<Op>& ops) {
  int n = 0;
  for (const Op& op : ops) {
    if (op.kind != OpKind::kForward) break;
    ++n;
  }
  return n;
}

// Most microbatches between F and their B / BW, walking the list in order.
int MaxInFlight(const std::vector<Op>& ops) {
  int now = 0, peak = 0;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kForward) peak = std::max(peak, ++now);
    if (op.kind == OpKind::kBackward || op.kind == OpKind::kFullBackward) --now;
  }
  return peak;
}

TEST(GPipe, AllForwardThenAllBackward) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(3, 4));
  EXPECT_EQ(sc.p, 3);
  EXPECT_EQ(sc.m, 4);
  ASSERT_EQ(sc.stages.size(), 3u);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(Row(sc, s), "F0 F1 F2 F3 BW0 BW1 BW2 BW3") << "stage " << s;
  EXPECT_OK(ValidateSchedule(sc));
}

TEST(GPipe, RejectsBadArguments) {
  EXPECT_EQ(GPipe(0, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GPipe(2, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// p = 3, m = 4:
//   stage 0: F0 F1 F2 BW0 F3 BW1 BW2 BW3
//   stage 1: F0 F1 BW0 F2 BW1 F3 BW2 BW3
//   stage 2: F0 BW0 F1 BW1 F2 BW2 F3 BW3
TEST(OneFOneB, MatchesTheDrawnSchedule) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(3, 4));
  ASSERT_EQ(sc.stages.size(), 3u);
  EXPECT_EQ(Row(sc, 0), "F0 F1 F2 BW0 F3 BW1 BW2 BW3");
  EXPECT_EQ(Row(sc, 1), "F0 F1 BW0 F2 BW1 F3 BW2 BW3");
  EXPECT_EQ(Row(sc, 2), "F0 BW0 F1 BW1 F2 BW2 F3 BW3");
}

TEST(OneFOneB, WarmUpAndInFlightPerStage) {
  for (int p : {1, 2, 4, 5}) {
    for (int m : {1, 3, 8}) {
      ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
      ASSERT_EQ(static_cast<int>(sc.stages.size()), p);
      EXPECT_OK(ValidateSchedule(sc));
      for (int s = 0; s < p; ++s) {
        // p-s-1 warm-up forwards plus the first steady-state forward.
        EXPECT_EQ(ForwardsBeforeFirstBackward(sc.stages[s]), std::min(p - s, m))
            << "p=" << p << " m=" << m << " s=" << s;
        EXPECT_EQ(MaxInFlight(sc.stages[s]), std::min(p - s, m)) << "p=" << p << " m=" << m << " s=" << s;
        EXPECT_EQ(static_cast<int>(sc.stages[s].size()), 2 * m);
      }
    }
  }
}

TEST(OneFOneB, RejectsBadArguments) {
  EXPECT_EQ(OneFOneB(-1, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OneFOneB(4, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateSchedule, AcceptsValidSchedules) {
  EXPECT_OK(ValidateSchedule(Schedule{"one", 1, 1, {{F(0), BW(0)}}}));
  // Split on one stage, fused on the other: both provide the input gradient.
  EXPECT_OK(ValidateSchedule(
      Schedule{"mixed", 2, 2, {{F(0), F(1), BW(0), BW(1)}, {F(0), B(0), F(1), B(1), W(1), W(0)}}}));
}

TEST(ValidateSchedule, RejectsWrongShape) {
  EXPECT_EQ(ValidateSchedule(Schedule{"x", 0, 1, {}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSchedule(Schedule{"x", 1, 0, {{}}}).code(), absl::StatusCode::kInvalidArgument);
  absl::Status st = ValidateSchedule(Schedule{"x", 3, 1, {{F(0), BW(0)}, {F(0), BW(0)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateSchedule, RejectsMicrobatchOutOfRange) {
  absl::Status st = ValidateSchedule(Schedule{"x", 1, 2, {{F(0), F(2), BW(0), BW(1)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "F2")) << st;
}

TEST(ValidateSchedule, RejectsDuplicateOp) {
  absl::Status st = ValidateSchedule(Schedule{"x", 1, 2, {{F(0), F(1), F(1), BW(0), BW(1)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "F1")) << st;
}

TEST(ValidateSchedule, RejectsMissingOps) {
  EXPECT_EQ(ValidateSchedule(Schedule{"x", 1, 2, {{F(0), BW(0), BW(1)}}}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status st = ValidateSchedule(Schedule{"x", 1, 2, {{F(0), F(1), BW(0)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  // Split backward without its W: the weight gradient would never be computed.
  st = ValidateSchedule(Schedule{"x", 1, 1, {{F(0), B(0)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "W0")) << st;
  // W without B.
  EXPECT_EQ(ValidateSchedule(Schedule{"x", 1, 1, {{F(0), W(0)}}}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateSchedule, RejectsFusedAndSplitForOneMicrobatch) {
  absl::Status st = ValidateSchedule(Schedule{"x", 1, 1, {{F(0), B(0), W(0), BW(0)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateSchedule, RejectsBackwardBeforeItsForward) {
  absl::Status st = ValidateSchedule(Schedule{"x", 2, 1, {{F(0), BW(0)}, {B(0), F(0), W(0)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "B0")) << st;
  EXPECT_TRUE(Contains(st, "stage 1")) << st;
}

TEST(ValidateSchedule, RejectsWBeforeItsB) {
  absl::Status st = ValidateSchedule(
      Schedule{"x", 2, 2, {{F(0), F(1), BW(0), BW(1)}, {F(0), F(1), W(0), B(0), B(1), W(1)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "W0")) << st;
}

// Stage 0 waits for the backward of microbatch 0 before it sends F1; stage 1 waits for F1 before it runs
// the backward of microbatch 0. Each list is fine on its own; together they never finish.
//   stage 0: F0 [BW0 <- stage 1] F1 BW1
//   stage 1: F0 [F1 <- stage 0]  BW0 BW1
TEST(ValidateSchedule, RejectsCrossStageDeadlock) {
  absl::Status st =
      ValidateSchedule(Schedule{"x", 2, 2, {{F(0), BW(0), F(1), BW(1)}, {F(0), F(1), BW(0), BW(1)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "BW0")) << st;
  EXPECT_TRUE(Contains(st, "F1")) << st;
}

// Two broken stages: the first one (stage 0) is named.
TEST(ValidateSchedule, NamesTheFirstBrokenStage) {
  absl::Status st = ValidateSchedule(Schedule{"x", 3, 1, {{BW(0), F(0)}, {F(0), BW(0)}, {W(0), F(0), B(0)}}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "stage 0")) << st;
  EXPECT_FALSE(Contains(st, "stage 2")) << st;
}

// Interleaved, p = 2, v = 2, m = 1: virtual stages 0 = rank 0 chunk 0, 1 = rank 1 chunk 0, 2 = rank 0
// chunk 1, 3 = rank 1 chunk 1. The activation goes 0 -> 1 -> 2 -> 3 (from rank 1 back to rank 0), the
// gradient 3 -> 2 -> 1 -> 0.
TEST(ValidateSchedule, FollowsVirtualStages) {
  Schedule ok{"interleaved", 2, 1, {{F(0), F(0, 1), BW(0, 1), BW(0)}, {F(0), F(0, 1), BW(0, 1), BW(0)}}, 2};
  EXPECT_OK(ValidateSchedule(ok));
  // Rank 0 runs chunk 0's backward first: it waits for virtual stage 1 (rank 1), which waits for virtual
  // stage 2 -- rank 0's own chunk 1, still behind it in its list.
  Schedule stuck{"x", 2, 1, {{F(0), F(0, 1), BW(0), BW(0, 1)}, {F(0), F(0, 1), BW(0, 1), BW(0)}}, 2};
  absl::Status st = ValidateSchedule(stuck);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "BW0")) << st;
  EXPECT_TRUE(Contains(st, "stage 1")) << st;
  // The same lists with v = 1 name chunks that do not exist.
  ok.v = 1;
  EXPECT_EQ(ValidateSchedule(ok).code(), absl::StatusCode::kInvalidArgument);
  // One rank, two chunks: the chunks depend on each other in the list's order.
  EXPECT_OK(ValidateSchedule(Schedule{"x", 1, 1, {{F(0), F(0, 1), B(0, 1), BW(0), W(0, 1)}}, 2}));
  EXPECT_EQ(ValidateSchedule(Schedule{"x", 1, 1, {{F(0, 1), F(0), BW(0, 1), BW(0)}}, 2}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ValidateSchedule, RejectsBadChunks) {
  absl::Status st = ValidateSchedule(Schedule{"x", 1, 1, {{F(0), F(0, 2), BW(0, 2), BW(0)}}, 2});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "F0.2")) << st;
  st = ValidateSchedule(Schedule{"x", 1, 1, {{F(0), BW(0)}}, 2});  // chunk 1 never runs
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(st, "F0.1")) << st;
  EXPECT_EQ(ValidateSchedule(Schedule{"x", 1, 1, {{F(0), BW(0)}}, 0}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClosedForms, GPipeBubbleFraction) {
  EXPECT_DOUBLE_EQ(GPipeBubbleFraction(1, 5), 0.0);
  EXPECT_DOUBLE_EQ(GPipeBubbleFraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(GPipeBubbleFraction(8, 8), 7.0 / 15.0);
  EXPECT_DOUBLE_EQ(GPipeBubbleFraction(2, 1), 0.5);
}

TEST(ClosedForms, OneFOneBMakespan) {
  EXPECT_DOUBLE_EQ(OneFOneBMakespan(1, 3, Costs{1, 1, 1, 0}), 9);
  EXPECT_DOUBLE_EQ(OneFOneBMakespan(4, 8, Costs{1, 2, 0, 0}), 8 * 3 + 3 * 3);
  EXPECT_DOUBLE_EQ(OneFOneBMakespan(5, 10, Costs{2, 1.5, 0.5, 0}), 14 * 4.0);
}

}  // namespace
}  // namespace distlab::pipeline
