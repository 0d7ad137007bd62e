// The assertion macros of test_support.h evaluate their argument exactly once, pass or fail: a failing
// EXPECT_OK must not run a whole multi-rank case again to print its status (and print the second run's).
// And the timeout scale every helper multiplies by.
#include "tools/testing/test_support.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace distlab::testing {
namespace {

// Counts its calls; returns `result`. Static: EXPECT_FATAL_FAILURE's statement may not use locals.
int calls = 0;
absl::Status Counted(absl::Status result) {
  ++calls;
  return result;
}
absl::StatusOr<std::unique_ptr<int>> CountedOr(absl::StatusOr<std::unique_ptr<int>> result) {
  ++calls;
  return result;
}

TEST(ExpectOk, EvaluatesAPassingArgumentOnce) {
  calls = 0;
  EXPECT_OK(Counted(absl::OkStatus()));
  EXPECT_EQ(calls, 1);
  EXPECT_OK(CountedOr(std::make_unique<int>(3)));
  EXPECT_EQ(calls, 2);
}

TEST(ExpectOk, EvaluatesAFailingArgumentOnceAndPrintsItsStatus) {
  calls = 0;
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Counted(absl::InternalError("rank 2 gave up"))), "rank 2 gave up");
  EXPECT_EQ(calls, 1);
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(CountedOr(absl::NotFoundError("no such key"))), "is not OK: NOT_FOUND");
  EXPECT_EQ(calls, 2);
}

TEST(AssertOk, EvaluatesItsArgumentOnceEitherWay) {
  calls = 0;
  ASSERT_OK(Counted(absl::OkStatus()));
  EXPECT_EQ(calls, 1);
  EXPECT_FATAL_FAILURE(ASSERT_OK(Counted(absl::AbortedError("peer aborted"))), "peer aborted");
  EXPECT_EQ(calls, 2);
}

void AssignFailing() {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<int> value, CountedOr(absl::UnavailableError("store gone")));
  (void)value;
}

TEST(AssertOkAndAssign, EvaluatesItsArgumentOnceEitherWay) {
  calls = 0;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<int> value, CountedOr(std::make_unique<int>(7)));
  EXPECT_EQ(*value, 7);
  EXPECT_EQ(calls, 1);
  EXPECT_FATAL_FAILURE(AssignFailing(), "store gone");
  EXPECT_EQ(calls, 2);
}

TEST(ExpectOk, TakesMoreContext) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(absl::InternalError("x")) << "at step " << 4, "at step 4");
}

// The one reader of DISTLAB_TIMEOUT_SCALE (tools/base/timeout_scale.h): a factor of at least 1, and anything
// else reads as 1, so a bad value can never shorten a timeout.
TEST(TimeoutScale, ReadsTheFactorAndNeverShortens) {
  const char* old = std::getenv("DISTLAB_TIMEOUT_SCALE");
  const std::string saved = old ? old : "";
  const std::pair<const char*, double> cases[] = {{"4", 4.0},  {"2.5", 2.5}, {"1", 1.0}, {"0.5", 1.0},
                                                  {"-3", 1.0}, {"", 1.0},    {"x", 1.0}};
  for (const auto& [text, want] : cases) {
    ::setenv("DISTLAB_TIMEOUT_SCALE", text, 1);
    EXPECT_EQ(TimeoutScale(), want) << "DISTLAB_TIMEOUT_SCALE=\"" << text << "\"";
  }
  ::setenv("DISTLAB_TIMEOUT_SCALE", "3", 1);
  EXPECT_EQ(Scaled(std::chrono::milliseconds(200)), std::chrono::milliseconds(600));
  ::unsetenv("DISTLAB_TIMEOUT_SCALE");
  EXPECT_EQ(TimeoutScale(), 1.0);
  if (old) ::setenv("DISTLAB_TIMEOUT_SCALE", saved.c_str(), 1);
}

TEST(Sanitizer, NamesDistlabSanitizerOrNothing) {
  const char* old = std::getenv("DISTLAB_SANITIZER");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("DISTLAB_SANITIZER", "tsan", 1);
  EXPECT_EQ(Sanitizer(), "tsan");
  ::unsetenv("DISTLAB_SANITIZER");
  EXPECT_EQ(Sanitizer(), "");
  if (old) ::setenv("DISTLAB_SANITIZER", saved.c_str(), 1);
}

}  // namespace
}  // namespace distlab::testing
