// Matching failures against mutant signatures (hints.h).
#include "tools/grader/hints.h"

#include "gtest/gtest.h"

namespace distlab::grader {
namespace {

const std::vector<Signature> kSigs = {
    {"ring__a", "hint a", {{"ring_test", {"R.One", "R.Two"}}, {"harness_test", {"H.One"}}}},
    {"ring__b", "hint b", {{"ring_test", {"R.Three"}}, {"harness_test", {}}}},
    {"bw__c", "hint c", {{"bw_test", {"B.One", "B.Two", "B.Three", "B.Four"}}}},
};
const std::set<std::string> kAll = {"ring_test", "harness_test", "bw_test"};

TEST(MatchHints, AMutantsOwnFailuresGiveItsHintFirst) {
  auto m = MatchHints(kSigs, {{"ring_test", {"R.One", "R.Two"}}, {"harness_test", {"H.One"}}}, kAll);
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].hint, "hint a");
  EXPECT_DOUBLE_EQ(m[0].similarity, 1.0);
}

TEST(MatchHints, NoFailuresAndUnrelatedFailuresGiveNone) {
  EXPECT_TRUE(MatchHints(kSigs, {}, kAll).empty());
  EXPECT_TRUE(MatchHints(kSigs, {{"bw_test", {"B.One"}}}, kAll).empty()) << "1 of 4: below the threshold";
}

TEST(MatchHints, ExtraFailuresLowerTheSimilarity) {
  auto m =
      MatchHints(kSigs, {{"ring_test", {"R.One", "R.Two", "R.Three"}}, {"harness_test", {"H.One"}}}, kAll);
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].hint, "hint a");
  EXPECT_DOUBLE_EQ(m[0].similarity, 0.75);
}

TEST(MatchHints, TestsNotGradedDoNotCount) {
  auto m = MatchHints(kSigs, {{"ring_test", {"R.One", "R.Two"}}}, {"ring_test"});
  ASSERT_FALSE(m.empty());
  EXPECT_DOUBLE_EQ(m[0].similarity, 1.0);
}

}  // namespace
}  // namespace distlab::grader
