// Helpers every distlab test may use: Status assertions, timeouts that scale under sanitizers, and the
// "what is this test waiting for" note that the per-case watchdog prints when a case hangs.
#ifndef DISTLAB_TOOLS_TESTING_TEST_SUPPORT_H_
#define DISTLAB_TOOLS_TESTING_TEST_SUPPORT_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace distlab::testing {

// DISTLAB_TIMEOUT_SCALE (set by --config=asan/tsan), at least 1.
double TimeoutScale();

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

inline const absl::Status& ToStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace distlab::testing

// EXPECT_OK / ASSERT_OK on absl::Status or absl::StatusOr<T>; on failure they print the status, whose message
// names the stage and function for a stub ("TODO(collectives stage B): RingAllReduce").
#define EXPECT_OK(expr) \
  EXPECT_TRUE(::distlab::testing::ToStatus(expr).ok()) << ::distlab::testing::ToStatus(expr)
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    const ::absl::Status distlab_status_ = ::distlab::testing::ToStatus(expr); \
    ASSERT_TRUE(distlab_status_.ok()) << distlab_status_;                      \
  } while (0)

// ASSERT_OK_AND_ASSIGN(auto x, StatusOrExpr);
#define DISTLAB_CONCAT_INNER_(a, b) a##b
#define DISTLAB_CONCAT_(a, b) DISTLAB_CONCAT_INNER_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(DISTLAB_CONCAT_(distlab_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  ASSERT_TRUE(tmp.ok()) << tmp.status();           \
  lhs = std::move(tmp).value()

#endif  // DISTLAB_TOOLS_TESTING_TEST_SUPPORT_H_
