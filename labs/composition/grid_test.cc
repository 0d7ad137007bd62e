// Public tests of Lab 7 stage A (the rank grid). The expected lists are Megatron-LM's RankGenerator with
// order "tp-dp-pp" (notes/07-composition.md section 1).
#include "labs/composition/grid.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using Lists = std::vector<std::vector<int>>;

// (dp, pp, tp) = (2, 2, 2):   rank  0 1 2 3 4 5 6 7
//                             tp    0 1 0 1 0 1 0 1
//                             dp    0 0 1 1 0 0 1 1
//                             pp    0 0 0 0 1 1 1 1
TEST(GridTest, TwoByTwoByTwoCoordinatesAndGroups) {
  const GridShape s{2, 2, 2};
  const int tp[] = {0, 1, 0, 1, 0, 1, 0, 1}, dp[] = {0, 0, 1, 1, 0, 0, 1, 1}, pp[] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int r = 0; r < 8; ++r) {
    const Coord c = CoordOf(s, r);
    EXPECT_EQ(c.tp, tp[r]) << "rank " << r;
    EXPECT_EQ(c.dp, dp[r]) << "rank " << r;
    EXPECT_EQ(c.pp, pp[r]) << "rank " << r;
    EXPECT_EQ(RankOf(s, c), r);
  }
  EXPECT_EQ(Groups(s, Axis::kTp), (Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(Groups(s, Axis::kDp), (Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(Groups(s, Axis::kPp), (Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // (1, 4, 2): pipelines [0,2,4,6] and [1,3,5,7]; a tied embedding lives on their first and last stages.
  EXPECT_EQ(Groups({1, 4, 2}, Axis::kPp), (Lists{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(Groups({1, 4, 2}, Axis::kEmb), (Lists{{0, 6}, {1, 7}}));
  EXPECT_EQ(Groups({2, 1, 2}, Axis::kEmb), (Lists{{0}, {1}, {2}, {3}}))
      << "pp = 1: the stage is first and last";
}

TEST(GridTest, WrongProductIsAnError) {
  EXPECT_OK(ValidateShape({2, 2, 2}, 8));
  const absl::Status s = ValidateShape({2, 2, 3}, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "dp 2 x pp 2 x tp 3 = 12 ranks, but the world has 8");
  EXPECT_EQ(ValidateShape({8, 1, 0}, 8).message(), "tp must be >= 1 (got 0)");
}

// Seeded: three shapes drawn from the grading seed (dp, pp, tp each in [1, 4]; the first with dp, pp and tp
// >= 2), the kind of shapes the hidden tests draw. Every rank's coordinates follow rank = tp + T (dp + D pp),
// and each axis's groups are the ranks that differ only in that axis's coordinate, by increasing coordinate,
// ordered by their first rank (emb: the first and last rank of each pp group). A hidden failure names its
// grading seed S; `bazel test //labs/composition:grid_test --test_env=DISTLAB_GRADING_SEED=S` draws shapes of
// the same kind here.
TEST(GridTest, DrawnShapesFollowTheRankOrder) {
  testing::CaseRandom rng;
  std::vector<GridShape> shapes;
  for (int i = 0; i < 3; ++i) {
    const int lo = i == 0 ? 2 : 1;
    shapes.push_back({static_cast<int>(rng.Int(lo, 4)), static_cast<int>(rng.Int(lo, 4)),
                      static_cast<int>(rng.Int(lo, 4))});
  }
  for (const GridShape& s : shapes) {
    const std::string shape =
        "(dp " + std::to_string(s.dp) + ", pp " + std::to_string(s.pp) + ", tp " + std::to_string(s.tp) + ")";
    // The groups, by brute force over the ranks in increasing order.
    std::map<std::pair<int, int>, std::vector<int>> tp, dp, pp;
    for (int r = 0; r < s.world(); ++r) {
      const Coord want{(r / s.tp) % s.dp, r / (s.tp * s.dp), r % s.tp};
      const Coord c = CoordOf(s, r);
      EXPECT_TRUE(c == want) << "CoordOf(" << shape << ", " << r << ") is (dp " << c.dp << ", pp " << c.pp
                             << ", tp " << c.tp << ")\n  " << testing::SeedNote();
      EXPECT_EQ(RankOf(s, want), r) << shape << "\n  " << testing::SeedNote();
      tp[{want.dp, want.pp}].push_back(r);
      dp[{want.tp, want.pp}].push_back(r);
      pp[{want.tp, want.dp}].push_back(r);
    }
    auto in_order = [](const std::map<std::pair<int, int>, std::vector<int>>& groups) {
      Lists out;
      for (const auto& [key, g] : groups) out.push_back(g);
      std::sort(out.begin(), out.end());  // by first rank
      return out;
    };
    Lists emb;
    for (const std::vector<int>& g : in_order(pp)) {
      emb.push_back(g.size() == 1 ? std::vector<int>{g[0]} : std::vector<int>{g.front(), g.back()});
    }
    EXPECT_EQ(Groups(s, Axis::kTp), in_order(tp)) << "Groups(" << shape << ", tp)\n  " << testing::SeedNote();
    EXPECT_EQ(Groups(s, Axis::kDp), in_order(dp)) << "Groups(" << shape << ", dp)\n  " << testing::SeedNote();
    EXPECT_EQ(Groups(s, Axis::kPp), in_order(pp)) << "Groups(" << shape << ", pp)\n  " << testing::SeedNote();
    EXPECT_EQ(Groups(s, Axis::kEmb), emb) << "Groups(" << shape << ", emb)\n  " << testing::SeedNote();
  }
}

// On 8 ranks of (2, 2, 2): every axis comm has the rank's coordinate as its rank, and a sum over it adds
// exactly the group's members.
TEST(GridTest, CommunicatorsMatchTheGroups) {
  comm::CommOptions opts;
  opts.timeout = testing::Scaled(std::chrono::seconds(5));
  const GridShape s{2, 2, 2};
  auto statuses = comm::RunRanks(
      8,
      [&](int rank, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto grid = ProcessGrid::Create(world, s);
        if (!grid.ok()) return grid.status();
        ProcessGrid& g = **grid;
        const Coord c = CoordOf(s, rank);
        EXPECT_EQ(g.coord(), c);
        EXPECT_EQ(g.axis(Axis::kTp).rank(), c.tp);
        EXPECT_EQ(g.axis(Axis::kDp).rank(), c.dp);
        EXPECT_EQ(g.axis(Axis::kPp).rank(), c.pp);
        for (Axis a : {Axis::kTp, Axis::kDp, Axis::kPp}) {
          const std::vector<int> members = g.Members(a);
          EXPECT_EQ(g.axis(a).size(), static_cast<int>(members.size())) << Name(a);
          int sum = rank, want = 0;
          for (int m : members) want += m;
          if (absl::Status st =
                  g.axis(a).AllReduce(&sum, &sum, 1, comm::DataType::kI32, comm::RedOp::kSum, stream);
              !st.ok()) {
            return st;
          }
          if (absl::Status st = stream.Synchronize(); !st.ok()) return st;
          EXPECT_EQ(sum, want) << "rank " << rank << ": the " << Name(a) << " comm is not its group";
        }
        EXPECT_NE(g.embedding(), nullptr) << "with pp = 2 every stage is first or last";
        return absl::OkStatus();
      },
      opts);
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::composition
