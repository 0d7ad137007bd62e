// Lab 3 (dedup), stage E: reference solution.
#include "labs/dedup/across_ranks.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::dedup {

namespace {

// A BandRecord is 16 bytes: it travels as two uint64 words (kU64 is not a dtype; kI64 moves the same bits).
constexpr size_t kWordsPerRecord = sizeof(BandRecord) / sizeof(int64_t);

// AllToAll of `count` int64 values per peer, synchronized before the result is read: the AllToAll returns
// once every rank has launched it, but the data moves on the stream.
absl::Status AllToAllI64(comm::Comm& comm, comm::Stream& stream, const std::vector<int64_t>& send,
                         std::vector<int64_t>& recv, size_t count) {
  RETURN_IF_ERROR(comm.AllToAll(send.data(), recv.data(), count, comm::DataType::kI64, stream));
  return stream.Synchronize();
}

absl::Status AllReduceMaxI64(comm::Comm& comm, comm::Stream& stream, int64_t& value) {
  RETURN_IF_ERROR(comm.AllReduce(&value, &value, 1, comm::DataType::kI64, comm::RedOp::kMax, stream));
  return stream.Synchronize();
}

}  // namespace

absl::StatusOr<std::vector<BandRecord>> ShuffleBandRecords(comm::Comm& comm, comm::Stream& stream,
                                                           const std::vector<BandRecord>& mine, int chunk) {
  if (chunk < 1) return absl::InvalidArgumentError(absl::StrCat("chunk must be >= 1, got ", chunk));
  const int n = comm.size();

  // Each rank's records, grouped by owner. Every rank must agree on the owner of a key, so the owner is a
  // function of the key alone (BucketOwner), never of the document or of the rank that sends it.
  std::vector<std::vector<BandRecord>> to(n);
  for (const BandRecord& rec : mine) to[BucketOwner(rec.key, n)].push_back(rec);

  // The rounds: enough for the longest list any rank sends to any peer. Ranks send different amounts, so
  // each rank's own count is not enough: a rank that stopped early would leave the others waiting in an
  // AllToAll it never joins.
  int64_t longest = 0;
  for (const auto& list : to) longest = std::max<int64_t>(longest, static_cast<int64_t>(list.size()));
  RETURN_IF_ERROR(AllReduceMaxI64(comm, stream, longest));
  const int64_t rounds = (longest + chunk - 1) / chunk;

  // Per round, slot p of the send buffer holds up to `chunk` records for rank p and a count word in front;
  // the same layout comes back from every rank. Two buffers of n * (1 + chunk * 2) words, reused.
  const size_t slot = 1 + static_cast<size_t>(chunk) * kWordsPerRecord;
  std::vector<int64_t> send(slot * n), recv(slot * n);
  std::vector<BandRecord> out;
  for (int64_t round = 0; round < rounds; ++round) {
    const size_t begin = static_cast<size_t>(round) * chunk;
    for (int p = 0; p < n; ++p) {
      const size_t end = std::min(to[p].size(), begin + chunk);
      const size_t k = end > begin ? end - begin : 0;
      send[p * slot] = static_cast<int64_t>(k);
      if (k > 0) std::memcpy(&send[p * slot + 1], &to[p][begin], k * sizeof(BandRecord));
    }
    RETURN_IF_ERROR(AllToAllI64(comm, stream, send, recv, slot));
    for (int p = 0; p < n; ++p) {
      const size_t k = static_cast<size_t>(recv[p * slot]);
      const size_t at = out.size();
      out.resize(at + k);
      if (k > 0) std::memcpy(static_cast<void*>(&out[at]), &recv[p * slot + 1], k * sizeof(BandRecord));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<int, int>> CandidatePairsOf(const std::vector<BandRecord>& records) {
  std::vector<std::pair<int, int>> pairs;
  // A bucket is a run of records with the same (band, key); the list is sorted, so runs are contiguous.
  for (size_t lo = 0; lo < records.size();) {
    size_t hi = lo + 1;
    while (hi < records.size() && records[hi].band == records[lo].band &&
           records[hi].key == records[lo].key) {
      ++hi;
    }
    for (size_t a = lo; a < hi; ++a) {
      for (size_t b = a + 1; b < hi; ++b) {
        const int i = std::min(records[a].doc, records[b].doc), j = std::max(records[a].doc, records[b].doc);
        if (i != j) pairs.emplace_back(i, j);
      }
    }
    lo = hi;
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

absl::StatusOr<std::vector<int>> GlobalLabels(comm::Comm& comm, comm::Stream& stream, int num_docs,
                                              const std::vector<std::pair<int, int>>& edges) {
  if (num_docs < 0) return absl::InvalidArgumentError(absl::StrCat("num_docs must be >= 0, got ", num_docs));
  const int n = comm.size();

  // Check this rank's edges, then agree: one bad edge anywhere fails every rank, and before any rank waits
  // in an exchange its peers have given up on.
  std::string bad;
  for (const auto& [a, b] : edges) {
    if (a < 0 || a >= num_docs || b < 0 || b >= num_docs) {
      bad = absl::StrCat("edge (", a, ", ", b, ") has an end outside [0, ", num_docs, ")");
      break;
    }
  }
  int64_t any_bad = bad.empty() ? 0 : 1;
  RETURN_IF_ERROR(AllReduceMaxI64(comm, stream, any_bad));
  if (any_bad != 0) {
    return absl::InvalidArgumentError(bad.empty() ? "another rank holds an edge outside [0, num_docs)" : bad);
  }

  // Every rank's edges to every rank: the counts first (one AllGather), then the edges padded to the
  // longest list (a second one). The verified edges of a corpus are few -- about one per planted copy -- so
  // one all-gather of E edges (8 E bytes to every rank) is cheaper than rounds of label propagation, each of
  // which all-reduces num_docs labels.
  int64_t mine = static_cast<int64_t>(edges.size());
  std::vector<int64_t> counts(n);
  RETURN_IF_ERROR(comm.AllGather(&mine, counts.data(), 1, comm::DataType::kI64, stream));
  RETURN_IF_ERROR(stream.Synchronize());
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  std::vector<int32_t> send(static_cast<size_t>(longest) * 2), all(send.size() * n);
  for (size_t e = 0; e < edges.size(); ++e) send[2 * e] = edges[e].first, send[2 * e + 1] = edges[e].second;
  if (longest > 0) {
    RETURN_IF_ERROR(comm.AllGather(send.data(), all.data(), send.size(), comm::DataType::kI32, stream));
    RETURN_IF_ERROR(stream.Synchronize());
  }

  // Union-find in which the smaller root always becomes the parent, so each set's root is its smallest id
  // (path halving keeps the trees shallow). Every rank unions the same edges: the same labels everywhere.
  std::vector<int> parent(num_docs);
  for (int d = 0; d < num_docs; ++d) parent[d] = d;
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (int p = 0; p < n; ++p) {
    for (int64_t e = 0; e < counts[p]; ++e) {
      const int a = find(all[p * send.size() + 2 * e]), b = find(all[p * send.size() + 2 * e + 1]);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  std::vector<int> labels(num_docs);
  for (int d = 0; d < num_docs; ++d) labels[d] = find(d);
  return labels;
}

std::vector<int> KeptOf(const std::vector<int>& labels, int first_doc, int count) {
  std::vector<int> kept;
  if (first_doc < 0 || count < 0 || static_cast<size_t>(first_doc) + count > labels.size()) return kept;
  for (int d = first_doc; d < first_doc + count; ++d) {
    if (labels[d] == d) kept.push_back(d);
  }
  return kept;
}

}  // namespace distlab::dedup
