// Hidden tests of Lab 7 stage B: the tensor-parallel GPT block against the dense nn::GptBlock. Every case
// draws its block from the grading seed (testing::DrawBlock: heads, inner size, sequence length, the number
// of sequences, the seeds of the weights, norms, x and dy) and, where the name leaves it open, the number of
// tp ranks.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/tp_block.h"
#include "tests/composition/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using tensor::Tensor;
using testing::Again;
using testing::BlockInputs;
using testing::CaseRandom;
using testing::DiffText;
using testing::ShardOf;

constexpr float kTol = 1e-5f;  // relative to the dense values' largest magnitude (at least 1)

struct Dense {
  explicit Dense(const BlockInputs& in) : block("blocks.1", in.cfg), x({in.rows, in.cfg.hidden}) {
    testing::Perturb(block.Parameters(), in.norm_seed);
    tensor::FillNormal(x, in.x_seed, 1.f);
    dy = Tensor({in.rows, in.cfg.hidden});
    tensor::FillNormal(dy, in.dy_seed, 1.f);
    nn::BlockCache cache;
    y = block.Forward(x, &cache);
    dx = block.Backward(dy, &cache);
  }
  nn::GptBlock block;
  Tensor x, dy, y, dx;
};

std::string On(const BlockInputs& in, int rank, int t) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(t) + ", " + in.Label();
}

// y, dx and every gradient shard of t ranks against the dense block (values to 1e-5: only the order of
// the sums differs).
void ExpectEqualsDense(const BlockInputs& in, int t, bool backward) {
  Dense d(in);
  const std::vector<nn::Parameter*> dense = d.block.Parameters();
  const int64_t h = in.cfg.hidden;
  auto statuses = comm::RunRanks(
      t,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x, &c);
        if (!y.ok()) return y.status();
        const std::string on = On(in, rank, t);
        if (const std::string diff = DiffText(y->ToVector(), d.y.ToVector(), kTol, h); !diff.empty()) {
          ADD_FAILURE() << on << ": y differs from the dense block's: " << diff << Again();
        }
        if (!backward) return absl::OkStatus();
        auto dx = (*block)->Backward(d.dy, &c);
        if (!dx.ok()) return dx.status();
        if (const std::string diff = DiffText(dx->ToVector(), d.dx.ToVector(), kTol, h); !diff.empty()) {
          ADD_FAILURE() << on << ": dx differs from the dense block's: " << diff << Again();
        }
        const auto local = (*block)->Parameters();
        const auto names = (*block)->ParameterNames();
        if (local.size() != dense.size() || names.size() != dense.size()) {
          return absl::InternalError(on + ": " + std::to_string(local.size()) +
                                     " parameters, the dense block has " + std::to_string(dense.size()));
        }
        for (size_t i = 0; i < local.size(); ++i) {
          EXPECT_EQ(names[i], dense[i]->name()) << on << Again();
          if (const std::string diff =
                  DiffText(local[i]->value.ToVector(), ShardOf(names[i], dense[i]->value, rank, t), 1e-7f);
              !diff.empty()) {
            ADD_FAILURE() << on << ": " << names[i] << " is not its shard of the dense value: " << diff
                          << Again();
          }
          if (const std::string diff =
                  DiffText(local[i]->grad.ToVector(), ShardOf(names[i], dense[i]->grad, rank, t), kTol);
              !diff.empty()) {
            ADD_FAILURE() << on << ": the gradient of " << names[i]
                          << " is not its shard of the dense gradient: " << diff << Again();
          }
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << t << " ranks, " << in.Label() << Again();
}

TEST(TpBlockHidden, ForwardEqualsDenseOnTwoRanks) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlockForward);
  CaseRandom rng;
  ExpectEqualsDense(testing::DrawBlock(rng, 2), 2, false);
}

TEST(TpBlockHidden, ForwardEqualsDenseOnFourRanks) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlockForward);
  CaseRandom rng;
  ExpectEqualsDense(testing::DrawBlock(rng, 4), 4, false);
}

TEST(TpBlockHidden, BlockEqualsDenseForwardAndBackward) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  CaseRandom rng;
  for (int t : {2, 4, 8}) ExpectEqualsDense(testing::DrawBlock(rng, t), t, true);
}

// Per block and micro-batch: 2 all-reduces forward, 2 backward, each of N h floats, nothing else; on 2, 4
// or 8 ranks.
TEST(TpBlockHidden, TwoAllReducesEachWay) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  CaseRandom rng;
  const int t = rng.Pick(std::vector<int>{2, 4, 8});
  const BlockInputs in = testing::DrawBlock(rng, t);
  Dense d(in);
  const uint64_t s = in.rows * in.cfg.hidden * 4;
  auto statuses = comm::RunRanks(
      t,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        const std::string on = On(in, rank, t) + ": the tp comm after ";
        tp.ResetStats();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x, &c);
        if (!y.ok()) return y.status();
        comm::Stats st = tp.stats();
        EXPECT_EQ(st.collective_calls, 2u) << on << "Forward: collective calls" << Again();
        EXPECT_EQ(st.all_reduce.calls, 2u) << on << "Forward: all-reduces" << Again();
        EXPECT_EQ(st.collective_bytes, 2 * s)
            << on << "Forward: bytes (each all-reduce N h floats)" << Again();
        auto dx = (*block)->Backward(d.dy, &c);
        if (!dx.ok()) return dx.status();
        st = tp.stats();
        EXPECT_EQ(st.collective_calls, 4u) << on << "Forward and Backward: collective calls" << Again();
        EXPECT_EQ(st.all_reduce.calls, 4u) << on << "Forward and Backward: all-reduces" << Again();
        EXPECT_EQ(st.collective_bytes, 4 * s)
            << on << "Forward and Backward: bytes (each all-reduce N h floats)" << Again();
        EXPECT_EQ(st.sends + st.recvs, 0u) << on << "Forward and Backward: sends and receives" << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << t << " ranks, " << in.Label() << Again();
}

// F0 F1 B1 B0 with two caches (micro-batches of drawn sizes) gives the gradients of F0 B0 F1 B1 and each
// backward its own dx; on 2 or 4 ranks.
TEST(TpBlockHidden, MicroBatchesInFlight) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  CaseRandom rng;
  const int t = rng.Pick(std::vector<int>{2, 4});
  const BlockInputs in = testing::DrawBlock(rng, t);
  const int64_t rows1 = in.cfg.seq * rng.Int(1, 3);
  const uint64_t x1_seed = rng.Int(1, 999999), dy1_seed = rng.Int(1, 999999);
  Dense d0(in);
  nn::GptBlock dense("blocks.1", in.cfg);
  testing::Perturb(dense.Parameters(), in.norm_seed);
  Tensor x1({rows1, in.cfg.hidden}), dy1({rows1, in.cfg.hidden});
  tensor::FillNormal(x1, x1_seed, 1.f);
  tensor::FillNormal(dy1, dy1_seed, 1.f);
  nn::BlockCache c;
  dense.Forward(d0.x, &c);
  const Tensor want_dx0 = dense.Backward(d0.dy, &c);
  dense.Forward(x1, &c);
  const Tensor want_dx1 = dense.Backward(dy1, &c);
  const auto want = dense.Parameters();
  const std::string inputs = "micro-batch 0: " + in.Label() + "; micro-batch 1: N " + std::to_string(rows1) +
                             ", seeds x " + std::to_string(x1_seed) + ", dy " + std::to_string(dy1_seed);
  auto statuses = comm::RunRanks(
      t,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d0.block);
        if (!block.ok()) return block.status();
        const std::string on =
            "F0 F1 B1 B0 on rank " + std::to_string(rank) + " of " + std::to_string(t) + ", " + inputs + ": ";
        nn::BlockCache c0, c1;
        for (auto [x, cache] : {std::pair{&d0.x, &c0}, std::pair{&x1, &c1}}) {
          if (auto y = (*block)->Forward(*x, cache); !y.ok()) return y.status();
        }
        auto dx1 = (*block)->Backward(dy1, &c1);
        if (!dx1.ok()) return dx1.status();
        auto dx0 = (*block)->Backward(d0.dy, &c0);
        if (!dx0.ok()) return dx0.status();
        const int64_t h = in.cfg.hidden;
        if (const std::string diff = DiffText(dx0->ToVector(), want_dx0.ToVector(), kTol, h); !diff.empty()) {
          ADD_FAILURE() << on << "micro-batch 0's dx differs from the dense block's: " << diff << Again();
        }
        if (const std::string diff = DiffText(dx1->ToVector(), want_dx1.ToVector(), kTol, h); !diff.empty()) {
          ADD_FAILURE() << on << "micro-batch 1's dx differs from the dense block's: " << diff << Again();
        }
        const auto local = (*block)->Parameters();
        if (local.size() != want.size()) return absl::InternalError(on + "wrong parameter count");
        for (size_t i = 0; i < local.size(); ++i) {
          if (const std::string diff =
                  DiffText(local[i]->grad.ToVector(), ShardOf(want[i]->name(), want[i]->grad, rank, t), kTol);
              !diff.empty()) {
            ADD_FAILURE() << on << "the gradient of " << want[i]->name()
                          << " is not its shard of the dense gradient of both micro-batches: " << diff
                          << Again();
          }
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << inputs << Again();
}

// Each rank caches only its shard: 4 N [(4h + 2) + (4h + 2f + a s) / t] bytes, all of it released by
// Backward; on 2, 4 or 8 ranks.
TEST(TpBlockHidden, ShardedCacheBytes) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  CaseRandom rng;
  const int t = rng.Pick(std::vector<int>{2, 4, 8});
  const BlockInputs in = testing::DrawBlock(rng, t);
  const nn::GptConfig& cfg = in.cfg;
  Dense d(in);
  const size_t want =
      4 * in.rows * ((4 * cfg.hidden + 2) + (4 * cfg.hidden + 2 * cfg.inner + cfg.heads * cfg.seq) / t);
  auto statuses =
      comm::RunRanks(
          t,
          [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
            tensor::MemoryTracker tracker;
            tensor::ScopedMemoryTracker scope(&tracker);
            auto block = TensorParallelBlock::Create(tp, stream, d.block);
            if (!block.ok()) return block.status();
            const std::string on = On(in, rank, t);
            nn::BlockCache c;
            auto y = (*block)->Forward(d.x, &c);
            if (!y.ok()) return y.status();
            EXPECT_EQ(c.bytes(), nn::BlockCacheBytes(cfg, in.rows, t))
                << on << ": the cache after Forward, against nn::BlockCacheBytes" << Again();
            EXPECT_EQ(c.bytes(), want)
                << on << ": the cache after Forward, against 4 N [(4h + 2) + (4h + 2f + a s) / t]" << Again();
            EXPECT_EQ(tracker.current(tensor::MemCategory::kActivations), c.bytes() + y->bytes())
                << on << ": activations alive after Forward besides the cache and y" << Again();
            auto dx = (*block)->Backward(d.dy, &c);
            if (!dx.ok()) return dx.status();
            EXPECT_EQ(c.bytes(), 0u) << on << ": Backward releases the cache" << Again();
            return absl::OkStatus();
          },
          testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << t << " ranks, " << in.Label() << Again();
}

TEST(TpBlockHidden, OneRankIsDenseAndSilent) {
  PRIOR_WORK_OR_RETURN(testing::prior::kTpBlock);
  CaseRandom rng;
  const BlockInputs in = testing::DrawBlock(rng, 1);
  Dense d(in);
  auto statuses = comm::RunRanks(
      1,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = TensorParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        const std::string on = "one rank, " + in.Label();
        EXPECT_EQ((*block)->local_heads(), in.cfg.heads) << on << ": local_heads()" << Again();
        tp.ResetStats();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x, &c);
        if (!y.ok()) return y.status();
        auto dx = (*block)->Backward(d.dy, &c);
        if (!dx.ok()) return dx.status();
        const int64_t h = in.cfg.hidden;
        if (const std::string diff = DiffText(y->ToVector(), d.y.ToVector(), 1e-6f, h); !diff.empty()) {
          ADD_FAILURE() << on << ": y differs from the dense block's: " << diff << Again();
        }
        if (const std::string diff = DiffText(dx->ToVector(), d.dx.ToVector(), 1e-6f, h); !diff.empty()) {
          ADD_FAILURE() << on << ": dx differs from the dense block's: " << diff << Again();
        }
        EXPECT_EQ(tp.stats().collective_calls, 0u) << on << ": no collective on a one-rank comm" << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << in.Label() << Again();
}

// t ranks that do not divide the heads (t in {3, 5, 6, 7}): InvalidArgument naming both numbers; heads that
// t divides but an inner size it does not: InvalidArgument.
TEST(TpBlockHidden, IndivisibleHeadsAreAnError) {
  CaseRandom rng;
  const int t = rng.Pick(std::vector<int>{3, 5, 6, 7});
  nn::GptConfig cfg;
  cfg.heads = rng.Pick(std::vector<int64_t>{4, 8, 16});
  cfg.inner = rng.Pick(std::vector<int64_t>{96, 128, 160});
  nn::GptBlock dense("blocks.0", cfg);
  // heads and hidden both multiples of t, the inner size not.
  nn::GptConfig inner = cfg;
  inner.heads = t;
  inner.hidden = 4 * t;
  inner.inner = t * rng.Int(4, 12) + rng.Int(1, t - 1);
  nn::GptBlock dense_inner("blocks.0", inner);
  const std::string want =
      std::to_string(cfg.heads) + " heads are not divisible by " + std::to_string(t) + " tp ranks";
  auto statuses = comm::RunRanks(
      t,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        const std::string on = "rank " + std::to_string(rank) + " of " + std::to_string(t) + ", ";
        auto block = TensorParallelBlock::Create(tp, stream, dense);
        EXPECT_EQ(block.status().code(), absl::StatusCode::kInvalidArgument)
            << on << cfg.heads << " heads" << Again();
        EXPECT_EQ(block.status().message(), want) << on << cfg.heads << " heads" << Again();
        auto other = TensorParallelBlock::Create(tp, stream, dense_inner);
        EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument)
            << on << inner.heads << " heads, inner size " << inner.inner << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << t << " ranks" << Again();
}

}  // namespace
}  // namespace distlab::composition
