// Hidden tests, Lab 2 stage A: samplers and collate. Expected orders come from the spec's formulas
// (SeededShuffle, padding by repetition, stride R), computed here independently.
#include <algorithm>
#include <numeric>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/sampler.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

std::vector<int64_t> Iota(int64_t n) {
  V v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Reference: the indices rank r of R gets (written from the torch DistributedSampler description).
V ExpectedDistributed(int64_t n, int64_t R, int64_t r, bool shuffle, uint64_t seed, int64_t epoch,
                      bool drop_last) {
  V order = Iota(n);
  if (shuffle) SeededShuffle(&order, seed + static_cast<uint64_t>(epoch));
  int64_t per = drop_last ? n / R : (n + R - 1) / R;
  V padded;
  for (int64_t i = 0; i < per * R; ++i) padded.push_back(order[static_cast<size_t>(i % n)]);
  V mine;
  for (int64_t i = r; i < per * R; i += R) mine.push_back(padded[static_cast<size_t>(i)]);
  return mine;
}

TEST(BatchSampler, TenItemsBatchThree) {
  ASSERT_OK_AND_ASSIGN(auto bs, BatchSampler::Create(std::make_shared<SequentialSampler>(10), 3, false));
  EXPECT_EQ(bs.size(), 4);
  EXPECT_THAT(bs.Batches(), ElementsAre(V{0, 1, 2}, V{3, 4, 5}, V{6, 7, 8}, V{9}));
}

TEST(BatchSampler, DropLastDropsTheShortBatch) {
  ASSERT_OK_AND_ASSIGN(auto bs, BatchSampler::Create(std::make_shared<SequentialSampler>(10), 3, true));
  EXPECT_EQ(bs.size(), 3);
  EXPECT_THAT(bs.Batches(), ElementsAre(V{0, 1, 2}, V{3, 4, 5}, V{6, 7, 8}));
}

TEST(BatchSampler, ExactMultipleHasNoShortBatch) {
  for (bool drop : {false, true}) {
    ASSERT_OK_AND_ASSIGN(auto bs, BatchSampler::Create(std::make_shared<SequentialSampler>(8), 4, drop));
    EXPECT_EQ(bs.size(), 2);
    EXPECT_THAT(bs.Batches(), ElementsAre(V{0, 1, 2, 3}, V{4, 5, 6, 7}));
  }
  ASSERT_OK_AND_ASSIGN(auto one, BatchSampler::Create(std::make_shared<SequentialSampler>(2), 5, false));
  EXPECT_EQ(one.size(), 1);
  EXPECT_THAT(one.Batches(), ElementsAre(V{0, 1}));
}

TEST(BatchSampler, RejectsBatchSizeZero) {
  auto bs = BatchSampler::Create(std::make_shared<SequentialSampler>(4), 0, false);
  EXPECT_EQ(bs.status().code(), absl::StatusCode::kInvalidArgument) << bs.status();
}

TEST(SequentialSampler, CountsUp) {
  SequentialSampler s(5);
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.Indices(), Iota(5));
}

TEST(RandomSampler, OnePermutationPerPassSeeded) {
  RandomSampler s(20, 42), same(20, 42);
  V p0 = s.Indices(), p1 = s.Indices();
  V e0 = Iota(20), e1 = Iota(20);
  SeededShuffle(&e0, 42);
  SeededShuffle(&e1, 43);
  EXPECT_EQ(p0, e0);
  EXPECT_EQ(p1, e1);
  EXPECT_NE(p0, p1) << "every pass must draw a new order";
  EXPECT_EQ(same.Indices(), p0);
  V sorted = p1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(20));
}

TEST(RandomSampler, NumSamplesAboveNConcatenatesPermutations) {
  RandomSampler s(4, 31, false, 10);  // two whole permutations and half of a third
  ASSERT_EQ(s.size(), 10);
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t state = 31 + static_cast<uint64_t>(pass);
    V want;
    for (int k = 0; k < 3; ++k) {
      V perm = Iota(4);
      ShuffleFrom(&perm, &state);
      want.insert(want.end(), perm.begin(), perm.begin() + (k < 2 ? 4 : 2));
    }
    V got = s.Indices();
    EXPECT_EQ(got, want) << "pass " << pass;
    V first(got.begin(), got.begin() + 4);
    std::sort(first.begin(), first.end());
    EXPECT_EQ(first, Iota(4)) << "each whole block is a permutation";
  }
  RandomSampler fewer(6, 2, false, 4);  // fewer than n: the start of SeededShuffle(iota(6), 2)
  V perm = Iota(6);
  SeededShuffle(&perm, 2);
  EXPECT_EQ(fewer.Indices(), V(perm.begin(), perm.begin() + 4));
}

TEST(RandomSampler, WithReplacementDrawsFromSplitMix) {
  RandomSampler s(5, 9, /*replacement=*/true, /*num_samples=*/50);
  EXPECT_EQ(s.size(), 50);
  V got = s.Indices();
  uint64_t state = 9;
  V want;
  for (int i = 0; i < 50; ++i) want.push_back(static_cast<int64_t>(SplitMix64(&state) % 5));
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::set<int64_t>(got.begin(), got.end()).size(), 5u);  // 50 draws from 5: repeats happen
}

TEST(DistributedSampler, PadsByRepeatingFromTheStart) {
  // n = 10, R = 4: num_samples = 3, total 12, order 0..9 then 0, 1 again.
  const V want[4] = {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}};
  for (int r = 0; r < 4; ++r) {
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(10, 4, r, false, 0, false));
    EXPECT_EQ(s->size(), 3);
    EXPECT_EQ(s->Indices(), want[r]) << "rank " << r;
  }
}

TEST(DistributedSampler, DropLastTruncates) {
  const V want[4] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  for (int r = 0; r < 4; ++r) {
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(10, 4, r, false, 0, true));
    EXPECT_EQ(s->size(), 2);
    EXPECT_EQ(s->Indices(), want[r]) << "rank " << r;
  }
}

TEST(DistributedSampler, PaddingLongerThanTheDataset) {
  // n = 2, R = 5: every rank needs one sample; the order 0, 1 repeats to 0, 1, 0, 1, 0.
  const int64_t want[5] = {0, 1, 0, 1, 0};
  for (int r = 0; r < 5; ++r) {
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(2, 5, r, false, 0, false));
    EXPECT_EQ(s->Indices(), V{want[r]}) << "rank " << r;
  }
}

TEST(DistributedSampler, ShuffleSeededBySeedPlusEpoch) {
  for (int r = 0; r < 3; ++r) {
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(17, 3, r, true, 100, false));
    EXPECT_EQ(s->Indices(), ExpectedDistributed(17, 3, r, true, 100, 0, false));
    s->set_epoch(5);
    EXPECT_EQ(s->Indices(), ExpectedDistributed(17, 3, r, true, 100, 5, false)) << "rank " << r;
  }
}

TEST(DistributedSampler, ForgettingSetEpochRepeatsTheOrder) {
  ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(50, 2, 1, true, 7, false));
  V e0 = s->Indices();
  EXPECT_EQ(s->Indices(), e0) << "without set_epoch the order repeats";
  s->set_epoch(1);
  EXPECT_NE(s->Indices(), e0) << "set_epoch(1) must change the order";
}

TEST(DistributedSampler, RanksCoverEveryIndexWithEqualCounts) {
  std::multiset<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(13, 4, r, true, 3, false));
    s->set_epoch(2);
    V mine = s->Indices();
    EXPECT_EQ(static_cast<int64_t>(mine.size()), 4) << "rank " << r;
    all.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(all.size(), 16u);
  for (int64_t i = 0; i < 13; ++i) EXPECT_GE(all.count(i), 1u) << "index " << i << " never read";
}

// PyTorch: num_samples = ceil((n - R) / R) = 0 for n < R with drop_last: every rank gets an empty list.
TEST(DistributedSampler, DropLastWithFewerSamplesThanRanksIsEmpty) {
  for (int r = 0; r < 4; ++r) {
    for (bool shuffle : {false, true}) {
      ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(3, 4, r, shuffle, 0, true));
      EXPECT_EQ(s->size(), 0);
      EXPECT_TRUE(s->Indices().empty()) << "rank " << r;
    }
  }
  ASSERT_OK_AND_ASSIGN(auto none, DistributedSampler::Create(0, 4, 1, false, 0, true));
  EXPECT_TRUE(none->Indices().empty());
  ASSERT_OK_AND_ASSIGN(auto padded, DistributedSampler::Create(3, 4, 3, false, 0, false));
  EXPECT_EQ(padded->Indices(), V{0}) << "without drop_last n = 3 on 4 ranks pads: rank 3 gets 0";
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_EQ(DistributedSampler::Create(10, 4, 4, false, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DistributedSampler::Create(10, 0, 0, false, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DistributedSampler::Create(10, 4, -1, false, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DistributedSampler::Create(-1, 4, 0, false, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Collate, StacksIntoOneContiguousBatch) {
  std::vector<Sample> s = {{{2, 2}, {0, 1, 2, 3}}, {{2, 2}, {4, 5, 6, 7}}, {{2, 2}, {8, 9, 10, 11}}};
  ASSERT_OK_AND_ASSIGN(Batch b, Collate(s));
  EXPECT_EQ(b.shape, (V{3, 2, 2}));
  ASSERT_EQ(b.numel, 12);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(b.data()[i], static_cast<float>(i));
  EXPECT_EQ(b.worker_id, -1);
}

TEST(Collate, RaggedSamplesNameBothShapes) {
  std::vector<Sample> s = {{{2}, {0, 1}}, {{2}, {2, 3}}, {{3}, {4, 5, 6}}};
  auto b = Collate(s);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("[3]"));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("[2]"));
}

TEST(Collate, NoSamplesIsAnError) {
  EXPECT_EQ(Collate({}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::dataloader
