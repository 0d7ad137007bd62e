// The gloo backend and the launcher with real processes on loopback (tag "multiprocess").
//
// The ranks are mp_worker processes (see its file comment for the scenarios), started through the launcher
// (tools/launch) or directly with the launcher's variables when a test needs every rank's own exit status.
// Every wait has a deadline: a process still running at its deadline is killed and the case fails naming
// it. Under TSan the cases skip: Gloo is not instrumented, so TSan's reports there would be noise.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "reference/comm/store.h"
#include "reference/trace/trace_file.h"
#include "tools/testing/test_support.h"

namespace distlab::comm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

const char* kWorker = "reference/comm/mp_worker";
const char* kLaunch = "tools/launch/launch";

bool UnderTsan() { return distlab::testing::Sanitizer() == "tsan"; }

#define SKIP_UNDER_TSAN()                                                                \
  do {                                                                                   \
    if (UnderTsan()) {                                                                   \
      GTEST_SKIP() << "Gloo is not built with TSan: the multi-process cases run in the " \
                      "plain and ASan configurations";                                   \
    }                                                                                    \
  } while (0)

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process with extra environment variables; its stdout and stderr go to a file.
struct Proc {
  pid_t pid = -1;
  std::string log;
  int status = -1;
  bool done = false;
  std::string Output() const { return ReadFile(log); }
};

Proc Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  static int counter = 0;
  Proc p;
  p.log = TempDir() + "/proc" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".log";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s failed\n", args[0]);
    ::_exit(127);
  }
  p.pid = pid;
  return p;
}

// Waits for every process until the deadline; kills the stragglers. Returns false (and says who) on timeout.
bool WaitAll(std::vector<Proc>& procs, std::chrono::milliseconds limit, std::string* why) {
  const auto deadline = Clock::now() + limit;
  while (true) {
    bool all = true;
    for (Proc& p : procs) {
      if (p.done) continue;
      if (::waitpid(p.pid, &p.status, WNOHANG) == p.pid) {
        p.done = true;
      } else {
        all = false;
      }
    }
    if (all) return true;
    if (Clock::now() > deadline) {
      for (size_t i = 0; i < procs.size(); ++i) {
        if (procs[i].done) continue;
        ::kill(procs[i].pid, SIGKILL);
        ::waitpid(procs[i].pid, &procs[i].status, 0);
        procs[i].done = true;
        *why += "process " + std::to_string(i) + " still ran after " + std::to_string(limit.count()) +
                " ms; its output:\n" + procs[i].Output() + "\n";
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int ExitCode(const Proc& p) { return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1; }

std::map<std::string, std::string> RankEnv(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},        {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},  {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}, {"DISTLAB_BACKEND", "gloo"}};
}

int Port() {
  absl::StatusOr<int> port = FreeTcpPort();
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? *port : 0;
}

// --- Every collective against the threads backend ---

// n ranks through the launcher, each comparing `cases` collectives (and Send/Recv, Split) with the threads
// backend; the case count depends on n (Broadcast runs every root).
void CheckThroughLauncher(int n, int cases) {
  distlab::testing::Activity activity("launch -n " + std::to_string(n) + " -- mp_worker check");
  std::vector<Proc> procs = {Spawn({kLaunch, "-n", std::to_string(n), "--", kWorker, "check"}, {})};
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(40)), &why)) << why;
  const std::string out = procs[0].Output();
  EXPECT_EQ(ExitCode(procs[0]), 0) << out;
  for (int r = 0; r < n; ++r) {
    EXPECT_THAT(out, HasSubstr("[rank " + std::to_string(r) + "] rank " + std::to_string(r) + ": " +
                               std::to_string(cases) +
                               " collective cases compared with the threads backend, 0 failures"))
        << out;
  }
  EXPECT_THAT(out, Not(HasSubstr("MISMATCH")));
}

TEST(Gloo, EveryCollectiveMatchesTheThreadsBackendOnTwoProcesses) {
  SKIP_UNDER_TSAN();
  CheckThroughLauncher(2, 334);
}

TEST(Gloo, EveryCollectiveMatchesTheThreadsBackendOnFourProcesses) {
  SKIP_UNDER_TSAN();
  CheckThroughLauncher(4, 370);
}

// --- Failures ---

// Rank `victim` of n leaves (kill: SIGKILL; abort: Comm::Abort) while the others wait in an AllReduce.
void PeerLeaves(int n, int victim, const char* how) {
  const int port = Port();
  std::vector<Proc> procs;
  for (int r = 0; r < n; ++r) {
    procs.push_back(Spawn({kWorker, how, std::to_string(victim)}, RankEnv(r, n, port)));
  }
  distlab::testing::Activity activity(std::string("mp_worker ") + how + " with " + std::to_string(n) +
                                      " ranks");
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(30)), &why)) << why;
  for (int r = 0; r < n; ++r) {
    const std::string out = procs[r].Output();
    if (r == victim) {
      if (std::string(how) == "kill") {
        EXPECT_TRUE(WIFSIGNALED(procs[r].status) && WTERMSIG(procs[r].status) == SIGKILL) << out;
      } else {
        EXPECT_EQ(ExitCode(procs[r]), 0) << out;
      }
      continue;
    }
    // The worker checks the bound (5 s) and that the message names the victim; the test checks it too.
    EXPECT_EQ(ExitCode(procs[r]), 0) << "rank " << r << ":\n" << out;
    EXPECT_THAT(out, HasSubstr("blocked AllReduce ended after")) << out;
    EXPECT_THAT(out, HasSubstr("rank " + std::to_string(victim))) << out;
  }
}

TEST(Gloo, AKilledRankIsNamedByEveryOtherRankWithinTheBound) {
  SKIP_UNDER_TSAN();
  PeerLeaves(4, 2, "kill");
}

TEST(Gloo, AnAbortIsNamedByEveryOtherRank) {
  SKIP_UNDER_TSAN();
  PeerLeaves(3, 1, "abort");
}

// --- Init errors: clear, and within the timeout ---

// DISTLAB_TRACE with processes: each rank writes its part FILE.rank<R>.json (rank 2, killed, writes none),
// the parts share one monotonic clock and a rendezvous instant, they merge into one well-formed trace, and
// the last event of each survivor is the AllReduce that failed naming the lost rank.
TEST(Traces, EachRankWritesItsPartAndTheLastEventNamesTheLostRank) {
  SKIP_UNDER_TSAN();
  const int n = 3, victim = 2, port = Port();
  const std::string file = TempDir() + "/mp_trace.json";
  std::vector<Proc> procs;
  for (int r = 0; r < n; ++r) {
    std::map<std::string, std::string> env = RankEnv(r, n, port);
    env["DISTLAB_TRACE"] = file;
    procs.push_back(Spawn({kWorker, "kill", std::to_string(victim)}, env));
  }
  distlab::testing::Activity activity("mp_worker kill 2 with DISTLAB_TRACE");
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(30)), &why)) << why;
  std::vector<nlohmann::json> parts;
  std::vector<std::string> names;
  for (int r = 0; r < n; ++r) {
    const std::string part = file + ".rank" + std::to_string(r) + ".json";
    const std::string text = ReadFile(part);
    if (r == victim) {
      EXPECT_EQ(text, "") << "a SIGKILLed rank cannot write";
      continue;
    }
    ASSERT_NE(text, "") << "no part " << part << "; rank " << r << " said:\n" << procs[r].Output();
    nlohmann::json doc = nlohmann::json::parse(text);
    for (const std::string& p : trace::CheckTrace(doc)) ADD_FAILURE() << part << ": " << p;
    EXPECT_EQ(doc["otherData"]["rank"], r);
    EXPECT_TRUE(doc["otherData"].contains("sync_ns")) << "the rendezvous instant";
    if (!parts.empty()) EXPECT_EQ(doc["otherData"]["boot_id"], parts[0]["otherData"]["boot_id"]);
    parts.push_back(std::move(doc));
    names.push_back(part);
  }
  absl::StatusOr<nlohmann::json> merged = trace::MergeParts(parts, names);
  ASSERT_TRUE(merged.ok()) << merged.status();
  for (const std::string& p : trace::CheckTrace(*merged)) ADD_FAILURE() << "merged: " << p;
  EXPECT_EQ((*merged)["otherData"]["alignment"][1]["by"], "same machine: one monotonic clock");
  absl::StatusOr<trace::TraceDoc> doc = trace::ParseTrace(merged->dump());
  ASSERT_TRUE(doc.ok()) << doc.status();
  const auto last = trace::LastEventOfEachPid(*doc, "comm.stream");
  ASSERT_EQ(last.size(), 2u);
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_EQ(last.at(r).name, "AllReduce") << "rank " << r;
    const std::string status = last.at(r).args.value("status", "");
    EXPECT_THAT(status, HasSubstr("rank " + std::to_string(victim))) << status;
  }
}

TEST(Gloo, TooFewProcessesForWorldSizeIsAClearError) {
  SKIP_UNDER_TSAN();
  const int port = Port();
  std::vector<Proc> procs;
  for (int r = 0; r < 2; ++r) {
    auto env = RankEnv(r, 3, port);  // WORLD_SIZE=3 but only ranks 0 and 1 exist
    env["DISTLAB_COMM_TIMEOUT_MS"] = "1500";
    procs.push_back(Spawn({kWorker, "init"}, env));
  }
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(20)), &why)) << why;
  for (const Proc& p : procs) {
    EXPECT_EQ(ExitCode(p), 2) << p.Output();
    EXPECT_THAT(p.Output(), HasSubstr("missing: rank 2"));
    EXPECT_THAT(p.Output(), HasSubstr("WORLD_SIZE=3"));
  }
}

TEST(Gloo, RanksThatDisagreeOnWorldSizeGetAClearError) {
  SKIP_UNDER_TSAN();
  const int port = Port();
  auto env0 = RankEnv(0, 2, port);
  auto env1 = RankEnv(1, 3, port);
  env0["DISTLAB_COMM_TIMEOUT_MS"] = env1["DISTLAB_COMM_TIMEOUT_MS"] = "3000";
  std::vector<Proc> procs = {Spawn({kWorker, "init"}, env0), Spawn({kWorker, "init"}, env1)};
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(20)), &why)) << why;
  EXPECT_EQ(ExitCode(procs[1]), 2) << procs[1].Output();
  EXPECT_THAT(procs[1].Output(), HasSubstr("WORLD_SIZE=3 but rank 0 with WORLD_SIZE=2"));
  EXPECT_EQ(ExitCode(procs[0]), 2) << procs[0].Output();
  EXPECT_THAT(procs[0].Output(), HasSubstr("INVALID_ARGUMENT"));
  // A rank outside the world is refused before anything is started.
  auto bad = RankEnv(5, 2, port);
  std::vector<Proc> one = {Spawn({kWorker, "init"}, bad)};
  ASSERT_TRUE(WaitAll(one, testing::Scaled(std::chrono::seconds(10)), &why)) << why;
  EXPECT_THAT(one[0].Output(), HasSubstr("RANK=5 is out of range for WORLD_SIZE=2"));
}

TEST(Gloo, AnUnreachableStoreIsAClearErrorWithinTheTimeout) {
  SKIP_UNDER_TSAN();
  auto env = RankEnv(1, 2, Port());  // nobody serves this port: rank 0 was never started
  env["DISTLAB_COMM_TIMEOUT_MS"] = "1000";
  const auto t0 = Clock::now();
  std::vector<Proc> procs = {Spawn({kWorker, "init"}, env)};
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(15)), &why)) << why;
  EXPECT_LT(Clock::now() - t0, testing::Scaled(std::chrono::seconds(10)));
  EXPECT_EQ(ExitCode(procs[0]), 2) << procs[0].Output();
  EXPECT_THAT(procs[0].Output(), HasSubstr("is unreachable"));
  EXPECT_THAT(procs[0].Output(), HasSubstr("MASTER_ADDR/MASTER_PORT"));
}

TEST(Gloo, AFileStoreCarriesTheRendezvous) {
  SKIP_UNDER_TSAN();
  const std::string dir = TempDir() + "/filestore" + std::to_string(::getpid());
  std::vector<Proc> procs;
  for (int r = 0; r < 2; ++r) {
    auto env = RankEnv(r, 2, 1);  // MASTER_PORT is not used with a file store
    env["DISTLAB_STORE"] = "file:" + dir;
    procs.push_back(Spawn({kWorker, "init"}, env));
  }
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(20)), &why)) << why;
  EXPECT_EQ(ExitCode(procs[0]), 0) << procs[0].Output();
  EXPECT_THAT(procs[1].Output(), HasSubstr("init ok: rank 1 of 2"));
}

// --- The launcher ---

TEST(Launcher, SetsTorchrunVariablesAndPrefixesEveryLine) {
  SKIP_UNDER_TSAN();
  std::vector<Proc> procs = {Spawn({kLaunch, "-n", "3", "--", kWorker, "env"}, {})};
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(10)), &why)) << why;
  const std::string out = procs[0].Output();
  EXPECT_EQ(ExitCode(procs[0]), 0) << out;
  for (int r = 0; r < 3; ++r) {
    const std::string p = "[rank " + std::to_string(r) + "] ";
    EXPECT_THAT(out, HasSubstr(p + "RANK=" + std::to_string(r) + "\n"));
    EXPECT_THAT(out, HasSubstr(p + "WORLD_SIZE=3\n"));
    EXPECT_THAT(out, HasSubstr(p + "LOCAL_RANK=" + std::to_string(r) + "\n"));
    EXPECT_THAT(out, HasSubstr(p + "MASTER_ADDR=127.0.0.1\n"));
  }
}

TEST(Launcher, TheFirstFailureStopsTheOthersAndIsNamed) {
  SKIP_UNDER_TSAN();
  const auto t0 = Clock::now();
  // Rank 1 exits 3 after 100 ms; ranks 0 and 2 would sleep 60 s.
  std::vector<Proc> procs = {Spawn({kLaunch, "-n", "3", "--grace", "2", "--", kWorker, "fail", "1"}, {})};
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(20)), &why)) << why;
  const std::string out = procs[0].Output();
  EXPECT_LT(Clock::now() - t0, testing::Scaled(std::chrono::seconds(10))) << out;
  EXPECT_EQ(ExitCode(procs[0]), 3) << out;
  EXPECT_THAT(out, HasSubstr("rank 1 failed: exit status 3"));
  EXPECT_THAT(out, HasSubstr("FAILED: rank 1"));
}

TEST(Launcher, ASignalledRankIsNamedWithItsSignal) {
  SKIP_UNDER_TSAN();
  std::vector<Proc> procs = {
      Spawn({kLaunch, "-n", "2", "--", "/bin/sh", "-c", "[ \"$RANK\" = 1 ] && kill -9 $$; sleep 30"}, {})};
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(20)), &why)) << why;
  const std::string out = procs[0].Output();
  EXPECT_EQ(ExitCode(procs[0]), 128 + 9) << out;
  EXPECT_THAT(out, HasSubstr("rank 1 failed: killed by signal 9"));
}

TEST(Launcher, CtrlCIsForwardedAndEveryChildReaped) {
  SKIP_UNDER_TSAN();
  const std::string marker = TempDir() + "/ctrlc" + std::to_string(::getpid());
  // Each rank writes its pid, then sleeps; SIGINT must end them all.
  std::vector<Proc> procs = {Spawn(
      {kLaunch, "-n", "2", "--", "/bin/sh", "-c", "echo $$ > " + marker + ".$RANK; exec sleep 30"}, {})};
  const auto until = Clock::now() + std::chrono::seconds(10);
  while ((ReadFile(marker + ".0").empty() || ReadFile(marker + ".1").empty()) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(procs[0].pid, SIGINT);
  std::string why;
  ASSERT_TRUE(WaitAll(procs, testing::Scaled(std::chrono::seconds(15)), &why)) << why;
  EXPECT_EQ(ExitCode(procs[0]), 130) << procs[0].Output();
  EXPECT_THAT(procs[0].Output(), HasSubstr("forwarding it to every rank"));
  for (int r = 0; r < 2; ++r) {
    const int pid = std::atoi(ReadFile(marker + "." + std::to_string(r)).c_str());
    ASSERT_GT(pid, 0);
    EXPECT_NE(::kill(pid, 0), 0) << "rank " << r << " (pid " << pid << ") still runs";
  }
}

// --- Two "hosts": network namespaces joined by a veth pair ---

// Runs a shell command; returns its exit code and output.
int Sh(const std::string& cmd, std::string* out) {
  std::vector<Proc> p = {Spawn({"/bin/sh", "-c", cmd}, {})};
  std::string why;
  if (!WaitAll(p, std::chrono::seconds(10), &why)) {
    *out = why;
    return -1;
  }
  *out = p[0].Output();
  return ExitCode(p[0]);
}

TEST(TwoHosts, RanksInTwoNetworkNamespacesJoinedByAVethPair) {
  SKIP_UNDER_TSAN();
  std::string out;
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to create network namespaces (euid " << ::geteuid() << ")";
  if (Sh("command -v unshare && command -v nsenter && command -v ip", &out) != 0) {
    GTEST_SKIP() << "needs unshare, nsenter and ip (iproute2) on PATH: " << out;
  }
  // Two namespaces, each held by a sleeping process.
  std::vector<Proc> holders = {Spawn({"/usr/bin/env", "unshare", "--net", "--", "sleep", "60"}, {}),
                               Spawn({"/usr/bin/env", "unshare", "--net", "--", "sleep", "60"}, {})};
  auto cleanup = [&] {
    for (Proc& h : holders) ::kill(h.pid, SIGKILL);
    std::string ignored;
    WaitAll(holders, std::chrono::seconds(5), &ignored);
  };
  const auto until = Clock::now() + std::chrono::seconds(5);
  auto ns = [](pid_t pid) {
    char buf[64] = {0};
    const ssize_t n = ::readlink(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, n) : std::string();
  };
  const std::string mine = ns(::getpid());
  while ((ns(holders[0].pid) == mine || ns(holders[1].pid) == mine) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (ns(holders[0].pid) == mine || ns(holders[1].pid) == mine) {
    const std::string o = holders[0].Output();
    cleanup();
    GTEST_SKIP() << "unshare --net did not create a network namespace here: " << o;
  }
  const std::string a = std::to_string(holders[0].pid), b = std::to_string(holders[1].pid);
  const std::string va = "dlA" + std::to_string(::getpid() % 100000),
                    vb = "dlB" + std::to_string(::getpid() % 100000);
  const std::string setup = "set -e; ip link add " + va + " type veth peer name " + vb + "; ip link set " +
                            va + " netns " + a + "; ip link set " + vb + " netns " + b + "; nsenter -t " + a +
                            " -n sh -c 'ip addr add 10.231.0.1/24 dev " + va + " && ip link set " + va +
                            " up && ip link set lo up'; nsenter -t " + b +
                            " -n sh -c 'ip addr add 10.231.0.2/24 dev " + vb + " && ip link set " + vb +
                            " up && ip link set lo up'";
  if (Sh(setup, &out) != 0) {
    cleanup();
    GTEST_SKIP()
        << "could not build the veth pair between the namespaces (a sandbox without CAP_NET_ADMIN?): " << out;
  }
  // One launcher per "host": node 0 (rank 0, serves the store) at 10.231.0.1, node 1 (rank 1) at 10.231.0.2.
  distlab::testing::Activity activity("two launchers in two network namespaces");
  const std::string master = "10.231.0.1:29555";
  std::vector<Proc> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(
        Spawn({"/usr/bin/env", "nsenter", "-t", node == 0 ? a : b, "-n", "--", kLaunch, "-n", "1", "--nodes",
               "2", "--node-rank", std::to_string(node), "--master", master, "--", kWorker, "check"},
              {}));
  }
  std::string why;
  const bool finished = WaitAll(nodes, testing::Scaled(std::chrono::seconds(40)), &why);
  cleanup();
  ASSERT_TRUE(finished) << why;
  for (int node = 0; node < 2; ++node) {
    const std::string o = nodes[node].Output();
    EXPECT_EQ(ExitCode(nodes[node]), 0) << o;
    EXPECT_THAT(o, HasSubstr("[rank " + std::to_string(node) + "] rank " + std::to_string(node) +
                             ": 334 collective cases compared with the threads backend, 0 failures"));
  }
}

}  // namespace
}  // namespace distlab::comm
