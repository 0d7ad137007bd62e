// Lab 6 stage D, public tests: routing statistics of a perfectly specialized router.
#include "labs/moe/routing_stats.h"

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

TEST(RoutingStats, EachDomainOnItsOwnExpert) {
  // D = E = 2, k = 1: domain 0 -> expert 0, domain 1 -> expert 1 (routing table below)
  //   token   0  1  2  3
  //   domain  0  0  1  1
  //   expert  0  0  1  1     load = [.5 .5] -> max/mean 1;  specialization 1;  entropy 0 bits
  Routing r;
  r.tokens = 4, r.experts = 2, r.top_k = 1;
  r.probs.assign(8, .5f);
  r.expert = {0, 0, 1, 1};
  r.gate.assign(4, .5f);
  r.kept.assign(4, 1);
  ASSERT_OK_AND_ASSIGN(RoutingStats s, ComputeRoutingStats(r, {0, 0, 1, 1}, 2));
  EXPECT_DOUBLE_EQ(s.max_over_mean, 1.0);
  EXPECT_DOUBLE_EQ(s.specialization, 1.0);
  EXPECT_DOUBLE_EQ(s.entropy_bits, 0.0);
}

TEST(RoutingStats, AveragesOverTheDomainsThatHaveTokens) {
  // D = 3, but only domains 0 and 1 have tokens: E = 2, k = 1, experts [0 0 0 1] for domains [0 0 1 1].
  //   share = [[1 0] [.5 .5] [0 0]] (the absent domain's row is zeros); specialization = (1 + .5) / 2 = .75,
  //   entropy = (0 + 1) / 2 = .5 bit -- not divided by D = 3.
  Routing r;
  r.tokens = 4, r.experts = 2, r.top_k = 1;
  r.probs.assign(8, .5f);
  r.expert = {0, 0, 0, 1};
  r.gate.assign(4, .5f);
  r.kept.assign(4, 1);
  ASSERT_OK_AND_ASSIGN(RoutingStats s, ComputeRoutingStats(r, {0, 0, 1, 1}, 3));
  EXPECT_EQ(s.share[2], (std::vector<double>{0, 0}));
  EXPECT_DOUBLE_EQ(s.specialization, 0.75);
  EXPECT_DOUBLE_EQ(s.entropy_bits, 0.5);
}

}  // namespace
}  // namespace distlab::moe
