// Hooks for test harnesses, not for programs: they change what every later CommOptions and CommInit of the
// process does. A lab never needs them; comm.h is the API.
//
// //reference/comm:test_backend uses both: with DISTLAB_TEST_BACKEND=nccl it moves a test binary's default
// communicators to the nccl backend with host staging, and ends a case that asks for more ranks than the
// machine has GPUs so that it is reported skipped.
#ifndef DISTLAB_REFERENCE_COMM_TESTING_H_
#define DISTLAB_REFERENCE_COMM_TESTING_H_

#include <functional>

#include "reference/comm/comm.h"

namespace distlab::comm {

// Sets what DefaultBackend() and DefaultHostStaging() return, so that CommOptions made afterwards start from
// them. Options made before keep what they had.
void SetDefaultBackend(Backend backend, bool host_staging);

// Calls `observer` with the rank count and the backend at the start of every CommInitAll and CommInitRank
// of this process, after the rank counts are checked (an empty function removes it).
void SetCommInitObserver(std::function<void(int nranks, Backend backend)> observer);

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_TESTING_H_
