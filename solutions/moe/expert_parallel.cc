// Lab 6 stage C, reference solution: expert parallelism with a counts all-to-all, then a token all-to-all
// built from grouped Send/Recv (its sizes differ per peer, which the fixed-size AllToAll cannot carry), and
// its backward along the same path in reverse.
#include "labs/moe/expert_parallel.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

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
  RETURN_IF_ERROR(comm::Grouped([&]() -> absl::Status {
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      if (send_rows[p] > 0) {
        RETURN_IF_ERROR(
            comm.Send(send.data() + send_off[p], send_rows[p] * h, comm::DataType::kF32, p, stream));
      }
      if (recv_rows[p] > 0) {
        RETURN_IF_ERROR(
            comm.Recv(recv.data() + recv_off[p], recv_rows[p] * h, comm::DataType::kF32, p, stream));
      }
    }
    return absl::OkStatus();
  }));
  return stream.Synchronize();
}

// Row indices into the received block for each local expert j: peer p's block holds its rows for local
// experts 0..El-1 in order, so expert j's rows are a run inside every peer's block.
std::vector<std::vector<int64_t>> LocalExpertRows(const std::vector<int32_t>& recv_counts,
                                                  const std::vector<int64_t>& recv_rows, int El) {
  const int n = static_cast<int>(recv_rows.size());
  std::vector<std::vector<int64_t>> where(El);
  int64_t start = 0;
  for (int p = 0; p < n; ++p) {
    for (int j = 0; j < El; ++j) {
      for (int64_t r = 0; r < recv_counts[p * El + j]; ++r) where[j].push_back(start + r);
      start += recv_counts[p * El + j];
    }
  }
  return where;
}

// Runs `fn` once per local expert on its gathered rows and scatters the results to the same rows of `out`.
absl::Status RunLocalExperts(const std::function<Tensor(int, const Tensor&)>& fn,
                             const std::vector<std::vector<int64_t>>& where, const std::vector<float>& in,
                             std::vector<float>& out, int first_expert, int64_t h, const char* what) {
  out.assign(in.size(), 0.f);
  for (size_t j = 0; j < where.size(); ++j) {
    if (where[j].empty()) continue;
    Tensor rows({static_cast<int64_t>(where[j].size()), h});
    for (size_t r = 0; r < where[j].size(); ++r)
      std::copy_n(in.data() + where[j][r] * h, h, rows.f32() + r * h);
    const int e = first_expert + static_cast<int>(j);
    Tensor res = fn(e, rows);
    if (res.ndim() != 2 || res.dim(0) != rows.dim(0) || res.dim(1) != h) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expert ", e, " returned ",
                                                     tensor::ShapeString(res.shape()), " for ",
                                                     tensor::ShapeString(rows.shape())));
    }
    for (size_t r = 0; r < where[j].size(); ++r)
      std::copy_n(res.f32() + r * h, h, out.data() + where[j][r] * h);
  }
  return absl::OkStatus();
}

}  // namespace

// What the forward keeps for the backward: the plan of both exchanges and the expert outputs that came back.
struct EpCache::Impl {
  int64_t tokens = 0, hidden = 0;
  int top_k = 0;
  std::vector<std::vector<int64_t>> slots;    // per expert: my kept slots t*k+j, token order (= send order)
  std::vector<int64_t> send_rows, recv_rows;  // per peer
  std::vector<std::vector<int64_t>> where;    // per local expert: its rows in the received block
  std::vector<float> back;                    // expert outputs of my slots, in send order [rows, h]
};

absl::StatusOr<Tensor> ExpertParallelForward(const Tensor& x, const Routing& routing,
                                             const ExpertFn& local_expert, comm::Comm& comm,
                                             comm::Stream& stream, EpStats* stats, EpCache* cache) {
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

  // 2. Counts first: recv_counts[p*El + j] = rows peer p sends to my local expert j.
  if (absl::Status s =
          comm.AllToAll(send_counts.data(), recv_counts.data(), El, comm::DataType::kI32, stream);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = stream.Synchronize(); !s.ok()) return s;

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

  // 4. Each local expert runs once over the rows of every peer.
  std::vector<std::vector<int64_t>> where = LocalExpertRows(recv_counts, recv_rows, El);
  std::vector<float> results;
  if (absl::Status s =
          RunLocalExperts(local_expert, where, recv, results, me * El, h, "ExpertParallelForward");
      !s.ok()) {
    return s;
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
  if (cache) {
    auto c = std::make_shared<EpCache::Impl>();
    c->tokens = T, c->hidden = h, c->top_k = k;
    c->slots = std::move(slots), c->send_rows = std::move(send_rows), c->recv_rows = std::move(recv_rows);
    c->where = std::move(where), c->back = std::move(back);
    cache->impl = std::move(c);
  }
  return y;
}

absl::StatusOr<EpGrads> ExpertParallelBackward(const Tensor& dy, const Routing& routing, const EpCache& cache,
                                               const ExpertBackwardFn& local_expert_backward,
                                               comm::Comm& comm, comm::Stream& stream, EpStats* stats) {
  if (!cache.impl) {
    return absl::FailedPreconditionError(
        "ExpertParallelBackward: the cache holds no forward (pass it to "
        "ExpertParallelForward first)");
  }
  const EpCache::Impl& c = *cache.impl;
  const int64_t T = c.tokens, h = c.hidden;
  const int k = c.top_k, n = comm.size(), me = comm.rank();
  if (dy.ndim() != 2 || dy.dim(0) != T || dy.dim(1) != h || routing.tokens != T || routing.top_k != k) {
    return absl::InvalidArgumentError(absl::StrCat("ExpertParallelBackward: dy must be [", T, ", ", h,
                                                   "] of the cached forward, got ",
                                                   tensor::ShapeString(dy.shape())));
  }
  const int El = routing.experts / n;

  // 1. On the token's rank: the gate gradient (it needs the expert output, which came back in the forward)
  //    and the expert's output gradient gate * dy[t], packed in the forward's send order.
  EpGrads grads;
  grads.dgate.assign(T * k, 0.f);
  std::vector<float> send;
  send.reserve(c.back.size());
  const float* dys = dy.f32();
  int64_t row = 0;
  for (const auto& q : c.slots) {
    for (int64_t s : q) {
      const float* dyt = dys + (s / k) * h;
      const float* o = c.back.data() + row * h;
      const float g = routing.gate[s];
      double dot = 0;
      for (int64_t col = 0; col < h; ++col) dot += dyt[col] * o[col], send.push_back(g * dyt[col]);
      grads.dgate[s] = static_cast<float>(dot);
      ++row;
    }
  }

  // 2. Output gradients travel to the experts' ranks, with the forward's dispatch sizes.
  std::vector<float> recv;
  if (absl::Status s = ExchangeRows(send, c.send_rows, recv, c.recv_rows, h, comm, stream); !s.ok()) return s;

  // 3. Each local expert's backward, once, on its rows in its forward order: its parameter gradients sum the
  //    contributions of every rank's tokens here, on the owner.
  std::vector<float> dxrows;
  if (absl::Status s =
          RunLocalExperts(local_expert_backward, c.where, recv, dxrows, me * El, h, "ExpertParallelBackward");
      !s.ok()) {
    return s;
  }

  // 4. Input gradients travel back to the tokens' ranks.
  std::vector<float> back;
  if (absl::Status s = ExchangeRows(dxrows, c.recv_rows, back, c.send_rows, h, comm, stream); !s.ok())
    return s;

  // 5. dx = dy (the residual) + each kept slot's input gradient, in the original order.
  grads.dx = dy;
  float* dxs = grads.dx.f32();
  row = 0;
  for (const auto& q : c.slots) {
    for (int64_t s : q) {
      float* dxt = dxs + (s / k) * h;
      for (int64_t col = 0; col < h; ++col) dxt[col] += back[row * h + col];
      ++row;
    }
  }
  if (stats) {
    stats->rows_sent = std::accumulate(c.send_rows.begin(), c.send_rows.end(), int64_t{0}) - c.send_rows[me];
    stats->rows_received =
        std::accumulate(c.recv_rows.begin(), c.recv_rows.end(), int64_t{0}) - c.recv_rows[me];
  }
  return grads;
}

}  // namespace distlab::moe
