// The grading seed of test_support.h: GradingSeed() is DISTLAB_GRADING_SEED as the process started with it,
// kDefaultGradingSeed when unset, and a malformed value ends the binary at start naming the variable. Each
// case that needs another environment runs this binary again (its Child case) with that environment.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

extern char** environ;

namespace distlab::testing {
namespace {

struct ChildRun {
  int exit_code = -1;
  std::string output;
};

// Runs this binary's Child case with DISTLAB_GRADING_SEED set to `seed` (nullptr: unset) and the rest of
// this process's environment; returns its exit code and its output.
ChildRun RunChild(const char* seed) {
  std::vector<std::string> env_s = {"DISTLAB_SEED_TEST_CHILD=1"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DISTLAB_GRADING_SEED=", 21) != 0) env_s.push_back(*e);
  }
  if (seed != nullptr) env_s.push_back(std::string("DISTLAB_GRADING_SEED=") + seed);
  std::vector<char*> env;
  for (auto& s : env_s) env.push_back(s.data());
  env.push_back(nullptr);
  std::string self = "/proc/self/exe", filter = "--gtest_filter=GradingSeedChild.Print";
  char* argv[] = {self.data(), filter.data(), nullptr};
  int fds[2];
  ChildRun r;
  if (::pipe(fds) != 0) return r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execve(argv[0], argv, env.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// What the Child case printed: the seed it read.
std::string SeedPrinted(const ChildRun& r) {
  const size_t at = r.output.find("grading seed: ");
  if (at == std::string::npos) return "(none printed)";
  return r.output.substr(at + 14, r.output.find('\n', at) - at - 14);
}

// In a child (DISTLAB_SEED_TEST_CHILD set): changes the environment first, as code running later could, then
// prints the seed.
TEST(GradingSeedChild, Print) {
  if (std::getenv("DISTLAB_SEED_TEST_CHILD") == nullptr) GTEST_SKIP() << "runs in a child of the other cases";
  ::setenv("DISTLAB_GRADING_SEED", "777", 1);
  std::printf("grading seed: %llu\n", static_cast<unsigned long long>(GradingSeed()));
}

TEST(GradingSeed, UnsetIsTheDocumentedDefault) {
  const ChildRun r = RunChild(nullptr);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(SeedPrinted(r), std::to_string(kDefaultGradingSeed));
}

TEST(GradingSeed, IsTheValueTheProcessStartedWith) {
  for (const char* seed : {"0", "42", "9007199254740991", "18446744073709551615"}) {
    const ChildRun r = RunChild(seed);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(SeedPrinted(r), seed) << "setenv after the start must not change it";
  }
}

TEST(GradingSeed, AMalformedValueEndsTheBinaryAtStartNamingIt) {
  for (const char* seed : {"", "12x", "-1", " 5", "18446744073709551616", "0x10"}) {
    const ChildRun r = RunChild(seed);
    EXPECT_EQ(r.exit_code, 2) << "DISTLAB_GRADING_SEED='" << seed << "': " << r.output;
    EXPECT_NE(r.output.find("DISTLAB_GRADING_SEED=" + std::string(seed) + " is not a whole number"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("grading seed: "), std::string::npos) << "no case may run";
  }
}

TEST(GradingSeed, InThisProcessIsTheEnvironmentsAtStart) {
  const char* at_start = std::getenv("DISTLAB_GRADING_SEED");  // unchanged so far in this process
  const uint64_t seed = GradingSeed();
  if (at_start == nullptr) {
    EXPECT_EQ(seed, kDefaultGradingSeed);
  } else {
    EXPECT_EQ(std::to_string(seed), at_start);
  }
  ::setenv("DISTLAB_GRADING_SEED", "123", 1);
  EXPECT_EQ(GradingSeed(), seed);
}

// CaseRandom: the same case and stream draw the same numbers, another case or stream others, and the ranges
// hold at their ends. (The seed itself is the process's: the draws of another seed are RunChild's business.)
std::vector<uint64_t> Draws(const char* stream, int n) {
  CaseRandom r(stream);
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(r.Next());
  return out;
}
std::vector<uint64_t> g_other_case;

TEST(CaseRandom, AnotherCaseDrawsOtherNumbers) { g_other_case = Draws("", 8); }

TEST(CaseRandom, SameCaseAndStreamDrawTheSameNumbers) {
  EXPECT_EQ(Draws("", 8), Draws("", 8));
  EXPECT_NE(Draws("", 8), Draws("ranks", 8)) << "streams of one case must differ";
  if (!g_other_case.empty()) EXPECT_NE(Draws("", 8), g_other_case) << "cases must draw apart";
}

TEST(CaseRandom, RangesHoldAtBothEnds) {
  CaseRandom r;
  bool lo = false, hi = false;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = r.Int(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    lo |= v == -3, hi |= v == 3;
    const double x = r.Real(0.5, 2.0);
    ASSERT_GE(x, 0.5);
    ASSERT_LT(x, 2.0);
  }
  EXPECT_TRUE(lo && hi) << "2000 draws from 7 values never hit an end";
  EXPECT_EQ(r.Int(5, 5), 5);
  const int64_t any = r.Int(INT64_MIN, INT64_MAX);  // the whole range: no overflow
  (void)any;
  std::vector<int> v = {1, 2, 3, 4, 5};
  r.Shuffle(v);
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_NE(SeedNote().find("--test_env=DISTLAB_GRADING_SEED=" + std::to_string(GradingSeed())),
            std::string::npos);
}

}  // namespace
}  // namespace distlab::testing
