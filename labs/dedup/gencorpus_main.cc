// Lab 3 (dedup), given; not graded: `gencorpus`, a planted-duplicate corpus of N documents for scale runs of
// `dedup`, as JSON lines (plain, gzip or zstd; one file or S shards), with the truth when N is small enough.
//
//   bazel run -c opt //labs/dedup:gencorpus -- --documents 1000000 --out /data/c.jsonl.zst
//   bazel run //labs/dedup:gencorpus -- --documents 100000 --shards 4 --format gz --out /data/c/
//
// Each line is {"id": p, "text": "..."}, p = 0..N-1. With --shards S, OUT is a folder of S shards
// part-00000-of-0000S.jsonl[.gz|.zst] holding consecutive ranges of p. Every file is written under a
// temporary name and renamed when complete. The truth (OUT + ".truth.json", or --truth) is written when N <=
// --truth-limit: {"documents": N, "ngram": n, "threshold": t, "pairs": [[i, j, jaccard], ...]}, every pair i
// < j of exact Jaccard >= t on the canonical words (scale_corpus.h, TruePairs).
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/scale_corpus.h"
#include "nlohmann/json.hpp"
#include "tools/base/cli.h"

namespace {

namespace fs = std::filesystem;
namespace dd = distlab::dedup;

constexpr int64_t kBatch = 4096;  // documents one thread renders at a time

// Writes documents [begin, end) to `path`: batches rendered by `threads` threads, written in order.
absl::Status WriteShard(const dd::scale::ScaleCorpus& corpus, int64_t begin, int64_t end,
                        const std::string& path, dd::Codec codec, int threads, int64_t& bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid());
  absl::StatusOr<std::unique_ptr<dd::ByteSink>> sink = dd::OpenByteSink(tmp, codec);
  if (!sink.ok()) return sink.status();
  auto render = [&corpus](int64_t from, int64_t to) {
    std::string text;
    for (int64_t p = from; p < to; ++p) corpus.AppendJsonLine(p, text);
    return text;
  };
  std::deque<std::future<std::string>> inflight;
  absl::Status status;
  for (int64_t next = begin; next < end || !inflight.empty();) {
    while (next < end && static_cast<int>(inflight.size()) < threads + 1) {
      const int64_t to = std::min(end, next + kBatch);
      inflight.push_back(std::async(std::launch::async, render, next, to));
      next = to;
    }
    const std::string text = inflight.front().get();
    inflight.pop_front();
    bytes += static_cast<int64_t>(text.size());
    if (status.ok()) status = (*sink)->Write(text);
  }
  if (status.ok()) status = (*sink)->Close();
  std::error_code ec;
  if (status.ok()) fs::rename(tmp, path, ec);
  if (!status.ok() || ec) {
    fs::remove(tmp, ec);
    return status.ok() ? absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path)) : status;
  }
  return absl::OkStatus();
}

absl::Status WriteTruth(const dd::scale::ScaleCorpus& corpus, double threshold, int threads,
                        const std::string& path) {
  const std::vector<dd::scale::TruePair> pairs = dd::scale::TruePairs(corpus, threshold, threads);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : pairs) list.push_back({p.i, p.j, p.jaccard});
  const nlohmann::json truth = {{"documents", corpus.size()},
                                {"ngram", corpus.options().ngram},
                                {"threshold", threshold},
                                {"exact_ngrams", corpus.ngrams_exact()},
                                {"pairs", list}};
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid());
  std::ofstream(tmp) << truth.dump() << "\n";
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  std::cerr << "gencorpus: " << pairs.size() << " true pairs at J >= " << threshold << " in " << path << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Write a corpus of made-up documents with planted near-duplicates (JSON lines)."};
  dd::scale::ScaleOptions o;
  std::string out, format = "", truth;
  int shards = 1, threads = 0;
  int64_t truth_limit = 100000;
  double threshold = 0.8;
  bool no_noise = false;
  app.add_option("--out", out, "a .jsonl, .jsonl.gz or .jsonl.zst file; with --shards, a folder")->required();
  app.add_option("--documents", o.documents, "N, documents in all")->capture_default_str();
  app.add_option("--shards", shards, "files to split the corpus into")->capture_default_str();
  app.add_option("--format", format, "with --shards: jsonl, gz or zst")
      ->check(distlab::cli::IsMember({"jsonl", "gz", "zst"}));
  app.add_option("--words", o.words, "words per original")->capture_default_str();
  app.add_option("--vocabulary", o.vocabulary, "distinct made-up words")->capture_default_str();
  app.add_option("--duplicated", o.duplicated, "fraction of originals that get near-duplicates")
      ->capture_default_str();
  app.add_option("--max-copies", o.max_copies, "near-duplicates per such original, 1..this")
      ->capture_default_str();
  app.add_option("--min-target", o.min_target, "lowest target Jaccard of a copy")->capture_default_str();
  app.add_option("--max-target", o.max_target, "highest target Jaccard of a copy")->capture_default_str();
  app.add_option("--ngram", o.ngram, "words per shingle the targets refer to")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of everything")->capture_default_str();
  app.add_flag("--no-noise", no_noise, "render the canonical words only (no capitals, accents, punctuation)");
  app.add_option("--truth", truth, "the truth file (default: OUT + .truth.json)");
  app.add_option("--truth-limit", truth_limit, "write the truth only up to this many documents")
      ->capture_default_str();
  app.add_option("--threshold", threshold, "Jaccard of the truth's pairs")->capture_default_str();
  app.add_option("--threads", threads, "rendering threads (0 = all cores)");
  DISTLAB_CLI_PARSE(app, argc, argv);
  o.noise = !no_noise;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  absl::StatusOr<dd::scale::ScaleCorpus> corpus = dd::scale::ScaleCorpus::Create(o);
  if (!corpus.ok()) {
    std::cerr << "gencorpus: " << corpus.status() << "\n";
    return 1;
  }
  if (shards < 1 || shards > o.documents) {
    std::cerr << "gencorpus: --shards " << shards << ": need 1..documents\n";
    return 1;
  }
  if (shards == 1 && !format.empty()) {
    std::cerr << "gencorpus: --format is for --shards; one file's compression is its extension\n";
    return 1;
  }
  std::error_code ec;
  if (shards > 1) fs::create_directories(out, ec);
  const auto start = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  for (int s = 0; s < shards; ++s) {
    const int64_t begin = o.documents * s / shards, end = o.documents * (s + 1) / shards;
    std::string path = out;
    if (shards > 1) {
      path = (fs::path(out) / absl::StrFormat("part-%05d-of-%05d.jsonl%s", s, shards,
                                              format == "gz"    ? ".gz"
                                              : format == "zst" ? ".zst"
                                                                : ""))
                 .string();
    }
    if (absl::Status st = WriteShard(*corpus, begin, end, path, dd::CodecOf(path), threads, bytes);
        !st.ok()) {
      std::cerr << "gencorpus: " << st << "\n";
      return 1;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << absl::StrFormat(
      "gencorpus: %d documents, %.1f MB of JSON lines in %d file(s), %.1f s (%.0f MB/s)\n", o.documents,
      bytes / 1e6, shards, seconds, bytes / 1e6 / seconds);
  if (o.documents <= truth_limit) {
    if (truth.empty()) truth = (shards > 1 ? (fs::path(out) / "truth.json").string() : out + ".truth.json");
    if (absl::Status st = WriteTruth(*corpus, threshold, threads, truth); !st.ok()) {
      std::cerr << "gencorpus: " << st << "\n";
      return 1;
    }
  }
  return 0;
}
