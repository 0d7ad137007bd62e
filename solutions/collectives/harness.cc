// Lab 1 (collectives), stage C -- solution: the nccl-tests-style harness (sizes, checks, timing loop).
//
// Trust comes from two habits nccl-tests has: time many calls between two events after a warm-up (the first
// calls pay for page faults and thread wake-ups), and check the data of a separate, freshly initialized call
// -- timed iterations of an in-place all-reduce keep reducing their own output, so their data is not
// checkable.
#include "labs/collectives/harness.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "labs/collectives/halving_doubling.h"
#include "labs/collectives/ring.h"
#include "reference/base/status.h"

namespace distlab::collectives {
namespace {

using comm::DataType;
using comm::RedOp;

// CheckValue depends on the element index only modulo 55 (it uses i mod 11 and i mod 5).
constexpr size_t kPatternPeriod = 55;

// The op applied to two reals, as the runtime applies it to elements (avg accumulates as sum).
double Apply(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return a + b;
    case RedOp::kProd:
      return a * b;
    case RedOp::kMax:
      return std::max(a, b);
    case RedOp::kMin:
      return std::min(a, b);
  }
  return a;
}

// The reduction over n ranks of CheckValue at global index i, rounded/wrapped into the dtype.
double ReducedValue(RedOp op, DataType dtype, int n, size_t i) {
  double acc = CheckValue(op, 0, i);
  for (int p = 1; p < n; ++p) acc = Apply(op, acc, CheckValue(op, p, i));
  if (op == RedOp::kAvg) {
    acc = acc / n;
    if (!comm::IsFloating(dtype)) acc = std::trunc(acc);
  }
  return acc;
}

// `value` as the dtype stores it (wrapping integers, rounding 16-bit floats).
double AsStored(double value, DataType dtype) {
  alignas(8) unsigned char scratch[8];
  comm::SetElementFromDouble(scratch, 0, dtype, value);
  return comm::ElementAsDouble(scratch, 0, dtype);
}

double Tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kBF16:
      return 1e-2;
    case DataType::kF16:
      return 1e-3;
    case DataType::kF32:
      return 1e-5;
    case DataType::kF64:
      return 1e-12;
    default:
      return 0;
  }
}

bool Matches(double got, double expected, DataType dtype) {
  if (!comm::IsFloating(dtype)) return got == expected;
  // Written so that NaN (an unwritten 0xff.. buffer) never matches.
  return std::fabs(got - expected) <= Tolerance(dtype) * std::max(1.0, std::fabs(expected));
}

// Elements of the send and receive buffers of one rank.
struct Layout {
  size_t send_elems, recv_elems;
};

Layout BufferLayout(Collective c, size_t count, int n) {
  switch (c) {
    case Collective::kReduceScatter:
      return {n * count, count};
    case Collective::kAllGather:
      return {count, n * count};
    case Collective::kAllToAll:
      return {n * count, n * count};
    default:
      return {count, count};
  }
}

bool HasInPlace(Collective c) { return c != Collective::kAllToAll && c != Collective::kSendRecv; }

std::string Combination(const PerfOptions& o) {
  return std::string(CollectiveName(o.collective)) + " with algorithm " +
         std::string(AlgorithmName(o.algorithm));
}

}  // namespace

absl::StatusOr<std::vector<size_t>> SweepSizes(size_t min_bytes, size_t max_bytes, double factor) {
  if (min_bytes == 0) return absl::InvalidArgumentError("-b (minimum bytes) must be at least 1");
  if (min_bytes > max_bytes) {
    return absl::InvalidArgumentError("-b " + std::to_string(min_bytes) + " is larger than -e " +
                                      std::to_string(max_bytes));
  }
  if (min_bytes == max_bytes) return std::vector<size_t>{min_bytes};
  if (!(factor > 1)) {
    return absl::InvalidArgumentError("-f (step factor) must be > 1, got " + std::to_string(factor));
  }
  std::vector<size_t> sizes;
  for (double s = static_cast<double>(min_bytes); s <= static_cast<double>(max_bytes); s *= factor) {
    const size_t size = static_cast<size_t>(s);
    if (!sizes.empty() && size == sizes.back()) continue;  // a factor close to 1 on tiny sizes
    sizes.push_back(size);
  }
  return sizes;
}

absl::Status LaunchCollective(const PerfOptions& o, const void* send, void* recv, size_t count,
                              comm::Comm& comm, comm::Stream& stream) {
  const DataType t = o.dtype;
  if (o.algorithm == Algorithm::kBuiltin) {
    switch (o.collective) {
      case Collective::kAllReduce:
        return comm.AllReduce(send, recv, count, t, o.op, stream);
      case Collective::kReduceScatter:
        return comm.ReduceScatter(send, recv, count, t, o.op, stream);
      case Collective::kAllGather:
        return comm.AllGather(send, recv, count, t, stream);
      case Collective::kBroadcast:
        return comm.Broadcast(send, recv, count, t, o.root, stream);
      case Collective::kReduce:
        return comm.Reduce(send, recv, count, t, o.op, o.root, stream);
      case Collective::kAllToAll:
        return comm.AllToAll(send, recv, count, t, stream);
      case Collective::kSendRecv: {
        const int n = comm.size(), r = comm.rank();
        return comm::SendRecv(comm, send, count, (r + 1) % n, recv, count, (r + n - 1) % n, t, stream);
      }
    }
  }
  if (o.algorithm == Algorithm::kRing) {
    switch (o.collective) {
      case Collective::kAllReduce:
        return RingAllReduce(send, recv, count, t, o.op, comm, stream);
      case Collective::kReduceScatter:
        return RingReduceScatter(send, recv, count, t, o.op, comm, stream);
      case Collective::kAllGather:
        return RingAllGather(send, recv, count, t, comm, stream);
      case Collective::kBroadcast:
        return RingBroadcast(send, recv, count, t, o.root, comm, stream);
      case Collective::kAllToAll:
        return RingAllToAll(send, recv, count, t, comm, stream);
      default:
        break;
    }
  }
  if (o.algorithm == Algorithm::kHalvingDoubling && o.collective == Collective::kAllReduce) {
    return HalvingDoublingAllReduce(send, recv, count, t, o.op, comm, stream);
  }
  return absl::InvalidArgumentError("no implementation of " + Combination(o));
}

void FillCheckInput(const PerfOptions& o, int rank, size_t count, void* send) {
  const size_t elems = BufferLayout(o.collective, count, o.ranks).send_elems;
  for (size_t i = 0; i < elems; ++i) comm::SetElementFromDouble(send, i, o.dtype, CheckValue(o.op, rank, i));
}

int64_t CountWrong(const PerfOptions& o, int rank, size_t count, const void* recv) {
  const int n = o.ranks;
  const DataType t = o.dtype;
  auto wrong_if = [&](size_t j, double expected) {
    return Matches(comm::ElementAsDouble(recv, j, t), AsStored(expected, t), t) ? 0 : 1;
  };
  int64_t wrong = 0;
  switch (o.collective) {
    case Collective::kAllReduce:
    case Collective::kReduce:
    case Collective::kReduceScatter: {
      if (o.collective == Collective::kReduce && rank != o.root) return 0;  // only the root has a result
      std::vector<double> reduced(kPatternPeriod);
      for (size_t k = 0; k < kPatternPeriod; ++k) reduced[k] = AsStored(ReducedValue(o.op, t, n, k), t);
      // Reduce-scatter: output j is element rank*count + j of the whole array.
      const size_t base = o.collective == Collective::kReduceScatter ? rank * count : 0;
      for (size_t j = 0; j < count; ++j) {
        wrong += Matches(comm::ElementAsDouble(recv, j, t), reduced[(base + j) % kPatternPeriod], t) ? 0 : 1;
      }
      return wrong;
    }
    case Collective::kAllGather:
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < count; ++i) wrong += wrong_if(p * count + i, CheckValue(o.op, p, i));
      }
      return wrong;
    case Collective::kAllToAll:
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < count; ++i)
          wrong += wrong_if(p * count + i, CheckValue(o.op, p, rank * count + i));
      }
      return wrong;
    case Collective::kBroadcast:
      for (size_t i = 0; i < count; ++i) wrong += wrong_if(i, CheckValue(o.op, o.root, i));
      return wrong;
    case Collective::kSendRecv:
      for (size_t i = 0; i < count; ++i) wrong += wrong_if(i, CheckValue(o.op, (rank + n - 1) % n, i));
      return wrong;
  }
  return wrong;
}

absl::StatusOr<double> TimeCollective(const PerfOptions& o, size_t count, const void* send, void* recv,
                                      comm::Comm& comm, comm::Stream& stream) {
  if (o.iters < 1) return absl::InvalidArgumentError("-n (iterations) must be at least 1");
  if (o.warmup_iters < 0) return absl::InvalidArgumentError("-w (warm-up iterations) must be >= 0");
  for (int i = 0; i < o.warmup_iters; ++i)
    RETURN_IF_ERROR(LaunchCollective(o, send, recv, count, comm, stream));
  RETURN_IF_ERROR(stream.Synchronize());  // warm-up done before the clock starts
  comm::Event start, end;
  start.Record(stream);
  for (int i = 0; i < o.iters; ++i) RETURN_IF_ERROR(LaunchCollective(o, send, recv, count, comm, stream));
  end.Record(stream);
  RETURN_IF_ERROR(end.Synchronize());
  RETURN_IF_ERROR(stream.Synchronize());  // errors of the timed calls surface here
  ASSIGN_OR_RETURN(double ms, comm::Event::ElapsedMs(start, end));
  return ms / 1e3 / o.iters;
}

absl::StatusOr<PerfRow> MeasureSize(const PerfOptions& o, size_t bytes) {
  const int n = o.ranks;
  if (n < 1) return absl::InvalidArgumentError("the rank count must be at least 1, got " + std::to_string(n));
  if ((o.collective == Collective::kBroadcast || o.collective == Collective::kReduce) &&
      (o.root < 0 || o.root >= n)) {
    return absl::InvalidArgumentError("root " + std::to_string(o.root) + " is not a rank of " +
                                      std::to_string(n));
  }
  const size_t elem = comm::SizeOf(o.dtype);
  PerfRow row;
  row.count = CollectiveCount(o.collective, bytes, elem, n);
  row.bytes = static_cast<size_t>(CollectiveBytes(o.collective, row.count, elem, n));
  const Layout layout = BufferLayout(o.collective, row.count, n);
  const bool in_place = HasInPlace(o.collective);

  std::vector<double> t_oop(n, 0), t_ip(n, 0);
  std::vector<int64_t> w_oop(n, 0), w_ip(n, 0);
  auto body = [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    const size_t count = row.count;
    // Out of place.
    std::vector<char> send(layout.send_elems * elem), recv(layout.recv_elems * elem);
    FillCheckInput(o, rank, count, send.data());
    ASSIGN_OR_RETURN(t_oop[rank], TimeCollective(o, count, send.data(), recv.data(), comm, stream));
    if (o.check) {
      FillCheckInput(o, rank, count, send.data());
      std::memset(recv.data(), 0xff, recv.size());  // stale results must not pass the check
      RETURN_IF_ERROR(LaunchCollective(o, send.data(), recv.data(), count, comm, stream));
      RETURN_IF_ERROR(stream.Synchronize());
      w_oop[rank] = CountWrong(o, rank, count, recv.data());
    }
    if (!in_place) return absl::OkStatus();
    // In place: one buffer, aliased as comm.h states for the collective.
    std::vector<char> buf(std::max(layout.send_elems, layout.recv_elems) * elem);
    char* sendp = buf.data();
    char* recvp = buf.data();
    if (o.collective == Collective::kReduceScatter) recvp += rank * count * elem;
    if (o.collective == Collective::kAllGather) sendp += rank * count * elem;
    FillCheckInput(o, rank, count, sendp);
    ASSIGN_OR_RETURN(t_ip[rank], TimeCollective(o, count, sendp, recvp, comm, stream));
    if (o.check) {
      std::memset(buf.data(), 0xff, buf.size());
      FillCheckInput(o, rank, count, sendp);
      RETURN_IF_ERROR(LaunchCollective(o, sendp, recvp, count, comm, stream));
      RETURN_IF_ERROR(stream.Synchronize());
      w_ip[rank] = CountWrong(o, rank, count, recvp);
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(comm::FirstError(comm::RunRanks(n, body, o.comm)));

  auto point = [&](const std::vector<double>& t, const std::vector<int64_t>& w) {
    PerfPoint p;
    p.measured = true;
    const double seconds = std::accumulate(t.begin(), t.end(), 0.0) / n;  // nccl-tests averages ranks
    p.time_us = seconds * 1e6;
    p.algbw = AlgBw(row.bytes, seconds);
    p.busbw = BusBw(o.collective, n, row.bytes, seconds);
    p.wrong = o.check ? std::accumulate(w.begin(), w.end(), int64_t{0}) : -1;
    return p;
  };
  row.out_of_place = point(t_oop, w_oop);
  if (in_place) row.in_place = point(t_ip, w_ip);
  return row;
}

absl::StatusOr<std::vector<PerfRow>> RunPerf(const PerfOptions& o) {
  ASSIGN_OR_RETURN(std::vector<size_t> sizes, SweepSizes(o.min_bytes, o.max_bytes, o.step_factor));
  std::vector<PerfRow> rows;
  for (size_t bytes : sizes) {
    absl::StatusOr<PerfRow> row = MeasureSize(o, bytes);
    if (!row.ok()) {
      return absl::Status(row.status().code(),
                          "size " + std::to_string(bytes) + " bytes: " + std::string(row.status().message()));
    }
    rows.push_back(*row);
  }
  return rows;
}

}  // namespace distlab::collectives
