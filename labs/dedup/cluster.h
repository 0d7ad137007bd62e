// Lab 3 (dedup), stage C (second half): verification, union-find clusters, one survivor per cluster; the
// whole pipeline in Deduplicate().
//
// What Deduplicate returns is defined field by field on DedupResult below; notes/03-dedup.md §3 is the idea.
#ifndef DISTLAB_LABS_DEDUP_CLUSTER_H_
#define DISTLAB_LABS_DEDUP_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lsh.h"
#include "shingle.h"

namespace distlab::dedup {

// Disjoint sets over 0..n-1 with path compression and union by rank.
class UnionFind {
 public:
  explicit UnionFind(int n);  // n singletons, each its own root with rank 0

  // The root of x's set. Path compression: afterwards every element on the path from x points at the root.
  int Find(int x);

  // Merges the sets of a and b; false when they were already one set. Union by rank: the root of lower rank
  // goes under the other; on equal rank the root with the larger id goes under the smaller one, whose rank
  // grows by one.
  bool Union(int a, int b);

  int Parent(int x) const { return parent_[x]; }
  int Rank(int x) const { return rank_[x]; }
  int size() const { return static_cast<int>(parent_.size()); }

 private:
  std::vector<int> parent_;
  std::vector<int> rank_;
};

enum class SurvivorRule {
  kLowestId,  // keep the member with the smallest document id
  kRandom,    // keep members[SurvivorIndex(survivor_seed, members[0], members.size())] (members sorted)
};

// The seeded draw behind SurvivorRule::kRandom: an index in [0, size) that depends only on its arguments.
inline int SurvivorIndex(uint64_t seed, int smallest_member, int size) {
  uint64_t z = seed ^ (0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(smallest_member) + 1));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return static_cast<int>((z ^ (z >> 31)) % static_cast<uint64_t>(size));
}

struct DedupOptions {
  int ngram = 5;           // n of the word n-grams
  int k = 128;             // MinHash functions
  uint64_t seed = 1;       // seed of the hash family
  double threshold = 0.8;  // verified pairs have exact Jaccard >= threshold
  Banding banding;         // {0, 0}: PickBanding(threshold, k, fp_weight, fn_weight)
  // The weights PickBanding gets: the default weighs missed pairs more heavily (notes/03-dedup.md §3.3).
  double fp_weight = 0.05;
  double fn_weight = 0.95;
  SurvivorRule survivor = SurvivorRule::kLowestId;
  uint64_t survivor_seed = 0;
  int threads = 0;  // SignAll's threads; 0 = hardware concurrency
  // May be empty. When set, Deduplicate calls it with (phase, done, total), e.g. ("sign", 5000, 20000), at
  // least once at the end of every phase of its work, under at least two different phase names (the names
  // are yours; the tool prints them).
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

struct Cluster {
  int id = 0;                // 0, 1, ... in order of the smallest member
  std::vector<int> members;  // sorted document ids, two or more
  int survivor = 0;          // the member that is kept
  double max_jaccard = 0.0;  // largest exact Jaccard over all pairs of members
};

// Document d's shingle set is ShingleSet(documents[d], ngram) and its signature that set signed by
// MinHasher::Create(k, seed).
struct DedupResult {
  Banding banding;              // the banding used: options.banding, or the picked one when that is {0, 0}
  int64_t candidate_pairs = 0;  // the number of CandidatePairs(signatures, banding)
  // The candidate pairs whose exact Jaccard (of the two shingle sets) is >= threshold, sorted by (i, j).
  std::vector<SimilarPair> verified;
  // The connected components of two or more documents of the graph whose edges are the verified pairs,
  // by id (in order of their smallest member).
  std::vector<Cluster> clusters;
  std::vector<int> kept;     // surviving document ids, sorted (documents in no cluster, and survivors)
  std::vector<int> removed;  // the other members of the clusters, sorted
};

// Runs the lab's pipeline on `documents`. Errors (InvalidArgument, each naming the value): ngram < 1,
// k < 1, threshold outside (0, 1], an invalid banding for k (ValidateBanding's error), and a document whose
// ShingleSet fails: "document <index>: <ShingleSet's message>".
absl::StatusOr<DedupResult> Deduplicate(const std::vector<std::string>& documents,
                                        const DedupOptions& options);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_CLUSTER_H_
