// Lab 3 (dedup), given; not graded: the `dedup` command, near-duplicate removal for a folder of text files or
// a JSON-lines file.
//
//   bazel run //solutions/dedup:dedup -- INPUT --out OUT [--report clusters.json] [--threshold 0.8] ...
//   bazel run //labs/dedup:dedup -- ...          (the same tool on your own code)
//
// Writes the survivors to OUT in the input's own form, the cluster report as JSON, and a summary on stdout;
// progress goes to stderr on long runs.
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "labs/dedup/cluster.h"
#include "labs/dedup/corpus_io.h"
#include "tools/base/cli.h"

int main(int argc, char** argv) {
  using namespace distlab::dedup;
  distlab::cli::App app{"Remove near-duplicate documents with MinHash and LSH banding."};
  std::string input, out, report;
  DedupOptions opt;
  std::string survivor = "lowest";
  bool quiet = false;
  app.add_option("input", input, "a folder of text files, or a JSON-lines file with a \"text\" field")
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
  app.add_flag("--quiet", quiet, "no progress on stderr");
  DISTLAB_CLI_PARSE(app, argc, argv);
  opt.survivor = survivor == "random" ? SurvivorRule::kRandom : SurvivorRule::kLowestId;
  if (report.empty()) report = out + ".clusters.json";

  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (!quiet) {
    opt.progress = [&](const std::string& phase, int64_t done, int64_t total) {
      std::cerr << "[" << std::fixed << std::setprecision(1) << seconds() << " s] " << phase << " " << done
                << "/" << total << "\n";
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
            << std::setprecision(2) << seconds() << " s\n"
            << "survivors: " << out << "\nreport:    " << report << "\n";
  return 0;
}
