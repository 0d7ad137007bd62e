// Lab 3 (dedup), stage D: the tool around the pipeline -- reading and writing corpora, the cluster report,
// and the evaluation against exact all-pairs Jaccard.
//
// Two corpus forms: a folder of text files (one document per regular file, name = file name; read in sorted
// name order; subfolders and hidden files ignored), or a JSON-lines file (one object per line with a string
// field "text" and an optional "id"; blank lines skipped).
#ifndef DISTLAB_LABS_DEDUP_CORPUS_IO_H_
#define DISTLAB_LABS_DEDUP_CORPUS_IO_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cluster.h"

namespace distlab::dedup {

struct Document {
  // The file name; or the JSON "id": a string id as it is, any other id as its JSON text (7 -> "7"), and
  // the line number (from 1, blank lines counted) when there is no "id".
  std::string name;
  std::string text;
};

enum class CorpusFormat { kFolder, kJsonLines };

struct Corpus {
  CorpusFormat format = CorpusFormat::kFolder;
  std::vector<Document> documents;
};

// A directory -> kFolder; a regular file -> kJsonLines. Errors: the path does not exist (NotFound), a line
// that is not a JSON object with a string "text" (InvalidArgument naming the line number).
absl::StatusOr<Corpus> ReadCorpus(const std::string& path);

// Writes the documents whose ids are in `keep` (indices into corpus.documents, ascending) in the corpus's own
// form: into the folder `out` (created if missing; each file keeps its name and bytes) or into the file `out`
// (one line per document: {"id": name, "text": text}). Errors: an id outside [0, number of documents)
// (InvalidArgument naming it), a folder or file that cannot be written (an error naming it).
absl::Status WriteCorpus(const Corpus& corpus, const std::vector<int>& keep, const std::string& out);

// The cluster report, as JSON text:
//   {"documents": N, "kept": K, "removed": R, "bands": b, "rows": r,
//    "clusters": [{"id": 0, "members": ["a.txt", "b.txt"], "survivor": "a.txt",
//                  "max_jaccard": 0.8571428571428571}, ...]}
// max_jaccard is Cluster::max_jaccard unrounded: a JSON number that reads back to the same double (what
// nlohmann::json's dump writes: 6/7 -> 0.8571428571428571, 0.875 -> 0.875), not rounded for display.
std::string ClusterReportJson(const Corpus& corpus, const DedupResult& result);

struct Scores {
  double precision = 0.0;
  double recall = 0.0;
  double f1 = 0.0;
};

// Precision, recall and F1 of a predicted set against a true set (both sorted, duplicate-free):
// tp = |predicted ∩ truth|, precision = tp / |predicted|, recall = tp / |truth|, F1 = 2PR / (P + R).
// Conventions: nothing predicted -> precision 1; nothing true -> recall 1; F1 = 0 when both are 0.
Scores ScorePairs(const std::vector<std::pair<int, int>>& predicted,
                  const std::vector<std::pair<int, int>>& truth);
Scores ScoreIds(const std::vector<int>& predicted, const std::vector<int>& truth);

// The documents an exact deduplication removes: cluster the pairs (union-find), keep the lowest id of each
// cluster, return the others sorted. n = number of documents.
std::vector<int> RemovedByPairs(int n, const std::vector<std::pair<int, int>>& pairs);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_CORPUS_IO_H_
