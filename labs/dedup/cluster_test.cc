// Public tests, Lab 3 stage C (clusters): union-find, the pipeline, survivors.
#include "labs/dedup/cluster.h"

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

// UnionFind(6), then (rank in brackets; "x < y" = x goes under y):
//   Union(4, 5)   roots 4 [0], 5 [0]: equal ranks, the larger id under the smaller:  5 < 4, rank(4) = 1
//   Union(1, 2)   roots 1 [0], 2 [0]:                                                2 < 1, rank(1) = 1
//   Union(5, 2)   roots 4 [1], 1 [1]: equal ranks:                                   4 < 1, rank(1) = 2
//   Union(3, 0)   roots 3 [0], 0 [0]:                                                3 < 0, rank(0) = 1
//   Union(0, 4)   roots 0 [1], 1 [2]: the lower rank goes under:                     0 < 1, rank(1) stays 2
//   Union(2, 4)   one root, 1: already one set -> false
// (every argument is a root or one link below it, so the unions' own Finds have no path to compress)
//
//          1 [2]                          Find(5) walks 5 -> 4 -> 1, then points 5 at 1;
//        / | \                            Find(3) walks 3 -> 0 -> 1, then points 3 at 1.
//       2  4  0 [1]
//          |  |
//          5  3
TEST(UnionFind, RanksTieBreakAndCompression) {
  UnionFind uf(6);
  EXPECT_TRUE(uf.Union(4, 5));
  EXPECT_TRUE(uf.Union(1, 2));
  EXPECT_TRUE(uf.Union(5, 2));
  EXPECT_TRUE(uf.Union(3, 0));
  EXPECT_TRUE(uf.Union(0, 4));
  EXPECT_FALSE(uf.Union(2, 4));
  const int parent[6] = {1, 1, 1, 0, 1, 4}, rank[6] = {1, 2, 0, 0, 1, 0};
  for (int x = 0; x < 6; ++x) {
    EXPECT_EQ(uf.Parent(x), parent[x]) << "Parent(" << x << ")";
    EXPECT_EQ(uf.Rank(x), rank[x]) << "Rank(" << x << ")";
  }
  EXPECT_EQ(uf.Find(5), 1);
  EXPECT_EQ(uf.Parent(5), 1);
  EXPECT_EQ(uf.Find(3), 1);
  EXPECT_EQ(uf.Parent(3), 1);
}

std::vector<std::string> ThreeCopiesAndOneOther() {
  const std::string text = "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun";
  return {text, "THE QUICK brown fox jumps over the lazy dog while the cat sleeps in the sun",
          "an entirely different sentence about something else that shares nothing", text + "  "};
}

// Three copies of one text (with different spacing and case) and one unrelated text, default options:
//   candidates  (0, 1) (0, 3) (1, 3)                 -- the three copies' signatures are equal
//   verified    (0, 1, 1.0) (0, 3, 1.0) (1, 3, 1.0)  -- their shingle sets are equal: J = 1
//   clusters    #0 {0, 1, 3}, survivor 0 (lowest id), max_jaccard 1.0; doc 2 in none
//   kept {0, 2}, removed {1, 3}, banding 16 x 8 (PickBanding(0.8, 128, 0.05, 0.95))
TEST(Deduplicate, ExactCopiesFormOneCluster) {
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(ThreeCopiesAndOneOther(), DedupOptions{}));
  EXPECT_EQ(r.banding.bands, 16);
  EXPECT_EQ(r.banding.rows, 8);
  EXPECT_EQ(r.candidate_pairs, 3);
  ASSERT_EQ(r.verified.size(), 3u);
  EXPECT_EQ(r.verified[1].i, 0);
  EXPECT_EQ(r.verified[1].j, 3);
  EXPECT_DOUBLE_EQ(r.verified[1].jaccard, 1.0);
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].id, 0);
  EXPECT_EQ(r.clusters[0].members, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(r.clusters[0].survivor, 0);
  EXPECT_DOUBLE_EQ(r.clusters[0].max_jaccard, 1.0);
  EXPECT_EQ(r.kept, (std::vector<int>{0, 2}));
  EXPECT_EQ(r.removed, (std::vector<int>{1, 3}));
}

// The same corpus with SurvivorRule::kRandom and survivor_seed 1:
//   members {0, 1, 3}: SurvivorIndex(1, 0, 3) = 2 -> members[2] = 3 survives
//   kept {2, 3}, removed {0, 1}; a second run gives the same.
TEST(Deduplicate, RandomSurvivorIsTheSeededDraw) {
  ASSERT_EQ(SurvivorIndex(1, 0, 3), 2);
  DedupOptions opt;
  opt.survivor = SurvivorRule::kRandom;
  opt.survivor_seed = 1;
  for (int run = 0; run < 2; ++run) {
    ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(ThreeCopiesAndOneOther(), opt));
    ASSERT_EQ(r.clusters.size(), 1u);
    EXPECT_EQ(r.clusters[0].survivor, 3);
    EXPECT_EQ(r.kept, (std::vector<int>{2, 3}));
    EXPECT_EQ(r.removed, (std::vector<int>{0, 1}));
  }
}

}  // namespace
}  // namespace distlab::dedup
