// Hidden tests of Lab 7 stage F (stretch): sequence parallelism against the dense nn::GptBlock.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/composition/sp_block.h"
#include "reference/base/status.h"
#include "tests/composition/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using tensor::Tensor;
using testing::MaxDiff;
using testing::ShardOf;

// The dense block run on `micro_batches` micro-batches of `rows` rows each, gradients accumulated.
struct Dense {
  Dense(const nn::GptConfig& cfg, int64_t rows, int micro_batches = 1) : block("blocks.1", cfg) {
    testing::Perturb(block.Parameters());
    for (int i = 0; i < micro_batches; ++i) {
      Tensor xi({rows, cfg.hidden}), dyi({rows, cfg.hidden});
      tensor::FillNormal(xi, 21 + i, 1.f);
      tensor::FillNormal(dyi, 41 + i, 1.f);
      nn::BlockCache cache;
      y.push_back(block.Forward(xi, &cache));
      dx.push_back(block.Backward(dyi, &cache));
      x.push_back(std::move(xi));
      dy.push_back(std::move(dyi));
    }
  }
  nn::GptBlock block;
  std::vector<Tensor> x, dy, y, dx;
};

// The rows of `full` a rank holds, as indices: positions [r s/t, (r+1) s/t) of every sequence.
std::vector<float> ExpectedRows(int64_t rows, int64_t seq, int r, int t) {
  std::vector<float> want;
  for (int64_t b = 0; b < rows / seq; ++b) {
    for (int64_t j = 0; j < seq / t; ++j) want.push_back(static_cast<float>(b * seq + r * (seq / t) + j));
  }
  return want;
}

Tensor RowNumbers(int64_t rows, int64_t h) {
  Tensor x({rows, h});
  for (int64_t i = 0; i < rows * h; ++i) x.Set(i, static_cast<float>(i / h));
  return x;
}

std::vector<float> FirstColumn(const Tensor& x) {
  std::vector<float> c;
  for (int64_t i = 0; i < x.dim(0); ++i) c.push_back(x.Get(i * x.dim(1)));
  return c;
}

// Three sequences of 8 on 4 ranks: the shard map, the gather that undoes it and the reduce-scatter that sums
// into it, one collective each.
TEST(SpBlockHidden, ShardGatherAndScatterOnFourRanks) {
  const Tensor full = RowNumbers(24, 5);
  auto statuses = comm::RunRanks(
      4,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto shard = SequenceShard(full, 8, rank, 4);
        if (!shard.ok()) return shard.status();
        EXPECT_EQ(FirstColumn(*shard), ExpectedRows(24, 8, rank, 4)) << "rank " << rank;
        tp.ResetStats();
        auto gathered = GatherSequence(tp, stream, *shard, 8);
        if (!gathered.ok()) return gathered.status();
        EXPECT_EQ(gathered->ToVector(), full.ToVector()) << "gathered on rank " << rank;
        Tensor partial = full;
        tensor::Scale(partial, static_cast<float>(rank + 1));  // the sum over 4 ranks is 10 full
        auto reduced = ReduceScatterSequence(tp, stream, partial, 8);
        if (!reduced.ok()) return reduced.status();
        Tensor want = *shard;
        tensor::Scale(want, 10.f);
        EXPECT_EQ(reduced->ToVector(), want.ToVector()) << "reduce-scattered on rank " << rank;
        const comm::Stats& st = tp.stats();
        EXPECT_EQ(st.all_gather.calls, 1u);
        EXPECT_EQ(st.reduce_scatter.calls, 1u);
        EXPECT_EQ(st.all_gather.bytes, 24u * 5 * 4);
        EXPECT_EQ(st.reduce_scatter.bytes, 24u * 5 * 4);
        EXPECT_EQ(st.collective_calls, 2u) << "nothing but the two collectives";
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// t = 4 (two positions per rank per sequence), three sequences: y and dx shards equal the dense block's.
TEST(SpBlockHidden, ForwardAndBackwardEqualDenseOnFourRanks) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, 3 * cfg.seq);
  auto statuses = comm::RunRanks(
      4,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[0], cfg.seq, rank, 4));
        ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(d.dy[0], cfg.seq, rank, 4));
        ASSIGN_OR_RETURN(const Tensor y_want, SequenceShard(d.y[0], cfg.seq, rank, 4));
        ASSIGN_OR_RETURN(const Tensor dx_want, SequenceShard(d.dx[0], cfg.seq, rank, 4));
        nn::BlockCache c;
        auto y = (*block)->Forward(x_s, &c);
        if (!y.ok()) return y.status();
        EXPECT_LT(tensor::MaxAbsDiff(*y, y_want), 1e-5f) << "y shard on rank " << rank;
        auto dx = (*block)->Backward(dy_s, &c);
        if (!dx.ok()) return dx.status();
        EXPECT_LT(tensor::MaxAbsDiff(*dx, dx_want), 1e-5f) << "dx shard on rank " << rank;
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// Two micro-batches in flight (both forwards, then both backwards, the later first), then one
// AllReduceSequenceParallelGrads: every gradient equals its slice of the dense block's accumulated gradient,
// the replicated ones included (each rank saw only its own tokens of them).
TEST(SpBlockHidden, GradientsEqualDenseAfterOneAllReduce) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, 2 * cfg.seq, /*micro_batches=*/2);
  const std::vector<nn::Parameter*> dense = d.block.Parameters();
  auto statuses = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        nn::BlockCache c[2];
        for (int i = 0; i < 2; ++i) {
          ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[i], cfg.seq, rank, 2));
          auto y = (*block)->Forward(x_s, &c[i]);
          if (!y.ok()) return y.status();
        }
        for (int i = 1; i >= 0; --i) {
          ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(d.dy[i], cfg.seq, rank, 2));
          auto dx = (*block)->Backward(dy_s, &c[i]);
          if (!dx.ok()) return dx.status();
        }
        if (absl::Status s = (*block)->AllReduceSequenceParallelGrads(); !s.ok()) return s;
        const auto local = (*block)->Parameters();
        const auto names = (*block)->ParameterNames();
        if (local.size() != dense.size()) return absl::InternalError("wrong parameter count");
        for (size_t i = 0; i < local.size(); ++i) {
          EXPECT_EQ(names[i], dense[i]->name());
          EXPECT_LT(MaxDiff(local[i]->value.ToVector(), ShardOf(names[i], dense[i]->value, rank, 2)), 1e-7f)
              << names[i] << " on rank " << rank;
          EXPECT_LT(MaxDiff(local[i]->grad.ToVector(), ShardOf(names[i], dense[i]->grad, rank, 2)), 1e-5f)
              << "grad of " << names[i] << " on rank " << rank;
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// The ledger on 4 ranks, by collective kind: forward 2 AG + 2 RS, backward 4 AG + 2 RS, each of S = N h
// floats; the gradient sync one all-reduce of 6h floats; no other call.
TEST(SpBlockHidden, TrafficIsGathersAndReduceScatters) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, 2 * cfg.seq);
  const uint64_t s_bytes = 2u * cfg.seq * cfg.hidden * 4;
  auto statuses = comm::RunRanks(
      4,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[0], cfg.seq, rank, 4));
        ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(d.dy[0], cfg.seq, rank, 4));
        tp.ResetStats();
        nn::BlockCache c;
        if (auto y = (*block)->Forward(x_s, &c); !y.ok()) return y.status();
        const comm::Stats fwd = tp.stats();
        EXPECT_EQ(fwd.all_gather.calls, 2u) << "forward all-gathers";
        EXPECT_EQ(fwd.reduce_scatter.calls, 2u) << "forward reduce-scatters";
        EXPECT_EQ(fwd.all_gather.bytes, 2 * s_bytes);
        EXPECT_EQ(fwd.reduce_scatter.bytes, 2 * s_bytes);
        EXPECT_EQ(fwd.collective_calls, 4u) << "forward: nothing else (no all-reduce)";
        if (auto dx = (*block)->Backward(dy_s, &c); !dx.ok()) return dx.status();
        const comm::Stats all = tp.stats();
        EXPECT_EQ(all.all_gather.calls - fwd.all_gather.calls, 4u)
            << "backward all-gathers: 2 output gradients and the 2 cached LN outputs";
        EXPECT_EQ(all.reduce_scatter.calls - fwd.reduce_scatter.calls, 2u) << "backward reduce-scatters";
        EXPECT_EQ(all.all_gather.bytes - fwd.all_gather.bytes, 4 * s_bytes);
        EXPECT_EQ(all.reduce_scatter.bytes - fwd.reduce_scatter.bytes, 2 * s_bytes);
        EXPECT_EQ(all.collective_calls, 10u) << "backward: nothing else";
        EXPECT_EQ(all.sends + all.recvs, 0u);
        if (absl::Status s = (*block)->AllReduceSequenceParallelGrads(); !s.ok()) return s;
        const comm::Stats sync = tp.stats();
        EXPECT_EQ(sync.all_reduce.calls, 1u) << "the six replicated gradients in one all-reduce";
        EXPECT_EQ(sync.all_reduce.bytes, 6u * cfg.hidden * 4);
        EXPECT_EQ(sync.collective_calls, 11u);
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// A micro-batch's cache holds shards only: 4 (N/t) [(4h + 2) + (4h + 2f + a s)] bytes, and its norm
// caches and norm outputs have N/t rows.
TEST(SpBlockHidden, CacheHoldsShardsOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, 2 * cfg.seq);
  for (int t : {2, 4}) {
    const int64_t n = 2 * cfg.seq / t;
    const size_t want =
        4 * n * ((4 * cfg.hidden + 2) + (4 * cfg.hidden + 2 * cfg.inner + cfg.heads * cfg.seq));
    auto statuses = comm::RunRanks(
        t,
        [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
          auto block = SequenceParallelBlock::Create(tp, stream, d.block);
          if (!block.ok()) return block.status();
          ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[0], cfg.seq, rank, t));
          nn::BlockCache c;
          if (auto y = (*block)->Forward(x_s, &c); !y.ok()) return y.status();
          EXPECT_EQ(c.bytes(), want) << "t = " << t;
          EXPECT_EQ(c.u.dim(0), n) << "the cached LN1 output is this rank's shard, t = " << t;
          EXPECT_EQ(c.u2.dim(0), n) << "the cached LN2 output is this rank's shard, t = " << t;
          EXPECT_EQ(c.ln1.xhat.dim(0), n) << "t = " << t;
          return absl::OkStatus();
        },
        testing::Options());
    ASSERT_OK(comm::FirstError(statuses));
  }
}

// One rank is the dense block and calls nothing; shapes the ranks cannot split are clear errors.
TEST(SpBlockHidden, OneRankIsDenseAndBadShapesAreErrors) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  const nn::GptConfig cfg;
  Dense d(cfg, cfg.seq);
  auto one = comm::RunRanks(
      1,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        tp.ResetStats();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x[0], &c);
        if (!y.ok()) return y.status();
        auto dx = (*block)->Backward(d.dy[0], &c);
        if (!dx.ok()) return dx.status();
        if (absl::Status s = (*block)->AllReduceSequenceParallelGrads(); !s.ok()) return s;
        EXPECT_LT(tensor::MaxAbsDiff(*y, d.y[0]), 1e-6f);
        EXPECT_LT(tensor::MaxAbsDiff(*dx, d.dx[0]), 1e-6f);
        EXPECT_EQ(tp.stats().collective_calls, 0u) << "no collective on a one-rank comm";
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(one));
  const auto not_whole = SequenceShard(RowNumbers(12, 2), 8, 0, 2);
  EXPECT_EQ(not_whole.status().code(), absl::StatusCode::kInvalidArgument)
      << "12 rows are not sequences of 8";
  nn::GptConfig odd = cfg;
  odd.hidden = 24;
  odd.heads = 6;
  odd.inner = 48;
  odd.seq = 10;  // heads and inner split 3 ways, the sequence does not
  nn::GptBlock dense("blocks.0", odd);
  auto three = comm::RunRanks(
      3,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, dense);
        EXPECT_EQ(block.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_NE(std::string(block.status().message()).find("10"), std::string::npos) << block.status();
        auto gathered = GatherSequence(tp, stream, RowNumbers(3, 2), 10);
        EXPECT_EQ(gathered.status().code(), absl::StatusCode::kInvalidArgument)
            << "a gather of a shard that is not 1/3 of whole sequences";
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(three));
}

}  // namespace
}  // namespace distlab::composition
