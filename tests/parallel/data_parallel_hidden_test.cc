// Hidden tests of Lab 4 stage A: data parallelism, naive and bucketed, against single-process training.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/data_parallel.h"
#include "reference/base/status.h"
#include "reference/tensor/memory.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "tests/parallel/harness.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

using testing::Flatten;
using testing::RankBatch;
using testing::TrainDense;

constexpr float kTol = 2e-5f;  // the reduction order differs from the dense sum: not bit-exact

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > kTol * (1.f + std::fabs(want[i])) && ++bad <= 5) {
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs single-process " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(AssignBucketsHidden, CutsAndOversizedParameters) {
  EXPECT_EQ(AssignBuckets({8, 8, 8}, 16), (std::vector<std::vector<int>>{{2, 1}, {0}}));
  EXPECT_EQ(AssignBuckets({4, 100, 4}, 16), (std::vector<std::vector<int>>{{2}, {1}, {0}}));
  EXPECT_EQ(AssignBuckets({4, 4, 4}, 1000), (std::vector<std::vector<int>>{{2, 1, 0}}));
  EXPECT_TRUE(AssignBuckets({}, 16).empty());
}

TEST(NaiveDataParallelHidden, AveragedGradientEqualsFullBatchGradient) {
  const nn::TinyLMConfig cfg{16, 8, 16, 2, true, 4};
  nn::TinyLM dense(cfg);
  dense.ZeroGrad();
  dense.Forward(nn::SyntheticBatch(cfg.vocab, 3, 0, 16));
  dense.Backward();
  std::vector<float> want;
  for (nn::Parameter* p : dense.Parameters()) {
    const auto v = p->grad.ToVector();
    want.insert(want.end(), v.begin(), v.end());
  }
  std::vector<std::vector<float>> got(4);
  auto st = comm::RunRanks(4, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    model.ZeroGrad();
    model.Forward(RankBatch(cfg, 3, 0, 16, rank, 4));
    model.Backward();
    RETURN_IF_ERROR(AllReduceGradientsNaive(comm, stream, model.Parameters()));
    for (nn::Parameter* p : model.Parameters()) {
      const auto v = p->grad.ToVector();
      got[rank].insert(got[rank].end(), v.begin(), v.end());
    }
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
  for (int r = 0; r < 4; ++r) ExpectClose(got[r], want, "averaged gradient");
}

TEST(NaiveDataParallelHidden, OneRankIsANoOp) {
  auto st = comm::RunRanks(1, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Parameter p("p", {3});
    p.grad.Set(1, 5.f);
    RETURN_IF_ERROR(AllReduceGradientsNaive(comm, stream, {&p}));
    EXPECT_EQ(p.grad.Get(1), 5.f);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// Bucketed DDP with AdamW over 5 steps on 4 ranks, tied embeddings, several buckets: equal to one process.
void RunBucketedEquivalence(size_t bucket_bytes) {
  const nn::TinyLMConfig cfg{16, 8, 32, 2, /*tie_embeddings=*/true, 5};
  nn::AdamWConfig adam;
  adam.lr = 1e-2f;
  const std::vector<float> want = TrainDense(cfg, 5, 16, 7, adam);
  std::vector<std::vector<float>> got(4);
  auto st = comm::RunRanks(4, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, model.Parameters(), bucket_bytes));
    nn::AdamW opt(model.Parameters(), adam);
    for (int step = 0; step < 5; ++step) {
      model.ZeroGrad();
      ddp->BeginStep();
      model.Forward(RankBatch(cfg, 7, step, 16, rank, 4));
      model.Backward();
      RETURN_IF_ERROR(ddp->FinishGradientSync());
      opt.Step();
    }
    got[rank] = Flatten(model);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
  for (int r = 0; r < 4; ++r) ExpectClose(got[r], want, "bucketed DDP parameters");
}

TEST(BucketedDataParallelHidden, EqualsSingleProcessWithSmallBuckets) { RunBucketedEquivalence(600); }

TEST(BucketedDataParallelHidden, EqualsSingleProcessWithOneBucket) { RunBucketedEquivalence(1 << 20); }

TEST(BucketedDataParallelHidden, BucketsFollowReverseParameterOrder) {
  auto st = comm::RunRanks(2, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model({16, 8, 32, 2, true, 5});
    // Parameters: 0 embed (512 B), then per block fc1.w (1024), fc1.b (128), fc2.w (1024), fc2.b (32).
    // Walking 8 -> 0 with 1100-byte buckets:
    //   {8, 7} = 32 + 1024 | {6} = 128 (+1024 > 1100) | {5, 4} = 1024 + 32 | {3} | {2} | {1} | {0}
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, model.Parameters(), 1100));
    const std::vector<std::vector<int>> want = {{8, 7}, {6}, {5, 4}, {3}, {2}, {1}, {0}};
    EXPECT_EQ(ddp->buckets(), want);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

TEST(BucketedDataParallelHidden, TiedWeightListedTwiceIsOneGradient) {
  auto st = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Embedding emb("embed", 6, 4, 1);
    // The embedding and the output projection both list the same Parameter.
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, {&emb.weight(), &emb.weight()}, 8));
    EXPECT_EQ(ddp->parameters().size(), 1u);
    emb.weight().ZeroGrad();
    ddp->BeginStep();
    tensor::Tensor dlogits({2, 6});
    tensor::Fill(dlogits, rank == 0 ? 1.f : 3.f);
    tensor::Tensor h = emb.Forward({1, 2});
    emb.Project(h);
    emb.Backward(emb.ProjectBackward(dlogits));
    RETURN_IF_ERROR(ddp->FinishGradientSync());
    EXPECT_EQ(ddp->launched().size(), 1u);
    // Expected: the mean over the ranks of each rank's own two-use gradient (fills 1 and 3).
    tensor::Tensor mean({6, 4});
    for (float fill : {1.f, 3.f}) {
      nn::Embedding e("embed", 6, 4, 1);
      tensor::Tensor d({2, 6});
      tensor::Fill(d, fill);
      e.Project(e.Forward({1, 2}));
      e.Backward(e.ProjectBackward(d));
      tensor::Axpy(0.5f, e.weight().grad, mean);
    }
    EXPECT_LT(tensor::MaxAbsDiff(emb.weight().grad, mean), 1e-5f);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// Overlap: the buckets of the last block are enqueued (the comm counts the calls) before the first
// block's backward runs, i.e. before backward ends.
TEST(BucketedDataParallelHidden, AllReducesAreEnqueuedBeforeBackwardEnds) {
  auto st = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Mlp b0("b0", 8, 16, 1), b1("b1", 8, 16, 2);
    std::vector<nn::Parameter*> params = b0.Parameters();
    for (nn::Parameter* p : b1.Parameters()) params.push_back(p);
    // fc2.w + fc2.b of a block = 512 + 32 bytes: one bucket per Linear.
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, params, 600));
    nn::ZeroGrads(params);
    ddp->BeginStep();
    comm.ResetStats();
    tensor::Tensor x({4, 8});
    tensor::FillNormal(x, 10 + rank, 1.f);
    tensor::Tensor y = b1.Forward(b0.Forward(x));
    tensor::Tensor dy = b1.Backward(y);
    EXPECT_EQ(comm.stats().collective_calls, 2u) << "b1's two buckets, launched before b0's backward";
    EXPECT_EQ(ddp->launched(), (std::vector<int>{0, 1}));
    b0.Backward(dy);
    EXPECT_EQ(comm.stats().collective_calls, 4u);
    RETURN_IF_ERROR(ddp->FinishGradientSync());
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

TEST(BucketedDataParallelHidden, FinishBeforeBackwardIsAnError) {
  auto st = comm::RunRanks(2, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Linear lin("lin", 4, 4, true, 1);
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, lin.Parameters(), 1 << 20));
    nn::ZeroGrads(lin.Parameters());
    ddp->BeginStep();
    const absl::Status s = ddp->FinishGradientSync();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_FALSE(BucketedDataParallel::Create(comm, stream, lin.Parameters(), 0).ok());
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

// data_parallel.h: the lowest bucket that did not launch, named by its first parameter (the first one
// AssignBuckets put in it), with the count of its gradients not ready. Buckets of 80 bytes over three 4 x 4
// layers with bias: {l2.bias, l2.weight}, {l1.bias, l1.weight}, {l0.bias, l0.weight}.
TEST(BucketedDataParallelHidden, FinishBeforeBackwardNamesTheBucket) {
  for (int layers_run : {1, 2}) {
    auto st = comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
      nn::Linear l0("l0", 4, 4, true, 1), l1("l1", 4, 4, true, 2), l2("l2", 4, 4, true, 3);
      std::vector<nn::Parameter*> params = {&l0.weight(), l0.bias(),    &l1.weight(),
                                            l1.bias(),    &l2.weight(), l2.bias()};
      ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, params, 80));
      nn::ZeroGrads(params);
      ddp->BeginStep();
      tensor::Tensor x({2, 4});
      tensor::Fill(x, 0.5f + rank);
      if (layers_run == 1) {
        l2.Backward(l2.Forward(x));
      } else {
        tensor::Tensor dy = l2.Backward(l2.Forward(l1.Forward(x)));
        l1.Backward(dy);
      }
      const absl::Status s = ddp->FinishGradientSync();
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      const std::string want =
          layers_run == 1 ? "bucket 1 (first parameter 'l1.bias') never launched: 2 of its gradients are not "
                            "ready; call FinishGradientSync after backward"
                          : "bucket 2 (first parameter 'l0.bias') never launched: 2 of its gradients are not "
                            "ready; call FinishGradientSync after backward";
      EXPECT_EQ(s.message(), want);
      return stream.Synchronize();  // the launched buckets' all-reduces end before ddp goes
    });
    ASSERT_OK(comm::FirstError(st));
  }
}

TEST(BucketedDataParallelHidden, BucketBuffersAreCommunicationMemory) {
  auto st = comm::RunRanks(2, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model({16, 8, 32, 1, true, 5});
    const size_t psi = nn::CountParameters(model.Parameters());
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, model.Parameters(), 700));
    EXPECT_EQ(tracker.current(tensor::MemCategory::kCommBuffers), 4 * psi);
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st));
}

}  // namespace
}  // namespace distlab::parallel
