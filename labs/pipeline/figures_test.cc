// Public test of Lab 5 stage D: the boxes of a timeline figure.
#include "labs/pipeline/figures.h"

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
}

}  // namespace
}  // namespace distlab::pipeline
