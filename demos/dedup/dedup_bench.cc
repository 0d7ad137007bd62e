// Lab 3 benchmark: MinHash signature throughput against raw xxHash of the same shingles, end-to-end
// documents per second, memory per document, and the streaming tool's MB/s per core beside both.
//
//   bazel run --config=solution //demos/dedup:dedup_bench -- --benchmark_format=json   (or ./labctl bench)
//
// BM_SignatureVsXXHash times both passes over the same shingles in the same iteration, so their ratio
// (counter "ratio_to_xxhash" = signature MB/s / xxHash MB/s, goal >= 0.25 at k = 128) does not depend on how
// busy the machine was; a third pass with the plain loop gives plain_ratio_to_xxhash and
// speedup_over_plain. BM_TextSignatureVsXXHash cuts the shingles inside the signature pass
// (text_ratio_to_xxhash). Rates count the bytes of the text, not of the shingles, and divide by the CPU
// time of the one thread that does the work (CLOCK_THREAD_CPUTIME_ID): MB/s per core, even on a busy
// machine. BM_StreamVsSignature runs the streaming tool's two passes (stream_dedup.h) over a gencorpus-style
// corpus in a .jsonl file and divides the text's bytes by the CPU time of the whole process (every thread),
// beside the signature kernel and raw XXH3 on the shingles of the same texts: stream_ratio_to_signature (goal
// >= 0.3) says how much of the end-to-end cost is the signature itself; budget_slowdown is the CPU time of
// pass 1 and candidates under a memory budget that spills three runs per band, over the same without a
// budget.
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "benchmark/benchmark.h"
#include "labs/dedup/cluster.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/minhash.h"
#include "labs/dedup/scale_corpus.h"
#include "labs/dedup/shingle.h"
#include "labs/dedup/stream_dedup.h"
#include "labs/dedup/synthetic.h"
#include "reference/comm/comm.h"
#include "tools/bench/ratio.h"
#include "xxhash.h"

namespace dd = distlab::dedup;

namespace {

double CpuSeconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
double ThreadCpuSeconds() { return CpuSeconds(CLOCK_THREAD_CPUTIME_ID); }
double ProcessCpuSeconds() { return CpuSeconds(CLOCK_PROCESS_CPUTIME_ID); }

// 256 documents of 300 made-up words each (about 0.6 MB of text at ~8 bytes per word).
const std::vector<std::string>& Texts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t;
    for (int d = 0; d < 256; ++d) t.push_back(dd::synthetic::RandomText(300, d));
    return t;
  }();
  return texts;
}

int64_t TotalBytes() {
  int64_t bytes = 0;
  for (const auto& t : Texts()) bytes += static_cast<int64_t>(t.size());
  return bytes;
}

// The shingle strings of every text, made once.
const std::vector<std::vector<std::string>>& Shingles() {
  static const std::vector<std::vector<std::string>> shingles = [] {
    std::vector<std::vector<std::string>> s;
    for (const auto& t : Texts()) s.push_back(*dd::WordShingles(t, 5));
    return s;
  }();
  return shingles;
}

// The signature as the lab's header states it, written as the plain loop (shingles outside, functions
// inside): what the reference solution did before it was vectorized, timed beside it.
dd::Signature PlainSign(const dd::MinHasher& h, const std::vector<uint64_t>& shingles) {
  const int k = h.k();
  std::vector<uint64_t> a(k), b(k);
  for (int i = 0; i < k; ++i) a[i] = h.a(i), b[i] = h.b(i);
  dd::Signature sig(k, dd::kEmptyMin);
  for (const uint64_t x : shingles) {
    for (int i = 0; i < k; ++i) sig[i] = std::min(sig[i], a[i] * x + b[i]);
  }
  return sig;
}

// On the same shingles: signature = XXH3 of each shingle (HashShingle) + the k multiply-add-min per shingle;
// raw = XXH3 of each shingle alone. Their ratio is what the k functions cost on top of hashing once. A third
// pass signs with PlainSign, so the speed-up of the solution's Sign is measured in the same iterations.
void BM_SignatureVsXXHash(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const dd::MinHasher hasher = *dd::MinHasher::Create(k, 1);
  double sig_seconds = 0, xxh_seconds = 0, plain_seconds = 0;
  uint64_t sink = 0;
  bool same = true;
  std::vector<uint64_t> hashes;
  for (auto _ : state) {
    const double t0 = ThreadCpuSeconds();
    for (const auto& doc : Shingles()) {
      hashes.clear();
      for (const auto& s : doc) hashes.push_back(dd::HashShingle(s));
      sink += hasher.Sign(hashes)[0];
    }
    const double t1 = ThreadCpuSeconds();
    for (const auto& doc : Shingles()) {
      for (const auto& s : doc) sink += XXH3_64bits(s.data(), s.size());
    }
    const double t2 = ThreadCpuSeconds();
    for (const auto& doc : Shingles()) {
      hashes.clear();
      for (const auto& s : doc) hashes.push_back(dd::HashShingle(s));
      sink += PlainSign(hasher, hashes)[0];
    }
    const double t3 = ThreadCpuSeconds();
    sig_seconds += t1 - t0;
    xxh_seconds += t2 - t1;
    plain_seconds += t3 - t2;
    state.SetIterationTime(t1 - t0);
  }
  for (const auto& doc : Shingles()) {  // the fast signature is the same signature
    hashes.clear();
    for (const auto& s : doc) hashes.push_back(dd::HashShingle(s));
    same = same && hasher.Sign(hashes) == PlainSign(hasher, hashes);
  }
  if (!same) state.SkipWithError("Sign differs from the plain loop");
  benchmark::DoNotOptimize(sink);
  const double mb = static_cast<double>(TotalBytes()) * state.iterations() / 1e6;
  state.counters["signature_MBps"] = mb / sig_seconds;
  state.counters["xxhash_MBps"] = mb / xxh_seconds;
  state.counters["ratio_to_xxhash"] = xxh_seconds / sig_seconds;
  state.counters["plain_ratio_to_xxhash"] = xxh_seconds / plain_seconds;
  state.counters["speedup_over_plain"] = plain_seconds / sig_seconds;
  state.SetBytesProcessed(TotalBytes() * state.iterations());
}
BENCHMARK(BM_SignatureVsXXHash)->Arg(128)->Arg(64)->UseManualTime()->Unit(benchmark::kMillisecond);

// From the text: the shingles are cut (WordShingles: a std::string per shingle) inside the timed signature
// pass, while the raw pass still hashes ready shingles -- the pipeline's view, where cutting costs as much
// as the hashing it feeds.
void BM_TextSignatureVsXXHash(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const dd::MinHasher hasher = *dd::MinHasher::Create(k, 1);
  double sig_seconds = 0, xxh_seconds = 0;
  uint64_t sink = 0;
  for (auto _ : state) {
    const double t0 = ThreadCpuSeconds();
    for (const auto& t : Texts()) {
      std::vector<std::string> sh = *dd::WordShingles(t, 5);
      std::vector<uint64_t> hashes;
      hashes.reserve(sh.size());
      for (const auto& s : sh) hashes.push_back(dd::HashShingle(s));
      sink += hasher.Sign(hashes)[0];
    }
    const double t1 = ThreadCpuSeconds();
    for (const auto& doc : Shingles()) {
      for (const auto& s : doc) sink += XXH3_64bits(s.data(), s.size());
    }
    const double t2 = ThreadCpuSeconds();
    sig_seconds += t1 - t0;
    xxh_seconds += t2 - t1;
    state.SetIterationTime(t1 - t0);
  }
  benchmark::DoNotOptimize(sink);
  state.counters["text_ratio_to_xxhash"] = xxh_seconds / sig_seconds;
}
BENCHMARK(BM_TextSignatureVsXXHash)->Arg(128)->UseManualTime()->Unit(benchmark::kMillisecond);

// Sign alone, from precomputed shingle hashes: the k-dependent part.
void BM_SignOnly(benchmark::State& state) {
  const dd::MinHasher hasher = *dd::MinHasher::Create(128, 1);
  std::vector<std::vector<uint64_t>> sets;
  int64_t shingles = 0;
  for (const auto& t : Texts()) sets.push_back(*dd::ShingleSet(t, 5)), shingles += sets.back().size();
  for (auto _ : state) {
    for (const auto& s : sets) benchmark::DoNotOptimize(hasher.Sign(s));
  }
  state.SetItemsProcessed(shingles * state.iterations());  // shingles per second
  state.SetBytesProcessed(TotalBytes() * state.iterations());
}
BENCHMARK(BM_SignOnly)->Unit(benchmark::kMillisecond);

// The whole pipeline on a planted corpus: documents per second (all cores for signatures), and the memory
// the pipeline holds per document (shingle set + signature).
void BM_EndToEnd(benchmark::State& state) {
  dd::synthetic::PlantedOptions po;
  po.originals = static_cast<int>(state.range(0));
  const auto corpus = dd::synthetic::MakePlantedCorpus(po);
  dd::DedupOptions opt;
  for (auto _ : state) benchmark::DoNotOptimize(dd::Deduplicate(corpus.documents, opt));
  const int64_t n = static_cast<int64_t>(corpus.documents.size());
  state.SetItemsProcessed(n * state.iterations());
  double bytes = 0;
  for (const auto& d : corpus.documents) bytes += 8.0 * dd::ShingleSet(d, opt.ngram)->size() + 8.0 * opt.k;
  state.counters["docs_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes_per_doc"] = bytes / n;
  state.counters["text_bytes_per_doc"] = [&] {
    double t = 0;
    for (const auto& d : corpus.documents) t += d.size();
    return t / n;
  }();
}
BENCHMARK(BM_EndToEnd)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();

// The streaming tool end to end, one signing thread: read and parse the JSON lines, ShingleSet, Sign, band
// keys, the shingle-set file, candidates, verification, clusters, and pass 2 writing the survivors. Beside
// it, in the same iteration, the signature kernel (HashShingle + Sign from ready shingles) and raw XXH3 on
// the shingles of the same texts, and two parts of the tool alone: reading the corpus (CorpusStream) and
// ShingleSet. Every rate is text bytes over CPU seconds. Then FindNearDuplicates alone, without a budget and
// with the band tables held to a third of their size (StreamOptions::memory_bytes), so that they spill three
// sorted runs per band and are merged: the CPU cost of the budget. 40 000 documents (65 MB): on 4000 a run's
// one-time costs (first touches of its buffers, the first batches' allocations) were a third of its CPU time
// and the ratio measured them rather than the cost per byte (notes/03-dedup.md, "Where the time goes").
void BM_StreamVsSignature(benchmark::State& state) {
  namespace fs = std::filesystem;
  dd::scale::ScaleOptions so;
  so.documents = state.range(0);
  const dd::scale::ScaleCorpus corpus = *dd::scale::ScaleCorpus::Create(so);
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : "/tmp") / ("dedup_bench." + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string input = (dir / "corpus.jsonl").string(), out = (dir / "kept.jsonl").string();
  std::vector<std::vector<std::string>> shingles;
  std::vector<std::string> texts;
  {
    std::string lines;
    for (int64_t p = 0; p < corpus.size(); ++p)
      corpus.AppendJsonLine(p, lines), texts.push_back(corpus.Text(p));
    auto sink = *dd::OpenByteSink(input, dd::Codec::kPlain);
    if (!sink->Write(lines).ok() || !sink->Close().ok()) state.SkipWithError("cannot write the corpus");
    for (const auto& t : texts) shingles.push_back(*dd::WordShingles(*dd::Normalize(t), 5));
  }
  int64_t text_bytes = 0;
  for (const auto& t : texts) text_bytes += static_cast<int64_t>(t.size());
  dd::StreamOptions options;
  options.dedup.threads = 1;
  options.tmp_dir = dir.string();
  dd::StreamOptions budgeted = options;
  // b = 16: 144 bytes a document and one 4 KiB chunk, so about a third of the documents per run.
  budgeted.memory_bytes = 4096 + ((corpus.size() + 2) / 3 + 1) * (8 * 16 + 16);
  const dd::MinHasher hasher = *dd::MinHasher::Create(options.dedup.k, options.dedup.seed);
  double stream_s = 0, read_s = 0, set_s = 0, sig_s = 0, xxh_s = 0, find_s = 0, spilled_s = 0;
  uint64_t sink = 0;
  std::vector<uint64_t> hashes;
  // Pass 1 and candidates alone, with and without the budget, timed alike and each first in turn: the first
  // call of an iteration measured about 10 % more CPU time than a second with the same options.
  absl::StatusOr<dd::StreamResult> plain, spilled;
  auto find = [&](const dd::StreamOptions& o, absl::StatusOr<dd::StreamResult>& r, double& seconds) {
    const double s0 = ProcessCpuSeconds();
    r = dd::FindNearDuplicates({input}, o);
    seconds += ProcessCpuSeconds() - s0;
  };
  int64_t iteration = 0;
  for (auto _ : state) {
    const double t0 = ProcessCpuSeconds();
    auto found = dd::FindNearDuplicates({input}, options);
    auto names = found.ok() ? dd::WriteSurvivors({input}, *found, out, options) : found.status();
    const double t1 = ProcessCpuSeconds();
    if (!names.ok()) {
      state.SkipWithError(std::string(names.status().message()).c_str());
      break;
    }
    if (iteration++ % 2 == 0) {
      find(options, plain, find_s), find(budgeted, spilled, spilled_s);
    } else {
      find(budgeted, spilled, spilled_s), find(options, plain, find_s);
    }
    if (!plain.ok() || !spilled.ok() || spilled->spilled_runs != 3 ||
        spilled->verified.size() != plain->verified.size()) {
      state.SkipWithError("the run under a memory budget did not spill 3 runs or found other pairs");
      break;
    }
    const double r0 = ThreadCpuSeconds();
    auto stream = *dd::CorpusStream::Open({input});
    dd::Document doc;
    while (*stream->Next(doc)) sink += doc.text.size();
    const double r1 = ThreadCpuSeconds();
    for (const auto& t : texts) sink += dd::ShingleSet(t, 5)->size();
    const double r2 = ThreadCpuSeconds();
    for (const auto& doc_shingles : shingles) {
      hashes.clear();
      for (const auto& s : doc_shingles) hashes.push_back(dd::HashShingle(s));
      sink += hasher.Sign(hashes)[0];
    }
    const double r3 = ThreadCpuSeconds();
    for (const auto& doc_shingles : shingles) {
      for (const auto& s : doc_shingles) sink += XXH3_64bits(s.data(), s.size());
    }
    const double r4 = ThreadCpuSeconds();
    stream_s += t1 - t0, read_s += r1 - r0, set_s += r2 - r1, sig_s += r3 - r2, xxh_s += r4 - r3;
    state.SetIterationTime(t1 - t0);
  }
  benchmark::DoNotOptimize(sink);
  std::error_code ec;
  fs::remove_all(dir, ec);
  const double mb = static_cast<double>(text_bytes) * state.iterations() / 1e6;
  state.counters["stream_MBps_per_core"] = mb / stream_s;
  state.counters["read_MBps"] = mb / read_s;
  state.counters["shingleset_MBps"] = mb / set_s;
  state.counters["signature_MBps"] = mb / sig_s;
  state.counters["xxhash_MBps"] = mb / xxh_s;
  state.counters["stream_ratio_to_signature"] = sig_s / stream_s;
  state.counters["stream_ratio_to_xxhash"] = xxh_s / stream_s;
  state.counters["budget_slowdown"] = spilled_s / find_s;
}
BENCHMARK(BM_StreamVsSignature)->Arg(40000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// The streaming tool on 1, 2 and 4 ranks (threads of this process, one signing thread each) over the same
// corpus in 4 shards, in one iteration: wall seconds of each (both passes), and the speed-ups of 2 and 4
// ranks over 1. Ranks beyond the machine's cores share them, so on 2 cores 4 ranks cannot beat 2; what 4
// ranks add is the exchanges' cost. records_moved_4 is the band records a rank of 4 sent to other ranks, per
// document of the corpus: 16 b (n - 1) / n^2 bytes at b = 16 and n = 4 is 3 records (48 bytes) per document.
void BM_StreamRanks(benchmark::State& state) {
  namespace fs = std::filesystem;
  namespace comm = distlab::comm;
  dd::scale::ScaleOptions so;
  so.documents = state.range(0);
  const dd::scale::ScaleCorpus corpus = *dd::scale::ScaleCorpus::Create(so);
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : "/tmp") / ("dedup_ranks_bench." + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<std::string> inputs;
  constexpr int kShards = 4;
  for (int s = 0; s < kShards; ++s) {
    inputs.push_back((dir / ("part" + std::to_string(s) + ".jsonl")).string());
    std::string lines;
    for (int64_t p = corpus.size() * s / kShards; p < corpus.size() * (s + 1) / kShards; ++p)
      corpus.AppendJsonLine(p, lines);
    auto sink = *dd::OpenByteSink(inputs.back(), dd::Codec::kPlain);
    if (!sink->Write(lines).ok() || !sink->Close().ok()) state.SkipWithError("cannot write the corpus");
  }
  dd::StreamOptions options;
  options.dedup.threads = 1;
  options.tmp_dir = dir.string();
  auto wall = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  double seconds[5] = {0, 0, 0, 0, 0};
  double moved_4 = 0;
  for (auto _ : state) {
    double iteration = 0;
    for (const int n : {1, 2, 4}) {
      const std::string out = (dir / ("kept" + std::to_string(n))).string();
      std::error_code ec;
      fs::remove_all(out, ec);
      const double t0 = wall();
      std::vector<int64_t> others(n);
      const absl::Status s =
          comm::FirstError(comm::RunRanks(n, [&](int rank, comm::Comm& c, comm::Stream& st) -> absl::Status {
            absl::StatusOr<dd::RanksResult> found = dd::FindNearDuplicatesAcrossRanks(c, st, inputs, options);
            if (!found.ok()) return found.status();
            others[rank] = found->share.records_to_others;
            return dd::WriteSurvivorsAcrossRanks(c, st, inputs, *found, out, options).status();
          }));
      seconds[n] += wall() - t0;
      iteration += wall() - t0;
      if (!s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        break;
      }
      if (n == 4) {
        for (int r = 0; r < n; ++r) moved_4 += static_cast<double>(others[r]);
      }
    }
    state.SetIterationTime(iteration);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  const double it = static_cast<double>(state.iterations());
  state.counters["seconds_1"] = seconds[1] / it;
  state.counters["seconds_2"] = seconds[2] / it;
  state.counters["seconds_4"] = seconds[4] / it;
  state.counters["speedup_2"] = seconds[1] / seconds[2];
  state.counters["speedup_4"] = seconds[1] / seconds[4];
  state.counters["records_moved_per_doc_4"] = moved_4 / it / static_cast<double>(corpus.size()) / 4;
}
BENCHMARK(BM_StreamRanks)->Arg(20000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2);

DISTLAB_BENCH_RATIO(
    BM_SignatureVsXXHash, "ratio_to_xxhash",
    {"signature MB/s (XXH3 + k multiply-add-min per shingle) over raw XXH3 MB/s, same shingles",
     "XXH3_64bits over the shingles alone", "xxhash_MBps", 0.25});
DISTLAB_BENCH_RATIO(
    BM_SignatureVsXXHash, "plain_ratio_to_xxhash",
    {"the same with the plain loop (functions inside shingles), the solution before vectorizing",
     "XXH3_64bits over the shingles alone", "xxhash_MBps"});
DISTLAB_BENCH_RATIO(BM_SignatureVsXXHash, "speedup_over_plain",
                    {"plain-loop time over Sign's time, same shingles, same iterations", "the plain loop"});
DISTLAB_BENCH_RATIO(
    BM_TextSignatureVsXXHash, "text_ratio_to_xxhash",
    {"signature MB/s from the text (cut shingles, XXH3, MinHash) over raw XXH3 MB/s of the shingles",
     "XXH3_64bits over ready shingles"});

DISTLAB_BENCH_RATIO(BM_StreamVsSignature, "stream_ratio_to_signature",
                    {"the streaming tool's MB/s per core (process CPU time, both passes) over the signature "
                     "kernel's (HashShingle + Sign from ready shingles), same texts",
                     "the signature kernel", "signature_MBps", 0.3});
DISTLAB_BENCH_RATIO(BM_StreamVsSignature, "stream_ratio_to_xxhash",
                    {"the streaming tool's MB/s per core over raw XXH3 of the same texts' shingles",
                     "XXH3_64bits over ready shingles", "xxhash_MBps"});
DISTLAB_BENCH_RATIO(
    BM_StreamRanks, "speedup_2",
    {"wall time of the streaming tool on 1 rank over its time on 2 ranks (threads, one signing "
     "thread each), same corpus in 4 shards",
     "1 rank", "seconds_1"});
DISTLAB_BENCH_RATIO(BM_StreamRanks, "speedup_4",
                    {"the same on 4 ranks (on a machine with fewer than 4 cores the ranks share them)",
                     "1 rank", "seconds_1"});

}  // namespace

BENCHMARK_MAIN();
