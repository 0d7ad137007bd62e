// Lab 3 (dedup), given; not graded: the streaming tool on several ranks (stream_dedup.h, "Several ranks").
//
// Rank r of n reads share r of the corpus's files, so the global ids of its documents are one contiguous
// range [first_r, first_r + m_r). What each stage sends, per rank (notes/03-dedup.md §7.6):
//
//   pass 1       nothing: its documents' band keys stay in memory (under a budget, BandTable spills them to
//                sorted runs on local disk), their shingle sets go to a local file
//   ids          all-gather of m_r (one int64 each)
//   shuffle      per band j, the student's ShuffleBandRecords: 16 bytes per document and band, to the
//                bucket's owner; the owner pairs its buckets with the student's CandidatePairsOf. A rank
//                holds band j's records whole for it (read back from the runs when spilled: the budget
//                bounds pass 1 here, not the shuffle, whose owner holds its buckets' records whole anyway)
//   route        each candidate pair (i, j), i < j, to the rank that holds i or j (which one: a hash of the
//                pair), 8 bytes a pair; that rank drops the copies other owners found, so every pair is
//                verified once
//   verify       exact Jaccard; the shingle set of a document held elsewhere is asked of its holder (4 bytes
//                a request, 8 bytes a shingle back), at most StreamOptions::fetch_round pairs a round
//   union        the student's GlobalLabels over the verified pairs: every rank gets every document's label
//   clusters     every rank lists the clusters from the labels (the same list everywhere, ordered by their
//                smallest member); a rank that holds one of a cluster's members computes its largest
//                Jaccard (asking for the sets it lacks) and sends it to rank 0; survivors by the student's
//                KeptOf (the lowest id) or SurvivorIndex (random)
//   pass 2       each rank writes its own files' survivors; the clusters' member names go to rank 0, which
//                writes the report
//
// Apart from the student's functions, bytes move by pairwise exchanges of Send/Recv (ExchangeBytes below):
// n - 1 steps, in step k rank r sends to r + k and receives from r - k.
// Every local failure (a bad line, a full disk) is agreed on before the next exchange (Agree), so all ranks
// stop with the same error and none waits for a rank that has given up.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "labs/dedup/across_ranks.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/stream_dedup.h"
#include "labs/dedup/stream_internal.h"
#include "reference/base/status.h"

namespace distlab::dedup {

using namespace internal;  // stream_internal.h

namespace {

namespace fs = std::filesystem;

// Bytes per Send/Recv of an exchange.
constexpr size_t kPiece = size_t{16} << 20;

absl::Status AllReduceI64(comm::Comm& comm, comm::Stream& stream, int64_t& value, comm::RedOp op) {
  RETURN_IF_ERROR(comm.AllReduce(&value, &value, 1, comm::DataType::kI64, op, stream));
  return stream.Synchronize();
}

}  // namespace

absl::Status internal::Agree(comm::Comm& comm, comm::Stream& stream, const absl::Status& local) {
  const int n = comm.size(), me = comm.rank();
  int64_t first_failed = local.ok() ? n : me;
  RETURN_IF_ERROR(AllReduceI64(comm, stream, first_failed, comm::RedOp::kMin));
  if (first_failed == n) return absl::OkStatus();
  const int root = static_cast<int>(first_failed);
  // The failed rank's code and message, so that every rank reports the cause and not "a peer failed".
  const std::string mine(local.message());
  int64_t header[2] = {static_cast<int64_t>(local.code()), static_cast<int64_t>(mine.size())};
  RETURN_IF_ERROR(comm.Broadcast(header, header, 2, comm::DataType::kI64, root, stream));
  RETURN_IF_ERROR(stream.Synchronize());
  std::string message(static_cast<size_t>(header[1]), '\0');
  if (me == root) message = mine;
  if (!message.empty()) {
    RETURN_IF_ERROR(
        comm.Broadcast(message.data(), message.data(), message.size(), comm::DataType::kU8, root, stream));
    RETURN_IF_ERROR(stream.Synchronize());
  }
  // A last barrier, its own errors ignored: every rank has the message before the failed rank returns (and,
  // as a process, exits -- which its peers would otherwise see as its death, not as its error).
  int64_t done = 0;
  if (comm.AllReduce(&done, &done, 1, comm::DataType::kI64, comm::RedOp::kSum, stream).ok()) {
    stream.Synchronize().IgnoreError();
  }
  if (me == root) return local;
  return absl::Status(static_cast<absl::StatusCode>(header[0]), absl::StrCat("rank ", root, ": ", message));
}

absl::StatusOr<std::vector<std::string>> internal::ExchangeBytes(comm::Comm& comm, comm::Stream& stream,
                                                                 std::vector<std::string> to) {
  const int n = comm.size(), me = comm.rank();
  if (static_cast<int>(to.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExchangeBytes: ", to.size(), " messages for ", n, " ranks"));
  }
  std::vector<std::string> from(n);
  from[me] = std::move(to[me]);
  for (int k = 1; k < n; ++k) {
    const int dst = (me + k) % n, src = (me - k + n) % n;
    int64_t send_size = static_cast<int64_t>(to[dst].size()), recv_size = 0;
    RETURN_IF_ERROR(
        comm::SendRecv(comm, &send_size, 1, dst, &recv_size, 1, src, comm::DataType::kI64, stream));
    RETURN_IF_ERROR(stream.Synchronize());
    from[src].resize(static_cast<size_t>(recv_size));
    const size_t send_bytes = to[dst].size(), recv_bytes = from[src].size();
    for (size_t at = 0; at < std::max(send_bytes, recv_bytes); at += kPiece) {
      const size_t s = at < send_bytes ? std::min(kPiece, send_bytes - at) : 0;
      const size_t r = at < recv_bytes ? std::min(kPiece, recv_bytes - at) : 0;
      RETURN_IF_ERROR(comm::SendRecv(comm, to[dst].data() + at, s, dst, from[src].data() + at, r, src,
                                     comm::DataType::kU8, stream));
      RETURN_IF_ERROR(stream.Synchronize());
    }
    to[dst] = std::string();  // sent: its memory goes now, not at the end of the exchange
  }
  return from;
}

namespace {

// Plain values in and out of the bytes of an exchange.
template <typename T>
void Put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
template <typename T>
std::vector<T> AsVector(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(static_cast<void*>(v.data()), bytes.data(), v.size() * sizeof(T));
  return v;
}

// What one rank knows of where documents live and of its own shingle sets.
struct Local {
  comm::Comm& comm;
  comm::Stream& stream;
  std::vector<int64_t> firsts;  // [n + 1]: rank p holds ids [firsts[p], firsts[p + 1])
  const SetFile& sets;
  const Chunked<uint64_t>& offsets;  // of this rank's documents, by local index

  int me() const { return comm.rank(); }
  int HolderOf(int doc) const {
    return static_cast<int>(std::upper_bound(firsts.begin(), firsts.end(), doc) - firsts.begin()) - 1;
  }
  bool Mine(int doc) const { return HolderOf(doc) == me(); }
  absl::Status Load(int doc, std::vector<uint64_t>& set) const {
    const size_t d = static_cast<size_t>(doc - firsts[me()]);
    return sets.Read(offsets[d], offsets[d + 1] - offsets[d], set);
  }

  // Collective: the shingle sets of `want` (documents other ranks hold), fetched from their holders. A set
  // this rank cannot read for another is agreed on as an error, after the exchange it owes.
  absl::StatusOr<std::unordered_map<int, std::vector<uint64_t>>> Fetch(std::vector<int> want,
                                                                       RankShare& counts) const {
    const int n = comm.size();
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    std::vector<std::string> asks(n);
    for (int d : want) Put(asks[HolderOf(d)], static_cast<int32_t>(d));
    ASSIGN_OR_RETURN(const std::vector<std::string> asked, ExchangeBytes(comm, stream, std::move(asks)));
    std::vector<std::string> replies(n);  // per set asked: its size, then its values
    std::vector<uint64_t> set;
    absl::Status s;
    for (int p = 0; p < n && s.ok(); ++p) {
      for (const int32_t d : AsVector<int32_t>(asked[p])) {
        s = Mine(d)
                ? Load(d, set)
                : absl::InternalError(absl::StrCat("rank ", p, " asked for document ", d, ", not held here"));
        if (!s.ok()) break;
        Put(replies[p], static_cast<uint64_t>(set.size()));
        replies[p].append(reinterpret_cast<const char*>(set.data()), set.size() * sizeof(uint64_t));
      }
    }
    ASSIGN_OR_RETURN(const std::vector<std::string> got, ExchangeBytes(comm, stream, std::move(replies)));
    RETURN_IF_ERROR(Agree(comm, stream, s));
    counts.sets_fetched += static_cast<int64_t>(want.size());
    for (int p = 0; p < n; ++p) {
      if (p != comm.rank()) counts.set_bytes_fetched += static_cast<int64_t>(got[p].size());
    }
    std::unordered_map<int, std::vector<uint64_t>> out;
    std::vector<size_t> at(n, 0);
    for (int d : want) {  // each holder answered in the order asked, which is ascending
      const int p = HolderOf(d);
      const std::string& bytes = got[p];
      uint64_t size = 0;
      if (at[p] + sizeof(size) > bytes.size()) return absl::InternalError("a short reply of shingle sets");
      std::memcpy(&size, bytes.data() + at[p], sizeof(size));
      at[p] += sizeof(size);
      if (at[p] + size * sizeof(uint64_t) > bytes.size()) return absl::InternalError("a short shingle set");
      std::vector<uint64_t>& v = out[d];
      v.resize(size);
      if (size > 0) std::memcpy(v.data(), bytes.data() + at[p], size * sizeof(uint64_t));
      at[p] += size * sizeof(uint64_t);
    }
    return out;
  }

  // Collective: the number of rounds of `per_round` items that the rank with the most items needs.
  absl::StatusOr<int64_t> Rounds(size_t items, size_t per_round) const {
    int64_t rounds = static_cast<int64_t>((items + per_round - 1) / per_round);
    RETURN_IF_ERROR(AllReduceI64(comm, stream, rounds, comm::RedOp::kMax));
    return rounds;
  }
};

// The clusters of `labels` (label[d] = smallest id of d's component): the components of two or more
// documents, ordered by their smallest member, members ascending -- as FindNearDuplicates lists them.
std::vector<Cluster> ClustersOf(const std::vector<int>& labels) {
  // Per label: first how many documents carry it, then (for two or more) -1 - the index of its cluster.
  std::vector<int> slot(labels.size(), 0);
  for (int l : labels) ++slot[l];
  std::vector<Cluster> clusters;
  for (size_t d = 0; d < labels.size(); ++d) {
    int& l = slot[labels[d]];
    if (l == 1) continue;
    if (l > 1) {
      clusters.push_back(Cluster{static_cast<int>(clusters.size()), {}, 0, 0.0});
      l = -static_cast<int>(clusters.size());
    }
    clusters[-1 - l].members.push_back(static_cast<int>(d));
  }
  return clusters;
}

}  // namespace

absl::StatusOr<RanksResult> FindNearDuplicatesAcrossRanks(comm::Comm& comm, comm::Stream& stream,
                                                          const std::vector<std::string>& inputs,
                                                          const StreamOptions& options) {
  const int n = comm.size(), me = comm.rank();
  RanksResult out;
  StreamResult& result = out.result;
  DedupOptions check = options.dedup;
  check.progress = nullptr;
  absl::StatusOr<DedupResult> none = Deduplicate({}, check);
  RETURN_IF_ERROR(Agree(comm, stream, none.status()));
  result.banding = none->banding;
  const int b = result.banding.bands;

  // Pass 1 on this rank's share.
  BandTable bands;
  Chunked<uint64_t> offsets;
  SetFile sets;
  {
    absl::Status s = bands.Init(b, options.memory_bytes, options.tmp_dir);
    if (s.ok()) s = sets.Open(options.tmp_dir);
    absl::StatusOr<std::unique_ptr<CorpusStream>> share =
        s.ok() ? CorpusStream::Open(inputs, me, n) : absl::StatusOr<std::unique_ptr<CorpusStream>>(s);
    if (share.ok()) s = PassOne(**share, options, result.banding, bands, offsets, sets, result);
    RETURN_IF_ERROR(Agree(comm, stream, share.ok() ? s : share.status()));
  }
  out.share.documents = result.documents;
  result.shingle_file_bytes = sets.written();
  result.spilled_runs = bands.spilled_runs();
  result.spilled_bytes = bands.spilled_bytes();

  // Global ids: rank p's documents follow those of ranks 0 .. p - 1.
  std::vector<int64_t> counts(n);
  RETURN_IF_ERROR(comm.AllGather(&result.documents, counts.data(), 1, comm::DataType::kI64, stream));
  RETURN_IF_ERROR(stream.Synchronize());
  Local local{comm, stream, std::vector<int64_t>(n + 1, 0), sets, offsets};
  for (int p = 0; p < n; ++p) local.firsts[p + 1] = local.firsts[p] + counts[p];
  const int64_t total = local.firsts[n];
  if (total > std::numeric_limits<int>::max()) {  // the same on every rank: no agreement needed
    return absl::InvalidArgumentError(absl::StrCat(total, " documents: the lab's document ids are int"));
  }
  const int first = static_cast<int>(local.firsts[me]);
  const int mine = static_cast<int>(result.documents);
  out.share.first_doc = first;
  RETURN_IF_ERROR(AllReduceI64(comm, stream, result.text_bytes, comm::RedOp::kSum));
  result.documents = total;

  // The shuffle's rounds: `shuffle_chunk` records per peer, or by default about what one rank sends one peer
  // for one band (total / n^2, plus four standard deviations), at most 65536 (1 MB): one or two rounds for a
  // small corpus, without buffers padded far beyond its records.
  int chunk = options.shuffle_chunk;
  if (chunk == 0) {
    const double per_peer = static_cast<double>(total) / (static_cast<double>(n) * n);
    chunk = static_cast<int>(std::min(65536.0, per_peer + 4 * std::sqrt(per_peer) + 16));
  }

  // The shuffle, one band at a time (so a band's records are all that is held beyond the keys), and the
  // candidates of the buckets this rank owns.
  std::vector<std::pair<int, int>> found;
  size_t peak = 0;
  for (int j = 0; j < b; ++j) {
    absl::StatusOr<std::vector<BandRecord>> taken = bands.TakeBand(j, first);  // a spilled run can fail
    RETURN_IF_ERROR(Agree(comm, stream, taken.status()));
    std::vector<BandRecord> records = *std::move(taken);
    for (const BandRecord& r : records) out.share.records_to_others += BucketOwner(r.key, n) != me;
    const size_t held = bands.held_bytes() + records.size() * sizeof(BandRecord);
    ASSIGN_OR_RETURN(const std::vector<BandRecord> owned, ShuffleBandRecords(comm, stream, records, chunk));
    out.share.records_sent += static_cast<int64_t>(records.size());
    out.share.records_received += static_cast<int64_t>(owned.size());
    peak = std::max(peak, held + owned.size() * sizeof(BandRecord));
    records = std::vector<BandRecord>();
    std::vector<std::pair<int, int>> pairs = CandidatePairsOf(owned);
    std::vector<std::pair<int, int>> merged;
    merged.reserve(found.size() + pairs.size());
    std::set_union(found.begin(), found.end(), pairs.begin(), pairs.end(), std::back_inserter(merged));
    found.swap(merged);
    Report(options, "candidates", j + 1, b);
  }
  peak = std::max(peak, bands.peak_bytes());
  result.bytes_per_document =
      mine == 0 ? 0 : static_cast<double>(peak + offsets.bytes()) / static_cast<double>(mine);

  // Each pair to the holder of one of its documents, the same one whoever found it, so the copies found by
  // several owners meet there. Which one is a hash of the pair: always the first would load the low ranks
  // (a near-duplicate tends to come after its original).
  auto verifier = [&](int i, int j) {
    const uint64_t h = (static_cast<uint64_t>(i) << 32 | static_cast<uint32_t>(j)) * 0x9E3779B97F4A7C15ull;
    return local.HolderOf(h >> 63 ? j : i);
  };
  std::vector<std::pair<int, int>> candidates;
  {
    std::vector<std::string> to(n);
    for (const auto& [i, j] : found) Put(to[verifier(i, j)], std::make_pair(i, j));
    found = {};
    ASSIGN_OR_RETURN(const std::vector<std::string> got, ExchangeBytes(comm, stream, std::move(to)));
    for (const std::string& bytes : got) {
      const std::vector<std::pair<int, int>> pairs = AsVector<std::pair<int, int>>(bytes);
      candidates.insert(candidates.end(), pairs.begin(), pairs.end());
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  }
  out.share.candidate_pairs = static_cast<int64_t>(candidates.size());
  result.candidate_pairs = out.share.candidate_pairs;
  RETURN_IF_ERROR(AllReduceI64(comm, stream, result.candidate_pairs, comm::RedOp::kSum));

  // What a round asks of other ranks: the sets of at most `per_round` pairs, or of the clusters of so many.
  if (options.fetch_round < 1) {  // the same on every rank
    return absl::InvalidArgumentError(absl::StrCat("fetch_round = ", options.fetch_round, ": must be >= 1"));
  }
  const size_t per_round = static_cast<size_t>(options.fetch_round);

  // Verification, exact as on one rank; the set of the document held elsewhere fetched, a round at a time.
  std::vector<SimilarPair> verified;
  {
    ASSIGN_OR_RETURN(const int64_t rounds, local.Rounds(candidates.size(), per_round));
    std::vector<uint64_t> first_set, second_set;
    int first_loaded = -1;
    for (int64_t round = 0; round < rounds; ++round) {
      const size_t lo = std::min(candidates.size(), static_cast<size_t>(round) * per_round);
      const size_t hi = std::min(candidates.size(), lo + per_round);
      std::vector<int> want;
      for (size_t c = lo; c < hi; ++c) {
        for (const int d : {candidates[c].first, candidates[c].second}) {
          if (!local.Mine(d)) want.push_back(d);
        }
      }
      ASSIGN_OR_RETURN(const auto fetched, local.Fetch(std::move(want), out.share));
      first_loaded = -1;  // `a` may point into the last round's fetched sets, which are gone
      auto set_of = [&](int d,
                        std::vector<uint64_t>& buffer) -> absl::StatusOr<const std::vector<uint64_t>*> {
        if (!local.Mine(d)) return &fetched.at(d);
        RETURN_IF_ERROR(local.Load(d, buffer));
        return &buffer;
      };
      absl::Status s;
      const std::vector<uint64_t>* a = &first_set;
      for (size_t c = lo; c < hi && s.ok(); ++c) {
        const auto [i, j] = candidates[c];
        if (i != first_loaded) {  // pairs come sorted by their first document: load it once per run
          absl::StatusOr<const std::vector<uint64_t>*> got = set_of(i, first_set);
          s = got.status();
          if (!s.ok()) break;
          a = *got, first_loaded = i;
        }
        absl::StatusOr<const std::vector<uint64_t>*> b = set_of(j, second_set);
        s = b.status();
        if (!s.ok()) break;
        const double jac = Jaccard(*a, **b);  // in the order one process calls it
        if (jac >= options.dedup.threshold) verified.push_back({i, j, jac});
      }
      RETURN_IF_ERROR(Agree(comm, stream, s));
      Report(options, "verify", static_cast<int64_t>(hi), static_cast<int64_t>(candidates.size()));
    }
  }
  out.share.verified_pairs = static_cast<int64_t>(verified.size());

  // The union across ranks, then the clusters every rank lists alike.
  std::vector<std::pair<int, int>> edges;
  edges.reserve(verified.size());
  for (const SimilarPair& p : verified) edges.emplace_back(p.i, p.j);
  ASSIGN_OR_RETURN(const std::vector<int> labels, GlobalLabels(comm, stream, static_cast<int>(total), edges));
  edges = {};
  std::vector<Cluster> clusters = ClustersOf(labels);
  for (Cluster& c : clusters) {
    const int size = static_cast<int>(c.members.size());
    c.survivor = options.dedup.survivor == SurvivorRule::kLowestId
                     ? c.members.front()
                     : c.members[SurvivorIndex(options.dedup.survivor_seed, c.members.front(), size)];
    result.removed += size - 1;
  }
  // This rank's members and the ones it removes. KeptOf (the lowest id) is the student's rule; a random
  // survivor is chosen from the cluster as one process chooses it.
  std::vector<int> kept;
  if (options.dedup.survivor == SurvivorRule::kLowestId) kept = KeptOf(labels, first, mine);
  for (const Cluster& c : clusters) {
    for (int m : c.members) {
      if (!local.Mine(m)) continue;
      out.share.members.push_back(m);
      const bool removed = options.dedup.survivor == SurvivorRule::kLowestId
                               ? !std::binary_search(kept.begin(), kept.end(), m)
                               : m != c.survivor;
      if (removed) out.share.removed.push_back(m);
    }
  }
  kept = {};
  std::sort(out.share.members.begin(), out.share.members.end());
  std::sort(out.share.removed.begin(), out.share.removed.end());

  // The largest Jaccard of each cluster, on the rank that holds one of its members, picked by a hash of the
  // smallest (always the smallest would load the low ranks, as for the pairs above).
  std::vector<std::pair<int, double>> measured;  // (cluster index, max Jaccard)
  {
    std::vector<int> homed;
    for (const Cluster& c : clusters) {
      const uint64_t h = static_cast<uint64_t>(c.members.front()) * 0x9E3779B97F4A7C15ull;
      if (local.Mine(c.members[(h >> 32) % c.members.size()])) homed.push_back(c.id);
    }
    ASSIGN_OR_RETURN(const int64_t rounds, local.Rounds(homed.size(), per_round));
    for (int64_t round = 0; round < rounds; ++round) {
      const size_t lo = std::min(homed.size(), static_cast<size_t>(round) * per_round);
      const size_t hi = std::min(homed.size(), lo + per_round);
      std::vector<int> want;
      for (size_t h = lo; h < hi; ++h) {
        for (int m : clusters[homed[h]].members) {
          if (!local.Mine(m)) want.push_back(m);
        }
      }
      absl::StatusOr<std::unordered_map<int, std::vector<uint64_t>>> fetched =
          local.Fetch(std::move(want), out.share);
      if (!fetched.ok()) return fetched.status();
      absl::Status s;
      std::vector<std::vector<uint64_t>> member_sets;
      for (size_t h = lo; h < hi && s.ok(); ++h) {
        const Cluster& c = clusters[homed[h]];
        member_sets.assign(c.members.size(), {});
        for (size_t x = 0; x < c.members.size() && s.ok(); ++x) {
          if (local.Mine(c.members[x])) {
            s = local.Load(c.members[x], member_sets[x]);
          } else {
            member_sets[x] = fetched->at(c.members[x]);
          }
        }
        double best = 0.0;
        for (size_t x = 0; x < member_sets.size() && s.ok(); ++x) {
          for (size_t y = x + 1; y < member_sets.size(); ++y)
            best = std::max(best, Jaccard(member_sets[x], member_sets[y]));
        }
        measured.emplace_back(c.id, best);
      }
      RETURN_IF_ERROR(Agree(comm, stream, s));
    }
  }

  // Rank 0 gathers what the report and the scores need: every verified pair and every cluster's Jaccard.
  {
    std::vector<std::string> to(n), to_measured(n);
    for (const SimilarPair& p : verified) Put(to[0], p);
    for (const auto& m : measured) Put(to_measured[0], m);
    verified = {};
    ASSIGN_OR_RETURN(const std::vector<std::string> got, ExchangeBytes(comm, stream, std::move(to)));
    ASSIGN_OR_RETURN(const std::vector<std::string> got_measured,
                     ExchangeBytes(comm, stream, std::move(to_measured)));
    if (me == 0) {
      for (const std::string& bytes : got) {
        const std::vector<SimilarPair> pairs = AsVector<SimilarPair>(bytes);
        result.verified.insert(result.verified.end(), pairs.begin(), pairs.end());
      }
      std::sort(
          result.verified.begin(), result.verified.end(),
          [](const SimilarPair& x, const SimilarPair& y) { return std::tie(x.i, x.j) < std::tie(y.i, y.j); });
      for (const std::string& bytes : got_measured) {
        for (const auto& [c, best] : AsVector<std::pair<int, double>>(bytes)) clusters[c].max_jaccard = best;
      }
      result.clusters = std::move(clusters);
    }
  }
  int64_t verified_pairs = out.share.verified_pairs;
  RETURN_IF_ERROR(AllReduceI64(comm, stream, verified_pairs, comm::RedOp::kSum));
  out.verified_pairs = verified_pairs;
  out.clusters = static_cast<int64_t>(me == 0 ? result.clusters.size() : clusters.size());
  return out;
}

absl::StatusOr<std::vector<std::pair<int, std::string>>> WriteSurvivorsAcrossRanks(
    comm::Comm& comm, comm::Stream& stream, const std::vector<std::string>& inputs, const RanksResult& found,
    const std::string& out, const StreamOptions& options) {
  const int n = comm.size(), me = comm.rank();
  const std::string tmp = out + ".partial";
  // Rank 0 checks OUT and makes the shared temporary output; only then do the ranks write into it.
  absl::StatusOr<std::unique_ptr<CorpusStream>> input = CorpusStream::Open(inputs, me, n);
  bool folder = false;
  {
    absl::Status s = input.status();
    if (s.ok()) folder = (*input)->format() == CorpusFormat::kFolder || (*input)->shards().size() > 1;
    if (s.ok() && me == 0) {
      s = CorpusWriter::CheckOutput(**input, out);
      std::error_code ec;
      fs::remove_all(tmp, ec);
      if (s.ok() && folder && !fs::create_directories(tmp, ec)) {
        s = absl::InternalError(absl::StrCat("cannot create folder ", tmp, ": ", ec.message()));
      }
    }
    RETURN_IF_ERROR(Agree(comm, stream, s));
  }
  // This rank's share: its survivors written, the names of its cluster members kept for rank 0.
  std::string names_bytes;
  absl::Status s = [&]() -> absl::Status {
    CorpusStream& in = **input;
    ASSIGN_OR_RETURN(std::unique_ptr<CorpusWriter> writer, CorpusWriter::OpenShare(in, out, tmp));
    const std::vector<int>& members = found.share.members;
    Document doc;
    auto next_member = members.begin();
    auto next_removed = found.share.removed.begin();
    int64_t d = found.share.first_doc;
    for (;; ++d) {
      const bool member = next_member != members.end() && *next_member == d;
      ASSIGN_OR_RETURN(const bool more, in.Next(doc, /*parse=*/member));
      if (!more) break;
      if (member) {
        Put(names_bytes, static_cast<int32_t>(d));
        Put(names_bytes, static_cast<uint64_t>(doc.name.size()));
        names_bytes += doc.name;
        ++next_member;
      }
      if (next_removed != found.share.removed.end() && *next_removed == d) {
        ++next_removed;
      } else {
        RETURN_IF_ERROR(writer->Write(in));
      }
      if ((d + 1) % kBatch == 0)
        Report(options, "pass 2", d + 1 - found.share.first_doc, found.share.documents, &in);
    }
    if (d - found.share.first_doc != found.share.documents) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the input has ", d - found.share.first_doc, " documents in this rank's share now and had ",
          found.share.documents, " in pass 1: it changed between passes"));
    }
    return writer->Commit();
  }();
  auto cleanup = [&] {
    std::error_code ec;
    if (input.ok() && (*input)->byte_range() && me > 0) fs::remove(CorpusWriter::ShareFile(**input, tmp), ec);
    if (me == 0) fs::remove_all(tmp, ec);
  };
  if (absl::Status agreed = Agree(comm, stream, s); !agreed.ok()) {
    cleanup();
    return agreed;
  }
  // Every share is written: rank 0 puts the output in place.
  std::vector<std::string> to(n);
  to[0] = std::move(names_bytes);
  ASSIGN_OR_RETURN(const std::vector<std::string> got, ExchangeBytes(comm, stream, std::move(to)));
  std::vector<std::pair<int, std::string>> names;
  absl::Status placed;
  if (me == 0) {
    for (const std::string& bytes : got) {
      for (size_t at = 0; at + sizeof(int32_t) + sizeof(uint64_t) <= bytes.size();) {
        int32_t d = 0;
        uint64_t size = 0;
        std::memcpy(&d, bytes.data() + at, sizeof(d));
        std::memcpy(&size, bytes.data() + at + sizeof(d), sizeof(size));
        at += sizeof(d) + sizeof(size);
        names.emplace_back(d, bytes.substr(at, size));
        at += size;
      }
    }
    std::sort(names.begin(), names.end());
    placed = CorpusWriter::JoinShares(**input, tmp);  // byte-range shares: their files into one
    std::error_code ec;
    if (folder) fs::remove(out, ec);  // an empty folder (checked above) gives way
    if (placed.ok()) fs::rename(tmp, out, ec);
    if (placed.ok() && ec)
      placed = absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", out, ": ", ec.message()));
  }
  if (absl::Status agreed = Agree(comm, stream, placed); !agreed.ok()) {
    cleanup();
    return agreed;
  }
  return names;
}

}  // namespace distlab::dedup
