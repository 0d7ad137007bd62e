// Lab 3 stage C, reference solution: union-find and the deduplication pipeline.
#include "labs/dedup/cluster.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "labs/dedup/minhash.h"

namespace distlab::dedup {

UnionFind::UnionFind(int n) : parent_(std::max(n, 0)), rank_(std::max(n, 0), 0) {
  std::iota(parent_.begin(), parent_.end(), 0);
}

int UnionFind::Find(int x) {
  int root = x;
  while (parent_[root] != root) root = parent_[root];
  // Path compression: a second walk points every element of the path straight at the root.
  while (parent_[x] != root) {
    const int next = parent_[x];
    parent_[x] = root;
    x = next;
  }
  return root;
}

bool UnionFind::Union(int a, int b) {
  int ra = Find(a), rb = Find(b);  // link ROOTS, never the elements themselves
  if (ra == rb) return false;
  // Union by rank keeps trees O(log n) deep: the shallower tree goes under the deeper one.
  if (rank_[ra] < rank_[rb] || (rank_[ra] == rank_[rb] && rb < ra)) std::swap(ra, rb);
  parent_[rb] = ra;
  if (rank_[ra] == rank_[rb]) ++rank_[ra];
  return true;
}

absl::StatusOr<DedupResult> Deduplicate(const std::vector<std::string>& documents,
                                        const DedupOptions& options) {
  if (options.ngram < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ngram = ", options.ngram, ": must be >= 1"));
  }
  if (options.k < 1) return absl::InvalidArgumentError(absl::StrCat("k = ", options.k, ": must be >= 1"));
  if (!(options.threshold > 0.0 && options.threshold <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("threshold = ", options.threshold, ": must be in (0, 1]"));
  }
  DedupResult result;
  if (options.banding.bands == 0 && options.banding.rows == 0) {
    absl::StatusOr<Banding> picked =
        PickBanding(options.threshold, options.k, options.fp_weight, options.fn_weight);
    if (!picked.ok()) return picked.status();
    result.banding = *picked;
  } else {
    if (absl::Status s = ValidateBanding(options.banding, options.k); !s.ok()) return s;
    result.banding = options.banding;
  }
  auto progress = [&](const char* phase, int64_t done, int64_t total) {
    if (options.progress) options.progress(phase, done, total);
  };
  const int n = static_cast<int>(documents.size());

  // 1. Shingle sets.
  std::vector<std::vector<uint64_t>> sets(n);
  for (int d = 0; d < n; ++d) {
    absl::StatusOr<std::vector<uint64_t>> set = ShingleSet(documents[d], options.ngram);
    if (!set.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("document ", d, ": ", set.status().message()));
    }
    sets[d] = std::move(*set);
    if ((d + 1) % 10000 == 0) progress("shingle", d + 1, n);
  }
  progress("shingle", n, n);

  // 2. Signatures; 3. candidates from band keys.
  absl::StatusOr<MinHasher> hasher = MinHasher::Create(options.k, options.seed);
  if (!hasher.ok()) return hasher.status();
  absl::StatusOr<std::vector<Signature>> sigs = SignAll(*hasher, sets, options.threads);
  if (!sigs.ok()) return sigs.status();
  progress("sign", n, n);
  absl::StatusOr<std::vector<std::pair<int, int>>> candidates = CandidatePairs(*sigs, result.banding);
  if (!candidates.ok()) return candidates.status();
  result.candidate_pairs = static_cast<int64_t>(candidates->size());
  progress("candidates", result.candidate_pairs, result.candidate_pairs);

  // 4. Verification: LSH only proposes; the exact Jaccard decides.
  UnionFind uf(n);
  for (const auto& [i, j] : *candidates) {
    const double jac = Jaccard(sets[i], sets[j]);
    if (jac >= options.threshold) {
      result.verified.push_back({i, j, jac});
      uf.Union(i, j);
    }
  }
  progress("verify", result.candidate_pairs, result.candidate_pairs);

  // 5. Clusters in order of their smallest member (documents are visited in id order), one survivor each.
  std::map<int, int> cluster_of_root;  // root -> index into result.clusters
  for (int d = 0; d < n; ++d) {
    const int root = uf.Find(d);
    auto [it, inserted] = cluster_of_root.emplace(root, static_cast<int>(result.clusters.size()));
    if (inserted) result.clusters.push_back(Cluster{it->second, {}, d, 0.0});
    result.clusters[it->second].members.push_back(d);
  }
  std::vector<Cluster> clusters;
  for (Cluster& c : result.clusters) {
    if (c.members.size() < 2) {
      result.kept.push_back(c.members[0]);
      continue;
    }
    c.id = static_cast<int>(clusters.size());
    c.survivor = options.survivor == SurvivorRule::kLowestId
                     ? c.members.front()
                     : c.members[SurvivorIndex(options.survivor_seed, c.members.front(),
                                               static_cast<int>(c.members.size()))];
    for (size_t x = 0; x < c.members.size(); ++x) {
      for (size_t y = x + 1; y < c.members.size(); ++y) {
        c.max_jaccard = std::max(c.max_jaccard, Jaccard(sets[c.members[x]], sets[c.members[y]]));
      }
    }
    for (int m : c.members) (m == c.survivor ? result.kept : result.removed).push_back(m);
    clusters.push_back(std::move(c));
  }
  result.clusters = std::move(clusters);
  std::sort(result.kept.begin(), result.kept.end());
  std::sort(result.removed.begin(), result.removed.end());
  return result;
}

}  // namespace distlab::dedup
