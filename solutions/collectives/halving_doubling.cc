// Lab 1 (collectives), stage D (stretch) -- solution: recursive halving-doubling all-reduce.
//
// For n = 2^k ranks. Halving (a reduce-scatter): at distance d = n/2, n/4, ..., 1 each rank exchanges half
// of its current range with partner r XOR d -- it keeps one half, sends the other -- and reduces the half
// it keeps. After k steps rank r owns one n-th of the array, fully reduced. Doubling (an all-gather) undoes
// the steps in reverse order, each exchange doubling the owned range.
//
// Cost: 2 log2(n) messages instead of the ring's 2(n-1), the same 2(n-1)/n * S bytes per rank -- the
// latency-bound winner at small S on power-of-two counts.
#include "labs/collectives/halving_doubling.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reference/base/status.h"

namespace distlab::collectives {

absl::Status HalvingDoublingAllReduce(const void* send, void* recv, size_t count, comm::DataType dtype,
                                      comm::RedOp op, comm::Comm& comm, comm::Stream& stream) {
  const int n = comm.size(), r = comm.rank();
  if (n & (n - 1)) {
    return absl::InvalidArgumentError("HalvingDoublingAllReduce: needs a power-of-two rank count, got " +
                                      std::to_string(n));
  }
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return absl::InvalidArgumentError("HalvingDoublingAllReduce: null buffer");
  }
  if (count == 0) return absl::OkStatus();
  const size_t elem = comm::SizeOf(dtype);
  char* buf = static_cast<char*>(recv);
  if (send != recv) {
    stream.Enqueue([buf, send, count, elem] {
      std::memcpy(buf, send, count * elem);
      return absl::OkStatus();
    });
  }
  auto tmp = std::make_shared<std::vector<char>>((count + 1) / 2 * elem);
  auto exchange = [&](size_t s_off, size_t s_len, size_t r_off, size_t r_len, int peer, char* rbuf) {
    return comm::SendRecv(comm, buf + s_off * elem, s_len, peer, rbuf ? rbuf : buf + r_off * elem, r_len,
                          peer, dtype, stream);
  };

  size_t lo = 0, hi = count;
  struct Level {
    size_t lo, hi;  // the range before the halving step
    bool lower;     // this rank kept its lower half
  };
  std::vector<Level> ranges;
  for (int d = n / 2; d >= 1; d /= 2) {
    const int partner = r ^ d;
    const size_t mid = lo + (hi - lo) / 2;
    const bool lower = (r & d) == 0;
    const size_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const size_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    ranges.push_back({lo, hi, lower});
    RETURN_IF_ERROR(exchange(give_lo, give_hi - give_lo, keep_lo, keep_hi - keep_lo, partner, tmp->data()));
    if (keep_hi > keep_lo) {
      char* acc = buf + keep_lo * elem;
      const char* in = tmp->data();
      const size_t len = keep_hi - keep_lo;
      stream.Enqueue([=] {
        comm::ReduceInto(acc, in, len, dtype, op);
        return absl::OkStatus();
      });
    }
    lo = keep_lo;
    hi = keep_hi;
  }
  if (op == comm::RedOp::kAvg && hi > lo) {
    char* acc = buf + lo * elem;
    const size_t len = hi - lo;
    stream.Enqueue([=] {
      comm::FinishReduce(acc, len, dtype, op, n);
      return absl::OkStatus();
    });
  }
  for (int d = 1; d < n; d *= 2) {
    const Level level = ranges.back();
    ranges.pop_back();
    // The partner owns the other part of [level.lo, level.hi).
    const size_t other_lo = level.lower ? hi : level.lo, other_hi = level.lower ? level.hi : lo;
    RETURN_IF_ERROR(exchange(lo, hi - lo, other_lo, other_hi - other_lo, r ^ d, nullptr));
    lo = level.lo;
    hi = level.hi;
  }
  stream.Enqueue([tmp] { return absl::OkStatus(); });
  return absl::OkStatus();
}

}  // namespace distlab::collectives
