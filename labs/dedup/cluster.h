// Lab 3 (dedup), stage C (second half): verification, union-find clusters, one survivor per cluster; the
// whole pipeline in Deduplicate().
//
// Pipeline: ShingleSet per document -> SignAll -> CandidatePairs -> keep pairs whose EXACT Jaccard is
// >= threshold (verification: LSH only proposes) -> union-find over the verified pairs -> per cluster of
// two or more documents, one survivor; every other member is removed.
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
  kRandom,    // keep a member drawn with SurvivorIndex(survivor_seed, smallest member id, cluster size)
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
  // Verification removes false positives, so the default banding weighs missed pairs more heavily.
  double fp_weight = 0.05;
  double fn_weight = 0.95;
  SurvivorRule survivor = SurvivorRule::kLowestId;
  uint64_t survivor_seed = 0;
  int threads = 0;  // 0 = hardware concurrency
  // Called now and then with (phase, done, total), e.g. ("sign", 5000, 20000); may be empty.
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

struct Cluster {
  int id = 0;                // 0, 1, ... in order of the smallest member
  std::vector<int> members;  // sorted document ids, two or more
  int survivor = 0;          // the member that is kept
  double max_jaccard = 0.0;  // largest exact Jaccard over all pairs of members
};

struct DedupResult {
  Banding banding;                    // the banding used
  int64_t candidate_pairs = 0;        // proposed by LSH
  std::vector<SimilarPair> verified;  // candidates with exact Jaccard >= threshold, sorted by (i, j)
  std::vector<Cluster> clusters;      // clusters of two or more documents, by id
  std::vector<int> kept;              // surviving document ids, sorted (singletons and survivors)
  std::vector<int> removed;           // removed document ids, sorted
};

// Runs the pipeline above. Errors: ngram < 1, k < 1, threshold outside (0, 1], an invalid banding for k,
// invalid UTF-8 in a document (naming its index).
absl::StatusOr<DedupResult> Deduplicate(const std::vector<std::string>& documents,
                                        const DedupOptions& options);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_CLUSTER_H_
