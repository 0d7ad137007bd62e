// The grading seed from the grader to a test case: the seed's own rules (seed.h), and the runner's part
// (case_runner.h RunCase) run for real under case_init on a probe test binary, whose case prints what
// distlab::testing::GradingSeed() read.
#include "tools/grader/seed.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tools/grader/case_runner.h"
#include "tools/testing/test_support.h"

namespace distlab::grader {
namespace {

TEST(Seed, ParsesWholeNumbersUpTo2To53Minus1) {
  EXPECT_EQ(ParseSeed("0"), 0u);
  EXPECT_EQ(ParseSeed("42"), 42u);
  EXPECT_EQ(ParseSeed("9007199254740991"), kMaxSeed);
  for (const char* bad : {"", "-1", "+1", "1.5", "0x10", " 1", "9007199254740992", "18446744073709551616"}) {
    EXPECT_FALSE(ParseSeed(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(Seed, FreshSeedsDifferAndFit) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 64; ++i) {
    const uint64_t s = FreshSeed();
    EXPECT_LE(s, kMaxSeed);
    seen.insert(s);
  }
  EXPECT_GT(seen.size(), 60u);
}

TEST(Seed, TheLineSaysHowToGradeAgain) {
  const std::string line = SeedLine(1234, "collectives");
  EXPECT_EQ(line.rfind("Grading seed: 1234 ", 0), 0u) << line;
  EXPECT_NE(line.find("./labctl grade --submission DIR --lab collectives --seed 1234"), std::string::npos)
      << line;
}

// Runs the probe's case under the runner's RunCase with `seed` ("" = none given) and returns its output.
std::string ProbeOutput(const std::string& seed) {
  namespace fs = std::filesystem;
  Environment env;
  env.case_init = fs::absolute("tools/grader/case_init").string();
  std::string tmpl =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/seed.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return "mkdtemp failed";
  env.tmp_root = tmpl;
  env.grading_seed = seed;
  CaseSpec spec;
  spec.binary = fs::absolute("tools/grader/seed_probe").string();
  spec.workdir = fs::current_path().string();
  spec.name = "SeedProbe.Print";
  spec.timeout_s = 30;
  std::atomic<int> cut{0};
  const CaseResult r = RunCase(spec, env, cut, std::chrono::steady_clock::time_point::max());
  EXPECT_EQ(r.status, Status::kPassed) << r.reason << "\n" << r.output;
  return r.output;
}

TEST(SeedPlumbing, TheRunnerSetsTheSeedInTheCasesEnvironment) {
  EXPECT_NE(ProbeOutput("4242").find("grading seed: 4242\n"), std::string::npos);
  EXPECT_NE(ProbeOutput(std::to_string(kMaxSeed)).find("grading seed: 9007199254740991\n"),
            std::string::npos);
}

TEST(SeedPlumbing, WithoutASeedTheCaseGetsTheDefaultNotTheRunnersEnvironment) {
  ::setenv(kSeedVariable, "99", 1);  // the case's environment is clean: this must not reach it
  const std::string out = ProbeOutput("");
  ::unsetenv(kSeedVariable);
  EXPECT_NE(out.find("grading seed: " + std::to_string(testing::kDefaultGradingSeed) + "\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace distlab::grader
