// The grading seed: one number per grading from which the hidden tests draw their inputs, so that a failure
// shown to a student cannot be replayed on the next grading, and a regrade with the same seed is exact.
//
// `./labctl grade` (grade.cc) makes a fresh one per grading, or takes --seed N to repeat one; it prints it,
// the runner (runner.cc, case_runner.cc) sets DISTLAB_GRADING_SEED=N in every case's otherwise clean
// environment, and the report (report.cc) records it at the top of results.json ("seed", and the first line
// of "output"). The tests read it through distlab::testing::GradingSeed() (tools/testing/test_support.h),
// which gives a fixed default when the variable is unset, so `bazel test` outside the grader is reproducible
// (`bazel test --test_env=DISTLAB_GRADING_SEED=N` sets one).
#ifndef DISTLAB_TOOLS_GRADER_SEED_H_
#define DISTLAB_TOOLS_GRADER_SEED_H_

#include <cstdint>
#include <optional>
#include <string>

namespace distlab::grader {

// The variable the runner sets in each case's environment (read by tools/testing's GradingSeed()).
inline constexpr char kSeedVariable[] = "DISTLAB_GRADING_SEED";

// The largest seed the grader makes or takes: 2^53 - 1, so results.json's number is exact in every JSON
// reader (JavaScript's included).
inline constexpr uint64_t kMaxSeed = (uint64_t{1} << 53) - 1;

// A seed from the kernel's random source (getrandom, as /dev/urandom), in [0, kMaxSeed].
uint64_t FreshSeed();

// Decimal digits only, at most kMaxSeed; nullopt otherwise.
std::optional<uint64_t> ParseSeed(const std::string& text);

// The line results.json's output opens with: the seed, and how to grade again with the same inputs.
std::string SeedLine(uint64_t seed, const std::string& lab);

}  // namespace distlab::grader

#endif  // DISTLAB_TOOLS_GRADER_SEED_H_
