// Lab 3 (dedup), given; not graded: the `dedup` command, near-duplicate removal for a folder of text files or
// JSON-lines shards (.jsonl, .jsonl.gz, .jsonl.zst).
//
//   bazel run //solutions/dedup:dedup -- INPUT... --out OUT [--report clusters.json] [--threshold 0.8] ...
//   bazel run //labs/dedup:dedup -- ...          (the same tool on your own code)
//
// By default it streams (stream_dedup.h): memory grows by a fixed number of bytes per document, whatever the
// documents' length, and the shingle sets wait on disk (--tmp). --memory M (512M, 2G, or bytes) caps what the
// band tables hold: past M they spill to sorted runs in --tmp, merged when pairing, with the same answer.
// --in-memory runs the whole corpus through ReadCorpus, Deduplicate and WriteCorpus instead (one folder or
// one .jsonl file). Either way it writes the survivors to OUT in the input's own form, the cluster report as
// JSON and a summary on stdout; progress and the peak resident memory go to stderr. With --truth (a gencorpus
// truth file) it also scores the result.
//
// Several ranks, each reading its share of the input's files (or of one plain .jsonl file's bytes), with the
// same answer:
//   bazel-bin/labs/dedup/dedup shards/*.jsonl.zst --out kept --ranks 4           (threads of one process)
//   ./labctl launch -n 4 -- bazel-bin/labs/dedup/dedup shards/*.jsonl.zst --out kept   (processes, Gloo)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "labs/dedup/cluster.h"
#include "labs/dedup/corpus_io.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/stream_dedup.h"
#include "nlohmann/json.hpp"
#include "reference/comm/comm.h"
#include "tools/base/cli.h"

namespace {

using namespace distlab::dedup;
namespace comm = distlab::comm;

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

// --summary FILE: the run's numbers as one JSON object, for scripts and figures (demos/dedup/scale_runs.sh).
bool WriteSummary(const std::string& path, const nlohmann::json& summary) {
  if (path.empty()) return true;
  std::ofstream file(path);
  file << summary.dump(2) << "\n";
  if (!file.flush()) {
    std::cerr << "dedup: cannot write the summary " << path << "\n";
    return false;
  }
  return true;
}

// A size for --memory: bytes, or a whole number with K, M, G or T (powers of 1024, either case): "512M",
// "2G".
absl::StatusOr<int64_t> ParseBytes(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  if (suffix == "T" || suffix == "t") shift = 40;
  int64_t value = 0;
  bool fits = digits > 0 && digits <= 18;
  for (size_t i = 0; fits && i < digits; ++i) value = value * 10 + (text[i] - '0');
  fits = fits && shift >= 0 && value <= (std::numeric_limits<int64_t>::max() >> shift);
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory ", text, ": expected a size in bytes, or a whole number with K, M, G or T (512M, 2G)"));
  }
  return value << shift;
}

// A size as --memory takes it: "64 MiB" (KiB, MiB, GiB; one decimal when not whole).
std::string SizeText(int64_t bytes) {
  const char* unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double value = static_cast<double>(bytes);
  while (u < 4 && value >= 1024) value /= 1024, ++u;
  return value == static_cast<int64_t>(value) ? absl::StrFormat("%d %s", static_cast<int64_t>(value), unit[u])
                                              : absl::StrFormat("%.1f %s", value, unit[u]);
}

// The cluster report (WriteStreamReport) at `report`, under a temporary name renamed when complete.
absl::Status WriteReportFile(const std::string& report, const StreamResult& result,
                             const std::vector<std::pair<int, std::string>>& names) {
  const std::string tmp = report + ".tmp";
  std::ofstream file(tmp);
  absl::Status s = WriteStreamReport(result, names, file);
  file << "\n";
  file.close();
  if (s.ok() && (!file || std::rename(tmp.c_str(), report.c_str()) != 0)) {
    s = absl::InternalError("cannot write the report " + report);
  }
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

void PrintScores(const std::string& truth, const TruthScores& s) {
  std::cout << absl::StrFormat(
      "against %s: pairs P %.4f R %.4f F1 %.4f  co-membership P %.4f R %.4f F1 %.4f\n", truth,
      s.pairs.precision, s.pairs.recall, s.pairs.f1, s.co_membership.precision, s.co_membership.recall,
      s.co_membership.f1);
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
              const std::string& truth, const std::string& summary, StreamOptions opt, bool quiet,
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
  if (absl::Status s = WriteReportFile(report, *result, *names); !s.ok()) {
    std::cerr << "dedup: " << s << "\n";
    return 1;
  }
  const double wall = Seconds(start), cpu = CpuSeconds(), mb = result->text_bytes / 1e6;
  std::cout << absl::StrFormat(
      "documents %d  kept %d  removed %d  clusters %d  bands x rows %d x %d  candidates %d  verified %d\n"
      "text %.1f MB  time %.2f s  %.1f MB/s  %.1f MB/s per core (CPU time %.1f s)  peak RSS %.1f MB  "
      "%.0f bytes/document held  shingle-set file %.1f MB\n",
      result->documents, result->documents - result->removed, result->removed, result->clusters.size(),
      result->banding.bands, result->banding.rows, result->candidate_pairs, result->verified.size(), mb, wall,
      mb / wall, mb / cpu, cpu, PeakRssMb(), result->bytes_per_document, result->shingle_file_bytes / 1e6);
  if (opt.memory_bytes > 0) {
    std::cout << absl::StrFormat("band tables within %s: %d runs per band spilled, %.1f MB written\n",
                                 SizeText(opt.memory_bytes), result->spilled_runs,
                                 result->spilled_bytes / 1e6);
  }
  if (!truth.empty()) {
    absl::StatusOr<TruthScores> s = ScoreAgainstTruth(*result, *names, truth);
    if (!s.ok()) {
      std::cerr << "dedup: " << s.status() << "\n";
      return 1;
    }
    PrintScores(truth, *s);
  }
  std::cout << "survivors: " << out << "\nreport:    " << report << "\n";
  std::cerr << absl::StrFormat("dedup: peak RSS %.1f MB\n", PeakRssMb());
  const bool written = WriteSummary(summary, {{"documents", result->documents},
                                              {"text_bytes", result->text_bytes},
                                              {"ranks", 1},
                                              {"mode", "one process"},
                                              {"wall_s", wall},
                                              {"cpu_s", cpu},
                                              {"peak_rss_mb", PeakRssMb()},
                                              {"bytes_per_document", result->bytes_per_document},
                                              {"memory_bytes", opt.memory_bytes},
                                              {"spilled_runs", result->spilled_runs},
                                              {"spilled_bytes", result->spilled_bytes},
                                              {"removed", result->removed},
                                              {"clusters", result->clusters.size()},
                                              {"candidates", result->candidate_pairs},
                                              {"verified", result->verified.size()}});
  return written ? 0 : 1;
}

// The same on several ranks (stream_dedup.h, "Several ranks"): every rank runs this; rank 0 prints the
// summary and writes the report, each rank prints its own line on stderr.
int AcrossRanks(comm::Comm& comm, comm::Stream& stream, const std::vector<std::string>& inputs,
                const std::string& out, const std::string& report, const std::string& truth,
                const std::string& summary, StreamOptions opt, bool quiet, bool processes,
                std::chrono::steady_clock::time_point start) {
  const int me = comm.rank();
  Progress progress(start);
  if (!quiet && me == 0) opt.progress = [&](const StreamProgress& p) { progress(p); };
  auto fail = [&](const absl::Status& s) {
    if (me == 0) std::cerr << "dedup: " << s << "\n";
    return 1;
  };
  absl::StatusOr<RanksResult> found = FindNearDuplicatesAcrossRanks(comm, stream, inputs, opt);
  if (!found.ok()) return fail(found.status());
  absl::StatusOr<std::vector<std::pair<int, std::string>>> names =
      WriteSurvivorsAcrossRanks(comm, stream, inputs, *found, out, opt);
  if (!names.ok()) return fail(names.status());
  const RankShare& share = found->share;
  const comm::Stats stats = comm.stats();
  std::cerr << absl::StrFormat(
      "dedup: rank %d of %d: documents [%d, %d)  band records sent %d, received %d (%.1f MB, in all-to-all "
      "calls of %.1f MB)  candidates verified %d  shingle sets fetched %d (%.1f MB)  %.0f bytes/document "
      "held  runs spilled %d (%.1f MB)  peak RSS %.1f MB (the process's)\n",
      me, comm.size(), share.first_doc, share.first_doc + share.documents, share.records_sent,
      share.records_received, share.records_sent * 16 / 1e6, stats.all_to_all.bytes / 1e6,
      share.candidate_pairs, share.sets_fetched, share.set_bytes_fetched / 1e6,
      found->result.bytes_per_document, found->result.spilled_runs, found->result.spilled_bytes / 1e6,
      PeakRssMb());
  // CPU time and peak RSS of the whole run: summed over the processes when the ranks are processes (the
  // RSS also as the largest one), the process's own when they are threads of it.
  double usage[3] = {CpuSeconds(), PeakRssMb(), PeakRssMb()};
  if (processes) {
    absl::Status s = comm.AllReduce(usage, usage, 2, comm::DataType::kF64, comm::RedOp::kSum, stream);
    if (s.ok()) s = comm.AllReduce(usage + 2, usage + 2, 1, comm::DataType::kF64, comm::RedOp::kMax, stream);
    if (s.ok()) s = stream.Synchronize();
    if (!s.ok()) return fail(s);
  }
  if (me != 0) return 0;
  const StreamResult& result = found->result;
  if (absl::Status s = WriteReportFile(report, result, *names); !s.ok()) return fail(s);
  const double wall = Seconds(start), mb = result.text_bytes / 1e6;
  std::cout << absl::StrFormat(
      "documents %d  kept %d  removed %d  clusters %d  bands x rows %d x %d  candidates %d  verified %d\n"
      "ranks %d (%s)  text %.1f MB  time %.2f s  %.1f MB/s  %.1f MB/s per core (CPU time %.1f s)  peak RSS "
      "%.1f MB%s\n",
      result.documents, result.documents - result.removed, result.removed, result.clusters.size(),
      result.banding.bands, result.banding.rows, result.candidate_pairs, result.verified.size(), comm.size(),
      processes ? "processes" : "threads", mb, wall, mb / wall, mb / usage[0], usage[0], usage[1],
      processes ? absl::StrFormat(" in all, %.1f MB the largest process", usage[2]) : "");
  if (!truth.empty()) {
    absl::StatusOr<TruthScores> s = ScoreAgainstTruth(result, *names, truth);
    if (!s.ok()) return fail(s.status());
    PrintScores(truth, *s);
  }
  std::cout << "survivors: " << out << "\nreport:    " << report << "\n";
  const bool written = WriteSummary(summary, {{"documents", result.documents},
                                              {"text_bytes", result.text_bytes},
                                              {"ranks", comm.size()},
                                              {"mode", processes ? "processes" : "threads"},
                                              {"wall_s", wall},
                                              {"cpu_s", usage[0]},
                                              {"peak_rss_mb", usage[1]},
                                              {"peak_rss_mb_largest_process", usage[2]},
                                              {"bytes_per_document", found->result.bytes_per_document},
                                              {"memory_bytes", opt.memory_bytes},
                                              {"spilled_runs", found->result.spilled_runs},
                                              {"spilled_bytes", found->result.spilled_bytes},
                                              {"removed", result.removed},
                                              {"clusters", result.clusters.size()},
                                              {"candidates", result.candidate_pairs},
                                              {"verified", result.verified.size()}});
  return written ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Remove near-duplicate documents with MinHash and LSH banding."};
  std::vector<std::string> inputs;
  std::string out, report, truth, summary;
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
  app.add_option("--tmp", sopt.tmp_dir,
                 "folder of the shingle-set file and of spilled band runs (default: $TMPDIR, else /tmp)");
  std::string memory = "0";
  app.add_option("--memory", memory,
                 "budget of the band tables (bytes, or with K, M, G: 512M, 2G; 0 = none): past it they spill "
                 "to sorted runs in --tmp, merged when pairing (each rank's own with several ranks)")
      ->capture_default_str();
  app.add_option("--truth", truth, "score the result against a gencorpus truth file");
  app.add_option("--summary", summary, "also write the run's numbers (time, CPU, peak RSS, counts) as JSON");
  int ranks = 1;
  double comm_timeout = 1800;
  app.add_option("--ranks", ranks,
                 "ranks as threads of this process, each reading its share of the input's files, or of one "
                 "plain .jsonl file's bytes (under "
                 "./labctl launch -n N the ranks are the launched processes instead)")
      ->check(distlab::cli::Range(1, 64));
  app.add_option("--shuffle-chunk", sopt.shuffle_chunk,
                 "several ranks: band records per peer per round (0: about one band's worth, at most 65536)")
      ->capture_default_str();
  app.add_option("--comm-timeout", comm_timeout,
                 "several ranks: seconds a rank may wait for the others before it fails (a rank that dies "
                 "is noticed at once)")
      ->capture_default_str();
  app.add_flag("--in-memory", in_memory,
               "read the whole corpus into memory (ReadCorpus, Deduplicate, WriteCorpus)");
  app.add_flag("--quiet", quiet, "no progress on stderr");
  DISTLAB_CLI_PARSE(app, argc, argv);
  opt.survivor = survivor == "random" ? SurvivorRule::kRandom : SurvivorRule::kLowestId;
  if (absl::StatusOr<int64_t> bytes = ParseBytes(memory); bytes.ok()) {
    sopt.memory_bytes = *bytes;
  } else {
    std::cerr << "dedup: " << bytes.status().message() << "\n";
    return 1;
  }
  if (report.empty()) report = out + ".clusters.json";
  const auto start = std::chrono::steady_clock::now();
  if (in_memory) {
    if (inputs.size() != 1 || !truth.empty() || sopt.memory_bytes > 0) {
      std::cerr << "dedup: --in-memory takes one folder or one .jsonl file, and no --truth or --memory\n";
      return 1;
    }
    return InMemory(inputs[0], out, report, opt, quiet, start);
  }
  const bool launched = comm::LaunchedByLauncher();
  if (!launched && ranks == 1) return Streaming(inputs, out, report, truth, summary, sopt, quiet, start);

  // Several ranks: the launched processes, or threads of this one.
  comm::CommOptions copt;
  copt.timeout = std::chrono::milliseconds(static_cast<int64_t>(comm_timeout * 1000));
  copt.name = "dedup";
  if (opt.threads == 0) {  // the cores shared among the ranks of this machine
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    const int here = launched ? (local ? std::max(1, std::atoi(local)) : 1) : ranks;
    opt.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / here);
  }
  if (launched) {
    copt.backend = comm::Backend::kGloo;
    absl::StatusOr<comm::Backend> backend = comm::BackendFromEnv();
    if (backend.ok()) copt.backend = *backend;
    absl::StatusOr<std::unique_ptr<comm::Comm>> c = comm::CommInitFromEnv(copt);
    if (!c.ok()) {
      std::cerr << "dedup: " << c.status() << "\n";
      return 1;
    }
    comm::Stream stream;
    const int rc = AcrossRanks(**c, stream, inputs, out, report, truth, summary, sopt, quiet, true, start);
    const absl::Status destroyed = (*c)->Destroy();
    return rc != 0 ? rc : (destroyed.ok() ? 0 : 1);
  }
  copt.backend = comm::Backend::kThreads;
  std::vector<int> rc(ranks, 1);
  const std::vector<absl::Status> statuses = comm::RunRanks(
      ranks,
      [&](int rank, comm::Comm& c, comm::Stream& stream) {
        rc[rank] = AcrossRanks(c, stream, inputs, out, report, truth, summary, sopt, quiet, false, start);
        return absl::OkStatus();
      },
      copt);
  if (const absl::Status s = comm::FirstError(statuses); !s.ok()) {
    std::cerr << "dedup: " << s << "\n";
    return 1;
  }
  return *std::max_element(rc.begin(), rc.end());
}
