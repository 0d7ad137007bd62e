// Lab 3 demo: MinHash + LSH deduplication on a generated corpus with planted near-duplicates.
//
//   bazel run --config=solution //demos/dedup:demo -- --out DIR
//
// 1. The S-curve measured against 1 - (1 - s^r)^b for two bandings (dedup-scurve.svg).
// 2. Precision / recall / F1 against exact all-pairs Jaccard for the same two bandings, before and after
//    verification, for pairs and for removed documents (dedup-pr.svg).
// 3. MinHash estimates against exact Jaccard (dedup-estimate.svg).
// 4. A clusters example, and the whole cluster report in DIR/clusters.json; a JSON summary in
//    DIR/summary.json.
// 5. Stage E: the same corpus on 1, 2 and 4 ranks (threads) -- records moved by the band shuffle against
//    16 b N (n - 1) / n^2 bytes per rank (notes/03-dedup.md §7.2), rounds, and the survivors against one
//    process.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "labs/dedup/across_ranks.h"
#include "labs/dedup/cluster.h"
#include "labs/dedup/corpus_io.h"
#include "labs/dedup/synthetic.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

namespace dd = distlab::dedup;
namespace viz = distlab::viz;

namespace {

template <typename T>
T Check(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::cerr << "demo: " << v.status() << "\n";
    std::exit(1);
  }
  return std::move(*v);
}

void CheckWrite(const viz::WriteResult& r) {
  if (!r.ok()) std::cerr << "demo: figure not written: " << r.error << "\n";
}

std::string Fixed(double v, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

constexpr int kHashes = 128;        // k
constexpr double kThreshold = 0.8;  // the Jaccard similarity that makes two documents duplicates

std::string BandingName(const dd::Banding& b) {
  return std::to_string(b.bands) + " x " + std::to_string(b.rows);
}

// Appends a pair of random sets at exact Jaccard common / 200 to a and b: `common` shared elements, then
// 100 - common/2 distinct ones each (|a| = |b| = 100 + common/2, so |a u b| = 200).
void RandomPair(int common, std::mt19937_64& rng, std::vector<uint64_t>& a, std::vector<uint64_t>& b) {
  for (int i = 0; i < common; ++i) a.push_back(rng()), b.push_back(a.back());
  for (int i = common; i < 100 + common / 2; ++i) a.push_back(rng()), b.push_back(rng());
}

// 1. The S-curve: Pr[candidate] measured on 300 pairs of random sets at each exact similarity s, beside the
// formula 1 - (1 - s^r)^b, for each banding (dedup-scurve.svg).
void SCurve(const std::vector<dd::Banding>& bandings, const dd::MinHasher& hasher, std::mt19937_64& rng,
            const std::string& out, nlohmann::json& summary) {
  std::printf("1. S-curve: Pr[candidate] for pairs at exact Jaccard s, k = %d, 300 pairs per point\n\n",
              kHashes);
  std::printf("  %5s", "s");
  for (const auto& b : bandings) std::printf("   %2dx%-2d measured  formula", b.bands, b.rows);
  std::printf("\n");
  std::vector<double> xs;
  std::vector<std::vector<double>> measured(bandings.size()), formula(bandings.size());
  for (int step = 0; step <= 20; ++step) {
    const int common = step * 10;  // J = common / 200
    const double s = common / 200.0;
    std::vector<dd::Signature> sigs;
    for (int p = 0; p < 300; ++p) {
      std::vector<uint64_t> a, b;
      RandomPair(common, rng, a, b);
      sigs.push_back(hasher.Sign(a)), sigs.push_back(hasher.Sign(b));
    }
    xs.push_back(s);
    std::printf("  %5.2f", s);
    for (size_t bi = 0; bi < bandings.size(); ++bi) {
      const auto cands = Check(dd::CandidatePairs(sigs, bandings[bi]));
      int hits = 0;
      for (auto [i, j] : cands) hits += i % 2 == 0 && j == i + 1;
      measured[bi].push_back(hits / 300.0);
      formula[bi].push_back(dd::SCurve(s, bandings[bi]));
      std::printf("   %8.3f  %7.3f", measured[bi].back(), formula[bi].back());
    }
    std::printf("\n");
  }
  viz::LinePlot scurve;
  scurve.Title("LSH S-curve, k = 128: measured (solid) vs 1 - (1 - s^r)^b (dashed)")
      .XLabel("Jaccard similarity s")
      .YLabel("Pr[candidate pair]");
  for (size_t bi = 0; bi < bandings.size(); ++bi) {
    const std::string name = BandingName(bandings[bi]);
    scurve.AddSeries(name + " measured", xs, measured[bi]);
    scurve.AddSeries(name + " formula", xs, formula[bi], /*dashed=*/true);
    summary["scurve"].push_back({{"bands", bandings[bi].bands},
                                 {"rows", bandings[bi].rows},
                                 {"threshold_formula", dd::BandingThreshold(bandings[bi])},
                                 {"s", xs},
                                 {"measured", measured[bi]},
                                 {"formula", formula[bi]}});
  }
  CheckWrite(scurve.Write(out + "/dedup-scurve.svg"));
}

// 2. Precision / recall / F1 on the planted corpus against exact all-pairs Jaccard, for pairs before and
// after verification and for removed documents (dedup-pr.svg). Returns the run of the last banding (the
// tool's default), for the clusters example.
dd::DedupResult Evaluate(const std::vector<dd::Banding>& bandings, const dd::synthetic::PlantedCorpus& corpus,
                         int originals, const std::string& out, nlohmann::json& summary) {
  const int n = static_cast<int>(corpus.documents.size());
  std::vector<std::vector<uint64_t>> sets;
  for (const std::string& d : corpus.documents) sets.push_back(Check(dd::ShingleSet(d, 5)));
  std::vector<std::pair<int, int>> truth;
  for (const auto& p : dd::AllPairsJaccard(sets, kThreshold)) truth.push_back({p.i, p.j});
  const std::vector<int> truth_removed = dd::RemovedByPairs(n, truth);
  std::printf(
      "\n2. Planted corpus: %d documents (%d originals, 0-3 near-duplicates each at target J in "
      "[0.5, 1]); threshold %.1f, k = %d\n   exact all-pairs Jaccard: %zu true pairs, %zu documents "
      "to remove\n\n",
      n, originals, kThreshold, kHashes, truth.size(), truth_removed.size());
  std::printf("  %-7s %9s %10s %9s | %-28s | %-28s | %-20s\n", "b x r", "threshold", "candidates", "verified",
              "pairs before verif. P / R / F1", "pairs after verif. P / R / F1", "removed docs P / R / F1");
  std::vector<std::string> categories;
  std::vector<double> precision_bars, recall_bars, f1_bars;
  dd::DedupResult last;
  for (size_t bi = 0; bi < bandings.size(); ++bi) {
    dd::DedupOptions opt;
    opt.threshold = kThreshold;
    opt.k = kHashes;
    opt.banding = bandings[bi];
    dd::DedupResult r = Check(dd::Deduplicate(corpus.documents, opt));
    // Candidates before verification, recomputed with the same hasher seed as Deduplicate (seed 1).
    const auto cands = Check(dd::CandidatePairs(
        Check(dd::SignAll(Check(dd::MinHasher::Create(kHashes, opt.seed)), sets)), bandings[bi]));
    std::vector<std::pair<int, int>> verified;
    for (const auto& p : r.verified) verified.push_back({p.i, p.j});
    const dd::Scores before = dd::ScorePairs(cands, truth), after = dd::ScorePairs(verified, truth);
    const dd::Scores removed = dd::ScoreIds(r.removed, truth_removed);
    const std::string name = BandingName(bandings[bi]);
    std::printf("  %-7s %9.3f %10zu %9zu | %8.3f %8.3f %8.3f   | %8.3f %8.3f %8.3f   | %6.3f %6.3f %6.3f\n",
                name.c_str(), dd::BandingThreshold(bandings[bi]), cands.size(), verified.size(),
                before.precision, before.recall, before.f1, after.precision, after.recall, after.f1,
                removed.precision, removed.recall, removed.f1);
    categories.push_back(name + (bi == 0 ? " (equal weights)" : " (tool default)"));
    precision_bars.push_back(after.precision);
    recall_bars.push_back(after.recall);
    f1_bars.push_back(after.f1);
    summary["evaluation"].push_back({{"bands", bandings[bi].bands},
                                     {"rows", bandings[bi].rows},
                                     {"candidates", cands.size()},
                                     {"verified", verified.size()},
                                     {"true_pairs", truth.size()},
                                     {"pairs_before", {before.precision, before.recall, before.f1}},
                                     {"pairs_after", {after.precision, after.recall, after.f1}},
                                     {"removed", {removed.precision, removed.recall, removed.f1}}});
    last = std::move(r);
  }
  viz::BarChart pr;
  pr.Title("Verified duplicate pairs vs exact Jaccard >= 0.8 (planted corpus)")
      .YLabel("score")
      .Categories(categories)
      .AddSeries("precision", precision_bars)
      .AddSeries("recall", recall_bars)
      .AddSeries("F1", f1_bars);
  CheckWrite(pr.Write(out + "/dedup-pr.svg"));
  return last;
}

// 3. The estimator: the MinHash estimate against exact Jaccard on 200 random pairs, with the band
// J +- 2 sqrt(J(1-J)/k) (dedup-estimate.svg).
void Estimator(const dd::MinHasher& hasher, std::mt19937_64& rng, const std::string& out,
               nlohmann::json& summary) {
  std::vector<double> exact, estimate, band_lo, band_hi, grid;
  for (int p = 0; p < 200; ++p) {
    std::vector<uint64_t> a, b;
    RandomPair(1 + p % 199, rng, a, b);
    std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
    exact.push_back(dd::Jaccard(a, b));
    estimate.push_back(Check(dd::EstimateJaccard(hasher.Sign(a), hasher.Sign(b))));
  }
  double sq = 0;
  int within = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double se = std::sqrt(exact[i] * (1 - exact[i]) / kHashes);
    sq += (estimate[i] - exact[i]) * (estimate[i] - exact[i]);
    within += std::abs(estimate[i] - exact[i]) <= 2 * se;
  }
  for (double j = 0; j <= 1.0001; j += 0.02) {
    grid.push_back(j);
    const double se = std::sqrt(std::max(0.0, j * (1 - j)) / kHashes);
    band_lo.push_back(j - 2 * se);
    band_hi.push_back(j + 2 * se);
  }
  std::printf(
      "\n3. Estimator, k = %d: RMS error %.4f over 200 pairs (largest standard error sqrt(0.25/k) = %.4f); "
      "%d of 200 within 2 standard errors\n",
      kHashes, std::sqrt(sq / exact.size()), std::sqrt(0.25 / kHashes), within);
  // Sorted by exact J so the estimate series reads left to right.
  std::vector<size_t> order(exact.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return exact[x] < exact[y]; });
  std::vector<double> ex_sorted, est_sorted;
  for (size_t i : order) ex_sorted.push_back(exact[i]), est_sorted.push_back(estimate[i]);
  viz::LinePlot est;
  char est_title[128], est_name[64];
  std::snprintf(est_title, sizeof est_title,
                "MinHash estimate (k = %d) vs exact J: %d of %zu within J +- 2 SE", kHashes, within,
                exact.size());
  std::snprintf(est_name, sizeof est_name, "estimate (RMS %.3f)", std::sqrt(sq / exact.size()));
  est.Title(est_title)
      .XLabel("exact Jaccard J")
      .YLabel("estimate")
      .AddSeries(est_name, ex_sorted, est_sorted)
      .AddSeries("J - 2 SE", grid, band_lo, true)
      .AddSeries("J + 2 SE", grid, band_hi, true);
  CheckWrite(est.Write(out + "/dedup-estimate.svg"));
  summary["estimator"] = {
      {"k", kHashes}, {"rms_error", std::sqrt(sq / exact.size())}, {"within_2se", within}};
}

// The first 48 bytes of a document on one line, cut at a character boundary.
std::string Opening(const std::string& document) {
  std::string text = document.substr(0, 48);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();  // cut lead byte
  std::string flat;
  for (char ch : text) flat += ch == '\n' ? ' ' : ch;
  return flat;
}

// 4. The first three clusters of `result` on the terminal, the whole report in DIR/clusters.json.
void Clusters(const dd::DedupResult& result, const dd::synthetic::PlantedCorpus& corpus,
              const std::string& out, nlohmann::json& summary) {
  std::printf(
      "\n4. Clusters (banding %d x %d): %zu clusters, %zu documents kept, %zu removed. The first three:\n\n",
      result.banding.bands, result.banding.rows, result.clusters.size(), result.kept.size(),
      result.removed.size());
  std::printf("  %-7s %-22s %-9s %-12s %s\n", "cluster", "members", "survivor", "max Jaccard",
              "first words of each member");
  for (size_t c = 0; c < std::min<size_t>(3, result.clusters.size()); ++c) {
    const dd::Cluster& cl = result.clusters[c];
    std::string members;
    for (int m : cl.members) members += (members.empty() ? "" : ",") + std::to_string(m);
    for (size_t i = 0; i < cl.members.size(); ++i) {
      const std::string flat = Opening(corpus.documents[cl.members[i]]);
      if (i == 0) {
        std::printf("  %-7d %-22s %-9d %-12s %d: %s...\n", cl.id, members.c_str(), cl.survivor,
                    Fixed(cl.max_jaccard).c_str(), cl.members[i], flat.c_str());
      } else {
        std::printf("  %-7s %-22s %-9s %-12s %d: %s...\n", "", "", "", "", cl.members[i], flat.c_str());
      }
    }
  }
  dd::Corpus named;
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    named.documents.push_back({"doc" + std::to_string(d), corpus.documents[d]});
  }
  std::ofstream(out + "/clusters.json") << dd::ClusterReportJson(named, result) << "\n";
  summary["clusters"] = {
      {"count", result.clusters.size()}, {"kept", result.kept.size()}, {"removed", result.removed.size()}};
}

// Section 5: stage E on n ranks of this process. Each rank signs its contiguous share of the corpus, shuffles
// its band records (chunk 512), verifies the candidates of its buckets by exact Jaccard (the demo reads every
// set; a tool would send them), and the union across ranks gives the survivors.
void AcrossRanks(const dd::DedupResult& one, const dd::synthetic::PlantedCorpus& corpus,
                 nlohmann::json& summary) {
  const int docs = static_cast<int>(corpus.documents.size());
  const dd::Banding banding = one.banding;
  const dd::MinHasher hasher = Check(dd::MinHasher::Create(kHashes, dd::DedupOptions{}.seed));
  std::vector<std::vector<uint64_t>> sets;
  std::vector<dd::Signature> sigs;
  for (const std::string& d : corpus.documents) {
    sets.push_back(Check(dd::ShingleSet(d, 5)));
    sigs.push_back(hasher.Sign(sets.back()));
  }
  std::printf(
      "\n5. Across ranks (stage E): %d documents, %d bands, chunk 512. Records moved per rank: measured "
      "(records\n"
      "   whose owner is another rank) against b N (n-1)/n^2; AllToAll rounds; survivors against one "
      "process.\n\n",
      docs, banding.bands);
  std::printf("  %5s %14s %14s %7s %14s %s\n", "ranks", "records moved", "b N (n-1)/n^2", "rounds",
              "padded bytes", "same survivors");
  for (int n : {1, 2, 4}) {
    std::vector<int64_t> moved(n, 0), rounds(n, 0), padded(n, 0);
    std::vector<std::vector<int>> kept(n);
    const absl::Status status = distlab::comm::FirstError(distlab::comm::RunRanks(
        n, [&](int r, distlab::comm::Comm& comm, distlab::comm::Stream& stream) -> absl::Status {
          const int first = docs * r / n, last = docs * (r + 1) / n;
          const std::vector<dd::Signature> mine(sigs.begin() + first, sigs.begin() + last);
          const std::vector<dd::BandRecord> records = dd::BandRecordsOf(mine, first, banding);
          for (const dd::BandRecord& rec : records) moved[r] += dd::BucketOwner(rec.key, n) != r;
          comm.ResetStats();
          ASSIGN_OR_RETURN(std::vector<dd::BandRecord> owned,
                           dd::ShuffleBandRecords(comm, stream, records, 512));
          rounds[r] = static_cast<int64_t>(comm.stats().all_to_all.calls);
          padded[r] = static_cast<int64_t>(comm.stats().all_to_all.bytes);
          std::vector<std::pair<int, int>> edges;
          for (const auto& [i, j] : dd::CandidatePairsOf(owned)) {
            if (dd::Jaccard(sets[i], sets[j]) >= kThreshold) edges.emplace_back(i, j);
          }
          ASSIGN_OR_RETURN(std::vector<int> labels, dd::GlobalLabels(comm, stream, docs, edges));
          kept[r] = dd::KeptOf(labels, first, last - first);
          return absl::OkStatus();
        }));
    if (!status.ok()) {
      std::cerr << "demo: across " << n << " ranks: " << status << "\n";
      std::exit(1);
    }
    std::vector<int> all;
    for (const std::vector<int>& k : kept) all.insert(all.end(), k.begin(), k.end());
    const double predicted =
        static_cast<double>(banding.bands) * docs * (n - 1) / (static_cast<double>(n) * n);
    const double mean_moved =
        static_cast<double>(std::accumulate(moved.begin(), moved.end(), int64_t{0})) / n;
    std::printf("  %5d %14.0f %14.0f %7lld %14lld %s\n", n, mean_moved, predicted,
                static_cast<long long>(rounds[0]), static_cast<long long>(padded[0]),
                all == one.kept ? "yes" : "NO");
    summary["across_ranks"].push_back({{"ranks", n},
                                       {"records_moved_per_rank", mean_moved},
                                       {"predicted", predicted},
                                       {"rounds", rounds[0]},
                                       {"same_survivors", all == one.kept}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Lab 3 demo: MinHash near-duplicate removal."};
  std::string out = "dedup-demo";
  int originals = 400;
  app.add_option("--out", out, "folder for the figures and JSON")->capture_default_str();
  app.add_option("--originals", originals, "original documents in the generated corpus")
      ->capture_default_str();
  DISTLAB_CLI_PARSE(app, argc, argv);
  std::filesystem::create_directories(out);
  // Two bandings for threshold 0.8 at k = 128: equal weights for false positives and negatives, and the
  // tool's default weights (missed pairs count more: verification removes the false positives).
  const dd::DedupOptions defaults;
  const std::vector<dd::Banding> bandings = {
      Check(dd::PickBanding(kThreshold, kHashes, 0.5, 0.5)),
      Check(dd::PickBanding(kThreshold, kHashes, defaults.fp_weight, defaults.fn_weight))};
  const dd::MinHasher hasher = Check(dd::MinHasher::Create(kHashes, 1));
  std::mt19937_64 rng(1);  // sections 1 and 3 draw from it in this order
  nlohmann::json summary;

  SCurve(bandings, hasher, rng, out, summary);
  dd::synthetic::PlantedOptions po;
  po.originals = originals;
  const dd::synthetic::PlantedCorpus corpus = dd::synthetic::MakePlantedCorpus(po);
  const dd::DedupResult example = Evaluate(bandings, corpus, originals, out, summary);
  Estimator(hasher, rng, out, summary);
  Clusters(example, corpus, out, summary);
  AcrossRanks(example, corpus, summary);

  std::ofstream(out + "/summary.json") << summary.dump(2) << "\n";
  std::printf("\nwrote %s/dedup-scurve.svg, dedup-pr.svg, dedup-estimate.svg, clusters.json, summary.json\n",
              out.c_str());
  return 0;
}
