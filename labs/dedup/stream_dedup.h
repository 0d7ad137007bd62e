// Lab 3 (dedup), given; not graded: near-duplicate removal in bounded memory, for corpora larger than memory
// -- the streaming `dedup` tool. It runs the lab's own functions (ShingleSet, MinHasher::Sign, Jaccard,
// UnionFind, PickBanding, ClusterReportJson of :impl), so it runs on your code or on the solution, and its
// result is Deduplicate's on the same documents (the same verified pairs, clusters and report).
//
//   pass 1      stream the corpus (corpus_stream.h); per document: its shingle set, its signature, the b band
//               keys (XXH3 of each band's r values); keep the keys, append the shingle set to a file on disk
//               (and its offset); the signature is dropped at once
//   candidates  per band, sort (key, document) and pair the documents of each key; then the band's keys go
//   verify      exact Jaccard of each candidate pair, its two shingle sets read back from the file
//   clusters    union-find over the documents of verified pairs only; survivors as Deduplicate chooses
//   pass 2      stream the corpus again and write every document that is not removed, in its own form
//
// Memory per document: 8 bytes per band key (b = 16: 128 bytes) and 8 bytes of offset into the shingle-set
// file, plus 16 bytes while one band is sorted -- not the text, not the shingle set, not the signature
// (notes/03-dedup.md §5.1). Besides: two batches in flight (each at most 2048 documents and 4 MB of text,
// with their shingle sets), and what grows with the duplicates, not with N: candidate and verified pairs,
// cluster members and their names.
// A memory budget (StreamOptions::memory_bytes, the tool's --memory M) bounds the band tables: past it pass 1
// writes each band's (key, document) records, sorted, to a run on disk, and candidates merges each band's
// runs (R-way, a small buffer per run) and pairs as before -- the same result, for 16 bytes per document and
// band written once and read once (notes/03-dedup.md §5.1, "A memory budget"). The tables then hold at most
// M instead of 144 bytes per document; the offsets and the rest above are not under it.
// Several ranks: FindNearDuplicatesAcrossRanks below.
#ifndef DISTLAB_LABS_DEDUP_STREAM_DEDUP_H_
#define DISTLAB_LABS_DEDUP_STREAM_DEDUP_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labs/dedup/cluster.h"
#include "labs/dedup/corpus_io.h"
#include "reference/comm/comm.h"

namespace distlab::dedup {

struct StreamProgress {
  std::string phase;        // "pass 1", "candidates", "verify", "pass 2"
  int64_t done = 0;         // documents (passes), bands (candidates) or pairs (verify) done
  int64_t total = 0;        // their total when known, else 0
  int64_t bytes_done = 0;   // input bytes consumed (the passes), for MB/s and the ETA
  int64_t bytes_total = 0;  // input bytes in all
};

struct StreamOptions {
  // ngram, k, seed, threshold, banding (or the weights that pick it), survivor rule and seed, and threads:
  // the signing threads (0 = all cores). Its `progress` is not called; `progress` below is.
  DedupOptions dedup;
  std::string tmp_dir;  // the folder of the shingle-set file (and of spilled runs); "" = $TMPDIR, else /tmp
  // The band tables' budget in bytes (0: none, every key stays in memory): pass 1's held keys, the records of
  // the band being sorted, the merge's buffers. At least 36 KiB at b = 16 (BandTable::MinimumBudget in
  // stream_internal.h names the minimum for b bands). Several ranks: each rank's own, and a rank holds one
  // band's records whole for the shuffle, beyond it.
  int64_t memory_bytes = 0;
  // Several ranks: band records per peer per round of the shuffle; 0 = about what a rank sends a peer per
  // band, at most 65536 (1 MB).
  int shuffle_chunk = 0;
  // Several ranks: candidate pairs verified per round (or clusters measured), whose shingle sets held by
  // other ranks are fetched together -- about 1.6 KB each for 200-word documents.
  int fetch_round = 4096;
  std::function<void(const StreamProgress&)> progress;  // may be empty; called about every 50 ms of work
};

struct StreamResult {
  int64_t documents = 0;
  int64_t text_bytes = 0;  // the documents' text, as the lab counts it (not the JSON around it)
  Banding banding;         // as Deduplicate picks it
  int64_t candidate_pairs =
      0;  // pairs that share a band key (Deduplicate's candidates, up to key collisions)
  std::vector<SimilarPair> verified;  // as DedupResult::verified: document indices in corpus order
  std::vector<Cluster> clusters;      // as DedupResult::clusters
  int64_t removed = 0;                // documents in clusters that are not their survivor
  // Bytes held per document at the peak (the band tables -- keys and one band's sort records, or with a
  // budget whatever it allows, merge buffers included -- and the offsets) and the size of the shingle-set
  // file.
  double bytes_per_document = 0;
  int64_t shingle_file_bytes = 0;
  // Under a memory budget: the runs written per band by pass 1 (0: the tables stayed in memory), and the
  // bytes written to the spill files, those of runs merged early included (16 b bytes per document when no
  // run was).
  int64_t spilled_runs = 0;
  int64_t spilled_bytes = 0;
};

// Pass 1, candidates, verification and clusters. Errors: those of CorpusStream (shard and line), a document
// whose ShingleSet fails ("<shard> line <n> (document <d>): <message>"), the options Deduplicate rejects, a
// memory budget below the minimum (InvalidArgument naming it), a shingle-set or spill file that cannot be
// written (ResourceExhausted naming its folder and the system's reason: the disk is full).
absl::StatusOr<StreamResult> FindNearDuplicates(const std::vector<std::string>& inputs,
                                                const StreamOptions& options);

// Pass 2: writes every document of `inputs` that `result` does not remove to `out`, in the input's form
// (CorpusWriter: nothing at `out` unless complete), and returns the names of the clusters' members
// (index -> name, for those documents only). An input that no longer has result.documents documents is an
// error.
absl::StatusOr<std::vector<std::pair<int, std::string>>> WriteSurvivors(
    const std::vector<std::string>& inputs, const StreamResult& result, const std::string& out,
    const StreamOptions& options);

// The cluster report, written to `out`: what ClusterReportJson (corpus_io.h) writes for the whole corpus,
// as JSON (the same keys in the same order, nlohmann's dump(2) layout). It calls ClusterReportJson on 4096
// clusters at a time and puts the pieces together, so memory grows with those, not with the report.
absl::Status WriteStreamReport(const StreamResult& result,
                               const std::vector<std::pair<int, std::string>>& names, std::ostream& out);

// --- Several ranks (stream_ranks.cc; notes/03-dedup.md §7.6) ---
//
// The same pipeline with the corpus split over the ranks of `comm`: rank r reads share r of the input's
// files, or of one plain shard's bytes (CorpusStream::Open's `part`), so its documents have the contiguous
// global ids [first_doc, first_doc + documents). It runs the student's stage E -- ShuffleBandRecords per
// band, CandidatePairsOf, GlobalLabels, KeptOf -- and finds what one process finds: the same verified pairs,
// clusters, survivors and report, byte for byte. Both functions are collective: every rank calls them with
// the same arguments. Errors on one rank (a bad line in its share, a full disk) are agreed on, so every rank
// returns an error (the failing rank's, named "rank R: ...") and none is left waiting.

struct RankShare {
  int64_t first_doc = 0;  // this rank's documents: global ids [first_doc, first_doc + documents)
  int64_t documents = 0;
  std::vector<int> members;       // those of them in a cluster, ascending
  std::vector<int> removed;       // those of them that are not their cluster's survivor, ascending
  int64_t records_sent = 0;       // band records this rank sent (all bands, itself included)
  int64_t records_to_others = 0;  // of those, the records another rank owns
  int64_t records_received = 0;   // band records of the buckets it owns
  int64_t candidate_pairs = 0;    // candidate pairs this rank verified (it holds one of their documents)
  int64_t verified_pairs = 0;     // of those, the pairs at or above the threshold
  int64_t sets_fetched = 0;       // shingle sets this rank asked of others (verification and clusters)
  int64_t set_bytes_fetched = 0;  // their bytes as received (a size word and 8 bytes per shingle each)
};

struct RanksResult {
  // On every rank: documents, text_bytes, banding, candidate_pairs and removed of the whole corpus. On rank
  // 0 only: verified and clusters, as FindNearDuplicates returns them (empty on the other ranks). This
  // rank's own: bytes_per_document (its documents), shingle_file_bytes, spilled_runs and spilled_bytes.
  StreamResult result;
  RankShare share;
  int64_t verified_pairs = 0;  // in all
  int64_t clusters = 0;        // in all
};

// Pass 1 on this rank's share, then the shuffle, candidates, verification and clusters across ranks.
absl::StatusOr<RanksResult> FindNearDuplicatesAcrossRanks(comm::Comm& comm, comm::Stream& stream,
                                                          const std::vector<std::string>& inputs,
                                                          const StreamOptions& options);

// Pass 2: every rank writes the survivors of its share into OUT's temporary form (OUT + ".partial"; for
// byte-range shares, rank r > 0 into OUT + ".partial.r", which rank 0 appends in order); once all have, rank
// 0 renames it to OUT -- the form WriteSurvivors gives OUT, so OUT appears only complete. Rank
// 0 returns the names of every cluster member (as WriteSurvivors does); the other ranks an empty list.
absl::StatusOr<std::vector<std::pair<int, std::string>>> WriteSurvivorsAcrossRanks(
    comm::Comm& comm, comm::Stream& stream, const std::vector<std::string>& inputs, const RanksResult& found,
    const std::string& out, const StreamOptions& options);

// Against a truth file of gencorpus ({"pairs": [[i, j, jaccard], ...]}, documents named by their ids):
// precision, recall and F1 of the verified pairs, and of co-membership (the pairs of documents that share a
// cluster, against the pairs that share a connected component of the true pairs).
struct TruthScores {
  Scores pairs;
  Scores co_membership;
};
absl::StatusOr<TruthScores> ScoreAgainstTruth(const StreamResult& result,
                                              const std::vector<std::pair<int, std::string>>& names,
                                              const std::string& truth_path);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_STREAM_DEDUP_H_
