// Lab 3 (dedup), given; not graded: the streaming tool against Deduplicate (stream_dedup.h). It runs on
// :impl, so on the starter code it fails with the TODO of the first stage it reaches.
#include "labs/dedup/stream_dedup.h"

#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "gtest/gtest.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/scale_corpus.h"
#include "labs/dedup/stream_test_util.h"
#include "labs/dedup/synthetic.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

namespace fs = std::filesystem;
using stream_testing::TmpDir;
using stream_testing::WritePlanted;

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

// The same verified pairs, in the same order, with the same exact Jaccard.
void ExpectSamePairs(const std::vector<SimilarPair>& got, const std::vector<SimilarPair>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t p = 0; p < got.size(); ++p) {
    EXPECT_EQ(got[p].i, want[p].i);
    EXPECT_EQ(got[p].j, want[p].j);
    EXPECT_EQ(got[p].jaccard, want[p].jaccard);
  }
}

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
    const std::vector<std::string> inputs = WritePlanted(planted, dir, {c.shards, c.extension});
    ASSERT_OK_AND_ASSIGN(const StreamResult got, FindNearDuplicates(inputs, options));
    EXPECT_EQ(got.documents, static_cast<int64_t>(planted.documents.size()));
    ASSERT_FALSE(expected.verified.empty());
    ExpectSamePairs(got.verified, expected.verified);
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

// --- A memory budget (StreamOptions::memory_bytes) ---
//
// At b = 16 a document costs the band tables 8 b + 16 = 144 bytes when its keys are spilled, and the least
// budget is 36 KiB (36864 bytes): C = M / 144 documents per run, and at most M / 4 KiB - 1 runs before each
// band's runs are merged into one early.
//
//   M = 128 KiB   C = 910   R = 3 for 1 821 .. 2 730 documents            every key written once, read once
//   M = 36 KiB    C = 256   8 runs merged into one after the 8th spill, then more runs, then the final merge
constexpr int64_t kLeastBudget = 36864;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What one run of the tool leaves: its result, the report, the survivors' bytes (when OUT is one file).
struct ToolRun {
  StreamResult result;
  std::string report;
  std::string survivors;
};

ToolRun RunTool(const std::vector<std::string>& inputs, const std::string& out,
                const StreamOptions& options) {
  ToolRun run;
  absl::StatusOr<StreamResult> result = FindNearDuplicates(inputs, options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return run;
  auto names = WriteSurvivors(inputs, *result, out, options);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return run;
  std::ostringstream report;
  EXPECT_TRUE(WriteStreamReport(*result, *names, report).ok());
  run.report = report.str();
  if (fs::is_regular_file(out)) run.survivors = ReadFile(out);  // a folder's files are compared by the caller
  run.result = *std::move(result);
  return run;
}

void ExpectSameAnswer(const StreamResult& got, const StreamResult& want) {
  EXPECT_EQ(got.documents, want.documents);
  EXPECT_EQ(got.candidate_pairs, want.candidate_pairs);
  ExpectSamePairs(got.verified, want.verified);
  ASSERT_EQ(got.clusters.size(), want.clusters.size());
  for (size_t c = 0; c < got.clusters.size(); ++c) {
    EXPECT_EQ(got.clusters[c].members, want.clusters[c].members);
    EXPECT_EQ(got.clusters[c].survivor, want.clusters[c].survivor);
    EXPECT_EQ(got.clusters[c].max_jaccard, want.clusters[c].max_jaccard);
  }
  EXPECT_EQ(got.removed, want.removed);
}

// About 2 250 short planted documents (900 originals of 50 words): enough for several runs per band at the
// budgets above, and quick to sign.
synthetic::PlantedCorpus SpillCorpus() {
  synthetic::PlantedOptions po;
  po.originals = 900;
  po.words = 50;
  return synthetic::MakePlantedCorpus(po);
}

// With the band tables spilled to sorted runs and merged -- three runs per band, or so many that they are
// merged early -- the verified pairs, the clusters, the report and the survivors are those of the run without
// a budget, byte for byte; the tables hold no more than the budget (what bytes_per_document counts besides:
// the offsets, one 512 KiB chunk here).
TEST(MemoryBudget, SpilledRunsGiveTheSameAnswer) {
  const synthetic::PlantedCorpus planted = SpillCorpus();
  const int64_t n = static_cast<int64_t>(planted.documents.size());
  ASSERT_GT(n, 2 * 910);
  ASSERT_LE(n, 3 * 910);
  const std::string dir = TmpDir("budget");
  const std::vector<std::string> inputs = WritePlanted(planted, dir, {1, ".jsonl"});
  StreamOptions options;
  options.dedup.threads = 2;
  options.tmp_dir = dir;
  const ToolRun unlimited = RunTool(inputs, dir + "/unlimited.jsonl", options);
  ASSERT_FALSE(unlimited.result.clusters.empty());
  EXPECT_EQ(unlimited.result.spilled_runs, 0);
  EXPECT_EQ(unlimited.result.spilled_bytes, 0);
  // Bands of this many records are sorted by their keys' bits before std::sort takes over (SortRecords):
  // the same candidates and verified pairs as Deduplicate, whose tables are hash maps.
  {
    ASSERT_OK_AND_ASSIGN(const DedupResult expected, Deduplicate(planted.documents, options.dedup));
    EXPECT_EQ(unlimited.result.candidate_pairs, expected.candidate_pairs);
    ExpectSamePairs(unlimited.result.verified, expected.verified);
  }
  const int64_t written_once = 16 * 16 * n;  // 16 bytes per record, b = 16 records per document

  for (const int64_t budget : {int64_t{128} << 10, kLeastBudget}) {
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    options.memory_bytes = budget;
    const ToolRun spilled = RunTool(inputs, dir + "/spilled" + std::to_string(budget) + ".jsonl", options);
    ExpectSameAnswer(spilled.result, unlimited.result);
    EXPECT_EQ(spilled.report, unlimited.report);
    EXPECT_EQ(spilled.survivors, unlimited.survivors);
    EXPECT_GE(spilled.result.spilled_runs, 3);
    if (budget == kLeastBudget) {
      EXPECT_GT(spilled.result.spilled_runs, 8);
      EXPECT_GT(spilled.result.spilled_bytes, written_once);  // the runs merged early were written again
    } else {
      EXPECT_EQ(spilled.result.spilled_runs, 3);
      EXPECT_EQ(spilled.result.spilled_bytes, written_once);
    }
    EXPECT_LE(spilled.result.bytes_per_document * static_cast<double>(n), budget + (512 << 10));
  }
  // The spill files were unlinked when made: only the input, the outputs and the reports remain.
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().rfind("dedup-", 0), std::string::npos) << entry.path();
  }
}

// A budget the corpus fits in changes nothing: no run is written.
TEST(MemoryBudget, CorpusThatFitsIsNotSpilled) {
  synthetic::PlantedOptions po;
  po.originals = 40;
  const synthetic::PlantedCorpus planted = synthetic::MakePlantedCorpus(po);
  const std::string dir = TmpDir("fits");
  const std::vector<std::string> inputs = WritePlanted(planted, dir, {1, ".jsonl"});
  StreamOptions options;
  options.tmp_dir = dir;
  const ToolRun unlimited = RunTool(inputs, dir + "/unlimited.jsonl", options);
  options.memory_bytes = int64_t{1} << 30;
  const ToolRun budgeted = RunTool(inputs, dir + "/budgeted.jsonl", options);
  ExpectSameAnswer(budgeted.result, unlimited.result);
  EXPECT_EQ(budgeted.report, unlimited.report);
  EXPECT_EQ(budgeted.result.spilled_runs, 0);
}

// A budget under the least useful one is refused before any work, naming that least one; so is a negative
// one.
TEST(MemoryBudget, TooSmallBudgetNamesTheMinimum) {
  const std::string dir = TmpDir("too_small");
  std::ofstream(dir + "/c.jsonl") << "{\"text\": \"a few words\"}\n";
  StreamOptions options;
  options.tmp_dir = dir;
  for (const int64_t budget : {kLeastBudget - 1, int64_t{1000}, int64_t{-1}}) {
    options.memory_bytes = budget;
    const absl::Status s = FindNearDuplicates({dir + "/c.jsonl"}, options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("the least for 16 bands is 36864 bytes"), std::string::npos) << s;
  }
  options.memory_bytes = kLeastBudget;
  EXPECT_OK(FindNearDuplicates({dir + "/c.jsonl"}, options).status());
}

// A disk that fills while runs are spilled: the run stops with ResourceExhausted naming the spill folder and
// the system's reason, and leaves no file behind. A full disk is simulated by a file-size limit
// (RLIMIT_FSIZE, with SIGXFSZ ignored), which makes write() fail with EFBIG where a full disk gives ENOSPC:
// the same failed write, which needs neither root nor a small file system in the test's sandbox. The limit
// is set in a child process (a death test, started afresh rather than forked from this one, which may run
// threads), so it binds only the code under test. The documents are a few words each, so the shingle-set
// file (8 bytes per document, flushed every 1 MB) is not written before the spill files (16 bytes per
// document and band) pass the limit: at 256 documents per run, a band's file grows by 4 KiB a run and
// passes 16 KiB at its fifth.
TEST(MemoryBudget, FullDiskWhileSpillingIsAnError) {
  const std::string dir = TmpDir("full_disk");
  {
    std::ofstream corpus(dir + "/c.jsonl");
    for (int d = 0; d < 3000; ++d) corpus << "{\"text\": \"short note number " << d << "\"}\n";
  }
  StreamOptions options;
  options.dedup.threads = 1;
  options.tmp_dir = dir;
  options.memory_bytes = kLeastBudget;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGXFSZ, SIG_IGN);
        rlimit limit;
        getrlimit(RLIMIT_FSIZE, &limit);
        limit.rlim_cur = 16 << 10;
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) std::_Exit(2);
        const absl::Status s = FindNearDuplicates({dir + "/c.jsonl"}, options).status();
        std::cerr << "status " << s << "\n";
        std::_Exit(s.code() == absl::StatusCode::kResourceExhausted ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      std::string("status RESOURCE_EXHAUSTED: cannot write a band spill file in .*/full_disk: ") +
          std::strerror(EFBIG));
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"c.jsonl"});
}

// Across ranks (threads here) each rank spills its own share under the budget, and the answer is still one
// process's without a budget.
TEST(MemoryBudget, AcrossRanksSameAnswer) {
  const synthetic::PlantedCorpus planted = SpillCorpus();
  const std::string dir = TmpDir("budget_ranks");
  const std::vector<std::string> inputs = WritePlanted(planted, dir, {2, ".jsonl"});
  StreamOptions options;
  options.dedup.threads = 1;
  options.tmp_dir = dir;
  const ToolRun unlimited = RunTool(inputs, dir + "/one", options);
  options.memory_bytes = kLeastBudget;
  std::vector<RanksResult> results(2);
  std::string report;
  const std::vector<absl::Status> statuses =
      comm::RunRanks(2, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
        ASSIGN_OR_RETURN(results[rank], FindNearDuplicatesAcrossRanks(comm, stream, inputs, options));
        ASSIGN_OR_RETURN(const auto names, WriteSurvivorsAcrossRanks(comm, stream, inputs, results[rank],
                                                                     dir + "/many", options));
        if (rank == 0) {
          std::ostringstream out;
          RETURN_IF_ERROR(WriteStreamReport(results[0].result, names, out));
          report = out.str();
        }
        return absl::OkStatus();
      });
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(statuses[r]) << "rank " << r;
    EXPECT_GE(results[r].result.spilled_runs, 3) << "rank " << r;
  }
  ExpectSameAnswer(results[0].result, unlimited.result);
  EXPECT_EQ(report, unlimited.report);
  for (const std::string& in : inputs) {
    const std::string name = fs::path(in).filename().string();
    EXPECT_EQ(ReadFile(dir + "/many/" + name), ReadFile(dir + "/one/" + name)) << name;
  }
}

}  // namespace
}  // namespace distlab::dedup
