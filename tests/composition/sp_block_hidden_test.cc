// Hidden tests of Lab 7 stage F (stretch): sequence parallelism against the dense nn::GptBlock. Every case
// draws its inputs from the grading seed: the block (testing::DrawBlock: heads, inner size, sequence length,
// sequences, the seeds of the weights, norms, x and dy) and, where the name leaves it open, the tp ranks.
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
using testing::Again;
using testing::BlockInputs;
using testing::CaseRandom;
using testing::DiffText;
using testing::ShardOf;

constexpr float kTol = 1e-5f;  // relative to the dense values' largest magnitude (at least 1)

// The dense block run on `micro_batches` micro-batches of in.rows rows each, gradients accumulated.
struct Dense {
  Dense(const BlockInputs& in, int micro_batches = 1) : block("blocks.1", in.cfg) {
    testing::Perturb(block.Parameters(), in.norm_seed);
    for (int i = 0; i < micro_batches; ++i) {
      Tensor xi({in.rows, in.cfg.hidden}), dyi({in.rows, in.cfg.hidden});
      tensor::FillNormal(xi, in.x_seed + i, 1.f);
      tensor::FillNormal(dyi, in.dy_seed + i, 1.f);
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

std::string On(const BlockInputs& in, int rank, int t) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(t) + ", " + in.Label();
}

// The full row that shard row i of rank r of t holds (sp_block.h): position r (s/t) + i % (s/t) of sequence
// i / (s/t).
int64_t FullRow(int64_t i, int64_t seq, int r, int t) {
  const int64_t per = seq / t;
  return (i / per) * seq + r * per + i % per;
}

Tensor RowNumbers(int64_t rows, int64_t h) {
  Tensor x({rows, h});
  for (int64_t i = 0; i < rows * h; ++i) x.Set(i, static_cast<float>(i / h));
  return x;
}

// t = 4 ranks, 2 to 4 sequences of 4, 8 or 12 tokens, 1 to 6 columns (row i of the input holds i in every
// column): the shard map, the gather that undoes it and the reduce-scatter that sums into it, one collective
// each.
TEST(SpBlockHidden, ShardGatherAndScatterOnFourRanks) {
  CaseRandom rng;
  const int64_t seq = rng.Pick(std::vector<int64_t>{4, 8, 12}), sequences = rng.Int(2, 4), h = rng.Int(1, 6);
  const int64_t rows = sequences * seq;
  const Tensor full = RowNumbers(rows, h);
  const std::string inputs = std::to_string(sequences) + " sequences of " + std::to_string(seq) +
                             " tokens, h " + std::to_string(h) + " (row i of the input holds i)";
  auto statuses = comm::RunRanks(
      4,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        const std::string on = "rank " + std::to_string(rank) + " of 4, " + inputs + ": ";
        auto shard = SequenceShard(full, seq, rank, 4);
        if (!shard.ok()) return shard.status();
        if (shard->ndim() != 2 || shard->dim(0) != rows / 4 || shard->dim(1) != h) {
          return absl::InternalError(on + "SequenceShard's result is not [" + std::to_string(rows / 4) +
                                     ", " + std::to_string(h) + "]\n  " + distlab::testing::SeedNote());
        }
        for (int64_t i = 0; i < rows / 4; ++i) {
          const int64_t got = static_cast<int64_t>(shard->Get(i * h)), want = FullRow(i, seq, rank, 4);
          if (got != want) {
            ADD_FAILURE() << on << "SequenceShard's row " << i << " is full row " << got << "; rank " << rank
                          << " holds positions [" << rank * seq / 4 << ", " << (rank + 1) * seq / 4
                          << ") of every sequence, so that row is full row " << want << Again();
            break;
          }
        }
        tp.ResetStats();
        auto gathered = GatherSequence(tp, stream, *shard, seq);
        if (!gathered.ok()) return gathered.status();
        if (const std::string diff = DiffText(gathered->ToVector(), full.ToVector(), 0.f, h, "the input");
            !diff.empty()) {
          ADD_FAILURE() << on << "GatherSequence does not give the full input back: " << diff << Again();
        }
        Tensor partial = full;
        tensor::Scale(partial, static_cast<float>(rank + 1));  // the sum over 4 ranks is 10 full
        auto reduced = ReduceScatterSequence(tp, stream, partial, seq);
        if (!reduced.ok()) return reduced.status();
        Tensor want = *shard;
        tensor::Scale(want, 10.f);
        if (const std::string diff = DiffText(reduced->ToVector(), want.ToVector(), 0.f, h, "10 x the shard");
            !diff.empty()) {
          ADD_FAILURE() << on
                        << "ReduceScatterSequence of (rank + 1) x the input is not 10 x the rank's shard: "
                        << diff << Again();
        }
        const comm::Stats& st = tp.stats();
        const uint64_t bytes = rows * h * 4;
        EXPECT_EQ(st.all_gather.calls, 1u) << on << "all-gathers" << Again();
        EXPECT_EQ(st.reduce_scatter.calls, 1u) << on << "reduce-scatters" << Again();
        EXPECT_EQ(st.all_gather.bytes, bytes) << on << "all-gather bytes (the whole [N, h])" << Again();
        EXPECT_EQ(st.reduce_scatter.bytes, bytes)
            << on << "reduce-scatter bytes (the whole [N, h])" << Again();
        EXPECT_EQ(st.collective_calls, 2u) << on << "nothing but the two collectives" << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << inputs << Again();
}

// y_s and dx_s of rank r against the dense block's, through SequenceShard (checked above).
absl::Status ExpectShardsEqualDense(const BlockInputs& in, const Dense& d, int mb, int rank, int t,
                                    const Tensor& y, const Tensor& dx) {
  ASSIGN_OR_RETURN(const Tensor y_want, SequenceShard(d.y[mb], in.cfg.seq, rank, t));
  ASSIGN_OR_RETURN(const Tensor dx_want, SequenceShard(d.dx[mb], in.cfg.seq, rank, t));
  const std::string on = On(in, rank, t);
  if (const std::string diff = DiffText(y.ToVector(), y_want.ToVector(), kTol, in.cfg.hidden);
      !diff.empty()) {
    ADD_FAILURE() << on << ": the y shard differs from the dense block's: " << diff << Again();
  }
  if (const std::string diff = DiffText(dx.ToVector(), dx_want.ToVector(), kTol, in.cfg.hidden);
      !diff.empty()) {
    ADD_FAILURE() << on << ": the dx shard differs from the dense block's: " << diff << Again();
  }
  return absl::OkStatus();
}

// t = 4, 1 to 3 sequences of 4, 8 or 12 tokens: y and dx shards equal the dense block's.
TEST(SpBlockHidden, ForwardAndBackwardEqualDenseOnFourRanks) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  CaseRandom rng;
  const BlockInputs in = testing::DrawBlock(rng, 4, 1, 3, /*seq_multiple=*/4);
  Dense d(in);
  auto statuses = comm::RunRanks(
      4,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[0], in.cfg.seq, rank, 4));
        ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(d.dy[0], in.cfg.seq, rank, 4));
        nn::BlockCache c;
        auto y = (*block)->Forward(x_s, &c);
        if (!y.ok()) return y.status();
        auto dx = (*block)->Backward(dy_s, &c);
        if (!dx.ok()) return dx.status();
        return ExpectShardsEqualDense(in, d, 0, rank, 4, *y, *dx);
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << "4 ranks, " << in.Label() << Again();
}

// Two micro-batches in flight (both forwards, then both backwards, the later first), then one
// AllReduceSequenceParallelGrads: every gradient equals its slice of the dense block's accumulated gradient,
// the replicated ones included (each rank saw only its own tokens of them). t = 2; micro-batch i's x and dy
// come from the drawn seeds + i.
TEST(SpBlockHidden, GradientsEqualDenseAfterOneAllReduce) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  CaseRandom rng;
  const BlockInputs in = testing::DrawBlock(rng, 2, 1, 3, /*seq_multiple=*/2);
  Dense d(in, /*micro_batches=*/2);
  const std::vector<nn::Parameter*> dense = d.block.Parameters();
  auto statuses = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        const std::string on = "two micro-batches on " + On(in, rank, 2);
        nn::BlockCache c[2];
        for (int i = 0; i < 2; ++i) {
          ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[i], in.cfg.seq, rank, 2));
          auto y = (*block)->Forward(x_s, &c[i]);
          if (!y.ok()) return y.status();
        }
        for (int i = 1; i >= 0; --i) {
          ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(d.dy[i], in.cfg.seq, rank, 2));
          auto dx = (*block)->Backward(dy_s, &c[i]);
          if (!dx.ok()) return dx.status();
        }
        if (absl::Status s = (*block)->AllReduceSequenceParallelGrads(); !s.ok()) return s;
        const auto local = (*block)->Parameters();
        const auto names = (*block)->ParameterNames();
        if (local.size() != dense.size() || names.size() != dense.size()) {
          return absl::InternalError(on + ": wrong parameter count");
        }
        for (size_t i = 0; i < local.size(); ++i) {
          EXPECT_EQ(names[i], dense[i]->name()) << on << Again();
          if (const std::string diff =
                  DiffText(local[i]->value.ToVector(), ShardOf(names[i], dense[i]->value, rank, 2), 1e-7f);
              !diff.empty()) {
            ADD_FAILURE() << on << ": " << names[i] << " is not its shard of the dense value: " << diff
                          << Again();
          }
          if (const std::string diff =
                  DiffText(local[i]->grad.ToVector(), ShardOf(names[i], dense[i]->grad, rank, 2), kTol);
              !diff.empty()) {
            ADD_FAILURE() << on << ": after AllReduceSequenceParallelGrads the gradient of " << names[i]
                          << " is not its shard of the dense gradient: " << diff << Again();
          }
        }
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << "2 ranks, " << in.Label() << Again();
}

// The ledger on 2 or 4 ranks, by collective kind: forward 2 AG + 2 RS, backward 4 AG + 2 RS, each of
// S = N h floats; the gradient sync one all-reduce of 6h floats; no other call.
TEST(SpBlockHidden, TrafficIsGathersAndReduceScatters) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  CaseRandom rng;
  const int t = rng.Pick(std::vector<int>{2, 4});
  const BlockInputs in = testing::DrawBlock(rng, t, 1, 3, /*seq_multiple=*/t);
  Dense d(in);
  const uint64_t s_bytes = in.rows * in.cfg.hidden * 4;
  auto statuses = comm::RunRanks(
      t,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[0], in.cfg.seq, rank, t));
        ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(d.dy[0], in.cfg.seq, rank, t));
        const std::string on = On(in, rank, t) + ": the tp comm after ";
        tp.ResetStats();
        nn::BlockCache c;
        if (auto y = (*block)->Forward(x_s, &c); !y.ok()) return y.status();
        const comm::Stats fwd = tp.stats();
        EXPECT_EQ(fwd.all_gather.calls, 2u) << on << "Forward: all-gathers" << Again();
        EXPECT_EQ(fwd.reduce_scatter.calls, 2u) << on << "Forward: reduce-scatters" << Again();
        EXPECT_EQ(fwd.all_gather.bytes, 2 * s_bytes)
            << on << "Forward: all-gather bytes (each N h floats)" << Again();
        EXPECT_EQ(fwd.reduce_scatter.bytes, 2 * s_bytes)
            << on << "Forward: reduce-scatter bytes (each N h floats)" << Again();
        EXPECT_EQ(fwd.collective_calls, 4u) << on << "Forward: nothing else (no all-reduce)" << Again();
        if (auto dx = (*block)->Backward(dy_s, &c); !dx.ok()) return dx.status();
        const comm::Stats all = tp.stats();
        EXPECT_EQ(all.all_gather.calls - fwd.all_gather.calls, 4u)
            << on << "Backward: all-gathers (2 output gradients and the 2 cached LN outputs)" << Again();
        EXPECT_EQ(all.reduce_scatter.calls - fwd.reduce_scatter.calls, 2u)
            << on << "Backward: reduce-scatters" << Again();
        EXPECT_EQ(all.all_gather.bytes - fwd.all_gather.bytes, 4 * s_bytes)
            << on << "Backward: all-gather bytes (each N h floats)" << Again();
        EXPECT_EQ(all.reduce_scatter.bytes - fwd.reduce_scatter.bytes, 2 * s_bytes)
            << on << "Backward: reduce-scatter bytes (each N h floats)" << Again();
        EXPECT_EQ(all.collective_calls, 10u) << on << "Backward: nothing else" << Again();
        EXPECT_EQ(all.sends + all.recvs, 0u) << on << "Backward: sends and receives" << Again();
        if (absl::Status s = (*block)->AllReduceSequenceParallelGrads(); !s.ok()) return s;
        const comm::Stats sync = tp.stats();
        EXPECT_EQ(sync.all_reduce.calls, 1u)
            << on << "AllReduceSequenceParallelGrads: the six replicated gradients in one all-reduce"
            << Again();
        EXPECT_EQ(sync.all_reduce.bytes, 6u * in.cfg.hidden * 4)
            << on << "AllReduceSequenceParallelGrads: all-reduce bytes (6h floats)" << Again();
        EXPECT_EQ(sync.collective_calls, 11u)
            << on << "AllReduceSequenceParallelGrads: nothing else" << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(statuses)) << t << " ranks, " << in.Label() << Again();
}

// A micro-batch's cache holds shards only: 4 (N/t) [(4h + 2) + (4h + 2f + a s)] bytes, and its norm
// caches and norm outputs have N/t rows; on 2 and on 4 ranks.
TEST(SpBlockHidden, CacheHoldsShardsOnly) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  CaseRandom rng;
  const BlockInputs in = testing::DrawBlock(rng, 4, 1, 3, /*seq_multiple=*/4);
  const nn::GptConfig& cfg = in.cfg;
  Dense d(in);
  for (int t : {2, 4}) {
    const int64_t n = in.rows / t;
    const size_t want =
        4 * n * ((4 * cfg.hidden + 2) + (4 * cfg.hidden + 2 * cfg.inner + cfg.heads * cfg.seq));
    auto statuses = comm::RunRanks(
        t,
        [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
          auto block = SequenceParallelBlock::Create(tp, stream, d.block);
          if (!block.ok()) return block.status();
          ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(d.x[0], cfg.seq, rank, t));
          const std::string on = On(in, rank, t) + ": after Forward, ";
          nn::BlockCache c;
          if (auto y = (*block)->Forward(x_s, &c); !y.ok()) return y.status();
          EXPECT_EQ(c.bytes(), want) << on
                                     << "the cache's bytes, against 4 (N/t) [(4h + 2) + (4h + 2f + a s)]"
                                     << Again();
          EXPECT_EQ(c.u.dim(0), n) << on << "the rows of the cached LN1 output (u)" << Again();
          EXPECT_EQ(c.u2.dim(0), n) << on << "the rows of the cached LN2 output (u2)" << Again();
          EXPECT_EQ(c.ln1.xhat.dim(0), n) << on << "the rows of LN1's cache (xhat)" << Again();
          return absl::OkStatus();
        },
        testing::Options());
    ASSERT_OK(comm::FirstError(statuses)) << t << " ranks, " << in.Label() << Again();
  }
}

// One rank is the dense block and calls nothing; shapes the ranks cannot split are clear errors: rows that
// are not whole sequences, a sequence length 3 ranks do not divide (the message names it), a gather of
// shards that are not 1/3 of whole sequences.
TEST(SpBlockHidden, OneRankIsDenseAndBadShapesAreErrors) {
  PRIOR_WORK_OR_RETURN(testing::prior::kSpBlock);
  CaseRandom rng;
  const BlockInputs in = testing::DrawBlock(rng, 1);
  Dense d(in);
  auto one = comm::RunRanks(
      1,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, d.block);
        if (!block.ok()) return block.status();
        const std::string on = "one rank, " + in.Label();
        tp.ResetStats();
        nn::BlockCache c;
        auto y = (*block)->Forward(d.x[0], &c);
        if (!y.ok()) return y.status();
        auto dx = (*block)->Backward(d.dy[0], &c);
        if (!dx.ok()) return dx.status();
        if (absl::Status s = (*block)->AllReduceSequenceParallelGrads(); !s.ok()) return s;
        if (const std::string diff = DiffText(y->ToVector(), d.y[0].ToVector(), 1e-6f, in.cfg.hidden);
            !diff.empty()) {
          ADD_FAILURE() << on << ": y differs from the dense block's: " << diff << Again();
        }
        if (const std::string diff = DiffText(dx->ToVector(), d.dx[0].ToVector(), 1e-6f, in.cfg.hidden);
            !diff.empty()) {
          ADD_FAILURE() << on << ": dx differs from the dense block's: " << diff << Again();
        }
        EXPECT_EQ(tp.stats().collective_calls, 0u) << on << ": no collective on a one-rank comm" << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(one)) << in.Label() << Again();
  const int64_t seq = rng.Pick(std::vector<int64_t>{4, 8, 12});
  const int64_t bad_rows = seq * rng.Int(1, 3) + rng.Int(1, seq - 1);
  const auto not_whole = SequenceShard(RowNumbers(bad_rows, 2), seq, 0, 2);
  EXPECT_EQ(not_whole.status().code(), absl::StatusCode::kInvalidArgument)
      << "SequenceShard of " << bad_rows << " rows, seq " << seq << ", on 2 ranks: not whole sequences"
      << Again();
  // Heads and inner split 3 ways, the sequence does not.
  nn::GptConfig odd = in.cfg;
  odd.hidden = 24;
  odd.heads = rng.Pick(std::vector<int64_t>{3, 6});
  odd.inner = rng.Pick(std::vector<int64_t>{48, 96});
  odd.seq = rng.Pick(std::vector<int64_t>{4, 5, 7, 8, 10});
  const int64_t shard_rows = rng.Pick(std::vector<int64_t>{1, 2, 3, 4, 5});  // seq % 3 != 0: no split
  nn::GptBlock dense("blocks.0", odd);
  const std::string want = "sequence length " + std::to_string(odd.seq);
  auto three = comm::RunRanks(
      3,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        const std::string on = "rank " + std::to_string(rank) + " of 3, h 24, " + std::to_string(odd.heads) +
                               " heads, inner " + std::to_string(odd.inner) + ", seq " +
                               std::to_string(odd.seq);
        auto block = SequenceParallelBlock::Create(tp, stream, dense);
        EXPECT_EQ(block.status().code(), absl::StatusCode::kInvalidArgument) << on << Again();
        EXPECT_NE(std::string(block.status().message()).find(want), std::string::npos)
            << on << ": the message '" << block.status().message() << "' does not say '" << want << "'"
            << Again();
        auto gathered = GatherSequence(tp, stream, RowNumbers(shard_rows, 2), odd.seq);
        EXPECT_EQ(gathered.status().code(), absl::StatusCode::kInvalidArgument)
            << on << ": a gather of shards of " << shard_rows << " rows, which are not 1/3 of whole sequences"
            << Again();
        return absl::OkStatus();
      },
      testing::Options());
  ASSERT_OK(comm::FirstError(three)) << Again();
}

}  // namespace
}  // namespace distlab::composition
