// Lab 6 stage C, hidden: expert capacity, dropping by probability and by position, dropped tokens passing
// through the residual.
//
// Every case but the worked example of the tie-break rule (ApplyCapacityHidden.EqualProbabilitiesKeepThe-
// EarlierToken) draws its sizes, factors, routings and inputs from the grading seed
// (distlab::testing::CaseRandom); a failure names the input and ends with how to draw it again. Capacity
// factors are drawn as fractions a / d, so the exact capacity is an integer ceiling: ceil(load a / (d E)).
// Each capacity case draws inputs that tell the rounding rules apart (a real fraction, an exact integer that
// doubles compute a little above, in one order of operations or the other) the same way under every seed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/moe/moe_layer.h"
#include "tests/moe/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::moe {
namespace {

using testing::CaseRandom;
using testing::SeedNote;
using testutil::FirstMismatch;
using testutil::List;
using testutil::MakeRouting;
using testutil::Str;

constexpr auto kTok = CapacityFormula::kTokens;
constexpr auto kAsg = CapacityFormula::kAssignments;

// A capacity question: T tokens, E experts, top-k, factor a / d, a formula; load = T or k T.
struct Cap {
  int64_t T = 0;
  int E = 1, k = 1;
  int64_t a = 1, d = 1;
  CapacityFormula formula = kTok;
  double factor() const { return static_cast<double>(a) / static_cast<double>(d); }
  int64_t load() const { return formula == kAsg ? k * T : T; }
  // The exact capacity: ceil(load a / (d E)), in integers.
  int64_t exact() const { return (load() * a + d * E - 1) / (d * E); }
  bool integral() const { return load() * a % (d * E) == 0; }
  // x = load * factor / E as header's order of operations computes it in doubles.
  double x() const { return static_cast<double>(load()) * factor() / E; }
  // The same, divided first (Megatron-LM's order).
  double x_divided_first() const { return static_cast<double>(load()) / E * factor(); }
  std::string Call() const {
    return Str("ExpertCapacity(T = ", T, ", E = ", E, ", k = ", k, ", factor ", factor(), ", ",
               formula == kAsg ? "kAssignments" : "kTokens", ")");
  }
};

// Checks one capacity question; a failure says why the exact value is what it is.
void ExpectCapacity(const Cap& c) {
  const absl::StatusOr<int64_t> got = ExpertCapacity(c.T, c.E, c.k, c.factor(), c.formula);
  ASSERT_OK(got) << c.Call() << "; " << SeedNote();
  if (*got == c.exact()) return;
  const std::string load = c.formula == kAsg ? "k T" : "T";
  if (c.integral()) {
    ADD_FAILURE() << c.Call() << " = " << *got << ": " << load << " * factor / E is exactly " << c.exact()
                  << " in real numbers (in doubles, multiplied first: " << Str(std::setprecision(17), c.x())
                  << "; divided first: " << Str(std::setprecision(17), c.x_divided_first())
                  << "); an x no more than 1e-9 * max(1, x) above an integer is that integer; " << SeedNote();
  } else {
    ADD_FAILURE() << c.Call() << " = " << *got << ": x = " << load << " * factor / E = " << c.load() << " * "
                  << c.a << " / (" << c.d << " * " << c.E
                  << ") has a real fractional part, which the capacity "
                  << "rounds up; " << SeedNote();
  }
}

// A factor a / d between lo and hi (in units of 1 / d).
void DrawFactor(CaseRandom& rnd, Cap& c, std::vector<int64_t> denominators, int64_t lo, int64_t hi) {
  c.d = rnd.Pick(denominators);
  c.a = rnd.Int(lo * c.d / 4, hi * c.d / 4);  // lo / 4 .. hi / 4
}

// True when the capacity rules that a careless implementation might use -- floor, a plain ceil of x, a
// ceil of x divided first -- all give the exact capacity (no slip shows on this question).
bool Plain(const Cap& c) {
  return std::floor(c.x()) == c.exact() - (c.integral() ? 0 : 1) && std::ceil(c.x()) == c.exact() &&
         std::ceil(c.x_divided_first()) == c.exact() && std::floor(c.x()) == std::floor(c.x_divided_first());
}

// x = T * factor / E with a real fractional part rounds up (ceil, not floor or round); an exact integer stays
// itself; fewer tokens than experts give 1. k = 1, the default formula.
TEST(ExpertCapacityHidden, RoundsARealFractionUp) {
  CaseRandom rnd;
  std::vector<Cap> qs;
  for (int i = 0; i < 4; ++i) {  // real fractions: factors a/4 or a/10 in [0.5, 3]
    Cap c;
    do {
      c.T = rnd.Int(1, 300), c.E = static_cast<int>(rnd.Int(2, 16));
      DrawFactor(rnd, c, {4, 10}, 2, 12);
    } while (c.integral() || !Plain(c));
    qs.push_back(c);
  }
  {  // an exact integer: T a multiple of E, a power-of-two factor (exact in either order)
    Cap c;
    do {
      c.E = static_cast<int>(rnd.Int(2, 16)), c.T = c.E * rnd.Int(1, 20);
      c.d = 2, c.a = rnd.Pick(std::vector<int64_t>{1, 2, 4});
    } while (!c.integral() || !Plain(c));
    qs.push_back(c);
  }
  {  // fewer tokens than experts, factor 1
    Cap c;
    c.E = static_cast<int>(rnd.Int(3, 16)), c.T = rnd.Int(1, c.E - 1), c.a = 1, c.d = 1;
    qs.push_back(c);
  }
  for (const Cap& c : qs) ExpectCapacity(c);
}

// x = T * factor / E that is exactly an integer n in real numbers is n, although doubles compute it a
// little above n: in the header's order (T * factor first) and in the other one (T / E first). k = 1.
TEST(ExpertCapacityHidden, ForgivesTheBinaryErrorOfTheFactor) {
  CaseRandom rnd;
  // A factor a / 10 that no double holds exactly (not a multiple of 1/2), and a T that makes x an integer.
  auto draw = [&](const std::function<bool(const Cap&)>& want) {
    for (int attempt = 0; attempt < 100000; ++attempt) {
      Cap c;
      c.E = static_cast<int>(rnd.Int(2, 64)), c.d = 10;
      do {
        c.a = rnd.Int(5, 30);
      } while (c.a % 5 == 0);
      const int64_t step = c.d * c.E / std::gcd(c.a, c.d * c.E);  // T a multiple of step: x is an integer
      c.T = step * rnd.Int(1, std::max<int64_t>(1, 5000 / step));
      if (want(c)) return c;
    }
    ADD_FAILURE() << "no usable draw; " << SeedNote();
    return Cap{};
  };
  std::vector<Cap> qs;
  for (int i = 0; i < 2; ++i) {
    // Above n in the header's order (a plain ceil would add a slot).
    qs.push_back(draw([](const Cap& c) { return c.x() > c.exact(); }));
    // Above n when divided first (Megatron-LM's order would add a slot); exactly n or above in the header's.
    qs.push_back(draw([](const Cap& c) { return c.x_divided_first() > c.exact() && c.x() >= c.exact(); }));
  }
  for (const Cap& c : qs) ExpectCapacity(c);
}

// The two formulas: kTokens (the default) C = ceil(T / E * factor) whatever k is; kAssignments
// C = ceil(k T / E * factor); they agree for k = 1; factor 0 is dropless either way.
TEST(ExpertCapacityHidden, TokensByDefaultAssignmentsCountK) {
  CaseRandom rnd;
  std::vector<Cap> qs;
  {  // k >= 2, a real fraction under kTokens (x >= 1, so the formulas differ), the same under kAssignments
    Cap c;
    do {
      c.E = static_cast<int>(rnd.Int(2, 16)), c.k = static_cast<int>(rnd.Int(2, std::min(c.E, 4)));
      c.T = rnd.Int(c.E, 400);
      DrawFactor(rnd, c, {4}, 3, 8);
      c.formula = kTok;
    } while (c.integral() || !Plain(c) || c.x() < 1);
    qs.push_back(c);
    c.formula = kAsg;
    if (Plain(c)) qs.push_back(c);
  }
  {  // kAssignments, k >= 2, exactly an integer that doubles compute a little above in the header's order
    Cap c;
    for (int attempt = 0;; ++attempt) {
      ASSERT_LT(attempt, 100000) << "no usable draw; " << SeedNote();
      c.E = static_cast<int>(rnd.Int(2, 64)), c.k = static_cast<int>(rnd.Int(2, std::min(c.E, 4)));
      c.d = 10, c.formula = kAsg;
      do {
        c.a = rnd.Int(5, 30);
      } while (c.a % 5 == 0);
      const int64_t step = c.d * c.E / std::gcd(c.k * c.a, c.d * c.E);  // k T a a multiple of d E
      c.T = step * rnd.Int(1, std::max<int64_t>(1, 2500 / step));
      if (c.integral() && c.x() > c.exact() && std::ceil(c.x_divided_first()) == c.exact()) break;
    }
    qs.push_back(c);
  }
  {  // k = 1: the formulas agree
    Cap c;
    do {
      c.E = static_cast<int>(rnd.Int(2, 16)), c.T = rnd.Int(1, 400);
      DrawFactor(rnd, c, {4}, 2, 8);
    } while (!Plain(c));
    qs.push_back(c);
    c.formula = kAsg;
    qs.push_back(c);
  }
  for (const Cap& c : qs) ExpectCapacity(c);
  const int64_t T = rnd.Int(1, 100);
  const int E = static_cast<int>(rnd.Int(2, 16)), k = static_cast<int>(rnd.Int(2, std::min(E, 4)));
  EXPECT_EQ(ExpertCapacity(T, E, k, 0, kAsg).value_or(-1), T)
      << "ExpertCapacity(T = " << T << ", E = " << E << ", k = " << k
      << ", factor 0, kAssignments): dropless either way, C = T; " << SeedNote();
}

// The layer uses the formula of its config: k = 2, every token's first choice expert e1 and second e2 (a
// router that looks at one feature only, and that feature positive), so each of them gets T assignments and
// keeps C of them -- ceil(T / E * factor) by default, ceil(2 T / E * factor) with kAssignments.
TEST(MoeLayerCapacityHidden, LayerUsesTheConfiguredFormula) {
  CaseRandom rnd;
  Cap c;
  c.k = 2, c.d = 2;
  do {  // a power-of-two factor and an exact capacity under both formulas, below T
    c.E = static_cast<int>(rnd.Int(3, 6)), c.T = rnd.Int(4, 16);
    c.a = rnd.Pick(std::vector<int64_t>{1, 2, 4});
    c.formula = kTok;
  } while (!c.integral() || c.exact() < 1 || 2 * c.exact() >= c.T);
  const int64_t h = rnd.Int(2, 5), T = c.T;
  const int E = c.E, e1 = static_cast<int>(rnd.Int(0, E - 1));
  int e2 = static_cast<int>(rnd.Int(0, E - 2));
  if (e2 >= e1) ++e2;
  const int64_t feature = rnd.Int(0, h - 1);
  const DropPolicy policy = rnd.Chance(0.5) ? DropPolicy::kByPosition : DropPolicy::kByProbability;
  Tensor x = testutil::RandomTensor({T, h}, rnd.Next());
  for (int64_t t = 0; t < T; ++t) x.Set(t * h + feature, static_cast<float>(rnd.Real(0.5, 3)));
  for (CapacityFormula formula : {kTok, kAsg}) {
    c.formula = formula;
    MoeConfig config;
    config.hidden = h, config.inner = rnd.Int(2, 6), config.experts = E, config.top_k = 2;
    config.seed = rnd.Next();
    config.capacity_factor = c.factor(), config.capacity_formula = formula, config.drop_policy = policy;
    const std::string input =
        Str("MoeLayer {h = ", h, ", E = ", E, ", k = 2, capacity factor ", c.factor(), ", ",
            formula == kAsg ? "kAssignments" : "kTokens", ", drop by ",
            policy == DropPolicy::kByPosition ? "position" : "probability", "}, T = ", T,
            " tokens, a router that sends every token first to expert ", e1, " and second to expert ", e2);
    ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(config));
    Tensor& W = layer->router().weight().value;  // [E, h]
    for (int64_t i = 0; i < W.numel(); ++i) W.Set(i, 0.f);
    W.Set(e1 * h + feature, 3.f), W.Set(e2 * h + feature, 1.f);
    ASSERT_OK(layer->Forward(x).status()) << input << "; " << SeedNote();
    const Routing& r = layer->routing();
    ASSERT_EQ(r.expert.size(), static_cast<size_t>(2 * T)) << input << "; " << SeedNote();
    ASSERT_EQ(r.kept.size(), static_cast<size_t>(2 * T)) << input << "; " << SeedNote();
    std::vector<int> kept(E, 0);
    for (int64_t s = 0; s < 2 * T; ++s) {
      ASSERT_EQ(r.expert[s], s % 2 == 0 ? e1 : e2) << "slot " << s << "; " << input << "; " << SeedNote();
      if (r.kept[s]) kept[r.expert[s]]++;
    }
    for (int e : {e1, e2}) {
      EXPECT_EQ(kept[e], c.exact()) << "expert " << e << " kept " << kept[e] << " of its " << T
                                    << " assignments; the capacity is "
                                    << (formula == kAsg ? "ceil(k T / E * factor)" : "ceil(T / E * factor)")
                                    << "; " << input << "; " << SeedNote();
    }
  }
}

TEST(ExpertCapacityHidden, DroplessWithoutFactorAndErrors) {
  CaseRandom rnd;
  const int64_t T = rnd.Int(0, 1000);
  const int E = static_cast<int>(rnd.Int(1, 64)), k = static_cast<int>(rnd.Int(1, std::min(E, 8)));
  const CapacityFormula formula = rnd.Chance(0.5) ? kTok : kAsg;
  const std::string shape = Str("T = ", T, ", E = ", E, ", k = ", k);
  for (double factor : {0.0, -rnd.Real(0.01, 3)}) {
    EXPECT_EQ(ExpertCapacity(T, E, k, factor, formula).value_or(-1), T)
        << "ExpertCapacity(" << shape << ", factor " << factor << "): dropless, C = T; " << SeedNote();
  }
  const double factor = rnd.Real(0.5, 2);
  const int bad_e = -static_cast<int>(rnd.Int(0, 2)), big_k = E + static_cast<int>(rnd.Int(1, 3));
  const int small_k = -static_cast<int>(rnd.Int(0, 2));
  const int64_t bad_t = -rnd.Int(1, 100);
  EXPECT_EQ(ExpertCapacity(T, bad_e, 1, factor).status().code(), absl::StatusCode::kInvalidArgument)
      << "ExpertCapacity(T = " << T << ", E = " << bad_e << ", k = 1): E < 1; " << SeedNote();
  EXPECT_EQ(ExpertCapacity(T, E, big_k, factor).status().code(), absl::StatusCode::kInvalidArgument)
      << "ExpertCapacity(T = " << T << ", E = " << E << ", k = " << big_k << "): k > E; " << SeedNote();
  EXPECT_EQ(ExpertCapacity(T, E, small_k, factor).status().code(), absl::StatusCode::kInvalidArgument)
      << "ExpertCapacity(T = " << T << ", E = " << E << ", k = " << small_k << "): k < 1; " << SeedNote();
  EXPECT_EQ(ExpertCapacity(bad_t, E, k, factor).status().code(), absl::StatusCode::kInvalidArgument)
      << "ExpertCapacity(T = " << bad_t << ", E = " << E << ", k = " << k << "): T < 0; " << SeedNote();
}

// A drawn routing (softmax of real-valued logits: no two assignments of an expert share a probability) and a
// capacity below the fullest expert's load.
struct DropCase {
  Routing r;
  int64_t capacity = 0;
  std::string input;
};

DropCase DrawDropCase(CaseRandom& rnd, int k_lo, int k_hi, DropPolicy policy) {
  DropCase c;
  const int E = static_cast<int>(rnd.Int(std::max(2, k_lo + 1), 4));
  const int k = static_cast<int>(rnd.Int(k_lo, std::min(k_hi, E)));
  const int64_t T = rnd.Int(4, 10);
  for (int attempt = 0;; ++attempt) {
    if (attempt == 1000) {
      ADD_FAILURE() << "no usable draw; " << SeedNote();
      break;
    }
    c.r = testutil::RandomRouting(T, E, k, rnd.Next());
    std::vector<std::vector<float>> p(E);
    for (int64_t s = 0; s < T * k; ++s) p[c.r.expert[s]].push_back(c.r.probs[(s / k) * E + c.r.expert[s]]);
    size_t most = 0;
    bool tie = false;
    for (auto& v : p) {
      most = std::max(most, v.size());
      std::sort(v.begin(), v.end());
      tie = tie || std::adjacent_find(v.begin(), v.end()) != v.end();
    }
    if (most >= 2 && !tie) {
      c.capacity = rnd.Int(1, static_cast<int64_t>(most) - 1);
      break;
    }
  }
  c.input = Str("ApplyCapacity(capacity ", c.capacity, ", by ",
                policy == DropPolicy::kByPosition ? "position" : "probability", ") on T = ", T, ", E = ", E,
                ", k = ", k, ", experts ", List(c.r.expert));
  return c;
}

// kept[s] by brute force: each expert keeps its `capacity` assignments with the highest probability (ties:
// earlier token) or of the earliest tokens.
std::vector<uint8_t> Keep(const Routing& r, int64_t capacity, DropPolicy policy) {
  const int E = r.experts, k = r.top_k;
  std::vector<uint8_t> kept = r.kept;
  for (int e = 0; e < E; ++e) {
    std::vector<int64_t> q;
    for (int64_t s = 0; s < r.tokens * k; ++s) {
      if (r.kept[s] && r.expert[s] == e) q.push_back(s);
    }
    if (policy == DropPolicy::kByProbability) {
      std::stable_sort(q.begin(), q.end(), [&](int64_t a, int64_t b) {
        return r.probs[(a / k) * E + e] > r.probs[(b / k) * E + e];
      });
    }
    for (size_t i = capacity; i < q.size(); ++i) kept[q[i]] = 0;
  }
  return kept;
}

// Reports the first slot whose kept flag differs from `want`, with the expert's assignments.
void ExpectKept(const Routing& got, const std::vector<uint8_t>& want, DropPolicy policy,
                const std::string& input) {
  ASSERT_EQ(got.kept.size(), want.size()) << input << "; " << SeedNote();
  const int E = got.experts, k = got.top_k;
  for (size_t s = 0; s < want.size(); ++s) {
    if (got.kept[s] == want[s]) continue;
    const int e = got.expert[s];
    std::string holds;
    for (size_t q = 0; q < want.size(); ++q) {
      if (got.expert[q] != e) continue;
      holds += Str(holds.empty() ? "" : ", ", "token ", q / k);
      if (policy == DropPolicy::kByProbability) holds += Str(" (p ", got.probs[(q / k) * E + e], ")");
    }
    ADD_FAILURE() << input << ": kept[" << s / k << ", " << s % k << "] = " << +got.kept[s] << "; expert "
                  << e << " holds " << holds << " and keeps the "
                  << (policy == DropPolicy::kByPosition ? "earliest" : "most probable") << " ones; "
                  << SeedNote();
    return;
  }
}

TEST(ApplyCapacityHidden, DropsLowestProbabilityFirst) {
  CaseRandom rnd;
  DropCase c = DrawDropCase(rnd, 1, 2, DropPolicy::kByProbability);
  const std::vector<float> gates = c.r.gate;
  const std::vector<uint8_t> want = Keep(c.r, c.capacity, DropPolicy::kByProbability);
  ASSERT_OK(ApplyCapacity(c.r, c.capacity, DropPolicy::kByProbability)) << c.input << "; " << SeedNote();
  ExpectKept(c.r, want, DropPolicy::kByProbability, c.input);
  EXPECT_TRUE(c.r.gate == gates) << "gates stay as they are; " << c.input << "; " << SeedNote();
}

TEST(ApplyCapacityHidden, DropsLatestPositionFirst) {
  CaseRandom rnd;
  DropCase c = DrawDropCase(rnd, 1, 2, DropPolicy::kByPosition);
  const std::vector<float> gates = c.r.gate;
  const std::vector<uint8_t> want = Keep(c.r, c.capacity, DropPolicy::kByPosition);
  ASSERT_OK(ApplyCapacity(c.r, c.capacity, DropPolicy::kByPosition)) << c.input << "; " << SeedNote();
  ExpectKept(c.r, want, DropPolicy::kByPosition, c.input);
  EXPECT_TRUE(c.r.gate == gates) << "gates stay as they are; " << c.input << "; " << SeedNote();
}

// Fixed: the tie-break rule's worked example. Equal probabilities keep the earlier token: E = 2, k = 1, T = 4
// on expert 0 with p = .7 .5 .5 .5, capacity 2 by probability keeps tokens 0 (.7) and 1 (the earliest of the
// three .5s).
TEST(ApplyCapacityHidden, EqualProbabilitiesKeepTheEarlierToken) {
  Routing r = MakeRouting(4, 2, 1, {.7f, .3f, .5f, .5f, .5f, .5f, .5f, .5f}, {0, 0, 0, 0});
  ASSERT_OK(ApplyCapacity(r, 2, DropPolicy::kByProbability));
  EXPECT_EQ(r.kept, (std::vector<uint8_t>{1, 1, 0, 0}));
}

// Top-2 by position; then capacity 0 drops every slot; a negative capacity is InvalidArgument.
TEST(ApplyCapacityHidden, TopTwoSlotsAndZeroCapacity) {
  CaseRandom rnd;
  DropCase c = DrawDropCase(rnd, 2, 2, DropPolicy::kByPosition);
  const std::vector<uint8_t> want = Keep(c.r, c.capacity, DropPolicy::kByPosition);
  ASSERT_OK(ApplyCapacity(c.r, c.capacity, DropPolicy::kByPosition)) << c.input << "; " << SeedNote();
  ExpectKept(c.r, want, DropPolicy::kByPosition, c.input);
  const DropPolicy policy = rnd.Chance(0.5) ? DropPolicy::kByPosition : DropPolicy::kByProbability;
  ASSERT_OK(ApplyCapacity(c.r, 0, policy)) << c.input << ", then capacity 0; " << SeedNote();
  EXPECT_TRUE(std::count(c.r.kept.begin(), c.r.kept.end(), 0) == static_cast<int64_t>(c.r.kept.size()))
      << "capacity 0 drops every slot; " << c.input << ", then capacity 0; " << SeedNote();
  const int64_t negative = -rnd.Int(1, 5);
  EXPECT_EQ(ApplyCapacity(c.r, negative, policy).code(), absl::StatusCode::kInvalidArgument)
      << "ApplyCapacity(capacity " << negative << "): capacity < 0; " << SeedNote();
}

// A layer with a tight capacity (factor 1/2, top-1, T = 2 E C tokens for an integer C, so E C = T / 2 are
// kept and half the tokens are dropped): a token whose only slot was dropped leaves unchanged (y = x), the
// kept ones match the dense reference on the kept slots only, and a dropped token's gradient is dy (the
// residual's alone).
TEST(MoeLayerCapacityHidden, DroppedTokensPassThroughTheResidual) {
  CaseRandom rnd;
  MoeConfig c;
  c.hidden = rnd.Int(3, 6), c.inner = rnd.Int(4, 10);
  c.experts = static_cast<int>(rnd.Int(2, 3)), c.top_k = 1;
  c.normalize_gates = rnd.Chance(0.5), c.seed = rnd.Next();
  c.capacity_factor = 0.5;
  c.drop_policy = rnd.Chance(0.5) ? DropPolicy::kByPosition : DropPolicy::kByProbability;
  const int E = c.experts;
  const int64_t C = rnd.Int(2, std::max(2, 6 / E));  // T / E * 0.5 exactly: C tokens per expert, E C = T / 2
  const int64_t T = 2 * E * C, h = c.hidden;
  ASSERT_OK_AND_ASSIGN(auto layer, MoeLayer::Create(c));
  tensor::FillNormal(layer->router().weight().value, rnd.Next(), 1.0f);
  nn::ZeroGrads(layer->Parameters());
  Tensor x = testutil::RandomTensor({T, h}, rnd.Next());
  const std::string input =
      Str("MoeLayer {h = ", h, ", f = ", c.inner, ", E = ", E, ", k = 1, ",
          c.normalize_gates ? "renormalised" : "raw", " gates, capacity factor 0.5 (C = ", C, "), drop by ",
          c.drop_policy == DropPolicy::kByPosition ? "position" : "probability", "}, T = ", T,
          " tokens, router weights and x drawn N(0, 1)");
  ASSERT_OK_AND_ASSIGN(Tensor y, layer->Forward(x));
  ASSERT_EQ(y.shape(), x.shape()) << input << "; " << SeedNote();
  const Routing& r = layer->routing();
  ASSERT_EQ(r.kept.size(), static_cast<size_t>(T)) << input << "; " << SeedNote();
  Routing all = r;
  all.kept.assign(T, 1);
  const std::vector<uint8_t> want_kept = Keep(all, C, c.drop_policy);
  ExpectKept(r, want_kept, c.drop_policy, input);
  if (r.kept != want_kept) return;
  for (int64_t t = 0; t < T; ++t) {
    const int e = r.expert[t];
    std::vector<double> want = testutil::Row(x, t);
    if (want_kept[t]) {
      std::vector<double> o = testutil::ExpertRef(*layer, e, want);
      const double g = c.normalize_gates ? 1.0 : r.probs[t * E + e];
      for (int64_t cc = 0; cc < h; ++cc) want[cc] += g * o[cc];
    }
    if (auto m = FirstMismatch(
            h, [&](int64_t cc) { return y.Get(t * h + cc); }, [&](int64_t cc) { return want[cc]; }, 2e-5,
            2e-5)) {
      ADD_FAILURE() << input << ": y[" << t << ", " << m.index << "] = " << m.got << " for a "
                    << (want_kept[t] ? "kept token (x + gate * Expert(x))"
                                     : "dropped token (it passes through the residual: y = x)")
                    << "; " << SeedNote();
      return;
    }
  }
  Tensor dy = testutil::RandomTensor({T, h}, rnd.Next());
  ASSERT_OK_AND_ASSIGN(Tensor dx, layer->Backward(dy));
  ASSERT_EQ(dx.shape(), x.shape()) << input << "; " << SeedNote();
  for (int64_t t = 0; t < T; ++t) {
    if (want_kept[t]) continue;
    if (auto m = FirstMismatch(
            h, [&](int64_t cc) { return dx.Get(t * h + cc); }, [&](int64_t cc) { return dy.Get(t * h + cc); },
            1e-6, 1e-6)) {
      ADD_FAILURE() << input << ": dx[" << t << ", " << m.index << "] = " << m.got
                    << " for a dropped token; its gradient is the residual's alone, dx = dy; " << SeedNote();
      return;
    }
  }
}

}  // namespace
}  // namespace distlab::moe
