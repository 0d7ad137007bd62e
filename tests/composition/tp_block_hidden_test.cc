// Hidden tests of Lab 7 stage B: the tensor-parallel GPT block against the dense nn::GptBlock.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/tp_block.h"
#include "tests/composition/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using tensor::Tensor;
using testing::MaxDiff;
using testing::ShardOf;

struct Dense {
  explicit Dense(const nn::GptConfig& cfg, int64_t rows) : block("blocks.1", cfg), x({rows, cfg.hidden}) {
    testing::Perturb(block.Parameters());
    tensor::FillNormal(x, 11, 1.f);
    dy = Tensor({rows, cfg.hidden});
    tensor::FillNormal(dy, 12, 1.f);
    nn::BlockCache cache;
    y = block.Forward(x, &cache);
    dx = block.Backward(dy, &cache);
  }
  nn::GptBlock block;
  Tensor x, dy, y, dx;
};

// y, dx and every gradient shard of t ranks against the dense block (values to 1e-5: only the order of
// the sums differs).
void ExpectEqualsDense(const nn::GptConfig& cfg, int t, bool backward) {
  Dense d(cfg, 2 * cfg.seq);
  const std::vector<nn::Parameter*> dense = d.block.Parameters();
  auto statuses = comm::RunRanks(
      t,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x, &c);
        if (!y.ok()) return y.status();
        EXPECT_LT(tensor::MaxAbsDiff(*y, d.y), 1e-5f) << "y on rank " << rank << " of " << t;
        if (!backward) return absl::OkStatus();
        auto dx = (*block)->Backward(d.dy, &c);
        if (!dx.ok()) return dx.status();
        EXPECT_LT(tensor::MaxAbsDiff(*dx, d.dx), 1e-5f) << "dx on rank " << rank << " of " << t;
        const auto local = (*block)->Parameters();
        const auto names = (*block)->ParameterNames();
        if (local.size() != dense.size()) return absl::InternalError("wrong parameter count");
        for (size_t i = 0; i < local.size(); ++i) {
          EXPECT_EQ(names[i], dense[i]->name());
          EXPECT_LT(MaxDiff(local[i]->value.ToVector(), ShardOf(names[i], dense[i]->value, rank, t)), 1e-7f)
              << names[i] << " on rank " << rank << " of " << t;
          EXPECT_LT(MaxDiff(local[i]->grad.ToVector(), ShardOf(names[i], dense[i]->grad, rank, t)), 1e-5f)
              << "grad of " << names[i] << " on rank " << rank << " of " << t;
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

TEST(TpBlockHidden, ForwardEqualsDenseOnTwoRanks) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlockForward);
  ExpectEqualsDense(nn::GptConfig{}, 2, false);
}

TEST(TpBlockHidden, ForwardEqualsDenseOnFourRanks) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlockForward);
  nn::GptConfig cfg;
  cfg.heads = 4;  // one head per rank, d = 8
  ExpectEqualsDense(cfg, 4, false);
}

TEST(TpBlockHidden, BlockEqualsDenseForwardAndBackward) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  for (int t : {2, 4, 8}) {
    SCOPED_TRACE("t = " + std::to_string(t));
    ExpectEqualsDense(nn::GptConfig{}, t, true);
  }
}

// Per block and micro-batch: 2 all-reduces forward, 2 backward, each of N h floats, nothing else.
TEST(TpBlockHidden, TwoAllReducesEachWay) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, 3 * cfg.seq);
  const uint64_t s = 3 * cfg.seq * cfg.hidden * 4;
  auto statuses = comm::RunRanks(
      4,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        tp.ResetStats();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x, &c);
        if (!y.ok()) return y.status();
        comm::Stats st = tp.stats();
        EXPECT_EQ(st.collective_calls, 2u) << "forward";
        EXPECT_EQ(st.collective_bytes, 2 * s) << "forward";
        auto dx = (*block)->Backward(d.dy, &c);
        if (!dx.ok()) return dx.status();
        st = tp.stats();
        EXPECT_EQ(st.collective_calls, 4u) << "forward + backward";
        EXPECT_EQ(st.collective_bytes, 4 * s) << "forward + backward";
        EXPECT_EQ(st.sends + st.recvs, 0u);
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// F0 F1 B1 B0 with two caches gives the gradients of F0 B0 F1 B1 (to 1e-6) and each backward its own dx.
TEST(TpBlockHidden, MicroBatchesInFlight) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  const nn::GptConfig cfg;
  Dense d0(cfg, cfg.seq);
  nn::GptBlock dense("blocks.1", cfg);
  testing::Perturb(dense.Parameters());
  Tensor x1({2 * cfg.seq, cfg.hidden}), dy1({2 * cfg.seq, cfg.hidden});
  tensor::FillNormal(x1, 21, 1.f);
  tensor::FillNormal(dy1, 22, 1.f);
  nn::BlockCache c;
  dense.Forward(d0.x, &c);
  const Tensor want_dx0 = dense.Backward(d0.dy, &c);
  dense.Forward(x1, &c);
  const Tensor want_dx1 = dense.Backward(dy1, &c);
  const auto want = dense.Parameters();
  auto statuses = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d0.block);
        if (!block.ok()) return block.status();
        nn::BlockCache c0, c1;
        for (auto [x, cache] : {std::pair{&d0.x, &c0}, std::pair{&x1, &c1}}) {
          if (auto y = (*block)->Forward(*x, cache); !y.ok()) return y.status();
        }
        auto dx1 = (*block)->Backward(dy1, &c1);
        if (!dx1.ok()) return dx1.status();
        auto dx0 = (*block)->Backward(d0.dy, &c0);
        if (!dx0.ok()) return dx0.status();
        EXPECT_LT(tensor::MaxAbsDiff(*dx0, want_dx0), 1e-5f);
        EXPECT_LT(tensor::MaxAbsDiff(*dx1, want_dx1), 1e-5f);
        const auto local = (*block)->Parameters();
        for (size_t i = 0; i < local.size(); ++i) {
          EXPECT_LT(MaxDiff(local[i]->grad.ToVector(), ShardOf(want[i]->name(), want[i]->grad, rank, 2)),
                    1e-5f)
              << "grad of " << want[i]->name();
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// Each rank caches only its shard: 4 N [(4h + 2) + (4h + 2f + a s) / t] bytes, all of it released by
// Backward.
TEST(TpBlockHidden, ShardedCacheBytes) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, 2 * cfg.seq);
  auto statuses = comm::RunRanks(
      4,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        tensor::MemoryTracker tracker;
        tensor::ScopedMemoryTracker scope(&tracker);
        auto block = TensorParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x, &c);
        if (!y.ok()) return y.status();
        EXPECT_EQ(c.bytes(), nn::BlockCacheBytes(cfg, 2 * cfg.seq, 4));
        EXPECT_EQ(c.bytes(), static_cast<size_t>(4 * 16 * (130 + 448 / 4)));
        EXPECT_EQ(tracker.current(tensor::MemCategory::kActivations), c.bytes() + y->bytes())
            << "nothing else stays allocated after Forward";
        auto dx = (*block)->Backward(d.dy, &c);
        if (!dx.ok()) return dx.status();
        EXPECT_EQ(c.bytes(), 0u) << "Backward releases the cache";
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

TEST(TpBlockHidden, OneRankIsDenseAndSilent) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, cfg.seq);
  auto statuses = comm::RunRanks(
      1,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        EXPECT_EQ((*block)->local_heads(), 8);
        tp.ResetStats();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x, &c);
        if (!y.ok()) return y.status();
        auto dx = (*block)->Backward(d.dy, &c);
        if (!dx.ok()) return dx.status();
        EXPECT_LT(tensor::MaxAbsDiff(*y, d.y), 1e-6f);
        EXPECT_LT(tensor::MaxAbsDiff(*dx, d.dx), 1e-6f);
        EXPECT_EQ(tp.stats().collective_calls, 0u) << "no collective on a one-rank comm";
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

TEST(TpBlockHidden, IndivisibleHeadsAreAnError) {
  const nn::GptConfig cfg;
  nn::GptBlock dense("blocks.0", cfg);
  auto statuses = comm::RunRanks(
      3,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, dense);
        EXPECT_EQ(block.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(block.status().message(), "8 heads are not divisible by 3 tp ranks");
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::composition
