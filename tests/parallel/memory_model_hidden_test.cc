// Hidden tests of Lab 4 stage D: the formulas of memory_model.h against the same formulas written out here,
// on shapes, rank counts and gradients drawn from the grading seed (tools/testing/test_support.h:
// CaseRandom); a failure names the inputs that broke it and ends with the seed to draw them again. One worked
// example stays fixed: memcalc's defaults, whose 137 and 32 GiB notes/04-parallel.md quotes.
//
// Tolerances: the formulas are real arithmetic on whole numbers below 2^53; two correct programs differ only
// in the order of a few multiplications and divisions, a few ulps (relative 1e-15), so 1e-12 relative is
// generous -- and a dropped fraction (39 for 39.0625 at 1 part in 10^4 or more) or a missing factor is far
// outside it.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/parallel/memory_model.h"
#include "tools/testing/test_support.h"

namespace distlab::parallel {
namespace {

using distlab::testing::CaseRandom;
using distlab::testing::SeedNote;

constexpr double kPsi8B = 8030261248.0;
constexpr double kRel = 1e-12;

// |got - want| within kRel of |want| (exactly equal when want is 0).
bool Close(double got, double want, double rel = kRel) {
  return std::fabs(got - want) <= rel * std::fabs(want);
}

std::string Describe(const TransformerShape& s) {
  std::ostringstream o;
  o << "{layers " << s.layers << ", hidden " << s.hidden << ", heads " << s.heads << ", kv_heads "
    << s.kv_heads << ", ffn " << s.ffn << ", vocab " << s.vocab << ", " << (s.gated_mlp ? "gated" : "plain")
    << " MLP, " << (s.tied_embeddings ? "tied" : "untied") << "}";
  return o.str();
}

const char* Name(Recompute r) {
  return r == Recompute::kNone ? "no recomputation" : r == Recompute::kSelective ? "selective" : "full";
}

// A Llama- or GPT-like shape: h = a * head_dim, k divides a, f between h and 4h (a multiple of 64).
TransformerShape DrawShape(CaseRandom& rng) {
  TransformerShape s;
  s.heads = rng.Pick(std::vector<int64_t>{4, 8, 12, 16, 24, 32, 40, 48, 64});
  std::vector<int64_t> divisors;
  for (int64_t k = 1; k <= s.heads; ++k) {
    if (s.heads % k == 0) divisors.push_back(k);
  }
  s.kv_heads = rng.Pick(divisors);
  s.hidden = s.heads * rng.Pick(std::vector<int64_t>{32, 64, 128});
  s.ffn = 64 * rng.Int(s.hidden / 64, 4 * s.hidden / 64);
  s.layers = rng.Int(1, 96);
  s.vocab = rng.Int(1000, 260000);
  s.gated_mlp = rng.Chance(0.5);
  s.tied_embeddings = rng.Chance(0.5);
  return s;
}

// The header's count, written out.
int64_t Count(const TransformerShape& s) {
  const int64_t h = s.hidden, kv = h * s.kv_heads / s.heads;
  const int64_t layer = 2 * h * h + 2 * h * kv + (s.gated_mlp ? 3 : 2) * h * s.ffn + 2 * h;
  return s.vocab * h * (s.tied_embeddings ? 1 : 2) + s.layers * layer + h;
}

// The header's byte model per rank.
ModelStateBytes States(double psi, int n, int stage, bool mixed) {
  ModelStateBytes b{(mixed ? 2.0 : 4.0) * psi, (mixed ? 2.0 : 4.0) * psi, (mixed ? 12.0 : 8.0) * psi};
  if (stage >= 1) b.optimizer /= n;
  if (stage >= 2) b.grads /= n;
  if (stage >= 3) b.params /= n;
  return b;
}

// One layer's activation bytes for one micro-batch.
double Activations(const TransformerShape& s, int64_t seq, int64_t b, Recompute r, int tp) {
  const double sbh = static_cast<double>(seq) * b * s.hidden;
  const double per = r == Recompute::kNone        ? 34.0 + 5.0 * s.heads * seq / s.hidden
                     : r == Recompute::kSelective ? 34.0
                                                  : 2.0;
  return sbh * per / tp;
}

TEST(ParameterCountHidden, LlamaLikeShapes) {
  CaseRandom rng;
  for (int draw = 0; draw < 6; ++draw) {
    const TransformerShape s = DrawShape(rng);
    const int64_t got = ParameterCount(s), want = Count(s);
    if (got != want)
      ADD_FAILURE() << "ParameterCount(" << Describe(s) << ") is " << got << ", off by " << got - want
                    << " from memory_model.h's count (embeddings, per layer q, o, k, v, the MLP and two "
                       "norms, one final norm; no biases); "
                    << SeedNote();
  }
}

// Shapes where 5 a s / h is a whole number (the fraction rule is the next case's), every recomputation
// setting at t = 1, and tensor parallelism without recomputation.
TEST(ActivationsHidden, PerLayerFormulaForEachRecomputation) {
  CaseRandom rng;
  for (int draw = 0; draw < 4; ++draw) {
    const TransformerShape s = DrawShape(rng);
    const int64_t head_dim = s.hidden / s.heads;
    const int64_t seq = head_dim * rng.Int(1, 64), b = rng.Int(1, 8);  // 5 a s / h = 5 s / head_dim, whole
    const int t = static_cast<int>(rng.Int(2, 8));
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      const double got = ActivationBytesPerLayer(s, seq, b, r, 1), want = Activations(s, seq, b, r, 1);
      if (!Close(got, want))
        ADD_FAILURE() << "ActivationBytesPerLayer(" << Describe(s) << ", s = " << seq << ", b = " << b << ", "
                      << Name(r) << ", t = 1) is " << got << " bytes, off by a factor " << got / want
                      << " from the header's formula; " << SeedNote();
    }
    const double got = ActivationBytesPerLayer(s, seq, b, Recompute::kNone, t);
    const double want = Activations(s, seq, b, Recompute::kNone, t);
    if (!Close(got, want))
      ADD_FAILURE() << "ActivationBytesPerLayer(" << Describe(s) << ", s = " << seq << ", b = " << b
                    << ", no recomputation, t = " << t << ") is " << got << " bytes, off by a factor "
                    << got / want << " from the header's formula; " << SeedNote();
  }
}

// memory_model.h: real arithmetic everywhere, no integer division -- 5 a s / h with a fraction, and Psi / t
// not a whole number of parameters, with full recomputation divided by t too.
TEST(ActivationsHidden, RealArithmeticNotIntegerDivision) {
  CaseRandom rng;
  for (int draw = 0; draw < 3; ++draw) {
    const TransformerShape s = DrawShape(rng);
    const int64_t head_dim = s.hidden / s.heads;
    int64_t seq = rng.Int(64, 8192);
    if (seq % head_dim == 0) ++seq;  // 5 a s / h = 5 s / head_dim has a fraction (head_dim is a power of 2)
    const int64_t b = rng.Int(1, 4);
    const double got = ActivationBytesPerLayer(s, seq, b, Recompute::kNone, 1);
    const double want = Activations(s, seq, b, Recompute::kNone, 1);
    if (!Close(got, want))
      ADD_FAILURE() << "ActivationBytesPerLayer(" << Describe(s) << ", s = " << seq << ", b = " << b
                    << ", no recomputation, t = 1) is " << got << " bytes, off by a factor " << got / want
                    << "; 5 a s / h = " << 5.0 * s.heads * seq / s.hidden << " here (real arithmetic); "
                    << SeedNote();
    // Psi / t is not rounded to whole parameters; full recomputation is divided by t too.
    const double psi = static_cast<double>(Count(s));
    int t = static_cast<int>(rng.Int(3, 7));
    while (Count(s) % t == 0) ++t;
    Parallelism par;
    par.tp = t;
    const MemoryBreakdown m = EstimateMemory(s, seq, b, Recompute::kFull, par);
    if (!Close(m.states.total(), 16 * (psi / t)))
      ADD_FAILURE() << "EstimateMemory(" << Describe(s) << " (Psi = " << Count(s) << "), s = " << seq
                    << ", b = " << b << ", full recomputation, t = " << t << ").states.total() is "
                    << m.states.total() << " bytes, off by " << m.states.total() - 16 * (psi / t)
                    << " from 16 Psi / t (no rounding); " << SeedNote();
    const double act = s.layers * Activations(s, seq, b, Recompute::kFull, t);
    if (!Close(m.activations, act))
      ADD_FAILURE() << "EstimateMemory(" << Describe(s) << ", s = " << seq << ", b = " << b
                    << ", full recomputation, t = " << t << ").activations is " << m.activations
                    << " bytes, off by a factor " << m.activations / act << " from L layers of 2 s b h / t; "
                    << SeedNote();
  }
}

TEST(ZeroModelStatesHidden, EveryStageMixedAndF32) {
  CaseRandom rng;
  for (int draw = 0; draw < 3; ++draw) {
    const double psi = rng.Real(1e6, 1e11);
    const int n = static_cast<int>(rng.Int(2, 64));
    for (bool mixed : {true, false}) {
      for (int z = 0; z <= 3; ++z) {
        const ModelStateBytes got = ZeroModelStates(psi, n, z, mixed), want = States(psi, n, z, mixed);
        const bool ok = Close(got.params, want.params) && Close(got.grads, want.grads) &&
                        Close(got.optimizer, want.optimizer);
        if (!ok)
          ADD_FAILURE() << "ZeroModelStates(psi = " << psi << ", n = " << n << ", stage " << z << ", "
                        << (mixed ? "mixed precision" : "f32") << ") gives params " << got.params
                        << ", grads " << got.grads << ", optimizer " << got.optimizer
                        << " bytes; as multiples of psi: " << got.params / psi << ", " << got.grads / psi
                        << ", " << got.optimizer / psi << " (the byte model of memory_model.h); "
                        << SeedNote();
      }
    }
  }
}

// Llama-3-8B (the default shape) on t = 2, d = 8, with drawn sequence, micro-batch, recomputation (selective
// or full), ZeRO stage, precision and pipeline depth: states of Psi / (t p) sharded over d, and L layers'
// activations divided by t whatever p.
TEST(EstimateMemoryHidden, Llama3EightBOnTwoByEight) {
  CaseRandom rng;
  const TransformerShape shape;
  for (int draw = 0; draw < 3; ++draw) {
    Parallelism par;
    par.tp = 2;
    par.dp = 8;
    par.zero_stage = static_cast<int>(rng.Int(0, 3));
    par.mixed_precision = rng.Chance(0.5);
    par.pp = static_cast<int>(rng.Pick(std::vector<int64_t>{1, 2, 4, 8}));
    const int64_t seq = rng.Int(256, 8192), b = rng.Int(1, 4);
    const Recompute r = rng.Chance(0.5) ? Recompute::kSelective : Recompute::kFull;
    const MemoryBreakdown m = EstimateMemory(shape, seq, b, r, par);
    const double states =
        States(kPsi8B / (par.tp * par.pp), par.dp, par.zero_stage, par.mixed_precision).total();
    const double act = shape.layers * Activations(shape, seq, b, r, par.tp);
    const std::string input =
        "EstimateMemory(Llama-3-8B, s = " + std::to_string(seq) + ", b = " + std::to_string(b) + ", " +
        Name(r) + ", t = 2, p = " + std::to_string(par.pp) + ", d = 8, ZeRO-" +
        std::to_string(par.zero_stage) + (par.mixed_precision ? ", mixed precision)" : ", f32)");
    if (!Close(m.states.total(), states))
      ADD_FAILURE() << input << ".states.total() is " << m.states.total() << " bytes, off by a factor "
                    << m.states.total() / states
                    << " from the states of Psi / (t p) parameters sharded over d; " << SeedNote();
    if (!Close(m.activations, act))
      ADD_FAILURE()
          << input << ".activations is " << m.activations << " bytes, off by a factor " << m.activations / act
          << " from L layers' activations divided by t (1F1B: the first stage holds L layers' worth); "
          << SeedNote();
    if (!Close(m.total(), m.states.total() + m.activations)) ADD_FAILURE() << input << SeedNote();
  }
}

// memcalc's defaults (notes/04-parallel.md): Llama-3-8B, s = 4096, b = 1, d = 8, selective recomputation,
// mixed precision: 136.7 GiB per rank without ZeRO, 31.96 GiB with ZeRO-3. A fixed worked example.
TEST(EstimateMemoryHidden, MemcalcDefaultsGive137And32GiB) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  Parallelism par;
  par.dp = 8;
  par.zero_stage = 0;
  const MemoryBreakdown z0 = EstimateMemory(TransformerShape{}, 4096, 1, Recompute::kSelective, par);
  EXPECT_DOUBLE_EQ(z0.total(), 16 * kPsi8B + 32 * 16777216.0 * 34);
  EXPECT_NEAR(z0.total() / kGiB, 136.66, 0.01);
  par.zero_stage = 3;
  const MemoryBreakdown z3 = EstimateMemory(TransformerShape{}, 4096, 1, Recompute::kSelective, par);
  EXPECT_DOUBLE_EQ(z3.total(), 16 * kPsi8B / 8 + 32 * 16777216.0 * 34);
  EXPECT_NEAR(z3.total() / kGiB, 31.96, 0.01);
}

TEST(CommVolumeHidden, DdpZeroOneTwoAndThree) {
  CaseRandom rng;
  for (int draw = 0; draw < 3; ++draw) {
    const double psi = rng.Real(1e3, 1e10);
    const int n = static_cast<int>(rng.Int(2, 1024));
    for (int z = 0; z <= 3; ++z) {
      const double got = CommElementsPerRank(psi, n, z);
      const double want = (z == 3 ? 3.0 : 2.0) * psi * (n - 1) / n;
      if (!Close(got, want))
        ADD_FAILURE() << "CommElementsPerRank(psi = " << psi << ", n = " << n << ", stage " << z << ") is "
                      << got << ", " << got / psi
                      << " psi; ring collectives send (n - 1) / n of their array each; " << SeedNote();
    }
    const int z = static_cast<int>(rng.Int(0, 3));
    if (CommElementsPerRank(psi, 1, z) != 0.0)
      ADD_FAILURE() << "CommElementsPerRank(psi = " << psi << ", n = 1, stage " << z
                    << "): one rank sends nothing; " << SeedNote();
  }
}

// B_simple = tr(Sigma) / |G|^2 from per-example gradients, unbiased estimators (memory_model.h). Drawn
// gradients: m examples of P coordinates around a mean large enough that S > 0.
struct Examples {
  std::vector<std::vector<float>> g;
  double mean_sq = 0, trace = 0;  // |G^|^2 and T, in double
};

Examples Analyse(std::vector<std::vector<float>> g) {
  Examples e{std::move(g)};
  const size_t m = e.g.size(), p = e.g[0].size();
  std::vector<double> mean(p, 0.0);
  for (const auto& x : e.g)
    for (size_t j = 0; j < p; ++j) mean[j] += x[j];
  for (double& v : mean) v /= static_cast<double>(m);
  for (double v : mean) e.mean_sq += v * v;
  for (const auto& x : e.g)
    for (size_t j = 0; j < p; ++j) e.trace += (x[j] - mean[j]) * (x[j] - mean[j]);
  e.trace /= static_cast<double>(m - 1);
  return e;
}

// Multiples of 1/4 (exact in float and in every sum here), mean coordinates in +-[1, 3], noise within +-1,
// with |G^|^2 - T / m at least a fifth of |G^|^2 and T > 0.
Examples DrawExamples(CaseRandom& rng, int64_t m_hi, int64_t p_hi) {
  for (;;) {
    const int64_t m = rng.Int(2, m_hi), p = rng.Int(1, p_hi);
    std::vector<float> mu(p);
    for (float& v : mu) v = static_cast<float>((rng.Chance(0.5) ? 1 : -1) * rng.Int(4, 12)) / 4.f;
    std::vector<std::vector<float>> g(m, std::vector<float>(p));
    for (auto& x : g)
      for (int64_t j = 0; j < p; ++j) x[j] = mu[j] + static_cast<float>(rng.Int(-4, 4)) / 4.f;
    Examples e = Analyse(std::move(g));
    if (e.trace > 0 && e.mean_sq - e.trace / m >= 0.2 * e.mean_sq) return e;
  }
}

std::string Show(const std::vector<std::vector<float>>& g) {
  std::ostringstream o;
  o << "{";
  for (size_t i = 0; i < g.size(); ++i) {
    o << (i ? ", " : "") << "(";
    for (size_t j = 0; j < g[i].size(); ++j) o << (j ? ", " : "") << g[i][j];
    o << ")";
  }
  o << "}";
  return o.str();
}

TEST(NoiseScaleHidden, TraceSigmaDividesByMMinusOne) {
  CaseRandom rng;
  for (int draw = 0; draw < 3; ++draw) {
    const Examples e = DrawExamples(rng, 5, 3);
    auto ns = GradientNoiseScale(e.g);
    if (!ns.ok()) {
      ADD_FAILURE() << "GradientNoiseScale(" << Show(e.g) << ") returned " << ns.status()
                    << "; these examples have S > 0; " << SeedNote();
      continue;
    }
    if (!Close(ns->trace_sigma, e.trace, 1e-9))
      ADD_FAILURE()
          << "GradientNoiseScale(" << Show(e.g) << ", m = " << e.g.size() << ").trace_sigma is "
          << ns->trace_sigma
          << "; T is the sample variance of the examples, summed over the coordinates (memory_model.h); "
          << SeedNote();
  }
}

TEST(NoiseScaleHidden, GradNormSubtractsTheVarianceOfTheMean) {
  CaseRandom rng;
  for (int draw = 0; draw < 3; ++draw) {
    const Examples e = DrawExamples(rng, 5, 3);
    auto ns = GradientNoiseScale(e.g);
    if (!ns.ok()) {
      ADD_FAILURE() << "GradientNoiseScale(" << Show(e.g) << ") returned " << ns.status()
                    << "; these examples have S > 0; " << SeedNote();
      continue;
    }
    const double m = static_cast<double>(e.g.size());
    // Given the returned T (checked by the case above): S = |G^|^2 - T / m, B_simple = T / S.
    if (!Close(ns->grad_norm_sq, e.mean_sq - ns->trace_sigma / m, 1e-9))
      ADD_FAILURE() << "GradientNoiseScale(" << Show(e.g) << ", m = " << e.g.size() << ").grad_norm_sq is "
                    << ns->grad_norm_sq << " with |G^|^2 = " << e.mean_sq
                    << " and the returned T = " << ns->trace_sigma
                    << " (|G^|^2 alone overestimates |G|^2 by the variance of the mean); " << SeedNote();
    if (!Close(ns->b_simple, ns->trace_sigma / ns->grad_norm_sq, 1e-9))
      ADD_FAILURE() << "GradientNoiseScale(" << Show(e.g) << "): b_simple is " << ns->b_simple
                    << " with T = " << ns->trace_sigma << " and S = " << ns->grad_norm_sq
                    << "; B_simple = T / S; " << SeedNote();
  }
}

// Scaling every gradient by c scales T and S by c^2 and leaves B_simple; identical examples have no noise.
TEST(NoiseScaleHidden, ScaleInvariantAndZeroWithoutNoise) {
  CaseRandom rng;
  const Examples e = DrawExamples(rng, 6, 4);
  const float c = static_cast<float>(rng.Pick(std::vector<int64_t>{-3, -2, 2, 3, 4, 5}));
  std::vector<std::vector<float>> scaled = e.g;
  for (auto& x : scaled)
    for (float& v : x) v *= c;  // exact: multiples of 1/4 times a small whole number
  auto a = GradientNoiseScale(e.g);
  auto b = GradientNoiseScale(scaled);
  if (!a.ok() || !b.ok()) {
    ADD_FAILURE() << "GradientNoiseScale(" << Show(e.g) << ") and the same times " << c << " returned "
                  << (a.ok() ? b.status() : a.status()) << "; these examples have S > 0; " << SeedNote();
    return;
  }
  if (!Close(b->trace_sigma, c * c * a->trace_sigma, 1e-9))
    ADD_FAILURE() << "GradientNoiseScale(" << Show(e.g) << ") gives T = " << a->trace_sigma
                  << ", the same examples times " << c << " give T = " << b->trace_sigma << ", not " << c * c
                  << " times as much; " << SeedNote();
  if (!Close(b->b_simple, a->b_simple, 1e-9))
    ADD_FAILURE() << "GradientNoiseScale(" << Show(e.g) << ") gives B_simple = " << a->b_simple
                  << ", the same examples times " << c << " give " << b->b_simple
                  << "; B_simple does not depend on the gradients' scale; " << SeedNote();
  // m identical examples: no noise at all.
  const int64_t m = rng.Int(2, 6), p = rng.Int(1, 4);
  std::vector<float> one(p);
  for (float& v : one) v = static_cast<float>(rng.Int(-12, 12)) / 4.f;
  one[0] = static_cast<float>(rng.Int(1, 12)) / 4.f;  // not all zero
  double norm = 0;
  for (float v : one) norm += static_cast<double>(v) * v;
  const std::vector<std::vector<float>> same(m, one);
  auto s = GradientNoiseScale(same);
  if (!s.ok()) {
    ADD_FAILURE() << "GradientNoiseScale(" << Show(same) << ") (identical examples) returned " << s.status()
                  << "; " << SeedNote();
    return;
  }
  if (s->trace_sigma != 0.0)
    ADD_FAILURE() << "GradientNoiseScale(" << Show(same) << ") (identical examples): trace_sigma is "
                  << s->trace_sigma << "; " << SeedNote();
  if (!Close(s->grad_norm_sq, norm))
    ADD_FAILURE() << "GradientNoiseScale(" << Show(same) << ") (identical examples): grad_norm_sq is "
                  << s->grad_norm_sq << ", not the example's squared norm; " << SeedNote();
  if (s->b_simple != 0.0)
    ADD_FAILURE() << "GradientNoiseScale(" << Show(same) << ") (identical examples): b_simple is "
                  << s->b_simple << "; " << SeedNote();
}

TEST(NoiseScaleHidden, BadInputIsAnError) {
  CaseRandom rng;
  auto vec = [&](int64_t p) {
    std::vector<float> v(p);
    for (float& x : v) x = static_cast<float>(rng.Int(-12, 12)) / 4.f;
    return v;
  };
  const std::vector<std::vector<float>> one = {vec(rng.Int(1, 4))};
  const absl::Status s1 = GradientNoiseScale(one).status();
  if (s1.code() != absl::StatusCode::kInvalidArgument)
    ADD_FAILURE() << "GradientNoiseScale(" << Show(one) << "): one example (m < 2); it returned " << s1
                  << "; " << SeedNote();
  const int64_t p = rng.Int(1, 4);
  std::vector<std::vector<float>> unequal(rng.Int(2, 4), vec(p));
  unequal[rng.Int(0, unequal.size() - 1)] = vec(p + rng.Int(1, 2));
  const absl::Status s2 = GradientNoiseScale(unequal).status();
  if (s2.code() != absl::StatusCode::kInvalidArgument)
    ADD_FAILURE() << "GradientNoiseScale(" << Show(unequal) << "): examples of unequal lengths; it returned "
                  << s2 << "; " << SeedNote();
  const std::vector<std::vector<float>> empty(rng.Int(2, 4));
  const absl::Status s3 = GradientNoiseScale(empty).status();
  if (s3.code() != absl::StatusCode::kInvalidArgument)
    ADD_FAILURE() << "GradientNoiseScale(" << empty.size() << " examples of length 0): P = 0; it returned "
                  << s3 << "; " << SeedNote();
  // Pairs g, -g: the mean is 0 and T > 0, so S = 0 - T / m < 0: the noise swamps the gradient.
  std::vector<std::vector<float>> pairs;
  for (int64_t i = rng.Int(1, 3); i > 0; --i) {
    std::vector<float> g = vec(p);
    g[0] = static_cast<float>(rng.Int(1, 12)) / 4.f;
    pairs.push_back(g);
    for (float& x : g) x = -x;
    pairs.push_back(g);
  }
  const absl::Status s4 = GradientNoiseScale(pairs).status();
  if (s4.code() != absl::StatusCode::kFailedPrecondition)
    ADD_FAILURE() << "GradientNoiseScale(" << Show(pairs)
                  << "): the mean is 0, so the estimate of |G|^2 is negative; it "
                  << "returned " << s4 << "; " << SeedNote();
}

}  // namespace
}  // namespace distlab::parallel
