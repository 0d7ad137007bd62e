// Hidden tests, Lab 3 stage D: corpus files, the cluster report, scores, and the evaluation of the whole
// pipeline against exact all-pairs Jaccard on a generated corpus with planted near-duplicates.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dedup/corpus_io.h"
#include "labs/dedup/synthetic.h"
#include "nlohmann/json.hpp"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Pairs = std::vector<std::pair<int, int>>;

fs::path TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  fs::path p = fs::path(root ? root : fs::temp_directory_path().string()) / name;
  fs::remove_all(p);
  return p;
}

void Write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ReadCorpusHidden, FolderSkipsHiddenFilesAndSubfolders) {
  const fs::path dir = TempDir("folder");
  fs::create_directories(dir / "sub");
  Write(dir / "b.txt", "second");
  Write(dir / "a.txt", "first\nline");
  Write(dir / ".hidden", "no");
  Write(dir / "sub" / "c.txt", "no");
  ASSERT_OK_AND_ASSIGN(Corpus c, ReadCorpus(dir.string()));
  EXPECT_EQ(c.format, CorpusFormat::kFolder);
  ASSERT_EQ(c.documents.size(), 2u);
  EXPECT_EQ(c.documents[0].name, "a.txt");
  EXPECT_EQ(c.documents[0].text, "first\nline");
  EXPECT_EQ(c.documents[1].name, "b.txt");
}

TEST(ReadCorpusHidden, JsonLinesIdsAndErrors) {
  const fs::path dir = TempDir("jsonl");
  fs::create_directories(dir);
  Write(dir / "ok.jsonl", "{\"id\": 7, \"text\": \"seven\"}\n\n{\"text\": \"no id\", \"extra\": 1}\n");
  ASSERT_OK_AND_ASSIGN(Corpus c, ReadCorpus((dir / "ok.jsonl").string()));
  EXPECT_EQ(c.format, CorpusFormat::kJsonLines);
  ASSERT_EQ(c.documents.size(), 2u);
  EXPECT_EQ(c.documents[0].name, "7");
  EXPECT_EQ(c.documents[1].name, "3");
  EXPECT_EQ(c.documents[1].text, "no id");
  Write(dir / "bad.jsonl", "{\"text\": \"fine\"}\n{\"text\": 5}\n");
  const absl::Status bad = ReadCorpus((dir / "bad.jsonl").string()).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("line 2"));
  Write(dir / "junk.jsonl", "not json\n");
  EXPECT_EQ(ReadCorpus((dir / "junk.jsonl").string()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadCorpus((dir / "missing").string()).status().code(), absl::StatusCode::kNotFound);
}

TEST(WriteCorpusHidden, RoundTripsBothForms) {
  Corpus folder{CorpusFormat::kFolder, {{"x.txt", "ex"}, {"y.txt", "why\n"}, {"z.txt", "zed"}}};
  const fs::path out = TempDir("out_folder");
  ASSERT_OK(WriteCorpus(folder, {0, 2}, out.string()));
  EXPECT_EQ(Slurp(out / "x.txt"), "ex");
  EXPECT_EQ(Slurp(out / "z.txt"), "zed");
  EXPECT_FALSE(fs::exists(out / "y.txt"));

  Corpus lines{CorpusFormat::kJsonLines, {{"a", "alpha \"quoted\""}, {"b", "beta\nnewline"}}};
  const fs::path file = TempDir("out.jsonl");
  ASSERT_OK(WriteCorpus(lines, {1}, file.string()));
  ASSERT_OK_AND_ASSIGN(Corpus back, ReadCorpus(file.string()));
  ASSERT_EQ(back.documents.size(), 1u);
  EXPECT_EQ(back.documents[0].name, "b");
  EXPECT_EQ(back.documents[0].text, "beta\nnewline");
  EXPECT_EQ(WriteCorpus(lines, {2}, file.string()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClusterReportHidden, NamesMembersSurvivorAndMaxJaccard) {
  Corpus c{CorpusFormat::kFolder, {{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}}};
  DedupResult r;
  r.banding = {16, 8};
  r.clusters = {Cluster{0, {1, 3}, 3, 0.875}};
  r.kept = {0, 2, 3};
  r.removed = {1};
  const nlohmann::json j = nlohmann::json::parse(ClusterReportJson(c, r));
  EXPECT_EQ(j["documents"], 4);
  EXPECT_EQ(j["kept"], 3);
  EXPECT_EQ(j["removed"], 1);
  EXPECT_EQ(j["bands"], 16);
  EXPECT_EQ(j["rows"], 8);
  ASSERT_EQ(j["clusters"].size(), 1u);
  EXPECT_EQ(j["clusters"][0]["id"], 0);
  EXPECT_EQ(j["clusters"][0]["members"], nlohmann::json({"b", "d"}));
  EXPECT_EQ(j["clusters"][0]["survivor"], "d");
  EXPECT_DOUBLE_EQ(j["clusters"][0]["max_jaccard"].get<double>(), 0.875);
}

// max_jaccard is the double itself, written so that it reads back exactly (corpus_io.h), never rounded.
TEST(ClusterReportHidden, MaxJaccardIsWrittenExactly) {
  Corpus c{CorpusFormat::kJsonLines, {{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}, {"e", ""}}};
  DedupResult r;
  r.banding = {9, 13};
  r.clusters = {Cluster{0, {0, 1}, 0, 2.0 / 3.0}, Cluster{1, {2, 3, 4}, 2, 0.123456789012345}};
  r.kept = {0, 2};
  r.removed = {1, 3, 4};
  const std::string text = ClusterReportJson(c, r);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["clusters"][0]["max_jaccard"].get<double>(), 2.0 / 3.0) << text;
  EXPECT_EQ(j["clusters"][1]["max_jaccard"].get<double>(), 0.123456789012345) << text;
}

TEST(ScoresHidden, DefinitionsAndConventions) {
  const Scores s = ScoreIds({1, 2, 3, 4}, {2, 4, 6});
  EXPECT_DOUBLE_EQ(s.precision, 0.5);
  EXPECT_DOUBLE_EQ(s.recall, 2.0 / 3.0);
  EXPECT_NEAR(s.f1, 4.0 / 7.0, 1e-12);
  const Scores none = ScorePairs({}, {{0, 1}});
  EXPECT_DOUBLE_EQ(none.precision, 1.0);
  EXPECT_DOUBLE_EQ(none.recall, 0.0);
  EXPECT_DOUBLE_EQ(none.f1, 0.0);
  const Scores empty = ScorePairs({}, {});
  EXPECT_DOUBLE_EQ(empty.f1, 1.0);
  const Scores wrong = ScorePairs({{0, 2}}, {{0, 1}});
  EXPECT_DOUBLE_EQ(wrong.f1, 0.0);
}

// Pairs (3,4), (5,6), (4,6), (1,6): union by rank makes 3 the root, but 1 is the lowest id and is kept.
TEST(RemovedByPairsHidden, KeepsLowestIdOfEachCluster) {
  EXPECT_THAT(RemovedByPairs(8, {{3, 4}, {5, 6}, {4, 6}, {1, 6}}), ElementsAre(3, 4, 5, 6));
  EXPECT_TRUE(RemovedByPairs(3, {}).empty());
}

// ---- The evaluation: exact ground truth computed here, independently of the lab's code. ----

struct Truth {
  Pairs pairs;               // every pair with exact word-5-gram Jaccard >= threshold
  std::vector<int> removed;  // lowest id kept per cluster of those pairs
};

Truth ExactTruth(const synthetic::PlantedCorpus& corpus, double threshold) {
  const int n = static_cast<int>(corpus.words.size());
  std::vector<std::vector<size_t>> sets(n);
  for (int d = 0; d < n; ++d) {
    const auto& w = corpus.words[d];
    for (size_t i = 0; i + 5 <= w.size(); ++i) {
      std::string s = w[i];
      for (size_t j = 1; j < 5; ++j) s += ' ' + w[i + j];
      sets[d].push_back(std::hash<std::string>()(s));
    }
    std::sort(sets[d].begin(), sets[d].end());
    sets[d].erase(std::unique(sets[d].begin(), sets[d].end()), sets[d].end());
  }
  Truth t;
  std::vector<int> label(n);
  std::iota(label.begin(), label.end(), 0);
  std::function<int(int)> root = [&](int x) { return label[x] == x ? x : label[x] = root(label[x]); };
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      std::vector<size_t> common;
      std::set_intersection(sets[i].begin(), sets[i].end(), sets[j].begin(), sets[j].end(),
                            std::back_inserter(common));
      const double jac =
          static_cast<double>(common.size()) / (sets[i].size() + sets[j].size() - common.size());
      if (jac >= threshold) {
        t.pairs.push_back({i, j});
        const int ri = root(i), rj = root(j);
        label[std::max(ri, rj)] = std::min(ri, rj);  // the smaller id stays the root
      }
    }
  }
  for (int d = 0; d < n; ++d) {
    if (root(d) != d) t.removed.push_back(d);
  }
  return t;
}

double F1(size_t tp, size_t predicted, size_t truth) {
  const double p = predicted ? static_cast<double>(tp) / predicted : 1.0;
  const double r = truth ? static_cast<double>(tp) / truth : 1.0;
  return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}

// 150 originals with 0..3 near-duplicates each at target similarities uniform in [0.5, 1] (edits, insertions,
// block swaps) and surface noise. At threshold 0.8 (default k = 128 and banding) the verified pairs and the
// removed documents must both reach F1 >= 0.97 against the exact answer.
TEST(EvaluationHidden, PlantedCorpusF1AtThreshold08) {
  synthetic::PlantedOptions po;
  po.originals = 150;
  po.seed = 2026;
  const synthetic::PlantedCorpus corpus = synthetic::MakePlantedCorpus(po);
  const Truth truth = ExactTruth(corpus, 0.8);
  ASSERT_GT(truth.pairs.size(), 60u) << "the generated corpus should plant many duplicates";

  DedupOptions opt;
  opt.threshold = 0.8;
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(corpus.documents, opt));
  Pairs predicted;
  for (const SimilarPair& p : r.verified) predicted.push_back({p.i, p.j});
  Pairs tp_pairs;
  std::set_intersection(predicted.begin(), predicted.end(), truth.pairs.begin(), truth.pairs.end(),
                        std::back_inserter(tp_pairs));
  const double pair_f1 = F1(tp_pairs.size(), predicted.size(), truth.pairs.size());
  std::vector<int> tp_removed;
  std::set_intersection(r.removed.begin(), r.removed.end(), truth.removed.begin(), truth.removed.end(),
                        std::back_inserter(tp_removed));
  const double removed_f1 = F1(tp_removed.size(), r.removed.size(), truth.removed.size());
  EXPECT_GE(pair_f1, 0.97) << predicted.size() << " predicted, " << truth.pairs.size() << " true, "
                           << tp_pairs.size() << " both";
  EXPECT_GE(removed_f1, 0.97) << r.removed.size() << " removed, " << truth.removed.size() << " should be";
  std::cout << "pair F1 " << pair_f1 << " (" << truth.pairs.size() << " true pairs), removed F1 "
            << removed_f1 << " (" << truth.removed.size() << " documents), banding " << r.banding.bands
            << " x " << r.banding.rows << "\n";
  RecordProperty("pair_f1", std::to_string(pair_f1));
  RecordProperty("removed_f1", std::to_string(removed_f1));
}

// The lab's own scores agree with the ones computed here on the same evaluation.
TEST(EvaluationHidden, ScoresAgreeWithIndependentCount) {
  synthetic::PlantedOptions po;
  po.originals = 60;
  po.seed = 5;
  const synthetic::PlantedCorpus corpus = synthetic::MakePlantedCorpus(po);
  const Truth truth = ExactTruth(corpus, 0.7);
  DedupOptions opt;
  opt.threshold = 0.7;
  opt.banding = {8, 16};  // deliberately too strict: some pairs are missed, so scores are below 1
  ASSERT_OK_AND_ASSIGN(DedupResult r, Deduplicate(corpus.documents, opt));
  Pairs predicted;
  for (const SimilarPair& p : r.verified) predicted.push_back({p.i, p.j});
  Pairs tp;
  std::set_intersection(predicted.begin(), predicted.end(), truth.pairs.begin(), truth.pairs.end(),
                        std::back_inserter(tp));
  const Scores s = ScorePairs(predicted, truth.pairs);
  EXPECT_NEAR(s.recall, static_cast<double>(tp.size()) / truth.pairs.size(), 1e-12);
  EXPECT_NEAR(s.f1, F1(tp.size(), predicted.size(), truth.pairs.size()), 1e-12);
  EXPECT_LT(s.recall, 1.0);
  EXPECT_EQ(RemovedByPairs(static_cast<int>(corpus.documents.size()), truth.pairs), truth.removed);
}

}  // namespace
}  // namespace distlab::dedup
