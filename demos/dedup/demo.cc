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
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "CLI/CLI.hpp"
#include "labs/dedup/cluster.h"
#include "labs/dedup/corpus_io.h"
#include "labs/dedup/synthetic.h"
#include "nlohmann/json.hpp"
#include "reference/viz/viz.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 3 demo: MinHash near-duplicate removal."};
  std::string out = "dedup-demo";
  int originals = 400;
  app.add_option("--out", out, "folder for the figures and JSON")->capture_default_str();
  app.add_option("--originals", originals, "original documents in the generated corpus")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::filesystem::create_directories(out);
  nlohmann::json summary;
  constexpr int k = 128;
  constexpr double threshold = 0.8;
  const dd::Banding equal = Check(dd::PickBanding(threshold, k, 0.5, 0.5));
  const dd::DedupOptions defaults;  // the tool's weights: missed pairs count more (verification removes FPs)
  const dd::Banding fn_heavy = Check(dd::PickBanding(threshold, k, defaults.fp_weight, defaults.fn_weight));
  const std::vector<dd::Banding> bandings = {equal, fn_heavy};

  // ---- 1. The S-curve, measured on pairs of random sets at exact similarity s. ----
  std::printf("1. S-curve: Pr[candidate] for pairs at exact Jaccard s, k = %d, 300 pairs per point\n\n", k);
  std::printf("  %5s", "s");
  for (const auto& b : bandings) std::printf("   %2dx%-2d measured  formula", b.bands, b.rows);
  std::printf("\n");
  dd::MinHasher hasher = Check(dd::MinHasher::Create(k, 1));
  std::mt19937_64 rng(1);
  std::vector<double> xs;
  std::vector<std::vector<double>> measured(bandings.size()), formula(bandings.size());
  for (int step = 0; step <= 20; ++step) {
    const int common = step * 10;  // J = common / 200
    const double s = common / 200.0;
    std::vector<dd::Signature> sigs;
    for (int p = 0; p < 300; ++p) {
      std::vector<uint64_t> a, b;
      for (int i = 0; i < common; ++i) a.push_back(rng()), b.push_back(a.back());
      for (int i = common; i < 100 + common / 2; ++i) a.push_back(rng()), b.push_back(rng());
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
    const std::string name = std::to_string(bandings[bi].bands) + " x " + std::to_string(bandings[bi].rows);
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

  // ---- 2. Precision and recall on the planted corpus. ----
  dd::synthetic::PlantedOptions po;
  po.originals = originals;
  const dd::synthetic::PlantedCorpus corpus = dd::synthetic::MakePlantedCorpus(po);
  const int n = static_cast<int>(corpus.documents.size());
  std::vector<std::vector<uint64_t>> sets;
  for (const std::string& d : corpus.documents) sets.push_back(Check(dd::ShingleSet(d, 5)));
  std::vector<std::pair<int, int>> truth;
  for (const auto& p : dd::AllPairsJaccard(sets, threshold)) truth.push_back({p.i, p.j});
  const std::vector<int> truth_removed = dd::RemovedByPairs(n, truth);
  std::printf(
      "\n2. Planted corpus: %d documents (%d originals, 0-3 near-duplicates each at target J in "
      "[0.5, 1]); threshold %.1f, k = %d\n   exact all-pairs Jaccard: %zu true pairs, %zu documents "
      "to remove\n\n",
      n, originals, threshold, k, truth.size(), truth_removed.size());
  std::printf("  %-7s %9s %10s %9s | %-28s | %-28s | %-20s\n", "b x r", "threshold", "candidates", "verified",
              "pairs before verif. P / R / F1", "pairs after verif. P / R / F1", "removed docs P / R / F1");
  std::vector<std::string> categories;
  std::vector<double> precision_bars, recall_bars, f1_bars;
  dd::DedupResult example;
  for (size_t bi = 0; bi < bandings.size(); ++bi) {
    dd::DedupOptions opt;
    opt.threshold = threshold;
    opt.k = k;
    opt.banding = bandings[bi];
    const dd::DedupResult r = Check(dd::Deduplicate(corpus.documents, opt));
    // Candidates before verification, recomputed with the same hasher seed as Deduplicate (seed 1).
    const auto cands = Check(dd::CandidatePairs(
        Check(dd::SignAll(Check(dd::MinHasher::Create(k, opt.seed)), sets)), bandings[bi]));
    std::vector<std::pair<int, int>> verified;
    for (const auto& p : r.verified) verified.push_back({p.i, p.j});
    const dd::Scores before = dd::ScorePairs(cands, truth), after = dd::ScorePairs(verified, truth);
    const dd::Scores removed = dd::ScoreIds(r.removed, truth_removed);
    const std::string name = std::to_string(bandings[bi].bands) + " x " + std::to_string(bandings[bi].rows);
    std::printf("  %-7s %9.3f %10zu %9zu | %8.3f %8.3f %8.3f   | %8.3f %8.3f %8.3f   | %6.3f %6.3f %6.3f\n",
                name.c_str(), dd::BandingThreshold(bandings[bi]), cands.size(), verified.size(),
                before.precision, before.recall, before.f1, after.precision, after.recall, after.f1,
                removed.precision, removed.recall, removed.f1);
    categories.push_back(name + (bi == 0 ? " (equal weights)" : " (tool default)"));
    precision_bars.push_back(after.precision), recall_bars.push_back(after.recall),
        f1_bars.push_back(after.f1);
    summary["evaluation"].push_back({{"bands", bandings[bi].bands},
                                     {"rows", bandings[bi].rows},
                                     {"candidates", cands.size()},
                                     {"verified", verified.size()},
                                     {"true_pairs", truth.size()},
                                     {"pairs_before", {before.precision, before.recall, before.f1}},
                                     {"pairs_after", {after.precision, after.recall, after.f1}},
                                     {"removed", {removed.precision, removed.recall, removed.f1}}});
    if (bi == 1) example = r;
  }
  viz::BarChart pr;
  pr.Title("Verified duplicate pairs vs exact Jaccard >= 0.8 (planted corpus)")
      .YLabel("score")
      .Categories(categories)
      .AddSeries("precision", precision_bars)
      .AddSeries("recall", recall_bars)
      .AddSeries("F1", f1_bars);
  CheckWrite(pr.Write(out + "/dedup-pr.svg"));

  // ---- 3. The estimator: MinHash estimate vs exact Jaccard for candidate-free random pairs. ----
  std::vector<double> exact, estimate, band_lo, band_hi, grid;
  for (int p = 0; p < 200; ++p) {
    const int common = 1 + p % 199;
    std::vector<uint64_t> a, b;
    for (int i = 0; i < common; ++i) a.push_back(rng()), b.push_back(a.back());
    for (int i = common; i < 100 + common / 2; ++i) a.push_back(rng()), b.push_back(rng());
    std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
    exact.push_back(dd::Jaccard(a, b));
    estimate.push_back(Check(dd::EstimateJaccard(hasher.Sign(a), hasher.Sign(b))));
  }
  double sq = 0;
  int within = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double se = std::sqrt(exact[i] * (1 - exact[i]) / k);
    sq += (estimate[i] - exact[i]) * (estimate[i] - exact[i]);
    within += std::abs(estimate[i] - exact[i]) <= 2 * se;
  }
  for (double j = 0; j <= 1.0001; j += 0.02) {
    grid.push_back(j);
    const double se = std::sqrt(std::max(0.0, j * (1 - j)) / k);
    band_lo.push_back(j - 2 * se);
    band_hi.push_back(j + 2 * se);
  }
  std::printf(
      "\n3. Estimator, k = %d: RMS error %.4f over 200 pairs (largest standard error sqrt(0.25/k) = %.4f); "
      "%d of 200 within 2 standard errors\n",
      k, std::sqrt(sq / exact.size()), std::sqrt(0.25 / k), within);
  // Sorted by exact J so the estimate series reads left to right.
  std::vector<size_t> order(exact.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return exact[x] < exact[y]; });
  std::vector<double> ex_sorted, est_sorted;
  for (size_t i : order) ex_sorted.push_back(exact[i]), est_sorted.push_back(estimate[i]);
  viz::LinePlot est;
  char est_title[128], est_name[64];
  std::snprintf(est_title, sizeof est_title,
                "MinHash estimate (k = %d) vs exact J: %d of %zu within J +- 2 SE", k, within, exact.size());
  std::snprintf(est_name, sizeof est_name, "estimate (RMS %.3f)", std::sqrt(sq / exact.size()));
  est.Title(est_title)
      .XLabel("exact Jaccard J")
      .YLabel("estimate")
      .AddSeries(est_name, ex_sorted, est_sorted)
      .AddSeries("J - 2 SE", grid, band_lo, true)
      .AddSeries("J + 2 SE", grid, band_hi, true);
  CheckWrite(est.Write(out + "/dedup-estimate.svg"));
  summary["estimator"] = {{"k", k}, {"rms_error", std::sqrt(sq / exact.size())}, {"within_2se", within}};

  // ---- 4. A clusters example. ----
  std::printf(
      "\n4. Clusters (banding %d x %d): %zu clusters, %zu documents kept, %zu removed. The first three:\n\n",
      example.banding.bands, example.banding.rows, example.clusters.size(), example.kept.size(),
      example.removed.size());
  std::printf("  %-7s %-22s %-9s %-12s %s\n", "cluster", "members", "survivor", "max Jaccard",
              "first words of each member");
  for (size_t c = 0; c < std::min<size_t>(3, example.clusters.size()); ++c) {
    const dd::Cluster& cl = example.clusters[c];
    std::string members;
    for (int m : cl.members) members += (members.empty() ? "" : ",") + std::to_string(m);
    for (size_t i = 0; i < cl.members.size(); ++i) {
      std::string text = corpus.documents[cl.members[i]].substr(0, 48);
      while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
      if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();  // cut lead byte
      std::string flat;
      for (char ch : text) flat += ch == '\n' ? ' ' : ch;
      if (i == 0) {
        std::printf("  %-7d %-22s %-9d %-12s %d: %s...\n", cl.id, members.c_str(), cl.survivor,
                    Fixed(cl.max_jaccard).c_str(), cl.members[i], flat.c_str());
      } else {
        std::printf("  %-7s %-22s %-9s %-12s %d: %s...\n", "", "", "", "", cl.members[i], flat.c_str());
      }
    }
  }
  dd::Corpus named;
  for (int d = 0; d < n; ++d) named.documents.push_back({"doc" + std::to_string(d), corpus.documents[d]});
  std::ofstream(out + "/clusters.json") << dd::ClusterReportJson(named, example) << "\n";
  summary["clusters"] = {
      {"count", example.clusters.size()}, {"kept", example.kept.size()}, {"removed", example.removed.size()}};
  std::ofstream(out + "/summary.json") << summary.dump(2) << "\n";
  std::printf("\nwrote %s/dedup-scurve.svg, dedup-pr.svg, dedup-estimate.svg, clusters.json, summary.json\n",
              out.c_str());
  return 0;
}
