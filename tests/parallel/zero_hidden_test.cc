// Hidden tests of Lab 4 stage C: ZeRO-1/2/3 against single-process AdamW, memory per rank against the
// byte model, communication per step against the volume formulas, and the FSDP gather/free schedule.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/zero.h"
#include "reference/base/status.h"
#include "reference/tensor/memory.h"
#include "tests/parallel/harness.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

using tensor::MemCategory;
using testing::RankBatch;
using testing::TrainDense;

TEST(ShardingHidden, SizesAndOffsets) {
  EXPECT_EQ(ShardSize(12, 4), 3);
  EXPECT_EQ(ShardSize(13, 4), 4);
  EXPECT_EQ(ShardSize(3, 4), 1);
  EXPECT_EQ(ShardOffset(13, 2, 4), 8);
  EXPECT_EQ(ShardOffset(12, 3, 4), 9);
}

// 10 steps of AdamW on 4 ranks (global batch 16) against one process; unit sizes 186, 136, 136, 186 are
// not multiples of 4, so the padding is exercised.
// Tied: the embedding (186) is also the projection, units 186, 136, 136.
void CheckEqualsSingleProcess(ZeroStage stage, bool tied = false) {
  const nn::TinyLMConfig cfg{/*vocab=*/31, /*hidden=*/6, /*inner=*/10,
                             /*layers=*/2, tied,         /*seed=*/8};
  nn::AdamWConfig adam;
  adam.lr = 1e-2f;
  const std::vector<float> want = TrainDense(cfg, 10, 16, 5, adam);
  std::vector<std::vector<float>> got(4);
  auto st = comm::RunRanks(4, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, stage, adam));
    for (int step = 0; step < 10; ++step) {
      ASSIGN_OR_RETURN(float loss, trainer->Step(RankBatch(cfg, 5, step, 16, rank, 4)));
      (void)loss;
    }
    ASSIGN_OR_RETURN(got[rank], trainer->FullParameters());
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(got[r].size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::fabs(got[r][i] - want[i]) > 1e-4f * (1.f + std::fabs(want[i])) && ++bad <= 5) {
        ADD_FAILURE() << "rank " << r << " parameter " << i << ": " << got[r][i] << " vs " << want[i];
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(ZeroHidden, Zero1EqualsSingleProcessAdamW) { CheckEqualsSingleProcess(ZeroStage::kZero1); }
TEST(ZeroHidden, Zero2EqualsSingleProcessAdamW) { CheckEqualsSingleProcess(ZeroStage::kZero2); }
TEST(ZeroHidden, Zero3EqualsSingleProcessAdamW) { CheckEqualsSingleProcess(ZeroStage::kZero3); }
TEST(ZeroHidden, Zero2TiedEmbeddingsEqualSingleProcessAdamW) {
  CheckEqualsSingleProcess(ZeroStage::kZero2, true);
}
TEST(ZeroHidden, Zero3TiedEmbeddingsEqualSingleProcessAdamW) {
  CheckEqualsSingleProcess(ZeroStage::kZero3, true);
}

// Memory per rank after a step, measured by the tracker, against the f32 byte model (zero.h):
//   Z1: 4 Psi + 4 Psi + 8 Psi/n;  Z2: 4 Psi + 4 Psi/n + 8 Psi/n;  Z3: 4 Psi/n + 4 Psi/n + 8 Psi/n.
// Communication payload per step (Stats.collective_bytes, S summed): Z1, Z2: RS + AG of 4 Psi bytes each
// (ring wire bytes 2 Psi (n-1)/n floats); Z3: AG forward + AG backward + RS (3 Psi (n-1)/n floats).
// Units of 512, 2128, 2128, 512 parameters divide by n = 4: no padding, so the formulas are exact.
void CheckMemoryAndVolume(ZeroStage stage) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, false, 1};
  const int n = 4;
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model(cfg);
    const uint64_t psi = nn::CountParameters(model.Parameters());
    EXPECT_EQ(psi, 512u + 2 * 2128u + 512u);
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, stage, {}));
    for (int step = 0; step < 2; ++step) {
      comm.ResetStats();
      ASSIGN_OR_RETURN(float loss, trainer->Step(RankBatch(cfg, 1, step, 16, rank, n)));
      (void)loss;
    }
    const int z = static_cast<int>(stage);
    const uint64_t params = z >= 3 ? 4 * psi / n : 4 * psi;
    const uint64_t grads = z >= 2 ? 4 * psi / n : 4 * psi;
    EXPECT_EQ(tracker.current(MemCategory::kParameters), params) << "ZeRO-" << z;
    EXPECT_EQ(tracker.current(MemCategory::kGradients), grads) << "ZeRO-" << z;
    EXPECT_EQ(tracker.current(MemCategory::kOptimizerState), 8 * psi / n) << "ZeRO-" << z;
    EXPECT_EQ(tracker.current(MemCategory::kCommBuffers), 0u) << "ZeRO-" << z;
    EXPECT_EQ(tracker.current(MemCategory::kActivations), 0u) << "ZeRO-" << z;
    const uint64_t collectives = z >= 3 ? 3 : 2;
    EXPECT_EQ(comm.stats().collective_bytes, collectives * 4 * psi) << "ZeRO-" << z;
    if (z == 3) {
      // Z3's parameters never sit in memory all at once: at most two units (this one and the prefetched
      // one) beyond the shards. The largest unit is a block of 2128.
      EXPECT_LE(tracker.peak(MemCategory::kParameters), 4 * psi / n + 2 * 4 * 2128u);
    }
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

TEST(ZeroHidden, Zero1MemoryAndVolumeMatchTheFormulas) { CheckMemoryAndVolume(ZeroStage::kZero1); }
TEST(ZeroHidden, Zero2MemoryAndVolumeMatchTheFormulas) { CheckMemoryAndVolume(ZeroStage::kZero2); }
TEST(ZeroHidden, Zero3MemoryAndVolumeMatchTheFormulas) { CheckMemoryAndVolume(ZeroStage::kZero3); }

// The FSDP schedule: gather u+1 before computing u (prefetch), free u right after it ran.
TEST(ZeroHidden, Zero3PrefetchesTheNextUnit) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, false, 1};
  auto st = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero3, {}));
    ASSIGN_OR_RETURN(float loss, trainer->Step(RankBatch(cfg, 1, 0, 8, rank, 2)));
    (void)loss;
    const std::vector<std::string> want = {"AG 0", "AG 1", "F 0",    "free 0", "AG 2",   "F 1",  "free 1",
                                           "AG 3", "F 2",  "free 2", "F 3",    "free 3", "AG 3", "AG 2",
                                           "B 3",  "RS 3", "free 3", "AG 1",   "B 2",    "RS 2", "free 2",
                                           "AG 0", "B 1",  "RS 1",   "free 1", "B 0",    "RS 0", "free 0"};
    EXPECT_EQ(trainer->trace(), want);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// ZeRO-2 overlaps like bucketed DDP: each unit's reduce-scatter is launched from the gradient-ready hook,
// during backward. Observers installed before Create run after the trainer's hook (zero.h), so when the
// head's gradient is final its unit's reduce-scatter has been enqueued (1 call), and when the embedding's
// -- the last gradient of backward -- is final, all four have (the comm counts calls at enqueue).
// After the step: 4 reduce-scatters + 4 all-gathers.
TEST(ZeroHidden, Zero2ReduceScattersDuringBackward) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, false, 1};
  auto st = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    uint64_t at_head = 0, at_embedding = 0;
    model.head()->weight().on_grad_ready = [&](nn::Parameter&) { at_head = comm.stats().collective_calls; };
    model.embedding().weight().on_grad_ready = [&](nn::Parameter&) {
      at_embedding = comm.stats().collective_calls;
    };
    {
      ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero2, {}));
      comm.ResetStats();
      ASSIGN_OR_RETURN(float loss, trainer->Step(RankBatch(cfg, 1, 0, 8, rank, 2)));
      (void)loss;
      EXPECT_EQ(at_head, 1u) << "the head's reduce-scatter, launched when its gradient was final";
      EXPECT_EQ(at_embedding, 4u) << "every unit's reduce-scatter enqueued before backward ended";
      EXPECT_EQ(comm.stats().collective_calls, 8u);
      const std::vector<std::string> want = {"B 3", "RS 3", "B 2", "RS 2", "B 1", "RS 1", "B 0", "RS 0"};
      EXPECT_EQ(trainer->trace(), want);
    }
    // The trainer gave the observers back.
    EXPECT_TRUE(static_cast<bool>(model.embedding().weight().on_grad_ready));
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// ZeRO-2's gradient memory never holds the full gradients: during backward only the shards (4 Psi/n) and
// the unit being computed (at most a block, 4 * 2128 B) exist; the flat buffers of at most two buckets are
// in flight. Measured by the tracker's peaks over a step (reset after Create).
TEST(ZeroHidden, Zero2PeakGradientsStayBelowTheFullGradients) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, false, 1};
  const int n = 4;
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model(cfg);
    const uint64_t psi = nn::CountParameters(model.Parameters());
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero2, {}));
    for (int step = 0; step < 2; ++step) {
      tracker.ResetPeak();
      ASSIGN_OR_RETURN(float loss, trainer->Step(RankBatch(cfg, 1, step, 16, rank, n)));
      (void)loss;
      const uint64_t block = 4 * 2128;
      EXPECT_LE(tracker.peak(MemCategory::kGradients), 4 * psi / n + block) << "step " << step;
      EXPECT_LT(tracker.peak(MemCategory::kGradients), 4 * psi) << "step " << step;
      EXPECT_LE(tracker.peak(MemCategory::kCommBuffers), 2 * block) << "step " << step;
      EXPECT_EQ(tracker.current(MemCategory::kGradients), 4 * psi / n);
    }
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// The peaks of ZeRO-2 are equalities for this schedule (notes/04-parallel.md): gradients peak at the
// shards plus the largest unit's full gradients, 4 Psi / n + 4 * 2128 = 5280 + 8512 = 13792 B; buffers
// when the second block is packed while the first block's reduce-scatter is in flight, 2 * 4 n S_u =
// 2 * 4 * 4 * 532 = 17024 B (n = 4).
TEST(ZeroHidden, Zero2PeaksEqualTheFormulas) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, false, 1};
  const int n = 4;
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model(cfg);
    const uint64_t psi = nn::CountParameters(model.Parameters());
    EXPECT_EQ(psi, 5280u);
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero2, {}));
    tracker.ResetPeak();
    ASSIGN_OR_RETURN(float loss, trainer->Step(RankBatch(cfg, 1, 0, 16, rank, n)));
    (void)loss;
    EXPECT_EQ(tracker.peak(MemCategory::kGradients), 13792u);
    EXPECT_EQ(tracker.peak(MemCategory::kCommBuffers), 17024u);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// ZeRO-3 with a tied embedding: unit 0 is gathered once per step and stays until the end of backward;
// its gradient collects the projection's and the lookup's contributions before one reduce-scatter.
// Payload: units 1, 2 gathered twice, unit 0 once, every unit reduce-scattered once = 4 (3 Psi - Psi_0).
TEST(ZeroHidden, Zero3TiedEmbeddingIsGatheredOnceAndReducedOnce) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, /*tie_embeddings=*/true, 1};
  const int n = 4;
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model(cfg);
    const uint64_t psi = nn::CountParameters(model.Parameters());
    EXPECT_EQ(psi, 512u + 2 * 2128u);
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero3, {}));
    comm.ResetStats();
    ASSIGN_OR_RETURN(float loss, trainer->Step(RankBatch(cfg, 1, 0, 16, rank, n)));
    (void)loss;
    const std::vector<std::string> want = {"AG 0",   "AG 1",   "F 0",  "AG 2",   "F 1",  "free 1", "F 2",
                                           "free 2", "F head", "AG 2", "B head", "AG 1", "B 2",    "RS 2",
                                           "free 2", "B 1",    "RS 1", "free 1", "B 0",  "RS 0",   "free 0"};
    EXPECT_EQ(trainer->trace(), want);
    EXPECT_EQ(comm.stats().collective_bytes, 4 * (3 * psi - 512)) << "unit 0 gathered once";
    EXPECT_EQ(tracker.current(MemCategory::kParameters), 4 * psi / n);
    EXPECT_EQ(tracker.current(MemCategory::kGradients), 4 * psi / n);
    EXPECT_EQ(tracker.current(MemCategory::kCommBuffers), 0u);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// Gradient accumulation: 2 micro-batches of 2 rows per rank and step, 4 ranks, 5 steps, against one
// process on the global batch of 16. AdamW's eps is large (0.1) on purpose: with the default 1e-8 the
// update m / (sqrt(v) + eps) hardly depends on the gradient's scale, and a missing 1/k would go unseen.
// Payload of the last step: Z1 reduce-scatters once (RS + AG: 2 x 4 Psi), Z2 once per micro-batch
// ((k + 1) x 4 Psi), Z3 gathers twice and reduce-scatters once per micro-batch (3k x 4 Psi).
void CheckAccumulation(ZeroStage stage) {
  const nn::TinyLMConfig cfg{32, 16, 64, 2, false, 1};
  const int n = 4, k = 2, steps = 5;
  nn::AdamWConfig adam;
  adam.lr = 1e-2f;
  adam.eps = 0.1f;
  const std::vector<float> want = TrainDense(cfg, steps, 16, 5, adam);
  std::vector<std::vector<float>> got(n);
  std::vector<uint64_t> bytes(n);
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, stage, adam));
    for (int step = 0; step < steps; ++step) {
      const nn::Batch rows = RankBatch(cfg, 5, step, 16, rank, n);
      comm.ResetStats();
      ASSIGN_OR_RETURN(float loss, trainer->Step({nn::Slice(rows, 0, 2), nn::Slice(rows, 2, 4)}));
      (void)loss;
    }
    bytes[rank] = comm.stats().collective_bytes;
    ASSIGN_OR_RETURN(got[rank], trainer->FullParameters());
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
  const uint64_t psi = want.size();
  const int z = static_cast<int>(stage);
  const uint64_t collectives = z == 1 ? 2 : z == 2 ? k + 1 : 3 * k;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(bytes[r], collectives * 4 * psi) << "ZeRO-" << z << " rank " << r;
    ASSERT_EQ(got[r].size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::fabs(got[r][i] - want[i]) > 1e-4f * (1.f + std::fabs(want[i])) && ++bad <= 5) {
        ADD_FAILURE() << "ZeRO-" << z << " rank " << r << " parameter " << i << ": " << got[r][i] << " vs "
                      << want[i];
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(ZeroAccumulationHidden, Zero1AccumulatesLocallyAndReducesOnce) { CheckAccumulation(ZeroStage::kZero1); }
TEST(ZeroAccumulationHidden, Zero2ReducesEveryMicroBatchIntoTheShard) {
  CheckAccumulation(ZeroStage::kZero2);
}
TEST(ZeroAccumulationHidden, Zero3ReducesEveryMicroBatchIntoTheShard) {
  CheckAccumulation(ZeroStage::kZero3);
}

TEST(ZeroAccumulationHidden, EmptyOrUnequalMicroBatchesAreErrors) {
  const nn::TinyLMConfig cfg{32, 16, 64, 1, false, 1};
  auto st = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    ASSIGN_OR_RETURN(auto trainer, ZeroTrainer::Create(comm, stream, model, ZeroStage::kZero2, {}));
    EXPECT_EQ(trainer->Step(std::vector<nn::Batch>{}).status().code(), absl::StatusCode::kInvalidArgument);
    const nn::Batch rows = RankBatch(cfg, 1, 0, 8, rank, 2);
    EXPECT_EQ(trainer->Step({nn::Slice(rows, 0, 1), nn::Slice(rows, 1, 4)}).status().code(),
              absl::StatusCode::kInvalidArgument);
    // The trainer still works after refusing.
    ASSIGN_OR_RETURN(float loss, trainer->Step({nn::Slice(rows, 0, 2), nn::Slice(rows, 2, 4)}));
    EXPECT_TRUE(std::isfinite(loss));
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

}  // namespace
}  // namespace distlab::parallel
