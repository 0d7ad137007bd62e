// Public tests, Lab 2 stage B (they fork: tagged "fork").
#include "labs/dataloader/loader.h"

#include <chrono>
#include <map>
#include <thread>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using V = std::vector<int64_t>;

class Iota : public MapDataset {
 public:
  int64_t size() const override { return 10; }
  Sample Get(int64_t i) const override { return Sample{{}, {static_cast<float>(i)}}; }
};

// 2 workers, batch 3, prefetch 2: tasks 0..3 go out at once, round robin.
//   worker 0: task 0 [0 1 2], task 2 [6 7 8]
//   worker 1: task 1 [3 4 5], task 3 [9]
// Whatever finishes first, Next() hands out task 0, 1, 2, 3.
TEST(Loader, TwoWorkersInOrder) {
  LoaderOptions o;
  o.batch_size = 3;
  o.num_workers = 2;
  o.timeout_s = 20;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Iota>(), o));
  ASSERT_OK(dl->StartEpoch());
  const V want[4] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
  for (int k = 0; k < 4; ++k) {
    Batch b;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
    ASSERT_TRUE(more);
    EXPECT_EQ(b.indices, want[k]);
    EXPECT_EQ(b.worker_id, k % 2);
    EXPECT_EQ(b.data()[0], static_cast<float>(want[k][0]));
  }
  Batch b;
  ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
  EXPECT_FALSE(more);
}

// RangeDataset(3, 7) with 2 workers: worker 0 reads [3, 5), worker 1 reads [5, 7).
TEST(Loader, IterableSharding) {
  LoaderOptions o;
  o.num_workers = 2;
  o.timeout_s = 20;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<RangeDataset>(3, 7), o));
  ASSERT_OK(dl->StartEpoch());
  std::map<int, V> by_worker;
  for (;;) {
    Batch b;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
    if (!more) break;
    by_worker[b.worker_id].push_back(static_cast<int64_t>(b.data()[0]));
  }
  EXPECT_EQ(by_worker[0], (V{3, 4}));
  EXPECT_EQ(by_worker[1], (V{5, 6}));
}

// ShardRange: contiguous shards of per = ceil((end - start) / W) elements, the last ones short or empty.
//   [0, 7), W = 3: per = 3   w0 [0, 3)   w1 [3, 6)   w2 [6, 7)   (short)
//   [0, 2), W = 3: per = 1   w0 [0, 1)   w1 [1, 2)   w2 [2, 2)   (empty: lo == hi, at the end)
//   [3, 7), W = 2: per = 2   w0 [3, 5)   w1 [5, 7)
TEST(ShardRange, WorkedExample) {
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(ShardRange(0, 7, 0, 3), P(0, 3));
  EXPECT_EQ(ShardRange(0, 7, 1, 3), P(3, 6));
  EXPECT_EQ(ShardRange(0, 7, 2, 3), P(6, 7));
  EXPECT_EQ(ShardRange(0, 2, 1, 3), P(1, 2));
  EXPECT_EQ(ShardRange(0, 2, 2, 3), P(2, 2));
  EXPECT_EQ(ShardRange(3, 7, 1, 2), P(5, 7));
}

// Worker 0's shard holds 1 sample (a0 = 0), worker 1's holds 5 (b0..b4 = 100..104); batch 1, prefetch 1.
// Worker 0 runs dry first; worker 1 goes on alone:
//   task 0 -> w0: a0    task 1 -> w1: b0    task 2 -> w0: exhausted (no more tasks for w0)
//   task 3 -> w1: b1    task 4 -> w1: b2  ...              delivered in order: a0 b0 b1 b2 b3 b4
class UnevenShards : public IterableDataset {
 public:
  std::unique_ptr<SampleStream> Open() const override {
    const WorkerInfo* w = GetWorkerInfo();
    return std::make_unique<Stream>(w == nullptr ? 6 : (w->id == 0 ? 1 : 5), w == nullptr ? 0 : 100 * w->id);
  }

 private:
  struct Stream : SampleStream {
    Stream(int n, int base) : left(n), next(base) {}
    bool Next(Sample* out) override {
      if (left-- <= 0) return false;
      *out = Sample{{}, {static_cast<float>(next++)}};
      return true;
    }
    int left, next;
  };
};

TEST(Loader, IterableGoesOnAfterOneWorkerRunsDry) {
  LoaderOptions o;
  o.num_workers = 2;
  o.prefetch_factor = 1;
  o.timeout_s = 20;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<UnevenShards>(), o));
  ASSERT_OK(dl->StartEpoch());
  V got;
  for (int guard = 0; guard < 20; ++guard) {
    Batch b;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
    if (!more) break;
    got.push_back(static_cast<int64_t>(b.data()[0]));
  }
  EXPECT_EQ(got, (V{0, 100, 101, 102, 103, 104}));
}

class Slow : public MapDataset {
 public:
  int64_t size() const override { return 2; }
  Sample Get(int64_t i) const override {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return Sample{{}, {static_cast<float>(i)}};
  }
};

// T is written as absl::StrCat writes a double: "0.125", "0.5" (not "0.125000", "0.1", "0.50").
TEST(Loader, TimeoutMessageWritesTheSecondsShortest) {
  for (double t : {0.125, 0.5}) {
    LoaderOptions o;
    o.num_workers = 1;
    o.timeout_s = t;
    o.shutdown_timeout_s = 0.1;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Slow>(), o));
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    auto r = dl->Next(&b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(std::string(r.status().message()), t == 0.125 ? "DataLoader timed out after 0.125 seconds"
                                                            : "DataLoader timed out after 0.5 seconds");
  }
}

}  // namespace
}  // namespace distlab::dataloader
