// Public tests, Lab 2 stage A. The hidden tests check the same things on more cases.
#include "labs/dataloader/sampler.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

// 10 indices, batch 3:
//   [0 1 2] [3 4 5] [6 7 8] [9]      drop_last = false: 4 batches
//   [0 1 2] [3 4 5] [6 7 8]          drop_last = true:  3 batches
TEST(BatchSampler, TenItemsBatchThree) {
  ASSERT_OK_AND_ASSIGN(auto keep, BatchSampler::Create(std::make_shared<SequentialSampler>(10), 3, false));
  EXPECT_EQ(keep.size(), 4);
  EXPECT_THAT(keep.Batches(), ElementsAre(V{0, 1, 2}, V{3, 4, 5}, V{6, 7, 8}, V{9}));
  ASSERT_OK_AND_ASSIGN(auto drop, BatchSampler::Create(std::make_shared<SequentialSampler>(10), 3, true));
  EXPECT_EQ(drop.size(), 3);
}

// n = 10, R = 4 ranks, no shuffle: each rank needs ceil(10/4) = 3, so the order is padded to 12:
//   0 1 2 3 4 5 6 7 8 9 | 0 1
//   rank 0 takes positions 0, 4, 8  -> 0 4 8
//   rank 2 takes positions 2, 6, 10 -> 2 6 0
TEST(DistributedSampler, PadsByRepeating) {
  ASSERT_OK_AND_ASSIGN(auto r0, DistributedSampler::Create(10, 4, 0, false, 0, false));
  EXPECT_EQ(r0->Indices(), (V{0, 4, 8}));
  ASSERT_OK_AND_ASSIGN(auto r2, DistributedSampler::Create(10, 4, 2, false, 0, false));
  EXPECT_EQ(r2->Indices(), (V{2, 6, 0}));
}

// n = 3, num_samples = 7, seed 5, pass 0: one generator state, starting at 5, goes on across permutations:
//   ShuffleFrom({0,1,2}) | ShuffleFrom({0,1,2}) | ShuffleFrom({0,1,2}) cut to 1   -> 3 + 3 + 1 = 7 indices
TEST(RandomSampler, MoreSamplesThanItemsConcatenatesPermutations) {
  RandomSampler s(3, 5, /*replacement=*/false, /*num_samples=*/7);
  EXPECT_EQ(s.size(), 7);
  uint64_t state = 5;
  V want;
  for (int k = 0; k < 3; ++k) {
    V perm = {0, 1, 2};
    ShuffleFrom(&perm, &state);
    want.insert(want.end(), perm.begin(), perm.begin() + (k < 2 ? 3 : 1));
  }
  EXPECT_EQ(s.Indices(), want);
}

// drop_last with fewer samples than ranks: every rank gets none (PyTorch: ceil((n - R) / R) = 0), not an
// error.
TEST(DistributedSampler, DropLastFewerSamplesThanRanksIsEmpty) {
  ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(3, 4, 1, false, 0, true));
  EXPECT_EQ(s->size(), 0);
  EXPECT_TRUE(s->Indices().empty());
}

// Drawn from the grading seed (DISTLAB_GRADING_SEED; see tools/testing/test_support.h): n, R, r, the shuffle
// seed and an epoch whose order differs from epoch 0's. Epoch e reads SeededShuffle(0..n-1, seed + e), padded
// and strided as above; without set_epoch every epoch repeats epoch 0.
TEST(DistributedSampler, SetEpochReshuffles) {
  distlab::testing::CaseRandom rng;
  const int64_t n = rng.Int(8, 40), R = rng.Int(1, 4), r = rng.Int(0, R - 1);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
  auto order = [&](int64_t epoch) {  // this rank's indices, from the header's three steps
    V all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    SeededShuffle(&all, seed + static_cast<uint64_t>(epoch));
    V mine;
    for (int64_t i = r; i < (n + R - 1) / R * R; i += R) mine.push_back(all[static_cast<size_t>(i % n)]);
    return mine;
  };
  int64_t epoch = rng.Int(1, 10);
  while (order(epoch) == order(0)) ++epoch;
  SCOPED_TRACE("n " + std::to_string(n) + ", rank " + std::to_string(r) + " of " + std::to_string(R) +
               ", shuffle seed " + std::to_string(seed) + ", epoch " + std::to_string(epoch) + "; " +
               distlab::testing::SeedNote());
  ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, true, seed, false));
  const V e0 = s->Indices();
  EXPECT_EQ(e0, order(0)) << "epoch 0";
  EXPECT_EQ(s->Indices(), e0) << "without set_epoch the order repeats";
  s->set_epoch(epoch);
  const V later = s->Indices();
  EXPECT_NE(later, e0) << "set_epoch must change the order";
  EXPECT_EQ(later, order(epoch)) << "after set_epoch(" << epoch << ")";
}

// Three samples of shape [2, 2] stack into one batch of shape [3, 2, 2], back to back in one buffer:
//   sample 0 = [[0, 1], [2, 3]]     buffer: 0 1 2 3 | 4 5 6 7 | 8 9 10 11
//   sample 1 = [[4, 5], [6, 7]]             sample 0  sample 1  sample 2
//   sample 2 = [[8, 9], [10, 11]]   value 6 is sample 1, row 1, column 0: buffer[1*4 + 1*2 + 0] = buffer[6]
// numel 12; a batch made in this process has worker_id -1.
TEST(Collate, StacksSamplesBackToBack) {
  std::vector<Sample> samples;
  for (int k = 0; k < 3; ++k) {
    Sample s{{2, 2}, {}};
    for (int v = 0; v < 4; ++v) s.data.push_back(static_cast<float>(4 * k + v));
    samples.push_back(s);
  }
  ASSERT_OK_AND_ASSIGN(Batch b, Collate(samples));
  EXPECT_EQ(b.shape, (V{3, 2, 2}));
  ASSERT_EQ(b.numel, 12);
  std::vector<float> got(b.data(), b.data() + b.numel);
  EXPECT_EQ(got, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(b.worker_id, -1);
}

TEST(Collate, RaggedNamesBothShapes) {
  auto b = Collate({{{2}, {0, 1}}, {{3}, {2, 3, 4}}});
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("[2]"));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("[3]"));
}

}  // namespace
}  // namespace distlab::dataloader
