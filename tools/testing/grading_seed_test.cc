// The grading seed of test_support.h: GradingSeed() is DISTLAB_GRADING_SEED as the process started with it,
// kDefaultGradingSeed when unset, and a malformed value ends the binary at start naming the variable. Each
// case that needs another environment runs this binary again (its Child case) with that environment.
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace
}  // namespace distlab::testing
