// Lab 1 (collectives), stage C: the nccl-tests-style harness -- sizes, checks, the timing loop.
// Your code goes here. Read harness.h (what a row is) and notes/01-collectives.md §5 first. Public tests:
// bandwidth_test.cc.
// The command line around it is perf.cc: bazel run //labs/collectives:perf -- --help
#include "labs/collectives/harness.h"

#include "labs/collectives/ring.h"
#include "reference/base/status.h"

namespace distlab::collectives {

// TODO(collectives stage C): SweepSizes -- contract: harness.h (SweepSizes, with its examples and errors);
//   idea: notes/01-collectives.md §5.
absl::StatusOr<std::vector<size_t>> SweepSizes(size_t min_bytes, size_t max_bytes, double factor) {
  return Unimplemented("collectives", "C", "SweepSizes");
}

// TODO(collectives stage C): LaunchCollective -- contract: harness.h (LaunchCollective); idea:
//   notes/01-collectives.md §5.
//   Tools: the Comm methods (comm.h), the Ring* functions (ring.h), HalvingDoublingAllReduce (include
//   labs/collectives/halving_doubling.h), comm::SendRecv for sendrecv.
absl::Status LaunchCollective(const PerfOptions& options, const void* send, void* recv, size_t count,
                              comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "C", "LaunchCollective");
}

// TODO(collectives stage C): FillCheckInput -- contract: harness.h (FillCheckInput, CheckValue); idea:
//   notes/01-collectives.md §5.
//   Tools: comm::SetElementFromDouble. How many elements does each collective's send buffer hold?
void FillCheckInput(const PerfOptions& options, int rank, size_t count, void* send) {
  throw NotImplementedError("collectives", "C", "FillCheckInput");
}

// TODO(collectives stage C): CountWrong -- contract: harness.h (CountWrong, CheckValue); idea:
//   notes/01-collectives.md §2 (what each collective computes) and §5.
//   Tools: comm::SetElementFromDouble and comm::ElementAsDouble, comm::IsFloating.
//   Output element j of rank `rank`: which ranks' inputs, at which indices, decide its value?
int64_t CountWrong(const PerfOptions& options, int rank, size_t count, const void* recv) {
  throw NotImplementedError("collectives", "C", "CountWrong");
}

// TODO(collectives stage C): TimeCollective -- contract: harness.h (TimeCollective); idea:
//   notes/01-collectives.md §5 ("How the harness earns trust").
//   Tools: comm::Event (Record on the stream; Event::ElapsedMs(start, end)), Stream::Synchronize.
//   What must have finished before the first Event is recorded, and what must not have?
absl::StatusOr<double> TimeCollective(const PerfOptions& options, size_t count, const void* send, void* recv,
                                      comm::Comm& comm, comm::Stream& stream) {
  return Unimplemented("collectives", "C", "TimeCollective");
}

// TODO(collectives stage C): MeasureSize -- contract: harness.h (the file comment, MeasureSize); idea:
//   notes/01-collectives.md §5.
//   Tools: comm::RunRanks(options.ranks, body, options.comm) and comm::FirstError; bandwidth.h for S,
//   count, algbw and busbw. The buffer sizes and in-place aliasing of each collective are comm.h's.
absl::StatusOr<PerfRow> MeasureSize(const PerfOptions& options, size_t bytes) {
  return Unimplemented("collectives", "C", "MeasureSize");
}

// TODO(collectives stage C): RunPerf -- contract: harness.h (RunPerf).
absl::StatusOr<std::vector<PerfRow>> RunPerf(const PerfOptions& options) {
  return Unimplemented("collectives", "C", "RunPerf");
}

}  // namespace distlab::collectives
