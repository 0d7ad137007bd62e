// Hidden tests, Lab 2 stage B: the multi-process loader. Every case that forks ends with the leak check
// (no child process, file descriptor or shared-memory segment left). Waits are bounded: the loader's own
// timeout where a wrong loader could wait forever, and the per-case watchdog behind it.
//
// Every case draws its dataset size, batch size, worker count (at most 4), prefetch factor, seeds or
// shards from the grading seed (test_util.h), within ranges that keep it about as fast as with the fixed
// inputs it had: at most 24 batches, and the same sleeps (a slow first sample, the 300 ms windows in which
// no task may start, the timeout).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/sampler.h"
#include "tests/dataloader/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::distlab::testing::CaseRandom;
using testing::Drawn;
using ::testing::HasSubstr;
using testing::IotaDataset;
using testing::LeakCheck;
using testing::Show;
using testing::Str;
using V = std::vector<int64_t>;
using Values = std::vector<std::vector<float>>;

// Reads every batch of one epoch; fails the test on an error.
std::vector<Batch> ReadEpoch(DataLoader& dl) {
  std::vector<Batch> out;
  EXPECT_OK(dl.StartEpoch());
  for (int guard = 0; guard < 10000; ++guard) {
    Batch b;
    auto more = dl.Next(&b);
    EXPECT_OK(more);
    if (!more.ok() || !*more) break;
    out.push_back(std::move(b));
  }
  return out;
}

LoaderOptions Opts(int64_t bs, int workers) {
  LoaderOptions o;
  o.batch_size = bs;
  o.num_workers = workers;
  o.timeout_s = 20;  // a wrong loader fails with a message instead of hanging
  return o;
}

std::vector<float> ValuesOf(const Batch& b) { return std::vector<float>(b.data(), b.data() + b.numel); }

// Reference: the indices 0..n-1 (or `order`) in batches of B.
std::vector<V> ExpectedBatches(const V& order, int64_t B, bool drop_last = false) {
  std::vector<V> out;
  const int64_t n = static_cast<int64_t>(order.size());
  for (int64_t lo = 0; lo < n; lo += B) {
    const int64_t hi = std::min(n, lo + B);
    if (drop_last && hi - lo < B) break;
    out.emplace_back(order.begin() + lo, order.begin() + hi);
  }
  return out;
}
V Iota(int64_t n) {
  V v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// A dataset size for `batches` batches of B, the last one full or short.
int64_t SizeFor(CaseRandom& rng, int64_t batches, int64_t B) { return (batches - 1) * B + rng.Int(1, B); }

// "" when the IotaDataset batches `got` are `want` (indices), at positions first, first + 1, ..., batch t
// made by worker t % W (-1 for W = 0), with shape [size, 2] and values {i, worker}; else the first thing that
// is not.
std::string CheckIota(const std::vector<Batch>& got, const std::vector<V>& want, int W, int64_t first = 0) {
  if (got.size() != want.size()) return Str(got.size(), " batches, expected ", want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const Batch& b = got[k];
    const int64_t t = first + static_cast<int64_t>(k);
    const int w = W == 0 ? -1 : static_cast<int>(t % W);
    if (b.position != t) return Str("batch ", t, " has position ", b.position);
    const std::string idx = testing::FirstDifference(b.indices, want[k]);
    if (!idx.empty()) return Str("batch ", t, " indices: ", idx);
    if (b.worker_id != w) return Str("batch ", t, " was made by worker ", b.worker_id, ", expected ", w);
    const V shape = {static_cast<int64_t>(want[k].size()), 2};
    if (b.shape != shape) return Str("batch ", t, " has shape ", ShapeString(b.shape));
    for (size_t j = 0; j < want[k].size(); ++j) {
      if (b.data()[2 * j] != static_cast<float>(want[k][j]) || b.data()[2 * j + 1] != static_cast<float>(w)) {
        return Str("batch ", t, ", sample ", j, " holds {", b.data()[2 * j], ", ", b.data()[2 * j + 1],
                   "}, expected {", want[k][j], ", ", w, "} (index, worker id; -1 in the main process)");
      }
    }
  }
  return "";
}

TEST(Loader, InProcessBatchesInSamplerOrder) {
  CaseRandom rng;
  const int64_t B = rng.Int(1, 6), n = rng.Int(1, 30);
  const bool drop = rng.Chance(0.3) && n >= B;
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, drop ? ", drop_last" : "", ", 0 workers")));
  LoaderOptions o = Opts(B, 0);
  o.drop_last = drop;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(n), o));
  const std::vector<V> want = ExpectedBatches(Iota(n), B, drop);
  EXPECT_EQ(dl->num_batches(), static_cast<int64_t>(want.size()));
  EXPECT_NO_PROBLEM(CheckIota(ReadEpoch(*dl), want, 0));
}

TEST(Loader, TwoWorkersDeliverInOrderRoundRobin) {
  CaseRandom rng;
  const int64_t B = rng.Int(1, 4), n = SizeFor(rng, rng.Int(4, 10), B);
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", 2 workers")));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(n), Opts(B, 2)));
    prefix = dl->shm_prefix();
    EXPECT_NO_PROBLEM(CheckIota(ReadEpoch(*dl), ExpectedBatches(Iota(n), B), 2))
        << " (in request order; task t goes to worker t % W)";
  }
  leaks.Check(prefix);
}

TEST(Loader, BatchesArriveThroughSharedMemory) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 3));
  const int64_t B = rng.Int(1, 4), n = SizeFor(rng, rng.Int(W + 1, 8), B);
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", ", W, " workers")));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(n), Opts(B, W)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
    ASSERT_TRUE(more);
    // The batch's memory is a mapping of an (already unlinked) segment under /dev/shm/<prefix>.
    std::ifstream maps("/proc/self/maps");
    std::string line, found;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(b.data());
    while (std::getline(maps, line)) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && addr >= lo && addr < hi) found = line;
    }
    EXPECT_THAT(found, HasSubstr("/dev/shm/" + prefix)) << "batch memory is not a shared-memory mapping";
    // Worker 0 makes batch W too while batch 0 is held: batch 0 keeps its values.
    Batch other;
    int64_t rest = 0;
    for (;;) {
      ASSERT_OK_AND_ASSIGN(bool m, dl->Next(&other));
      if (!m) break;
      ++rest;
    }
    EXPECT_EQ(rest + 1, (n + B - 1) / B);
    EXPECT_NO_PROBLEM(CheckIota({b}, {ExpectedBatches(Iota(n), B)[0]}, W))
        << ", read after the rest of the epoch, batch 0 still held";
  }
  leaks.Check(prefix);
}

// Sample 0 is slow: an in-order loader must still hand out batch 0 first.
class SlowFirst : public MapDataset {
 public:
  explicit SlowFirst(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return Sample{{}, {static_cast<float>(i)}};
  }

 private:
  int64_t n_;
};

TEST(Loader, InOrderDespiteASlowFirstBatch) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(2, 4));
  const int64_t B = rng.Int(1, 2), n = SizeFor(rng, rng.Int(W + 1, 10), B);
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", ", W, " workers; sample 0 takes 400 ms")));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<SlowFirst>(n), Opts(B, W)));
    prefix = dl->shm_prefix();
    const std::vector<Batch> got = ReadEpoch(*dl);
    std::vector<V> indices;
    for (const Batch& b : got) indices.push_back(b.indices);
    EXPECT_SAME(indices, ExpectedBatches(Iota(n), B)) << "in_order: batches in request order";
  }
  leaks.Check(prefix);
}

// Sample 0 waits for a byte on a pipe the test writes only after it has received another batch.
class Gated : public MapDataset {
 public:
  Gated(int fd, int64_t n) : fd_(fd), n_(n) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    if (i == 0) {
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, 20000);
      char c;
      (void)!::read(fd_, &c, 1);
    }
    return Sample{{}, {static_cast<float>(i)}};
  }

 private:
  int fd_;
  int64_t n_;
};

TEST(Loader, OutOfOrderHandsOutFinishedBatchesFirst) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(2, 3));
  const int64_t B = rng.Int(1, 2), batches = rng.Int(W + 1, 8), n = SizeFor(rng, batches, B);
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", ", W, " workers, in_order false; sample 0 blocks")));
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(B, W);
    o.in_order = false;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Gated>(gate[0], n), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch first;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&first));
    ASSERT_TRUE(more);
    EXPECT_NE(first.position, 0) << "batch 0 is blocked; out of order must hand out a finished one";
    ASSERT_EQ(::write(gate[1], "x", 1), 1);
    std::set<int64_t> seen{first.position};
    for (;;) {
      Batch b;
      ASSERT_OK_AND_ASSIGN(bool m, dl->Next(&b));
      if (!m) break;
      EXPECT_TRUE(seen.insert(b.position).second) << "batch " << b.position << " delivered twice";
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), batches) << "every batch once";
  }
  leaks.Check(prefix);
  ::close(gate[0]);
  ::close(gate[1]);
}

TEST(Loader, ShuffleReadsSeedPlusEpochOrder) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 3));
  const int64_t B = rng.Int(1, 5), n = rng.Int(5, 30);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 1000000));
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", ", W, " persistent workers, shuffle seed ", seed)));
  LoaderOptions o = Opts(B, W);
  o.shuffle = true;
  o.seed = seed;
  o.persistent_workers = true;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(n), o));
  for (int epoch = 0; epoch < 2; ++epoch) {
    V order = Iota(n);
    SeededShuffle(&order, seed + static_cast<uint64_t>(epoch));
    std::vector<V> got;
    for (const Batch& b : ReadEpoch(*dl)) got.push_back(b.indices);
    EXPECT_SAME(got, ExpectedBatches(order, B))
        << "epoch " << epoch << " reads SeededShuffle(0..n-1, seed + epoch) in batches";
  }
}

// Each Get writes its index to a pipe, so the test sees how many tasks the workers have started.
class Logged : public MapDataset {
 public:
  explicit Logged(int fd) : fd_(fd) {}
  int64_t size() const override { return 20; }
  Sample Get(int64_t i) const override {
    int64_t v = i;
    (void)!::write(fd_, &v, sizeof v);
    return Sample{{}, {static_cast<float>(i)}};
  }

 private:
  int fd_;
};

int ReadLogged(int fd, int want, int wait_ms) {
  int got = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (got < want) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now())
            .count());
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) break;
    int64_t v;
    if (::read(fd, &v, sizeof v) != sizeof v) break;
    ++got;
  }
  return got;
}

// A worker may write a segment again only after the main process has dropped every Batch that uses it
// (loaders reuse segments to save creating one per batch). Batches the caller keeps keep their values --
// more of them than any pool holds, and across epochs while the same worker writes new batches.
TEST(Loader, HeldBatchesKeepTheirValues) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 2));
  const int64_t B = rng.Int(1, 3), batches = rng.Int(12, 24), n = SizeFor(rng, batches, B);
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", ", W, " persistent workers")));
  const std::vector<V> want = ExpectedBatches(Iota(n), B);
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(B, W);
    o.persistent_workers = true;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(n), o));
    prefix = dl->shm_prefix();
    std::vector<Batch> first = ReadEpoch(*dl);  // all held
    ASSERT_NO_PROBLEM(CheckIota(first, want, W)) << " (epoch 0, every batch held)";
    // Keep the even batches, drop the odd ones: their memory may be written again, the kept ones' not.
    std::vector<Batch> kept;
    for (size_t k = 0; k < first.size(); k += 2) kept.push_back(std::move(first[k]));
    first.clear();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    for (int64_t k = 0;; ++k) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));  // each batch dropped when the next one arrives
      if (!more) {
        EXPECT_EQ(k, batches);
        break;
      }
      EXPECT_NO_PROBLEM(CheckIota({b}, {want[static_cast<size_t>(k)]}, W, k)) << " (epoch 1)";
    }
    for (size_t k = 0; k < kept.size(); ++k) {
      const std::vector<float> values = ValuesOf(kept[k]);
      for (size_t j = 0; j < want[2 * k].size(); ++j) {
        if (values[2 * j] != static_cast<float>(want[2 * k][j])) {
          ADD_FAILURE() << "kept batch " << 2 * k << " of epoch 0 was overwritten: sample " << j << " holds "
                        << values[2 * j] << ", expected " << want[2 * k][j];
          break;
        }
      }
    }
  }
  leaks.Check(prefix);
}

TEST(Loader, PrefetchKeepsFactorTimesWorkersOutstanding) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 3)), P = static_cast<int>(rng.Int(1, 3));
  const int outstanding = W * P;
  SCOPED_TRACE(Drawn(Str(W, " workers, prefetch_factor ", P, ", batch 1, 20 samples")));
  int log[2];
  ASSERT_EQ(::pipe(log), 0);
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, W);
    o.prefetch_factor = P;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Logged>(log[1]), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const int wait = static_cast<int>(distlab::testing::Scaled(std::chrono::milliseconds(5000)).count());
    EXPECT_EQ(ReadLogged(log[0], outstanding, wait), outstanding)
        << "prefetch_factor x num_workers = " << outstanding << " tasks should start";
    EXPECT_EQ(ReadLogged(log[0], 1, 300), 0) << "more than prefetch_factor x num_workers tasks were sent";
    Batch b;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
    ASSERT_TRUE(more);
    EXPECT_EQ(ReadLogged(log[0], 1, wait), 1) << "taking a batch must send exactly one new task";
    EXPECT_EQ(ReadLogged(log[0], 1, 300), 0) << "taking one batch sent more than one task";
  }
  leaks.Check(prefix);
  ::close(log[0]);
  ::close(log[1]);
}

class Sleepy : public MapDataset {
 public:
  int64_t size() const override { return 4; }
  Sample Get(int64_t i) const override {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return Sample{{}, {static_cast<float>(i)}};
  }
};

TEST(Loader, TimeoutErrorNamesTheSeconds) {
  // T and how absl::StrCat writes it (loader.h): at most 6 significant digits, no trailing zeros.
  const std::pair<double, const char*> timeouts[] = {{0.25, "0.25"}, {0.3, "0.3"},    {0.375, "0.375"},
                                                     {0.4, "0.4"},   {0.5, "0.5"},    {0.6, "0.6"},
                                                     {0.75, "0.75"}, {0.625, "0.625"}};
  CaseRandom rng;
  const auto [t, text] = timeouts[rng.Int(0, 7)];
  SCOPED_TRACE(Drawn(Str("timeout_s ", text, ", 1 worker whose Get takes 5 s")));
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, 1);
    o.timeout_s = t;
    o.shutdown_timeout_s = 0.2;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Sleepy>(), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    auto r = dl->Next(&b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(std::string("DataLoader timed out after ") + text + " seconds"));
  }
  leaks.Check(prefix);
}

TEST(Loader, RejectsInvalidOptions) {
  CaseRandom rng;
  auto ds = std::make_shared<IotaDataset>(rng.Int(1, 20));
  LoaderOptions o = Opts(1, static_cast<int>(rng.Int(0, 3)));
  o.timeout_s = -static_cast<double>(rng.Int(1, 80)) / 8;
  {
    SCOPED_TRACE(Drawn(Str("timeout_s ", o.timeout_s)));
    auto r = DataLoader::Create(ds, o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("non-negative"));
  }
  const int64_t bs = -rng.Int(0, 5);
  o = Opts(bs, static_cast<int>(rng.Int(0, 3)));
  EXPECT_EQ(DataLoader::Create(ds, o).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(Str("batch_size ", bs));
  o = Opts(1, 0);
  o.persistent_workers = true;
  EXPECT_EQ(DataLoader::Create(ds, o).status().code(), absl::StatusCode::kInvalidArgument)
      << "persistent_workers with num_workers = 0";
  const int workers = -static_cast<int>(rng.Int(1, 4));
  o = Opts(1, workers);
  EXPECT_EQ(DataLoader::Create(ds, o).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(Str("num_workers ", workers));
  const int prefetch = -static_cast<int>(rng.Int(0, 3));
  o = Opts(1, static_cast<int>(rng.Int(1, 3)));
  o.prefetch_factor = prefetch;
  EXPECT_EQ(DataLoader::Create(ds, o).status().code(), absl::StatusCode::kInvalidArgument)
      << Drawn(Str("prefetch_factor ", prefetch, " with ", o.num_workers, " workers"));
}

TEST(Loader, PersistentWorkersSurviveEpochs) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 3));
  const int64_t B = rng.Int(1, 3), n = rng.Int(2, 20), batches = (n + B - 1) / B;
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", ", W, " workers")));
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(B, W);
    o.persistent_workers = true;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(n), o));
    prefix = dl->shm_prefix();
    EXPECT_EQ(static_cast<int64_t>(ReadEpoch(*dl).size()), batches);
    std::vector<pid_t> first = dl->worker_pids();
    ASSERT_EQ(first.size(), static_cast<size_t>(W));
    EXPECT_EQ(static_cast<int64_t>(ReadEpoch(*dl).size()), batches);
    EXPECT_EQ(dl->worker_pids(), first) << "persistent workers must be the same processes";
  }
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(n), Opts(B, W)));
    ASSERT_OK(dl->StartEpoch());
    std::vector<pid_t> first = dl->worker_pids();
    Batch b;
    for (;;) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
      if (!more) break;
    }
    EXPECT_TRUE(dl->worker_pids().empty()) << "non-persistent workers end with their epoch";
    ASSERT_OK(dl->StartEpoch());
    std::vector<pid_t> second = dl->worker_pids();
    ASSERT_EQ(second.size(), static_cast<size_t>(W));
    EXPECT_NE(second, first);
    for (;;) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
      if (!more) break;
    }
  }
  leaks.Check(prefix);
}

int g_offset = 0;  // set by worker_init_fn inside workers only
int g_scale = 0;   // the case's drawn multiplier, set before the workers fork

class InitAware : public MapDataset {
 public:
  explicit InitAware(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    const WorkerInfo* w = GetWorkerInfo();
    return Sample{{3},
                  {static_cast<float>(g_offset + i), static_cast<float>(w ? w->seed : 0),
                   static_cast<float>(w ? w->num_workers : 0)}};
  }

 private:
  int64_t n_;
};

TEST(Loader, WorkerInitFnAndPerWorkerSeeds) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 3));
  const int64_t n = rng.Int(2 * W, 12);  // every worker makes two batches or more, all of them held
  const uint64_t base = static_cast<uint64_t>(rng.Int(0, 1000000));
  g_scale = static_cast<int>(rng.Int(100, 5000));
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch 1, ", W, " workers, base_seed ", base,
                         ", worker_init_fn sets an offset of ", g_scale, " x (id + 1)")));
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, W);
    o.base_seed = base;
    o.worker_init_fn = [](int w) { g_offset = g_scale * (w + 1); };
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<InitAware>(n), o));
    prefix = dl->shm_prefix();
    std::vector<Batch> got = ReadEpoch(*dl);
    ASSERT_EQ(static_cast<int64_t>(got.size()), n);
    for (size_t k = 0; k < got.size(); ++k) {
      const int w = got[k].worker_id;
      ASSERT_EQ(w, static_cast<int>(k % static_cast<size_t>(W))) << "batch " << k;
      EXPECT_EQ(got[k].data()[0], static_cast<float>(g_scale * (w + 1) + static_cast<int64_t>(k)))
          << "batch " << k << ": worker_init_fn must have run in worker " << w;
      EXPECT_EQ(got[k].data()[1], static_cast<float>(base + static_cast<uint64_t>(w)))
          << "batch " << k << ": seed = base_seed + worker id";
      EXPECT_EQ(got[k].data()[2], static_cast<float>(W)) << "batch " << k << ": WorkerInfo::num_workers";
    }
  }
  EXPECT_EQ(g_offset, 0) << "worker_init_fn must run in the workers, not in the main process";
  leaks.Check(prefix);
}

// Reference: worker w's shard of [start, end) as loader.h states it (ceil-sized, contiguous).
std::pair<int64_t, int64_t> ExpectedShard(int64_t start, int64_t end, int w, int W) {
  const int64_t len = end - start, per = (len + W - 1) / W;
  return {start + std::min(len, w * per), start + std::min(len, (w + 1) * per)};
}

TEST(ShardRange, ContiguousShardsCoverOnce) {
  CaseRandom rng;
  for (int trial = 0; trial < 6; ++trial) {
    const int W = static_cast<int>(rng.Int(1, 6));
    const int64_t start = rng.Int(0, 100), end = start + rng.Int(0, 30);
    SCOPED_TRACE(Drawn(Str("[", start, ", ", end, ") on ", W, " workers")));
    int64_t next = start;
    for (int w = 0; w < W; ++w) {
      const auto [lo, hi] = ShardRange(start, end, w, W);
      const auto want = ExpectedShard(start, end, w, W);
      if (want.first < want.second) {
        EXPECT_EQ(lo, want.first) << "worker " << w << ": shards of ceil(n / W), contiguous";
        EXPECT_EQ(hi, want.second) << "worker " << w << ": shards of ceil(n / W), contiguous";
        EXPECT_EQ(lo, next) << "worker " << w << " does not start where worker " << w - 1 << " ended";
        next = hi;
      } else {
        EXPECT_EQ(lo, hi) << "worker " << w << " has nothing left to read: an empty range";
      }
    }
    EXPECT_EQ(next, end) << "the shards must cover the range";
  }
}

// Reference: each worker's list of samples cut into batches of B (each worker drops its own short batch
// with drop_last), delivered round robin over the workers that still have batches.
struct Delivery {
  int worker;
  std::vector<float> values;
};
std::vector<Delivery> ExpectedRoundRobin(const std::vector<V>& per_worker, int64_t B,
                                         bool drop_last = false) {
  std::vector<std::vector<V>> batches;
  for (const V& s : per_worker) batches.push_back(ExpectedBatches(s, B, drop_last));
  std::vector<Delivery> out;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (size_t w = 0; w < batches.size(); ++w) {
      if (round >= batches[w].size()) continue;
      any = true;
      out.push_back(
          {static_cast<int>(w), std::vector<float>(batches[w][round].begin(), batches[w][round].end())});
    }
    if (!any) return out;
  }
}

// "" when the delivered batches are `want` (values and workers), else the first difference.
std::string CheckDeliveries(const std::vector<Batch>& got, const std::vector<Delivery>& want) {
  for (size_t k = 0; k < std::min(got.size(), want.size()); ++k) {
    const std::string d = testing::FirstDifference(ValuesOf(got[k]), want[k].values, "value");
    if (!d.empty()) return Str("batch ", k, ": ", d);
    if (got[k].worker_id != want[k].worker) {
      return Str("batch ", k, " came from worker ", got[k].worker_id, ", expected worker ", want[k].worker);
    }
  }
  if (got.size() < want.size()) {
    const Delivery& next = want[got.size()];
    return Str("the epoch ended after ", got.size(), " batches, expected ", want.size(), ": batch ",
               got.size(), " would be worker ", next.worker, "'s, starting with ",
               next.values.empty() ? -1 : next.values[0]);
  }
  if (got.size() > want.size()) return Str(got.size(), " batches, expected ", want.size());
  return "";
}

TEST(Loader, IterableShardedAcrossWorkersExactlyOnce) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 4));
  // Worker 0's shard holds two whole batches or more (ceil(len / W) >= 2B), all of them held.
  const int64_t B = rng.Int(1, 3), start = rng.Int(0, 50), len = W * (2 * B - 1) + rng.Int(1, 12);
  const bool drop = rng.Chance(0.3);
  SCOPED_TRACE(Drawn(Str("RangeDataset(", start, ", ", start + len, "), batch ", B, drop ? ", drop_last" : "",
                         ", ", W, " workers")));
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(B, W);
    o.drop_last = drop;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(start, start + len), o));
    prefix = dl->shm_prefix();
    EXPECT_EQ(dl->num_batches(), -1);
    std::vector<V> shards;
    for (int w = 0; w < W; ++w) {
      const auto [lo, hi] = ExpectedShard(start, start + len, w, W);
      V s(static_cast<size_t>(hi - lo));
      std::iota(s.begin(), s.end(), lo);
      shards.push_back(s);
    }
    EXPECT_NO_PROBLEM(CheckDeliveries(ReadEpoch(*dl), ExpectedRoundRobin(shards, B, drop)))
        << " (each worker reads its ShardRange; in order: worker 0, worker 1, ...)";
  }
  leaks.Check(prefix);
}

// Worker w yields counts[w] samples 100 w, 100 w + 1, ...
class Shards : public IterableDataset {
 public:
  explicit Shards(V counts) : counts_(std::move(counts)) {}
  std::unique_ptr<SampleStream> Open() const override {
    const WorkerInfo* w = GetWorkerInfo();
    const int id = w ? w->id : 0;
    return std::make_unique<Stream>(static_cast<int>(counts_[static_cast<size_t>(id)]), 100 * id);
  }

 private:
  struct Stream : SampleStream {
    Stream(int count, int first) : value(first), end(first + count) {}
    bool Next(Sample* s) override {
      if (value >= end) return false;
      s->shape = {};
      s->data = {static_cast<float>(value)};
      ++value;
      return true;
    }
    int value, end;
  };
  V counts_;
};

// One worker runs dry early (after 0 to 2 samples); the others have more samples than the prefetch window
// holds and go on round robin, whatever the prefetch window and whichever answer arrives first. A worker that
// runs dry early must not end the epoch for the others. Then RangeDataset's own uneven shards, under two
// prefetch factors.
TEST(Loader, IterableRoundRobinOverTheWorkersLeft) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(2, 4)), P = static_cast<int>(rng.Int(1, 3));
  const int short_one = static_cast<int>(rng.Int(0, W - 1));
  V counts;
  const int64_t few = rng.Int(0, 2);
  for (int w = 0; w < W; ++w) counts.push_back(w == short_one ? few : few + P * W + rng.Int(2, 6));
  LeakCheck leaks;
  std::string prefix;
  {
    SCOPED_TRACE(Drawn(Str(W, " workers yielding ", Show(counts),
                           " samples (100 w, 100 w + 1, ...), batch 1, ", "prefetch_factor ", P)));
    LoaderOptions o = Opts(1, W);
    o.prefetch_factor = P;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Shards>(counts), o));
    prefix = dl->shm_prefix();
    std::vector<V> per_worker;
    for (int w = 0; w < W; ++w) {
      V s(static_cast<size_t>(counts[static_cast<size_t>(w)]));
      std::iota(s.begin(), s.end(), 100 * w);
      per_worker.push_back(s);
    }
    EXPECT_NO_PROBLEM(CheckDeliveries(ReadEpoch(*dl), ExpectedRoundRobin(per_worker, 1)))
        << " (round robin over the workers that still have data)";
  }
  leaks.Check(prefix);
  const int W2 = static_cast<int>(rng.Int(2, 4));
  const int64_t len = rng.Int(W2 + 1, 20);
  for (int prefetch : {1, static_cast<int>(rng.Int(2, 4))}) {
    SCOPED_TRACE(
        Drawn(Str("RangeDataset(0, ", len, "), batch 1, ", W2, " workers, prefetch_factor ", prefetch)));
    LoaderOptions o = Opts(1, W2);
    o.prefetch_factor = prefetch;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(0, len), o));
    prefix = dl->shm_prefix();
    std::vector<V> shards;
    for (int w = 0; w < W2; ++w) {
      const auto [lo, hi] = ExpectedShard(0, len, w, W2);
      V s(static_cast<size_t>(hi - lo));
      std::iota(s.begin(), s.end(), lo);
      shards.push_back(s);
    }
    EXPECT_NO_PROBLEM(CheckDeliveries(ReadEpoch(*dl), ExpectedRoundRobin(shards, 1)))
        << " (round robin over the workers that still have data)";
  }
  leaks.Check(prefix);
}

TEST(Loader, IterableInProcessReadsEverything) {
  CaseRandom rng;
  const int64_t B = rng.Int(1, 5), start = rng.Int(0, 100), len = rng.Int(1, 20);
  const bool drop = rng.Chance(0.3);
  SCOPED_TRACE(Drawn(Str("RangeDataset(", start, ", ", start + len, "), batch ", B, drop ? ", drop_last" : "",
                         ", 0 workers")));
  LoaderOptions o = Opts(B, 0);
  o.drop_last = drop;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(start, start + len), o));
  V all(static_cast<size_t>(len));
  std::iota(all.begin(), all.end(), start);
  const std::vector<Batch> got = ReadEpoch(*dl);
  std::vector<Delivery> want = ExpectedRoundRobin({all}, B, drop);
  for (size_t k = 0; k < std::min(got.size(), want.size()); ++k) {
    EXPECT_SAME(got[k].shape, V{static_cast<int64_t>(want[k].values.size())}) << "batch " << k;
  }
  for (Delivery& d : want) d.worker = -1;
  EXPECT_NO_PROBLEM(CheckDeliveries(got, want)) << " (the whole stream in order, in batches)";
}

}  // namespace
}  // namespace distlab::dataloader
