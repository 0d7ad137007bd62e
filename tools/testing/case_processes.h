// Running the current test case as the ranks of a multi-process run, for tests that check a program on one
// rank per process (the gloo backend) without a separate worker binary: the ranks are copies of the test
// binary itself, so whatever variant is being tested (the student's files, a stub, a mutant) is what runs.
//
//   TEST(Suite, OnProcesses) {
//     if (const std::string out = distlab::testing::RankResultPath(); !out.empty()) {
//       ...  // this process is one rank: comm::CommInitFromEnv(), the work, then write the result to `out`
//       return;
//     }
//     ASSERT_OK_AND_ASSIGN(auto ranks, distlab::testing::RunCaseAsProcesses(8, Scaled(60s)));
//     ...  // ranks[r].result: what rank r wrote; ranks[r].output: its stdout and stderr
//   }
//
// Each child gets this process's environment (less Bazel's per-test report files) plus what
// ./labctl launch gives a rank: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, DISTLAB_BACKEND=gloo, and a
// FileStore rendezvous (DISTLAB_STORE=file:DIR, no port to pick); and DISTLAB_RANK_RESULT, the file the rank
// writes. It runs this case only (--gtest_filter). The record channel of the grader never reaches a child
// (gtest_main.cc takes it from the environment and marks it close-on-exec).
#ifndef DISTLAB_TOOLS_TESTING_CASE_PROCESSES_H_
#define DISTLAB_TOOLS_TESTING_CASE_PROCESSES_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace distlab::testing {

struct RankProcess {
  int exit_code = -1;  // -1 when a signal ended it
  std::string output;  // stdout and stderr
  std::string result;  // the file it wrote at RankResultPath(), "" when none
};

// Starts n ranks and waits for them until `deadline`. An error when one cannot be started, or when some
// still run at the deadline (they are killed; the message names them, with their output). The exit codes
// are the caller's to check.
absl::StatusOr<std::vector<RankProcess>> RunCaseAsProcesses(int n, std::chrono::milliseconds deadline);

// In a rank started by RunCaseAsProcesses: the file to write its result to. "" in any other process.
std::string RankResultPath();

}  // namespace distlab::testing

#endif  // DISTLAB_TOOLS_TESTING_CASE_PROCESSES_H_
