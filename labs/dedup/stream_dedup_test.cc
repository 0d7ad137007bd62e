// Lab 3 (dedup), given; not graded: the streaming tool against Deduplicate (stream_dedup.h). It runs on
// :impl, so on the starter code it fails with the TODO of the first stage it reaches.
#include "labs/dedup/stream_dedup.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/scale_corpus.h"
#include "labs/dedup/synthetic.h"
#include "nlohmann/json.hpp"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

namespace fs = std::filesystem;

std::string TmpDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// The planted corpus of synthetic.h (80 originals, copies at J in [0.5, 1]) as JSON lines named "doc<i>",
// split into `shards` files of `extension`.
std::vector<std::string> WritePlanted(const synthetic::PlantedCorpus& planted, const std::string& dir,
                                      int shards, const std::string& extension) {
  std::vector<std::string> paths;
  const size_t n = planted.documents.size();
  for (int s = 0; s < shards; ++s) {
    paths.push_back(dir + "/part" + std::to_string(s) + extension);
    auto sink = OpenByteSink(paths.back(), CodecOf(paths.back()));
    EXPECT_TRUE(sink.ok()) << sink.status();
    for (size_t d = n * s / shards; d < n * (s + 1) / shards; ++d) {
      const nlohmann::json line = {{"id", "doc" + std::to_string(d)}, {"text", planted.documents[d]}};
      EXPECT_TRUE((*sink)->Write(line.dump() + "\n").ok());
    }
    EXPECT_TRUE((*sink)->Close().ok());
  }
  return paths;
}

Corpus InMemory(const synthetic::PlantedCorpus& planted) {
  Corpus c;
  c.format = CorpusFormat::kJsonLines;
  for (size_t d = 0; d < planted.documents.size(); ++d)
    c.documents.push_back({"doc" + std::to_string(d), planted.documents[d]});
  return c;
}

struct Case {
  int shards;
  std::string extension;
  int threads;
  SurvivorRule survivor;
};

// The same verified pairs, clusters and report as Deduplicate on the same documents, whatever the shards,
// codecs, threads and survivor rule; the survivors written are Deduplicate's kept documents, in order.
TEST(StreamDedup, AgreesWithDeduplicate) {
  synthetic::PlantedOptions po;
  po.originals = 80;
  const synthetic::PlantedCorpus planted = synthetic::MakePlantedCorpus(po);
  const Corpus corpus = InMemory(planted);
  for (const Case& c :
       {Case{1, ".jsonl", 1, SurvivorRule::kLowestId}, Case{3, ".jsonl.gz", 3, SurvivorRule::kRandom},
        Case{2, ".jsonl.zst", 2, SurvivorRule::kLowestId}}) {
    SCOPED_TRACE(c.extension);
    const std::string dir = TmpDir("agree");
    StreamOptions options;
    options.dedup.threads = c.threads;
    options.dedup.survivor = c.survivor;
    options.dedup.survivor_seed = 5;
    options.tmp_dir = dir;
    ASSERT_OK_AND_ASSIGN(const DedupResult expected, Deduplicate(planted.documents, options.dedup));
    const std::vector<std::string> inputs = WritePlanted(planted, dir, c.shards, c.extension);
    ASSERT_OK_AND_ASSIGN(const StreamResult got, FindNearDuplicates(inputs, options));
    EXPECT_EQ(got.documents, static_cast<int64_t>(planted.documents.size()));
    ASSERT_EQ(got.verified.size(), expected.verified.size());
    ASSERT_FALSE(expected.verified.empty());
    for (size_t p = 0; p < got.verified.size(); ++p) {
      EXPECT_EQ(got.verified[p].i, expected.verified[p].i);
      EXPECT_EQ(got.verified[p].j, expected.verified[p].j);
      EXPECT_EQ(got.verified[p].jaccard, expected.verified[p].jaccard);
    }
    EXPECT_EQ(got.removed, static_cast<int64_t>(expected.removed.size()));
    const std::string out = dir + (c.shards == 1 ? "/out" + c.extension : "/out");
    ASSERT_OK_AND_ASSIGN(const auto names, WriteSurvivors(inputs, got, out, options));
    std::ostringstream report;
    ASSERT_OK(WriteStreamReport(got, names, report));
    // The same JSON, key order included; for a ClusterReportJson that writes nlohmann's dump(2), as the
    // solution does, the same bytes.
    EXPECT_EQ(nlohmann::ordered_json::parse(report.str()),
              nlohmann::ordered_json::parse(ClusterReportJson(corpus, expected)));

    std::vector<std::string> outputs = {out};
    if (c.shards > 1) {
      outputs.clear();
      for (const std::string& in : inputs) outputs.push_back(out + "/" + fs::path(in).filename().string());
    }
    ASSERT_OK_AND_ASSIGN(auto kept, CorpusStream::Open(outputs));
    Document doc;
    for (int d : expected.kept) {
      ASSERT_OK_AND_ASSIGN(const bool more, kept->Next(doc));
      ASSERT_TRUE(more);
      EXPECT_EQ(doc.name, "doc" + std::to_string(d));
    }
    ASSERT_OK_AND_ASSIGN(const bool more, kept->Next(doc));
    EXPECT_FALSE(more);
  }
}

// A document ShingleSet rejects stops the run with an error naming its file and its index, and the lab's
// message. (In JSON lines, nlohmann already rejects invalid UTF-8 as a bad line: corpus_stream_test.)
TEST(StreamDedup, BadDocumentIsNamed) {
  const std::string dir = TmpDir("bad_doc");
  fs::create_directories(dir + "/docs");
  std::ofstream(dir + "/docs/a.txt") << "fine words here";
  std::ofstream(dir + "/docs/b.txt") << "ab\xC3(cd";
  StreamOptions options;
  options.tmp_dir = dir;
  const absl::Status s = FindNearDuplicates({dir + "/docs"}, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("b.txt (document 1): invalid UTF-8 at byte offset 2"), std::string::npos) << s;
}

// Holdout quality on a corpus of gencorpus's kind (10^4 documents, targets in [0.5, 1], t = 0.8): against the
// exact truth, co-membership F1 >= 0.99 with the tool's default banding.
TEST(StreamDedup, CoMembershipF1AgainstExactJaccard) {
  const std::string dir = TmpDir("quality");
  scale::ScaleOptions so;
  so.documents = 10000;
  ASSERT_OK_AND_ASSIGN(const scale::ScaleCorpus corpus, scale::ScaleCorpus::Create(so));
  {
    auto sink = OpenByteSink(dir + "/c.jsonl.zst", Codec::kZstd);
    ASSERT_TRUE(sink.ok());
    std::string lines;
    for (int64_t p = 0; p < corpus.size(); ++p) corpus.AppendJsonLine(p, lines);
    ASSERT_TRUE((*sink)->Write(lines).ok());
    ASSERT_TRUE((*sink)->Close().ok());
    nlohmann::json pairs = nlohmann::json::array();
    for (const scale::TruePair& p : scale::TruePairs(corpus, 0.8, 2)) pairs.push_back({p.i, p.j, p.jaccard});
    std::ofstream(dir + "/truth.json") << nlohmann::json{{"pairs", pairs}}.dump();
  }
  StreamOptions options;
  options.tmp_dir = dir;
  ASSERT_OK_AND_ASSIGN(const StreamResult got, FindNearDuplicates({dir + "/c.jsonl.zst"}, options));
  ASSERT_OK_AND_ASSIGN(const auto names,
                       WriteSurvivors({dir + "/c.jsonl.zst"}, got, dir + "/out.jsonl.zst", options));
  ASSERT_OK_AND_ASSIGN(const TruthScores s, ScoreAgainstTruth(got, names, dir + "/truth.json"));
  EXPECT_EQ(s.pairs.precision, 1.0);  // verification is exact
  EXPECT_GE(s.co_membership.f1, 0.99) << "P " << s.co_membership.precision << " R " << s.co_membership.recall;
}

}  // namespace
}  // namespace distlab::dedup
