// Hidden tests, Lab 2 stage D: GPT sample construction and blending, against references written here from
// gpt_dataset.h: the epoch formulas, a brute-force walk over the token stream (sample j starts on stream
// token j * L), and the greedy blending choice. Every case but the header's worked example draws its corpus,
// L, N, seeds and weights from the grading seed (test_util.h).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/gpt_dataset.h"
#include "labs/dataloader/indexed_dataset.h"
#include "tests/dataloader/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::distlab::testing::CaseRandom;
using testing::Drawn;
using testing::Show;
using testing::Str;
using V = std::vector<int64_t>;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp");
}

V Iota(int64_t from, int64_t to) {
  V v(static_cast<size_t>(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// References, from the formulas of gpt_dataset.h.
int64_t RefNumEpochs(int64_t T, int64_t L, int64_t N) { return (N * L + 1 + T - 1) / T; }
bool RefSeparate(int64_t E, int64_t T, int64_t L, int64_t N) {
  return E > 1 && N - ((E - 1) * T - 1) / L < (4 * ((T - 1) / L)) / 5;  // floor(0.8 x) for a whole x
}
V RefDocumentIndex(int64_t docs, int64_t E, uint64_t seed, bool separate, bool shuffle) {
  V all;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t d = 0; d < docs; ++d) all.push_back(d);
  }
  if (!shuffle) return all;
  if (!separate) {
    SeededShuffle(&all, seed);
    return all;
  }
  V head(all.begin(), all.end() - docs), tail(all.end() - docs, all.end());
  SeededShuffle(&head, seed);
  SeededShuffle(&tail, seed + 1);
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// Brute force: every token of the stream that `document_index` lays out, as (position, offset); row j of the
// sample index is token j * L's.
V RefSampleIndex(const std::vector<int32_t>& sizes, const V& document_index, int64_t L, int64_t rows) {
  V where;
  for (size_t p = 0; p < document_index.size(); ++p) {
    for (int32_t o = 0; o < sizes[static_cast<size_t>(document_index[p])]; ++o) {
      where.push_back(static_cast<int64_t>(p));
      where.push_back(o);
    }
  }
  V out;
  for (int64_t j = 0; j < rows; ++j) {
    out.push_back(where[static_cast<size_t>(2 * j * L)]);
    out.push_back(where[static_cast<size_t>(2 * j * L + 1)]);
  }
  return out;
}

std::vector<int32_t> DrawSizes(CaseRandom& rng, int64_t docs_lo, int64_t docs_hi, int64_t lo, int64_t hi) {
  std::vector<int32_t> sizes;
  for (int64_t d = rng.Int(docs_lo, docs_hi); d > 0; --d)
    sizes.push_back(static_cast<int32_t>(rng.Int(lo, hi)));
  return sizes;
}
int64_t Sum(const std::vector<int32_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
}

TEST(Gpt, EpochsAndTheSeparateFinalEpoch) {
  CaseRandom rng;
  for (int trial = 0; trial < 8; ++trial) {
    int64_t T, L, N;
    if (trial % 2 == 0) {
      T = rng.Int(2, 500);
      L = rng.Int(1, 40);
      N = rng.Int(1, 200);
    } else {
      // On the boundary or next to it: E * T - (N * L + 1) in [0, E - 1] (the +1 is the last sample's extra
      // token), so that E - 1 epochs are just too few.
      const int64_t E = rng.Int(1, 3);
      L = rng.Int(1, 20);
      N = rng.Int(1, 100);
      T = std::max<int64_t>(2, (N * L + 1 + E - 1) / E);
    }
    SCOPED_TRACE(Drawn(Str("T ", T, ", L ", L, ", N ", N)));
    const int64_t E = RefNumEpochs(T, L, N);
    EXPECT_EQ(NumEpochs(T, L, N), E) << "the smallest E with E * T >= N * L + 1";
    EXPECT_EQ(SeparateFinalEpoch(E, T, L, N), RefSeparate(E, T, L, N))
        << "E = " << E << ": the last epoch supplies " << N - ((E - 1) * T - 1) / L
        << " samples; separate when "
        << "fewer than floor(0.8 * floor((T - 1) / L)) = " << (4 * ((T - 1) / L)) / 5;
  }
}

TEST(Gpt, DocumentIndexEpochsAndShuffles) {
  CaseRandom rng;
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t docs = rng.Int(1, 8), E = rng.Int(1, 4);
    const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
    const bool shuffle = trial == 0 ? false : trial == 1 || rng.Chance(0.8);
    const bool separate = E > 1 && (trial == 1 || rng.Chance(0.5));
    SCOPED_TRACE(Drawn(Str(docs, " documents, E ", E, ", seed ", seed, shuffle ? ", shuffle" : ", no shuffle",
                           separate ? ", separate final epoch" : "")));
    EXPECT_SAME(BuildDocumentIndex(docs, E, seed, separate, shuffle),
                RefDocumentIndex(docs, E, seed, separate, shuffle))
        << "E copies of 0..D-1; shuffled whole with seed, or the first E-1 epochs with seed and the last "
           "with "
           "seed + 1";
  }
}

TEST(Gpt, SampleIndexSharesTheBoundaryToken) {
  CaseRandom rng;
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<int32_t> sizes = DrawSizes(rng, 1, 6, 1, 8);
    V doc_index;
    for (int64_t k = rng.Int(2, 10); k > 0; --k)
      doc_index.push_back(rng.Int(0, static_cast<int64_t>(sizes.size()) - 1));
    int64_t tokens = 0;
    for (int64_t d : doc_index) tokens += sizes[static_cast<size_t>(d)];
    const int64_t L = rng.Int(1, std::max<int64_t>(1, std::min<int64_t>(6, tokens - 1)));
    const int64_t most = (tokens - 1) / L;  // samples that fit
    if (most < 1) continue;
    const int64_t num = rng.Int(1, most);
    SCOPED_TRACE(Drawn(
        Str("sizes ", Show(sizes), ", document index ", Show(doc_index), ", L ", L, ", ", num, " samples")));
    ASSERT_OK_AND_ASSIGN(V idx, BuildSampleIndex(sizes, doc_index, L, num));
    EXPECT_SAME(idx, RefSampleIndex(sizes, doc_index, L, num + 1))
        << "row j is where stream token j * L lies: sample j ends on the token sample j + 1 starts on";
    EXPECT_EQ(BuildSampleIndex(sizes, doc_index, L, most + 1).status().code(), absl::StatusCode::kOutOfRange)
        << most + 1 << " samples of L + 1 tokens, sharing their boundaries, need more than " << tokens
        << " tokens";
  }
}

// A corpus written as an int32 indexed dataset: one document per sequence, random tokens. Returns the tokens.
std::vector<V> WriteCorpus(CaseRandom& rng, const std::string& prefix, const std::vector<int32_t>& sizes) {
  std::vector<V> docs;
  auto w = IndexedDatasetWriter::Create(prefix, DType::kInt32);
  EXPECT_OK(w.status());
  if (!w.ok()) return docs;
  for (int32_t s : sizes) {
    V doc;
    for (int32_t k = 0; k < s; ++k) doc.push_back(rng.Int(0, 50000));
    EXPECT_OK((*w)->AddSequence(doc));
    EXPECT_OK((*w)->EndDocument());
    docs.push_back(doc);
  }
  EXPECT_OK((*w)->Finalize());
  return docs;
}

// With shuffle off, the documents in order, E times over, are one token stream, and sample j is its tokens
// [j L, j L + L]. N > L: enough samples that a sample index which does not share the boundary token runs out
// of tokens.
TEST(Gpt, SamplesAreWindowsOfTheTokenStream) {
  CaseRandom rng;
  const std::vector<int32_t> sizes = DrawSizes(rng, 2, 6, 1, 12);
  const int64_t T = Sum(sizes), L = rng.Int(2, 6);
  const int64_t N = rng.Int(L + 1, std::max(L + 1, 5 * T / (2 * L)));
  SCOPED_TRACE(Drawn(Str("document sizes ", Show(sizes), ", L ", L, ", N ", N, ", no shuffle")));
  const std::string prefix = TempDir() + "/gptstream_" + std::to_string(::getpid());
  const std::vector<V> docs = WriteCorpus(rng, prefix, sizes);
  ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(prefix));
  GptConfig c;
  c.seq_length = L;
  c.num_samples = N;
  c.shuffle = false;
  ASSERT_OK_AND_ASSIGN(GptIndices g, BuildGptIndices(ds->sequence_lengths(), c));
  const int64_t E = RefNumEpochs(T, L, N), S = (E * T - 1) / L;
  EXPECT_EQ(g.num_epochs, E);
  EXPECT_EQ(static_cast<int64_t>(g.sample_index.size()), 2 * (S + 1))
      << "S + 1 rows, S = floor((E T - 1) / L)";
  V stream;
  for (int64_t e = 0; e < E; ++e) {
    for (const V& d : docs) stream.insert(stream.end(), d.begin(), d.end());
  }
  for (int64_t j = 0; j < N; ++j) {
    ASSERT_OK_AND_ASSIGN(V s, GptSample(*ds, g, L, j));
    EXPECT_SAME(s, V(stream.begin() + j * L, stream.begin() + j * L + L + 1))
        << "sample " << j << " is stream tokens [" << j * L << ", " << j * L + L << "]";
  }
}

TEST(Gpt, ShuffleIndexIsASeededPermutation) {
  CaseRandom rng;
  for (int trial = 0; trial < 2; ++trial) {
    const int64_t L = rng.Int(2, 10);
    std::vector<int32_t> sizes;
    do {
      sizes = DrawSizes(rng, 2, 5, 5, 60);
    } while ((Sum(sizes) - 1) / L < L + 3);
    const int64_t T = Sum(sizes), x = (T - 1) / L;  // samples per epoch
    // Trial 0: a barely used second epoch (shuffled on its own); trial 1: any N > L.
    const int64_t N = trial == 0 ? x + rng.Int(1, (4 * x) / 5 - 1) : rng.Int(L + 1, 3 * x);
    const uint64_t seed = static_cast<uint64_t>(rng.Int(0, 100000));
    SCOPED_TRACE(Drawn(Str("document sizes ", Show(sizes), ", L ", L, ", N ", N, ", seed ", seed)));
    GptConfig c;
    c.seq_length = L;
    c.num_samples = N;
    c.seed = seed;
    ASSERT_OK_AND_ASSIGN(GptIndices g, BuildGptIndices(sizes, c));
    const int64_t E = RefNumEpochs(T, L, N), S = (E * T - 1) / L;
    const bool separate = RefSeparate(E, T, L, N);
    EXPECT_EQ(g.num_epochs, E);
    EXPECT_EQ(g.separate_final_epoch, separate);
    const int64_t before = separate ? ((E - 1) * T - 1) / L : S;
    V head = Iota(0, before), tail = Iota(before, S);
    SeededShuffle(&head, seed + 2);
    SeededShuffle(&tail, seed + 3);
    head.insert(head.end(), tail.begin(), tail.end());
    EXPECT_SAME(g.shuffle_index, head)
        << (separate ? "SeededShuffle of the samples before the final epoch with "
                       "seed + 2, of the rest with seed + 3"
                     : "SeededShuffle of all S samples with seed + 2");
    EXPECT_EQ(static_cast<int64_t>(g.sample_index.size()), 2 * (S + 1));
  }
}

TEST(Gpt, IndicesCachedOnDiskKeyedByConfig) {
  CaseRandom rng;
  const std::string dir = TempDir() + "/gptcache_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const int64_t L = rng.Int(2, 8);
  std::vector<int32_t> sizes;
  do {
    sizes = DrawSizes(rng, 2, 5, 3, 25);
  } while ((Sum(sizes) - 1) / L < L + 1);
  GptConfig c;
  c.seq_length = L;
  c.num_samples = rng.Int(L + 1, 2 * (Sum(sizes) - 1) / L);
  c.seed = static_cast<uint64_t>(rng.Int(0, 100000));
  c.cache_dir = dir;
  c.name = "corpus" + std::to_string(rng.Int(0, 99)) + "/train";
  SCOPED_TRACE(Drawn(Str("document sizes ", Show(sizes), ", L ", L, ", N ", c.num_samples, ", seed ", c.seed,
                         ", name ", c.name)));
  ASSERT_OK_AND_ASSIGN(GptIndices a, BuildGptIndices(sizes, c));
  EXPECT_FALSE(a.loaded_from_cache);
  ASSERT_OK_AND_ASSIGN(GptIndices b, BuildGptIndices(sizes, c));
  EXPECT_TRUE(b.loaded_from_cache) << "the same configuration again";
  EXPECT_EQ(a.cache_key, b.cache_key);
  EXPECT_SAME(b.document_index, a.document_index);
  EXPECT_SAME(b.sample_index, a.sample_index);
  EXPECT_SAME(b.shuffle_index, a.shuffle_index);
  GptConfig other_seed = c;
  other_seed.seed = c.seed + static_cast<uint64_t>(rng.Int(1, 50));
  ASSERT_OK_AND_ASSIGN(GptIndices d, BuildGptIndices(sizes, other_seed));
  EXPECT_FALSE(d.loaded_from_cache) << "another seed (" << other_seed.seed << ") is another configuration";
  EXPECT_NE(d.cache_key, a.cache_key);
  std::vector<int32_t> other = sizes;
  const size_t k = static_cast<size_t>(rng.Int(0, static_cast<int64_t>(sizes.size()) - 1));
  other[k] += static_cast<int32_t>(rng.Int(1, 5));
  ASSERT_OK_AND_ASSIGN(GptIndices e, BuildGptIndices(other, c));
  EXPECT_FALSE(e.loaded_from_cache) << "other documents (document " << k << " of " << other[k]
                                    << " tokens) are another configuration";
  EXPECT_NE(e.cache_key, a.cache_key);
}

// The header's worked example.
TEST(Blending, GreedyWorkedExample) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({0.5, 0.25, 0.25}, 4));
  EXPECT_EQ(b.dataset_index, (V{0, 1, 2, 0}));
  EXPECT_EQ(b.dataset_sample_index, (V{0, 0, 0, 1}));
}

// Equal weights: every error ties whenever the counts do, and the lowest index wins: round robin.
TEST(Blending, TiesGoToTheLowestIndex) {
  CaseRandom rng;
  const int64_t K = rng.Int(2, 6), size = rng.Int(K, 4 * K);
  const double w = static_cast<double>(rng.Int(1, 9));
  SCOPED_TRACE(Drawn(Str(K, " datasets of weight ", w, ", ", size, " samples")));
  ASSERT_OK_AND_ASSIGN(BlendIndices b,
                       BuildBlendingIndices(std::vector<double>(static_cast<size_t>(K), w), size));
  V want, want_sample;
  for (int64_t i = 0; i < size; ++i) {
    want.push_back(i % K);
    want_sample.push_back(i / K);
  }
  EXPECT_SAME(b.dataset_index, want) << "ties go to the lowest index";
  EXPECT_SAME(b.dataset_sample_index, want_sample);
}

// Reference greedy blending; `mode` 0: the header's rule, 1: error w * i, 2: w * (i + 1), 3: ties to the
// highest index (the last three are only there to choose weights under which each differs from the rule).
BlendIndices RefBlend(const std::vector<double>& weights, int64_t size, int mode) {
  double sum = 0;
  for (double w : weights) sum += w;
  std::vector<double> norm;
  for (double w : weights) norm.push_back(w / sum);
  std::vector<int64_t> taken(weights.size(), 0);
  BlendIndices out;
  for (int64_t i = 0; i < size; ++i) {
    const double at = mode == 1   ? static_cast<double>(i)
                      : mode == 2 ? static_cast<double>(i + 1)
                                  : static_cast<double>(std::max<int64_t>(i, 1));
    size_t best = 0;
    for (size_t d = 1; d < norm.size(); ++d) {
      const double e = norm[d] * at - static_cast<double>(taken[d]),
                   top = norm[best] * at - static_cast<double>(taken[best]);
      if (e > top || (mode == 3 && e == top)) best = d;
    }
    out.dataset_index.push_back(static_cast<int64_t>(best));
    out.dataset_sample_index.push_back(taken[best]++);
  }
  return out;
}

// Weights that sum to a power of two (so that normalised weights and every error are exact, and ties are
// real ties), under which the rule's picks differ from those of weight * i, weight * (i + 1) and ties to the
// highest index.
TEST(Blending, ErrorIsWeightTimesMaxOfIAndOne) {
  CaseRandom rng;
  std::vector<double> weights;
  int64_t size = 0;
  BlendIndices want;
  for (;;) {
    const int64_t K = rng.Int(2, 4), total = int64_t{1} << rng.Int(2, 5);
    if (total < K) continue;
    V cuts = {0, total};
    while (static_cast<int64_t>(cuts.size()) < K + 1) {
      const int64_t c = rng.Int(1, total - 1);
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    weights.clear();
    for (size_t d = 0; d + 1 < cuts.size(); ++d)
      weights.push_back(static_cast<double>(cuts[d + 1] - cuts[d]));
    size = rng.Int(8, 40);
    want = RefBlend(weights, size, 0);
    bool differs = true;
    for (int mode = 1; mode <= 3; ++mode)
      differs = differs && RefBlend(weights, size, mode).dataset_index != want.dataset_index;
    if (differs) break;
  }
  SCOPED_TRACE(Drawn(Str("weights ", Show(weights), ", ", size, " samples")));
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices(weights, size));
  EXPECT_SAME(b.dataset_index, want.dataset_index)
      << "pick the largest weight * max(i, 1) - taken, ties to the lowest index";
  EXPECT_SAME(b.dataset_sample_index, want.dataset_sample_index);
}

TEST(Blending, CountsTrackTheWeights) {
  CaseRandom rng;
  std::vector<double> weights;
  for (int64_t k = rng.Int(2, 5); k > 0; --k) weights.push_back(static_cast<double>(rng.Int(1, 20)));
  const int64_t size = rng.Int(200, 2000);
  SCOPED_TRACE(Drawn(Str("weights ", Show(weights), ", ", size, " samples")));
  double sum = 0;
  for (double w : weights) sum += w;
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices(weights, size));
  ASSERT_EQ(static_cast<int64_t>(b.dataset_index.size()), size);
  ASSERT_EQ(static_cast<int64_t>(b.dataset_sample_index.size()), size);
  std::vector<int64_t> n(weights.size(), 0);
  for (size_t i = 0; i < b.dataset_index.size(); ++i) {
    const int64_t d = b.dataset_index[i];
    ASSERT_TRUE(d >= 0 && d < static_cast<int64_t>(weights.size())) << "sample " << i << ": dataset " << d;
    ASSERT_EQ(b.dataset_sample_index[i], n[static_cast<size_t>(d)])
        << "sample " << i << ": the sample indices count up per dataset";
    ++n[static_cast<size_t>(d)];
    for (size_t k = 0; k < weights.size(); ++k) {
      const double expect = weights[k] / sum * static_cast<double>(i + 1);
      ASSERT_LE(std::abs(static_cast<double>(n[k]) - expect), 2.0)
          << "after " << i + 1 << " samples dataset " << k << " has " << n[k] << ", its weight says "
          << expect;
    }
  }
}

TEST(Blending, RejectsBadWeights) {
  CaseRandom rng;
  const int64_t size = rng.Int(1, 20);
  std::vector<double> negative;
  for (int64_t k = rng.Int(2, 5); k > 0; --k) negative.push_back(static_cast<double>(rng.Int(1, 10)) / 4);
  negative[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(negative.size()) - 1))] =
      -static_cast<double>(rng.Int(1, 10)) / 8;
  const std::vector<double> zeros(static_cast<size_t>(rng.Int(1, 5)), 0.0);
  for (const std::vector<double>& w : {std::vector<double>{}, negative, zeros}) {
    SCOPED_TRACE(Drawn(Str("weights ", Show(w), ", ", size, " samples")));
    EXPECT_EQ(BuildBlendingIndices(w, size).status().code(), absl::StatusCode::kInvalidArgument)
        << "empty, negative or all-zero weights";
  }
}

}  // namespace
}  // namespace distlab::dataloader
