// Lab 3 (dedup), stage D: corpus files, the cluster report, evaluation scores. Your code goes here.
#include "labs/dedup/corpus_io.h"

#include "reference/base/status.h"

namespace distlab::dedup {

// TODO(dedup stage D): ReadCorpus.
//   1. Missing path -> NotFound naming it.
//   2. Directory: every regular file not starting with '.', sorted by name; name = file name, text = bytes.
//   3. Otherwise JSON lines (nlohmann::json::parse): skip blank lines; each line an object with a string
//      "text" (else InvalidArgument naming the line number); name = "id" (a string as is, else its JSON
//      text), or the line number from 1 when absent.
absl::StatusOr<Corpus> ReadCorpus(const std::string& path) {
  return distlab::Unimplemented("dedup", "D", "ReadCorpus");
}

// TODO(dedup stage D): WriteCorpus -- the kept documents in the corpus's own form (see corpus_io.h).
//   An id outside the corpus -> InvalidArgument; files that cannot be written -> an error naming them.
absl::Status WriteCorpus(const Corpus& corpus, const std::vector<int>& keep, const std::string& out) {
  return distlab::Unimplemented("dedup", "D", "WriteCorpus");
}

// TODO(dedup stage D): ClusterReportJson -- the JSON object drawn in corpus_io.h, with document names.
std::string ClusterReportJson(const Corpus& corpus, const DedupResult& result) {
  throw distlab::NotImplementedError("dedup", "D", "ClusterReportJson");
}

// TODO(dedup stage D): ScorePairs / ScoreIds -- tp = |predicted ∩ truth|; precision = tp / |predicted|
//   (1 if none predicted); recall = tp / |truth| (1 if none true); F1 = 2PR / (P + R) (0 if P + R = 0).
Scores ScorePairs(const std::vector<std::pair<int, int>>& predicted,
                  const std::vector<std::pair<int, int>>& truth) {
  throw distlab::NotImplementedError("dedup", "D", "ScorePairs");
}
Scores ScoreIds(const std::vector<int>& predicted, const std::vector<int>& truth) {
  throw distlab::NotImplementedError("dedup", "D", "ScoreIds");
}

// TODO(dedup stage D): RemovedByPairs -- union the pairs, keep the lowest id per cluster, return the rest
//   sorted. (The union-find root is not necessarily the lowest id.)
std::vector<int> RemovedByPairs(int n, const std::vector<std::pair<int, int>>& pairs) {
  throw distlab::NotImplementedError("dedup", "D", "RemovedByPairs");
}

}  // namespace distlab::dedup
