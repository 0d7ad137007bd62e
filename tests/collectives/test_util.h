// Helpers of the hidden Lab 1 tests: inputs for every dtype and op, buffer comparison with per-dtype
// tolerances, short descriptions of a drawn input for failure messages, and a short communicator timeout so
// that a deadlock fails in seconds with the runtime's message naming the ranks.
//
// Most cases draw their inputs (dtypes, ops, rank counts, counts, placements, roots, the data itself) from a
// testing::CaseRandom, so each grading checks other inputs (tools/testing/test_support.h). A failure names
// the input that broke the property and ends with testing::SeedNote(); it never prints an expected array.
#ifndef DISTLAB_TESTS_COLLECTIVES_TEST_UTIL_H_
#define DISTLAB_TESTS_COLLECTIVES_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reference/comm/comm.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives::testutil {

// Communicator options of the tests: a 3 s watchdog (scaled under sanitizers by the runtime).
comm::CommOptions Options();

// `elems` elements of `dtype` for rank `rank`, chosen so that comparisons are meaningful for `op`:
// integers are random over their range (wrapping is part of the contract); f32/f64 random in [-2, 2]
// ([0.5, 1.5] for prod); bf16/f16 small integers (powers of two for prod), exact in any order. The same
// (seed, rank, dtype, op) give the same data on every machine (SplitMix64, no library distribution).
std::vector<char> Input(comm::DataType dtype, comm::RedOp op, int rank, size_t elems, uint64_t seed);

// Relative tolerance (to max(1, |expected|)) of a float dtype; 0 for integers (compared bit for bit).
double Tolerance(comm::DataType dtype);

// "" when `got` equals `want` (elements of dtype, with Tolerance), else where they first differ:
// "element 7 of 13 differs from <reference> (got 2.5, <reference> gives 1.75); 4 elements differ".
// One element's values, never the arrays: the data is drawn, so they do not carry over to another grading.
std::string Compare(const void* got, const void* want, size_t elems, comm::DataType dtype,
                    std::string_view reference = "the built-in");

// "f32 max on 5 ranks, count 13, in place" style description of a drawn input for failure messages.
std::string Label(comm::DataType dtype, comm::RedOp op, int n, size_t count, bool in_place);
// The same without the op (data movement only: all-gather, broadcast, all-to-all).
std::string Label(comm::DataType dtype, int n, size_t count, bool in_place);

// Joins per-rank complaints ("" for a good rank) and the runtime's statuses into a short message: the
// first `max_lines` lines ("rank 2: ..."), then how many more ranks complained.
std::string Verdict(const std::vector<absl::Status>& statuses, const std::vector<std::string>& why,
                    size_t max_lines = 2);

// --- drawing --------------------------------------------------------------------------------------------

// A count in [lo, hi] that n does not divide (the chunks of a ring differ in size); lo <= hi, n >= 2, and
// [lo, hi] must hold such a count.
size_t UnevenCount(testing::CaseRandom& rng, int n, size_t lo, size_t hi);
// A multiple of n in [lo, hi] (every chunk the same size); [lo, hi] must hold one.
size_t EvenCount(testing::CaseRandom& rng, int n, size_t lo, size_t hi);
// k distinct values of [lo, hi] in random order (k <= hi - lo + 1).
std::vector<int> Distinct(testing::CaseRandom& rng, int lo, int hi, int k);
// A dtype / an op, uniformly.
comm::DataType AnyDtype(testing::CaseRandom& rng);
comm::RedOp AnyOp(testing::CaseRandom& rng);

// One point-to-point call a RecordingComm saw, in call order (which is stream order).
struct P2pCall {
  bool send = false;  // Send, else Recv
  int peer = 0;
  size_t count = 0;
  const void* buf = nullptr;
};

// A Comm that forwards every call to `inner` and records its Send and Recv calls: the order in which a
// rank issues them is the order its stream runs them, which is what pipelining is about.
class RecordingComm : public comm::Comm {
 public:
  explicit RecordingComm(comm::Comm& inner) : inner_(inner) {}
  const std::vector<P2pCall>& calls() const { return calls_; }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  comm::Backend backend() const override { return inner_.backend(); }
  const comm::CommOptions& options() const override { return inner_.options(); }
  absl::Status AllReduce(const void* s, void* r, size_t c, comm::DataType t, comm::RedOp op,
                         comm::Stream& st) override {
    return inner_.AllReduce(s, r, c, t, op, st);
  }
  absl::Status Broadcast(const void* s, void* r, size_t c, comm::DataType t, int root,
                         comm::Stream& st) override {
    return inner_.Broadcast(s, r, c, t, root, st);
  }
  absl::Status Reduce(const void* s, void* r, size_t c, comm::DataType t, comm::RedOp op, int root,
                      comm::Stream& st) override {
    return inner_.Reduce(s, r, c, t, op, root, st);
  }
  absl::Status AllGather(const void* s, void* r, size_t c, comm::DataType t, comm::Stream& st) override {
    return inner_.AllGather(s, r, c, t, st);
  }
  absl::Status ReduceScatter(const void* s, void* r, size_t c, comm::DataType t, comm::RedOp op,
                             comm::Stream& st) override {
    return inner_.ReduceScatter(s, r, c, t, op, st);
  }
  absl::Status AllToAll(const void* s, void* r, size_t c, comm::DataType t, comm::Stream& st) override {
    return inner_.AllToAll(s, r, c, t, st);
  }
  absl::Status Send(const void* buf, size_t c, comm::DataType t, int peer, comm::Stream& st) override {
    calls_.push_back({true, peer, c, buf});
    return inner_.Send(buf, c, t, peer, st);
  }
  absl::Status Recv(void* buf, size_t c, comm::DataType t, int peer, comm::Stream& st) override {
    calls_.push_back({false, peer, c, buf});
    return inner_.Recv(buf, c, t, peer, st);
  }
  absl::Status Destroy() override { return inner_.Destroy(); }
  absl::Status Abort() override { return inner_.Abort(); }
  absl::Status GetAsyncError() override { return inner_.GetAsyncError(); }
  bool released() const override { return inner_.released(); }
  absl::StatusOr<std::unique_ptr<comm::Comm>> Split(int color, int key) override {
    return inner_.Split(color, key);
  }
  comm::Stats stats() const override { return inner_.stats(); }
  void ResetStats() override { inner_.ResetStats(); }

 private:
  comm::Comm& inner_;
  std::vector<P2pCall> calls_;
};

}  // namespace distlab::collectives::testutil

#endif  // DISTLAB_TESTS_COLLECTIVES_TEST_UTIL_H_
