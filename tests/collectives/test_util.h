// Helpers of the hidden Lab 1 tests: inputs for every dtype and op, buffer comparison with per-dtype
// tolerances, and a short communicator timeout so that a deadlock fails in seconds with the runtime's
// message naming the ranks.
#ifndef DISTLAB_TESTS_COLLECTIVES_TEST_UTIL_H_
#define DISTLAB_TESTS_COLLECTIVES_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "reference/comm/comm.h"

namespace distlab::collectives::testutil {

// Communicator options of the tests: a 3 s watchdog (scaled under sanitizers by the runtime).
comm::CommOptions Options();

// `elems` elements of `dtype` for rank `rank`, chosen so that comparisons are meaningful for `op`:
// integers are random over their range (wrapping is part of the contract); f32/f64 random in [-2, 2]
// ([0.5, 1.5] for prod); bf16/f16 small integers (powers of two for prod), exact in any order.
std::vector<char> Input(comm::DataType dtype, comm::RedOp op, int rank, size_t elems, uint64_t seed);

// Relative tolerance (to max(1, |expected|)) of a float dtype; 0 for integers (compared bit for bit).
double Tolerance(comm::DataType dtype);

// "" when `got` equals `want` (elements of dtype, with Tolerance), else the first difference and the count.
std::string Compare(const void* got, const void* want, size_t elems, comm::DataType dtype);

// "f32/sum/n=4/count=1000/in-place" style label for failure messages.
std::string Label(comm::DataType dtype, comm::RedOp op, int n, size_t count, bool in_place);

}  // namespace distlab::collectives::testutil

#endif  // DISTLAB_TESTS_COLLECTIVES_TEST_UTIL_H_
