// Hidden tests, Lab 3 stage C (clusters): union-find, verification, survivors, the pipeline's errors.
//
// Every case but DeduplicateHidden.DefaultOptionsBand16x8 (the note's default banding) draws its input from a
// CaseRandom (test_util.h): union sequences, corpora (planted near-duplicates of labs/dedup/synthetic.h,
// exact copies, sliding windows of one text), thresholds, bandings, hash seeds, survivor seeds, thread
// counts. The pipeline is checked against a reference computed here from the headers' definitions -- word
// shingles and XXH3, the MinHash family of minhash.h, banding by comparing rows, exact Jaccard, components by
// relabelling
// -- so the expected clusters are exact for any draw.
#include <numeric>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dedup/cluster.h"
#include "labs/dedup/synthetic.h"
#include "tests/dedup/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

using testutil::CaseRandom;
using testutil::Drawn;
using testutil::List;
using Pairs = std::vector<std::pair<int, int>>;

// --- union-find against a model of the header's rules
// -------------------------------------------------------

// Depth of x's tree node, walking Parent() only (Find would compress the path it measures).
int Depth(const UnionFind& uf, int x) {
  int depth = 0;
  for (int z = x; uf.Parent(z) != z && depth <= uf.size(); z = uf.Parent(z)) ++depth;
  return depth;
}

// What cluster.h fixes about UnionFind, kept by relabelling: each element's set root, and every rank (a rank
// changes only for the winning root of a union of equal ranks).
struct Model {
  std::vector<int> root, rank;
  explicit Model(int n) : root(n), rank(n, 0) { std::iota(root.begin(), root.end(), 0); }
  // The root that stays on top when the roots ra and rb are united: the higher rank, else the smaller id.
  int Winner(int ra, int rb) const {
    if (rank[ra] != rank[rb]) return rank[ra] > rank[rb] ? ra : rb;
    return std::min(ra, rb);
  }
};

// Runs Union(a, b) on `uf` and `model` and says what breaks the header's rules, or "".
std::string CheckUnion(UnionFind& uf, Model& m, int a, int b) {
  const int ra = m.root[a], rb = m.root[b];
  const bool merged = uf.Union(a, b);
  if (ra == rb) {
    return merged ? absl::StrCat("Union(", a, ", ", b, ") returned true, but they were already one set") : "";
  }
  if (!merged) return absl::StrCat("Union(", a, ", ", b, ") returned false for two different sets");
  const int w = m.Winner(ra, rb), l = w == ra ? rb : ra;
  const bool tie = m.rank[ra] == m.rank[rb];
  std::string what;
  if (uf.Parent(l) != w || uf.Parent(w) != w) {
    what = absl::StrCat("Union(", a, ", ", b, ") united the roots ", ra, " (rank ", m.rank[ra], ") and ", rb,
                        " (rank ", m.rank[rb], "): now Parent(", ra, ") = ", uf.Parent(ra), ", Parent(", rb,
                        ") = ", uf.Parent(rb),
                        tie ? "; on equal rank the root with the larger id goes under the smaller one"
                            : "; the root of lower rank goes under the other");
  }
  for (int& r : m.root) r = r == l ? w : r;
  if (tie) ++m.rank[w];
  if (what.empty() && uf.Rank(w) != m.rank[w]) {
    what = absl::StrCat("after Union(", a, ", ", b, ") the root ", w, " has rank ", uf.Rank(w),
                        tie ? ": uniting two roots of equal rank raises the winner's rank by one"
                            : ": uniting roots of different rank changes no rank");
  }
  return what;
}

// Runs Find(x) and says what breaks the header's rules, or "".
std::string CheckFind(UnionFind& uf, const Model& m, int x) {
  std::vector<int> path = {x};
  while (uf.Parent(path.back()) != path.back() && static_cast<int>(path.size()) <= uf.size()) {
    path.push_back(uf.Parent(path.back()));
  }
  const int got = uf.Find(x);
  if (got != m.root[x])
    return absl::StrCat("Find(", x, ") = ", got, ", but the root of its set is ", m.root[x]);
  for (int z : path) {
    if (uf.Parent(z) != got) {
      return absl::StrCat("Find(", x, ") walked ", List(path), " but left Parent(", z, ") = ", uf.Parent(z),
                          ": path compression points every element of the walked path at the root");
    }
  }
  return "";
}

// A drawn sequence on 6-16 elements: first Union(a, b) of two singletons (a < b), then Union(b, c) with b now
// below a, then 3n random unions and finds; after each, the parents of the roots involved, every rank and
// the compressed paths are those of cluster.h's rules.
TEST(UnionFindHidden, RanksTiesAndPathCompression) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(6, 16));
  std::vector<int> first(n);
  std::iota(first.begin(), first.end(), 0);
  rng.Shuffle(first);
  const int a = std::min(first[0], first[1]), b = std::max(first[0], first[1]), c = first[2];
  UnionFind uf(n);
  Model model(n);
  std::string log = absl::StrCat("UnionFind(", n, ")");
  auto step = [&](bool union_op, int x, int y) {
    log += union_op ? absl::StrCat(", Union(", x, ", ", y, ")") : absl::StrCat(", Find(", x, ")");
    return union_op ? CheckUnion(uf, model, x, y) : CheckFind(uf, model, x);
  };
  std::string what = step(true, a, b);
  if (what.empty()) what = step(true, b, c);
  for (int op = 0; op < 3 * n && what.empty(); ++op) {
    const int x = static_cast<int>(rng.Int(0, n - 1)), y = static_cast<int>(rng.Int(0, n - 1));
    what = step(rng.Chance(0.6), x, y);
  }
  for (int x = 0; x < n && what.empty(); ++x) {
    if (uf.Rank(x) != model.rank[x]) what = absl::StrCat("Rank(", x, ") = ", uf.Rank(x), " at the end");
  }
  SCOPED_TRACE(Drawn("calls " + log));
  EXPECT_PROPERTY(what.empty()) << what;
}

// Union by rank: a tree of rank r holds at least 2^r elements, so no element is deeper than floor(log2 n).
// The bound is reached: uniting the roots of equal trees, pairs of them, ... builds a binomial tree of 2^m
// elements (m drawn in 5..9, the elements in drawn order) whose deepest element is m links below the root.
// Then unions along a drawn increasing chain of elements (each with the next) and drawn random unions never
// go deeper than floor(log2 n).
TEST(UnionFindHidden, DepthAtMostLog2NAndReached) {
  CaseRandom rng;
  const int m = static_cast<int>(rng.Int(5, 9)), size = 1 << m;
  std::vector<int> order(size);
  std::iota(order.begin(), order.end(), 0);
  rng.Shuffle(order);
  SCOPED_TRACE(Drawn(absl::StrCat("a binomial tree of ", size, " elements in the order ", List(order, 12))));
  UnionFind tree(size);
  std::vector<int> roots = order;  // roots[i]: the root of the i-th tree of the current round
  while (roots.size() > 1) {
    std::vector<int> next;
    for (size_t i = 0; i + 1 < roots.size(); i += 2) {
      ASSERT_TRUE(tree.Union(roots[i], roots[i + 1])) << "Union(" << roots[i] << ", " << roots[i + 1] << ")";
      next.push_back(std::min(roots[i], roots[i + 1]));  // equal ranks: the smaller id stays the root
    }
    roots = next;
  }
  EXPECT_EQ(tree.Rank(roots[0]), m) << "the root " << roots[0] << " after " << m << " rounds of equal ranks";
  int deepest = 0;
  for (int x = 0; x < size; ++x) deepest = std::max(deepest, Depth(tree, x));
  EXPECT_EQ(deepest, m) << "uniting equal trees " << m << " times: the deepest element is " << m
                        << " links down (log2 " << size << ")";

  const int n = static_cast<int>(rng.Int(100, 400));
  int log2n = 0;
  while ((2 << log2n) <= n) ++log2n;
  std::vector<int> chain;
  for (int x = 0; x < n; ++x) {
    if (rng.Chance(0.5)) chain.push_back(x);
  }
  UnionFind uf(n);
  for (size_t i = 0; i + 1 < chain.size(); ++i) (void)uf.Union(chain[i], chain[i + 1]);
  int worst = 0;
  for (int x = 0; x < n; ++x) worst = Depth(uf, x) > Depth(uf, worst) ? x : worst;
  EXPECT_LE(Depth(uf, worst), log2n)
      << "Union(x_i, x_(i+1)) along the " << chain.size() << " increasing elements " << List(chain, 8)
      << " of UnionFind(" << n << "): element " << worst << " is " << Depth(uf, worst)
      << " links deep; union by rank keeps every element within floor(log2 n) = " << log2n;
  const int steps = static_cast<int>(rng.Int(n, 2 * n));
  UnionFind random(n);
  for (int step = 0; step < steps; ++step) {
    const int x = static_cast<int>(rng.Int(0, n - 1)), y = static_cast<int>(rng.Int(0, n - 1));
    (void)random.Union(x, y);
    if (step % 50 == 49 || step == steps - 1) {
      for (int z = 0; z < n; ++z) {
        ASSERT_LE(Depth(random, z), log2n) << "element " << z << " after " << step + 1 << " drawn unions of "
                                           << n << " elements (floor(log2 n) = " << log2n << ")";
      }
    }
  }
}

// Drawn unions (n in 200..400, n/2 to n unions) against labels merged by brute force: each Union's result
// and, at the end, which elements share a set.
TEST(UnionFindHidden, MatchesBruteForceConnectivity) {
  CaseRandom rng;
  const int n = static_cast<int>(rng.Int(200, 400)), steps = static_cast<int>(rng.Int(n / 2, n));
  SCOPED_TRACE(Drawn(absl::StrCat("UnionFind(", n, ") and ", steps, " drawn unions")));
  UnionFind uf(n);
  std::vector<int> label(n);
  std::iota(label.begin(), label.end(), 0);
  std::string unions;
  for (int step = 0; step < steps; ++step) {
    const int a = static_cast<int>(rng.Int(0, n - 1)), b = static_cast<int>(rng.Int(0, n - 1));
    if (step < 12) unions += absl::StrCat(step ? ", " : "", "(", a, ", ", b, ")");
    const bool merged = label[a] != label[b];
    if (uf.Union(a, b) != merged) {
      ADD_FAILURE() << "Union(" << a << ", " << b << "), union " << step + 1 << ", returned " << !merged
                    << ": they were " << (merged ? "in different sets" : "already one set")
                    << " (the first unions: " << unions << ")";
      return;
    }
    const int from = label[b], to = label[a];
    for (int& l : label) l = l == from ? to : l;
  }
  for (int x = 0; x < n; ++x) {
    for (int y = x + 1; y < n; y += 7) {
      if ((uf.Find(x) == uf.Find(y)) != (label[x] == label[y])) {
        ADD_FAILURE() << "Find(" << x << ") and Find(" << y << ") "
                      << (label[x] == label[y] ? "differ" : "agree") << ", but the unions put them in "
                      << (label[x] == label[y] ? "one set" : "different sets");
        return;
      }
    }
  }
}

// --- Deduplicate against the reference pipeline
// -------------------------------------------------------------

// The pipeline of cluster.h computed here for documents whose normalized words are `words`.
struct Reference {
  std::vector<std::vector<uint64_t>> sets;
  Pairs candidates;
  std::vector<SimilarPair> verified;
  std::vector<std::vector<int>> clusters;
};
Reference RunReference(const std::vector<std::vector<std::string>>& words, const DedupOptions& o) {
  Reference ref;
  for (const auto& w : words) ref.sets.push_back(testutil::ReferenceSet(w, o.ngram));
  const testutil::ReferenceFamily family(o.k, o.seed);
  std::vector<Signature> sigs;
  for (const auto& s : ref.sets) sigs.push_back(family.Sign(s));
  ref.candidates = testutil::ReferenceCandidates(sigs, o.banding.bands, o.banding.rows);
  Pairs edges;
  for (const auto& [i, j] : ref.candidates) {
    const double jac = testutil::ExactJaccard(ref.sets[i], ref.sets[j]);
    if (jac >= o.threshold) ref.verified.push_back({i, j, jac}), edges.push_back({i, j});
  }
  ref.clusters = testutil::Components(static_cast<int>(words.size()), edges);
  return ref;
}

// "" when `got` is what cluster.h defines for the reference (survivor: the lowest id, or SurvivorIndex's
// member), else its first difference.
std::string ResultDiffers(const DedupResult& got, const Reference& ref, const DedupOptions& o, int n) {
  if (got.candidate_pairs != static_cast<int64_t>(ref.candidates.size())) {
    return absl::StrCat("candidate_pairs = ", got.candidate_pairs, ", but ", ref.candidates.size(),
                        " pairs agree on a whole band of ", o.banding.bands, " x ", o.banding.rows);
  }
  for (size_t x = 0; x < std::max(got.verified.size(), ref.verified.size()); ++x) {
    if (x >= got.verified.size()) {
      const SimilarPair& p = ref.verified[x];
      return absl::StrCat("verified pair (", p.i, ", ", p.j, "), a candidate of exact Jaccard ", p.jaccard,
                          " >= ", o.threshold, ", is missing");
    }
    const SimilarPair& g = got.verified[x];
    if (x >= ref.verified.size() || g.i != ref.verified[x].i || g.j != ref.verified[x].j) {
      const double exact =
          g.i >= 0 && g.j < n && g.i < g.j ? testutil::ExactJaccard(ref.sets[g.i], ref.sets[g.j]) : -1;
      return absl::StrCat("verified pair ", x, " is (", g.i, ", ", g.j, "), of exact Jaccard ", exact,
                          ": the verified pairs are the candidates with exact Jaccard >= ", o.threshold,
                          ", sorted by (i, j)");
    }
    if (std::abs(g.jaccard - ref.verified[x].jaccard) > 1e-12) {
      return absl::StrCat("verified pair (", g.i, ", ", g.j, ") carries ", g.jaccard,
                          ", not the exact Jaccard of the two shingle sets");
    }
  }
  std::vector<int> kept, removed;
  std::vector<bool> in_cluster(n, false);
  for (size_t c = 0; c < std::max(got.clusters.size(), ref.clusters.size()); ++c) {
    if (c >= got.clusters.size()) {
      return absl::StrCat(got.clusters.size(), " clusters; the verified pairs connect ",
                          List(ref.clusters[c]), " too");
    }
    const Cluster& g = got.clusters[c];
    if (c >= ref.clusters.size() || g.members != ref.clusters[c]) {
      return absl::StrCat(
          "cluster ", c, " has members ", List(g.members),
          ": clusters are the connected components (two or more documents) of the verified pairs, "
          "in order of their smallest member");
    }
    const std::vector<int>& members = ref.clusters[c];
    if (g.id != static_cast<int>(c)) return absl::StrCat("cluster ", c, " has id ", g.id);
    const int survivor =
        o.survivor == SurvivorRule::kLowestId
            ? members.front()
            : members[SurvivorIndex(o.survivor_seed, members.front(), static_cast<int>(members.size()))];
    if (g.survivor != survivor) {
      return absl::StrCat("cluster ", c, " ", List(members), " keeps ", g.survivor,
                          o.survivor == SurvivorRule::kLowestId
                              ? ": the default keeps the lowest id"
                              : ": kRandom keeps members[SurvivorIndex(survivor_seed, members[0], size)]");
    }
    double max_j = 0;
    for (size_t x = 0; x < members.size(); ++x)
      for (size_t y = x + 1; y < members.size(); ++y)
        max_j = std::max(max_j, testutil::ExactJaccard(ref.sets[members[x]], ref.sets[members[y]]));
    if (std::abs(g.max_jaccard - max_j) > 1e-12) {
      return absl::StrCat("cluster ", c, " ", List(members), " has max_jaccard ", g.max_jaccard,
                          ": the largest exact Jaccard over ALL pairs of its members");
    }
    for (int d : members) {
      in_cluster[d] = true;
      (d == survivor ? kept : removed).push_back(d);
    }
  }
  for (int d = 0; d < n; ++d) {
    if (!in_cluster[d]) kept.push_back(d);
  }
  std::sort(kept.begin(), kept.end());
  std::sort(removed.begin(), removed.end());
  if (got.kept != kept) {
    return absl::StrCat("kept holds ", got.kept.size(), " documents, ", List(got.kept, 12),
                        ": every document in no cluster and each cluster's survivor, sorted");
  }
  if (got.removed != removed) {
    return absl::StrCat("removed holds ", got.removed.size(), " documents, ", List(got.removed, 12),
                        ": the members of the clusters other than their survivors, sorted");
  }
  return "";
}

// A planted corpus (labs/dedup/synthetic.h): 8-16 originals of 100-160 words, each with 0-3 near-duplicates
// at drawn target similarity in [0.85, 1], with surface noise, for n-grams of `ngram` words. Related
// documents then have exact Jaccard above about 0.4 (0.42 the least in 300 drawn corpora), unrelated ones
// share nothing.
synthetic::PlantedCorpus Planted(CaseRandom& rng, int ngram, std::string& drawn) {
  synthetic::PlantedOptions po;
  po.originals = static_cast<int>(rng.Int(8, 16));
  po.words = static_cast<int>(rng.Int(100, 160));
  po.min_target = 0.85;
  po.ngram = ngram;
  po.seed = rng.Next();
  drawn = absl::StrCat("planted corpus (synthetic.h) of ", po.originals, " originals of ", po.words,
                       " words, copies at target Jaccard [0.85, 1] for n = ", ngram, ", seed ", po.seed);
  return synthetic::MakePlantedCorpus(po);
}

// Drawn k in 64..128, r in [min_rows, max_rows], b in k/2r..k/r, hash seed.
Banding DrawBanding(CaseRandom& rng, DedupOptions& o, int min_rows = 2, int max_rows = 4) {
  o.k = static_cast<int>(rng.Int(64, 128));
  const int r = static_cast<int>(rng.Int(min_rows, max_rows));
  o.banding = {static_cast<int>(rng.Int(o.k / (2 * r), o.k / r)), r};
  o.seed = rng.Next();
  return o.banding;
}

std::string Describe(const DedupOptions& o) {
  return absl::StrCat("ngram ", o.ngram, ", k ", o.k, ", seed ", o.seed, ", threshold ", o.threshold,
                      ", banding ", o.banding.bands, " x ", o.banding.rows);
}

// A drawn planted corpus with three more documents at drawn places, in this order: a text P of 40 words, a
// text Q of 40 words, and P followed by Q (J about 0.47 to each; P and Q share nothing); drawn threshold in
// [0.2, 0.3], n-grams of 3-6 words, k, banding (1-3 rows), and a hash seed redrawn until P + Q is a candidate
// with both. Against the reference pipeline: candidates, verified pairs and their Jaccard, clusters,
// survivors (the lowest id), max_jaccard over all member pairs, kept and removed.
TEST(DeduplicateHidden, ClustersSurvivorsAndReport) {
  CaseRandom rng;
  DedupOptions o;
  o.ngram = static_cast<int>(rng.Int(3, 6));
  std::string drawn;
  synthetic::PlantedCorpus corpus = Planted(rng, o.ngram, drawn);
  const std::vector<std::string> vocab = testutil::DistinctWords(rng, 500, 3, 9);
  std::vector<std::string> p(40), q(40);
  for (auto& w : p) w = rng.Pick(vocab);
  for (auto& w : q) w = rng.Pick(vocab);
  std::vector<std::string> pq = p;
  pq.insert(pq.end(), q.begin(), q.end());
  const int n = static_cast<int>(corpus.documents.size()) + 3;
  std::vector<int> at(n);
  std::iota(at.begin(), at.end(), 0);
  rng.Shuffle(at);
  at.resize(3);
  std::sort(at.begin(), at.end());
  for (int x = 0; x < 3; ++x) {
    const std::vector<std::string>& w = x == 0 ? p : x == 1 ? q : pq;
    corpus.documents.insert(corpus.documents.begin() + at[x], testutil::Join(w));
    corpus.words.insert(corpus.words.begin() + at[x], w);
  }
  o.threshold = rng.Real(0.2, 0.3);
  DrawBanding(rng, o, 1, 3);
  Reference ref;
  for (int attempt = 0; attempt < 50; ++attempt) {
    ref = RunReference(corpus.words, o);
    const Pairs& c = ref.candidates;
    if (std::binary_search(c.begin(), c.end(), std::make_pair(at[0], at[2])) &&
        std::binary_search(c.begin(), c.end(), std::make_pair(at[1], at[2]))) {
      break;
    }
    o.seed = rng.Next();
  }
  SCOPED_TRACE(
      Drawn(absl::StrCat(drawn, "; P, Q, P + Q at ", at[0], ", ", at[1], ", ", at[2], "; ", Describe(o))));
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(corpus.documents, o));
  EXPECT_EQ(r.banding.bands, o.banding.bands);
  EXPECT_EQ(r.banding.rows, o.banding.rows);
  const std::string diff = ResultDiffers(r, ref, o, n);
  EXPECT_PROPERTY(diff.empty()) << diff;
}

// `count` distinct random words (the vocabulary of a test's texts).
std::vector<std::string> Vocabulary(CaseRandom& rng, int count) {
  return testutil::DistinctWords(rng, count, 3, 9);
}

// LSH proposes, exact Jaccard decides. 4-8 documents sharing a block of 50-80 words, each with its own 10-25
// words (pairwise J about 0.5-0.75); a banding of 32-128 bands of one row makes every pair a candidate; at a
// threshold above every pair's J none of them may be merged, below all of them they form one cluster.
TEST(DeduplicateHidden, VerificationRejectsCandidatesBelowThreshold) {
  CaseRandom rng;
  const std::vector<std::string> vocab = Vocabulary(rng, 400);
  std::vector<std::string> block(rng.Int(50, 80));
  for (auto& w : block) w = rng.Pick(vocab);
  std::vector<std::vector<std::string>> words(rng.Int(4, 8));
  std::vector<std::string> docs;
  for (auto& w : words) {
    w = block;
    for (int i = static_cast<int>(rng.Int(10, 25)); i > 0; --i) w.push_back(rng.Pick(vocab));
    docs.push_back(testutil::Join(w));
  }
  DedupOptions o;
  o.k = 128;
  o.banding = {static_cast<int>(rng.Int(32, 128)), 1};
  o.seed = rng.Next();
  double max_j = 0, min_j = 1;
  for (size_t i = 0; i < words.size(); ++i) {
    for (size_t j = i + 1; j < words.size(); ++j) {
      const double jac =
          testutil::ExactJaccard(testutil::ReferenceSet(words[i], 5), testutil::ReferenceSet(words[j], 5));
      max_j = std::max(max_j, jac), min_j = std::min(min_j, jac);
    }
  }
  const double high = rng.Real(max_j + 0.02, 1.0), low = rng.Real(0.2, min_j - 0.02);
  std::string drawn;
  for (size_t d = 0; d < docs.size(); ++d)
    drawn += absl::StrCat(d ? ", " : "", block.size(), " + ", words[d].size() - block.size());
  SCOPED_TRACE(Drawn(absl::StrCat(docs.size(), " documents of a shared block + their own words (", drawn,
                                  "); pairwise J in [", min_j, ", ", max_j, "]; banding ", o.banding.bands,
                                  " x 1, seed ", o.seed, "; thresholds ", high, " and ", low)));
  for (double t : {high, low}) {
    o.threshold = t;
    ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(docs, o));
    const Reference ref = RunReference(words, o);
    const std::string diff = ResultDiffers(r, ref, o, static_cast<int>(docs.size()));
    EXPECT_PROPERTY(diff.empty()) << "threshold " << t << ": " << diff;
  }
}

// Documents that are exact copies: `sizes[c]` copies of text c, all shuffled; `members[c]` gets their ids.
std::vector<std::string> CopiesCorpus(CaseRandom& rng, const std::vector<int>& sizes, int words,
                                      std::vector<std::vector<std::string>>& canonical) {
  const std::vector<std::string> vocab = Vocabulary(rng, 2000);
  std::vector<std::vector<std::string>> texts(sizes.size());
  for (auto& t : texts) {
    t.resize(words);
    for (auto& w : t) w = rng.Pick(vocab);
  }
  std::vector<int> owner;
  for (size_t c = 0; c < sizes.size(); ++c) owner.insert(owner.end(), sizes[c], static_cast<int>(c));
  rng.Shuffle(owner);
  std::vector<std::string> docs;
  canonical.clear();
  for (int c : owner) docs.push_back(testutil::Join(texts[c])), canonical.push_back(texts[c]);
  return docs;
}

// 20-40 clusters of 2-5 exact copies (ids shuffled), SurvivorRule::kRandom with a drawn seed: the survivor of
// each cluster is the member SurvivorIndex(seed, smallest member, size) names, the same on a second run; the
// seed is redrawn until a third of the clusters or more do not keep their lowest id.
TEST(DeduplicateHidden, SeededRandomSurvivorIsReproducible) {
  CaseRandom rng;
  std::vector<int> sizes(rng.Int(20, 40));
  for (int& s : sizes) s = static_cast<int>(rng.Int(2, 5));
  std::vector<std::vector<std::string>> canonical;
  const std::vector<std::string> docs =
      CopiesCorpus(rng, sizes, static_cast<int>(rng.Int(30, 50)), canonical);
  DedupOptions o;
  o.survivor = SurvivorRule::kRandom;
  DrawBanding(rng, o);
  const Reference ref = RunReference(canonical, o);
  for (int attempt = 0; attempt < 100; ++attempt) {
    o.survivor_seed = rng.Next();
    int not_lowest = 0;
    for (const auto& m : ref.clusters)
      not_lowest += SurvivorIndex(o.survivor_seed, m[0], static_cast<int>(m.size())) != 0;
    if (3 * not_lowest >= static_cast<int>(sizes.size())) break;
  }
  SCOPED_TRACE(Drawn(absl::StrCat(sizes.size(), " clusters of exact copies, sizes ", List(sizes), "; ",
                                  Describe(o), ", survivor_seed ", o.survivor_seed)));
  ASSERT_OK_AND_ASSIGN(DedupResult first, Deduplicate(docs, o));
  ASSERT_OK_AND_ASSIGN(DedupResult again, Deduplicate(docs, o));
  std::string diff = ResultDiffers(first, ref, o, static_cast<int>(docs.size()));
  EXPECT_PROPERTY(diff.empty()) << diff;
  diff = ResultDiffers(again, ref, o, static_cast<int>(docs.size()));
  EXPECT_PROPERTY(diff.empty()) << "the second run: " << diff;
}

// The root union by rank leaves on top of a path graph whose position p has id labels[p], when the edges
// are united in sorted (i, j) order, as Deduplicate's verified pairs come.
int RootOfPath(const std::vector<int>& labels) {
  const int n = static_cast<int>(labels.size());
  Pairs edges;
  for (int p = 0; p + 1 < n; ++p) edges.push_back(std::minmax(labels[p], labels[p + 1]));
  std::sort(edges.begin(), edges.end());
  Model m(n);
  for (const auto& [a, b] : edges) {
    const int ra = m.root[a], rb = m.root[b], w = m.Winner(ra, rb), l = w == ra ? rb : ra;
    if (m.rank[ra] == m.rank[rb]) ++m.rank[w];
    for (int& r : m.root) r = r == l ? w : r;
  }
  return m.root[0];
}

// Exact-copy clusters, chains of 3-5 texts that overlap their neighbours only (windows of one word sequence
// shifted by 6 words: neighbours J ≈ 0.8, two apart ≈ 0.65; threshold drawn in [0.68, 0.76]), single
// documents, all in drawn order; a chain of 8 whose ids are drawn so that union by rank over the sorted
// verified pairs leaves another member than the lowest at the root, and a chain of 3 whose middle text has
// the largest id. The default keeps the lowest id of each cluster all the same.
TEST(DeduplicateHidden, DefaultSurvivorIsLowestId) {
  CaseRandom rng;
  const std::vector<std::string> vocab = Vocabulary(rng, 2000);
  std::vector<std::vector<std::string>> texts;
  const int clusters = static_cast<int>(rng.Int(2, 6)), chains = static_cast<int>(rng.Int(1, 2)),
            singles = static_cast<int>(rng.Int(0, 5));
  auto random_text = [&](int words) {
    std::vector<std::string> t(words);
    for (auto& w : t) w = rng.Pick(vocab);
    return t;
  };
  auto add_chain = [&](int links) {
    const std::vector<std::string> sequence = random_text(60 + 6 * (links - 1));
    for (int i = 0; i < links; ++i)
      texts.emplace_back(sequence.begin() + 6 * i, sequence.begin() + 6 * i + 60);
  };
  add_chain(8);  // texts 0..7, in path order
  add_chain(3);  // texts 8..10: its middle text gets the largest of the three ids
  for (int c = 0; c < clusters; ++c) {
    const std::vector<std::string> t = random_text(40);
    for (int i = static_cast<int>(rng.Int(2, 4)); i > 0; --i) texts.push_back(t);
  }
  for (int c = 0; c < chains; ++c) add_chain(static_cast<int>(rng.Int(3, 5)));
  for (int s = 0; s < singles; ++s) texts.push_back(random_text(40));
  const int n = static_cast<int>(texts.size());
  std::vector<int> id(n);
  std::iota(id.begin(), id.end(), 0);
  rng.Shuffle(id);
  std::vector<int> labels(8), chain_ids(id.begin(), id.begin() + 8);
  std::sort(chain_ids.begin(), chain_ids.end());
  std::iota(labels.begin(), labels.end(), 0);
  for (int attempt = 0; attempt < 1000; ++attempt) {  // about 8 % of the orders qualify
    rng.Shuffle(labels);
    if (RootOfPath(labels) != 0) break;
  }
  for (int p = 0; p < 8; ++p) id[p] = chain_ids[labels[p]];
  std::vector<int> v_ids(id.begin() + 8, id.begin() + 11);
  std::sort(v_ids.begin(), v_ids.end());
  if (rng.Chance(0.5)) std::swap(v_ids[0], v_ids[1]);
  id[8] = v_ids[0], id[9] = v_ids[2], id[10] = v_ids[1];
  std::vector<std::string> docs(n);
  std::vector<std::vector<std::string>> canonical(n);
  for (int t = 0; t < n; ++t) docs[id[t]] = testutil::Join(texts[t]), canonical[id[t]] = texts[t];
  std::vector<int> path(id.begin(), id.begin() + 8);
  DedupOptions o;
  o.threshold = rng.Real(0.68, 0.76);
  o.k = 128;
  o.banding = {static_cast<int>(rng.Int(48, 64)), 2};
  o.seed = rng.Next();
  SCOPED_TRACE(Drawn(absl::StrCat("a chain of 8 overlapping texts with ids ", List(path),
                                  " in path order, one of 3 with ids ", id[8], ", ", id[9], ", ", id[10],
                                  ", ", clusters, " groups of exact copies, ", chains, " more chains, ",
                                  singles, " single documents (", n, " in all); ", Describe(o))));
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(docs, o));
  const Reference ref = RunReference(canonical, o);
  const std::string diff = ResultDiffers(r, ref, o, n);
  EXPECT_PROPERTY(diff.empty()) << diff;
}

std::string Words(int first, int count) {  // "w<first> w<first+1> ..." -- distinct words
  std::string s;
  for (int i = 0; i < count; ++i) s += (i ? " w" : "w") + std::to_string(first + i);
  return s;
}

// Documents:
//   0: A             3: A with 1 of 60 words changed (J ≈ 0.85)     5: B, noisy copy of 1 (J = 1)
//   1: B             4: C                                           6: A again (J = 1)
//   2: unrelated
std::vector<std::string> SmallCorpus() {
  std::string a = Words(0, 60), b = Words(1000, 60);
  std::string a_edit = a;
  a_edit.replace(a_edit.find("w30 "), 4, "xx ");
  return {a, b, Words(2000, 60), a_edit, Words(3000, 60), "W" + b.substr(1) + ".", a};
}

// The tool's default (fp_weight, fn_weight) = (0.05, 0.95) picks 16 x 8 at t = 0.8 with k = 128 (fixed:
// notes/03-dedup.md §3.3 states it).
TEST(DeduplicateHidden, DefaultOptionsBand16x8) {
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(SmallCorpus(), DedupOptions{}));
  EXPECT_EQ(r.banding.bands, 16);
  EXPECT_EQ(r.banding.rows, 8);
}

// 100-250 documents, each a window of 50 words of one word sequence at a drawn offset (multiples of 10, so
// many overlap), deduplicated with 1 thread and with 2-8: the same result, field by field.
TEST(DeduplicateHidden, SameResultForAnyThreadCount) {
  CaseRandom rng;
  std::vector<std::string> docs(rng.Int(100, 250));
  for (auto& d : docs) d = Words(static_cast<int>(rng.Int(0, 39)) * 10, 50);
  DedupOptions o;
  o.threads = 1;
  const int threads = static_cast<int>(rng.Int(2, 8));
  SCOPED_TRACE(Drawn(absl::StrCat(docs.size(), " windows of 50 words; threads 1 and ", threads)));
  ASSERT_OK_AND_ASSIGN(DedupResult one, Deduplicate(docs, o));
  o.threads = threads;
  ASSERT_OK_AND_ASSIGN(DedupResult many, Deduplicate(docs, o));
  EXPECT_FALSE(one.clusters.empty());
  EXPECT_EQ(one.candidate_pairs, many.candidate_pairs) << "candidate_pairs";
  EXPECT_PROPERTY(one.kept == many.kept && one.removed == many.removed)
      << "kept / removed differ between 1 and " << threads << " threads (" << one.kept.size() << " and "
      << many.kept.size() << " kept)";
  ASSERT_EQ(one.clusters.size(), many.clusters.size()) << "clusters with 1 and " << threads << " threads";
  for (size_t c = 0; c < one.clusters.size(); ++c) {
    if (one.clusters[c].members != many.clusters[c].members ||
        one.clusters[c].survivor != many.clusters[c].survivor) {
      ADD_FAILURE() << "cluster " << c << " differs between 1 and " << threads << " threads";
      break;
    }
  }
}

// Each invalid parameter, drawn from its class, is an InvalidArgument error naming the value: ngram < 1,
// k < 1, threshold <= 0 or > 1, b * r > k; and a document with invalid UTF-8 names its index.
TEST(DeduplicateHidden, InvalidParametersAreClearErrors) {
  CaseRandom rng;
  std::vector<std::string> docs(rng.Int(2, 6));
  for (auto& d : docs) d = testutil::Join(testutil::DistinctWords(rng, 6, 2, 6));
  const int ngram = static_cast<int>(rng.Int(-20, 0)), k = static_cast<int>(rng.Int(-20, 0));
  const double low = -rng.Real(0, 1), high = 1 + rng.Real(1e-6, 1);
  const int bands = static_cast<int>(rng.Int(1, 128));
  const Banding over{bands, 128 / bands + static_cast<int>(rng.Int(1, 4))};
  const int bad_doc = static_cast<int>(rng.Int(0, docs.size() - 1));
  std::vector<std::string> with_bad = docs;
  with_bad[bad_doc] += rng.Pick(std::vector<std::string>{" \xC0", " \xFF", " \xE2\x82(", " \x80"});
  SCOPED_TRACE(Drawn(absl::StrCat(docs.size(), " documents; ngram ", ngram, ", k ", k, ", thresholds ", low,
                                  " and ", high, ", banding ", over.bands, " x ", over.rows,
                                  " with k = 128, invalid UTF-8 in document ", bad_doc)));
  auto run = [&](DedupOptions o) { return Deduplicate(docs, o).status(); };
  auto names = [](const absl::Status& s, int64_t v) {
    const std::vector<int64_t> n = testutil::Numbers(std::string(s.message()));
    return std::count(n.begin(), n.end(), v) > 0;
  };
  DedupOptions o;
  o.ngram = ngram;
  absl::Status s = run(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "ngram " << ngram;
  EXPECT_PROPERTY(names(s, ngram)) << "the error for ngram " << ngram << " does not name it: " << s;
  o = {}, o.k = k;
  s = run(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "k " << k;
  EXPECT_PROPERTY(names(s, k)) << "the error for k " << k << " does not name it: " << s;
  for (double t : {0.0, low, high}) {
    o = {}, o.threshold = t;
    EXPECT_EQ(run(o).code(), absl::StatusCode::kInvalidArgument) << "threshold " << t;
  }
  o = {}, o.banding = over;
  s = run(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "banding " << over.bands << " x " << over.rows;
  EXPECT_PROPERTY(names(s, over.bands) && names(s, over.rows))
      << "the error for banding " << over.bands << " x " << over.rows << " does not name b and r: " << s;
  const absl::Status bad = Deduplicate(with_bad, DedupOptions{}).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PROPERTY(std::string(bad.message()).find(absl::StrCat("document ", bad_doc, ":")) !=
                  std::string::npos)
      << "the error for invalid UTF-8 in document " << bad_doc << " must start \"document " << bad_doc
      << ": \" (cluster.h): " << bad;
}

TEST(DeduplicateHidden, ReportsProgress) {
  CaseRandom rng;
  std::string drawn;
  const synthetic::PlantedCorpus corpus = Planted(rng, 5, drawn);
  SCOPED_TRACE(Drawn(drawn));
  std::set<std::string> phases;
  DedupOptions o;
  o.progress = [&](const std::string& phase, int64_t, int64_t) { phases.insert(phase); };
  ASSERT_OK(Deduplicate(corpus.documents, o).status());
  EXPECT_GE(phases.size(), 2u) << "progress reported under " << phases.size()
                               << " phase name(s); cluster.h asks for at least two";
}

}  // namespace
}  // namespace distlab::dedup
