// Hidden tests of Lab 5 stage D: timeline figure boxes and the SVG file.
//
// Every case draws its timeline or schedule from the grading seed (test_util.h): the boxes of a random
// timeline against figures.h's contract, written out here.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/pipeline/figures.h"
#include "labs/pipeline/schedule.h"
#include "labs/pipeline/simulator.h"
#include "labs/pipeline/zero_bubble.h"
#include "tests/pipeline/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

using test::CaseRandom;
using test::Drawn;
using test::Num;

constexpr double kEps = 1e-9;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

using Timeline = std::vector<std::vector<TimedOp>>;

std::string TimelineText(const Timeline& tl) {
  std::string out;
  for (size_t s = 0; s < tl.size(); ++s) {
    out += (s == 0 ? "row " : " | row ") + std::to_string(s) + ":";
    for (const TimedOp& t : tl[s])
      out += " " + ToString(t.op) + " [" + Num(t.start) + ", " + Num(t.end) + "]";
  }
  return out;
}

Op DrawOp(CaseRandom& rnd) {
  const OpKind kind = rnd.Pick(
      std::vector<OpKind>{OpKind::kForward, OpKind::kBackward, OpKind::kWeight, OpKind::kFullBackward});
  const int mb = rnd.Int(0, 5), chunk = rnd.Chance(0.25) ? 1 : 0;
  return Op{kind, mb, chunk};
}

std::string BoxText(const viz::Timeline::Box& b) {
  return "row " + std::to_string(b.row) + " [" + Num(b.start) + ", " + Num(b.end) + "] " +
         (b.category == kIdleCategory ? std::string("idle") : "'" + b.label + "'") + " (category " +
         std::to_string(b.category) + ")";
}

// figures.h's boxes: per row in time order, an op box per op and an idle box per gap longer than 1e-9 x the
// makespan, from 0 to the first op, between ops, and from the last op to the makespan.
std::vector<viz::Timeline::Box> ContractBoxes(const Timeline& tl) {
  double makespan = 0;
  for (const auto& row : tl) {
    for (const TimedOp& t : row) makespan = std::max(makespan, t.end);
  }
  std::vector<viz::Timeline::Box> boxes;
  for (size_t s = 0; s < tl.size(); ++s) {
    const int row = static_cast<int>(s);
    double cursor = 0;
    auto idle = [&](double until) {
      if (until - cursor > 1e-9 * makespan) boxes.push_back({row, cursor, until, "", "", kIdleCategory});
    };
    for (const TimedOp& t : tl[s]) {
      idle(t.start);
      boxes.push_back({row, t.start, t.end, ToString(t.op), "", KindCategory(t.op.kind)});
      cursor = std::max(cursor, t.end);
    }
    idle(makespan);
  }
  return boxes;
}

void ExpectBoxes(const std::vector<viz::Timeline::Box>& got, const std::vector<viz::Timeline::Box>& want) {
  for (size_t k = 0; k < std::max(got.size(), want.size()); ++k) {
    const bool same = k < got.size() && k < want.size() && got[k].row == want[k].row &&
                      std::abs(got[k].start - want[k].start) <= kEps &&
                      std::abs(got[k].end - want[k].end) <= kEps && got[k].label == want[k].label &&
                      got[k].category == want[k].category;
    if (!same) {
      ADD_FAILURE() << "box " << k << " (boxes of a row in time order, rows in stage order): you drew "
                    << (k < got.size() ? BoxText(got[k]) : "no box") << "; there the timeline has "
                    << (k < want.size() ? BoxText(want[k]) : "no more boxes") << " (" << got.size()
                    << " boxes drawn, " << want.size() << " in the contract)";
      return;
    }
  }
}

// A random timeline of 2 to 4 rows: ops back to back or apart, rows starting late and ending early among
// them. Times in quarters, so every gap is 0 or at least 0.25.
TEST(TimelineBoxes, ExactBoxesOfASmallTimeline) {
  CaseRandom rnd;
  for (int draw = 0; draw < 2; ++draw) {
    Timeline tl(rnd.Int(2, 4));
    for (auto& row : tl) {
      double t = rnd.Chance(0.5) ? 0 : test::Quarters(rnd, 1, 8);
      const int n = rnd.Int(1, 4);
      for (int k = 0; k < n; ++k) {
        const Op op = DrawOp(rnd);
        const double end = t + test::Quarters(rnd, 1, 8);
        row.push_back({op, t, end});
        t = end + (rnd.Chance(0.5) ? 0 : test::Quarters(rnd, 1, 8));
      }
    }
    // One row starts late, and one ends before the others: both get idle boxes.
    const size_t late = rnd.Int(0, tl.size() - 1);
    if (tl[late].front().start == 0) {
      const double shift = test::Quarters(rnd, 1, 4);
      for (TimedOp& t : tl[late]) t.start += shift, t.end += shift;
    }
    size_t longest = 0;
    for (size_t s = 1; s < tl.size(); ++s) {
      if (tl[s].back().end > tl[longest].back().end) longest = s;
    }
    TimedOp& last = tl[longest].back();
    last.end += test::Quarters(rnd, 1, 4);
    SCOPED_TRACE(Drawn("the timeline " + TimelineText(tl)));
    ExpectBoxes(TimelineBoxes(tl), ContractBoxes(tl));
    if (HasFailure()) return;
  }
}

TEST(TimelineBoxes, IdleBoxesAddUpToTheSimulatorsIdle) {
  CaseRandom rnd;
  for (auto make : {&OneFOneB, &GPipe, &ZeroBubbleH1}) {
    const int p = rnd.Int(2, 5), m = rnd.Int(p, 8);
    const Costs c{test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8), test::Quarters(rnd, 1, 8),
                  test::Quarters(rnd, 0, 2)};
    ASSERT_OK_AND_ASSIGN(Schedule sc, make(p, m));
    SCOPED_TRACE(Drawn(sc.name + ", p = " + std::to_string(p) + ", m = " + std::to_string(m) + ", " +
                       test::CostsText(c)));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
    const std::vector<viz::Timeline::Box> boxes = TimelineBoxes(r.timeline);
    std::vector<double> idle(p, 0);
    std::vector<int> ops(p, 0);
    for (const auto& b : boxes) {
      ASSERT_GE(b.row, 0);
      ASSERT_LT(b.row, p);
      if (b.category == kIdleCategory) {
        idle[b.row] += b.end - b.start;
      } else {
        ++ops[b.row];
      }
    }
    for (int s = 0; s < p; ++s) {
      EXPECT_NEAR(idle[s], r.idle[s], 1e-6) << "stage " << s << ": idle boxes against the simulator's idle";
      EXPECT_EQ(ops[s], static_cast<int>(sc.stages[s].size())) << "stage " << s << ": op boxes";
    }
    if (HasFailure()) return;
  }
}

// Rows of equal length, their ops back to back or apart by gaps of at most 1e-10 x the makespan (rounding,
// as the executor's clock makes them), a fused BW among them: one box per op and no idle box.
TEST(TimelineBoxes, BackToBackOpsAndTinyGapsHaveNoIdle) {
  CaseRandom rnd;
  const double length = test::Quarters(rnd, 8, 40);
  Timeline tl(rnd.Int(1, 3));
  for (size_t s = 0; s < tl.size(); ++s) {
    double t = s == 0 || rnd.Chance(0.5) ? 0 : 1e-13 * rnd.Int(1, 100);
    double left = length;
    for (int k = 0; left > 0; ++k) {
      // The first row: a fused BW first, then at least one more op after a tiny gap.
      const double d = std::min(s == 0 && k == 0 ? left - 0.25 : left, test::Quarters(rnd, 1, 12));
      const Op op = s == 0 && k == 0 ? BW(static_cast<int>(rnd.Int(0, 3))) : DrawOp(rnd);
      if (s == 0 && k == 1) t += 1e-13 * rnd.Int(1, 100);
      tl[s].push_back({op, t, t + d});
      t += d + (rnd.Chance(0.5) ? 0 : 1e-13 * rnd.Int(1, 100));
      left -= d;
    }
  }
  SCOPED_TRACE(Drawn("the timeline (gaps of 1e-13 to 1e-11) " + TimelineText(tl)));
  const std::vector<viz::Timeline::Box> got = TimelineBoxes(tl);
  size_t n = 0;
  for (const auto& row : tl) n += row.size();
  for (const auto& b : got) {
    EXPECT_NE(b.category, kIdleCategory) << "an idle box for a rounding gap: " << BoxText(b);
  }
  ASSERT_EQ(got.size(), n) << "one box per op";
  size_t k = 0;
  for (const auto& row : tl) {
    for (const TimedOp& t : row) {
      EXPECT_EQ(got[k].label, ToString(t.op)) << "box " << k;
      EXPECT_EQ(got[k].category, KindCategory(t.op.kind)) << "box " << k << " (" << ToString(t.op) << ")";
      ++k;
    }
  }
}

TEST(WriteTimelineFigure, WritesAnSvgWithEveryStageAndOp) {
  CaseRandom rnd;
  const int p = rnd.Int(2, 4), m = rnd.Int(p, 6);
  const Costs c{0.5 * rnd.Int(2, 4), 0.5 * rnd.Int(2, 4), 0.5 * rnd.Int(2, 4), 0};
  const std::string unit = rnd.Pick(std::vector<std::string>{"T", "ms", "s", "steps"});
  const std::string title =
      "ZB-H1 p=" + std::to_string(p) + " m=" + std::to_string(m) + " run " + std::to_string(rnd.Int(1, 999));
  SCOPED_TRACE(Drawn("ZeroBubbleH1(" + std::to_string(p) + ", " + std::to_string(m) + "), " +
                     test::CostsText(c) + ", title \"" + title + "\", unit \"" + unit + "\""));
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(p, m));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, c));
  const std::string path = TempPath("zbh1.svg");
  ASSERT_OK(WriteTimelineFigure(r.timeline, title, unit, path));
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string svg = ss.str();
  for (const std::string& want :
       {std::string("<svg"), title, "stage " + std::to_string(p - 1), ">W" + std::to_string(m - 1) + "<",
        std::string("idle"), "time (" + unit + ")"}) {
    EXPECT_NE(svg.find(want), std::string::npos) << "the SVG lacks " << want;
  }
}

TEST(WriteTimelineFigure, RejectsEmptyTimelineAndBadPath) {
  CaseRandom rnd;
  const std::string missing = "no-such-dir-" + std::to_string(rnd.Int(1, 9999));
  Timeline tl(rnd.Int(1, 3));
  for (auto& row : tl) {
    const double d = test::Quarters(rnd, 1, 8);
    row.push_back({F(0), 0, d});
    row.push_back({BW(0), d, d + test::Quarters(rnd, 1, 8)});
  }
  SCOPED_TRACE(Drawn("the timeline " + TimelineText(tl) + ", the folder " + missing));
  EXPECT_FALSE(WriteTimelineFigure({}, "empty", "T", TempPath("empty.svg")).ok()) << "an empty timeline";
  EXPECT_FALSE(WriteTimelineFigure(tl, "x", "T", TempPath(missing + "/x.svg")).ok())
      << "a folder that is not there";
  EXPECT_OK(WriteTimelineFigure(tl, "x", "T", TempPath("x.svg")));
}

}  // namespace
}  // namespace distlab::pipeline
