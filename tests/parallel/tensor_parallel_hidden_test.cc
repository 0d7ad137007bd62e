// Hidden tests of Lab 4 stage B: tensor-parallel shards and the Megatron MLP against the dense MLP.
//
// Every case draws its inputs -- matrix shapes, rank counts (within what the case's name says), rows, weights
// and biases -- from the grading seed (tools/testing/test_support.h: CaseRandom); a failure names the inputs
// that broke it and ends with the seed to draw them again.
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/tensor_parallel.h"
#include "reference/base/status.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

using distlab::testing::CaseRandom;
using distlab::testing::SeedNote;
using tensor::Tensor;

// A dense Linear whose weight element W[o][i] is its row-major index o * in + i and whose bias b[o] is
// 100 + o: a shard's values say where they came from.
nn::Linear Numbered(int64_t in, int64_t out) {
  nn::Linear lin("d", in, out, true, 1);
  for (int64_t i = 0; i < in * out; ++i) lin.weight().value.Set(i, static_cast<float>(i));
  for (int64_t i = 0; i < out; ++i) lin.bias()->value.Set(i, 100.f + i);
  return lin;
}

std::string NumberedLinear(int64_t in, int64_t out) {
  return "Linear(in " + std::to_string(in) + ", out " + std::to_string(out) +
         ") with W[o][i] = o * in + i (W is [out, in]) and b[o] = 100 + o";
}

std::string Shape(const tensor::Shape& s) {
  std::ostringstream o;
  o << "{";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "}";
  return o.str();
}

TEST(ShardsHidden, ColumnShardTakesOutputRowsAndBias) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t in = rng.Int(2, 6), rows = rng.Int(1, 4), out = rows * n;
  nn::Linear dense = Numbered(in, out);
  for (int r = 0; r < n; ++r) {
    const std::string input = "ColumnShard(" + NumberedLinear(in, out) + ", rank " + std::to_string(r) +
                              " of " + std::to_string(n) + ")";
    ASSERT_OK_AND_ASSIGN(auto s, ColumnShard(dense, r, n));
    ASSERT_EQ(s->weight().value.shape(), (tensor::Shape{rows, in}))
        << input << ": the shard's weight has shape " << Shape(s->weight().value.shape()) << "; "
        << SeedNote();
    for (int64_t i = 0; i < rows * in; ++i) {
      if (s->weight().value.Get(i) != static_cast<float>(r * rows * in + i)) {
        ADD_FAILURE() << input << ": shard weight [" << i / in << "][" << i % in << "] is "
                      << s->weight().value.Get(i)
                      << "; a column-parallel rank holds a block of output rows of W (tensor_parallel.h); "
                      << SeedNote();
        break;
      }
    }
    ASSERT_NE(s->bias(), nullptr) << input << ": the column shard keeps its slice of the bias; "
                                  << SeedNote();
    for (int64_t i = 0; i < rows; ++i) {
      if (s->bias()->value.Get(i) != 100.f + static_cast<float>(r * rows + i)) {
        ADD_FAILURE() << input << ": shard bias [" << i << "] is " << s->bias()->value.Get(i)
                      << "; the bias is split like the output rows; " << SeedNote();
        break;
      }
    }
  }
}

TEST(ShardsHidden, RowShardTakesInputColumnsWithoutBias) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t out = rng.Int(2, 5), cols = rng.Int(1, 4), in = cols * n;
  nn::Linear dense = Numbered(in, out);
  for (int r = 0; r < n; ++r) {
    const std::string input = "RowShard(" + NumberedLinear(in, out) + ", rank " + std::to_string(r) + " of " +
                              std::to_string(n) + ")";
    ASSERT_OK_AND_ASSIGN(auto s, RowShard(dense, r, n));
    ASSERT_EQ(s->weight().value.shape(), (tensor::Shape{out, cols}))
        << input << ": the shard's weight has shape " << Shape(s->weight().value.shape()) << "; "
        << SeedNote();
    for (int64_t i = 0; i < out * cols; ++i) {
      const int64_t o = i / cols, c = i % cols;
      if (s->weight().value.Get(i) != static_cast<float>(o * in + r * cols + c)) {
        ADD_FAILURE() << input << ": shard weight [" << o << "][" << c << "] is " << s->weight().value.Get(i)
                      << "; a row-parallel rank holds a block of input columns of every row of W "
                         "(tensor_parallel.h); "
                      << SeedNote();
        break;
      }
    }
    if (s->bias() != nullptr)
      ADD_FAILURE() << input << ": the row-parallel shard keeps no bias; " << SeedNote();
  }
}

TEST(ShardsHidden, IndivisibleOrBadRankIsAnError) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 5));
  // Split dimensions that n does not divide (the other one does), and a rank past the last.
  const int64_t out = n * rng.Int(1, 3) + rng.Int(1, n - 1), in = n * rng.Int(1, 3) + rng.Int(1, n - 1);
  nn::Linear odd_out = Numbered(n * rng.Int(1, 3), out), odd_in = Numbered(in, n * rng.Int(1, 3));
  const int rank = static_cast<int>(rng.Int(0, n - 1));
  const absl::Status col = ColumnShard(odd_out, rank, n).status();
  if (col.code() != absl::StatusCode::kInvalidArgument)
    ADD_FAILURE() << "ColumnShard of a Linear with out = " << out << " over " << n << " ranks (rank " << rank
                  << "): out is not divisible by n; it returned " << col << "; " << SeedNote();
  const absl::Status row = RowShard(odd_in, rank, n).status();
  if (row.code() != absl::StatusCode::kInvalidArgument)
    ADD_FAILURE() << "RowShard of a Linear with in = " << in << " over " << n << " ranks (rank " << rank
                  << "): in is not divisible by n; it returned " << row << "; " << SeedNote();
  const int64_t fine_out = n * rng.Int(1, 3);
  nn::Linear fine = Numbered(rng.Int(1, 4), fine_out);
  const int past = static_cast<int>(rng.Int(n, 2 * n));
  if (ColumnShard(fine, past, n).ok())
    ADD_FAILURE() << "ColumnShard of a Linear with out = " << fine_out << ", rank " << past << " of " << n
                  << ": there is no such rank; " << SeedNote();
}

// The Megatron MLP on n ranks against the dense MLP. kForward checks the output and the forward
// communication (one all-reduce of N h floats, g); kBackward runs the same forward unchecked, then checks
// the input gradient, every shard's gradient (a slice of the dense gradient) and the backward communication
// (one all-reduce of N h floats, f). Separate cases, so a failure says which direction is wrong.
enum class Direction { kForward, kBackward };

// The TP sums n partial products of f/n terms where the dense MLP sums f terms at once: float32
// reassociation, about 1e-7 x (the terms' magnitude, O(1) here) per term, far below this tolerance; the
// mistakes caught are off by whole partial sums or by (n - 1) biases.
constexpr float kTol = 1e-5f;

// "" when `got` is within kTol x (1 + |want|) of `want` everywhere, else the first element that is not.
std::string Compare(const std::vector<float>& got, const std::vector<float>& want, int64_t cols) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " elements where the dense MLP has " + std::to_string(want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= kTol * (1.f + std::fabs(want[i])))) {
      std::ostringstream o;
      o.precision(7);
      o << "element [" << i / cols << "][" << i % cols << "] is " << got[i] << " where the dense MLP has "
        << want[i];
      return o.str();
    }
  }
  return "";
}

void CheckMegatronMlp(int n, Direction dir) {
  CaseRandom rng;
  const int64_t h = rng.Int(4, 12), f = n * rng.Int(2, 6), rows = rng.Int(2, 7);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  const std::string input = std::to_string(n) + " ranks, Mlp(hidden " + std::to_string(h) + ", inner " +
                            std::to_string(f) + ", seed " + std::to_string(seed) +
                            ") with non-zero biases, x and dy of " + std::to_string(rows) + " rows";
  nn::Mlp dense("mlp", h, f, seed);
  tensor::FillNormal(dense.fc1().bias()->value, seed + 1, 0.3f);
  tensor::FillNormal(dense.fc2().bias()->value, seed + 2, 0.3f);
  Tensor x({rows, h}), dy({rows, h});
  tensor::FillNormal(x, seed + 3, 1.f);
  tensor::FillNormal(dy, seed + 4, 1.f);
  nn::ZeroGrads(dense.Parameters());
  const Tensor y_want = dense.Forward(x);
  const Tensor dx_want = dense.Backward(dy);
  const int64_t fr = f / n;
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    const std::string where = "rank " + std::to_string(rank) + " of " + input;
    nn::Mlp copy("mlp", h, f, seed);
    tensor::Copy(dense.fc1().bias()->value, copy.fc1().bias()->value);
    tensor::Copy(dense.fc2().bias()->value, copy.fc2().bias()->value);
    ASSIGN_OR_RETURN(auto tp, TensorParallelMlp::Create(comm, stream, copy));
    std::vector<nn::Parameter*> params = tp->Parameters();
    if (params.size() != 4) return absl::InternalError("expected 4 parameters");
    nn::ZeroGrads(params);
    comm.ResetStats();
    ASSIGN_OR_RETURN(Tensor y, tp->Forward(x));
    if (dir == Direction::kForward) {
      const std::string diff = Compare(y.ToVector(), y_want.ToVector(), h);
      if (!diff.empty()) ADD_FAILURE() << where << ": forward output " << diff << "; " << SeedNote();
      if (comm.stats().collective_calls != 1u)
        ADD_FAILURE() << where << ": forward made " << comm.stats().collective_calls
                      << " collective calls, not one all-reduce; " << SeedNote();
      if (comm.stats().collective_bytes != static_cast<uint64_t>(rows * h * 4))
        ADD_FAILURE() << where << ": forward's collectives carried " << comm.stats().collective_bytes
                      << " bytes; the one all-reduce carries N h floats; " << SeedNote();
      return absl::OkStatus();
    }
    comm.ResetStats();
    ASSIGN_OR_RETURN(Tensor dx, tp->Backward(dy));
    std::string diff = Compare(dx.ToVector(), dx_want.ToVector(), h);
    if (!diff.empty()) ADD_FAILURE() << where << ": backward dx " << diff << "; " << SeedNote();
    if (comm.stats().collective_calls != 1u)
      ADD_FAILURE() << where << ": backward made " << comm.stats().collective_calls
                    << " collective calls, not one all-reduce; " << SeedNote();
    if (comm.stats().collective_bytes != static_cast<uint64_t>(rows * h * 4))
      ADD_FAILURE() << where << ": backward's collectives carried " << comm.stats().collective_bytes
                    << " bytes; the one all-reduce carries N h floats; " << SeedNote();
    // fc1 shard: rows [rank f/n, (rank+1) f/n) of dW1 [f, h] and db1.
    const std::vector<float> w1 = dense.fc1().weight().grad.ToVector(),
                             b1 = dense.fc1().bias()->grad.ToVector(),
                             w2 = dense.fc2().weight().grad.ToVector();
    diff = Compare(params[0]->grad.ToVector(),
                   std::vector<float>(w1.begin() + rank * fr * h, w1.begin() + (rank + 1) * fr * h), h);
    if (!diff.empty())
      ADD_FAILURE() << where << ": fc1 weight gradient (this rank's rows of the dense dW1) " << diff << "; "
                    << SeedNote();
    diff = Compare(params[1]->grad.ToVector(),
                   std::vector<float>(b1.begin() + rank * fr, b1.begin() + (rank + 1) * fr), fr);
    if (!diff.empty())
      ADD_FAILURE() << where << ": fc1 bias gradient (this rank's slice of the dense db1) " << diff << "; "
                    << SeedNote();
    // fc2 shard: columns [rank f/n, ...) of every row of dW2 [h, f].
    std::vector<float> w2_cols;
    for (int64_t o = 0; o < h; ++o) {
      w2_cols.insert(w2_cols.end(), w2.begin() + o * f + rank * fr, w2.begin() + o * f + (rank + 1) * fr);
    }
    diff = Compare(params[2]->grad.ToVector(), w2_cols, fr);
    if (!diff.empty())
      ADD_FAILURE() << where << ": fc2 weight gradient (this rank's columns of the dense dW2) " << diff
                    << "; " << SeedNote();
    diff = Compare(params[3]->grad.ToVector(), dense.fc2().bias()->grad.ToVector(), h);
    if (!diff.empty())
      ADD_FAILURE() << where << ": fc2 bias gradient (all of the dense db2) " << diff << "; " << SeedNote();
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
}

TEST(TensorParallelMlpHidden, ForwardEqualsDenseOnTwoRanks) { CheckMegatronMlp(2, Direction::kForward); }
TEST(TensorParallelMlpHidden, BackwardEqualsDenseOnTwoRanks) { CheckMegatronMlp(2, Direction::kBackward); }
TEST(TensorParallelMlpHidden, ForwardEqualsDenseOnFourRanks) { CheckMegatronMlp(4, Direction::kForward); }
TEST(TensorParallelMlpHidden, BackwardEqualsDenseOnFourRanks) { CheckMegatronMlp(4, Direction::kBackward); }

// With W2 = 0 the dense MLP's output is its fc2 bias on every row: the row-parallel partial sums are all
// zero, so the tensor-parallel output is exactly b2 when the bias is added once, after the all-reduce
// (tensor_parallel.h), and n b2 when every rank adds it before the sum.
TEST(TensorParallelMlpHidden, RowParallelBiasIsAddedOnce) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t h = rng.Int(4, 10), f = n * rng.Int(2, 5), rows = rng.Int(1, 4);
  const uint64_t seed = static_cast<uint64_t>(rng.Int(1, 1 << 30));
  nn::Mlp dense("mlp", h, f, seed);
  tensor::FillNormal(dense.fc1().bias()->value, seed + 1, 0.3f);
  for (int64_t i = 0; i < h; ++i) {  // |b2| in [0.1, 1]: n b2 is far from b2
    dense.fc2().bias()->value.Set(i, static_cast<float>((rng.Chance(0.5) ? 1 : -1) * rng.Real(0.1, 1.0)));
  }
  tensor::Fill(dense.fc2().weight().value, 0.f);
  Tensor x({rows, h});
  tensor::FillNormal(x, seed + 3, 1.f);
  const Tensor y_want = dense.Forward(x);
  const std::vector<float> b2 = dense.fc2().bias()->value.ToVector();
  for (int64_t i = 0; i < rows * h; ++i) ASSERT_EQ(y_want.Get(i), b2[i % h]) << SeedNote();  // the premise
  const std::string input = std::to_string(n) + " ranks, Mlp(hidden " + std::to_string(h) + ", inner " +
                            std::to_string(f) + ") with W2 = 0, " + std::to_string(rows) +
                            (rows == 1 ? " row" : " rows");
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    nn::Mlp copy("mlp", h, f, seed);
    tensor::Copy(dense.fc1().bias()->value, copy.fc1().bias()->value);
    tensor::Copy(dense.fc2().bias()->value, copy.fc2().bias()->value);
    tensor::Fill(copy.fc2().weight().value, 0.f);
    ASSIGN_OR_RETURN(auto tp, TensorParallelMlp::Create(comm, stream, copy));
    ASSIGN_OR_RETURN(Tensor y, tp->Forward(x));
    if (!(tensor::MaxAbsDiff(y, y_want) < 1e-6f))
      ADD_FAILURE() << "rank " << rank << " of " << input
                    << ": the output must be b2 itself; y[0][0] = " << y.Get(0) << ", b2[0] = " << b2[0]
                    << " (the row-parallel bias is added once, after the all-reduce); " << SeedNote();
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << input << "; " << SeedNote();
}

TEST(TensorParallelMlpHidden, OperatorsSumOverRanks) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(2, 4));
  const int64_t la = rng.Int(1, 6), lb = rng.Int(1, 6);
  // Whole numbers: every order of summation gives the same float.
  std::vector<std::vector<float>> a(n, std::vector<float>(la)), b(n, std::vector<float>(lb));
  std::vector<float> sum_a(la, 0.f), sum_b(lb, 0.f);
  for (int r = 0; r < n; ++r) {
    for (auto& v : a[r]) v = static_cast<float>(rng.Int(-50, 50));
    for (auto& v : b[r]) v = static_cast<float>(rng.Int(-50, 50));
    for (int64_t i = 0; i < la; ++i) sum_a[i] += a[r][i];
    for (int64_t i = 0; i < lb; ++i) sum_b[i] += b[r][i];
  }
  // "{3, -7, 12}": element i on every rank.
  auto column = [&](const std::vector<std::vector<float>>& v, int64_t i) {
    std::ostringstream o;
    o << "{";
    for (int r = 0; r < n; ++r) o << (r ? ", " : "") << v[r][i];
    o << "}";
    return o.str();
  };
  auto st = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    Tensor ta = Tensor::FromVector({la}, a[rank]), tb = Tensor::FromVector({lb}, b[rank]);
    RETURN_IF_ERROR(GForward(comm, stream, ta));
    RETURN_IF_ERROR(FBackward(comm, stream, tb));
    for (int64_t i = 0; i < la; ++i) {
      if (ta.Get(i) != sum_a[i]) {
        ADD_FAILURE() << "rank " << rank << " of " << n << ", GForward on " << la
                      << " whole numbers per rank: element " << i << " is " << ta.Get(i)
                      << ", not the sum over the ranks of their elements " << i << ", " << column(a, i)
                      << "; " << SeedNote();
        break;
      }
    }
    for (int64_t i = 0; i < lb; ++i) {
      if (tb.Get(i) != sum_b[i]) {
        ADD_FAILURE() << "rank " << rank << " of " << n << ", FBackward on " << lb
                      << " whole numbers per rank: element " << i << " is " << tb.Get(i)
                      << ", not the sum over the ranks of their elements " << i << ", " << column(b, i)
                      << "; " << SeedNote();
        break;
      }
    }
    return absl::OkStatus();
  });
  ASSERT_OK(comm::FirstError(st)) << n << " ranks; " << SeedNote();
}

}  // namespace
}  // namespace distlab::parallel
