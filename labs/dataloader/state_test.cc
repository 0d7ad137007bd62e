// Public tests, Lab 2 stage E (some fork: tagged "fork").
#include "labs/dataloader/state.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/sampler.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::HasSubstr;
using V = std::vector<int64_t>;

TEST(State, EncodesOneLinePerField) {
  LoaderState s;
  s.epoch = 2;
  s.delivered = 3;
  s.generator = 12345;
  s.base_seed = 678;
  s.num_workers = 2;
  s.last_worker = 1;
  s.rng = {111, 222};
  EXPECT_EQ(EncodeLoaderState(s),
            "distlab-loader-state 1\nepoch 2\ndelivered 3\ngenerator 12345\nbase_seed 678\nnum_workers 2\n"
            "done 0\nlast_worker 1\nrng 2 111 222\nstream 0\n");
  ASSERT_OK_AND_ASSIGN(LoaderState back, DecodeLoaderState(EncodeLoaderState(s)));
  EXPECT_EQ(back.rng, s.rng);
  EXPECT_EQ(back.delivered, 3);
  std::string text = EncodeLoaderState(s);
  text.replace(text.find("delivered 3"), 11, "delivered x");
  auto bad = DecodeLoaderState(text);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("line 3 (delivered)"));
}

// PyTorch: base_seed = one draw from the loader's generator per epoch; worker w's seed = base_seed + w.
TEST(State, SeedsAsPyTorch) {
  uint64_t g = 42, copy = 42;
  const uint64_t e0 = EpochBaseSeed(&g), e1 = EpochBaseSeed(&g);
  EXPECT_EQ(e0, SplitMix64(&copy));
  EXPECT_EQ(e1, SplitMix64(&copy));
  EXPECT_EQ(WorkerSeed(e0, 3), e0 + 3);
}

// [0, 10) on R = 3 ranks x W = 2 workers, policy drop: q = floor(10 / 3) = 3 per rank, sample 9 is dropped.
//   rank 0 [0, 3): w0 [0, 2) w1 [2, 3)    rank 1 [3, 6): w0 [3, 5) w1 [5, 6)    rank 2 [6, 9): w0 [6, 8) w1
//   [8, 9)
TEST(State, GridShardWorkedExample) {
  using P = std::pair<int64_t, int64_t>;
  const P want[3][2] = {{{0, 2}, {2, 3}}, {{3, 5}, {5, 6}}, {{6, 8}, {8, 9}}};
  for (int r = 0; r < 3; ++r) {
    for (int w = 0; w < 2; ++w)
      EXPECT_EQ(GridShard(0, 10, r, 3, w, 2), want[r][w]) << "rank " << r << " worker " << w;
  }
}

// Megatron: total 10 samples, consumed 4, micro-batch 2, R = 2: the next chunk of mb * R = 4 indices is
// [4, 8); rank 0 takes [4, 5], rank 1 [6, 7]; [8, 12) is not whole and is dropped.
TEST(State, MegatronConsumedSamples) {
  ASSERT_OK_AND_ASSIGN(auto r0, MegatronMicroBatches(10, 4, 2, 0, 2, 100));
  ASSERT_OK_AND_ASSIGN(auto r1, MegatronMicroBatches(10, 4, 2, 1, 2, 100));
  EXPECT_EQ(r0, (std::vector<V>{{4, 5}}));
  EXPECT_EQ(r1, (std::vector<V>{{6, 7}}));
}

// Drawn from the grading seed (DISTLAB_GRADING_SEED; see tools/testing/test_support.h): n, the seed and how
// many passes come before the state is taken. A fresh sampler that loads the state makes the next pass.
TEST(State, RandomSamplerStateRepeatsAPass) {
  distlab::testing::CaseRandom rng;
  const int64_t n = rng.Int(2, 30), passes = rng.Int(0, 5);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
  SCOPED_TRACE("RandomSampler(" + std::to_string(n) + ", " + std::to_string(seed) + ") after " +
               std::to_string(passes) + " passes; " + distlab::testing::SeedNote());
  RandomSampler s(n, seed);
  for (int64_t p = 0; p < passes; ++p) s.Indices();
  const SamplerState at = s.state_dict();  // pass `passes` comes next
  EXPECT_EQ(at.pass, passes);
  const V next = s.Indices();
  RandomSampler fresh(n, seed);
  ASSERT_OK(fresh.load_state_dict(at));
  EXPECT_EQ(fresh.Indices(), next);
}

// A DistributedSampler's state is its epoch: after set_epoch(3), state_dict() is {pass = 3}, and a fresh
// sampler that loads it draws epoch 3's list (SeededShuffle with seed + 3), not epoch 0's. A negative pass is
// refused.
TEST(State, DistributedSamplerStateIsItsEpoch) {
  ASSERT_OK_AND_ASSIGN(auto s, DistributedSampler::Create(12, 2, 1, true, 4, false));
  s->set_epoch(3);
  const SamplerState at = s->state_dict();
  EXPECT_EQ(at.pass, 3);
  const V epoch3 = s->Indices();
  ASSERT_OK_AND_ASSIGN(auto fresh, DistributedSampler::Create(12, 2, 1, true, 4, false));
  ASSERT_OK(fresh->load_state_dict(at));
  EXPECT_EQ(fresh->Indices(), epoch3);
  EXPECT_EQ(fresh->load_state_dict(SamplerState{-1}).code(), absl::StatusCode::kInvalidArgument);
}

// Sample i = {i, a draw from the data generator}: what a random augmentation looks like to the loader.
class Noisy : public MapDataset {
 public:
  int64_t size() const override { return 9; }
  Sample Get(int64_t i) const override {
    return Sample{{2}, {static_cast<float>(i), static_cast<float>(DataRandom() % 1000000)}};
  }
};

LoaderOptions Opts(int workers) {
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = workers;
  o.shuffle = true;
  o.seed = 5;
  o.generator_seed = 99;
  o.timeout_s = 20;
  return o;
}

std::vector<std::vector<float>> Rest(DataLoader& dl) {
  std::vector<std::vector<float>> out;
  for (int guard = 0; guard < 100; ++guard) {
    Batch b;
    auto more = dl.Next(&b);
    EXPECT_OK(more);
    if (!more.ok() || !*more) break;
    out.emplace_back(b.data(), b.data() + b.numel);
  }
  return out;
}

// Stop after 2 of 5 batches with 2 workers and prefetch 2 (9 samples, batch 2, shuffled):
//   task:       0    1    2    3    4
//   worker:     w0   w1   w0   w1   w0          task t -> worker t mod 2
//   made:       #    #    #    #                tasks 2 and 3 are prefetched: made, not handed out
//   delivered:  #    #                          the state's delivered = 2
//   resumed:              #    #    #           a new loader from the state delivers tasks 2, 3, 4
// Batches 2, 3 and 4 of the resumed loader equal those of a loader that never stopped, value by value: the
// same indices and the same random draws; none lost, none twice.
TEST(Loader, ResumesExactlyAfterABatch) {
  ASSERT_OK_AND_ASSIGN(auto whole, DataLoader::Create(std::make_shared<Noisy>(), Opts(2)));
  ASSERT_OK(whole->StartEpoch());
  const auto all = Rest(*whole);
  ASSERT_EQ(all.size(), 5u);
  LoaderState saved;
  {
    ASSERT_OK_AND_ASSIGN(auto first, DataLoader::Create(std::make_shared<Noisy>(), Opts(2)));
    ASSERT_OK(first->StartEpoch());
    Batch b;
    ASSERT_OK(first->Next(&b));
    ASSERT_OK(first->Next(&b));
    ASSERT_OK_AND_ASSIGN(saved, first->state_dict());
  }
  EXPECT_EQ(saved.delivered, 2);
  ASSERT_OK_AND_ASSIGN(auto second, DataLoader::Create(std::make_shared<Noisy>(), Opts(2)));
  ASSERT_OK(second->load_state_dict(saved));
  ASSERT_OK(second->StartEpoch());
  EXPECT_EQ(Rest(*second), std::vector<std::vector<float>>(all.begin() + 2, all.end()));
}

// Worker w draws from WorkerSeed(base, w): two workers never draw the same stream, and the lab reseeds
// persistent workers every epoch, so epoch 1 is the same with and without them (PyTorch seeds a persistent
// worker once, when it starts).
// Drawn from the grading seed (DISTLAB_GRADING_SEED; see tools/testing/test_support.h): the worker count and
// the generator seed. Worker w's first draw of epoch 0 is SplitMix64 of WorkerSeed(base, w) (mod 1000000),
// base = EpochBaseSeed(&generator).
TEST(Loader, WorkersDrawDifferentStreamsReseededEveryEpoch) {
  distlab::testing::CaseRandom rng;
  const int W = static_cast<int>(rng.Int(2, 3));
  LoaderOptions o = Opts(W);
  o.shuffle = false;
  o.batch_size = 1;
  o.generator_seed = static_cast<uint64_t>(rng.Int(0, 1000000));
  SCOPED_TRACE(std::to_string(W) + " workers, generator_seed " + std::to_string(*o.generator_seed) + "; " +
               distlab::testing::SeedNote());
  uint64_t g = *o.generator_seed;
  const uint64_t base = EpochBaseSeed(&g);
  std::vector<float> firsts;
  for (int w = 0; w < W; ++w) {
    uint64_t state = WorkerSeed(base, w);
    firsts.push_back(static_cast<float>(SplitMix64(&state) % 1000000));
  }
  std::vector<std::vector<float>> epoch1[2];
  for (bool persistent : {false, true}) {
    o.persistent_workers = persistent;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Noisy>(), o));
    ASSERT_OK(dl->StartEpoch());
    const auto e0 = Rest(*dl);
    ASSERT_EQ(e0.size(), 9u);
    for (int w = 0; w < W; ++w) {
      EXPECT_EQ(e0[static_cast<size_t>(w)][1], firsts[static_cast<size_t>(w)])
          << "batch " << w << " is worker " << w << "'s first draw, from WorkerSeed(base, " << w << ")";
    }
    ASSERT_OK(dl->StartEpoch());
    epoch1[persistent] = Rest(*dl);
    EXPECT_NE(epoch1[persistent], e0) << "epoch 1 must draw from a new base seed";
  }
  EXPECT_EQ(epoch1[0], epoch1[1]) << "persistent workers must be reseeded at the start of every epoch";
}

// No workers: the main process seeds its data generator like worker 0, so 0 and 1 workers draw alike. In a
// worker, WorkerInfo::dataset is that worker's own copy of the dataset.
class WhoAmI : public MapDataset {
 public:
  int64_t size() const override { return 4; }
  Sample Get(int64_t i) const override {
    const WorkerInfo* w = GetWorkerInfo();
    const float copy = w == nullptr ? -1 : (w->dataset == this && w->iterable_dataset == nullptr ? 1 : 0);
    return Sample{{3}, {static_cast<float>(i), static_cast<float>(DataRandom() % 1000000), copy}};
  }
};

TEST(Loader, NoWorkersDrawLikeWorkerZero) {
  std::vector<std::vector<float>> got[2];
  for (int workers : {0, 1}) {
    LoaderOptions o = Opts(workers);
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<WhoAmI>(), o));
    ASSERT_OK(dl->StartEpoch());
    got[workers] = Rest(*dl);
    ASSERT_EQ(got[workers].size(), 2u);
    EXPECT_EQ(got[workers][0][2], workers == 0 ? -1.0f : 1.0f) << "WorkerInfo::dataset is the worker's copy";
  }
  for (size_t b = 0; b < 2; ++b) {
    for (size_t k : {1, 4}) EXPECT_EQ(got[0][b][k], got[1][b][k]) << "batch " << b;
  }
}

TEST(Loader, ResumeWithAnotherWorkerCountNamesBoth) {
  ASSERT_OK_AND_ASSIGN(auto first, DataLoader::Create(std::make_shared<Noisy>(), Opts(2)));
  ASSERT_OK(first->StartEpoch());
  Batch b;
  ASSERT_OK(first->Next(&b));
  ASSERT_OK_AND_ASSIGN(LoaderState saved, first->state_dict());
  ASSERT_OK_AND_ASSIGN(auto other, DataLoader::Create(std::make_shared<Noisy>(), Opts(3)));
  const absl::Status st = other->load_state_dict(saved);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("saved with 2 workers"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("this loader has 3"));
}

}  // namespace
}  // namespace distlab::dataloader
