// Lab 1 (collectives), stage C: an nccl-tests-style benchmark harness -- the sweep of sizes, the data
// checks (#wrong) and the timing loop. The command-line tool around it (perf.cc: flags, table, footer,
// JSON, the physical bound) is given; the parts that decide whether a number can be trusted are yours.
//
// Vocabulary: n = ranks, S = bytes (CollectiveBytes), count = NCCL's count argument.
//
// One measured size ("row") runs n ranks (comm::RunRanks with options.comm), each with its own buffers
// (sizes and in-place aliasing as comm.h states for the collective), out of place and then in place (no
// in-place variant for all_to_all and sendrecv). For each variant a rank times the calls (TimeCollective),
// and when checking, it also runs one separate call on freshly filled input (FillCheckInput) into an output
// pre-filled with garbage (0xff bytes), synchronizes, and counts the wrong elements (CountWrong): timed
// in-place calls keep reducing their own output, so their data cannot be checked. The row's time is the
// average over ranks; algbw and busbw come from bandwidth.h; #wrong sums the ranks (-1 when unchecked).
#ifndef DISTLAB_LABS_COLLECTIVES_HARNESS_H_
#define DISTLAB_LABS_COLLECTIVES_HARNESS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labs/collectives/bandwidth.h"
#include "reference/comm/comm.h"

namespace distlab::collectives {

enum class Algorithm {
  kBuiltin,          // the runtime's own collective (comm.AllReduce, ...)
  kRing,             // this lab's Ring* functions (stage B)
  kHalvingDoubling,  // stage D; all_reduce only
};

inline std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kBuiltin:
      return "builtin";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kHalvingDoubling:
      return "hd";
  }
  return "?";
}

struct PerfOptions {
  Collective collective = Collective::kAllReduce;
  Algorithm algorithm = Algorithm::kBuiltin;
  int ranks = 4;
  size_t min_bytes = 8;                         // -b
  size_t max_bytes = 32 << 20;                  // -e
  double step_factor = 2;                       // -f
  int iters = 20;                               // -n
  int warmup_iters = 5;                         // -w
  bool check = true;                            // -c
  comm::DataType dtype = comm::DataType::kF32;  // -d
  comm::RedOp op = comm::RedOp::kSum;           // -o
  int root = 0;                                 // broadcast and reduce
  comm::CommOptions comm;                       // the communicators' options (watchdog timeout, ...)
};

// One column group of a row: nccl-tests' "time algbw busbw #wrong".
struct PerfPoint {
  bool measured = false;  // false where the variant does not exist (in-place all_to_all and sendrecv)
  double time_us = 0;     // average over ranks of the time per call
  double algbw = 0;       // GB/s
  double busbw = 0;       // GB/s
  int64_t wrong = -1;     // elements that differ from the expected values, summed over ranks; -1 unchecked
};

struct PerfRow {
  size_t bytes = 0;  // S as reported (CollectiveBytes of `count`)
  size_t count = 0;  // NCCL's count argument
  PerfPoint out_of_place, in_place;
};

// The check pattern, given: the value rank `rank` puts at element i of its (whole) send buffer. Small
// integers, so sums over up to 64 ranks are exact in every dtype; for prod only 1s and 2s (products are
// powers of two; u8 wraps to 0 beyond 2^7, which the expected value must reproduce).
inline double CheckValue(comm::RedOp op, int rank, size_t i) {
  if (op == comm::RedOp::kProd) return ((rank + i) % 5 == 0) ? 2.0 : 1.0;
  return static_cast<double>((rank * 7 + i * 3) % 11);
}

// --- Stage C: what you implement ------------------------------------------------------------------------

// The sizes nccl-tests sweeps for -b min -e max -f factor: min, min*factor, ... while <= max (max itself
// included when the sequence hits it). For a factor that is not an integer (nccl-tests accepts only integer
// factors; this harness takes any factor > 1): keep the running product s_0 = min, s_{k+1} = s_k * factor
// in double precision, take each size as floor(s_k) (truncated, not rounded, and not truncated before the
// next multiplication), and skip a size equal to the one before it. Stop once s_k > max. Examples:
//   SweepSizes(8, 128, 2)   -> {8, 16, 32, 64, 128}
//   SweepSizes(8, 100, 1.5) -> {8, 12, 18, 27, 40, 60, 91}     (40.5 -> 40, 60.75 -> 60, 91.125 -> 91)
//   SweepSizes(1, 4, 1.2)   -> {1, 2, 3}                        (1.2, 1.44 and 1.728 all give 1 again)
// Errors (INVALID_ARGUMENT naming the flag) for min == 0, min > max, or factor <= 1 when min < max.
// Test: Harness.SweepSizes* (public: Harness.SweepSizesNonIntegerFactor).
absl::StatusOr<std::vector<size_t>> SweepSizes(size_t min_bytes, size_t max_bytes, double factor);

// Launches one call of options.collective with options.algorithm on this rank (buffers as comm.h states
// for that collective, `count` as NCCL's count argument). UNIMPLEMENTED-free: every collective works with
// kBuiltin (sendrecv, which has no Comm method, as nccl-tests' sendrecv_perf: every rank sends `count`
// elements to rank r+1 and receives `count` from rank r-1, in one group); kRing covers all but reduce and
// sendrecv, with the Ring* functions of ring.h; kHalvingDoubling only all_reduce. Other combinations are
// INVALID_ARGUMENT naming them.
absl::Status LaunchCollective(const PerfOptions& options, const void* send, void* recv, size_t count,
                              comm::Comm& comm, comm::Stream& stream);

// Fills rank `rank`'s send buffer for a checked call (CheckValue at each element, converted to the dtype).
// `count` is NCCL's count argument; the buffer is as large as the collective's send buffer.
void FillCheckInput(const PerfOptions& options, int rank, size_t count, void* send);

// The number of elements of rank `rank`'s output that differ from what the collective must produce from
// the check pattern of every rank. The expected value is the exact result (avg: the sum divided by n,
// truncated toward zero for integer dtypes, as comm::FinishReduce does) stored as the dtype would store it
// (comm::SetElementFromDouble then comm::ElementAsDouble: u8 wraps, bf16 and f16 round). Integer dtypes
// compare exactly; floats match when |got - expected| <= tol * max(1, |expected|), with tol 1e-2 for bf16,
// 1e-3 for f16, 1e-5 for f32, 1e-12 for f64, and a NaN never matches. For reduce only the root's output
// counts (0 on every other rank). Test: Harness.CountWrong*.
int64_t CountWrong(const PerfOptions& options, int rank, size_t count, const void* recv);

// The timing loop on one rank: warmup_iters calls, then iters calls between two Events on `stream`; returns
// the seconds per call. Every call is checked for errors, and the stream synchronized before returning.
// iters < 1 or warmup_iters < 0 is INVALID_ARGUMENT naming the flag (-n, -w). Test: Harness.TimeCollective*.
absl::StatusOr<double> TimeCollective(const PerfOptions& options, size_t count, const void* send, void* recv,
                                      comm::Comm& comm, comm::Stream& stream);

// One row: S = `bytes` rounded down to what the collective can move (CollectiveCount), measured out of
// place and in place as the file comment describes. Test: Harness.MeasureSize*.
absl::StatusOr<PerfRow> MeasureSize(const PerfOptions& options, size_t bytes);

// Every size of the sweep, one row each; an error keeps its code and names the size that failed:
// "size 1024 bytes: <the error>".
absl::StatusOr<std::vector<PerfRow>> RunPerf(const PerfOptions& options);

}  // namespace distlab::collectives

#endif  // DISTLAB_LABS_COLLECTIVES_HARNESS_H_
