// Hidden tests, Lab 3 stage C (clusters): union-find, verification, survivors, the pipeline's errors.
#include <numeric>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dedup/cluster.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

using ::testing::HasSubstr;

// Union(0,1): equal ranks -> 1 under 0, rank(0) = 1.    Union(2,3): 3 under 2, rank(2) = 1.
// Union(3,1): roots 2 and 0 of equal rank 1 -> 2 under 0 (smaller id wins), rank(0) = 2.
//      0            Find(3) walks 3 -> 2 -> 0 and then points 3 straight at 0 (path compression).
//     / \   (0 is the root)
//    1   2
//        |
//        3
TEST(UnionFindHidden, RanksTiesAndPathCompression) {
  UnionFind uf(6);
  EXPECT_TRUE(uf.Union(0, 1));
  EXPECT_TRUE(uf.Union(2, 3));
  EXPECT_TRUE(uf.Union(3, 1));
  EXPECT_EQ(uf.Parent(1), 0);
  EXPECT_EQ(uf.Parent(2), 0);
  EXPECT_EQ(uf.Parent(3), 2);
  EXPECT_EQ(uf.Rank(0), 2);
  EXPECT_EQ(uf.Find(3), 0);
  EXPECT_EQ(uf.Parent(3), 0) << "Find must compress the path";
  // Union by rank: the singleton 5 (rank 0) goes under root 0 (rank 2), whatever the argument order.
  EXPECT_TRUE(uf.Union(5, 3));
  EXPECT_EQ(uf.Parent(5), 0);
  EXPECT_EQ(uf.Rank(0), 2);
  EXPECT_FALSE(uf.Union(1, 5)) << "already one set";
  EXPECT_EQ(uf.Find(4), 4);
}

// Depth of x's tree node, walking Parent() only (Find would compress the path it measures).
int Depth(const UnionFind& uf, int x) {
  int depth = 0;
  for (int z = x; uf.Parent(z) != z; z = uf.Parent(z)) ++depth;
  return depth;
}

// Union by rank: a tree of rank r holds at least 2^r elements, so no element is deeper than floor(log2 n).
// The bound is reached: uniting equal pairs, then pairs of pairs, ... (roots only, so Find compresses
// nothing) builds a binomial tree of 256 whose element 255 is 8 links below the root.
TEST(UnionFindHidden, DepthAtMostLog2NAndReached) {
  UnionFind tree(256);
  for (int width = 1; width < 256; width *= 2) {
    for (int i = 0; i < 256; i += 2 * width) EXPECT_TRUE(tree.Union(i, i + width));
  }
  EXPECT_EQ(tree.Rank(0), 8);
  int deepest = 0;
  for (int x = 0; x < 256; ++x) deepest = std::max(deepest, Depth(tree, x));
  EXPECT_EQ(deepest, 8) << "log2(256) = 8";
  EXPECT_EQ(Depth(tree, 255), 8);
  // Random unions of 300 elements: never deeper than floor(log2 300) = 8.
  constexpr int n = 300;
  std::mt19937_64 rng(11);
  UnionFind uf(n);
  for (int step = 0; step < 400; ++step) {
    (void)uf.Union(static_cast<int>(rng() % n), static_cast<int>(rng() % n));
    if (step % 50 == 49) {
      for (int x = 0; x < n; ++x) ASSERT_LE(Depth(uf, x), 8) << "element " << x << " after " << step + 1;
    }
  }
}

// Random unions against labels merged by brute force.
TEST(UnionFindHidden, MatchesBruteForceConnectivity) {
  constexpr int n = 300;
  std::mt19937_64 rng(4);
  UnionFind uf(n);
  std::vector<int> label(n);
  std::iota(label.begin(), label.end(), 0);
  for (int step = 0; step < 250; ++step) {
    const int a = rng() % n, b = rng() % n;
    const bool merged = label[a] != label[b];
    EXPECT_EQ(uf.Union(a, b), merged);
    const int from = label[b], to = label[a];
    for (int& l : label) l = l == from ? to : l;
  }
  for (int x = 0; x < n; ++x) EXPECT_LE(Depth(uf, x), 8) << "floor(log2 300) = 8";
  for (int x = 0; x < n; ++x) {
    for (int y = x + 1; y < n; y += 7)
      ASSERT_EQ(uf.Find(x) == uf.Find(y), label[x] == label[y]) << x << " " << y;
  }
}

std::string Words(int first, int count) {  // "w<first> w<first+1> ..." -- distinct words
  std::string s;
  for (int i = 0; i < count; ++i) s += (i ? " w" : "w") + std::to_string(first + i);
  return s;
}

// Documents:
//   0: A             3: A with 1 of 60 words changed (J ≈ 0.85)     5: B, noisy copy of 1 (J = 1)
//   1: B             4: C                                           6: A again (J = 1)
//   2: unrelated
// Clusters at threshold 0.8: {0, 3, 6} and {1, 5}; 2 and 4 alone.
std::vector<std::string> SmallCorpus() {
  std::string a = Words(0, 60), b = Words(1000, 60);
  std::string a_edit = a;
  a_edit.replace(a_edit.find("w30 "), 4, "xx ");
  return {a, b, Words(2000, 60), a_edit, Words(3000, 60), "W" + b.substr(1) + ".", a};
}

TEST(DeduplicateHidden, ClustersSurvivorsAndReport) {
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(SmallCorpus(), DedupOptions{}));
  ASSERT_EQ(r.clusters.size(), 2u);
  EXPECT_EQ(r.clusters[0].id, 0);
  EXPECT_EQ(r.clusters[0].members, (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(r.clusters[0].survivor, 0);
  EXPECT_DOUBLE_EQ(r.clusters[0].max_jaccard, 1.0);
  EXPECT_EQ(r.clusters[1].id, 1);
  EXPECT_EQ(r.clusters[1].members, (std::vector<int>{1, 5}));
  EXPECT_EQ(r.clusters[1].survivor, 1);
  EXPECT_EQ(r.kept, (std::vector<int>{0, 1, 2, 4}));
  EXPECT_EQ(r.removed, (std::vector<int>{3, 5, 6}));
  // Verified pairs carry their exact Jaccard: 56 words in common windows of 5 -> (56 - 5) / (56 + 5) ...
  ASSERT_EQ(r.verified.size(), 4u);  // (0,3) (0,6) (1,5) (3,6)
  EXPECT_EQ(r.verified[0].i, 0);
  EXPECT_EQ(r.verified[0].j, 3);
  EXPECT_NEAR(r.verified[0].jaccard, 51.0 / 61.0, 1e-12);  // 56 windows each, 51 shared
}

// LSH proposes, exact Jaccard decides. With 64 bands of 2 rows nearly every pair at J ≈ 0.6 is a candidate;
// at threshold 0.9 none of them may be merged.
TEST(DeduplicateHidden, VerificationRejectsCandidatesBelowThreshold) {
  std::vector<std::string> docs;
  for (int d = 0; d < 6; ++d) docs.push_back(Words(0, 60) + " " + Words(100 * (d + 1), 22));  // J ≈ 0.6
  DedupOptions opt;
  opt.threshold = 0.9;
  opt.banding = {64, 2};
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(docs, opt));
  EXPECT_GT(r.candidate_pairs, 5);
  EXPECT_TRUE(r.verified.empty());
  EXPECT_TRUE(r.clusters.empty());
  EXPECT_EQ(r.kept.size(), 6u);
  opt.threshold = 0.5;  // now they are duplicates: one cluster
  ASSERT_OK_AND_ASSIGN(DedupResult low, Deduplicate(docs, opt));
  ASSERT_EQ(low.clusters.size(), 1u);
  EXPECT_EQ(low.clusters[0].members.size(), 6u);
}

// 30 clusters of 4 exact copies each (documents interleaved): kRandom keeps the member the header's
// SurvivorIndex(seed, smallest member, size) names -- the same on every run -- and not always the lowest.
TEST(DeduplicateHidden, SeededRandomSurvivorIsReproducible) {
  std::vector<std::string> docs;
  for (int copy = 0; copy < 4; ++copy)
    for (int c = 0; c < 30; ++c) docs.push_back(Words(100 * c, 40));
  DedupOptions opt;
  opt.survivor = SurvivorRule::kRandom;
  opt.survivor_seed = 17;
  ASSERT_OK_AND_ASSIGN(DedupResult first, Deduplicate(docs, opt));
  ASSERT_OK_AND_ASSIGN(DedupResult again, Deduplicate(docs, opt));
  ASSERT_EQ(first.clusters.size(), 30u);
  int not_lowest = 0;
  for (int c = 0; c < 30; ++c) {
    const Cluster& cl = first.clusters[c];
    ASSERT_EQ(cl.members, (std::vector<int>{c, c + 30, c + 60, c + 90}));
    EXPECT_EQ(cl.survivor, cl.members[SurvivorIndex(17, c, 4)]) << "cluster " << c;
    EXPECT_EQ(again.clusters[c].survivor, cl.survivor);
    not_lowest += cl.survivor != c;
  }
  EXPECT_GT(not_lowest, 10);
  EXPECT_EQ(first.removed.size(), 90u);
}

// The default keeps the lowest id of each cluster, even where union-find's root is another member.
TEST(DeduplicateHidden, DefaultSurvivorIsLowestId) {
  std::vector<std::string> docs;
  for (int c = 0; c < 10; ++c) docs.push_back(Words(500 * c, 30));
  for (int c = 9; c >= 0; --c) docs.push_back(Words(500 * c, 30));
  for (int c = 0; c < 10; ++c) docs.push_back(Words(500 * c, 30));
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(docs, DedupOptions{}));
  ASSERT_EQ(r.clusters.size(), 10u);
  for (const Cluster& c : r.clusters) EXPECT_EQ(c.survivor, c.members.front());
  std::vector<int> want(10);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(r.kept, want);
}

// The tool's default (fp_weight, fn_weight) = (0.05, 0.95) picks 16 x 8 at t = 0.8 with k = 128.
TEST(DeduplicateHidden, DefaultOptionsBand16x8) {
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(SmallCorpus(), DedupOptions{}));
  EXPECT_EQ(r.banding.bands, 16);
  EXPECT_EQ(r.banding.rows, 8);
}

TEST(DeduplicateHidden, SameResultForAnyThreadCount) {
  std::vector<std::string> docs;
  std::mt19937_64 rng(6);
  for (int d = 0; d < 200; ++d) docs.push_back(Words(rng() % 40 * 10, 50));
  DedupOptions opt;
  opt.threads = 1;
  ASSERT_OK_AND_ASSIGN(DedupResult one, Deduplicate(docs, opt));
  opt.threads = 3;
  ASSERT_OK_AND_ASSIGN(DedupResult three, Deduplicate(docs, opt));
  EXPECT_EQ(one.kept, three.kept);
  EXPECT_EQ(one.clusters.size(), three.clusters.size());
  EXPECT_FALSE(one.clusters.empty());
}

TEST(DeduplicateHidden, InvalidParametersAreClearErrors) {
  const std::vector<std::string> docs = {"a b c", "d e f"};
  auto code = [&](DedupOptions o) { return Deduplicate(docs, o).status().code(); };
  DedupOptions o;
  o.ngram = 0;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = {}, o.k = 0;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = {}, o.threshold = 0.0;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = {}, o.threshold = 1.01;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = {}, o.banding = {20, 7};  // 140 > 128
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  const absl::Status bad = Deduplicate({"fine", "also fine", "bad \xC0"}, DedupOptions{}).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("document 2"));
}

TEST(DeduplicateHidden, ReportsProgress) {
  std::set<std::string> phases;
  DedupOptions o;
  o.progress = [&](const std::string& phase, int64_t, int64_t) { phases.insert(phase); };
  ASSERT_OK(Deduplicate(SmallCorpus(), o).status());
  EXPECT_GE(phases.size(), 2u);
}

}  // namespace
}  // namespace distlab::dedup
