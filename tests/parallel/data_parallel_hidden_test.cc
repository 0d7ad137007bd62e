// Hidden tests of Lab 4 stage A: data parallelism, naive and bucketed, against single-process training.
//
// Every case draws its inputs -- model shapes, rank counts, batch rows, data seeds, bucket sizes -- from the
// grading seed (tools/testing/test_support.h: CaseRandom), so each grading checks other inputs; a failure
// names the inputs that broke it and ends with the seed to draw them again.
#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
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

using distlab::testing::CaseRandom;
using distlab::testing::SeedNote;
using testing::Describe;
using testing::DrawTinyLM;
using testing::FirstDifference;
using testing::Flatten;
using testing::RankBatch;
using testing::TinyLMRanges;
using testing::TrainDense;

// The reduction order differs from the dense sum (each rank averages its own rows, then the ranks are
// averaged), so the results are not bit-exact: float32 rounding of sums of at most a few dozen terms, about
// 1e-7 relative per operation, well under 2e-5 x (1 + |value|); the mistakes these cases catch are off by a
// factor n >= 2 or by whole gradients.
constexpr float kTol = 2e-5f;

// The header's rule, written out: walk from the last parameter, cut before one that would overflow a
// non-empty bucket.
std::vector<std::vector<int>> ReferenceBuckets(const std::vector<size_t>& bytes, size_t bucket_bytes) {
  std::vector<std::vector<int>> buckets;
  size_t filled = 0;
  for (int i = static_cast<int>(bytes.size()) - 1; i >= 0; --i) {
    if (buckets.empty() || filled + bytes[i] > bucket_bytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += bytes[i];
  }
  return buckets;
}

template <typename T>
std::string List(const std::vector<T>& v) {
  std::ostringstream o;
  o << "{";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "}";
  return o.str();
}

// "" when `got` is `want`, else where it first departs from it (without printing `want`).
std::string BucketDifference(const std::vector<std::vector<int>>& got,
                             const std::vector<std::vector<int>>& want) {
  for (size_t b = 0; b < got.size() && b < want.size(); ++b) {
    if (got[b] != want[b]) {
      return "bucket " + std::to_string(b) + " is " + List(got[b]) +
             ", which the rule does not make (the buckets before it agree)";
    }
  }
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " buckets where the rule makes " + std::to_string(want.size());
  }
  return "";
}

std::vector<size_t> ParamBytes(const std::vector<nn::Parameter*>& params) {
  std::vector<size_t> bytes;
  for (nn::Parameter* p : params) bytes.push_back(4 * static_cast<size_t>(p->numel()));
  return bytes;
}

bool HasMultiParameterBucket(const std::vector<std::vector<int>>& buckets) {
  for (const auto& b : buckets) {
    if (b.size() >= 2) return true;
  }
  return false;
}

// A bucket size for `bytes` that gives at least `min_buckets` buckets, one of them with several parameters:
// drawn, or else the last two parameters' bytes together (for a TinyLM: a bucket of those two, the next one
// overflows it, and the embedding lies further down).
size_t DrawSmallBuckets(CaseRandom& rng, const std::vector<size_t>& bytes, size_t min_buckets) {
  size_t total = 0, smallest = bytes[0];
  for (size_t b : bytes) total += b, smallest = std::min(smallest, b);
  auto fits = [&](size_t bucket) {
    const auto buckets = ReferenceBuckets(bytes, bucket);
    return buckets.size() >= min_buckets && HasMultiParameterBucket(buckets);
  };
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const size_t bucket =
        static_cast<size_t>(rng.Int(static_cast<int64_t>(2 * smallest), static_cast<int64_t>(total)));
    if (fits(bucket)) return bucket;
  }
  const size_t last_two = bytes[bytes.size() - 1] + bytes[bytes.size() - 2];
  if (fits(last_two)) return last_two;
  ADD_FAILURE() << "test setup: no bucket size found for parameters " << List(bytes) << "; " << SeedNote();
  return total;
}

TEST(AssignBucketsHidden, CutsAndOversizedParameters) {
  CaseRandom rng;
  // Four drawn lists: gradient sizes (multiples of 4 bytes) around a drawn bucket size, with a parameter
  // larger than a bucket (a bucket of its own), right below it two parameters that fill a bucket exactly (no
  // cut: the rule cuts only on an overflow) and, in the last list, a bucket size that holds everything.
  for (int draw = 0; draw < 4; ++draw) {
    const size_t bucket = 4 * static_cast<size_t>(rng.Int(8, 64));
    const int count = static_cast<int>(rng.Int(4, 12));
    std::vector<size_t> bytes(count);
    for (size_t& b : bytes) b = 4 * static_cast<size_t>(rng.Int(1, static_cast<int64_t>(bucket / 8)));
    const int oversized = static_cast<int>(rng.Int(2, count - 1));
    bytes[oversized] = bucket + 4 * static_cast<size_t>(rng.Int(1, static_cast<int64_t>(bucket / 4)));
    bytes[oversized - 1] = 4 * static_cast<size_t>(rng.Int(1, static_cast<int64_t>(bucket / 4) - 1));
    bytes[oversized - 2] = bucket - bytes[oversized - 1];
    size_t total = 0;
    for (size_t b : bytes) total += b;
    const size_t bucket_bytes = draw == 3 ? total + 4 * static_cast<size_t>(rng.Int(0, 8)) : bucket;
    const std::string diff =
        BucketDifference(AssignBuckets(bytes, bucket_bytes), ReferenceBuckets(bytes, bucket_bytes));
    if (!diff.empty())
      ADD_FAILURE()
          << "AssignBuckets(param_bytes " << List(bytes) << ", bucket_bytes " << bucket_bytes << "): " << diff
          << ". The rule (data_parallel.h): walk from the last parameter to the first, cut before a "
             "parameter that would push a non-empty bucket over bucket_bytes; "
          << SeedNote();
  }
  const size_t any = 4 * static_cast<size_t>(rng.Int(1, 64));
  if (!AssignBuckets({}, any).empty())
    ADD_FAILURE() << "AssignBuckets({}, " << any << "): no parameters, no buckets; " << SeedNote();
}

TEST(NaiveDataParallelHidden, AveragedGradientEqualsFullBatchGradient) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t per = rng.Int(2, 5), batch = per * n;
  const nn::TinyLMConfig cfg = DrawTinyLM(rng, TinyLMRanges{12, 24, 4, 10, 8, 20, 1, 3}, rng.Chance(0.5));
  const uint64_t data_seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  nn::TinyLM dense(cfg);
  dense.ZeroGrad();
  dense.Forward(nn::SyntheticBatch(cfg.vocab, data_seed, 0, batch));
  dense.Backward();
  std::vector<float> want;
  for (nn::Parameter* p : dense.Parameters()) {
    const auto v = p->grad.ToVector();
    want.insert(want.end(), v.begin(), v.end());
  }
  std::vector<std::vector<float>> got(n);
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    model.ZeroGrad();
    model.Forward(RankBatch(cfg, data_seed, 0, batch, rank, n));
    model.Backward();
    RETURN_IF_ERROR(AllReduceGradientsNaive(comm, stream, model.Parameters()));
    for (nn::Parameter* p : model.Parameters()) {
      const auto v = p->grad.ToVector();
      got[rank].insert(got[rank].end(), v.begin(), v.end());
    }
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << "n = " << n << ", " << Describe(cfg) << "; " << SeedNote();
  for (int r = 0; r < n; ++r) {
    const std::string diff = FirstDifference(cfg, got[r], want, kTol);
    if (!diff.empty()) {
      ADD_FAILURE() << "rank " << r << " of " << n << ", " << Describe(cfg) << ", global batch of " << batch
                    << " rows (" << per << " per rank, data seed " << data_seed
                    << "): after AllReduceGradientsNaive the gradient " << diff
                    << " (the gradient one process computes on all rows); " << SeedNote();
      break;  // one rank shows it
    }
  }
}

TEST(NaiveDataParallelHidden, OneRankIsANoOp) {
  CaseRandom rng;
  const int count = static_cast<int>(rng.Int(1, 3));
  std::vector<int64_t> sizes(count);
  for (int64_t& s : sizes) s = rng.Int(1, 12);
  const uint64_t values = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  auto st = comm::RunRanks(1, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    std::vector<std::unique_ptr<nn::Parameter>> params;
    std::vector<nn::Parameter*> ptrs;
    std::vector<std::vector<float>> before;
    for (int i = 0; i < count; ++i) {
      params.push_back(std::make_unique<nn::Parameter>("p" + std::to_string(i), tensor::Shape{sizes[i]}));
      tensor::FillNormal(params[i]->grad, values, 1.f, 100 * i);
      ptrs.push_back(params[i].get());
      before.push_back(params[i]->grad.ToVector());
    }
    RETURN_IF_ERROR(AllReduceGradientsNaive(comm, stream, ptrs));
    for (int i = 0; i < count; ++i) {
      for (int64_t j = 0; j < sizes[i]; ++j) {
        if (params[i]->grad.Get(j) != before[i][j]) {
          ADD_FAILURE() << "one rank, " << count << " parameters of " << List(sizes) << " floats: element "
                        << j << " of parameter " << i << " changed from " << before[i][j] << " to "
                        << params[i]->grad.Get(j) << " (the mean over one rank is the gradient itself); "
                        << SeedNote();
          break;
        }
      }
    }
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << SeedNote();
}

// Bucketed DDP with AdamW over a few steps against one process: a drawn TinyLM, rank count and batch.
void RunBucketedEquivalence(CaseRandom& rng, bool one_bucket) {
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t per = rng.Int(2, 5), batch = per * n;
  const int steps = static_cast<int>(rng.Int(3, 6));
  const nn::TinyLMConfig cfg = DrawTinyLM(rng, TinyLMRanges{12, 24, 4, 10, 8, 36, 1, 3}, rng.Chance(0.5));
  const uint64_t data_seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  nn::TinyLM probe(cfg);
  const std::vector<size_t> bytes = ParamBytes(probe.Parameters());
  size_t total = 0;
  for (size_t b : bytes) total += b;
  const size_t bucket_bytes =
      one_bucket ? total + static_cast<size_t>(rng.Int(0, 1 << 20)) : DrawSmallBuckets(rng, bytes, 3);
  const size_t buckets = ReferenceBuckets(bytes, bucket_bytes).size();
  // eps = 0.1, as in the ZeRO accumulation cases: with the default 1e-8 a gradient coordinate that sums to
  // almost zero (|g| ~ 1e-8, its float rounding of the same order) is normalised to an update anywhere in
  // +-lr, so the reduction order alone could move it by up to lr; with eps = 0.1 the update is smooth in g
  // and the comparison is as exact as the gradients are.
  nn::AdamWConfig adam;
  adam.lr = 1e-2f;
  adam.eps = 0.1f;
  const std::vector<float> want = TrainDense(cfg, steps, batch, data_seed, adam);
  std::vector<std::vector<float>> got(n);
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, model.Parameters(), bucket_bytes));
    nn::AdamW opt(model.Parameters(), adam);
    for (int step = 0; step < steps; ++step) {
      model.ZeroGrad();
      ddp->BeginStep();
      model.Forward(RankBatch(cfg, data_seed, step, batch, rank, n));
      model.Backward();
      RETURN_IF_ERROR(ddp->FinishGradientSync());
      opt.Step();
    }
    got[rank] = Flatten(model);
    return absl::OkStatus();
  });
  const std::string input = std::to_string(n) + " ranks, " + Describe(cfg) + ", bucket_bytes " +
                            std::to_string(bucket_bytes) + " (" + std::to_string(buckets) + " bucket" +
                            (buckets == 1 ? "" : "s") + "), " + std::to_string(steps) +
                            " AdamW steps (lr 1e-2, eps 0.1) of a global batch of " + std::to_string(batch) +
                            " rows, data seed " + std::to_string(data_seed);
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
  for (int r = 0; r < n; ++r) {
    const std::string diff = FirstDifference(cfg, got[r], want, kTol);
    if (!diff.empty()) {
      ADD_FAILURE() << "rank " << r << " of " << input << ": parameter " << diff << "; " << SeedNote();
      break;  // one rank shows it
    }
  }
}

TEST(BucketedDataParallelHidden, EqualsSingleProcessWithSmallBuckets) {
  CaseRandom rng;
  RunBucketedEquivalence(rng, /*one_bucket=*/false);
}

TEST(BucketedDataParallelHidden, EqualsSingleProcessWithOneBucket) {
  CaseRandom rng;
  RunBucketedEquivalence(rng, /*one_bucket=*/true);
}

TEST(BucketedDataParallelHidden, BucketsFollowReverseParameterOrder) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const nn::TinyLMConfig cfg = DrawTinyLM(rng, TinyLMRanges{8, 40, 4, 16, 8, 48, 1, 3}, rng.Chance(0.5));
  nn::TinyLM probe(cfg);
  const std::vector<size_t> bytes = ParamBytes(probe.Parameters());
  const size_t bucket_bytes = DrawSmallBuckets(rng, bytes, 3);
  const auto want = ReferenceBuckets(bytes, bucket_bytes);
  std::vector<std::vector<int>> got;
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::TinyLM model(cfg);
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, model.Parameters(), bucket_bytes));
    if (rank == 0) got = ddp->buckets();
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << n << " ranks, " << Describe(cfg) << "; " << SeedNote();
  const std::string diff = BucketDifference(got, want);
  if (!diff.empty())
    ADD_FAILURE() << n << " ranks, " << Describe(cfg) << ": parameters of " << List(bytes)
                  << " bytes (Parameters() order), bucket_bytes " << bucket_bytes << ": buckets() " << diff
                  << ". Buckets follow the reverse parameter order (data_parallel.h); " << SeedNote();
}

TEST(BucketedDataParallelHidden, TiedWeightListedTwiceIsOneGradient) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t vocab = rng.Int(4, 10), hidden = rng.Int(2, 6);
  std::vector<int32_t> ids(static_cast<size_t>(rng.Int(1, 4)));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.Int(0, vocab - 1));
  const uint64_t init = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  const uint64_t grads = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  const size_t bucket_bytes = static_cast<size_t>(rng.Int(4, 8 * vocab * hidden));
  const int64_t rows = static_cast<int64_t>(ids.size());
  // Rank r's two-use gradient from its own dlogits (stream `grads`, offset r * rows * vocab).
  auto two_use = [&](nn::Embedding& e, int rank) {
    tensor::Tensor d({rows, vocab});
    tensor::FillNormal(d, grads, 1.f, static_cast<uint64_t>(rank * rows * vocab));
    e.Project(e.Forward(ids));
    e.Backward(e.ProjectBackward(d));
  };
  // Expected: the mean over the ranks of each rank's own two-use gradient.
  tensor::Tensor mean({vocab, hidden});
  for (int r = 0; r < n; ++r) {
    nn::Embedding e("embed", vocab, hidden, init);
    e.weight().ZeroGrad();
    two_use(e, r);
    tensor::Axpy(1.f / n, e.weight().grad, mean);
  }
  const std::string input = std::to_string(n) + " ranks, embedding [" + std::to_string(vocab) + ", " +
                            std::to_string(hidden) + "] listed twice (lookup and tied projection), ids " +
                            List(ids) + ", bucket_bytes " + std::to_string(bucket_bytes);
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Embedding emb("embed", vocab, hidden, init);
    // The embedding and the output projection both list the same Parameter.
    ASSIGN_OR_RETURN(
        auto ddp, BucketedDataParallel::Create(comm, stream, {&emb.weight(), &emb.weight()}, bucket_bytes));
    if (ddp->parameters().size() != 1u)
      ADD_FAILURE() << input << ": parameters() deduplicates; " << SeedNote();
    emb.weight().ZeroGrad();
    ddp->BeginStep();
    two_use(emb, rank);
    RETURN_IF_ERROR(ddp->FinishGradientSync());
    if (ddp->launched().size() != 1u)
      ADD_FAILURE() << input << ": one parameter, one bucket, one launch; " << SeedNote();
    for (int64_t i = 0; i < vocab * hidden; ++i) {
      const float g = emb.weight().grad.Get(i), w = mean.Get(i);
      if (!(std::fabs(g - w) <= 1e-5f * (1.f + std::fabs(w)))) {
        ADD_FAILURE() << "rank " << rank << " of " << input << ": gradient element [" << i / hidden << ", "
                      << i % hidden << "] is " << g
                      << " where the mean over the ranks of each rank's two-use "
                      << "gradient is " << w << "; " << SeedNote();
        break;
      }
    }
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
}

// Overlap: with one bucket per Linear, the buckets of each block are enqueued (the comm counts the calls)
// before the next block down runs its backward, i.e. before backward ends.
TEST(BucketedDataParallelHidden, AllReducesAreEnqueuedBeforeBackwardEnds) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int blocks = static_cast<int>(rng.Int(2, 3));
  const int64_t h = rng.Int(4, 10), f = rng.Int(8, 20), rows = rng.Int(2, 6);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  // A Linear's weight and bias fit (4 (h f + max(h, f)) bytes), a Linear and the next parameter do not
  // (4 (h f + h + f)): buckets {fc2.b, fc2.w}, {fc1.b, fc1.w} of the last block, then of the one below...
  const size_t bucket_bytes =
      static_cast<size_t>(rng.Int(4 * (h * f + std::max(h, f)), 4 * (h * f + h + f) - 1));
  const std::string input = std::to_string(n) + " ranks, " + std::to_string(blocks) + " Mlp blocks (hidden " +
                            std::to_string(h) + ", inner " + std::to_string(f) + "), " +
                            std::to_string(rows) + " rows, bucket_bytes " + std::to_string(bucket_bytes) +
                            " (one bucket per Linear)";
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    std::vector<std::unique_ptr<nn::Mlp>> mlps;
    std::vector<nn::Parameter*> params;
    for (int b = 0; b < blocks; ++b) {
      mlps.push_back(std::make_unique<nn::Mlp>("b" + std::to_string(b), h, f, seed + b));
      for (nn::Parameter* p : mlps.back()->Parameters()) params.push_back(p);
    }
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, params, bucket_bytes));
    nn::ZeroGrads(params);
    ddp->BeginStep();
    comm.ResetStats();
    tensor::Tensor x({rows, h});
    tensor::FillNormal(x, seed + 100 + rank, 1.f);
    for (auto& m : mlps) x = m->Forward(x);
    tensor::Tensor dy = x;
    for (int b = blocks - 1; b >= 0; --b) {
      dy = mlps[b]->Backward(dy);
      const int done = blocks - b;  // blocks whose backward ran, from the top
      std::vector<int> want(2 * done);
      for (int i = 0; i < 2 * done; ++i) want[i] = i;
      const bool ok =
          comm.stats().collective_calls == static_cast<uint64_t>(2 * done) && ddp->launched() == want;
      if (!ok)
        ADD_FAILURE()
            << "rank " << rank << " of " << input << ": after the backward of block " << b << " (" << done
            << " of " << blocks << " from the top), " << comm.stats().collective_calls
            << " all-reduces were enqueued and launched() is " << List(ddp->launched())
            << "; each block's two buckets must launch from the gradient hooks, in bucket order, as "
               "soon as their gradients are final (before the block below runs its backward); "
            << SeedNote();
      if (!ok) break;
    }
    RETURN_IF_ERROR(ddp->FinishGradientSync());
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
}

TEST(BucketedDataParallelHidden, FinishBeforeBackwardIsAnError) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t in = rng.Int(2, 8), out = rng.Int(2, 8);
  const bool bias = rng.Chance(0.5), forward = rng.Chance(0.5);
  const size_t bucket_bytes = static_cast<size_t>(rng.Int(4, 1 << 20));
  const uint64_t seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  const std::string input = std::to_string(n) + " ranks, one Linear(" + std::to_string(in) + " -> " +
                            std::to_string(out) + (bias ? ", bias" : ", no bias") + "), bucket_bytes " +
                            std::to_string(bucket_bytes) + (forward ? ", forward run" : ", no forward");
  auto st = comm::RunRanks(n, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Linear lin("lin", in, out, bias, seed);
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, lin.Parameters(), bucket_bytes));
    nn::ZeroGrads(lin.Parameters());
    ddp->BeginStep();
    if (forward) {
      tensor::Tensor x({3, in});
      tensor::FillNormal(x, seed, 1.f);
      lin.Forward(x);
    }
    const absl::Status s = ddp->FinishGradientSync();
    if (s.code() != absl::StatusCode::kFailedPrecondition)
      ADD_FAILURE() << input << ": FinishGradientSync without a backward returned " << s << "; "
                    << SeedNote();
    if (BucketedDataParallel::Create(comm, stream, lin.Parameters(), 0).ok())
      ADD_FAILURE() << input << ": Create with bucket_bytes 0 must be an error; " << SeedNote();
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
}

// data_parallel.h: the lowest bucket that did not launch, named by its first parameter (the first one
// AssignBuckets put in it), with the count of its gradients not ready. L chained d x d layers with bias,
// g = 1 or 2 layers per bucket ({l(L-1).bias, l(L-1).weight, ...}), and the backward of the top r layers
// only (r a multiple of g).
TEST(BucketedDataParallelHidden, FinishBeforeBackwardNamesTheBucket) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int layers = static_cast<int>(rng.Int(3, 6));
  const int64_t d = rng.Int(3, 6);
  const int per_bucket = static_cast<int>(rng.Int(1, 2));
  const size_t bucket_bytes = static_cast<size_t>(per_bucket * 4 * (d * d + d));
  // Up to two different numbers of top layers whose backward runs; whole buckets only (a multiple of g), so
  // the bucket named is one none of whose gradients is ready.
  std::vector<int> runs;
  for (int r = per_bucket; r < layers; r += per_bucket) runs.push_back(r);
  rng.Shuffle(runs);
  if (runs.size() > 2) runs.resize(2);
  for (int run : runs) {
    // The lowest bucket that cannot launch holds layer L-1-run; bucket j holds layers L-1-g j down.
    const int j = run / per_bucket;
    const int top = layers - 1 - per_bucket * j;
    const int in_bucket = std::min(per_bucket, top + 1);
    const int not_ready = 2 * (in_bucket - (run - per_bucket * j));
    const std::string want = "bucket " + std::to_string(j) + " (first parameter 'l" + std::to_string(top) +
                             ".bias') never launched: " + std::to_string(not_ready) +
                             " of its gradients are not ready; call FinishGradientSync after backward";
    const std::string input = std::to_string(n) + " ranks, " + std::to_string(layers) + " layers l0..l" +
                              std::to_string(layers - 1) + " of " + std::to_string(d) + " x " +
                              std::to_string(d) +
                              " with bias (parameters l0.weight, l0.bias, l1.weight, ...), bucket_bytes " +
                              std::to_string(bucket_bytes) + ", backward of the top " + std::to_string(run) +
                              " layer" + (run == 1 ? "" : "s") + " only";
    auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
      std::vector<std::unique_ptr<nn::Linear>> ls;
      std::vector<nn::Parameter*> params;
      for (int l = 0; l < layers; ++l) {
        ls.push_back(std::make_unique<nn::Linear>("l" + std::to_string(l), d, d, true, l + 1));
        params.push_back(&ls.back()->weight());
        params.push_back(ls.back()->bias());
      }
      ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, params, bucket_bytes));
      nn::ZeroGrads(params);
      ddp->BeginStep();
      tensor::Tensor x({2, d});
      tensor::Fill(x, 0.5f + rank);
      for (int l = layers - run; l < layers; ++l) x = ls[l]->Forward(x);
      for (int l = layers - 1; l >= layers - run; --l) x = ls[l]->Backward(x);
      const absl::Status s = ddp->FinishGradientSync();
      if (s.code() != absl::StatusCode::kFailedPrecondition) {
        ADD_FAILURE() << input << ": FinishGradientSync returned " << s << ", not FAILED_PRECONDITION; "
                      << SeedNote();
      }
      if (s.message() != want) {
        ADD_FAILURE()
            << input << ": FinishGradientSync said \"" << s.message() << "\" where the header's format "
            << "(the lowest bucket that did not launch, its FIRST parameter, the count of its gradients "
            << "not ready) gives \"" << want << "\"; " << SeedNote();
      }
      return stream.Synchronize();  // the launched buckets' all-reduces end before ddp goes
    });
    ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
  }
}

TEST(BucketedDataParallelHidden, BucketBuffersAreCommunicationMemory) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const nn::TinyLMConfig cfg = DrawTinyLM(rng, TinyLMRanges{8, 40, 4, 16, 8, 48, 1, 3}, rng.Chance(0.5));
  nn::TinyLM probe(cfg);
  const size_t bucket_bytes = DrawSmallBuckets(rng, ParamBytes(probe.Parameters()), 2);
  auto st = comm::RunRanks(n, [&](int, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    tensor::MemoryTracker tracker;
    tensor::ScopedMemoryTracker scope(&tracker);
    nn::TinyLM model(cfg);
    const size_t psi = nn::CountParameters(model.Parameters());
    ASSIGN_OR_RETURN(auto ddp, BucketedDataParallel::Create(comm, stream, model.Parameters(), bucket_bytes));
    if (tracker.current(tensor::MemCategory::kCommBuffers) != 4 * psi)
      ADD_FAILURE() << n << " ranks, " << Describe(cfg) << " (Psi = " << psi << "), bucket_bytes "
                    << bucket_bytes
                    << ": the flat bucket buffers (kCommBuffers) hold every gradient once, 4 Psi bytes; "
                    << SeedNote();
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << SeedNote();
}

}  // namespace
}  // namespace distlab::parallel
