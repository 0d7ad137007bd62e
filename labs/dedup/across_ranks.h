// Lab 3 (dedup), stage E: dedup across ranks -- the band shuffle, the union of clusters across ranks, and
// one survivor rule for all of them.
//
// At corpus scale each rank reads and signs its own share of the documents (document ids are global: rank
// r holds a contiguous range of them). Two near-duplicates held by different ranks can only meet if all the
// records of a bucket reach one rank, so each rank sends every band record to the rank that owns its bucket;
// the owner finds the candidate pairs of its buckets. The pairs verified anywhere are the edges of one global
// graph, and every rank must come to the same clusters and the same survivors. notes/03-dedup.md §7 is the
// idea, with the cost of each exchange.
#ifndef DISTLAB_LABS_DEDUP_ACROSS_RANKS_H_
#define DISTLAB_LABS_DEDUP_ACROSS_RANKS_H_

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lsh.h"
#include "minhash.h"
#include "reference/comm/comm.h"
#include "xxhash.h"

namespace distlab::dedup {

// One band of one document's signature, as it travels between ranks: 16 bytes, no padding.
struct BandRecord {
  uint64_t key = 0;  // BandKey(signature, band, rows)
  int32_t band = 0;  // j, 0 <= j < b
  int32_t doc = 0;   // the document's global id
};
static_assert(sizeof(BandRecord) == 16, "a BandRecord travels as 16 bytes");

// Records sort by (band, key, doc): the records of one bucket are neighbours.
inline bool operator<(const BandRecord& a, const BandRecord& b) {
  return std::tie(a.band, a.key, a.doc) < std::tie(b.band, b.key, b.doc);
}
inline bool operator==(const BandRecord& a, const BandRecord& b) {
  return a.band == b.band && a.key == b.key && a.doc == b.doc;
}

// Given. The key of band j of a signature (its rows [j r, (j + 1) r)): XXH3-64 of those r values' bytes,
// seeded with j. Equal bands give equal keys on every rank; two different bands of the same j share a key
// with probability about 2^-64 (a false candidate, which verification removes).
inline uint64_t BandKey(const Signature& signature, int band, int rows) {
  return XXH3_64bits_withSeed(signature.data() + static_cast<size_t>(band) * rows, sizeof(uint64_t) * rows,
                              static_cast<uint64_t>(band));
}

// Given. The rank that owns the bucket of `key` among `world` ranks: key mod world.
inline int BucketOwner(uint64_t key, int world) {
  return static_cast<int>(key % static_cast<uint64_t>(world));
}

// Given. The band records of documents first_doc, first_doc + 1, ... (signatures[i] is document
// first_doc + i): banding.bands records per document, in order of (doc, band).
inline std::vector<BandRecord> BandRecordsOf(const std::vector<Signature>& signatures, int first_doc,
                                             const Banding& banding) {
  std::vector<BandRecord> out;
  out.reserve(signatures.size() * static_cast<size_t>(banding.bands));
  for (size_t i = 0; i < signatures.size(); ++i) {
    for (int j = 0; j < banding.bands; ++j) {
      out.push_back({BandKey(signatures[i], j, banding.rows), j, first_doc + static_cast<int>(i)});
    }
  }
  return out;
}

// Collective (every rank of `comm` calls it, with the same `chunk`). Sends each record of `mine` to rank
// BucketOwner(record.key, comm.size()) and returns the records this rank owns, from every rank (its own
// included), each exactly once, sorted. The records move only by comm.AllToAll on `stream`, in rounds: a
// round moves at most `chunk` records from each rank to each rank, so the buffers of a round hold
// 2 * size() * chunk records, whatever the total. Every rank makes the same calls in the same order (the
// runtime's watchdog fails a rank left waiting). Errors: chunk < 1 (InvalidArgument naming it, on every
// rank, before any communication); any error of the communicator or the stream.
absl::StatusOr<std::vector<BandRecord>> ShuffleBandRecords(comm::Comm& comm, comm::Stream& stream,
                                                           const std::vector<BandRecord>& mine, int chunk);

// Local. The candidate pairs of `records` (a sorted list, as ShuffleBandRecords returns it): (i, j) with
// i < j for every two records of different documents with the same band and key; sorted, each pair once.
std::vector<std::pair<int, int>> CandidatePairsOf(const std::vector<BandRecord>& records);

// Collective. The cluster labels of the graph on documents 0 .. num_docs - 1 whose edges are the union of
// every rank's `edges`: label[d] is the smallest id in d's connected component (d itself when d has no
// edge). Every rank returns the same vector. The exchange is yours to choose (notes/03-dedup.md §7.3), on
// `stream` with the communicator's collectives. Errors, on every rank alike so that none is left waiting:
// num_docs < 0 (InvalidArgument); an edge with an end outside [0, num_docs) on any rank (InvalidArgument;
// the message on the rank that holds it names the edge); any error of the communicator or the stream.
absl::StatusOr<std::vector<int>> GlobalLabels(comm::Comm& comm, comm::Stream& stream, int num_docs,
                                              const std::vector<std::pair<int, int>>& edges);

// Local. The survivors among documents first_doc .. first_doc + count - 1 (this rank's), ascending, given
// every document's label from GlobalLabels: each cluster keeps its lowest id, whichever rank holds it, and a
// document in no cluster is kept. Requires 0 <= first_doc and first_doc + count <= labels.size() (otherwise
// an empty list).
std::vector<int> KeptOf(const std::vector<int>& labels, int first_doc, int count);

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_ACROSS_RANKS_H_
