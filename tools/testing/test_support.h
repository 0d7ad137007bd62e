// Helpers every distlab test may use: Status assertions, timeouts that scale under sanitizers, the "what is
// this test waiting for" note that the per-case watchdog prints when a case hangs, and the grading seed.
#ifndef DISTLAB_TOOLS_TESTING_TEST_SUPPORT_H_
#define DISTLAB_TOOLS_TESTING_TEST_SUPPORT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tools/base/macros.h"
#include "tools/base/timeout_scale.h"

namespace distlab::testing {

// DISTLAB_TIMEOUT_SCALE (set by --config=asan/tsan), at least 1; read in one place,
// tools/base/timeout_scale.h.
using ::distlab::TimeoutScale;

// `base` multiplied by TimeoutScale().
std::chrono::milliseconds Scaled(std::chrono::milliseconds base);

// While alive, the per-case watchdog names `what` if the case times out ("stuck in: <what>").
class Activity {
 public:
  explicit Activity(std::string what);
  ~Activity();
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

 private:
  std::string previous_;
};

// The activity most recently set, or "" (used by the watchdog).
std::string CurrentActivity();

// The sanitizer this test runs under, from DISTLAB_SANITIZER (set by --config=asan and --config=tsan):
// "asan", "tsan", or "" when none.
std::string Sanitizer();

// The grading seed: the number a test draws the inputs it may choose (sizes, values, ranks, shapes) from, so
// that each grading checks other inputs and a regrade with the same seed checks the same ones
// (tools/grader/seed.h). The grader's runner sets DISTLAB_GRADING_SEED in each case's environment (a fresh
// seed per grading, or ./labctl grade --seed N); `bazel test --test_env=DISTLAB_GRADING_SEED=N` sets it
// outside the grader. Unset, it is kDefaultGradingSeed, so a plain `bazel test` always draws the same inputs.
// The value is read once, before main() and before any static initializer of the test or of the code under
// test runs (a priority-101 constructor, as gtest_main's record channel), so nothing that runs later changes
// what the test draws; a value that is not a whole number from 0 to 2^64 - 1 ends the test binary at start,
// naming it. (The variable stays in the environment: the rank processes some tests start must draw the same
// inputs. Student code cannot read it: the labs' symbol rules forbid environment access.)
inline constexpr uint64_t kDefaultGradingSeed = 1;
uint64_t GradingSeed();

// A case's own source of the inputs it draws: seeded from GradingSeed() and the running case's name
// ("Suite.Case"; plus `stream`, to keep several independent streams apart in one case), so each case draws
// the same inputs whatever other cases do and in whatever order they run, rank processes started by the case
// draw what it draws, and a regrade with the same seed draws them again. SplitMix64 with fixed arithmetic
// (the standard distributions differ between library versions), so a draw is the same on every machine.
// Outside a running case (a static initializer) the stream depends on the seed and `stream` only.
class CaseRandom {
 public:
  explicit CaseRandom(std::string_view stream = "");
  uint64_t Next();                      // 64 uniform bits
  int64_t Int(int64_t lo, int64_t hi);  // uniform on [lo, hi], both included; lo <= hi
  double Real(double lo, double hi);    // uniform on [lo, hi)
  bool Chance(double p);                // true with probability p
  template <typename T>
  const T& Pick(const std::vector<T>& from) {  // one element, uniformly; `from` not empty
    return from[static_cast<size_t>(Int(0, static_cast<int64_t>(from.size()) - 1))];
  }
  template <typename T>
  void Shuffle(std::vector<T>& v) {  // Fisher-Yates
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(Int(0, i - 1))]);
  }

 private:
  uint64_t state_;
};

// "grading seed S; to draw the same inputs: bazel test <target> --test_env=DISTLAB_GRADING_SEED=S": the
// sentence a seeded case adds to its failure message, after the inputs that broke it.
std::string SeedNote();

inline const absl::Status& ToStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// The predicate-formatter behind EXPECT_OK / ASSERT_OK: GoogleTest's EXPECT_PRED_FORMAT1 evaluates the
// expression once and hands this function its text and its value.
template <typename T>
::testing::AssertionResult IsOk(const char* text, const T& value) {
  const absl::Status& status = ToStatus(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text << " is not OK: " << status;
}

}  // namespace distlab::testing

// EXPECT_OK / ASSERT_OK on absl::Status or absl::StatusOr<T>; on failure they print the expression and its
// status, whose message names the stage and function for a stub ("TODO(collectives stage B):
// RingAllReduce"). The expression is evaluated exactly once (a failing call is not run again to print it),
// and more context can be streamed: EXPECT_OK(x) << "at step " << i.
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::distlab::testing::IsOk, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::distlab::testing::IsOk, expr)

// ASSERT_OK_AND_ASSIGN(auto x, StatusOrExpr); evaluates StatusOrExpr once.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(DISTLAB_CONCAT(distlab_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  ASSERT_TRUE(tmp.ok()) << tmp.status();           \
  lhs = std::move(tmp).value()

#endif  // DISTLAB_TOOLS_TESTING_TEST_SUPPORT_H_
