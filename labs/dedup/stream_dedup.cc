// Lab 3 (dedup), given; not graded: the streaming pipeline (see stream_dedup.h).
#include "labs/dedup/stream_dedup.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "labs/dedup/across_ranks.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/minhash.h"
#include "labs/dedup/stream_internal.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "xxhash.h"

namespace distlab::dedup {

using namespace internal;  // stream_internal.h

namespace {

struct Batch {
  std::vector<std::string> texts;
  std::vector<std::pair<int, int64_t>> where;  // [texts]: shard, line (for errors)
  int64_t first = 0;                           // corpus index of texts[0]
  size_t count = 0;
};

// What one thread makes of a slice of a batch.
struct Signed {
  std::vector<uint64_t> keys;   // [documents x b], document-major
  std::string sets;             // their shingle sets, back to back
  std::vector<uint64_t> bytes;  // [documents]: bytes of each set
  absl::Status status;
};

struct Pipeline {
  const StreamOptions& options;
  const MinHasher& hasher;
  const Banding banding;
  const CorpusStream& stream;

  void Sign(const Batch& batch, size_t lo, size_t hi, Signed& out) const {
    const int b = banding.bands, r = banding.rows;
    // Room for the sets up front, so `out.sets` is not copied as it grows: a set takes 8 bytes per word,
    // about 1 to 1.5 bytes per byte of text.
    size_t text_bytes = 0;
    for (size_t i = lo; i < hi; ++i) text_bytes += batch.texts[i].size();
    out.sets.reserve(text_bytes + text_bytes / 2);
    out.keys.reserve((hi - lo) * b);
    out.bytes.reserve(hi - lo);
    for (size_t i = lo; i < hi; ++i) {
      absl::StatusOr<std::vector<uint64_t>> set = ShingleSet(batch.texts[i], options.dedup.ngram);
      if (!set.ok()) {
        const auto [shard, line] = batch.where[i];
        out.status = absl::InvalidArgumentError(absl::StrCat(stream.Where(shard, line), " (document ",
                                                             batch.first + static_cast<int64_t>(i),
                                                             "): ", set.status().message()));
        return;
      }
      const Signature sig = hasher.Sign(*set);
      for (int j = 0; j < b; ++j) {
        out.keys.push_back(BandKey(sig, j, r));
      }
      out.sets.append(reinterpret_cast<const char*>(set->data()), set->size() * sizeof(uint64_t));
      out.bytes.push_back(set->size() * sizeof(uint64_t));
    }
  }
};

absl::StatusOr<bool> ReadBatch(CorpusStream& stream, Batch& batch, Document& doc, int64_t& text_bytes) {
  batch.first += static_cast<int64_t>(batch.count);
  batch.count = 0;
  for (int64_t bytes = 0; batch.count < kBatch && bytes < kBatchBytes;) {
    ASSIGN_OR_RETURN(const bool more, stream.Next(doc));
    if (!more) break;
    if (batch.texts.size() <= batch.count) batch.texts.emplace_back(), batch.where.emplace_back();
    text_bytes += static_cast<int64_t>(doc.text.size());
    bytes += static_cast<int64_t>(doc.text.size());
    std::swap(batch.texts[batch.count], doc.text);
    if (doc.text.capacity() > (1 << 16)) doc.text = std::string();  // a long text's buffer is not kept
    batch.where[batch.count] = {stream.shard(), stream.share_line()};
    ++batch.count;
  }
  return batch.count > 0;
}

}  // namespace

// Pass 1: the band keys into the band tables (BandTable), the shingle sets onto disk.
absl::Status internal::PassOne(CorpusStream& stream, const StreamOptions& options, const Banding& banding,
                               BandTable& bands, Chunked<uint64_t>& offsets, SetFile& sets,
                               StreamResult& result) {
  ASSIGN_OR_RETURN(const MinHasher hasher, MinHasher::Create(options.dedup.k, options.dedup.seed));
  const Pipeline pipeline{options, hasher, banding, stream};
  const int threads = Threads(options.dedup.threads);
  Batch batch[2];
  Document doc;
  uint64_t offset = 0;
  offsets.push_back(0);
  Crew crew(threads);  // after the batches: it stops before they go
  // Kept from batch to batch, so that their buffers are allocated (and their pages touched) once.
  std::vector<Signed> out(threads);
  ASSIGN_OR_RETURN(bool more, ReadBatch(stream, batch[0], doc, result.text_bytes));
  for (int cur = 0; more; cur ^= 1) {
    // The threads sign this batch while this thread reads the next one.
    for (Signed& s : out) s.keys.clear(), s.sets.clear(), s.bytes.clear();
    const Batch& b = batch[cur];
    crew.Run([&](int t) { pipeline.Sign(b, b.count * t / threads, b.count * (t + 1) / threads, out[t]); });
    batch[cur ^ 1].first = b.first;
    batch[cur ^ 1].count = b.count;
    absl::StatusOr<bool> next = ReadBatch(stream, batch[cur ^ 1], doc, result.text_bytes);
    crew.Wait();
    for (const Signed& s : out) {
      RETURN_IF_ERROR(s.status);
      for (size_t i = 0; i < s.bytes.size(); ++i) {
        RETURN_IF_ERROR(bands.Add(&s.keys[i * banding.bands]));
        offset += s.bytes[i];
        offsets.push_back(offset);
      }
      RETURN_IF_ERROR(sets.Append(s.sets));
    }
    result.documents += static_cast<int64_t>(b.count);
    if (!next.ok()) return next.status();
    more = *next;
    Report(options, "pass 1", result.documents, 0, &stream);
  }
  RETURN_IF_ERROR(bands.Finish());
  return sets.Flush();
}

namespace {

// Candidates: per band, the documents of each key, paired; a pair found in several bands counts once.
absl::StatusOr<std::vector<std::pair<int, int>>> Candidates(const StreamOptions& options, BandTable& bands,
                                                            int b) {
  std::vector<std::pair<int, int>> all;
  for (int j = 0; j < b; ++j) {
    std::vector<std::pair<int, int>> found;
    RETURN_IF_ERROR(bands.ForEachBucket(j, [&](const std::vector<int>& docs) {
      for (size_t x = 0; x < docs.size(); ++x) {
        for (size_t y = x + 1; y < docs.size(); ++y) found.emplace_back(docs[x], docs[y]);
      }
    }));
    std::sort(found.begin(), found.end());
    std::vector<std::pair<int, int>> merged;
    merged.reserve(all.size() + found.size());
    std::set_union(all.begin(), all.end(), found.begin(), found.end(), std::back_inserter(merged));
    all.swap(merged);
    Report(options, "candidates", j + 1, b);
  }
  return all;
}

}  // namespace

absl::StatusOr<StreamResult> FindNearDuplicates(const std::vector<std::string>& inputs,
                                                const StreamOptions& options) {
  // Deduplicate of no documents validates the options and picks the banding exactly as it would for many.
  DedupOptions check = options.dedup;
  check.progress = nullptr;
  ASSIGN_OR_RETURN(const DedupResult none, Deduplicate({}, check));
  StreamResult result;
  result.banding = none.banding;
  BandTable bands;
  RETURN_IF_ERROR(bands.Init(result.banding.bands, options.memory_bytes, options.tmp_dir));
  Chunked<uint64_t> offsets;
  SetFile sets;
  RETURN_IF_ERROR(sets.Open(options.tmp_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<CorpusStream> stream, CorpusStream::Open(inputs));
  RETURN_IF_ERROR(PassOne(*stream, options, result.banding, bands, offsets, sets, result));
  stream.reset();
  result.shingle_file_bytes = sets.written();
  const int64_t n = result.documents;
  if (n > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(n, " documents: the lab's document ids are int"));
  }

  using Pairs = std::vector<std::pair<int, int>>;
  ASSIGN_OR_RETURN(const Pairs candidates, Candidates(options, bands, result.banding.bands));
  result.candidate_pairs = static_cast<int64_t>(candidates.size());
  result.bytes_per_document =
      n == 0 ? 0 : static_cast<double>(bands.peak_bytes() + offsets.bytes()) / static_cast<double>(n);
  result.spilled_runs = bands.spilled_runs();
  result.spilled_bytes = bands.spilled_bytes();

  // Verification: exact Jaccard of the two shingle sets, as Deduplicate decides (notes/03-dedup.md §5.1).
  const double t = options.dedup.threshold;
  std::vector<uint64_t> a, b;
  auto load = [&](int d, std::vector<uint64_t>& set) {
    return sets.Read(offsets[d], offsets[d + 1] - offsets[d], set);
  };
  int loaded = -1;
  constexpr size_t kAhead = 4096;  // candidates whose sets are asked for at once: reads queue on the disk
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (c % kAhead == 0) {  // when the file is larger than the page cache, each read would wait alone
      for (size_t e = c; e < std::min(candidates.size(), c + kAhead); ++e) {
        for (const int d : {candidates[e].first, candidates[e].second})
          sets.Prefetch(offsets[d], offsets[d + 1] - offsets[d]);
      }
    }
    const auto [i, j] = candidates[c];
    if (i != loaded) {
      RETURN_IF_ERROR(load(i, a));
      loaded = i;
    }
    RETURN_IF_ERROR(load(j, b));
    const double jac = Jaccard(a, b);
    if (jac >= t) result.verified.push_back({i, j, jac});
    if ((c + 1) % 100000 == 0) Report(options, "verify", static_cast<int64_t>(c + 1), result.candidate_pairs);
  }
  Report(options, "verify", result.candidate_pairs, result.candidate_pairs);

  // Clusters over the documents of verified pairs only (m of them), in order of their smallest member.
  std::vector<int> docs;
  for (const SimilarPair& p : result.verified) docs.push_back(p.i), docs.push_back(p.j);
  std::sort(docs.begin(), docs.end());
  docs.erase(std::unique(docs.begin(), docs.end()), docs.end());
  auto index = [&](int d) {
    return static_cast<int>(std::lower_bound(docs.begin(), docs.end(), d) - docs.begin());
  };
  UnionFind uf(static_cast<int>(docs.size()));
  for (const SimilarPair& p : result.verified) uf.Union(index(p.i), index(p.j));
  std::vector<int> cluster_of(docs.size(), -1);
  for (size_t x = 0; x < docs.size(); ++x) {
    int& c = cluster_of[uf.Find(static_cast<int>(x))];
    if (c < 0)
      c = static_cast<int>(result.clusters.size()), result.clusters.push_back(Cluster{c, {}, 0, 0.0});
    result.clusters[c].members.push_back(docs[x]);
  }
  std::vector<std::vector<uint64_t>> member_sets;
  for (Cluster& c : result.clusters) {
    const int size = static_cast<int>(c.members.size());
    c.survivor = options.dedup.survivor == SurvivorRule::kLowestId
                     ? c.members.front()
                     : c.members[SurvivorIndex(options.dedup.survivor_seed, c.members.front(), size)];
    member_sets.resize(size);
    for (int x = 0; x < size; ++x) RETURN_IF_ERROR(load(c.members[x], member_sets[x]));
    for (int x = 0; x < size; ++x) {
      for (int y = x + 1; y < size; ++y)
        c.max_jaccard = std::max(c.max_jaccard, Jaccard(member_sets[x], member_sets[y]));
    }
    result.removed += size - 1;
  }
  return result;
}

absl::StatusOr<std::vector<std::pair<int, std::string>>> WriteSurvivors(
    const std::vector<std::string>& inputs, const StreamResult& result, const std::string& out,
    const StreamOptions& options) {
  std::vector<int> members, removed;
  for (const Cluster& c : result.clusters) {
    for (int m : c.members) {
      members.push_back(m);
      if (m != c.survivor) removed.push_back(m);
    }
  }
  std::sort(members.begin(), members.end());
  std::sort(removed.begin(), removed.end());
  ASSIGN_OR_RETURN(std::unique_ptr<CorpusStream> stream, CorpusStream::Open(inputs));
  ASSIGN_OR_RETURN(std::unique_ptr<CorpusWriter> writer, CorpusWriter::Open(*stream, out));
  std::vector<std::pair<int, std::string>> names;
  Document doc;
  auto next_member = members.begin();
  auto next_removed = removed.begin();
  int64_t d = 0;
  for (;; ++d) {
    // Only the clusters' members need their names: the other lines were checked in pass 1.
    const bool member = next_member != members.end() && *next_member == d;
    ASSIGN_OR_RETURN(const bool more, stream->Next(doc, /*parse=*/member));
    if (!more) break;
    if (member) names.emplace_back(d, doc.name), ++next_member;
    if (next_removed != removed.end() && *next_removed == d) {
      ++next_removed;
    } else {
      RETURN_IF_ERROR(writer->Write(*stream));
    }
    if ((d + 1) % kBatch == 0) Report(options, "pass 2", d + 1, result.documents, stream.get());
  }
  if (d != result.documents) {
    return absl::FailedPreconditionError(absl::StrCat("the input has ", d, " documents now and had ",
                                                      result.documents,
                                                      " in pass 1: it changed between passes"));
  }
  Report(options, "pass 2", d, result.documents, stream.get());
  RETURN_IF_ERROR(writer->Commit());
  return names;
}

namespace {

// ClusterReportJson over clusters [from, to) only: a corpus of their members (document m of it is the m-th
// name), parsed keeping the order of its keys.
nlohmann::ordered_json ReportPiece(const StreamResult& result,
                                   const std::vector<std::pair<int, std::string>>& names, size_t from,
                                   size_t to) {
  Corpus members;
  members.format = CorpusFormat::kJsonLines;
  std::unordered_map<int, int> local;
  DedupResult r;
  r.banding = result.banding;
  for (size_t c = from; c < to; ++c) {
    Cluster cluster = result.clusters[c];
    for (int& m : cluster.members) {
      const auto [it, fresh] = local.emplace(m, static_cast<int>(members.documents.size()));
      if (fresh) {  // names holds every member, sorted by index (WriteSurvivors)
        const auto name = std::lower_bound(names.begin(), names.end(), std::make_pair(m, std::string()));
        members.documents.push_back({name != names.end() && name->first == m ? name->second : "", ""});
      }
      m = it->second;
    }
    cluster.survivor = local.at(cluster.survivor);
    r.clusters.push_back(std::move(cluster));
  }
  return nlohmann::ordered_json::parse(ClusterReportJson(members, r), nullptr, /*allow_exceptions=*/false);
}

// Writes `text` (one dump of a JSON value) with `indent` spaces before each of its lines but the first.
void Indented(const std::string& text, const std::string& indent, std::ostream& out) {
  for (size_t at = 0;;) {
    const size_t nl = text.find('\n', at);
    out.write(text.data() + at,
              static_cast<std::streamsize>((nl == std::string::npos ? text.size() : nl + 1) - at));
    if (nl == std::string::npos) return;
    out << indent;
    at = nl + 1;
  }
}

}  // namespace

absl::Status WriteStreamReport(const StreamResult& result,
                               const std::vector<std::pair<int, std::string>>& names, std::ostream& out) {
  constexpr size_t kPiece = 4096;
  const size_t n = result.clusters.size();
  // The first piece fixes the keys and their order; the counts of the whole corpus replace the piece's.
  const nlohmann::ordered_json first = ReportPiece(result, names, 0, std::min(n, kPiece));
  if (!first.is_object() || !first.contains("clusters") || !first["clusters"].is_array()) {
    return absl::InternalError("ClusterReportJson did not write a JSON object with a \"clusters\" array");
  }
  out << "{";
  bool comma = false;
  for (const auto& [key, value] : first.items()) {
    out << (comma ? ",\n  " : "\n  ") << nlohmann::json(key).dump() << ": ";
    comma = true;
    if (key == "documents") {
      out << result.documents;
    } else if (key == "kept") {
      out << result.documents - result.removed;
    } else if (key == "removed") {
      out << result.removed;
    } else if (key != "clusters") {
      Indented(value.dump(2), "  ", out);
    } else if (n == 0) {
      out << "[]";
    } else {
      out << "[";
      for (size_t from = 0; from < n; from += kPiece) {
        const nlohmann::ordered_json piece =
            from == 0 ? first : ReportPiece(result, names, from, std::min(n, from + kPiece));
        for (const auto& cluster : piece["clusters"]) {
          out << (from > 0 || &cluster != &piece["clusters"].front() ? ",\n    " : "\n    ");
          Indented(cluster.dump(2), "    ", out);
        }
      }
      out << "\n  ]";
    }
  }
  out << "\n}";
  return out ? absl::OkStatus() : absl::InternalError("cannot write the cluster report");
}

absl::StatusOr<TruthScores> ScoreAgainstTruth(const StreamResult& result,
                                              const std::vector<std::pair<int, std::string>>& names,
                                              const std::string& truth_path) {
  std::ifstream in(truth_path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open the truth file ", truth_path));
  const nlohmann::json truth = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (truth.is_discarded() || !truth.contains("pairs") || !truth["pairs"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(truth_path, ": expected {\"pairs\": [[i, j, jaccard], ...]}"));
  }
  // Every name either side mentions gets a number; pairs are compared as pairs of those numbers.
  std::unordered_map<std::string, int> number;
  auto id = [&](const std::string& name) {
    return number.emplace(name, static_cast<int>(number.size())).first->second;
  };
  auto ordered = [](int x, int y) { return std::make_pair(std::min(x, y), std::max(x, y)); };
  std::unordered_map<int, int> named;  // document index -> number
  for (const auto& [d, name] : names) named[d] = id(name);
  std::vector<std::pair<int, int>> predicted, predicted_co, expected, expected_co;
  for (const SimilarPair& p : result.verified) predicted.push_back(ordered(named.at(p.i), named.at(p.j)));
  for (const Cluster& c : result.clusters) {
    for (size_t x = 0; x < c.members.size(); ++x) {
      for (size_t y = x + 1; y < c.members.size(); ++y) {
        predicted_co.push_back(ordered(named.at(c.members[x]), named.at(c.members[y])));
      }
    }
  }
  for (const auto& p : truth["pairs"]) {
    auto name = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    expected.push_back(ordered(id(name(p.at(0))), id(name(p.at(1)))));
  }
  UnionFind uf(static_cast<int>(number.size()));
  for (const auto& [x, y] : expected) uf.Union(x, y);
  std::unordered_map<int, std::vector<int>> components;
  for (const auto& [x, y] : expected)
    components[uf.Find(x)].push_back(x), components[uf.Find(y)].push_back(y);
  for (auto& [root, ms] : components) {
    std::sort(ms.begin(), ms.end());
    ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
    for (size_t x = 0; x < ms.size(); ++x) {
      for (size_t y = x + 1; y < ms.size(); ++y) expected_co.emplace_back(ms[x], ms[y]);
    }
  }
  for (auto* v : {&predicted, &predicted_co, &expected, &expected_co}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return TruthScores{ScorePairs(predicted, expected), ScorePairs(predicted_co, expected_co)};
}

}  // namespace distlab::dedup
