// Hidden tests of Lab 7 stage A: the rank grid. Every case draws its grid shapes from the grading seed
// (CaseRandom) and checks them against the rules of grid.h, recomputed here from scratch: the rank order
// "tp-dp-pp" (Megatron-LM's RankGenerator(order = "tp-dp-pp")), the groups of each axis, the embedding
// groups, the communicators and the shape errors.
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/grid.h"
#include "tests/composition/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using Lists = std::vector<std::vector<int>>;
using testing::Again;
using testing::CaseRandom;
using testing::Str;

// grid.h's formula, rank = tp + T (dp + D pp), and its inverse, written out.
int FormulaRank(const GridShape& s, const Coord& c) { return c.tp + s.tp * (c.dp + s.dp * c.pp); }
Coord FormulaCoord(const GridShape& s, int r) { return {(r / s.tp) % s.dp, r / (s.tp * s.dp), r % s.tp}; }

std::string Str(const Coord& c) {
  return "(dp " + std::to_string(c.dp) + ", pp " + std::to_string(c.pp) + ", tp " + std::to_string(c.tp) +
         ")";
}

std::string Str(const std::vector<int>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  return out.str() + "]";
}

// The groups of `axis` by brute force: the ranks that agree on the two other coordinates, each group by
// increasing rank (so by increasing coordinate on the axis), the groups by their first rank. kEmb: the first
// and last rank of each pp group ({first} when pp == 1).
Lists Reference(const GridShape& s, Axis axis) {
  if (axis == Axis::kEmb) {
    Lists out;
    for (const std::vector<int>& g : Reference(s, Axis::kPp)) {
      out.push_back(g.size() == 1 ? std::vector<int>{g[0]} : std::vector<int>{g.front(), g.back()});
    }
    return out;
  }
  Lists out;
  std::map<std::pair<int, int>, size_t> index;
  for (int r = 0; r < s.world(); ++r) {
    const Coord c = FormulaCoord(s, r);
    const std::pair<int, int> others = axis == Axis::kTp   ? std::make_pair(c.dp, c.pp)
                                       : axis == Axis::kDp ? std::make_pair(c.tp, c.pp)
                                                           : std::make_pair(c.tp, c.dp);
    auto [it, added] = index.emplace(others, out.size());
    if (added) out.emplace_back();
    out[it->second].push_back(r);
  }
  return out;
}

// Groups(s, axis) against the brute force; the failure names the shape, the axis and the first entry that
// differs (with its members' coordinates).
void ExpectGroups(const GridShape& s, Axis axis) {
  const Lists got = Groups(s, axis), want = Reference(s, axis);
  if (got.size() != want.size()) {
    ADD_FAILURE() << "Groups(" << Str(s) << ", " << Name(axis) << ") has " << got.size()
                  << " groups; a grid of " << s.world() << " ranks has " << want.size() << Again();
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    std::string coords;
    for (int r : got[i]) {
      if (r >= 0 && r < s.world()) coords += " " + std::to_string(r) + " = " + Str(FormulaCoord(s, r));
    }
    ADD_FAILURE() << "Groups(" << Str(s) << ", " << Name(axis) << ")[" << i << "] is " << Str(got[i])
                  << ", expected " << Str(want[i]) << " (by grid.h's rank order, its ranks are" << coords
                  << ")" << Again();
    return;
  }
}

// A shape with every size in [1, 4] and at least `min_dp`, `min_pp`, `min_tp` on each axis.
GridShape DrawShape(CaseRandom& rng, int min_dp = 1, int min_pp = 1, int min_tp = 1, int max = 4) {
  return {static_cast<int>(rng.Int(min_dp, max)), static_cast<int>(rng.Int(min_pp, max)),
          static_cast<int>(rng.Int(min_tp, max))};
}

// Five shapes of up to 64 ranks; the first has dp and tp >= 2, where the order of the axes matters.
TEST(GridHidden, RankOrderIsTpDpPp) {
  CaseRandom rng;
  std::vector<GridShape> shapes = {DrawShape(rng, 2, 1, 2)};
  for (int i = 0; i < 4; ++i) shapes.push_back(DrawShape(rng));
  for (const GridShape& s : shapes) {
    int wrong = 0;  // report the first two wrong ranks of each shape
    for (int r = 0; r < s.world() && wrong < 2; ++r) {
      const Coord want = FormulaCoord(s, r);
      const Coord c = CoordOf(s, r);
      if (!(c == want)) {
        ++wrong;
        ADD_FAILURE() << "CoordOf(" << Str(s) << ", rank " << r << ") is " << Str(c)
                      << ", but by grid.h's rank = tp + T (dp + D pp) that coordinate is rank "
                      << FormulaRank(s, c) << Again();
      }
      const int back = RankOf(s, want);
      if (back != r) {
        ++wrong;
        ADD_FAILURE() << "RankOf(" << Str(s) << ", " << Str(want) << ") is " << back
                      << ", but rank = tp + T (dp + D pp) gives " << r << Again();
      }
    }
  }
}

// The tp, dp and pp groups of three shapes of up to 64 ranks (the first with dp, pp and tp >= 2).
TEST(GridHidden, GroupListsMatchMegatron) {
  CaseRandom rng;
  for (const GridShape& s : {DrawShape(rng, 2, 2, 2), DrawShape(rng), DrawShape(rng)}) {
    for (Axis a : {Axis::kTp, Axis::kDp, Axis::kPp}) ExpectGroups(s, a);
  }
}

// Four shapes: one with pp >= 3 (first and last stage are not neighbours), one with pp == 1, two of any pp.
TEST(GridHidden, EmbeddingGroupsAreFirstAndLastStage) {
  CaseRandom rng;
  for (const GridShape& s :
       {DrawShape(rng, 1, 3, 1, 5), DrawShape(rng, 1, 1, 1, 4), DrawShape(rng, 1, 1, 1, 5), DrawShape(rng)}) {
    ExpectGroups(s, Axis::kEmb);
  }
}

// Runs Create on s.world() ranks (at most 8) and checks every comm against CoordOf and Groups (whose order
// the cases above check).
void CheckCommunicators(const GridShape& s) {
  const std::string where = "ProcessGrid of " + Str(s);
  auto statuses = comm::RunRanks(
      s.world(),
      [&](int rank, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        auto grid = ProcessGrid::Create(world, s);
        if (!grid.ok()) return grid.status();
        ProcessGrid& g = **grid;
        const Coord c = CoordOf(s, rank);  // this case checks Create against the student's own order
        const std::string on = where + ", rank " + std::to_string(rank) + " " + Str(c);
        EXPECT_EQ(g.rank(), rank) << on << Again();
        EXPECT_TRUE(g.coord() == c) << on << ": coord() is " << Str(g.coord()) << Again();
        const int coords[] = {c.tp, c.dp, c.pp};
        const int sizes[] = {s.tp, s.dp, s.pp};
        for (Axis a : {Axis::kTp, Axis::kDp, Axis::kPp}) {
          const int i = static_cast<int>(a);
          EXPECT_EQ(g.axis(a).size(), sizes[i])
              << on << ": the size of its " << Name(a) << " comm" << Again();
          EXPECT_EQ(g.axis(a).rank(), coords[i])
              << on << ": its rank in its " << Name(a) << " comm" << Again();
          // A sum of the global ranks over the comm is the sum of the rank's group.
          const std::vector<int> members = g.Members(a);
          int64_t sum = rank, want = 0;
          for (int m : members) want += m;
          absl::Status st =
              g.axis(a).AllReduce(&sum, &sum, 1, comm::DataType::kI64, comm::RedOp::kSum, stream);
          if (!st.ok()) return st;
          if (st = stream.Synchronize(); !st.ok()) return st;
          EXPECT_EQ(sum, want) << on << ": the global ranks summed over its " << Name(a)
                               << " comm are not the sum of Members(" << Name(a) << ") = " << Str(members)
                               << Again();
          const Lists all = Groups(s, a);
          EXPECT_NE(std::find(all.begin(), all.end(), members), all.end())
              << on << ": Members(" << Name(a) << ") = " << Str(members) << " is not one of its groups"
              << Again();
        }
        const bool ends = c.pp == 0 || c.pp == s.pp - 1;
        EXPECT_EQ(g.first_stage(), c.pp == 0) << on << Again();
        EXPECT_EQ(g.last_stage(), c.pp == s.pp - 1) << on << Again();
        if (!ends) {
          EXPECT_EQ(g.embedding(), nullptr)
              << on << " is on a middle stage but has an embedding comm" << Again();
          EXPECT_TRUE(g.Members(Axis::kEmb).empty()) << on << " is on a middle stage" << Again();
          return absl::OkStatus();
        }
        if (g.embedding() == nullptr) {
          return absl::InternalError(on + ": no embedding comm on a first/last stage\n  " +
                                     distlab::testing::SeedNote());
        }
        EXPECT_EQ(g.embedding()->size(), s.pp == 1 ? 1 : 2) << on << ": the size of its emb comm" << Again();
        EXPECT_EQ(g.embedding()->rank(), c.pp == 0 ? 0 : 1)
            << on << ": the first stage is rank 0 of its emb comm" << Again();
        int64_t sum = rank, want = 0;
        for (int m : g.Members(Axis::kEmb)) want += m;
        absl::Status st =
            g.embedding()->AllReduce(&sum, &sum, 1, comm::DataType::kI64, comm::RedOp::kSum, stream);
        if (!st.ok()) return st;
        if (st = stream.Synchronize(); !st.ok()) return st;
        EXPECT_EQ(sum, want) << on << ": the global ranks summed over its emb comm are not the sum of "
                             << "Members(emb) = " << Str(g.Members(Axis::kEmb)) << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << where << Again();
}

// Every shape of 2 to 8 ranks that satisfies `keep`.
std::vector<GridShape> SmallShapes(bool (*keep)(const GridShape&)) {
  std::vector<GridShape> out;
  for (int dp = 1; dp <= 8; ++dp) {
    for (int pp = 1; pp <= 8; ++pp) {
      for (int tp = 1; tp <= 8; ++tp) {
        const GridShape s{dp, pp, tp};
        if (s.world() >= 2 && s.world() <= 8 && keep(s)) out.push_back(s);
      }
    }
  }
  return out;
}

// Three shapes of 2 to 8 ranks: one with dp and pp >= 2 (several pipelines), one with pp >= 3 (a middle
// stage), one of any kind.
TEST(GridHidden, CommunicatorsMatchCoordinates) {
  CaseRandom rng;
  const std::vector<GridShape> shapes = {
      rng.Pick(SmallShapes([](const GridShape& s) { return s.dp >= 2 && s.pp >= 2; })),
      rng.Pick(SmallShapes([](const GridShape& s) { return s.pp >= 3; })),
      rng.Pick(SmallShapes([](const GridShape&) { return true; }))};
  for (const GridShape& s : shapes) CheckCommunicators(s);
}

// One axis of 3 to 8 ranks at a time.
TEST(GridHidden, OneAxisAtATime) {
  CaseRandom rng;
  const int d = static_cast<int>(rng.Int(3, 8)), p = static_cast<int>(rng.Int(3, 8)),
            t = static_cast<int>(rng.Int(3, 8));
  for (const GridShape& s : {GridShape{d, 1, 1}, GridShape{1, p, 1}, GridShape{1, 1, t}})
    CheckCommunicators(s);
}

// grid.h's rules on drawn shapes: the first size below 1 (in the order dp, pp, tp), then the product.
TEST(GridHidden, BadShapesAreClearErrors) {
  CaseRandom rng;
  const char* names[] = {"dp", "pp", "tp"};
  for (int k = 0; k < 3; ++k) {
    // Sizes in [-2, 4], the k-th forced below 1, the world any.
    int sizes[3];
    for (int& v : sizes) v = static_cast<int>(rng.Int(-2, 4));
    sizes[k] = static_cast<int>(rng.Int(-3, 0));
    const GridShape s{sizes[0], sizes[1], sizes[2]};
    const int world = static_cast<int>(rng.Int(1, 16));
    int first = 0;
    while (sizes[first] >= 1) ++first;
    const std::string want =
        std::string(names[first]) + " must be >= 1 (got " + std::to_string(sizes[first]) + ")";
    const absl::Status st = ValidateShape(s, world);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument)
        << "ValidateShape(" << Str(s) << ", " << world << ")";
    EXPECT_EQ(st.message(), want) << "ValidateShape(" << Str(s) << ", " << world << ")" << Again();
  }
  const GridShape s = DrawShape(rng);
  int world = static_cast<int>(rng.Int(1, 63));
  if (world >= s.world()) ++world;  // any world but the product
  const std::string want = "dp " + std::to_string(s.dp) + " x pp " + std::to_string(s.pp) + " x tp " +
                           std::to_string(s.tp) + " = " + std::to_string(s.world()) +
                           " ranks, but the world has " + std::to_string(world);
  const absl::Status st = ValidateShape(s, world);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument)
      << "ValidateShape(" << Str(s) << ", " << world << ")";
  EXPECT_EQ(st.message(), want) << "ValidateShape(" << Str(s) << ", " << world << ")" << Again();
  const GridShape good = DrawShape(rng);
  EXPECT_OK(ValidateShape(good, good.world())) << Str(good) << Again();
  // Every rank gets the same error, and nobody waits in a Split (the world comm still works afterwards).
  const int n = static_cast<int>(rng.Int(2, 6));
  GridShape bad;
  do {
    bad = DrawShape(rng, 1, 1, 1, 3);
  } while (bad.world() == n);
  const std::string bad_message = "dp " + std::to_string(bad.dp) + " x pp " + std::to_string(bad.pp) +
                                  " x tp " + std::to_string(bad.tp) + " = " + std::to_string(bad.world()) +
                                  " ranks, but the world has " + std::to_string(n);
  auto statuses = comm::RunRanks(
      n,
      [&](int rank, comm::Comm& world, comm::Stream& stream) -> absl::Status {
        const std::string on = "ProcessGrid::Create(" + Str(bad) + ") on rank " + std::to_string(rank) +
                               " of " + std::to_string(n);
        auto grid = ProcessGrid::Create(world, bad);
        EXPECT_FALSE(grid.ok()) << on << Again();
        EXPECT_EQ(grid.status().code(), absl::StatusCode::kInvalidArgument) << on << Again();
        EXPECT_EQ(grid.status().message(), bad_message) << on << Again();
        int x = 1;
        absl::Status st = world.AllReduce(&x, &x, 1, comm::DataType::kI32, comm::RedOp::kSum, stream);
        if (!st.ok()) return st;
        if (st = stream.Synchronize(); !st.ok()) return st;
        EXPECT_EQ(x, n) << on << ": the world comm no longer sums over all ranks" << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses))
      << "ProcessGrid::Create(" << Str(bad) << ") on " << n << " ranks" << Again();
}

}  // namespace
}  // namespace distlab::composition
