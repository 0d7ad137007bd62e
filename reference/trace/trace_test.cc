// The trace recorder and trace files: the JSON parses with the project's JSON library and follows the format
// (balanced, per-thread timestamps non-decreasing, names present) for one thread, many threads, a forked
// child and a launched rank stopped by SIGTERM; the checks catch each kind of malformed trace; merging puts
// parts on one clock.
#include "reference/trace/trace.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "reference/trace/trace_file.h"
#include "reference/trace/trace_svg.h"
#include "tools/testing/test_support.h"

namespace distlab::trace {
namespace {

using nlohmann::json;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<json> XEvents(const json& doc) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "X") out.push_back(e);
  }
  return out;
}

// Fails the test with every problem CheckTrace finds.
void ExpectWellFormed(const json& doc) {
  for (const std::string& p : CheckTrace(doc)) ADD_FAILURE() << p;
}

TEST(TraceRecorder, OffRecordsNothing) {
  ASSERT_OK(Stop());
  Clear();
  EXPECT_FALSE(Enabled());
  { Span s("ignored", "test", 0); }
  Complete("ignored too", "test", 0, NowNs(), NowNs() + 10);
  EXPECT_TRUE(XEvents(json::parse(Json())).empty());
}

TEST(TraceRecorder, SpansParseAndFollowTheFormat) {
  Start();
  SetProcessName(3, "rank 3");
  SetThreadName("rank 3 main");
  {
    Span outer("step", "test", 3);
    outer.args().Add("microbatch", 2).Add("note", "a \"quoted\"\nline").Add("nan", 0.0 / 0.0);
    Span inner("AllReduce", "comm", 3);
    inner.args().Add("count", uint64_t{1} << 40).Add("ratio", 0.25);
  }
  const int64_t t = NowNs();
  Complete("explicit", "test", 3, t, t + 1500, Args().Add("k", "v"));
  ASSERT_OK(Stop());
  const json doc = json::parse(Json());
  ExpectWellFormed(doc);
  const std::vector<json> x = XEvents(doc);
  ASSERT_EQ(x.size(), 3u);
  EXPECT_EQ(x[0]["name"], "step");  // the enclosing span first: same start, longer
  EXPECT_EQ(x[1]["name"], "AllReduce");
  EXPECT_EQ(x[0]["args"]["note"], "a \"quoted\"\nline");
  EXPECT_TRUE(x[0]["args"]["nan"].is_null());
  EXPECT_EQ(x[1]["args"]["count"], uint64_t{1} << 40);
  EXPECT_EQ(x[2]["dur"].get<double>(), 1.5);
  for (const json& e : x) {
    EXPECT_EQ(e["pid"], 3);
    EXPECT_EQ(e["tid"], CurrentTid());
  }
  bool process_named = false, thread_named = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name" && e["pid"] == 3) process_named = e["args"]["name"] == "rank 3";
    if (e["name"] == "thread_name" && e["tid"] == CurrentTid())
      thread_named = e["args"]["name"] == "rank 3 main";
  }
  EXPECT_TRUE(process_named);
  EXPECT_TRUE(thread_named);
  EXPECT_EQ(doc["otherData"]["clock"], "CLOCK_MONOTONIC");
}

TEST(TraceRecorder, ThreadsKeepTheirOwnTracks) {
  Start();
  constexpr int kThreads = 4, kSteps = 50;
  std::vector<std::thread> threads;
  std::vector<int> tids(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([i, &tids] {
      tids[i] = CurrentTid();
      SetThreadName("worker " + std::to_string(i));
      for (int s = 0; s < kSteps; ++s) {
        Span a("outer", "test", i % 2);
        Span b("inner", "test", i % 2);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_OK(Stop());
  const json doc = json::parse(Json());
  ExpectWellFormed(doc);
  std::map<int, int> per_tid;
  for (const json& e : XEvents(doc)) per_tid[e["tid"].get<int>()]++;
  ASSERT_EQ(per_tid.size(), static_cast<size_t>(kThreads));
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(per_tid[tids[i]], 2 * kSteps) << "thread " << i;
}

TEST(TraceRecorder, ForkedChildAppendsItsOwnFileAndTheParentFoldsItIn) {
  const std::string path = TempPath("fork_trace.json");
  Start(path);
  { Span s("before fork", "test", 0); }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SetThreadName("dataloader worker 0");
    { Span s("fetch", "dataloader", 0); }
    ::_exit(0);  // no atexit handlers: the child's events must already be on disk
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_OK(Stop());
  const json doc = json::parse(Slurp(path));
  ExpectWellFormed(doc);
  bool parent_event = false, child_event = false, child_named = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "before fork") parent_event = e["tid"] == CurrentTid();
    if (e["ph"] == "X" && e["name"] == "fetch") child_event = e["tid"] == child && e["ts"].get<double>() >= 0;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == child) {
      child_named = e["args"]["name"].get<std::string>().find("dataloader worker 0") != std::string::npos;
    }
  }
  EXPECT_TRUE(parent_event);
  EXPECT_TRUE(child_event) << "the child's event, on the child's tid, after the origin";
  EXPECT_TRUE(child_named);
  EXPECT_NE(::access((path + ".fork" + std::to_string(child) + ".jsonl").c_str(), F_OK), 0)
      << "the child's file is folded in and removed";
}

TEST(TraceRecorder, LaunchedRankWritesItsPartWhenStoppedBySigterm) {
  if (distlab::testing::Sanitizer() == "tsan") {
    GTEST_SKIP()
        << "TSan cannot start a thread (the part writer) in a child forked from a multi-threaded process";
  }
  const std::string path = TempPath("launched.json");
  const std::string part = path + ".rank2.json";
  std::remove(part.c_str());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv("RANK", "2", 1);
    ::setenv("WORLD_SIZE", "4", 1);
    Start(path);
    { Span s("AllReduce", "comm", 2); }
    ::kill(::getpid(), SIGTERM);  // as the launcher stops the surviving ranks
    ::sleep(30);                  // the signal ends the process long before this
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM) << "the rank dies of the signal after writing";
  const json doc = json::parse(Slurp(part));
  ExpectWellFormed(doc);
  EXPECT_EQ(doc["otherData"]["rank"], 2);
  EXPECT_EQ(doc["otherData"]["world_size"], 4);
  const std::vector<json> x = XEvents(doc);
  ASSERT_EQ(x.size(), 1u);
  EXPECT_EQ(x[0]["name"], "AllReduce");
  EXPECT_EQ(x[0]["pid"], 2);
}

json Doc(json events) { return {{"traceEvents", std::move(events)}}; }
json Named(int pid) {
  return {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", "r"}}}};
}
json X(const char* name, double ts, double dur, int tid = 1) {
  return {{"name", name}, {"ph", "X"}, {"ts", ts}, {"dur", dur}, {"pid", 0}, {"tid", tid}};
}

void ExpectProblem(const json& doc, const std::string& part) {
  const std::vector<std::string> problems = CheckTrace(doc);
  bool found = false;
  for (const std::string& p : problems) found = found || p.find(part) != std::string::npos;
  EXPECT_TRUE(found) << "expected a problem mentioning '" << part << "' in " << doc.dump();
}

TEST(TraceFile, CheckTraceFindsEachProblem) {
  EXPECT_TRUE(CheckTrace(Doc({Named(0), X("a", 0, 10), X("b", 2, 3), X("c", 10, 1)})).empty());
  ExpectProblem(json::array(), "traceEvents");
  ExpectProblem(Doc({Named(0), X("", 0, 1)}), "no name");
  ExpectProblem(Doc({Named(0), X("a", 5, 1), X("b", 4, 1)}), "before the previous event");
  ExpectProblem(Doc({Named(0), X("a", 0, 10), X("b", 5, 10)}), "ends after it");
  ExpectProblem(Doc({Named(0), X("a", 0, -1)}), "dur >= 0");
  ExpectProblem(Doc({X("a", 0, 1)}), "no process_name");
  json b = {{"name", "open"}, {"ph", "B"}, {"ts", 0}, {"pid", 0}, {"tid", 1}};
  json e = {{"name", "close"}, {"ph", "E"}, {"ts", 1}, {"pid", 0}, {"tid", 2}};
  ExpectProblem(Doc({Named(0), b}), "never ended");
  ExpectProblem(Doc({Named(0), e}), "no open B");
  // Different threads may overlap freely.
  EXPECT_TRUE(CheckTrace(Doc({Named(0), X("a", 0, 10, 1), X("b", 5, 10, 2)})).empty());
}

json Part(const std::string& boot, int64_t origin, int64_t wall, int64_t sync, int pid, double ts) {
  json other = {{"boot_id", boot}, {"origin_ns", origin}, {"wall_origin_ns", wall}};
  if (sync >= 0) other["sync_ns"] = sync;
  return {{"traceEvents",
           {Named(pid), {{"name", "op"}, {"ph", "X"}, {"ts", ts}, {"dur", 1}, {"pid", pid}, {"tid", 1}}}},
          {"otherData", other}};
}

double TsOf(const json& doc, int pid) {
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == pid) return e["ts"].get<double>();
  }
  return -1;
}

TEST(TraceFile, MergeAlignsPartsOnOneClock) {
  // One machine: the origins alone line the parts up (10 us after 1 ms vs 5 us after 3 ms).
  absl::StatusOr<json> one =
      MergeParts({Part("m", 1'000'000, 0, -1, 0, 10), Part("m", 3'000'000, 0, -1, 1, 5)}, {"rank0", "rank1"});
  ASSERT_OK(one);
  ExpectWellFormed(*one);
  EXPECT_DOUBLE_EQ(TsOf(*one, 0), 0);
  EXPECT_DOUBLE_EQ(TsOf(*one, 1), 1995);
  // Two machines with a rendezvous instant: sync at 2 ms on machine m and at 0.6 ms on machine n are the
  // same moment, so n's clock reads 1.4 ms less; its event at 0.5 ms + 100 us is 1.4 ms + 0.6 ms on m's.
  absl::StatusOr<json> two =
      MergeParts({Part("m", 1'000'000, 0, 2'000'000, 0, 10), Part("n", 500'000, 0, 600'000, 1, 100)}, {});
  ASSERT_OK(two);
  EXPECT_DOUBLE_EQ(TsOf(*two, 1) - TsOf(*two, 0), (500 + 100 + 1400) - (1000 + 10));
  EXPECT_EQ((*two)["otherData"]["alignment"][1]["by"], "rendezvous instant (sync_ns)");
  // Without one, the wall clocks: machine n's monotonic zero is wall 7 ms, m's is wall 5 ms.
  absl::StatusOr<json> wall =
      MergeParts({Part("m", 1'000'000, 6'000'000, -1, 0, 0), Part("n", 2'000'000, 9'000'000, -1, 1, 0)}, {});
  ASSERT_OK(wall);
  EXPECT_DOUBLE_EQ(TsOf(*wall, 1) - TsOf(*wall, 0), 3000);  // wall 9 ms vs 6 ms
  EXPECT_EQ((*wall)["otherData"]["alignment"][1]["by"], "wall clocks");
  EXPECT_FALSE(MergeParts({}, {}).ok());
  EXPECT_FALSE(MergeParts({json::object()}, {"empty"}).ok());
}

TEST(TraceFile, LastEventOfEachPidAndTopLevel) {
  absl::StatusOr<TraceDoc> doc =
      ParseTrace(Doc({Named(0),
                      X("a", 0, 10),
                      X("nested", 1, 2),
                      X("b", 20, 5),
                      {{"name", "late"}, {"ph", "X"}, {"ts", 3}, {"dur", 1}, {"pid", 1}, {"tid", 7}}})
                     .dump());
  ASSERT_OK(doc);
  const std::vector<TraceEvent> top = TopLevel(*doc, 0, 1);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].name, "a");
  EXPECT_EQ(top[1].name, "b");
  const auto last = LastEventOfEachPid(*doc);
  EXPECT_EQ(last.at(0).name, "b");
  EXPECT_EQ(last.at(1).name, "late");
}

TEST(TraceSvg, DrawsOneRowPerThreadAndALegend) {
  json events = {Named(0), X("F0", 0, 10), X("B0", 12, 10), X("F1", 0, 10, 2)};
  events.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 2}, {"args", {{"name", "stage 1"}}}});
  absl::StatusOr<TraceDoc> doc = ParseTrace(Doc(events).dump());
  ASSERT_OK(doc);
  SvgOptions o;
  o.title = "two stages";
  o.palette = {{"F", 0}, {"B", 1}};
  std::string svg;
  ASSERT_OK(RenderSvg(*doc, o, &svg));
  EXPECT_NE(svg.find("two stages"), std::string::npos);
  EXPECT_NE(svg.find("stage 1"), std::string::npos);
  EXPECT_NE(svg.find(">F<"), std::string::npos) << "the legend names the classes";
  EXPECT_NE(svg.find(">B<"), std::string::npos);
  o.categories = {"nothing"};
  EXPECT_FALSE(RenderSvg(*doc, o, &svg).ok());
}

}  // namespace
}  // namespace distlab::trace
