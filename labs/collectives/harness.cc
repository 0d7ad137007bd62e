// Lab 1 (collectives), stage C: the nccl-tests-style harness -- sizes, checks, the timing loop.
// Your code goes here. Read harness.h (the row recipe) first. Public tests: bandwidth_test.cc.
// The command line around it is perf.cc: bazel run //labs/collectives:perf -- --help
#include "labs/collectives/harness.h"

#include "labs/collectives/ring.h"
#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage C): SweepSizes.
//   1. min 0, min > max: INVALID_ARGUMENT naming -b / -e. min == max: that one size.
//   2. factor <= 1 (with min < max): INVALID_ARGUMENT naming -f.
//   3. min, min*factor, min*factor^2, ... while <= max (no duplicates when rounding to whole bytes).
absl::StatusOr<std::vector<size_t>> SweepSizes(size_t min_bytes, size_t max_bytes, double factor) {
  return Unimplemented("collectives", "C", "SweepSizes");
}

// TODO(collectives stage C): LaunchCollective -- dispatch on options.collective and options.algorithm:
//   kBuiltin -> comm.AllReduce / ReduceScatter / AllGather / Broadcast / Reduce / AllToAll; sendrecv is a
//   grouped Send to r+1 and Recv from r-1. kRing -> the Ring* functions of ring.h (no reduce, no sendrecv).
//   kHalvingDoubling -> all_reduce only. Anything else: INVALID_ARGUMENT naming the combination.
absl::Status LaunchCollective(const PerfOptions& options, const void* send, void* recv, size_t count,
                              comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "C", "LaunchCollective");
}

// TODO(collectives stage C): FillCheckInput -- CheckValue(op, rank, i) at every element i of the send
// buffer (how many elements is that, per collective?), via comm::SetElementFromDouble.
void FillCheckInput(const PerfOptions& options, int rank, size_t count, void* send) {
  throw NotImplementedError("collectives", "C", "FillCheckInput");
}

// TODO(collectives stage C): CountWrong.
//   1. For each output element, the expected value from every rank's CheckValue: reduce them (avg: divide
//      by n; integers truncate) for the reductions; pick the right rank and element for the others.
//   2. Convert the expected value into the dtype before comparing (SetElementFromDouble then
//      ElementAsDouble): u8 products wrap, bf16 rounds.
//   3. Integers compare exactly; floats within the relative tolerance of harness.h. A NaN never matches.
//   4. Reduce: only the root's output counts (other ranks: 0).
int64_t CountWrong(const PerfOptions& options, int rank, size_t count, const void* recv) {
  throw NotImplementedError("collectives", "C", "CountWrong");
}

// TODO(collectives stage C): TimeCollective.
//   1. iters < 1 or warmup_iters < 0: INVALID_ARGUMENT naming -n / -w.
//   2. warmup_iters calls, then synchronize (the warm-up must not be timed).
//   3. Record a start Event, launch iters calls, record an end Event, synchronize; check every status.
//   4. Return Event::ElapsedMs(start, end) as seconds per call.
absl::StatusOr<double> TimeCollective(const PerfOptions& options, size_t count, const void* send, void* recv,
                                      comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "C", "TimeCollective");
}

// TODO(collectives stage C): MeasureSize (see the recipe at the top of harness.h).
//   1. count = CollectiveCount(bytes); row.bytes = CollectiveBytes(count).
//   2. comm::RunRanks(options.ranks, ..., options.comm): per rank, out of place then in place (not for
//      all_to_all and sendrecv): fill, time, and when options.check run one fresh checked call into a
//      buffer pre-filled with garbage (0xff bytes) and count the wrong elements.
//   3. time = average over ranks; algbw, busbw from bandwidth.h; wrong = sum over ranks (-1 unchecked).
absl::StatusOr<PerfRow> MeasureSize(const PerfOptions& options, size_t bytes) {
  return Unimplemented("collectives", "C", "MeasureSize");
}

// TODO(collectives stage C): RunPerf -- MeasureSize for every size of SweepSizes; prefix an error with
// the size ("size 1024 bytes: ...").
absl::StatusOr<std::vector<PerfRow>> RunPerf(const PerfOptions& options) {
  return Unimplemented("collectives", "C", "RunPerf");
}

}  // namespace distlab::collectives
