// Lab 3 (dedup), given; not graded: the `dedup` command, near-duplicate removal for a folder of text files or
// JSON-lines shards (.jsonl, .jsonl.gz, .jsonl.zst).
//
//   bazel run //solutions/dedup:dedup -- INPUT... --out OUT [--report clusters.json] [--threshold 0.8] ...
//   bazel run //labs/dedup:dedup -- ...          (the same tool on your own code)
//
// By default it streams (stream_dedup.h): memory grows by a fixed number of bytes per document, whatever the
// documents' length, and the shingle sets wait on disk (--tmp). --in-memory runs the whole corpus through
// ReadCorpus, Deduplicate and WriteCorpus instead (one folder or one .jsonl file). Either way it writes the
// survivors to OUT in the input's own form, the cluster report as JSON and a summary on stdout; progress and
// the peak resident memory go to stderr. With --truth (a gencorpus truth file) it also scores the result.
#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "absl/strings/str_format.h"
#include "labs/dedup/cluster.h"
#include "labs/dedup/corpus_io.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/stream_dedup.h"
#include "tools/base/cli.h"

namespace {

using namespace distlab::dedup;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double PeakRssMb() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

// One line at most every second: phase, count, input MB/s and, for the passes, the ETA from the bytes left.
class Progress {
 public:
  explicit Progress(std::chrono::steady_clock::time_point start) : start_(start) {}
  void operator()(const StreamProgress& p) {
    const double now = Seconds(start_);
    const bool last = p.total > 0 && p.done == p.total;
    if (p.phase != phase_) phase_ = p.phase, phase_start_ = now, shown_ = now;
    if (now - shown_ < 1.0 && !last) return;
    shown_ = now;
    std::cerr << absl::StrFormat("[%7.1f s] %-10s %d", now, p.phase, p.done);
    if (p.total > 0) std::cerr << "/" << p.total;
    if (p.bytes_total > 0 && now > phase_start_) {
      const double rate = p.bytes_done / 1e6 / (now - phase_start_);
      std::cerr << absl::StrFormat("  %.1f MB/s of input", rate);
      if (!last && rate > 0) {
        std::cerr << absl::StrFormat("  ETA %.0f s", (p.bytes_total - p.bytes_done) / 1e6 / rate);
      }
    }
    std::cerr << "\n";
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::string phase_;
  double phase_start_ = 0, shown_ = 0;
};

int InMemory(const std::string& input, const std::string& out, const std::string& report, DedupOptions opt,
             bool quiet, std::chrono::steady_clock::time_point start) {
  if (!quiet) {
    opt.progress = [&](const std::string& phase, int64_t done, int64_t total) {
      std::cerr << "[" << std::fixed << std::setprecision(1) << Seconds(start) << " s] " << phase << " "
                << done << "/" << total << "\n";
    };
  }
  absl::StatusOr<Corpus> corpus = ReadCorpus(input);
  if (!corpus.ok()) {
    std::cerr << "dedup: " << corpus.status() << "\n";
    return 1;
  }
  std::vector<std::string> texts;
  for (const Document& d : corpus->documents) texts.push_back(d.text);
  absl::StatusOr<DedupResult> result = Deduplicate(texts, opt);
  if (!result.ok()) {
    std::cerr << "dedup: " << result.status() << "\n";
    return 1;
  }
  if (absl::Status s = WriteCorpus(*corpus, result->kept, out); !s.ok()) {
    std::cerr << "dedup: " << s << "\n";
    return 1;
  }
  std::ofstream(report) << ClusterReportJson(*corpus, *result) << "\n";
  std::cout << "documents " << texts.size() << "  kept " << result->kept.size() << "  removed "
            << result->removed.size() << "  clusters " << result->clusters.size() << "  bands x rows "
            << result->banding.bands << " x " << result->banding.rows << "  candidates "
            << result->candidate_pairs << "  verified " << result->verified.size() << "  time "
            << std::setprecision(2) << Seconds(start) << " s\n";
  return 0;
}

int Streaming(const std::vector<std::string>& inputs, const std::string& out, const std::string& report,
              const std::string& truth, StreamOptions opt, bool quiet,
              std::chrono::steady_clock::time_point start) {
  Progress progress(start);
  if (!quiet) opt.progress = [&](const StreamProgress& p) { progress(p); };
  {  // An output that pass 2 would refuse is refused now, before pass 1's work.
    absl::StatusOr<std::unique_ptr<CorpusStream>> in = CorpusStream::Open(inputs);
    absl::Status s = in.ok() ? CorpusWriter::Open(**in, out).status() : in.status();
    if (!s.ok()) {
      std::cerr << "dedup: " << s << "\n";
      return 1;
    }
  }
  absl::StatusOr<StreamResult> result = FindNearDuplicates(inputs, opt);
  if (!result.ok()) {
    std::cerr << "dedup: " << result.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<std::pair<int, std::string>>> names = WriteSurvivors(inputs, *result, out, opt);
  if (!names.ok()) {
    std::cerr << "dedup: " << names.status() << "\n";
    return 1;
  }
  {
    const std::string tmp = report + ".tmp";
    std::ofstream file(tmp);
    absl::Status s = WriteStreamReport(*result, *names, file);
    file << "\n";
    file.close();
    if (s.ok() && (!file || std::rename(tmp.c_str(), report.c_str()) != 0)) {
      s = absl::InternalError("cannot write the report " + report);
    }
    if (!s.ok()) {
      std::remove(tmp.c_str());
      std::cerr << "dedup: " << s << "\n";
      return 1;
    }
  }
  const double wall = Seconds(start), cpu = CpuSeconds(), mb = result->text_bytes / 1e6;
  std::cout << absl::StrFormat(
      "documents %d  kept %d  removed %d  clusters %d  bands x rows %d x %d  candidates %d  verified %d\n"
      "text %.1f MB  time %.2f s  %.1f MB/s  %.1f MB/s per core (CPU time %.1f s)  peak RSS %.1f MB  "
      "%.0f bytes/document held  shingle-set file %.1f MB\n",
      result->documents, result->documents - result->removed, result->removed, result->clusters.size(),
      result->banding.bands, result->banding.rows, result->candidate_pairs, result->verified.size(), mb, wall,
      mb / wall, mb / cpu, cpu, PeakRssMb(), result->bytes_per_document, result->shingle_file_bytes / 1e6);
  if (!truth.empty()) {
    absl::StatusOr<TruthScores> s = ScoreAgainstTruth(*result, *names, truth);
    if (!s.ok()) {
      std::cerr << "dedup: " << s.status() << "\n";
      return 1;
    }
    std::cout << absl::StrFormat(
        "against %s: pairs P %.4f R %.4f F1 %.4f  co-membership P %.4f R %.4f F1 %.4f\n", truth,
        s->pairs.precision, s->pairs.recall, s->pairs.f1, s->co_membership.precision, s->co_membership.recall,
        s->co_membership.f1);
  }
  std::cout << "survivors: " << out << "\nreport:    " << report << "\n";
  std::cerr << absl::StrFormat("dedup: peak RSS %.1f MB\n", PeakRssMb());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Remove near-duplicate documents with MinHash and LSH banding."};
  std::vector<std::string> inputs;
  std::string out, report, truth;
  StreamOptions sopt;
  DedupOptions& opt = sopt.dedup;
  std::string survivor = "lowest";
  bool quiet = false, in_memory = false;
  app.add_option(
         "input", inputs,
         "a folder of text files, or JSON-lines shards (.jsonl, .jsonl.gz, .jsonl.zst) with a \"text\" "
         "field")
      ->required();
  app.add_option("--out", out, "where the survivors go (a folder, or a JSON-lines file)")->required();
  app.add_option("--report", report, "the cluster report (JSON); default: OUT's name + .clusters.json");
  app.add_option("--threshold", opt.threshold, "Jaccard similarity that makes a duplicate, in (0, 1]")
      ->capture_default_str();
  app.add_option("--ngram", opt.ngram, "words per shingle")->capture_default_str();
  app.add_option("--k", opt.k, "MinHash functions")->capture_default_str();
  app.add_option("--bands", opt.banding.bands, "LSH bands b (0 with --rows 0: picked for the threshold)");
  app.add_option("--rows", opt.banding.rows, "LSH rows per band r");
  app.add_option("--seed", opt.seed, "seed of the hash family")->capture_default_str();
  app.add_option("--survivor", survivor, "which member of a cluster is kept")
      ->check(distlab::cli::IsMember({"lowest", "random"}))
      ->capture_default_str();
  app.add_option("--survivor-seed", opt.survivor_seed, "seed of --survivor random");
  app.add_option("--threads", opt.threads, "signature threads (0 = all cores)");
  app.add_option("--tmp", sopt.tmp_dir, "folder of the shingle-set file (default: $TMPDIR, else /tmp)");
  app.add_option("--truth", truth, "score the result against a gencorpus truth file");
  app.add_flag("--in-memory", in_memory,
               "read the whole corpus into memory (ReadCorpus, Deduplicate, WriteCorpus)");
  app.add_flag("--quiet", quiet, "no progress on stderr");
  DISTLAB_CLI_PARSE(app, argc, argv);
  opt.survivor = survivor == "random" ? SurvivorRule::kRandom : SurvivorRule::kLowestId;
  if (report.empty()) report = out + ".clusters.json";
  const auto start = std::chrono::steady_clock::now();
  if (in_memory) {
    if (inputs.size() != 1 || !truth.empty()) {
      std::cerr << "dedup: --in-memory takes one folder or one .jsonl file, and no --truth\n";
      return 1;
    }
    return InMemory(inputs[0], out, report, opt, quiet, start);
  }
  return Streaming(inputs, out, report, truth, sopt, quiet, start);
}
