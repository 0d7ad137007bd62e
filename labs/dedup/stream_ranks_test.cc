// Lab 3 (dedup), given; not graded: the streaming tool on several ranks (stream_dedup.h, "Several ranks")
// against the same tool on one process. The ranks are threads here (comm::RunRanks); `./labctl launch -n N`
// runs the same code as processes on Gloo. It runs on :impl, stage E included, so on the starter code it
// fails with the TODO of the first stage it reaches.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/stream_dedup.h"
#include "labs/dedup/stream_test_util.h"
#include "labs/dedup/synthetic.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "tools/testing/case_processes.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

namespace fs = std::filesystem;
using stream_testing::TmpDir;
using stream_testing::WritePlanted;

// Every document of a corpus, as stored (its JSON line or its file's bytes), in order.
std::vector<std::string> RawDocuments(const std::vector<std::string>& inputs) {
  std::vector<std::string> raw;
  auto stream = CorpusStream::Open(inputs);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return raw;
  Document doc;
  for (;;) {
    absl::StatusOr<bool> more = (*stream)->Next(doc);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    raw.push_back((*stream)->raw());
  }
  return raw;
}

// The outputs of OUT for these inputs: OUT itself, or OUT/<name> of every shard.
std::vector<std::string> Outputs(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.size() == 1 && !fs::is_directory(inputs[0])) return {out};
  if (fs::is_directory(inputs[0])) return {out};
  std::vector<std::string> outputs;
  for (const std::string& in : inputs) outputs.push_back(out + "/" + fs::path(in).filename().string());
  return outputs;
}

struct OneProcess {
  std::string report;
  std::vector<std::string> survivors;
  StreamResult result;
};

OneProcess RunOneProcess(const std::vector<std::string>& inputs, const std::string& out,
                         const StreamOptions& options) {
  OneProcess one;
  absl::StatusOr<StreamResult> result = FindNearDuplicates(inputs, options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return one;
  auto names = WriteSurvivors(inputs, *result, out, options);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return one;
  std::ostringstream report;
  EXPECT_TRUE(WriteStreamReport(*result, *names, report).ok());
  one.report = report.str();
  one.survivors = RawDocuments(Outputs(inputs, out));
  one.result = *std::move(result);
  return one;
}

struct Ranked {
  std::vector<absl::Status> statuses;
  std::string report;                // rank 0's
  std::vector<RanksResult> results;  // per rank
};

Ranked RunAcrossRanks(int n, const std::vector<std::string>& inputs, const std::string& out,
                      const StreamOptions& options) {
  Ranked r;
  r.results.resize(n);
  r.statuses = comm::RunRanks(n, [&](int rank, comm::Comm& comm, comm::Stream& stream) -> absl::Status {
    ASSIGN_OR_RETURN(r.results[rank], FindNearDuplicatesAcrossRanks(comm, stream, inputs, options));
    ASSIGN_OR_RETURN(const auto names,
                     WriteSurvivorsAcrossRanks(comm, stream, inputs, r.results[rank], out, options));
    if (rank == 0) {
      std::ostringstream report;
      RETURN_IF_ERROR(WriteStreamReport(r.results[0].result, names, report));
      r.report = report.str();
    }
    return absl::OkStatus();
  });
  return r;
}

struct Case {
  int ranks;
  int shards;  // 0: a folder of text files
  std::string extension;
  SurvivorRule survivor;
  int chunk;
};

// The report is one process's, byte for byte, and so are the survivors (in order, as stored), for shares
// of one or several files, with ranks that hold no file, for byte ranges of one plain file (whose survivors
// the ranks write in pieces that rank 0 joins), for both survivor rules and for shuffles of many small
// rounds and of one round.
TEST(StreamRanks, SameAnswerAsOneProcess) {
  synthetic::PlantedOptions po;
  po.originals = 60;
  const synthetic::PlantedCorpus planted = synthetic::MakePlantedCorpus(po);
  for (const Case& c :
       {Case{2, 1, ".jsonl", SurvivorRule::kLowestId, 7},
        Case{5, 1, ".jsonl", SurvivorRule::kRandom, 1 << 16},
        Case{2, 1, ".jsonl.zst", SurvivorRule::kLowestId, 7},
        Case{2, 4, ".jsonl.gz", SurvivorRule::kLowestId, 1 << 16},
        Case{3, 5, ".jsonl.zst", SurvivorRule::kRandom, 5}, Case{4, 3, ".jsonl", SurvivorRule::kLowestId, 3},
        Case{3, 0, "", SurvivorRule::kLowestId, 11}}) {
    SCOPED_TRACE(::testing::Message() << c.ranks << " ranks, " << c.shards << " shards " << c.extension);
    const std::string dir = TmpDir("same");
    StreamOptions options;
    options.dedup.threads = 1;
    options.dedup.survivor = c.survivor;
    options.dedup.survivor_seed = 9;
    options.tmp_dir = dir;
    options.shuffle_chunk = c.chunk;
    options.fetch_round = c.chunk;  // many rounds of verification too
    std::vector<std::string> inputs;
    if (c.shards > 0) {
      inputs = WritePlanted(planted, dir, {c.shards, c.extension, false});
    } else {
      fs::create_directories(dir + "/docs");
      for (size_t d = 0; d < planted.documents.size(); ++d) {
        std::ofstream(dir + "/docs/d" + std::to_string(1000 + d) + ".txt") << planted.documents[d];
      }
      inputs = {dir + "/docs"};
    }
    const std::string suffix = c.shards == 1 ? c.extension : "";
    const OneProcess one = RunOneProcess(inputs, dir + "/one" + suffix, options);
    ASSERT_FALSE(one.result.clusters.empty());
    const Ranked ranked = RunAcrossRanks(c.ranks, inputs, dir + "/many" + suffix, options);
    for (int r = 0; r < c.ranks; ++r) ASSERT_OK(ranked.statuses[r]) << "rank " << r;
    EXPECT_EQ(ranked.report, one.report);
    EXPECT_EQ(RawDocuments(Outputs(inputs, dir + "/many" + suffix)), one.survivors);
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos)
          << "left behind: " << e.path();
    }

    const StreamResult& got = ranked.results[0].result;
    EXPECT_EQ(got.candidate_pairs, one.result.candidate_pairs);
    ASSERT_EQ(got.verified.size(), one.result.verified.size());
    for (size_t p = 0; p < got.verified.size(); ++p) {
      EXPECT_EQ(got.verified[p].i, one.result.verified[p].i);
      EXPECT_EQ(got.verified[p].j, one.result.verified[p].j);
      EXPECT_EQ(got.verified[p].jaccard, one.result.verified[p].jaccard);
    }
    // The shares tile the corpus; every band record reaches exactly one owner.
    int64_t next = 0, sent = 0, received = 0;
    for (const RanksResult& r : ranked.results) {
      EXPECT_EQ(r.share.first_doc, next);
      next += r.share.documents;
      sent += r.share.records_sent, received += r.share.records_received;
      EXPECT_EQ(r.result.documents, one.result.documents);
      EXPECT_EQ(r.result.removed, one.result.removed);
      EXPECT_EQ(r.clusters, static_cast<int64_t>(one.result.clusters.size()));
    }
    EXPECT_EQ(next, one.result.documents);
    EXPECT_EQ(sent, one.result.documents * one.result.banding.bands);
    EXPECT_EQ(received, sent);
  }
}

// A line that is not JSON in the last rank's share: every rank fails (none waits for it), each with the
// shard and line, and no output appears.
TEST(StreamRanks, BadLineOnOneRankStopsEveryRank) {
  synthetic::PlantedOptions po;
  po.originals = 20;
  const synthetic::PlantedCorpus planted = synthetic::MakePlantedCorpus(po);
  const std::string dir = TmpDir("bad_line");
  StreamOptions options;
  options.dedup.threads = 1;
  options.tmp_dir = dir;
  const std::vector<std::string> inputs = WritePlanted(planted, dir, {3, ".jsonl", false, /*bad_line=*/4});
  const Ranked ranked = RunAcrossRanks(3, inputs, dir + "/out", options);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranked.statuses[r].code(), absl::StatusCode::kInvalidArgument) << "rank " << r;
    EXPECT_NE(ranked.statuses[r].message().find("part2.jsonl line 5: not valid JSON"), std::string::npos)
        << "rank " << r << ": " << ranked.statuses[r];
  }
  EXPECT_NE(ranked.statuses[0].message().find("rank 2: "), std::string::npos) << ranked.statuses[0];
  EXPECT_FALSE(fs::exists(dir + "/out"));
  EXPECT_FALSE(fs::exists(dir + "/out.partial"));

  // The same in the last byte range of one plain file: the line is the file's, counted by the rank that
  // holds it (its share begins two thirds of the way in).
  const std::string one = TmpDir("bad_line_one_file");
  options.tmp_dir = one;
  const int n = static_cast<int>(planted.documents.size());
  const std::vector<std::string> file = WritePlanted(planted, one, {1, ".jsonl", false, /*bad_line=*/n - 2});
  const Ranked split = RunAcrossRanks(3, file, one + "/out.jsonl", options);
  const std::string where = "part0.jsonl line " + std::to_string(n - 1) + ": not valid JSON";
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(split.statuses[r].message().find(where), std::string::npos)
        << "rank " << r << ": " << split.statuses[r] << "; expected " << where;
  }
  EXPECT_NE(split.statuses[0].message().find("rank 2: "), std::string::npos) << split.statuses[0];
  for (const fs::directory_entry& e : fs::directory_iterator(one)) {
    EXPECT_EQ(e.path().filename().string().find("out"), std::string::npos) << "left behind: " << e.path();
  }
}

// An output that exists and is not empty is refused on every rank, before pass 2 writes anything.
TEST(StreamRanks, ExistingOutputIsRefusedEverywhere) {
  synthetic::PlantedOptions po;
  po.originals = 10;
  const synthetic::PlantedCorpus planted = synthetic::MakePlantedCorpus(po);
  const std::string dir = TmpDir("exists");
  fs::create_directories(dir + "/out");
  std::ofstream(dir + "/out/keep.txt") << "mine";
  StreamOptions options;
  options.dedup.threads = 1;
  options.tmp_dir = dir;
  const std::vector<std::string> inputs = WritePlanted(planted, dir, {2, ".jsonl", false});
  const Ranked ranked = RunAcrossRanks(2, inputs, dir + "/out", options);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(ranked.statuses[r].message().find("exists and is not empty"), std::string::npos)
        << "rank " << r << ": " << ranked.statuses[r];
  }
  EXPECT_TRUE(fs::exists(dir + "/out/keep.txt"));
}

// One rank per process, as `./labctl launch -n 3 -- dedup ...` runs the tool: 3 copies of this test binary
// (tools/testing/case_processes.h) over Gloo give one process's report, and a bad line in the last share
// stops all three with its shard and line -- none is left waiting.
TEST(StreamRanks, GlooProcessesGiveOneProcesssReport) {
  if (testing::Sanitizer() == "tsan") {
    GTEST_SKIP() << "Gloo is not built with TSan: this case runs in the plain and ASan configurations";
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/gloo";
  StreamOptions options;
  options.dedup.threads = 1;
  options.shuffle_chunk = 13;
  if (const std::string result = testing::RankResultPath(); !result.empty()) {  // this process is one rank
    const std::string which = std::getenv("DEDUP_CASE");                        // set by the parent below
    std::vector<std::string> inputs;
    for (int s = 0; s < 4; ++s) inputs.push_back(dir + "/" + which + "/part" + std::to_string(s) + ".jsonl");
    options.tmp_dir = dir + "/" + which;
    comm::CommOptions opts;
    opts.timeout = testing::Scaled(std::chrono::seconds(20));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<comm::Comm> world, comm::CommInitFromEnv(opts));
    comm::Stream stream;
    const absl::Status s = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(const RanksResult found,
                       FindNearDuplicatesAcrossRanks(*world, stream, inputs, options));
      ASSIGN_OR_RETURN(const auto names, WriteSurvivorsAcrossRanks(*world, stream, inputs, found,
                                                                   dir + "/" + which + "/out", options));
      std::ostringstream report;
      RETURN_IF_ERROR(WriteStreamReport(found.result, names, report));
      std::ofstream(result) << (world->rank() == 0 ? report.str() : "");
      return absl::OkStatus();
    }();
    if (!s.ok()) std::ofstream(result) << "error: " << s.ToString();
    EXPECT_OK(world->Destroy());
    return;
  }
  synthetic::PlantedOptions po;
  po.originals = 30;
  const synthetic::PlantedCorpus planted = synthetic::MakePlantedCorpus(po);
  fs::remove_all(dir);
  fs::create_directories(dir + "/good");
  fs::create_directories(dir + "/bad");
  const std::vector<std::string> good = WritePlanted(planted, dir + "/good", {4, ".jsonl", false});
  WritePlanted(planted, dir + "/bad", {4, ".jsonl", false, /*bad_line=*/2});
  options.tmp_dir = dir + "/good";
  const OneProcess one = RunOneProcess(good, dir + "/good/one", options);

  setenv("DEDUP_CASE", "good", 1);
  absl::StatusOr<std::vector<testing::RankProcess>> ranks;
  {
    testing::Activity activity("3 gloo processes deduplicating 4 shards");
    ranks = testing::RunCaseAsProcesses(3, testing::Scaled(std::chrono::seconds(60)));
  }
  ASSERT_OK(ranks.status());
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ((*ranks)[r].exit_code, 0) << "rank " << r << "; its output:\n" << (*ranks)[r].output;
    EXPECT_EQ((*ranks)[r].result.rfind("error", 0), std::string::npos)
        << "rank " << r << ": " << (*ranks)[r].result;
  }
  EXPECT_EQ((*ranks)[0].result, one.report);
  EXPECT_EQ(RawDocuments(Outputs(good, dir + "/good/out")), one.survivors);

  setenv("DEDUP_CASE", "bad", 1);
  {
    testing::Activity activity("3 gloo processes, a bad line in the last share");
    ranks = testing::RunCaseAsProcesses(3, testing::Scaled(std::chrono::seconds(60)));
  }
  ASSERT_OK(ranks.status());
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE((*ranks)[r].result.find("part3.jsonl line 3: not valid JSON"), std::string::npos)
        << "rank " << r << ": " << (*ranks)[r].result << "\nits output:\n"
        << (*ranks)[r].output;
  }
  EXPECT_FALSE(fs::exists(dir + "/bad/out"));
  EXPECT_FALSE(fs::exists(dir + "/bad/out.partial"));
}

}  // namespace
}  // namespace distlab::dedup
