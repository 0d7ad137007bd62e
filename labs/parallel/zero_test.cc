// Public tests of Lab 4 stage C (ZeRO).
#include "labs/parallel/zero.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/tensor/memory.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

TEST(Sharding, CeilingShards) {
  // 10 elements over 4 ranks: shards of 3, padded to 12:  [0 1 2 | 3 4 5 | 6 7 8 | 9 - -]
  EXPECT_EQ(ShardSize(10, 4), 3);
  EXPECT_EQ(ShardOffset(10, 3, 4), 9);
}

TEST(Zero1, ShardsOptimizerStateOnly) {
  // Untied TinyLM, units of 512, 2128, 2128, 512 parameters: all divisible by 2.
  const nn::TinyLMConfig cfg{32, 16, 64, 2, /*tie_embeddings=*/false, 1};
  auto statuses = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model(cfg);
    const size_t psi = nn::CountParameters(model.Parameters());
    auto trainer = ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero1, {});
    if (!trainer.ok()) return trainer.status();
    auto loss = (*trainer)->Step(nn::Slice(nn::SyntheticBatch(cfg.vocab, 1, 0, 8), 4 * rank, 4 * rank + 4));
    if (!loss.ok()) return loss.status();
    // Z1 in f32: 4 Psi parameters + 4 Psi gradients + 8 Psi / n optimizer state.
    EXPECT_EQ(tracker.current(tensor::MemCategory::kParameters), 4 * psi);
    EXPECT_EQ(tracker.current(tensor::MemCategory::kGradients), 4 * psi);
    EXPECT_EQ(tracker.current(tensor::MemCategory::kOptimizerState), 8 * psi / 2);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(statuses));
}

TEST(Zero2, ReduceScattersDuringBackwardAndNeverHoldsAllGradients) {
  // Units 512 | 2128 | 2128 | 512 parameters (embedding, block 0, block 1, head), n = 2. Backward walks
  // them from the head down; each unit's reduce-scatter is launched as soon as its gradients are final:
  //   B 3, RS 3, B 2, RS 2, B 1, RS 1, B 0, RS 0
  // so the gradient bytes peak at the shards (4 Psi / 2) plus one block's full gradients (4 * 2128),
  // never at 4 Psi.
  const nn::TinyLMConfig cfg{32, 16, 64, 2, /*tie_embeddings=*/false, 1};
  auto statuses = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model(cfg);
    const size_t psi = nn::CountParameters(model.Parameters());
    auto trainer = ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero2, {});
    if (!trainer.ok()) return trainer.status();
    tracker.ResetPeak();
    auto loss = (*trainer)->Step(nn::Slice(nn::SyntheticBatch(cfg.vocab, 1, 0, 8), 4 * rank, 4 * rank + 4));
    if (!loss.ok()) return loss.status();
    const std::vector<std::string> want = {"B 3", "RS 3", "B 2", "RS 2", "B 1", "RS 1", "B 0", "RS 0"};
    EXPECT_EQ((*trainer)->trace(), want);
    EXPECT_EQ(tracker.peak(tensor::MemCategory::kGradients), 4 * psi / 2 + 4 * 2128);
    EXPECT_EQ(tracker.current(tensor::MemCategory::kGradients), 4 * psi / 2);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(statuses));
}

// ZeRO-3 untied, L = 2 (units 0..3, the head is unit 3): every unit is freed after its forward -- the head
// too -- and gathered again for backward; the next unit's gather is launched before this one computes.
TEST(Zero3, UntiedScheduleFreesAndRegathersTheHead) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, /*tie_embeddings=*/false, 1};
  auto statuses = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    auto trainer = ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero3, {});
    if (!trainer.ok()) return trainer.status();
    auto loss = (*trainer)->Step(nn::Slice(nn::SyntheticBatch(cfg.vocab, 1, 0, 8), 4 * rank, 4 * rank + 4));
    if (!loss.ok()) return loss.status();
    const std::vector<std::string> want = {"AG 0", "AG 1", "F 0",    "free 0", "AG 2",   "F 1",  "free 1",
                                           "AG 3", "F 2",  "free 2", "F 3",    "free 3", "AG 3", "AG 2",
                                           "B 3",  "RS 3", "free 3", "AG 1",   "B 2",    "RS 2", "free 2",
                                           "AG 0", "B 1",  "RS 1",   "free 1", "B 0",    "RS 0", "free 0"};
    EXPECT_EQ((*trainer)->trace(), want);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::parallel
