// Lab 6 stage D, hidden: routing statistics against a brute-force count on drawn routings, and the
// experiment's direction -- with the same coefficient, global-batch LBL specializes experts by domain far
// more than micro-batch LBL, at comparable global balance and lower loss ("Demons in the Detail", Qwen 2025).
//
// The routings and domains of the RoutingStatsHidden cases are drawn from the grading seed
// (distlab::testing::CaseRandom); a failure names the input and ends with how to draw it again.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/routing_stats.h"
#include "labs/moe/specialization.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

using testing::CaseRandom;
using testing::SeedNote;
using testutil::List;
using testutil::Str;

// A routing of T tokens over E experts with k distinct experts per token, uniform probabilities.
Routing DrawRouting(CaseRandom& rnd, int64_t T, int E, int k) {
  std::vector<int32_t> expert;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> all(E);
    for (int e = 0; e < E; ++e) all[e] = e;
    rnd.Shuffle(all);
    expert.insert(expert.end(), all.begin(), all.begin() + k);
  }
  return testutil::MakeRouting(T, E, k, std::vector<float>(T * E, 1.f / E), expert);
}

// The statistics of routing_stats.h, counted by brute force.
RoutingStats BruteForce(const Routing& r, const std::vector<int>& domain, int D) {
  const int E = r.experts, k = r.top_k;
  RoutingStats s;
  s.load.assign(E, 0.0);
  s.share.assign(D, std::vector<double>(E, 0.0));
  std::vector<double> slots(D, 0.0);
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int j = 0; j < k; ++j) {
      s.load[r.expert[t * k + j]] += 1.0 / (k * r.tokens);
      s.share[domain[t]][r.expert[t * k + j]] += 1;
      slots[domain[t]] += 1;
    }
  }
  double max_load = 0;
  for (double l : s.load) max_load = std::max(max_load, l);
  s.max_over_mean = max_load * E;
  int present = 0;
  for (int d = 0; d < D; ++d) {
    if (slots[d] == 0) continue;
    ++present;
    double top = 0, h = 0;
    for (double& v : s.share[d]) {
      v /= slots[d];
      top = std::max(top, v);
      if (v > 0) h -= v * std::log2(v);
    }
    s.specialization += top, s.entropy_bits += h;
  }
  s.specialization /= present, s.entropy_bits /= present;
  return s;
}

// Compares every statistic with the brute-force count; one failure per statistic that differs.
void ExpectStats(const RoutingStats& got, const RoutingStats& want, const std::string& input) {
  const int E = static_cast<int>(want.load.size()), D = static_cast<int>(want.share.size());
  ASSERT_EQ(got.load.size(), want.load.size()) << "load must hold E values; " << input << "; " << SeedNote();
  ASSERT_EQ(got.share.size(), want.share.size()) << "share must hold D rows; " << input << "; " << SeedNote();
  for (int e = 0; e < E; ++e) {
    if (!(std::fabs(got.load[e] - want.load[e]) <= 1e-12)) {
      ADD_FAILURE() << "load[" << e << "] = " << got.load[e] << " is not expert " << e
                    << "'s share of the k T assignments; " << input << "; " << SeedNote();
      break;
    }
  }
  for (int d = 0; d < D; ++d) {
    ASSERT_EQ(got.share[d].size(), want.share[d].size())
        << "share[" << d << "] must hold E values; " << input << "; " << SeedNote();
    bool bad = false;
    for (int e = 0; e < E && !bad; ++e) {
      if (!(std::fabs(got.share[d][e] - want.share[d][e]) <= 1e-12)) {
        ADD_FAILURE() << "share[" << d << "][" << e << "] = " << got.share[d][e] << " is not domain " << d
                      << "'s assignments to expert " << e << " over its own k T_d"
                      << "; " << input << "; " << SeedNote();
        bad = true;
      }
    }
    if (bad) break;
  }
  EXPECT_NEAR(got.max_over_mean, want.max_over_mean, 1e-12)
      << "max_over_mean = E max_i load_i; " << input << "; " << SeedNote();
  EXPECT_NEAR(got.specialization, want.specialization, 1e-12)
      << "specialization: the mean of each domain's top share, over the domains that have tokens; " << input
      << "; " << SeedNote();
  EXPECT_NEAR(got.entropy_bits, want.entropy_bits, 1e-12)
      << "entropy_bits: the mean of each domain's entropy in bits, over the domains that have tokens; "
      << input << "; " << SeedNote();
}

// Top-1, every domain has tokens.
TEST(RoutingStatsHidden, HandComputedTopOne) {
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(2, 5)), D = static_cast<int>(rnd.Int(1, 4));
  const int64_t T = rnd.Int(D + 1, 12);
  Routing r = DrawRouting(rnd, T, E, 1);
  std::vector<int> domain(T);
  for (int64_t t = 0; t < T; ++t)
    domain[t] = t < D ? static_cast<int>(t) : static_cast<int>(rnd.Int(0, D - 1));
  rnd.Shuffle(domain);
  const std::string input = Str("T = ", T, ", E = ", E, ", k = 1, D = ", D, ", domains ", List(domain),
                                ", experts ", List(r.expert));
  ASSERT_OK_AND_ASSIGN(RoutingStats s, ComputeRoutingStats(r, domain, D));
  ExpectStats(s, BruteForce(r, domain, D), input);
}

// Top-2 with at least one domain that has no token; and the errors for a domain outside [0, D) and for a
// label count that is not T.
TEST(RoutingStatsHidden, TopTwoAndAbsentDomain) {
  CaseRandom rnd;
  const int E = static_cast<int>(rnd.Int(3, 5)), D = static_cast<int>(rnd.Int(2, 5));
  const int64_t T = rnd.Int(2, 8);
  // The domains that have tokens: a non-empty proper subset of [0, D).
  std::vector<int> all(D);
  for (int d = 0; d < D; ++d) all[d] = d;
  rnd.Shuffle(all);
  const int present = static_cast<int>(rnd.Int(1, std::min<int64_t>(D - 1, T)));
  std::vector<int> domain(T);
  for (int64_t t = 0; t < T; ++t) {
    domain[t] = all[t < present ? t : rnd.Int(0, present - 1)];
  }
  rnd.Shuffle(domain);
  Routing r = DrawRouting(rnd, T, E, 2);
  const std::string input = Str("T = ", T, ", E = ", E, ", k = 2, D = ", D, ", domains ", List(domain),
                                ", experts ", List(r.expert));
  ASSERT_OK_AND_ASSIGN(RoutingStats s, ComputeRoutingStats(r, domain, D));
  ExpectStats(s, BruteForce(r, domain, D), input);

  std::vector<int> outside = domain;
  const int64_t at = rnd.Int(0, T - 1);
  outside[at] = rnd.Chance(0.5) ? D + static_cast<int>(rnd.Int(0, 2)) : -static_cast<int>(rnd.Int(1, 2));
  EXPECT_EQ(ComputeRoutingStats(r, outside, D).status().code(), absl::StatusCode::kInvalidArgument)
      << "token " << at << " has domain " << outside[at] << ", outside [0, " << D << "); " << input << "; "
      << SeedNote();
  std::vector<int> wrong = domain;
  if (rnd.Chance(0.5)) {
    wrong.resize(T - 1);
  } else {
    wrong.resize(T + rnd.Int(1, 2), 0);
  }
  EXPECT_EQ(ComputeRoutingStats(r, wrong, D).status().code(), absl::StatusCode::kInvalidArgument)
      << wrong.size() << " domain labels for T = " << T << " tokens; " << input << "; " << SeedNote();
}

// Fixed, not drawn: a statistical direction of the demo's configuration (data seed 7), not a property of
// every input -- under other data seeds the micro-batch run specializes too now and then (18 of 40 drawn
// seeds broke one of the bounds below with the solution).
TEST(SpecializationHidden, GlobalBatchLblSpecializesMoreAtComparableBalance) {
  testing::Activity activity("two toy MoE trainings on 4 data-parallel ranks");
  ExperimentConfig cfg;  // the demo's defaults, fixed seed
  cfg.scope = LblScope::kMicroBatch;
  ASSERT_OK_AND_ASSIGN(ExperimentResult micro, RunSpecializationExperiment(cfg));
  cfg.scope = LblScope::kGlobalBatch;
  ASSERT_OK_AND_ASSIGN(ExperimentResult global, RunSpecializationExperiment(cfg));
  const double uniform = 1.0 / cfg.experts;
  EXPECT_LT(micro.eval.specialization, uniform + 0.25) << "micro-batch LBL spreads every domain";
  EXPECT_GT(global.eval.specialization, micro.eval.specialization + 0.25);
  EXPECT_LT(global.eval.entropy_bits, micro.eval.entropy_bits - 0.5);
  EXPECT_LT(global.eval.max_over_mean, 1.5) << "global balance must stay comparable";
  EXPECT_LT(global.eval.max_over_mean, micro.eval.max_over_mean + 0.25);
  EXPECT_LT(global.eval_loss, micro.eval_loss) << "specialized experts fit their domains better";
}

}  // namespace
}  // namespace distlab::moe
