// Public tests, Lab 2 stage B (they fork: tagged "fork").
#include "labs/dataloader/loader.h"

#include <map>

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

}  // namespace
}  // namespace distlab::dataloader
