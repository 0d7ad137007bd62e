// Hidden tests, Lab 2 stage B: the multi-process loader. Every case that forks ends with the leak check
// (no child process, file descriptor or shared-memory segment left). Waits are bounded: the loader's own
// timeout where a wrong loader could wait forever, and the per-case watchdog behind it.
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

using ::testing::HasSubstr;
using testing::IotaDataset;
using testing::LeakCheck;
using V = std::vector<int64_t>;

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

TEST(Loader, InProcessBatchesInSamplerOrder) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(10), Opts(3, 0)));
  EXPECT_EQ(dl->num_batches(), 4);
  std::vector<Batch> got = ReadEpoch(*dl);
  ASSERT_EQ(got.size(), 4u);
  const V want[4] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(got[k].indices, want[k]);
    EXPECT_EQ(got[k].shape, (V{static_cast<int64_t>(want[k].size()), 2}));
    EXPECT_EQ(got[k].worker_id, -1);
    for (size_t j = 0; j < want[k].size(); ++j) {
      EXPECT_EQ(got[k].data()[2 * j], want[k][j]);
      EXPECT_EQ(got[k].data()[2 * j + 1], -1) << "GetWorkerInfo() must be null in the main process";
    }
  }
}

TEST(Loader, TwoWorkersDeliverInOrderRoundRobin) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(10), Opts(3, 2)));
    prefix = dl->shm_prefix();
    std::vector<Batch> got = ReadEpoch(*dl);
    ASSERT_EQ(got.size(), 4u);
    const V want[4] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(got[k].position, static_cast<int64_t>(k));
      EXPECT_EQ(got[k].indices, want[k]);
      EXPECT_EQ(got[k].worker_id, static_cast<int>(k % 2)) << "task t goes to worker t % W";
      for (size_t j = 0; j < want[k].size(); ++j) {
        EXPECT_EQ(got[k].data()[2 * j], want[k][j]);
        EXPECT_EQ(got[k].data()[2 * j + 1], static_cast<float>(k % 2)) << "made by worker " << k % 2;
      }
    }
  }
  leaks.Check(prefix);
}

TEST(Loader, BatchesArriveThroughSharedMemory) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(8), Opts(4, 1)));
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
    EXPECT_EQ(b.data()[6], 3.0f);
  }
  leaks.Check(prefix);
}

// Sample 0 is slow: an in-order loader must still hand out batch 0 first.
class SlowFirst : public MapDataset {
 public:
  int64_t size() const override { return 8; }
  Sample Get(int64_t i) const override {
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return Sample{{}, {static_cast<float>(i)}};
  }
};

TEST(Loader, InOrderDespiteASlowFirstBatch) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<SlowFirst>(), Opts(1, 2)));
    prefix = dl->shm_prefix();
    std::vector<Batch> got = ReadEpoch(*dl);
    ASSERT_EQ(got.size(), 8u);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].indices, V{static_cast<int64_t>(k)}) << k;
  }
  leaks.Check(prefix);
}

// Sample 0 waits for a byte on a pipe the test writes only after it has received another batch.
class Gated : public MapDataset {
 public:
  explicit Gated(int fd) : fd_(fd) {}
  int64_t size() const override { return 6; }
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
};

TEST(Loader, OutOfOrderHandsOutFinishedBatchesFirst) {
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, 2);
    o.in_order = false;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Gated>(gate[0]), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch first;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&first));
    ASSERT_TRUE(more);
    EXPECT_NE(first.indices, V{0}) << "batch 0 is blocked; out of order must hand out a finished one";
    ASSERT_EQ(::write(gate[1], "x", 1), 1);
    std::set<int64_t> seen{first.indices[0]};
    for (;;) {
      Batch b;
      ASSERT_OK_AND_ASSIGN(bool m, dl->Next(&b));
      if (!m) break;
      EXPECT_TRUE(seen.insert(b.indices[0]).second) << "batch delivered twice";
    }
    EXPECT_EQ(seen.size(), 6u);
  }
  leaks.Check(prefix);
  ::close(gate[0]);
  ::close(gate[1]);
}

TEST(Loader, ShuffleReadsSeedPlusEpochOrder) {
  LoaderOptions o = Opts(4, 2);
  o.shuffle = true;
  o.seed = 7;
  o.persistent_workers = true;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(11), o));
  for (int epoch = 0; epoch < 2; ++epoch) {
    V order(11);
    std::iota(order.begin(), order.end(), 0);
    SeededShuffle(&order, 7 + epoch);
    V got;
    for (const Batch& b : ReadEpoch(*dl)) got.insert(got.end(), b.indices.begin(), b.indices.end());
    EXPECT_EQ(got, order) << "epoch " << epoch;
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
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(2, 1);
    o.persistent_workers = true;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(40), o));
    prefix = dl->shm_prefix();
    std::vector<Batch> first = ReadEpoch(*dl);  // 20 batches, all held
    ASSERT_EQ(first.size(), 20u);
    for (size_t k = 0; k < first.size(); ++k) {
      ASSERT_EQ(first[k].numel, 4);
      EXPECT_EQ(first[k].data()[0], 2.0f * k) << "epoch 0, batch " << k;
      EXPECT_EQ(first[k].data()[2], 2.0f * k + 1) << "epoch 0, batch " << k;
    }
    // Keep the even batches, drop the odd ones: their memory may be written again, the kept ones' not.
    std::vector<Batch> kept;
    for (size_t k = 0; k < first.size(); k += 2) kept.push_back(std::move(first[k]));
    first.clear();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    for (int64_t k = 0;; ++k) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));  // each batch dropped when the next one arrives
      if (!more) {
        EXPECT_EQ(k, 20);
        break;
      }
      EXPECT_EQ(b.data()[0], 2.0f * k) << "epoch 1, batch " << k;
    }
    for (size_t k = 0; k < kept.size(); ++k) {
      EXPECT_EQ(kept[k].data()[0], 4.0f * k) << "kept batch " << 2 * k << " of epoch 0 was overwritten";
      EXPECT_EQ(kept[k].data()[2], 4.0f * k + 1) << "kept batch " << 2 * k << " of epoch 0 was overwritten";
    }
  }
  leaks.Check(prefix);
}

TEST(Loader, PrefetchKeepsFactorTimesWorkersOutstanding) {
  int log[2];
  ASSERT_EQ(::pipe(log), 0);
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, 2);
    o.prefetch_factor = 3;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Logged>(log[1]), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const int wait = static_cast<int>(distlab::testing::Scaled(std::chrono::milliseconds(5000)).count());
    EXPECT_EQ(ReadLogged(log[0], 6, wait), 6) << "prefetch_factor x num_workers = 6 tasks should start";
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
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, 1);
    o.timeout_s = 0.5;
    o.shutdown_timeout_s = 0.2;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Sleepy>(), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    auto r = dl->Next(&b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("DataLoader timed out after 0.5 seconds"));
  }
  leaks.Check(prefix);
}

TEST(Loader, RejectsInvalidOptions) {
  auto ds = std::make_shared<IotaDataset>(4);
  LoaderOptions o = Opts(1, 1);
  o.timeout_s = -1;
  auto r = DataLoader::Create(ds, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("non-negative"));
  o = Opts(0, 1);
  EXPECT_EQ(DataLoader::Create(ds, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Opts(1, 0);
  o.persistent_workers = true;
  EXPECT_EQ(DataLoader::Create(ds, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Loader, PersistentWorkersSurviveEpochs) {
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(2, 2);
    o.persistent_workers = true;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(6), o));
    prefix = dl->shm_prefix();
    EXPECT_EQ(ReadEpoch(*dl).size(), 3u);
    std::vector<pid_t> first = dl->worker_pids();
    ASSERT_EQ(first.size(), 2u);
    EXPECT_EQ(ReadEpoch(*dl).size(), 3u);
    EXPECT_EQ(dl->worker_pids(), first) << "persistent workers must be the same processes";
  }
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<IotaDataset>(6), Opts(2, 2)));
    ASSERT_OK(dl->StartEpoch());
    std::vector<pid_t> first = dl->worker_pids();
    Batch b;
    while (*dl->Next(&b)) {
    }
    EXPECT_TRUE(dl->worker_pids().empty()) << "non-persistent workers end with their epoch";
    ASSERT_OK(dl->StartEpoch());
    std::vector<pid_t> second = dl->worker_pids();
    ASSERT_EQ(second.size(), 2u);
    EXPECT_NE(second, first);
    while (*dl->Next(&b)) {
    }
  }
  leaks.Check(prefix);
}

int g_offset = 0;  // set by worker_init_fn inside workers only

class InitAware : public MapDataset {
 public:
  int64_t size() const override { return 8; }
  Sample Get(int64_t i) const override {
    const WorkerInfo* w = GetWorkerInfo();
    return Sample{{3},
                  {static_cast<float>(g_offset + i), static_cast<float>(w ? w->seed : 0),
                   static_cast<float>(w ? w->num_workers : 0)}};
  }
};

TEST(Loader, WorkerInitFnAndPerWorkerSeeds) {
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, 2);
    o.base_seed = 500;
    o.worker_init_fn = [](int w) { g_offset = 1000 * (w + 1); };
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<InitAware>(), o));
    prefix = dl->shm_prefix();
    std::vector<Batch> got = ReadEpoch(*dl);
    ASSERT_EQ(got.size(), 8u);
    for (size_t k = 0; k < got.size(); ++k) {
      const int w = got[k].worker_id;
      ASSERT_GE(w, 0);
      EXPECT_EQ(got[k].data()[0], 1000 * (w + 1) + static_cast<float>(k))
          << "worker_init_fn ran in worker " << w;
      EXPECT_EQ(got[k].data()[1], 500 + w) << "seed = base_seed + worker id";
      EXPECT_EQ(got[k].data()[2], 2);
    }
  }
  EXPECT_EQ(g_offset, 0) << "worker_init_fn must run in the workers, not in the main process";
  leaks.Check(prefix);
}

TEST(ShardRange, ContiguousShardsCoverOnce) {
  EXPECT_EQ(ShardRange(3, 7, 0, 2), (std::pair<int64_t, int64_t>(3, 5)));
  EXPECT_EQ(ShardRange(3, 7, 1, 2), (std::pair<int64_t, int64_t>(5, 7)));
  EXPECT_EQ(ShardRange(0, 10, 3, 4), (std::pair<int64_t, int64_t>(9, 10)));
  auto empty = ShardRange(0, 2, 3, 4);
  EXPECT_EQ(empty.first, empty.second);
  for (int W = 1; W <= 5; ++W) {
    int64_t next = 11;
    for (int w = 0; w < W; ++w) {
      auto [lo, hi] = ShardRange(11, 24, w, W);
      EXPECT_EQ(lo, next);
      next = hi;
    }
    EXPECT_EQ(next, 24);
  }
}

TEST(Loader, IterableShardedAcrossWorkersExactlyOnce) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(3, 7), Opts(1, 2)));
    prefix = dl->shm_prefix();
    EXPECT_EQ(dl->num_batches(), -1);
    std::map<int, V> by_worker;
    V all;
    for (const Batch& b : ReadEpoch(*dl)) {
      ASSERT_EQ(b.numel, 1);
      by_worker[b.worker_id].push_back(static_cast<int64_t>(b.data()[0]));
      all.push_back(static_cast<int64_t>(b.data()[0]));
    }
    EXPECT_EQ(by_worker[0], (V{3, 4}));
    EXPECT_EQ(by_worker[1], (V{5, 6}));
    EXPECT_EQ(all, (V{3, 5, 4, 6})) << "in order: worker 0, worker 1, worker 0, ...";
  }
  leaks.Check(prefix);
}

// Worker 0 yields 1 sample (0), workers 1 and 2 yield 6 each (100.., 200..).
class OneShortShard : public IterableDataset {
 public:
  std::unique_ptr<SampleStream> Open() const override {
    const WorkerInfo* w = GetWorkerInfo();
    const int id = w ? w->id : 0;
    return std::make_unique<Stream>(id == 0 ? 1 : 6, 100 * id);
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
};

// [0, 7) on 3 workers: shards [0, 3), [3, 6), [6, 7). Worker 2 runs dry after one sample; the other two go
// on round robin: 0 3 6 1 4 2 5, whatever the prefetch window and whichever answer arrives first. And a
// worker that runs dry early must not end the epoch for the others.
TEST(Loader, IterableRoundRobinOverTheWorkersLeft) {
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(1, 3);
    o.prefetch_factor = 1;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<OneShortShard>(), o));
    prefix = dl->shm_prefix();
    V all;
    for (const Batch& b : ReadEpoch(*dl)) all.push_back(static_cast<int64_t>(b.data()[0]));
    EXPECT_EQ(all, (V{0, 100, 200, 101, 201, 102, 202, 103, 203, 104, 204, 105, 205}));
  }
  leaks.Check(prefix);
  for (int prefetch : {1, 3}) {
    LoaderOptions o = Opts(1, 3);
    o.prefetch_factor = prefetch;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(0, 7), o));
    prefix = dl->shm_prefix();
    V all;
    for (const Batch& b : ReadEpoch(*dl)) all.push_back(static_cast<int64_t>(b.data()[0]));
    EXPECT_EQ(all, (V{0, 3, 6, 1, 4, 2, 5})) << "prefetch_factor " << prefetch;
  }
  leaks.Check(prefix);
}

TEST(Loader, IterableInProcessReadsEverything) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(3, 7), Opts(3, 0)));
  std::vector<Batch> got = ReadEpoch(*dl);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].shape, (V{3}));
  EXPECT_EQ(got[1].shape, (V{1}));
  EXPECT_EQ(got[0].data()[0], 3);
  EXPECT_EQ(got[0].data()[2], 5);
  EXPECT_EQ(got[1].data()[0], 6);
}

}  // namespace
}  // namespace distlab::dataloader
