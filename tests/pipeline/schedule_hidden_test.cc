// Hidden tests of Lab 5 stage A: GPipe and 1F1B generators, the validator, the closed forms.
//
// Every case but OneFOneB.MatchesTheDrawnSchedule (the rows drawn in the handout) draws its p, m, costs and
// schedules from the grading seed (test_util.h): a generator against its definition in schedule.h, the
// validator on random valid schedules and on schedules broken one way at a drawn place, the closed forms at
// drawn points.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/zero_bubble.h"
#include "tests/pipeline/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

using test::CaseRandom;
using test::Drawn;
using test::Row;
using test::ScheduleText;

bool Contains(const absl::Status& st, const std::string& text) {
  return std::string(st.message()).find(text) != std::string::npos;
}

std::string Call(const char* fn, int p, int m) {
  return std::string(fn) + "(" + std::to_string(p) + ", " + std::to_string(m) + ")";
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

// Stage s of 1F1B as schedule.h defines it: min(p-s-1, m) warm-up forwards, then one forward and one fused
// backward of the oldest microbatch in flight, then the cool-down backwards.
std::vector<Op> OneFOneBRow(int p, int m, int s) {
  const int warmup = std::min(p - s - 1, m);
  std::vector<Op> ops;
  for (int i = 0; i < warmup; ++i) ops.push_back(F(i));
  for (int i = 0; i < m; ++i) {
    if (i + warmup < m) ops.push_back(F(i + warmup));
    ops.push_back(BW(i));
  }
  return ops;
}

// The first position where `got` and `want` differ, or -1.
int FirstDifference(const std::vector<Op>& got, const std::vector<Op>& want) {
  for (size_t k = 0; k < std::max(got.size(), want.size()); ++k) {
    if (k >= got.size() || k >= want.size() || got[k] != want[k]) return static_cast<int>(k);
  }
  return -1;
}

std::string OpAt(const std::vector<Op>& ops, int k) {
  return k < static_cast<int>(ops.size()) ? ToString(ops[k]) : "nothing (the list ends)";
}

// A schedule's op list with `op` inserted at `pos`.
void Insert(std::vector<Op>& ops, int pos, const Op& op) { ops.insert(ops.begin() + pos, op); }

int PositionOf(const std::vector<Op>& ops, const Op& op) {
  return static_cast<int>(std::find(ops.begin(), ops.end(), op) - ops.begin());
}

// Moves the op at `from` to position `to` (to < from).
void MoveEarlier(std::vector<Op>& ops, int from, int to) {
  const Op op = ops[from];
  ops.erase(ops.begin() + from);
  ops.insert(ops.begin() + to, op);
}

TEST(GPipe, AllForwardThenAllBackward) {
  CaseRandom rnd;
  for (int draw = 0; draw < 3; ++draw) {
    const int p = rnd.Int(1, 8), m = rnd.Int(1, 12);
    SCOPED_TRACE(Drawn(Call("GPipe", p, m)));
    ASSERT_OK_AND_ASSIGN(Schedule sc, GPipe(p, m));
    EXPECT_EQ(sc.p, p);
    EXPECT_EQ(sc.m, m);
    ASSERT_EQ(static_cast<int>(sc.stages.size()), p) << "one list per stage";
    for (int s = 0; s < p; ++s) {
      std::vector<Op> want;
      for (int i = 0; i < m; ++i) want.push_back(F(i));
      for (int i = 0; i < m; ++i) want.push_back(BW(i));
      const int k = FirstDifference(sc.stages[s], want);
      EXPECT_EQ(k, -1) << "stage " << s << ", position " << k << ": you run " << OpAt(sc.stages[s], k)
                       << ", where GPipe (all m forwards in microbatch order, then all m fused backwards in "
                          "microbatch order) runs "
                       << OpAt(want, k);
    }
    EXPECT_OK(ValidateSchedule(sc));
    if (HasFailure()) return;
  }
}

TEST(GPipe, RejectsBadArguments) {
  CaseRandom rnd;
  const int bad_p = rnd.Int(-4, 0), good_m = rnd.Int(1, 8), good_p = rnd.Int(1, 8), bad_m = rnd.Int(-4, 0);
  EXPECT_EQ(GPipe(bad_p, good_m).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(Call("GPipe", bad_p, good_m) + ": p < 1");
  EXPECT_EQ(GPipe(good_p, bad_m).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(Call("GPipe", good_p, bad_m) + ": m < 1");
}

// p = 3, m = 4 (the rows drawn in the handout, schedule_test):
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

// 12 drawn (p, m), with m < p and m > p among them: the warm-up, the microbatches in flight and every row
// against schedule.h's definition.
TEST(OneFOneB, WarmUpAndInFlightPerStage) {
  CaseRandom rnd;
  const std::vector<int> ps = {static_cast<int>(rnd.Int(1, 2)), static_cast<int>(rnd.Int(2, 4)),
                               static_cast<int>(rnd.Int(4, 6)), static_cast<int>(rnd.Int(5, 8))};
  const std::vector<int> ms = {static_cast<int>(rnd.Int(1, 3)), static_cast<int>(rnd.Int(3, 6)),
                               static_cast<int>(rnd.Int(7, 12))};
  for (int p : ps) {
    for (int m : ms) {
      SCOPED_TRACE(Drawn(Call("OneFOneB", p, m)));
      ASSERT_OK_AND_ASSIGN(Schedule sc, OneFOneB(p, m));
      ASSERT_EQ(static_cast<int>(sc.stages.size()), p) << "one list per stage";
      EXPECT_OK(ValidateSchedule(sc));
      for (int s = 0; s < p; ++s) {
        // p-s-1 warm-up forwards plus the first steady-state forward.
        const int in_flight = std::min(p - s, m);
        EXPECT_EQ(ForwardsBeforeFirstBackward(sc.stages[s]), in_flight)
            << "stage " << s << ": forwards before the first backward (the warm-up of schedule.h, then one "
            << "steady-state forward)";
        EXPECT_EQ(MaxInFlight(sc.stages[s]), in_flight) << "stage " << s << ": most microbatches in flight";
        EXPECT_EQ(static_cast<int>(sc.stages[s].size()), 2 * m) << "stage " << s << ": ops (F and BW per mb)";
        const std::vector<Op> want = OneFOneBRow(p, m, s);
        const int k = FirstDifference(sc.stages[s], want);
        EXPECT_EQ(k, -1) << "stage " << s << " differs from 1F1B's definition first at position " << k
                         << " (you run " << OpAt(sc.stages[s], k) << "); your row: " << Row(sc, s);
      }
      if (HasFailure()) return;
    }
  }
}

TEST(OneFOneB, RejectsBadArguments) {
  CaseRandom rnd;
  const int bad_p = rnd.Int(-4, 0), good_m = rnd.Int(1, 8), good_p = rnd.Int(1, 8), bad_m = rnd.Int(-4, 0);
  EXPECT_EQ(OneFOneB(bad_p, good_m).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(Call("OneFOneB", bad_p, good_m) + ": p < 1");
  EXPECT_EQ(OneFOneB(good_p, bad_m).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(Call("OneFOneB", good_p, bad_m) + ": m < 1");
}

// Random valid schedules -- fused, split, mixed; one stage or several; plain and interleaved -- are accepted.
TEST(ValidateSchedule, AcceptsValidSchedules) {
  CaseRandom rnd;
  for (double split : {0.0, 0.5, 1.0, 0.5}) {
    const Schedule sc = test::DrawValid(rnd, 1, 5, 1, 5, 1, 1, split);
    EXPECT_OK(ValidateSchedule(sc)) << Drawn("the valid schedule " + ScheduleText(sc));
  }
  const Schedule one = test::DrawValid(rnd, 1, 1, 1, 4, 1, 1, 0.5);
  EXPECT_OK(ValidateSchedule(one)) << Drawn("the valid schedule " + ScheduleText(one));
  const Schedule chunks = test::DrawValid(rnd, 1, 3, 1, 3, 2, 3, 0.5);
  EXPECT_OK(ValidateSchedule(chunks)) << Drawn("the valid interleaved schedule " + ScheduleText(chunks));
}

TEST(ValidateSchedule, RejectsWrongShape) {
  CaseRandom rnd;
  const int bad_p = rnd.Int(-3, 0), bad_m = rnd.Int(-3, 0), p = rnd.Int(1, 5), m = rnd.Int(1, 4);
  EXPECT_EQ(ValidateSchedule(Schedule{"x", bad_p, 1, {}}).code(), absl::StatusCode::kInvalidArgument)
      << Drawn("p = " + std::to_string(bad_p) + " stages");
  EXPECT_EQ(ValidateSchedule(Schedule{"x", p, bad_m, std::vector<std::vector<Op>>(p)}).code(),
            absl::StatusCode::kInvalidArgument)
      << Drawn("m = " + std::to_string(bad_m) + " microbatches on p = " + std::to_string(p));
  // p says one number of stages, the lists another (each list a valid GPipe row).
  int lists = rnd.Int(std::max(0, p - 2), p + 1);
  if (lists >= p) ++lists;
  std::vector<Op> row;
  for (int i = 0; i < m; ++i) row.push_back(F(i));
  for (int i = 0; i < m; ++i) row.push_back(BW(i));
  const Schedule sc{"x", p, m, std::vector<std::vector<Op>>(lists, row)};
  EXPECT_EQ(ValidateSchedule(sc).code(), absl::StatusCode::kInvalidArgument)
      << Drawn("p = " + std::to_string(p) + " but " + std::to_string(lists) + " stage lists");
}

TEST(ValidateSchedule, RejectsMicrobatchOutOfRange) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    Schedule sc = test::DrawValid(rnd, 1, 4, 1, 5, 1, 1, 0.5);
    const int s = rnd.Int(0, sc.p - 1);
    const int mb =
        rnd.Chance(0.25) ? -static_cast<int>(rnd.Int(1, 2)) : static_cast<int>(rnd.Int(sc.m, sc.m + 3));
    const Op bad{rnd.Pick(std::vector<OpKind>{OpKind::kForward, OpKind::kBackward, OpKind::kWeight,
                                              OpKind::kFullBackward}),
                 mb};
    const int pos = rnd.Int(0, static_cast<int>(sc.stages[s].size()));
    Insert(sc.stages[s], pos, bad);
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn(ToString(bad) + " added at position " + std::to_string(pos) + " of stage " +
                       std::to_string(s) + ": " + ScheduleText(sc)));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_TRUE(Contains(st, ToString(bad))) << "the error should name the op; it says: " << st;
  }
}

TEST(ValidateSchedule, RejectsDuplicateOp) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    Schedule sc = test::DrawValid(rnd, 1, 4, 1, 5, 1, 1, 0.5);
    const int s = rnd.Int(0, sc.p - 1);
    const Op twice = rnd.Pick(sc.stages[s]);
    const int pos = rnd.Int(0, static_cast<int>(sc.stages[s].size()));
    Insert(sc.stages[s], pos, twice);
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn(ToString(twice) + " again at position " + std::to_string(pos) + " of stage " +
                       std::to_string(s) + ": " + ScheduleText(sc)));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_TRUE(Contains(st, ToString(twice))) << "the error should name the op; it says: " << st;
  }
}

// One op of a valid schedule left out: a forward, a fused backward, a W (named: the weight gradient would
// never be computed) and a B (its W then has no B).
TEST(ValidateSchedule, RejectsMissingOps) {
  CaseRandom rnd;
  for (OpKind kind : {OpKind::kForward, OpKind::kFullBackward, OpKind::kWeight, OpKind::kBackward}) {
    Schedule sc = test::DrawValid(rnd, 1, 4, 1, 4, 1, 1, kind == OpKind::kFullBackward ? 0.0 : 1.0);
    const int s = rnd.Int(0, sc.p - 1);
    std::vector<int> of_kind;
    for (int k = 0; k < static_cast<int>(sc.stages[s].size()); ++k) {
      if (sc.stages[s][k].kind == kind) of_kind.push_back(k);
    }
    const int k = rnd.Pick(of_kind);
    const Op gone = sc.stages[s][k];
    sc.stages[s].erase(sc.stages[s].begin() + k);
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn(ToString(gone) + " left out of stage " + std::to_string(s) + ": " + ScheduleText(sc)));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    if (kind == OpKind::kWeight) {
      EXPECT_TRUE(Contains(st, ToString(gone))) << "the error should name the missing W; it says: " << st;
    }
  }
}

TEST(ValidateSchedule, RejectsFusedAndSplitForOneMicrobatch) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    Schedule sc = test::DrawValid(rnd, 1, 4, 1, 4, 1, 1, 0.5);
    const int s = rnd.Int(0, sc.p - 1), i = rnd.Int(0, sc.m - 1);
    std::vector<Op>& ops = sc.stages[s];
    std::string what;
    if (PositionOf(ops, BW(i)) < static_cast<int>(ops.size())) {  // fused: add B i and W i after it
      Insert(ops, rnd.Int(PositionOf(ops, BW(i)) + 1, static_cast<int>(ops.size())), B(i));
      Insert(ops, rnd.Int(PositionOf(ops, B(i)) + 1, static_cast<int>(ops.size())), W(i));
      what = "B" + std::to_string(i) + " and W" + std::to_string(i) + " added beside BW" + std::to_string(i);
    } else {  // split: add BW i after B i
      Insert(ops, rnd.Int(PositionOf(ops, B(i)) + 1, static_cast<int>(ops.size())), BW(i));
      what = "BW" + std::to_string(i) + " added beside B" + std::to_string(i) + " and W" + std::to_string(i);
    }
    const absl::Status st = ValidateSchedule(sc);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument)
        << st << "\n"
        << Drawn(what + " on stage " + std::to_string(s) + ": " + ScheduleText(sc));
  }
}

// A backward moved before its own forward on a drawn stage s >= 1; the error names the op and the stage.
TEST(ValidateSchedule, RejectsBackwardBeforeItsForward) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    Schedule sc = test::DrawValid(rnd, 2, 5, 1, 4, 1, 1, 0.5);
    const int s = rnd.Int(1, sc.p - 1);
    std::vector<Op>& ops = sc.stages[s];
    std::vector<int> backwards;
    for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
      if (test::IsBackward(ops[k].kind)) backwards.push_back(k);
    }
    const int from = rnd.Pick(backwards);
    const Op moved = ops[from];
    const int to = rnd.Int(0, PositionOf(ops, F(moved.mb)));
    MoveEarlier(ops, from, to);
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn(ToString(moved) + " moved before its forward on stage " + std::to_string(s) + ": " +
                       ScheduleText(sc)));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_TRUE(Contains(st, ToString(moved))) << "the error should name the op; it says: " << st;
    EXPECT_TRUE(Contains(st, "stage " + std::to_string(s)))
        << "the error should name the stage; it says: " << st;
  }
}

// A W moved before its own B (somewhere before it: perhaps before the forward too) on a drawn stage.
TEST(ValidateSchedule, RejectsWBeforeItsB) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    Schedule sc = test::DrawValid(rnd, 1, 4, 1, 4, 1, 1, 1.0);
    const int s = rnd.Int(0, sc.p - 1), i = rnd.Int(0, sc.m - 1);
    std::vector<Op>& ops = sc.stages[s];
    MoveEarlier(ops, PositionOf(ops, W(i)), rnd.Int(0, PositionOf(ops, B(i))));
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn("W" + std::to_string(i) + " moved before B" + std::to_string(i) + " on stage " +
                       std::to_string(s) + ": " + ScheduleText(sc)));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_TRUE(Contains(st, ToString(W(i)))) << "the error should name the W; it says: " << st;
  }
}

// Every stage runs all its forwards, then its backwards (some fused, some split); then stage s runs the
// backward of microbatch i right after F i, before F i+1. Stage s waits for that backward from stage s+1,
// which waits for F i+1 from stage s: each list is fine on its own, together they never finish. The error
// names every stage that cannot move, with its position and its op ("stage 0 waits at position 1 (BW0)").
TEST(ValidateSchedule, RejectsCrossStageDeadlock) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    const int p = rnd.Int(2, 5), m = rnd.Int(2, 5);
    Schedule sc{"x", p, m, std::vector<std::vector<Op>>(p)};
    for (int t = 0; t < p; ++t) {
      std::vector<Op>& ops = sc.stages[t];
      for (int i = 0; i < m; ++i) ops.push_back(F(i));
      std::vector<Op> late_w;
      for (int i = 0; i < m; ++i) {
        if (!rnd.Chance(0.4)) {
          ops.push_back(BW(i));
        } else {
          ops.push_back(B(i));
          (rnd.Chance(0.5) ? ops : late_w).push_back(W(i));
        }
      }
      ops.insert(ops.end(), late_w.begin(), late_w.end());
    }
    const int s = rnd.Int(0, p - 2), i = rnd.Int(0, m - 2);
    std::vector<Op>& ops = sc.stages[s];
    const int from = PositionOf(ops, BW(i)) < static_cast<int>(ops.size()) ? PositionOf(ops, BW(i))
                                                                           : PositionOf(ops, B(i));
    const Op moved = ops[from];
    MoveEarlier(ops, from, i + 1);
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn(ToString(moved) + " moved right after F" + std::to_string(i) + " on stage " +
                       std::to_string(s) + ": " + ScheduleText(sc)));
    ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    const std::vector<int> stuck = test::RunUntilStuck(sc);
    for (int t = 0; t < p; ++t) {
      if (stuck[t] >= static_cast<int>(sc.stages[t].size())) continue;
      const std::string where = "stage " + std::to_string(t) + " waits at position " +
                                std::to_string(stuck[t]) + " (" + ToString(sc.stages[t][stuck[t]]) + ")";
      EXPECT_TRUE(Contains(st, where)) << "stage " << t << " cannot move: the error should say \"" << where
                                       << " for ...\"; it says: " << st;
    }
    if (HasFailure()) return;
  }
}

// Two stages broken inside their own lists -- the first by a backward before its forward, the second by that
// or by a W before its B: the first one is named, the second is not.
TEST(ValidateSchedule, NamesTheFirstBrokenStage) {
  CaseRandom rnd;
  Schedule sc = test::DrawValid(rnd, 3, 6, 1, 4, 1, 1, 0.5);
  const int a = rnd.Int(0, sc.p - 2), b = rnd.Int(a + 1, sc.p - 1);
  std::string what;
  for (int s : {a, b}) {
    std::vector<Op>& ops = sc.stages[s];
    std::vector<int> backwards;
    for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
      if (s == a ? test::IsBackward(ops[k].kind) : ops[k].kind != OpKind::kForward) backwards.push_back(k);
    }
    const int from = rnd.Pick(backwards);
    const Op moved = ops[from];
    const Op before = moved.kind == OpKind::kWeight ? B(moved.mb) : F(moved.mb);
    MoveEarlier(ops, from, rnd.Int(0, PositionOf(ops, before)));
    what += ToString(moved) + " before " + ToString(before) + " on stage " + std::to_string(s) + "; ";
  }
  const absl::Status st = ValidateSchedule(sc);
  SCOPED_TRACE(Drawn(what + ScheduleText(sc)));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(Contains(st, "stage " + std::to_string(a))) << "the first broken stage is not named: " << st;
  EXPECT_FALSE(Contains(st, "stage " + std::to_string(b))) << "only the first broken stage is named: " << st;
}

// Interleaved (v chunks per rank; chunk c of rank s is virtual stage c p + s). Random valid interleaved
// schedules are accepted. A rank that runs the backward of chunk c before that of chunk c+1 for one
// microbatch waits, through the other ranks, for its own chunk c+1, still behind it in its list: a deadlock,
// named from the first stuck stage. The same lists with v = 1 name chunks that do not exist. One rank with
// two or three chunks: the chunks depend on each other in the list's order.
TEST(ValidateSchedule, FollowsVirtualStages) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    const Schedule ok = test::DrawValid(rnd, 1, 3, 1, 3, 2, 3, 0.5);
    EXPECT_OK(ValidateSchedule(ok)) << Drawn("the valid interleaved schedule " + ScheduleText(ok));
    Schedule one_chunk = ok;
    one_chunk.v = 1;
    EXPECT_EQ(ValidateSchedule(one_chunk).code(), absl::StatusCode::kInvalidArgument)
        << Drawn("v = 1 on the lists of " + ScheduleText(ok));
  }
  {
    // Every rank: all forwards chunk by chunk, then the backwards from the last chunk down.
    const int p = rnd.Int(2, 3), v = rnd.Int(2, 3), m = rnd.Int(1, 2);
    Schedule stuck{"x", p, m, std::vector<std::vector<Op>>(p), v};
    for (int s = 0; s < p; ++s) {
      for (int c = 0; c < v; ++c) {
        for (int i = 0; i < m; ++i) stuck.stages[s].push_back(F(i, c));
      }
      for (int c = v - 1; c >= 0; --c) {
        for (int i = 0; i < m; ++i) stuck.stages[s].push_back(BW(i, c));
      }
    }
    EXPECT_OK(ValidateSchedule(stuck)) << Drawn("the valid interleaved schedule " + ScheduleText(stuck));
    const int r = rnd.Int(0, p - 1), c = rnd.Int(0, v - 2), i = rnd.Int(0, m - 1);
    std::vector<Op>& ops = stuck.stages[r];
    MoveEarlier(ops, PositionOf(ops, BW(i, c)), PositionOf(ops, BW(i, c + 1)));
    const absl::Status st = ValidateSchedule(stuck);
    SCOPED_TRACE(Drawn(ToString(BW(i, c)) + " moved before " + ToString(BW(i, c + 1)) + " on stage " +
                       std::to_string(r) + ": " + ScheduleText(stuck)));
    ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    const std::vector<int> next = test::RunUntilStuck(stuck);
    int t = 0;
    while (next[t] >= static_cast<int>(stuck.stages[t].size())) ++t;
    const std::string where = "stage " + std::to_string(t) + " waits at position " + std::to_string(next[t]) +
                              " (" + ToString(stuck.stages[t][next[t]]) + ")";
    EXPECT_TRUE(Contains(st, where)) << "stage " << t << " cannot move: the error should say \"" << where
                                     << " for ...\"; it says: " << st;
  }
  {
    const Schedule one = test::DrawValid(rnd, 1, 1, 1, 3, 2, 3, 0.5);
    EXPECT_OK(ValidateSchedule(one)) << Drawn("the valid one-rank schedule " + ScheduleText(one));
    Schedule swapped = one;
    const int c = rnd.Int(1, one.v - 1), i = rnd.Int(0, one.m - 1);
    std::vector<Op>& ops = swapped.stages[0];
    MoveEarlier(ops, PositionOf(ops, F(i, c)), PositionOf(ops, F(i, c - 1)));
    EXPECT_EQ(ValidateSchedule(swapped).code(), absl::StatusCode::kInvalidArgument)
        << Drawn(ToString(F(i, c)) + " moved before " + ToString(F(i, c - 1)) + ": " + ScheduleText(swapped));
  }
}

TEST(ValidateSchedule, RejectsBadChunks) {
  CaseRandom rnd;
  {
    Schedule sc = test::DrawValid(rnd, 1, 3, 1, 3, 1, 3, 0.5);
    const int v = sc.v;
    const int mb = rnd.Int(0, sc.m - 1), chunk = rnd.Int(v, v + 2);
    const Op bad = F(mb, chunk);
    const int s = rnd.Int(0, sc.p - 1), pos = rnd.Int(0, static_cast<int>(sc.stages[s].size()));
    Insert(sc.stages[s], pos, bad);
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn(ToString(bad) + " added at position " + std::to_string(pos) + " of stage " +
                       std::to_string(s) + ": " + ScheduleText(sc)));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_TRUE(Contains(st, ToString(bad))) << "the error should name the op; it says: " << st;
  }
  {
    // Chunk c of microbatch i never runs on stage s.
    Schedule sc = test::DrawValid(rnd, 1, 3, 1, 3, 2, 3, 0.5);
    const int s = rnd.Int(0, sc.p - 1), i = rnd.Int(0, sc.m - 1), c = rnd.Int(1, sc.v - 1);
    std::vector<Op>& ops = sc.stages[s];
    ops.erase(
        std::remove_if(ops.begin(), ops.end(), [&](const Op& op) { return op.mb == i && op.chunk == c; }),
        ops.end());
    const absl::Status st = ValidateSchedule(sc);
    SCOPED_TRACE(Drawn("every op of microbatch " + std::to_string(i) + " on chunk " + std::to_string(c) +
                       " left out of stage " + std::to_string(s) + ": " + ScheduleText(sc)));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_TRUE(Contains(st, ToString(F(i, c))))
        << "the error should name the missing forward; it says: " << st;
  }
  const int bad_v = rnd.Int(-2, 0);
  EXPECT_EQ(ValidateSchedule(Schedule{"x", 1, 1, {{F(0), BW(0)}}, bad_v}).code(),
            absl::StatusCode::kInvalidArgument)
      << Drawn("v = " + std::to_string(bad_v));
}

TEST(ClosedForms, GPipeBubbleFraction) {
  CaseRandom rnd;
  std::vector<std::pair<int, int>> points = {{1, static_cast<int>(rnd.Int(1, 16))}};
  for (int draw = 0; draw < 5; ++draw) {
    const int p = rnd.Int(2, 16), m = rnd.Int(1, 32);
    points.push_back({p, m});
  }
  for (const auto& [p, m] : points) {
    const double got = GPipeBubbleFraction(p, m);
    EXPECT_HOLDS(test::Near(got, static_cast<double>(p - 1) / (m + p - 1), 1e-12))
        << Call("GPipeBubbleFraction", p, m) << " = " << got
        << " is not the share of the step a GPipe stage idles (its idle time over the makespan)\n"
        << Drawn("p = " + std::to_string(p) + ", m = " + std::to_string(m));
  }
}

TEST(ClosedForms, OneFOneBMakespan) {
  CaseRandom rnd;
  for (int draw = 0; draw < 4; ++draw) {
    const int p = rnd.Int(1, 8);
    const int m = draw == 0 && p > 1 ? rnd.Int(1, p - 1) : rnd.Int(1, 16);  // m < p as well
    const Costs c{test::Quarters(rnd, 1, 12), test::Quarters(rnd, 1, 12), test::Quarters(rnd, 0, 8), 0};
    const double got = OneFOneBMakespan(p, m, c);
    EXPECT_HOLDS(test::Near(got, (m + p - 1) * (c.forward + c.backward + c.weight), 1e-12))
        << "OneFOneBMakespan(" << p << ", " << m << ", {" << test::CostsText(c) << "}) = " << got
        << " is not the makespan of 1F1B with these costs\n"
        << Drawn("p = " + std::to_string(p) + ", m = " + std::to_string(m) + ", " + test::CostsText(c));
  }
}

}  // namespace
}  // namespace distlab::pipeline
