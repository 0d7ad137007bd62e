// RETURN_IF_ERROR and ASSIGN_OR_RETURN evaluate their argument exactly once, on success and on error.
#include "reference/base/status.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab {
namespace {

int calls = 0;
absl::Status Counted(absl::Status result) {
  ++calls;
  return result;
}
absl::StatusOr<std::unique_ptr<int>> CountedOr(absl::StatusOr<std::unique_ptr<int>> result) {
  ++calls;
  return result;
}

absl::Status Propagate(absl::Status inner) {
  RETURN_IF_ERROR(Counted(std::move(inner)));
  return absl::OkStatus();
}

absl::StatusOr<int> Unwrap(absl::StatusOr<std::unique_ptr<int>> inner) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> value, CountedOr(std::move(inner)));
  return *value + 1;
}

TEST(ReturnIfError, EvaluatesItsArgumentOnceAndReturnsTheError) {
  calls = 0;
  EXPECT_TRUE(Propagate(absl::OkStatus()).ok());
  EXPECT_EQ(calls, 1);
  const absl::Status failed = Propagate(absl::DataLossError("checksum"));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(failed.message(), "checksum");
}

TEST(AssignOrReturn, EvaluatesItsArgumentOnceAndReturnsTheError) {
  calls = 0;
  const absl::StatusOr<int> ok = Unwrap(std::make_unique<int>(41));
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  const absl::StatusOr<int> failed = Unwrap(absl::OutOfRangeError("step 9 of 8"));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(Unimplemented, NamesTheLabStageAndFunction) {
  const absl::Status s = Unimplemented("collectives", "B", "RingAllReduce");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "TODO(collectives stage B): RingAllReduce");
}

}  // namespace
}  // namespace distlab
