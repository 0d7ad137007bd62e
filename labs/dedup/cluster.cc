// Lab 3 (dedup), stage C: union-find and the deduplication pipeline. Your code goes here.
#include "labs/dedup/cluster.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage C): UnionFind::UnionFind -- contract: cluster.h (UnionFind);
//   idea: notes/03-dedup.md §3.4.
UnionFind::UnionFind(int n) { throw distlab::NotImplementedError("dedup", "C", "UnionFind::UnionFind"); }

// TODO(dedup stage C): UnionFind::Find -- contract: cluster.h (UnionFind::Find);
//   idea: notes/03-dedup.md §3.4. The tests read parent_ through Parent() after your calls.
int UnionFind::Find(int x) { throw distlab::NotImplementedError("dedup", "C", "UnionFind::Find"); }

// TODO(dedup stage C): UnionFind::Union -- contract: cluster.h (UnionFind::Union, its tie-break);
//   idea: notes/03-dedup.md §3.4. The tests read parent_ and rank_ through Parent() and Rank().
//   What must rank_ mean for the depth bound of the note to hold?
bool UnionFind::Union(int a, int b) { throw distlab::NotImplementedError("dedup", "C", "UnionFind::Union"); }

// TODO(dedup stage C): Deduplicate -- contract: cluster.h (DedupOptions, Cluster, DedupResult, Deduplicate);
//   idea: notes/03-dedup.md §3. Every function of stages A-C is yours to call; options.progress may be empty.
//   Errors: as the header lists, with the messages it gives.
//   Which fields of DedupResult can you fill before the clusters are known, and which only after?
absl::StatusOr<DedupResult> Deduplicate(const std::vector<std::string>& documents,
                                        const DedupOptions& options) {
  return distlab::Unimplemented("dedup", "C", "Deduplicate");
}

}  // namespace distlab::dedup
