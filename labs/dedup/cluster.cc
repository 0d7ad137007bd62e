// Lab 3 (dedup), stage C: union-find and the deduplication pipeline. Your code goes here.
#include "labs/dedup/cluster.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage C): UnionFind(n) -- parent_[x] = x, rank_[x] = 0 for every x.
UnionFind::UnionFind(int n) { throw distlab::NotImplementedError("dedup", "C", "UnionFind::UnionFind"); }

// TODO(dedup stage C): Find with path compression: find the root, then point every element of the path at it.
int UnionFind::Find(int x) { throw distlab::NotImplementedError("dedup", "C", "UnionFind::Find"); }

// TODO(dedup stage C): Union by rank.
//   1. ra = Find(a), rb = Find(b): link ROOTS. Same root -> false.
//   2. Lower rank goes under higher; equal ranks: the larger root id goes under the smaller, whose rank + 1.
bool UnionFind::Union(int a, int b) { throw distlab::NotImplementedError("dedup", "C", "UnionFind::Union"); }

// TODO(dedup stage C): Deduplicate (the pipeline in cluster.h).
//   1. Errors: ngram < 1, k < 1, threshold outside (0, 1], invalid banding; a document that fails ShingleSet
//      -> InvalidArgument "document <index>: ...".
//   2. Banding {0, 0} -> PickBanding(threshold, k, fp_weight, fn_weight).
//   3. ShingleSet each document; MinHasher::Create(k, seed); SignAll(threads); CandidatePairs.
//   4. Verify: keep candidates whose exact Jaccard >= threshold (result.verified), Union them.
//   5. Clusters = sets of two or more documents, numbered in order of their smallest member; survivor per
//      SurvivorRule (kRandom: members[SurvivorIndex(survivor_seed, members[0], members.size())]);
//      max_jaccard over all member pairs; kept and removed sorted.
//   6. Call options.progress (when set) after each phase.
absl::StatusOr<DedupResult> Deduplicate(const std::vector<std::string>& documents,
                                        const DedupOptions& options) {
  return distlab::Unimplemented("dedup", "C", "Deduplicate");
}

}  // namespace distlab::dedup
