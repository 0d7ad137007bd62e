// Hidden tests of Lab 7 stage A: the rank grid. The group lists are those of Megatron-LM's
// RankGenerator(order = "tp-dp-pp").get_ranks(...) for the same sizes.
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/grid.h"
#include "tests/composition/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using Lists = std::vector<std::vector<int>>;

TEST(GridHidden, RankOrderIsTpDpPp) {
  for (const GridShape& s :
       {GridShape{2, 2, 2}, GridShape{1, 4, 2}, GridShape{4, 2, 1}, GridShape{2, 4, 2}, GridShape{3, 2, 4}}) {
    int r = 0;
    for (int pp = 0; pp < s.pp; ++pp) {
      for (int dp = 0; dp < s.dp; ++dp) {
        for (int tp = 0; tp < s.tp; ++tp, ++r) {
          const Coord c = CoordOf(s, r);
          EXPECT_TRUE((c == Coord{dp, pp, tp}))
              << "rank " << r << " of (" << s.dp << ", " << s.pp << ", " << s.tp << ") is (dp " << c.dp
              << ", pp " << c.pp << ", tp " << c.tp << ")";
          EXPECT_EQ(RankOf(s, Coord{dp, pp, tp}), r);
        }
      }
    }
  }
}

TEST(GridHidden, GroupListsMatchMegatron) {
  EXPECT_EQ(Groups({1, 4, 2}, Axis::kTp), (Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(Groups({1, 4, 2}, Axis::kDp), (Lists{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(Groups({1, 4, 2}, Axis::kPp), (Lists{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(Groups({4, 2, 1}, Axis::kTp), (Lists{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(Groups({4, 2, 1}, Axis::kDp), (Lists{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(Groups({4, 2, 1}, Axis::kPp), (Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // 16 ranks, tp 2, pp 4, dp 2: the example of Megatron's generate_masked_orthogonal_rank_groups docstring.
  const GridShape s{2, 4, 2};
  Lists tp;
  for (int i = 0; i < 16; i += 2) tp.push_back({i, i + 1});
  EXPECT_EQ(Groups(s, Axis::kTp), tp);
  EXPECT_EQ(Groups(s, Axis::kDp),
            (Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(Groups(s, Axis::kPp), (Lists{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(Groups({3, 2, 4}, Axis::kDp)[5], (std::vector<int>{13, 17, 21})) << "tp 1, pp 1";
}

TEST(GridHidden, EmbeddingGroupsAreFirstAndLastStage) {
  EXPECT_EQ(Groups({2, 4, 2}, Axis::kEmb), (Lists{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  EXPECT_EQ(Groups({1, 8, 1}, Axis::kEmb), (Lists{{0, 7}}));
  EXPECT_EQ(Groups({2, 3, 1}, Axis::kEmb), (Lists{{0, 4}, {1, 5}}));
  EXPECT_EQ(Groups({4, 1, 2}, Axis::kEmb), (Lists{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
}

// Runs Create on 8 ranks for `s` and checks every comm against the formulas.
void CheckCommunicators(const GridShape& s) {
  auto statuses = comm::RunRanks(
      s.world(),
      [&](int rank, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto grid = ProcessGrid::Create(world, s);
        if (!grid.ok()) return grid.status();
        ProcessGrid& g = **grid;
        const Coord c = CoordOf(s, rank);
        EXPECT_EQ(g.rank(), rank);
        EXPECT_TRUE(g.coord() == c) << "rank " << rank;
        const int coords[] = {c.tp, c.dp, c.pp};
        const int sizes[] = {s.tp, s.dp, s.pp};
        for (Axis a : {Axis::kTp, Axis::kDp, Axis::kPp}) {
          const int i = static_cast<int>(a);
          EXPECT_EQ(g.axis(a).size(), sizes[i]) << Name(a) << " on rank " << rank;
          EXPECT_EQ(g.axis(a).rank(), coords[i]) << Name(a) << " on rank " << rank;
          // A sum of the global ranks over the comm is the sum of the rank's group.
          const std::vector<int> members = g.Members(a);
          int64_t sum = rank, want = 0;
          for (int m : members) want += m;
          absl::Status st =
              g.axis(a).AllReduce(&sum, &sum, 1, comm::DataType::kI64, comm::RedOp::kSum, stream);
          if (!st.ok()) return st;
          if (st = stream.Synchronize(); !st.ok()) return st;
          EXPECT_EQ(sum, want) << Name(a) << " on rank " << rank;
          const Lists all = Groups(s, a);
          EXPECT_NE(std::find(all.begin(), all.end(), members), all.end()) << Name(a) << " on rank " << rank;
        }
        const bool ends = c.pp == 0 || c.pp == s.pp - 1;
        EXPECT_EQ(g.first_stage(), c.pp == 0);
        EXPECT_EQ(g.last_stage(), c.pp == s.pp - 1);
        if (!ends) {
          EXPECT_EQ(g.embedding(), nullptr) << "rank " << rank << " is on a middle stage";
          EXPECT_TRUE(g.Members(Axis::kEmb).empty());
          return absl::OkStatus();
        }
        if (g.embedding() == nullptr) return absl::InternalError("no embedding comm on a first/last stage");
        EXPECT_EQ(g.embedding()->size(), s.pp == 1 ? 1 : 2);
        EXPECT_EQ(g.embedding()->rank(), c.pp == 0 ? 0 : 1) << "the first stage is rank 0 of its emb comm";
        int64_t sum = rank, want = 0;
        for (int m : g.Members(Axis::kEmb)) want += m;
        absl::Status st =
            g.embedding()->AllReduce(&sum, &sum, 1, comm::DataType::kI64, comm::RedOp::kSum, stream);
        if (!st.ok()) return st;
        if (st = stream.Synchronize(); !st.ok()) return st;
        EXPECT_EQ(sum, want) << "emb on rank " << rank;
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

TEST(GridHidden, CommunicatorsMatchCoordinates) {
  for (const GridShape& s : {GridShape{2, 2, 2}, GridShape{1, 4, 2}, GridShape{4, 2, 1}}) {
    SCOPED_TRACE("(" + std::to_string(s.dp) + ", " + std::to_string(s.pp) + ", " + std::to_string(s.tp) +
                 ")");
    CheckCommunicators(s);
  }
}

TEST(GridHidden, OneAxisAtATime) {
  for (const GridShape& s : {GridShape{8, 1, 1}, GridShape{1, 8, 1}, GridShape{1, 1, 8}}) {
    SCOPED_TRACE("(" + std::to_string(s.dp) + ", " + std::to_string(s.pp) + ", " + std::to_string(s.tp) +
                 ")");
    CheckCommunicators(s);
  }
}

TEST(GridHidden, BadShapesAreClearErrors) {
  EXPECT_EQ(ValidateShape({0, 2, 2}, 8).message(), "dp must be >= 1 (got 0)");
  EXPECT_EQ(ValidateShape({2, -1, 0}, 8).message(), "pp must be >= 1 (got -1)");
  EXPECT_EQ(ValidateShape({3, 1, 2}, 4).message(), "dp 3 x pp 1 x tp 2 = 6 ranks, but the world has 4");
  EXPECT_OK(ValidateShape({1, 1, 1}, 1));
  // Every rank gets the same error, and nobody waits in a Split (the world comm still works afterwards).
  auto statuses = comm::RunRanks(
      4,
      [](int, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto grid = ProcessGrid::Create(world, {2, 2, 2});
        EXPECT_FALSE(grid.ok());
        EXPECT_EQ(grid.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(grid.status().message(), "dp 2 x pp 2 x tp 2 = 8 ranks, but the world has 4");
        int x = 1;
        absl::Status st = world.AllReduce(&x, &x, 1, comm::DataType::kI32, comm::RedOp::kSum, stream);
        if (!st.ok()) return st;
        if (st = stream.Synchronize(); !st.ok()) return st;
        EXPECT_EQ(x, 4);
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::composition
