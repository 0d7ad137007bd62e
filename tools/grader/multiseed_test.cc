// Checking a lab under several grading seeds (multiseed.h).
#include "tools/grader/multiseed.h"

#include <memory>

#include "gtest/gtest.h"

namespace distlab::grader {
namespace {

std::function<uint64_t()> Counter(std::vector<uint64_t> values) {
  auto next = std::make_shared<size_t>(0);
  return [values, next] { return values[(*next)++ % values.size()]; };
}

TEST(SeedList, DefaultIsSeedOneThenFreshOnes) {
  EXPECT_EQ(SeedList({}, 0, Counter({7})), (std::vector<uint64_t>{1}));
  EXPECT_EQ(SeedList({}, 1, Counter({7})), (std::vector<uint64_t>{1}));
  EXPECT_EQ(SeedList({}, 3, Counter({7, 8, 9})), (std::vector<uint64_t>{1, 7, 8}));
}

TEST(SeedList, GivenSeedsComeFirstWithoutRepeats) {
  EXPECT_EQ(SeedList({5, 3, 5}, 0, Counter({7})), (std::vector<uint64_t>{5, 3}));
  EXPECT_EQ(SeedList({5}, 3, Counter({5, 1, 1, 9})), (std::vector<uint64_t>{5, 1, 9}))
      << "a fresh seed that repeats one already in the list is drawn again";
}

TEST(SeedList, AStuckSourceEnds) { EXPECT_EQ(SeedList({}, 5, Counter({1})), (std::vector<uint64_t>{1})); }

const std::vector<Signature> kSigs = {
    {"ring__a", "hint a", {{"ring_test", {"R.One", "R.Two"}}, {"harness_test", {"H.One"}}}},
    {"ring__b", "hint b", {{"ring_test", {"R.Three"}}, {"harness_test", {}}}},
    {"ring__c", "hint a", {{"ring_test", {"R.Four"}}}},
};
const std::set<std::string> kAll = {"ring_test", "harness_test"};

TEST(MatchOwnHint, SameFailuresAsTheSignature) {
  const OwnHint h =
      MatchOwnHint(kSigs, "ring__a", {{"ring_test", {"R.One", "R.Two"}}, {"harness_test", {"H.One"}}}, kAll);
  EXPECT_TRUE(h.first);
  EXPECT_EQ(h.first_mutant, "ring__a");
  EXPECT_DOUBLE_EQ(h.own_similarity, 1.0);
  EXPECT_EQ(h.failed, 3u);
}

TEST(MatchOwnHint, AnotherSeedFailsOtherCases) {
  // Under another seed ring__a fails R.Three as well and no longer H.One: 2 of 4 -> 0.5 (at the threshold),
  // but ring__b's signature {R.Three} scores 1/3, so ring__a still comes first.
  const OwnHint h = MatchOwnHint(kSigs, "ring__a", {{"ring_test", {"R.One", "R.Two", "R.Three"}}}, kAll);
  EXPECT_TRUE(h.first);
  EXPECT_DOUBLE_EQ(h.own_similarity, 0.5);
}

TEST(MatchOwnHint, AnotherMutantsSignatureWins) {
  const OwnHint h = MatchOwnHint(kSigs, "ring__b", {{"ring_test", {"R.One", "R.Two"}}}, kAll);
  EXPECT_FALSE(h.first);
  EXPECT_EQ(h.first_mutant, "ring__a");
  EXPECT_DOUBLE_EQ(h.own_similarity, 0.0);
}

TEST(MatchOwnHint, NoFailuresNoHint) {
  const OwnHint h = MatchOwnHint(kSigs, "ring__b", {}, kAll);
  EXPECT_FALSE(h.first);
  EXPECT_EQ(h.first_mutant, "");
}

TEST(MatchOwnHint, ASharedHintCountsAsOwn) {
  // ring__c fails what ring__a's signature holds: the hint shown is the same text.
  const OwnHint h = MatchOwnHint(kSigs, "ring__c", {{"ring_test", {"R.One", "R.Two", "R.Four"}}}, kAll);
  EXPECT_TRUE(h.first);
}

TEST(MatchOwnHint, NoSignatureNoHint) {
  EXPECT_FALSE(MatchOwnHint(kSigs, "ring__z", {{"ring_test", {"R.One"}}}, kAll).first);
}

TEST(SummarizeFairness, CountsFailuresAndTheSlowestDraw) {
  const std::vector<CaseRun> runs = {
      {1, "t", "A.One", "passed", 0.1, 5, ""}, {1, "t", "A.Two", "passed", 0.2, 5, ""},
      {9, "t", "A.One", "passed", 3.0, 5, ""}, {9, "t", "A.Two", "failed", 0.2, 5, "wrong\nmore"},
      {4, "t", "A.One", "passed", 0.4, 5, ""}, {4, "t", "A.Two", "skipped", 0, 5, "needs a GPU"},
      {4, "u", "B.One", "passed", 0.5, 6, ""}, {9, "u", "B.One", "passed", 0.5, 7, ""},
  };
  const Fairness f = SummarizeFairness(runs);
  EXPECT_EQ(f.passed, 6);
  EXPECT_EQ(f.failed, 1);
  EXPECT_EQ(f.skipped, 1);
  ASSERT_EQ(f.failures.size(), 1u);
  EXPECT_EQ(f.failures[0].seed, 9u);
  EXPECT_EQ(FirstLineOf(f.failures[0].reason), "wrong");
  ASSERT_EQ(f.spreads.size(), 3u);
  EXPECT_EQ(f.spreads[0].name, "A.One") << "3.0 of 5 s: the largest share first";
  EXPECT_DOUBLE_EQ(f.spreads[0].max_seconds, 3.0);
  EXPECT_DOUBLE_EQ(f.spreads[0].min_seconds, 0.1);
  EXPECT_EQ(f.spreads[0].max_seed, 9u);
  EXPECT_DOUBLE_EQ(f.spreads[0].base_seconds, 0.1) << "its time under seed 1";
  EXPECT_DOUBLE_EQ(SummarizeFairness(runs, 4).spreads[0].base_seconds, 0.4);
  EXPECT_EQ(f.tight, 1) << "3.0 s is over half of 5 s";
  EXPECT_EQ(f.varying_timeouts, 1) << "B.One was given 6 s and 7 s";
  EXPECT_TRUE(f.spreads[1].timeout_varies || f.spreads[2].timeout_varies);
  for (const CaseSpread& c : f.spreads) {
    if (c.test == "u") EXPECT_EQ(c.base_seconds, -1) << "B.One never ran under seed 1";
  }
}

TEST(SummarizeFairness, RerunsConfirmOrClearWhatTheRunsFound) {
  const std::vector<CaseRun> runs = {
      {1, "t", "A.One", "passed", 0.1, 5, ""},       {9, "t", "A.One", "passed", 3.0, 5, ""},
      {1, "t", "A.Two", "passed", 0.2, 5, ""},       {9, "t", "A.Two", "passed", 4.0, 5, ""},
      {9, "t", "A.Three", "failed", 0.2, 5, "boom"}, {4, "t", "A.Three", "failed", 0.2, 5, "bang"},
  };
  const std::vector<CaseRun> reruns = {
      {9, "t", "A.One", "passed", 0.2, 5, ""},    // a busy machine: alone it is quick
      {9, "t", "A.Two", "passed", 3.5, 5, ""},    // a large draw: slow again
      {9, "t", "A.Three", "passed", 0.2, 5, ""},  // passes alone
      {4, "t", "A.Three", "failed", 0.2, 5, "bang"},
  };
  EXPECT_EQ(SummarizeFairness(runs).tight, 2);
  const Fairness f = SummarizeFairness(runs, 1, reruns);
  EXPECT_EQ(f.tight, 1);
  EXPECT_EQ(f.failed, 2) << "reruns count in nothing";
  ASSERT_EQ(f.failures.size(), 2u);
  EXPECT_EQ(f.failures[0].seed, 4u);
  EXPECT_EQ(f.failures[0].again, "failed");
  EXPECT_EQ(f.failures[1].again, "passed");
  for (const CaseSpread& c : f.spreads) {
    if (c.name == "A.One") {
      EXPECT_FALSE(c.tight());
      EXPECT_DOUBLE_EQ(c.rerun_seconds, 0.2);
    }
    if (c.name == "A.Two") EXPECT_TRUE(c.tight());
  }
}

TEST(SummarizeFairness, NothingRun) {
  const Fairness f = SummarizeFairness({});
  EXPECT_EQ(f.passed + f.failed + f.skipped, 0);
  EXPECT_TRUE(f.spreads.empty());
}

}  // namespace
}  // namespace distlab::grader
