// Lab 6 stage C, reference solution: expert parallelism with a counts all-to-all, then a token all-to-all
// MUTANT (counts_after_tokens): the counts all-to-all runs after the tokens: receives are posted with sizes not yet known (zero).
// built from grouped Send/Recv (its sizes differ per peer, which the fixed-size AllToAll cannot carry).
#include "labs/moe/expert_parallel.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace distlab::moe {
namespace {

// One variable-size exchange: send[p] rows to peer p, recv[p] rows from peer p (rows of h floats). The own
// block is copied, not sent. Sends and receives are grouped so no pair of ranks waits on the other.
absl::Status ExchangeRows(const std::vector<float>& send, const std::vector<int64_t>& send_rows,
                          std::vector<float>& recv, const std::vector<int64_t>& recv_rows, int64_t h,
                          comm::Comm& comm, comm::Stream& stream) {
  const int n = comm.size(), me = comm.rank();
  std::vector<int64_t> send_off(n + 1, 0), recv_off(n + 1, 0);
  for (int p = 0; p < n; ++p) send_off[p + 1] = send_off[p] + send_rows[p] * h;
  for (int p = 0; p < n; ++p) recv_off[p + 1] = recv_off[p] + recv_rows[p] * h;
  recv.assign(recv_off[n], 0.f);
  std::copy_n(send.data() + send_off[me], send_rows[me] * h, recv.data() + recv_off[me]);
  if (absl::Status s = comm::GroupStart(); !s.ok()) return s;
  absl::Status first;
  for (int p = 0; p < n && first.ok(); ++p) {
    if (p == me) continue;
    if (send_rows[p] > 0) first = comm.Send(send.data() + send_off[p], send_rows[p] * h, comm::DataType::kF32, p, stream);
    if (first.ok() && recv_rows[p] > 0) {
      first = comm.Recv(recv.data() + recv_off[p], recv_rows[p] * h, comm::DataType::kF32, p, stream);
    }
  }
  absl::Status end = comm::GroupEnd();
  if (!first.ok()) return first;
  if (!end.ok()) return end;
  return stream.Synchronize();
}

}  // namespace

absl::StatusOr<Tensor> ExpertParallelForward(const Tensor& x, const Routing& routing, const ExpertFn& local_expert,
                                             comm::Comm& comm, comm::Stream& stream, EpStats* stats) {
  const int n = comm.size(), me = comm.rank();
  const int E = routing.experts, k = routing.top_k;
  if (E % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExpertParallelForward: E = ", E, " experts do not divide over n = ", n, " ranks"));
  }
  if (x.ndim() != 2 || x.dim(0) != routing.tokens) {
    return absl::InvalidArgumentError(absl::StrCat("ExpertParallelForward: x must be [T=", routing.tokens,
                                                   ", h], got ", tensor::ShapeString(x.shape())));
  }
  const int64_t T = routing.tokens, h = x.dim(1);
  const int El = E / n;  // experts per rank

  // 1. My kept slots grouped by expert (so by destination rank, then expert), tokens in order.
  std::vector<std::vector<int64_t>> slots(E);
  for (int64_t s = 0; s < T * k; ++s) {
    if (routing.kept[s]) slots[routing.expert[s]].push_back(s);
  }
  std::vector<int32_t> send_counts(E), recv_counts(E);
  for (int e = 0; e < E; ++e) send_counts[e] = static_cast<int32_t>(slots[e].size());


  // 3. Tokens: pack rows in (destination, expert, token) order and exchange them.
  std::vector<int64_t> send_rows(n, 0), recv_rows(n, 0);
  for (int e = 0; e < E; ++e) send_rows[e / El] += send_counts[e];
  for (int i = 0; i < E; ++i) recv_rows[i / El] += recv_counts[i];
  std::vector<float> send;
  send.reserve(std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0}) * h);
  const float* xs = x.f32();
  for (int e = 0; e < E; ++e) {
    for (int64_t s : slots[e]) send.insert(send.end(), xs + (s / k) * h, xs + (s / k + 1) * h);
  }
  std::vector<float> recv;
  if (absl::Status s = ExchangeRows(send, send_rows, recv, recv_rows, h, comm, stream); !s.ok()) return s;
  if (absl::Status s = comm.AllToAll(send_counts.data(), recv_counts.data(), El, comm::DataType::kI32, stream);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = stream.Synchronize(); !s.ok()) return s;

  // 4. Each local expert runs once over the rows of every peer. In `recv`, peer p's block holds its rows for
  //    local experts 0..El-1 in order.
  std::vector<int64_t> block(n + 1, 0);
  for (int p = 0; p < n; ++p) block[p + 1] = block[p] + recv_rows[p];
  std::vector<float> results(recv.size(), 0.f);
  for (int j = 0; j < El; ++j) {
    std::vector<int64_t> where;  // row indices into recv for expert j
    for (int p = 0; p < n; ++p) {
      int64_t start = block[p];
      for (int jj = 0; jj < j; ++jj) start += recv_counts[p * El + jj];
      for (int64_t r = 0; r < recv_counts[p * El + j]; ++r) where.push_back(start + r);
    }
    if (where.empty()) continue;
    Tensor rows({static_cast<int64_t>(where.size()), h});
    for (size_t r = 0; r < where.size(); ++r) std::copy_n(recv.data() + where[r] * h, h, rows.f32() + r * h);
    Tensor out = local_expert(me * El + j, rows);
    if (out.ndim() != 2 || out.dim(0) != rows.dim(0) || out.dim(1) != h) {
      return absl::InvalidArgumentError(absl::StrCat("ExpertParallelForward: expert ", me * El + j, " returned ",
                                                     tensor::ShapeString(out.shape()), " for ",
                                                     tensor::ShapeString(rows.shape())));
    }
    for (size_t r = 0; r < where.size(); ++r) std::copy_n(out.f32() + r * h, h, results.data() + where[r] * h);
  }

  // 5. Results travel back along the reverse path: what I received from p, I return to p.
  std::vector<float> back;
  if (absl::Status s = ExchangeRows(results, recv_rows, back, send_rows, h, comm, stream); !s.ok()) return s;

  // 6. Combine in the original order: `back` is laid out as `send` was, so walk the slots the same way.
  Tensor y = x;
  float* ys = y.f32();
  int64_t row = 0;
  for (int e = 0; e < E; ++e) {
    for (int64_t s : slots[e]) {
      const float g = routing.gate[s];
      float* yt = ys + (s / k) * h;
      for (int64_t c = 0; c < h; ++c) yt[c] += g * back[row * h + c];
      ++row;
    }
  }
  if (stats) {
    stats->rows_sent = std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0}) - send_rows[me];
    stats->rows_received = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0}) - recv_rows[me];
  }
  return y;
}

}  // namespace distlab::moe
