// Public tests of Lab 7 stage F (stretch): sequence parallelism against the dense nn::GptBlock.
#include "labs/composition/sp_block.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "tools/testing/test_support.h"

namespace distlab::composition {
namespace {

using tensor::Tensor;

comm::CommOptions Options() {
  comm::CommOptions opts;
  opts.timeout = testing::Scaled(std::chrono::seconds(5));
  return opts;
}

// Row i of the result holds the value i in every column, so a shard's rows say where they came from.
Tensor RowNumbers(int64_t rows, int64_t h) {
  Tensor x({rows, h});
  for (int64_t i = 0; i < rows * h; ++i) x.Set(i, static_cast<float>(i / h));
  return x;
}

// Rank r of t's slice of a dense tensor, read off the local tensor's shape (stage B's sharding): fewer rows
// is a block of rows (a column-parallel weight or its bias), fewer columns a block of columns (a row-parallel
// weight), the same shape the whole tensor.
std::vector<float> SliceLike(const Tensor& dense, const Tensor& local, int r, int t) {
  const std::vector<float> all = dense.ToVector();
  if (local.dim(0) * t == dense.dim(0)) {
    const int64_t n = local.numel();
    return {all.begin() + r * n, all.begin() + (r + 1) * n};
  }
  if (local.ndim() == 2 && local.dim(1) * t == dense.dim(1)) {
    const int64_t in = dense.dim(1), w = local.dim(1);
    std::vector<float> s;
    for (int64_t o = 0; o < dense.dim(0); ++o) {
      s.insert(s.end(), all.begin() + o * in + r * w, all.begin() + o * in + (r + 1) * w);
    }
    return s;
  }
  return all;
}

float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30f;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::vector<float> FirstColumn(const Tensor& x) {
  std::vector<float> c;
  for (int64_t i = 0; i < x.dim(0); ++i) c.push_back(x.Get(i * x.dim(1)));
  return c;
}

// The pinned shard: positions [r s/t, (r+1) s/t) of EVERY sequence (two sequences of 8 here), not the r-th
// contiguous block of rows. With one sequence the two would agree; with two they do not.
TEST(SpBlockTest, ShardHoldsItsPositionsOfEverySequence) {
  const Tensor full = RowNumbers(16, 3);
  auto s0 = SequenceShard(full, /*seq=*/8, /*rank=*/0, /*t=*/2);
  auto s1 = SequenceShard(full, 8, 1, 2);
  ASSERT_OK(s0.status());
  ASSERT_OK(s1.status());
  EXPECT_EQ(FirstColumn(*s0), (std::vector<float>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(FirstColumn(*s1), (std::vector<float>{4, 5, 6, 7, 12, 13, 14, 15}));
  auto s3 = SequenceShard(full, 8, 3, 4);
  ASSERT_OK(s3.status());
  EXPECT_EQ(FirstColumn(*s3), (std::vector<float>{6, 7, 14, 15}));
  const auto bad = SequenceShard(full, 8, 0, 3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("sequence length 8"), std::string::npos)
      << bad.status().message();
}

// Two sequences of s = 8 on t = 2 ranks (row i of `full` holds the value i):
//
//   full              0 1 2 3 4 5 6 7 | 8 9 10 11 12 13 14 15
//   rank 0's shard    0 1 2 3 | 8 9 10 11                       (positions 0..3 of each sequence)
//   rank 1's shard    4 5 6 7 | 12 13 14 15                     (positions 4..7)
//
// GatherSequence gives every rank all 16 rows back in that order, with one all-gather of 16 x 3 floats;
// ReduceScatterSequence of rank r's (r + 1) full gives each rank its own rows of 3 full, with one
// reduce-scatter of 16 x 3 floats. A shard of 3 rows on each of 2 ranks is 6 rows, not whole sequences of 8:
// InvalidArgument.
TEST(SpBlockTest, GatherAndReduceScatterAlongTheSequence) {
  const Tensor full = RowNumbers(16, 3);
  auto statuses = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto shard = SequenceShard(full, 8, rank, 2);
        if (!shard.ok()) return shard.status();
        tp.ResetStats();
        auto gathered = GatherSequence(tp, stream, *shard, 8);
        if (!gathered.ok()) return gathered.status();
        EXPECT_EQ(gathered->ToVector(), full.ToVector()) << "rank " << rank;
        EXPECT_EQ(tp.stats().all_gather.calls, 1u);
        EXPECT_EQ(tp.stats().all_gather.bytes, 16u * 3 * 4);
        Tensor partial = full;  // rank r contributes (r + 1) * full: the sum is 3 * full
        tensor::Scale(partial, static_cast<float>(rank + 1));
        auto reduced = ReduceScatterSequence(tp, stream, partial, 8);
        if (!reduced.ok()) return reduced.status();
        Tensor want = *shard;
        tensor::Scale(want, 3.f);
        EXPECT_EQ(reduced->ToVector(), want.ToVector()) << "rank " << rank;
        EXPECT_EQ(tp.stats().reduce_scatter.calls, 1u);
        EXPECT_EQ(tp.stats().reduce_scatter.bytes, 16u * 3 * 4);
        EXPECT_EQ(tp.stats().collective_calls, 2u) << "nothing but the all-gather and the reduce-scatter";
        const auto not_whole = GatherSequence(tp, stream, RowNumbers(3, 3), 8);
        EXPECT_EQ(not_whole.status().code(), absl::StatusCode::kInvalidArgument)
            << "2 shards of 3 rows are not whole sequences of 8";
        return absl::OkStatus();
      },
      Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// t = 2 on the default shape (h 32, a 8, f 128, s 8), two sequences (N = 16): each rank's y and dx are its
// shards of the dense block's; after AllReduceSequenceParallelGrads every gradient equals its slice of the
// dense gradient; the cache holds shards only (u, u2 and the norms' caches have N / t = 8 rows); the tp comm
// carried 2 AG + 2 RS forward, 4 AG + 2 RS backward, and one all-reduce of 6h floats.
TEST(SpBlockTest, EqualsDenseOnTwoRanks) {
  const nn::GptConfig cfg;
  nn::GptBlock dense("blocks.0", cfg);
  for (nn::Parameter* p : dense.Parameters()) {  // norms and biases away from 1 and 0
    if (p->value.ndim() == 1) tensor::FillNormal(p->value, tensor::SeedFor(9, p->name().c_str()), 0.2f);
  }
  Tensor x({16, cfg.hidden}), dy({16, cfg.hidden});
  tensor::FillNormal(x, 1, 1.f);
  tensor::FillNormal(dy, 2, 1.f);
  nn::BlockCache cache;
  const Tensor want_y = dense.Forward(x, &cache);
  const Tensor want_dx = dense.Backward(dy, &cache);
  const std::vector<nn::Parameter*> dense_params = dense.Parameters();
  const uint64_t s_bytes = 16u * cfg.hidden * 4;
  auto statuses = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, dense);
        if (!block.ok()) return block.status();
        ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(x, cfg.seq, rank, 2));
        ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(dy, cfg.seq, rank, 2));
        ASSIGN_OR_RETURN(const Tensor want_y_s, SequenceShard(want_y, cfg.seq, rank, 2));
        ASSIGN_OR_RETURN(const Tensor want_dx_s, SequenceShard(want_dx, cfg.seq, rank, 2));
        tp.ResetStats();
        nn::BlockCache c;
        auto y = (*block)->Forward(x_s, &c);
        if (!y.ok()) return y.status();
        EXPECT_EQ(c.bytes(), SequenceParallelCacheBytes(cfg, 16, 2)) << "the cache holds shards only";
        EXPECT_EQ(c.u.dim(0), 8) << "the cached LN1 output is this rank's 8 rows";
        EXPECT_EQ(c.u2.dim(0), 8) << "the cached LN2 output is this rank's 8 rows";
        EXPECT_EQ(c.ln1.xhat.dim(0), 8) << "LN1's cache is this rank's 8 rows";
        EXPECT_EQ(c.ln2.xhat.dim(0), 8) << "LN2's cache is this rank's 8 rows";
        EXPECT_EQ(tp.stats().all_gather.calls, 2u) << "forward: the LN outputs gathered for q, k, v and fc1";
        EXPECT_EQ(tp.stats().reduce_scatter.calls, 2u) << "forward: o's and fc2's partial sums";
        EXPECT_EQ(tp.stats().all_reduce.calls, 0u) << "no all-reduce in a sequence-parallel forward";
        auto dx = (*block)->Backward(dy_s, &c);
        if (!dx.ok()) return dx.status();
        EXPECT_EQ(tp.stats().all_gather.calls, 6u) << "backward: 2 output gradients, 2 LN outputs again";
        EXPECT_EQ(tp.stats().reduce_scatter.calls, 4u) << "backward: the 2 input gradients";
        EXPECT_EQ(tp.stats().all_gather.bytes, 6 * s_bytes);
        EXPECT_EQ(tp.stats().reduce_scatter.bytes, 4 * s_bytes);
        EXPECT_OK((*block)->AllReduceSequenceParallelGrads());
        EXPECT_EQ(tp.stats().all_reduce.calls, 1u) << "one coalesced all-reduce";
        EXPECT_EQ(tp.stats().all_reduce.bytes, 6u * cfg.hidden * 4);
        EXPECT_LT(tensor::MaxAbsDiff(*y, want_y_s), 1e-5f) << "rank " << rank;
        EXPECT_LT(tensor::MaxAbsDiff(*dx, want_dx_s), 1e-5f) << "rank " << rank;
        const std::vector<nn::Parameter*> local = (*block)->Parameters();
        EXPECT_EQ((*block)->ParameterNames(), dense.ParameterNames());
        if (local.size() != dense_params.size()) return absl::InternalError("wrong parameter count");
        for (size_t i = 0; i < local.size(); ++i) {
          EXPECT_LT(
              MaxDiff(local[i]->grad.ToVector(), SliceLike(dense_params[i]->grad, local[i]->grad, rank, 2)),
              1e-5f)
              << dense.ParameterNames()[i] << " gradient, rank " << rank
              << " (a replicated one is partial until AllReduceSequenceParallelGrads)";
        }
        return absl::OkStatus();
      },
      Options());
  ASSERT_OK(comm::FirstError(statuses));
}

// Seeded: a block drawn from the grading seed, of the kind the hidden tests draw (h 32; 4, 8 or 16 heads;
// inner 96, 128 or 160; seq 4, 8 or 12; 1 to 3 sequences; the seeds of the weights, the norms, x and dy), on
// t = 2 ranks: the y and dx shards equal the dense block's, and after AllReduceSequenceParallelGrads every
// gradient its slice of the dense gradient (to 1e-5 of the largest dense magnitude); the cache holds
// SequenceParallelCacheBytes. A hidden failure names its grading seed S; `bazel test
// //labs/composition:sp_block_test --test_env=DISTLAB_GRADING_SEED=S` draws a block of the same kind here.
TEST(SpBlockTest, EqualsDenseOnADrawnBlock) {
  testing::CaseRandom rng;
  nn::GptConfig cfg;
  cfg.heads = rng.Pick(std::vector<int64_t>{4, 8, 16});
  cfg.inner = rng.Pick(std::vector<int64_t>{96, 128, 160});
  cfg.seq = rng.Pick(std::vector<int64_t>{4, 8, 12});
  cfg.seed = rng.Int(1, 999999);
  const int64_t rows = cfg.seq * rng.Int(1, 3);
  const uint64_t norm_seed = rng.Int(1, 999999), x_seed = rng.Int(1, 999999), dy_seed = rng.Int(1, 999999);
  const std::string drawn = "h 32, " + std::to_string(cfg.heads) + " heads, inner " +
                            std::to_string(cfg.inner) + ", seq " + std::to_string(cfg.seq) + ", N " +
                            std::to_string(rows) + ", seeds: weights " + std::to_string(cfg.seed) +
                            ", norms " + std::to_string(norm_seed) + ", x " + std::to_string(x_seed) +
                            ", dy " + std::to_string(dy_seed) + "\n  " + testing::SeedNote();
  nn::GptBlock dense("blocks.1", cfg);
  for (nn::Parameter* p : dense.Parameters()) {
    if (p->value.ndim() == 1)
      tensor::FillNormal(p->value, tensor::SeedFor(norm_seed, p->name().c_str()), 0.2f);
  }
  Tensor x({rows, cfg.hidden}), dy({rows, cfg.hidden});
  tensor::FillNormal(x, x_seed, 1.f);
  tensor::FillNormal(dy, dy_seed, 1.f);
  nn::BlockCache cache;
  const Tensor want_y = dense.Forward(x, &cache);
  const Tensor want_dx = dense.Backward(dy, &cache);
  const std::vector<nn::Parameter*> dense_params = dense.Parameters();
  auto scale = [](const Tensor& t) {  // the tolerance's scale: the largest magnitude, at least 1
    float m = 1.f;
    for (float v : t.ToVector()) m = std::max(m, std::fabs(v));
    return m;
  };
  auto statuses = comm::RunRanks(
      2,
      [&](int rank, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, dense);
        if (!block.ok()) return block.status();
        ASSIGN_OR_RETURN(const Tensor x_s, SequenceShard(x, cfg.seq, rank, 2));
        ASSIGN_OR_RETURN(const Tensor dy_s, SequenceShard(dy, cfg.seq, rank, 2));
        ASSIGN_OR_RETURN(const Tensor want_y_s, SequenceShard(want_y, cfg.seq, rank, 2));
        ASSIGN_OR_RETURN(const Tensor want_dx_s, SequenceShard(want_dx, cfg.seq, rank, 2));
        nn::BlockCache c;
        auto y = (*block)->Forward(x_s, &c);
        if (!y.ok()) return y.status();
        EXPECT_EQ(c.bytes(), SequenceParallelCacheBytes(cfg, rows, 2)) << "rank " << rank << ", " << drawn;
        auto dx = (*block)->Backward(dy_s, &c);
        if (!dx.ok()) return dx.status();
        EXPECT_OK((*block)->AllReduceSequenceParallelGrads());
        EXPECT_LT(tensor::MaxAbsDiff(*y, want_y_s), 1e-5f * scale(want_y))
            << "y, rank " << rank << ", " << drawn;
        EXPECT_LT(tensor::MaxAbsDiff(*dx, want_dx_s), 1e-5f * scale(want_dx))
            << "dx, rank " << rank << ", " << drawn;
        const std::vector<nn::Parameter*> local = (*block)->Parameters();
        if (local.size() != dense_params.size()) return absl::InternalError("wrong parameter count");
        for (size_t i = 0; i < local.size(); ++i) {
          EXPECT_LT(
              MaxDiff(local[i]->grad.ToVector(), SliceLike(dense_params[i]->grad, local[i]->grad, rank, 2)),
              1e-5f * scale(dense_params[i]->grad))
              << dense.ParameterNames()[i] << " gradient, rank " << rank << ", " << drawn;
        }
        return absl::OkStatus();
      },
      Options());
  ASSERT_OK(comm::FirstError(statuses)) << drawn;
}

// Sequence parallelism splits the sequence: a length the tp ranks do not divide is a clear error.
TEST(SpBlockTest, IndivisibleSequenceIsAnError) {
  nn::GptConfig cfg;
  cfg.hidden = 24;
  cfg.heads = 6;
  cfg.inner = 48;
  cfg.seq = 8;
  nn::GptBlock dense("blocks.0", cfg);
  auto statuses = comm::RunRanks(
      3,
      [&](int, comm::Comm& tp, comm::Stream& stream) -> absl::Status {
        auto block = SequenceParallelBlock::Create(tp, stream, dense);
        EXPECT_EQ(block.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_NE(std::string(block.status().message()).find("sequence length 8"), std::string::npos)
            << block.status().message();
        return absl::OkStatus();
      },
      Options());
  ASSERT_OK(comm::FirstError(statuses));
}

}  // namespace
}  // namespace distlab::composition
