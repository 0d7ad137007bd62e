// Hidden tests, Lab 2 stage E: stop a loader after any batch and resume it exactly -- against the run that
// never stopped, with 0, 1 and several workers, persistent workers, across the epoch boundary, twice, and in
// another process; seeds; the rank x worker grid. Every case that forks ends with the leak check.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/gpt_dataset.h"
#include "labs/dataloader/indexed_dataset.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/state.h"
#include "tests/dataloader/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::HasSubstr;
using testing::LeakCheck;
using V = std::vector<int64_t>;
using Values = std::vector<std::vector<float>>;  // each batch's values, in delivery order

// Sample i = {i, two draws from the data generator}: per-sample random augmentations.
class Augmented : public MapDataset {
 public:
  explicit Augmented(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    const float a = static_cast<float>(DataRandom() % 1000003),
                b = static_cast<float>(DataRandom() % 1000003);
    return Sample{{3}, {static_cast<float>(i), a, b}};
  }

 private:
  int64_t n_;
};

LoaderOptions Opts(int workers, bool persistent = false) {
  LoaderOptions o;
  o.batch_size = 2;
  o.num_workers = workers;
  o.prefetch_factor = 2;
  o.persistent_workers = persistent;
  o.shuffle = true;
  o.seed = 11;
  o.generator_seed = 2026;
  o.timeout_s = 20;
  return o;
}

// Reads up to `max` batches of the epoch in progress (all of it by default).
Values Read(DataLoader& dl, int max = 1 << 30) {
  Values got;
  Batch batch;
  while (static_cast<int>(got.size()) < max) {
    absl::StatusOr<bool> r = dl.Next(&batch);
    EXPECT_OK(r.status());
    if (!r.ok() || !r.value()) return got;
    got.push_back(std::vector<float>(batch.data(), batch.data() + batch.numel));
  }
  return got;
}

Values Tail(const Values& v, size_t from) { return Values(v.begin() + static_cast<long>(from), v.end()); }

// The uninterrupted run: epochs 0 and 1 of 11 samples in batches of 2 (6 batches each).
std::pair<Values, Values> Reference(int workers, bool persistent) {
  auto dl = DataLoader::Create(std::make_shared<Augmented>(11), Opts(workers, persistent));
  EXPECT_OK(dl.status());
  EXPECT_OK((*dl)->StartEpoch());
  Values e0 = Read(**dl);
  EXPECT_OK((*dl)->StartEpoch());
  Values e1 = Read(**dl);
  return {e0, e1};
}

// Stop epoch 0 after b batches (b = 0..6), resume in a new loader: the rest of epoch 0 and all of epoch 1
// equal the uninterrupted run's -- indices, order and random draws.
void ResumeAtEveryBoundary(int workers, bool persistent) {
  LeakCheck leaks;
  std::string prefix;
  const auto [e0, e1] = Reference(workers, persistent);
  ASSERT_EQ(e0.size(), 6u);
  ASSERT_NE(e0, e1);
  for (size_t b = 0; b <= e0.size(); ++b) {
    LoaderState saved;
    {
      ASSERT_OK_AND_ASSIGN(auto first,
                           DataLoader::Create(std::make_shared<Augmented>(11), Opts(workers, persistent)));
      prefix = first->shm_prefix();
      ASSERT_OK(first->StartEpoch());
      EXPECT_EQ(Read(*first, static_cast<int>(b)), Values(e0.begin(), e0.begin() + static_cast<long>(b)));
      ASSERT_OK_AND_ASSIGN(saved, first->state_dict());
    }
    ASSERT_OK_AND_ASSIGN(auto second,
                         DataLoader::Create(std::make_shared<Augmented>(11), Opts(workers, persistent)));
    ASSERT_OK(second->load_state_dict(saved));
    ASSERT_OK(second->StartEpoch());
    EXPECT_EQ(Read(*second), Tail(e0, b)) << workers << " workers, stopped after batch " << b;
    ASSERT_OK(second->StartEpoch());
    EXPECT_EQ(Read(*second), e1) << workers << " workers, the epoch after a resume at batch " << b;
  }
  leaks.Check(prefix);
}

TEST(Resume, EveryBatchBoundaryInProcess) { ResumeAtEveryBoundary(0, false); }
TEST(Resume, EveryBatchBoundaryOneWorker) { ResumeAtEveryBoundary(1, false); }
TEST(Resume, EveryBatchBoundaryThreeWorkers) { ResumeAtEveryBoundary(3, false); }
TEST(Resume, EveryBatchBoundaryPersistentWorkers) { ResumeAtEveryBoundary(2, true); }

// Stopped in epoch 1 (after a whole epoch 0), and again after the epoch ended: the next epoch is the one an
// uninterrupted run would begin.
TEST(Resume, AcrossTheEpochBoundary) {
  LeakCheck leaks;
  std::string prefix;
  const auto [e0, e1] = Reference(2, false);
  ASSERT_OK_AND_ASSIGN(auto first, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
  prefix = first->shm_prefix();
  ASSERT_OK(first->StartEpoch());
  EXPECT_EQ(Read(*first), e0);
  ASSERT_OK_AND_ASSIGN(LoaderState after_epoch, first->state_dict());
  EXPECT_TRUE(after_epoch.done);
  ASSERT_OK(first->StartEpoch());
  EXPECT_EQ(Read(*first, 3), Values(e1.begin(), e1.begin() + 3));
  ASSERT_OK_AND_ASSIGN(LoaderState mid, first->state_dict());
  first.reset();
  ASSERT_OK_AND_ASSIGN(auto a, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
  ASSERT_OK(a->load_state_dict(after_epoch));
  ASSERT_OK(a->StartEpoch());
  EXPECT_EQ(Read(*a), e1) << "a state taken after the epoch ended resumes with the next epoch";
  ASSERT_OK_AND_ASSIGN(auto b, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
  ASSERT_OK(b->load_state_dict(mid));
  ASSERT_OK(b->StartEpoch());
  EXPECT_EQ(Read(*b), Tail(e1, 3));
  leaks.Check(prefix);
}

// Stop at 1, resume, stop at 4, resume again: still the uninterrupted run.
TEST(Resume, TwiceInARow) {
  LeakCheck leaks;
  std::string prefix;
  const auto [e0, e1] = Reference(2, false);
  LoaderState s1, s2;
  {
    ASSERT_OK_AND_ASSIGN(auto a, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
    prefix = a->shm_prefix();
    ASSERT_OK(a->StartEpoch());
    EXPECT_EQ(Read(*a, 1), Values(e0.begin(), e0.begin() + 1));
    ASSERT_OK_AND_ASSIGN(s1, a->state_dict());
  }
  {
    ASSERT_OK_AND_ASSIGN(auto b, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
    ASSERT_OK(b->load_state_dict(s1));
    ASSERT_OK(b->StartEpoch());
    EXPECT_EQ(Read(*b, 3), Values(e0.begin() + 1, e0.begin() + 4));
    ASSERT_OK_AND_ASSIGN(s2, b->state_dict());
  }
  EXPECT_EQ(s2.delivered, 4);
  ASSERT_OK_AND_ASSIGN(auto c, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
  ASSERT_OK(c->load_state_dict(s2));
  ASSERT_OK(c->StartEpoch());
  EXPECT_EQ(Read(*c), Tail(e0, 4));
  leaks.Check(prefix);
}

// The first run lives in another process: it stops after 3 batches and sends EncodeLoaderState's text.
TEST(Resume, InANewProcess) {
  const auto [e0, e1] = Reference(2, false);
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(out[0]);
    auto dl = DataLoader::Create(std::make_shared<Augmented>(11), Opts(2));
    if (!dl.ok() || !(*dl)->StartEpoch().ok()) ::_exit(2);
    for (int k = 0; k < 3; ++k) {
      Batch b;
      if (!(*dl)->Next(&b).ok()) ::_exit(3);
    }
    auto s = (*dl)->state_dict();
    if (!s.ok()) ::_exit(4);
    const std::string text = EncodeLoaderState(*s);
    (void)(*dl)->Shutdown();
    (void)!::write(out[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buf[512];
  for (;;) {
    pollfd p{out[0], POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 20000), 0) << "the first process never sent its state";
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the first process failed: " << status;
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(LoaderState s, DecodeLoaderState(text));
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->load_state_dict(s));
    ASSERT_OK(dl->StartEpoch());
    EXPECT_EQ(Read(*dl), Tail(e0, 3));
  }
  leaks.Check(prefix);
}

// Mid-epoch another worker count is refused, naming both; at an epoch boundary it is fine, and the next epoch
// is the one an uninterrupted run with the new count gives (the base seeds do not depend on the count).
TEST(Resume, WorkerCountChange) {
  LeakCheck leaks;
  std::string prefix;
  const auto [e0_3, e1_3] = Reference(3, false);
  LoaderState mid, end;
  {
    ASSERT_OK_AND_ASSIGN(auto a, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
    prefix = a->shm_prefix();
    ASSERT_OK(a->StartEpoch());
    Read(*a, 2);
    ASSERT_OK_AND_ASSIGN(mid, a->state_dict());
    Read(*a);
    ASSERT_OK_AND_ASSIGN(end, a->state_dict());
  }
  ASSERT_OK_AND_ASSIGN(auto b, DataLoader::Create(std::make_shared<Augmented>(11), Opts(3)));
  const absl::Status st = b->load_state_dict(mid);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("2 workers"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("has 3"));
  ASSERT_OK(b->load_state_dict(end));
  ASSERT_OK(b->StartEpoch());
  EXPECT_EQ(Read(*b), e1_3);
  b.reset();
  leaks.Check(prefix);
}

// Each worker draws its own stream; the same generator seed repeats an epoch, another seed changes it; no
// workers and one worker draw the same numbers (both seed from WorkerSeed(base, 0)).
TEST(Seeds, WorkersIndependentEpochsReproducible) {
  LeakCheck leaks;
  std::string prefix;
  auto first_draws = [&](int workers, uint64_t gen) {
    LoaderOptions o = Opts(workers);
    o.shuffle = false;
    o.batch_size = 1;
    o.generator_seed = gen;
    auto dl = DataLoader::Create(std::make_shared<Augmented>(8), o);
    EXPECT_OK(dl.status());
    prefix = (*dl)->shm_prefix();
    EXPECT_OK((*dl)->StartEpoch());
    return Read(**dl);
  };
  const Values w4 = first_draws(4, 1);
  ASSERT_EQ(w4.size(), 8u);
  std::set<float> firsts;
  for (int w = 0; w < 4; ++w) firsts.insert(w4[static_cast<size_t>(w)][1]);  // batch w is worker w's first
  EXPECT_EQ(firsts.size(), 4u) << "two workers drew the same first number: same seed?";
  EXPECT_EQ(first_draws(4, 1), w4) << "the same generator seed must give the same epoch";
  EXPECT_NE(first_draws(4, 2), w4);
  EXPECT_EQ(first_draws(0, 1), first_draws(1, 1)) << "0 workers seed like worker 0";
  // Worker w's first draw is the first SplitMix64 output of WorkerSeed(base, w), base drawn from the
  // generator.
  uint64_t g = 1;
  const uint64_t base = EpochBaseSeed(&g);
  for (int w = 0; w < 4; ++w) {
    uint64_t st = WorkerSeed(base, w);
    EXPECT_EQ(w4[static_cast<size_t>(w)][1], static_cast<float>(SplitMix64(&st) % 1000003)) << "worker " << w;
  }
  leaks.Check(prefix);
}

// WorkerInfo::dataset is the worker's own copy: what the worker writes there, the main process never sees.
class Counting : public MapDataset {
 public:
  int64_t size() const override { return 6; }
  Sample Get(int64_t i) const override {
    const WorkerInfo* w = GetWorkerInfo();
    const bool mine = w != nullptr && w->dataset == this && w->iterable_dataset == nullptr;
    return Sample{{2}, {static_cast<float>(i), static_cast<float>(mine ? ++calls_ : -1)}};
  }
  mutable int calls_ = 0;
};

TEST(Seeds, WorkerInfoHoldsTheWorkersDatasetCopy) {
  LeakCheck leaks;
  std::string prefix;
  auto ds = std::make_shared<Counting>();
  {
    LoaderOptions o = Opts(2);
    o.batch_size = 1;
    o.shuffle = false;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(ds, o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const Values got = Read(*dl);
    ASSERT_EQ(got.size(), 6u);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k][1], static_cast<float>(k / 2 + 1)) << k;
  }
  EXPECT_EQ(ds->calls_, 0) << "the workers' copies are their own";
  leaks.Check(prefix);
}

// An iterable dataset, resumed at every batch: [0, 23) on 2 workers in batches of 2 (shards of 12 and 11; the
// second runs dry first), with the same data order as the run that never stopped.
TEST(Resume, IterableAtEveryBatch) {
  LeakCheck leaks;
  std::string prefix;
  for (int workers : {0, 2}) {
    LoaderOptions o = Opts(workers);
    ASSERT_OK_AND_ASSIGN(auto whole, DataLoader::Create(std::make_shared<RangeDataset>(0, 23), o));
    ASSERT_OK(whole->StartEpoch());
    const Values all = Read(*whole);
    ASSERT_EQ(all.size(), 12u);
    for (size_t b = 0; b <= all.size(); ++b) {
      LoaderState s;
      {
        ASSERT_OK_AND_ASSIGN(auto a, DataLoader::Create(std::make_shared<RangeDataset>(0, 23), o));
        prefix = a->shm_prefix();
        ASSERT_OK(a->StartEpoch());
        Read(*a, static_cast<int>(b));
        ASSERT_OK_AND_ASSIGN(s, a->state_dict());
      }
      ASSERT_OK_AND_ASSIGN(auto r, DataLoader::Create(std::make_shared<RangeDataset>(0, 23), o));
      ASSERT_OK(r->load_state_dict(s));
      ASSERT_OK(r->StartEpoch());
      EXPECT_EQ(Read(*r), Tail(all, b)) << workers << " workers, stopped after batch " << b;
    }
  }
  leaks.Check(prefix);
}

// R = 3 ranks x W = 2 workers over [0, 20): every sample of [0, 18) exactly once over the grid, 18 and 19
// dropped, and every rank the same number of batches (data parallelism needs equal steps).
TEST(Grid, NoDuplicateNoMissingSample) {
  LeakCheck leaks;
  std::string prefix;
  std::map<int64_t, int> seen;
  std::set<size_t> batches_per_rank;
  for (int r = 0; r < 3; ++r) {
    LoaderOptions o = Opts(2);
    o.batch_size = 2;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(0, 20, r, 3), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const Values got = Read(*dl);
    batches_per_rank.insert(got.size());
    for (const auto& b : got) {
      for (float v : b) ++seen[static_cast<int64_t>(v)];
    }
  }
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(seen[i], 1) << "sample " << i;
  EXPECT_EQ(seen.count(18) + seen.count(19), 0u) << "the tail 20 mod 3 = 2 is dropped";
  EXPECT_EQ(batches_per_rank.size(), 1u) << "ranks ran different numbers of steps";
  leaks.Check(prefix);
}

// Megatron resumes its GPT dataset from consumed_samples = steps x global batch; the loader from its state.
// For one rank, both continue with the same samples and the same tokens.
class GptSamples : public MapDataset {
 public:
  GptSamples(std::shared_ptr<IndexedDataset> ds, GptIndices g, int64_t L, int64_t n)
      : ds_(std::move(ds)), g_(std::move(g)), L_(L), n_(n) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    auto t = GptSample(*ds_, g_, L_, i);
    if (!t.ok()) throw std::runtime_error(std::string(t.status().message()));
    Sample s{{L_ + 2}, {static_cast<float>(i)}};
    for (int64_t x : *t) s.data.push_back(static_cast<float>(x));
    return s;
  }

 private:
  std::shared_ptr<IndexedDataset> ds_;
  GptIndices g_;
  int64_t L_, n_;
};

TEST(Resume, EqualsMegatronsConsumedSamples) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/megaresume_" + std::to_string(::getpid());
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, DType::kInt32));
  int64_t next = 1;
  for (int len : {9, 4, 13, 6, 11, 8}) {
    V doc(static_cast<size_t>(len));
    for (auto& t : doc) t = next++;
    ASSERT_OK(w->AddSequence(doc));
    ASSERT_OK(w->EndDocument());
  }
  ASSERT_OK(w->Finalize());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<IndexedDataset> opened, IndexedDataset::Open(p));
  std::shared_ptr<IndexedDataset> ds = std::move(opened);
  GptConfig c;
  c.seq_length = 4;
  c.num_samples = 24;
  c.seed = 5;
  ASSERT_OK_AND_ASSIGN(GptIndices g, BuildGptIndices(ds->sequence_lengths(), c));
  auto samples = std::make_shared<GptSamples>(ds, g, 4, 24);
  LoaderOptions o;
  o.batch_size = 3;  // the micro-batch; one rank, so the global batch is 3
  o.num_workers = 2;
  o.timeout_s = 20;
  LeakCheck leaks;
  std::string prefix;
  for (int64_t steps : {0, 1, 3, 5}) {
    LoaderState s;
    {
      ASSERT_OK_AND_ASSIGN(auto a, DataLoader::Create(samples, o));
      prefix = a->shm_prefix();
      ASSERT_OK(a->StartEpoch());
      Read(*a, static_cast<int>(steps));
      ASSERT_OK_AND_ASSIGN(s, a->state_dict());
    }
    ASSERT_OK_AND_ASSIGN(auto b, DataLoader::Create(samples, o));
    ASSERT_OK(b->load_state_dict(s));
    ASSERT_OK(b->StartEpoch());
    const Values resumed = Read(*b);
    ASSERT_OK_AND_ASSIGN(auto megatron, MegatronMicroBatches(24, steps * 3, 3, 0, 1, 100));
    ASSERT_EQ(resumed.size(), megatron.size()) << "after " << steps << " steps";
    for (size_t k = 0; k < resumed.size(); ++k) {
      for (size_t j = 0; j < 3; ++j) {
        const int64_t idx = megatron[k][j];
        ASSERT_OK_AND_ASSIGN(V tokens, GptSample(*ds, g, 4, idx));
        const float* row = resumed[k].data() + j * 6;
        EXPECT_EQ(row[0], static_cast<float>(idx)) << "step " << steps + static_cast<int64_t>(k);
        for (size_t t = 0; t < 5; ++t) EXPECT_EQ(row[t + 1], static_cast<float>(tokens[t]));
      }
    }
  }
  leaks.Check(prefix);
}

TEST(Resume, RefusesBadStatesAndStatesOfOutOfOrderLoaders) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Augmented>(11), Opts(2)));
    prefix = dl->shm_prefix();
    LoaderState s;
    s.epoch = 0;
    s.delivered = 7;  // 6 batches per epoch
    s.num_workers = 2;
    s.rng = {1, 2};
    EXPECT_EQ(dl->load_state_dict(s).code(), absl::StatusCode::kInvalidArgument);
    s.delivered = 2;
    s.rng = {1};
    EXPECT_EQ(dl->load_state_dict(s).code(), absl::StatusCode::kInvalidArgument);
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    ASSERT_OK(dl->Next(&b));
    s.rng = {1, 2};
    EXPECT_EQ(dl->load_state_dict(s).code(), absl::StatusCode::kFailedPrecondition)
        << "an epoch is in progress";
    LoaderOptions o = Opts(2);
    o.in_order = false;
    ASSERT_OK_AND_ASSIGN(auto ooo, DataLoader::Create(std::make_shared<Augmented>(11), o));
    ASSERT_OK(ooo->StartEpoch());
    ASSERT_OK(ooo->Next(&b));
    EXPECT_EQ(ooo->state_dict().status().code(), absl::StatusCode::kFailedPrecondition);
  }
  leaks.Check(prefix);
}

}  // namespace
}  // namespace distlab::dataloader
