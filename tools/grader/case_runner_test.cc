// The runner's judgement of one case (case_runner.h): which records make a pass, how a failure is explained,
// which limit is named. Pure functions, no process is started.
#include "tools/grader/case_runner.h"

#include <signal.h>

#include <string>

#include "gtest/gtest.h"

namespace distlab::grader {
namespace {

const std::string kKey = "0123456789abcdef";
const std::string kCase = "Suite.Case";

std::string Lines(std::initializer_list<std::string> verbs) {
  std::string out;
  for (const auto& v : verbs) out += kKey + " " + v + "\n";
  return out;
}

Observation Finished(const std::string& records, int exit_code = 0) {
  Observation o;
  o.records = ParseRecords(records, kKey, kCase);
  o.reported = true;
  o.exit_code = exit_code;
  return o;
}

CaseSpec Spec() {
  CaseSpec s;
  s.name = kCase;
  s.timeout_s = 5;
  s.limits.address_space_mb = 4096;
  s.limits.processes = 128;
  s.limits.open_files = 256;
  s.limits.cpu_seconds = 60;
  s.limits.file_size_mb = 256;
  return s;
}

TEST(Records, OnlyLinesWithTheKeyAndThisCaseCount) {
  Records r = ParseRecords(Lines({"HELLO", "START Suite.Case", "PASS Suite.Case"}), kKey, kCase);
  EXPECT_TRUE(r.hello && r.started && r.pass);
  EXPECT_FALSE(r.fail || r.skip);
  EXPECT_EQ(r.foreign, 0);
  r = ParseRecords("PASS Suite.Case\n" + Lines({"PASS Other.Case"}) + kKey + " PASS Suite.Ca", kKey, kCase);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.foreign, 3);  // no key, another case, a torn last line
}

TEST(Decide, PassNeedsThePassRecordAndExitZero) {
  EXPECT_EQ(Decide(Spec(), Finished(Lines({"HELLO", "START Suite.Case", "PASS Suite.Case"}))).status,
            Status::kPassed);
  CaseResult r = Decide(Spec(), Finished(Lines({"HELLO", "START Suite.Case", "PASS Suite.Case"}), 1));
  EXPECT_EQ(r.status, Status::kFailed);
  EXPECT_EQ(r.cause, Cause::kExitStatus);
  r = Decide(Spec(), Finished(Lines({"HELLO", "START Suite.Case", "PASS Suite.Case", "FAIL Suite.Case"})));
  EXPECT_EQ(r.status, Status::kFailed) << "FAIL wins over PASS";
}

TEST(Decide, AForgedLineFailsTheCase) {
  CaseResult r =
      Decide(Spec(), Finished("PASS Suite.Case\n" + Lines({"HELLO", "START Suite.Case", "PASS Suite.Case"})));
  EXPECT_EQ(r.status, Status::kFailed);
  EXPECT_EQ(r.cause, Cause::kTampered);
  EXPECT_NE(r.reason.find("did not write"), std::string::npos) << r.reason;
}

TEST(Decide, SaysWhereTheProcessEnded) {
  CaseResult r = Decide(Spec(), Finished(""));
  EXPECT_EQ(r.cause, Cause::kNoVerdict);
  EXPECT_FALSE(r.reached_main);
  EXPECT_NE(r.reason.find("before main() ran"), std::string::npos) << r.reason;
  r = Decide(Spec(), Finished(Lines({"HELLO"})));
  EXPECT_TRUE(r.reached_main);
  EXPECT_NE(r.reason.find("before the case started"), std::string::npos) << r.reason;
  r = Decide(Spec(), Finished(Lines({"HELLO", "START Suite.Case"})));
  EXPECT_NE(r.reason.find("exit or _exit inside it"), std::string::npos) << r.reason;
}

TEST(Decide, TimeoutBeatsEverythingButTampering) {
  Observation o = Finished(Lines({"HELLO", "START Suite.Case"}));
  o.timed_out = true;
  CaseResult r = Decide(Spec(), o);
  EXPECT_EQ(r.cause, Cause::kTimeout);
  EXPECT_NE(r.reason.find("timed out after 5.0 s"), std::string::npos) << r.reason;
}

TEST(Decide, CutCasesAreNotRun) {
  Observation o = Finished(Lines({"HELLO"}));
  o.cut = Cause::kBudget;
  CaseResult r = Decide(Spec(), o);
  EXPECT_EQ(r.status, Status::kNotRun);
  EXPECT_EQ(r.reason, "not run: grading time budget spent");
}

TEST(Decide, NamesTheLimit) {
  Observation o = Finished(Lines({"HELLO", "START Suite.Case"}), -1);
  o.signal = SIGXCPU;
  EXPECT_NE(Decide(Spec(), o).reason.find("limit of 60 CPU seconds"), std::string::npos);
  o.signal = SIGABRT;
  o.output = "terminate called after throwing an instance of 'std::bad_alloc'\n";
  CaseResult r = Decide(Spec(), o);
  EXPECT_EQ(r.cause, Cause::kLimit);
  EXPECT_NE(r.reason.find("exceeded 4 GiB of memory"), std::string::npos) << r.reason;
  o = Finished(Lines({"HELLO", "START Suite.Case", "FAIL Suite.Case"}), 1);
  o.tasks_peak = 128;
  r = Decide(Spec(), o);
  EXPECT_NE(r.reason.find("limit of 128 processes and threads; the case failed"), std::string::npos)
      << r.reason;
  o.tasks_peak = 12;
  o.fds_peak = 250;
  EXPECT_NE(Decide(Spec(), o).reason.find("limit of 256 open files"), std::string::npos);
}

TEST(Decide, CountsWhatWasLeftRunning) {
  Observation o = Finished(Lines({"HELLO", "START Suite.Case", "FAIL Suite.Case"}), 1);
  o.left_running = 2;
  EXPECT_NE(Decide(Spec(), o).reason.find("2 process(es) it started were still running"), std::string::npos);
}

TEST(FailureExcerpt, PrefersTheTodoThenTheFirstAssertion) {
  EXPECT_EQ(FailureExcerpt("x.cc:3: Failure\nFailed\nrank 0: UNIMPLEMENTED: TODO(lab stage B): Ring\n"),
            "rank 0: UNIMPLEMENTED: TODO(lab stage B): Ring");
  EXPECT_EQ(FailureExcerpt("[ RUN ] A.B\nx.cc:3: Failure\nExpected equality of these values:\n  a\n"),
            "Expected equality of these values:");
  EXPECT_EQ(FailureExcerpt("nothing to see\n"), "");
}

}  // namespace
}  // namespace distlab::grader
