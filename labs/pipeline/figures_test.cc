// Public tests of Lab 5 stage D: the boxes of a timeline figure, and the figure written as SVG.
#include "labs/pipeline/figures.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::pipeline {
namespace {

// GPipe, p = 2, m = 1, T_F = 1, T_B = T_W = 1 (fused BW = 2):
//   stage 0: [F0][ idle  ][ BW0  ]        0..1 F0, 1..4 idle, 4..6 BW0
//   stage 1: [idle][F0][ BW0 ][idle]      0..1 idle, 1..2 F0, 2..4 BW0, 4..6 idle
TEST(TimelineBoxes, OpsAndIdleGaps) {
  const std::vector<std::vector<TimedOp>> tl = {{{F(0), 0, 1}, {BW(0), 4, 6}}, {{F(0), 1, 2}, {BW(0), 2, 4}}};
  std::vector<viz::Timeline::Box> boxes = TimelineBoxes(tl);
  ASSERT_EQ(boxes.size(), 7u);
  EXPECT_EQ(boxes[0].label, "F0");
  EXPECT_EQ(boxes[1].category, kIdleCategory);
  EXPECT_DOUBLE_EQ(boxes[1].start, 1);
  EXPECT_DOUBLE_EQ(boxes[1].end, 4);
  EXPECT_EQ(boxes[2].label, "BW0");
  EXPECT_EQ(boxes[2].category, KindCategory(OpKind::kFullBackward));
  EXPECT_EQ(boxes[6].row, 1);
  EXPECT_EQ(boxes[6].category, kIdleCategory);
  EXPECT_DOUBLE_EQ(boxes[6].end, 6);
}

// A gap of at most 1e-9 x the makespan is rounding, not idle time (the executor's clock never gives exact
// zeros): F0 [0, 1], BW0 [1 + 1e-12, 3] gives two boxes and no idle box between them.
TEST(TimelineBoxes, RoundingGapsAreNotIdle) {
  const std::vector<std::vector<TimedOp>> tl = {{{F(0), 0, 1}, {BW(0), 1 + 1e-12, 3}}};
  std::vector<viz::Timeline::Box> boxes = TimelineBoxes(tl);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[1].label, "BW0");
  // The same at a gap and op lengths drawn from the grading seed (--test_env=DISTLAB_GRADING_SEED=S).
  distlab::testing::CaseRandom rnd;
  const double f = 0.25 * rnd.Int(1, 16), bw = 0.25 * rnd.Int(1, 16), gap = 1e-13 * rnd.Int(1, 1000);
  const std::vector<std::vector<TimedOp>> drawn = {{{F(0), 0, f}, {BW(0), f + gap, f + gap + bw}}};
  boxes = TimelineBoxes(drawn);
  EXPECT_EQ(boxes.size(), 2u) << "F0 [0, " << f << "], BW0 [" << f << " + " << gap << ", ...]: no idle box; "
                              << distlab::testing::SeedNote();
}

// The figure of the first test's timeline, written as SVG:
//   title "GPipe p=2 m=1", x label "time (T)", rows "stage 0" and "stage 1", boxes F0 and BW0 on each row
//   and the idle boxes between, a legend of F, "BW (fused)" and "idle" (no B or W: none appear).
// An empty timeline, or a path that cannot be written, is an error.
TEST(WriteTimelineFigure, WritesTheBoxesAsSvg) {
  const std::vector<std::vector<TimedOp>> tl = {{{F(0), 0, 1}, {BW(0), 4, 6}}, {{F(0), 1, 2}, {BW(0), 2, 4}}};
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/gpipe.svg";
  ASSERT_OK(WriteTimelineFigure(tl, "GPipe p=2 m=1", "T", path));
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string svg = ss.str();
  for (const char* want :
       {"<svg", "GPipe p=2 m=1", "time (T)", "stage 0", "stage 1", ">F0<", ">BW0<", "BW (fused)", "idle"}) {
    EXPECT_NE(svg.find(want), std::string::npos) << want;
  }
  EXPECT_EQ(WriteTimelineFigure({}, "empty", "T", path).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(
      WriteTimelineFigure(tl, "x", "T", std::string(dir ? dir : "/tmp") + "/no/such/dir/x.svg").ok());
}

}  // namespace
}  // namespace distlab::pipeline
