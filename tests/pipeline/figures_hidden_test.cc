// Hidden tests of Lab 5 stage D: timeline figure boxes and the SVG file.
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
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

constexpr double kEps = 1e-9;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// stage 0: F0 [0,1] idle [1,3] B0 [3,4] W0 [4,5]
// stage 1: idle [0,1] F0 [1,2] B0 [2,3] W0 [3,4] idle [4,5]
TEST(TimelineBoxes, ExactBoxesOfASmallTimeline) {
  const std::vector<std::vector<TimedOp>> tl = {{{F(0), 0, 1}, {B(0), 3, 4}, {W(0), 4, 5}},
                                                {{F(0), 1, 2}, {B(0), 2, 3}, {W(0), 3, 4}}};
  const std::vector<viz::Timeline::Box> got = TimelineBoxes(tl);
  struct Want {
    int row;
    double start, end;
    const char* label;
    int category;
  };
  const std::vector<Want> want = {
      {0, 0, 1, "F0", 0}, {0, 1, 3, "", kIdleCategory}, {0, 3, 4, "B0", 1},
      {0, 4, 5, "W0", 4}, {1, 0, 1, "", kIdleCategory}, {1, 1, 2, "F0", 0},
      {1, 2, 3, "B0", 1}, {1, 3, 4, "W0", 4},           {1, 4, 5, "", kIdleCategory}};
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].row, want[k].row) << k;
    EXPECT_NEAR(got[k].start, want[k].start, kEps) << k;
    EXPECT_NEAR(got[k].end, want[k].end, kEps) << k;
    EXPECT_EQ(got[k].label, want[k].label) << k;
    EXPECT_EQ(got[k].category, want[k].category) << k;
  }
}

TEST(TimelineBoxes, IdleBoxesAddUpToTheSimulatorsIdle) {
  for (auto make : {&OneFOneB, &GPipe, &ZeroBubbleH1}) {
    ASSERT_OK_AND_ASSIGN(Schedule sc, make(4, 8));
    ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1.5, 0.5, 0.1}));
    const std::vector<viz::Timeline::Box> boxes = TimelineBoxes(r.timeline);
    std::vector<double> idle(4, 0);
    std::vector<int> ops(4, 0);
    for (const auto& b : boxes) {
      ASSERT_GE(b.row, 0);
      ASSERT_LT(b.row, 4);
      if (b.category == kIdleCategory) {
        idle[b.row] += b.end - b.start;
      } else {
        ++ops[b.row];
      }
    }
    for (int s = 0; s < 4; ++s) {
      EXPECT_NEAR(idle[s], r.idle[s], 1e-6) << sc.name << " stage " << s;
      EXPECT_EQ(ops[s], static_cast<int>(sc.stages[s].size())) << sc.name << " stage " << s;
    }
  }
}

TEST(TimelineBoxes, BackToBackOpsAndTinyGapsHaveNoIdle) {
  const std::vector<std::vector<TimedOp>> tl = {{{F(0), 0, 1}, {BW(0), 1 + 1e-13, 3}}};
  const std::vector<viz::Timeline::Box> got = TimelineBoxes(tl);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].label, "F0");
  EXPECT_EQ(got[1].label, "BW0");
  EXPECT_EQ(got[1].category, 6);
}

TEST(WriteTimelineFigure, WritesAnSvgWithEveryStageAndOp) {
  ASSERT_OK_AND_ASSIGN(Schedule sc, ZeroBubbleH1(3, 4));
  ASSERT_OK_AND_ASSIGN(SimResult r, Simulate(sc, Costs{1, 1, 1, 0}));
  const std::string path = TempPath("zbh1.svg");
  ASSERT_OK(WriteTimelineFigure(r.timeline, "ZB-H1 p=3 m=4", "T", path));
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string svg = ss.str();
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("ZB-H1 p=3 m=4"), std::string::npos);
  EXPECT_NE(svg.find("stage 2"), std::string::npos);
  EXPECT_NE(svg.find(">W3<"), std::string::npos);
  EXPECT_NE(svg.find("idle"), std::string::npos);
  EXPECT_NE(svg.find("time (T)"), std::string::npos);
}

TEST(WriteTimelineFigure, RejectsEmptyTimelineAndBadPath) {
  EXPECT_FALSE(WriteTimelineFigure({}, "empty", "T", TempPath("empty.svg")).ok());
  const std::vector<std::vector<TimedOp>> tl = {{{F(0), 0, 1}, {BW(0), 1, 3}}};
  EXPECT_FALSE(WriteTimelineFigure(tl, "x", "T", TempPath("no/such/dir/x.svg")).ok());
  EXPECT_OK(WriteTimelineFigure(tl, "x", "T", TempPath("x.svg")));
}

}  // namespace
}  // namespace distlab::pipeline
