// Hidden tests, Lab 2 stage A: samplers and collate. Expected orders come from the spec's formulas
// (SeededShuffle, padding by repetition, stride R), computed here independently. Every case but the two
// worked examples draws its sizes, seeds, epochs and ranks from the grading seed (test_util.h).
#include <algorithm>
#include <numeric>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/sampler.h"
#include "tests/dataloader/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::distlab::testing::CaseRandom;
using testing::Drawn;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Show;
using testing::Str;
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

// Reference: the batches of 0..n-1 in batches of B.
std::vector<V> ExpectedBatches(int64_t n, int64_t B, bool drop_last) {
  std::vector<V> out;
  for (int64_t lo = 0; lo < n; lo += B) {
    const int64_t hi = std::min(n, lo + B);
    if (drop_last && hi - lo < B) break;
    V b;
    for (int64_t i = lo; i < hi; ++i) b.push_back(i);
    out.push_back(b);
  }
  return out;
}

// A dataset size and rank count that leave a remainder (n mod R != 0) with n > R: the order must be padded.
std::pair<int64_t, int64_t> UnevenSplit(CaseRandom& rng, int64_t max_ranks, int64_t max_n) {
  const int64_t R = rng.Int(2, max_ranks);
  int64_t n = rng.Int(R + 1, max_n);
  if (n % R == 0) n += rng.Int(1, R - 1);
  return {n, R};
}

// The header's worked example: 10 indices, batch 3.
TEST(BatchSampler, TenItemsBatchThree) {
  ASSERT_OK_AND_ASSIGN(auto bs, BatchSampler::Create(std::make_shared<SequentialSampler>(10), 3, false));
  EXPECT_EQ(bs.size(), 4);
  EXPECT_THAT(bs.Batches(), ElementsAre(V{0, 1, 2}, V{3, 4, 5}, V{6, 7, 8}, V{9}));
}

TEST(BatchSampler, DropLastDropsTheShortBatch) {
  CaseRandom rng;
  const int64_t B = rng.Int(2, 7), full = rng.Int(0, 6), n = full * B + rng.Int(1, B - 1);
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", drop_last")));
  ASSERT_OK_AND_ASSIGN(auto bs, BatchSampler::Create(std::make_shared<SequentialSampler>(n), B, true));
  EXPECT_EQ(bs.size(), full) << "with drop_last, n / B whole batches";
  EXPECT_SAME(bs.Batches(), ExpectedBatches(n, B, true));
}

TEST(BatchSampler, ExactMultipleHasNoShortBatch) {
  CaseRandom rng;
  const int64_t B = rng.Int(2, 8), k = rng.Int(1, 6), n = k * B;
  for (bool drop : {false, true}) {
    SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, drop ? ", drop_last" : "")));
    ASSERT_OK_AND_ASSIGN(auto bs, BatchSampler::Create(std::make_shared<SequentialSampler>(n), B, drop));
    EXPECT_EQ(bs.size(), k) << "B divides n: n / B batches, no short one";
    EXPECT_SAME(bs.Batches(), ExpectedBatches(n, B, false));
  }
  // Fewer indices than one batch: a single short batch.
  const int64_t few = rng.Int(1, B - 1);
  SCOPED_TRACE(Drawn(Str("n ", few, ", batch ", B)));
  ASSERT_OK_AND_ASSIGN(auto one, BatchSampler::Create(std::make_shared<SequentialSampler>(few), B, false));
  EXPECT_EQ(one.size(), 1);
  EXPECT_SAME(one.Batches(), ExpectedBatches(few, B, false));
}

TEST(BatchSampler, RejectsBatchSizeZero) {
  CaseRandom rng;
  for (int64_t B : {int64_t{0}, -rng.Int(1, 1000)}) {
    const int64_t n = rng.Int(0, 20);
    SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B)));
    auto bs = BatchSampler::Create(std::make_shared<SequentialSampler>(n), B, rng.Chance(0.5));
    EXPECT_EQ(bs.status().code(), absl::StatusCode::kInvalidArgument)
        << "batch_size < 1 must be refused: " << bs.status();
  }
}

TEST(SequentialSampler, CountsUp) {
  CaseRandom rng;
  const int64_t n = rng.Int(0, 60);
  SCOPED_TRACE(Drawn(Str("n ", n)));
  SequentialSampler s(n);
  EXPECT_EQ(s.size(), n);
  EXPECT_SAME(s.Indices(), Iota(n));
}

TEST(RandomSampler, OnePermutationPerPassSeeded) {
  CaseRandom rng;
  const int64_t n = rng.Int(8, 40);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 1000000));
  SCOPED_TRACE(Drawn(Str("n ", n, ", seed ", seed)));
  RandomSampler s(n, seed), same(n, seed);
  V p0 = s.Indices(), p1 = s.Indices();
  V e0 = Iota(n), e1 = Iota(n);
  SeededShuffle(&e0, seed);
  SeededShuffle(&e1, seed + 1);
  EXPECT_SAME(p0, e0) << "pass 0 is SeededShuffle(0..n-1, seed)";
  EXPECT_SAME(p1, e1) << "pass 1 is SeededShuffle(0..n-1, seed + 1)";
  if (e0 != e1) {
    EXPECT_NE(p0, p1) << "every pass must draw a new order";
  }
  EXPECT_SAME(same.Indices(), p0) << "the same seed must give the same first pass";
  V sorted = p1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_SAME(sorted, Iota(n)) << "a pass is a permutation";
}

TEST(RandomSampler, NumSamplesAboveNConcatenatesPermutations) {
  CaseRandom rng;
  const int64_t n = rng.Int(2, 8), whole = rng.Int(1, 3), part = rng.Int(1, n - 1);
  const int64_t num = whole * n + part;  // whole permutations and the start of one more
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 1000000));
  {
    SCOPED_TRACE(Drawn(Str("n ", n, ", num_samples ", num, ", seed ", seed)));
    RandomSampler s(n, seed, false, num);
    ASSERT_EQ(s.size(), num);
    for (int pass = 0; pass < 2; ++pass) {
      uint64_t state = seed + static_cast<uint64_t>(pass);
      V want;
      for (int64_t k = 0; k <= whole; ++k) {
        V perm = Iota(n);
        ShuffleFrom(&perm, &state);
        want.insert(want.end(), perm.begin(), perm.begin() + (k < whole ? n : part));
      }
      V got = s.Indices();
      EXPECT_SAME(got, want) << "pass " << pass << ": one generator state goes on across the permutations";
      if (static_cast<int64_t>(got.size()) >= n) {
        V first(got.begin(), got.begin() + n);
        std::sort(first.begin(), first.end());
        EXPECT_SAME(first, Iota(n)) << "pass " << pass << ": each whole block is a permutation";
      }
    }
  }
  const int64_t fewer = rng.Int(1, n - 1);  // fewer than n: the start of SeededShuffle(iota(n), seed)
  SCOPED_TRACE(Drawn(Str("n ", n, ", num_samples ", fewer, ", seed ", seed)));
  RandomSampler cut(n, seed, false, fewer);
  V perm = Iota(n);
  SeededShuffle(&perm, seed);
  EXPECT_SAME(cut.Indices(), V(perm.begin(), perm.begin() + fewer));
}

TEST(RandomSampler, WithReplacementDrawsFromSplitMix) {
  CaseRandom rng;
  const int64_t n = rng.Int(2, 10), num = rng.Int(n + 1, 80);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 1000000));
  SCOPED_TRACE(Drawn(Str("n ", n, ", num_samples ", num, ", seed ", seed, ", with replacement")));
  RandomSampler s(n, seed, /*replacement=*/true, /*num_samples=*/num);
  EXPECT_EQ(s.size(), num);
  V got = s.Indices();
  uint64_t state = seed;
  V want;
  for (int64_t i = 0; i < num; ++i) want.push_back(static_cast<int64_t>(SplitMix64(&state) % n));
  EXPECT_SAME(got, want) << "draw i is SplitMix64(&state) % n, the state starting at the seed";
}

TEST(DistributedSampler, PadsByRepeatingFromTheStart) {
  CaseRandom rng;
  const auto [n, R] = UnevenSplit(rng, 6, 40);
  const bool shuffle = rng.Chance(0.5);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 1000));
  for (int64_t r = 0; r < R; ++r) {
    SCOPED_TRACE(Drawn(Str("n ", n, ", rank ", r, " of ", R, shuffle ? Str(", shuffle seed ", seed) : "")));
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, shuffle, seed, false));
    EXPECT_EQ(s->size(), (n + R - 1) / R) << "every rank gets ceil(n / R)";
    EXPECT_SAME(s->Indices(), ExpectedDistributed(n, R, r, shuffle, seed, 0, false));
  }
}

TEST(DistributedSampler, DropLastTruncates) {
  CaseRandom rng;
  const auto [n, R] = UnevenSplit(rng, 6, 40);
  const bool shuffle = rng.Chance(0.5);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 1000));
  for (int64_t r = 0; r < R; ++r) {
    SCOPED_TRACE(Drawn(
        Str("n ", n, ", rank ", r, " of ", R, shuffle ? Str(", shuffle seed ", seed) : "", ", drop_last")));
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, shuffle, seed, true));
    EXPECT_EQ(s->size(), n / R) << "with drop_last every rank gets floor(n / R)";
    EXPECT_SAME(s->Indices(), ExpectedDistributed(n, R, r, shuffle, seed, 0, true));
  }
}

TEST(DistributedSampler, PaddingLongerThanTheDataset) {
  // R > 2n: the padding is longer than the dataset, so the order repeats more than once.
  CaseRandom rng;
  const int64_t n = rng.Int(1, 3), R = rng.Int(2 * n + 1, 2 * n + 6);
  for (int64_t r = 0; r < R; ++r) {
    SCOPED_TRACE(Drawn(Str("n ", n, ", rank ", r, " of ", R)));
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, false, 0, false));
    EXPECT_SAME(s->Indices(), V{r % n}) << "the order 0..n-1 repeats until every rank has one index";
  }
}

TEST(DistributedSampler, ShuffleSeededBySeedPlusEpoch) {
  CaseRandom rng;
  const auto [n, R] = UnevenSplit(rng, 5, 40);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
  // An epoch whose order differs from epoch 0's on some rank (so that ignoring it shows).
  int64_t epoch = rng.Int(1, 10);
  auto differs = [&, n = n, R = R](int64_t e) {
    for (int64_t r = 0; r < R; ++r) {
      if (ExpectedDistributed(n, R, r, true, seed, e, false) !=
          ExpectedDistributed(n, R, r, true, seed, 0, false))
        return true;
    }
    return false;
  };
  while (!differs(epoch)) ++epoch;
  for (int64_t r = 0; r < R; ++r) {
    SCOPED_TRACE(Drawn(Str("n ", n, ", rank ", r, " of ", R, ", shuffle seed ", seed, ", epoch ", epoch)));
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, true, seed, false));
    EXPECT_SAME(s->Indices(), ExpectedDistributed(n, R, r, true, seed, 0, false)) << "epoch 0";
    s->set_epoch(epoch);
    EXPECT_SAME(s->Indices(), ExpectedDistributed(n, R, r, true, seed, epoch, false))
        << "after set_epoch: SeededShuffle with seed + epoch";
  }
}

TEST(DistributedSampler, ForgettingSetEpochRepeatsTheOrder) {
  CaseRandom rng;
  const int64_t n = rng.Int(8, 60), R = rng.Int(1, 4), r = rng.Int(0, R - 1);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
  int64_t epoch = rng.Int(1, 10);
  while (ExpectedDistributed(n, R, r, true, seed, epoch, false) ==
         ExpectedDistributed(n, R, r, true, seed, 0, false)) {
    ++epoch;
  }
  SCOPED_TRACE(Drawn(Str("n ", n, ", rank ", r, " of ", R, ", shuffle seed ", seed, ", epoch ", epoch)));
  ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, true, seed, false));
  V e0 = s->Indices();
  EXPECT_SAME(s->Indices(), e0) << "without set_epoch the order repeats";
  s->set_epoch(epoch);
  const V after = s->Indices();
  EXPECT_NE(after, e0) << "set_epoch must change the order";
  EXPECT_SAME(after, ExpectedDistributed(n, R, r, true, seed, epoch, false));
}

TEST(DistributedSampler, RanksCoverEveryIndexWithEqualCounts) {
  CaseRandom rng;
  const auto [n, R] = UnevenSplit(rng, 6, 40);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
  const int64_t epoch = rng.Int(0, 10), per = (n + R - 1) / R;
  SCOPED_TRACE(Drawn(Str("n ", n, " on ", R, " ranks, shuffle seed ", seed, ", epoch ", epoch)));
  std::multiset<int64_t> all;
  for (int64_t r = 0; r < R; ++r) {
    ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, true, seed, false));
    s->set_epoch(epoch);
    V mine = s->Indices();
    EXPECT_EQ(static_cast<int64_t>(mine.size()), per) << "rank " << r << ": every rank gets ceil(n / R)";
    all.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(static_cast<int64_t>(all.size()), per * R);
  for (int64_t i = 0; i < n; ++i) {
    if (all.count(i) == 0) {
      ADD_FAILURE() << "index " << i << " is read by no rank";
      break;
    }
  }
}

// PyTorch: num_samples = ceil((n - R) / R) = 0 for n < R with drop_last: every rank gets an empty list.
TEST(DistributedSampler, DropLastWithFewerSamplesThanRanksIsEmpty) {
  CaseRandom rng;
  const int64_t R = rng.Int(2, 8), n = rng.Int(0, R - 1);
  for (int64_t r = 0; r < R; ++r) {
    for (bool shuffle : {false, true}) {
      SCOPED_TRACE(Drawn(Str("n ", n, ", rank ", r, " of ", R, shuffle ? ", shuffle" : "", ", drop_last")));
      ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(n, R, r, shuffle, 0, true));
      EXPECT_EQ(s->size(), 0);
      EXPECT_TRUE(s->Indices().empty()) << "with drop_last and n < R every rank gets no index";
    }
  }
  // Without drop_last the same n pads: rank R - 1 (>= n) gets (R - 1) mod n, from the repeated order.
  const int64_t m = std::max<int64_t>(n, 1);
  SCOPED_TRACE(Drawn(Str("n ", m, ", rank ", R - 1, " of ", R)));
  ASSERT_OK_AND_ASSIGN(auto padded, DistributedSampler::Create(m, R, R - 1, false, 0, false));
  EXPECT_SAME(padded->Indices(), V{(R - 1) % m}) << "without drop_last n < R pads";
}

TEST(DistributedSampler, RejectsBadArguments) {
  CaseRandom rng;
  const int64_t n = rng.Int(0, 50), R = rng.Int(1, 8);
  struct Bad {
    int64_t n, R, r;
  };
  const Bad bad[] = {{n, R, R + rng.Int(0, 3)},  // rank past the last one
                     {n, -rng.Int(0, 3), 0},     // no replicas
                     {n, R, -rng.Int(1, 5)},     // negative rank
                     {-rng.Int(1, 100), R, rng.Int(0, R - 1)}};
  for (const Bad& b : bad) {
    SCOPED_TRACE(Drawn(Str("n ", b.n, ", rank ", b.r, " of ", b.R)));
    EXPECT_EQ(DistributedSampler::Create(b.n, b.R, b.r, rng.Chance(0.5), 0, rng.Chance(0.5)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "n < 0, R < 1 and r outside [0, R) are InvalidArgument";
  }
}

TEST(Collate, StacksIntoOneContiguousBatch) {
  CaseRandom rng;
  const int64_t count = rng.Int(1, 6);
  V shape;
  for (int64_t d = rng.Int(0, 3); d > 0; --d) shape.push_back(rng.Int(1, 4));
  const int64_t per = NumElements(shape);
  std::vector<Sample> s;
  std::vector<float> want;
  for (int64_t k = 0; k < count; ++k) {
    Sample one{shape, {}};
    for (int64_t v = 0; v < per; ++v) one.data.push_back(static_cast<float>(rng.Int(-1000, 1000)) / 4);
    want.insert(want.end(), one.data.begin(), one.data.end());
    s.push_back(one);
  }
  SCOPED_TRACE(Drawn(Str(count, " samples of shape ", ShapeString(shape))));
  ASSERT_OK_AND_ASSIGN(Batch b, Collate(s));
  V want_shape = {count};
  want_shape.insert(want_shape.end(), shape.begin(), shape.end());
  EXPECT_SAME(b.shape, want_shape) << "the batch's shape is [count, sample shape...]";
  ASSERT_EQ(b.numel, count * per);
  EXPECT_SAME(std::vector<float>(b.data(), b.data() + b.numel), want)
      << "the samples' values back to back, sample 0 first";
  EXPECT_EQ(b.worker_id, -1);
}

TEST(Collate, RaggedSamplesNameBothShapes) {
  CaseRandom rng;
  const int64_t count = rng.Int(2, 6), odd = rng.Int(1, count - 1);
  V shape, other;
  for (int64_t d = rng.Int(1, 2); d > 0; --d) shape.push_back(rng.Int(1, 4));
  other = shape;
  other[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(other.size()) - 1))] += rng.Int(1, 3);
  std::vector<Sample> s;
  for (int64_t k = 0; k < count; ++k) {
    const V& sh = k == odd ? other : shape;
    s.push_back(Sample{sh, std::vector<float>(static_cast<size_t>(NumElements(sh)), static_cast<float>(k))});
  }
  SCOPED_TRACE(Drawn(Str(count, " samples of shape ", ShapeString(shape), " but sample ", odd, " of shape ",
                         ShapeString(other))));
  auto b = Collate(s);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
  EXPECT_THAT(std::string(b.status().message()), HasSubstr(ShapeString(other)));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr(ShapeString(shape)));
}

TEST(Collate, NoSamplesIsAnError) {
  EXPECT_EQ(Collate({}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::dataloader
