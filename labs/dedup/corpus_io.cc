// Lab 3 (dedup), stage D: corpus files, the cluster report, evaluation scores. Your code goes here.
#include "labs/dedup/corpus_io.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage D): ReadCorpus -- contract: corpus_io.h (ReadCorpus, Document);
//   idea: notes/03-dedup.md §4. <filesystem> for the folder, nlohmann/json.hpp for the lines
//   (json::parse(line, nullptr, false) returns a discarded value instead of throwing).
//   Errors: as the header lists.
absl::StatusOr<Corpus> ReadCorpus(const std::string& path) {
  return distlab::Unimplemented("dedup", "D", "ReadCorpus");
}

// TODO(dedup stage D): WriteCorpus -- contract: corpus_io.h (WriteCorpus); idea: notes/03-dedup.md §4.
//   Errors: as the header lists.
absl::Status WriteCorpus(const Corpus& corpus, const std::vector<int>& keep, const std::string& out) {
  return distlab::Unimplemented("dedup", "D", "WriteCorpus");
}

// TODO(dedup stage D): ClusterReportJson -- contract: corpus_io.h (ClusterReportJson);
//   idea: notes/03-dedup.md §4. nlohmann::json builds and dumps the object drawn in the header.
std::string ClusterReportJson(const Corpus& corpus, const DedupResult& result) {
  throw distlab::NotImplementedError("dedup", "D", "ClusterReportJson");
}

// TODO(dedup stage D): ScorePairs / ScoreIds -- contract: corpus_io.h (Scores); idea: notes/03-dedup.md §4.
//   Both inputs are sorted and duplicate-free (<algorithm> has set operations on sorted ranges).
Scores ScorePairs(const std::vector<std::pair<int, int>>& predicted,
                  const std::vector<std::pair<int, int>>& truth) {
  throw distlab::NotImplementedError("dedup", "D", "ScorePairs");
}
Scores ScoreIds(const std::vector<int>& predicted, const std::vector<int>& truth) {
  throw distlab::NotImplementedError("dedup", "D", "ScoreIds");
}

// TODO(dedup stage D): RemovedByPairs -- contract: corpus_io.h (RemovedByPairs); idea: notes/03-dedup.md §4.
//   Your UnionFind (cluster.h) is there to use.
std::vector<int> RemovedByPairs(int n, const std::vector<std::pair<int, int>>& pairs) {
  throw distlab::NotImplementedError("dedup", "D", "RemovedByPairs");
}

}  // namespace distlab::dedup
