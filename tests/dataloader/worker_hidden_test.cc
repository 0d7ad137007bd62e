// Hidden tests, Lab 2 stage C: how worker and main-process deaths look from the other side. Each case ends
// with no leaked child process, file descriptor or shared-memory segment.
//
// The cases draw the worker count (2 or 3 where a death must hit one worker among others), the batch size,
// the dataset size, which sample fails and how far into its batch, exit codes, signals, pids and names from
// the grading seed (test_util.h). The faulty batch is always the dying worker's first (position p < W), so
// whether it had made its segment yet -- and so what the tracker finds -- follows from the draw alone. Two
// cases keep their inputs: DestructorNeverHangs and ShutdownEscalatesOnlyAfterItsDeadlines check deadlines
// (their inputs are the deadlines and the sleeps, which set the case's run time and the margins its clock
// checks rely on); they have no expected value to copy either.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "labs/dataloader/worker.h"
#include "tests/dataloader/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::distlab::testing::CaseRandom;
using testing::Drawn;
using ::testing::HasSubstr;
using testing::LeakCheck;
using ::testing::Not;
using testing::ShmEntries;
using testing::Str;

enum class Fault { kThrow, kExit3, kExit0, kSigkill, kSigsegv, kSigbus, kRagged };

// Samples are [i, i]; sample `at` misbehaves in the way `fault` says (kRagged: its shape is [ragged_len]).
class Faulty : public MapDataset {
 public:
  Faulty(int64_t n, int64_t at, Fault fault, int64_t ragged_len = 3)
      : n_(n), at_(at), fault_(fault), ragged_len_(ragged_len) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    if (i == at_) {
      switch (fault_) {
        case Fault::kThrow:
          throw std::runtime_error("bad sample " + std::to_string(i));
        case Fault::kExit3:
          std::exit(3);
        case Fault::kExit0:
          std::exit(0);
        case Fault::kSigkill:
          ::raise(SIGKILL);
          break;
        case Fault::kSigsegv:
          ::signal(SIGSEGV, SIG_DFL);
          ::raise(SIGSEGV);
          break;  // default action, even
        case Fault::kSigbus:
          ::signal(SIGBUS, SIG_DFL);
          ::raise(SIGBUS);
          break;  // under a sanitizer
        case Fault::kRagged:
          return Sample{{ragged_len_}, std::vector<float>(static_cast<size_t>(ragged_len_), 0)};
      }
    }
    return Sample{{2}, {static_cast<float>(i), static_cast<float>(i)}};
  }

 private:
  int64_t n_, at_;
  Fault fault_;
  int64_t ragged_len_;
};

LoaderOptions Opts(int64_t bs, int workers) {
  LoaderOptions o;
  o.batch_size = bs;
  o.num_workers = workers;
  o.timeout_s = 10;  // a loader that misses a death fails with a timeout instead of hanging
  return o;
}

// Reads until the first error; returns it (OK if the epoch ended without one) and how many batches came.
absl::Status ReadUntilError(DataLoader& dl, int* batches) {
  *batches = 0;
  Batch b;
  for (int guard = 0; guard < 1000; ++guard) {
    auto more = dl.Next(&b);
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
    EXPECT_EQ(b.position, *batches) << "batches before the failure must come in order";
    ++*batches;
  }
  return absl::OkStatus();
}

// A drawn scenario: n samples in batches of B on W workers; sample `at` (in batch p, `offset` samples into
// it) fails, in worker p % W.
struct Scenario {
  int W;
  int64_t B, n, p, offset, at;
  int worker() const { return static_cast<int>(p % W); }
  int64_t batches() const { return (n + B - 1) / B; }
  std::string Describe() const {
    return Str("n ", n, ", batch ", B, ", ", W, " workers; sample ", at, " (batch ", p, ", made by worker ",
               worker(), ")");
  }
};

// A thrown sample anywhere but in the last batch, so that the epoch goes on after it.
Scenario DrawThrow(CaseRandom& rng) {
  Scenario s;
  s.W = static_cast<int>(rng.Int(2, 3));
  s.B = rng.Int(1, 3);
  const int64_t batches = rng.Int(3, 8);
  s.n = (batches - 1) * s.B + rng.Int(1, s.B);
  s.p = rng.Int(0, batches - 2);
  s.offset = rng.Int(0, s.B - 1);
  s.at = s.p * s.B + s.offset;
  return s;
}

TEST(WorkerExit, ExceptionRethrownAtItsBatchPosition) {
  CaseRandom rng;
  const Scenario s = DrawThrow(rng);
  SCOPED_TRACE(
      Drawn(s.Describe() + " throws std::runtime_error(\"bad sample " + std::to_string(s.at) + "\")"));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(
        auto dl, DataLoader::Create(std::make_shared<Faulty>(s.n, s.at, Fault::kThrow), Opts(s.B, s.W)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    ASSERT_EQ(dl->worker_pids().size(), static_cast<size_t>(s.W));
    Batch b;
    for (int64_t k = 0; k < s.p; ++k) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
      ASSERT_TRUE(more);
      EXPECT_EQ(b.position, k);
    }
    auto bad = dl->Next(&b);
    ASSERT_FALSE(bad.ok()) << "batch " << s.p << " must be the error";
    const std::string msg(bad.status().message());
    EXPECT_THAT(msg, HasSubstr(Str("Caught std::runtime_error in DataLoader worker process ", s.worker(),
                                   ". Original: bad sample ", s.at)));
    // The worker caught it and lives on: the epoch continues with the batches after it.
    for (int64_t k = s.p + 1; k < s.batches(); ++k) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
      ASSERT_TRUE(more) << "the epoch ended before batch " << k;
      EXPECT_EQ(b.position, k);
    }
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
    EXPECT_FALSE(more) << "the epoch has " << s.batches() << " batches";
  }
  leaks.Check(prefix);
}

// " (worker pid P)" ends every worker error: P is the pid of the worker that threw, so a user can find that
// process's own logs.
TEST(WorkerExit, ExceptionEndsWithTheWorkersPid) {
  CaseRandom rng;
  const Scenario s = DrawThrow(rng);
  SCOPED_TRACE(Drawn(s.Describe() + " throws"));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(
        auto dl, DataLoader::Create(std::make_shared<Faulty>(s.n, s.at, Fault::kThrow), Opts(s.B, s.W)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const std::vector<pid_t> pids = dl->worker_pids();
    ASSERT_EQ(pids.size(), static_cast<size_t>(s.W));
    int batches = 0;
    const absl::Status st = ReadUntilError(*dl, &batches);
    ASSERT_FALSE(st.ok()) << "the worker's exception never reached the caller";
    EXPECT_EQ(batches, s.p) << "the error belongs to batch " << s.p;
    EXPECT_THAT(
        std::string(st.message()),
        ::testing::EndsWith(" (worker pid " + std::to_string(pids[static_cast<size_t>(s.worker())]) + ")"))
        << "a worker's error must end with ' (worker pid P)', P the pid of worker " << s.worker()
        << " that threw";
  }
  leaks.Check(prefix);
}

// A death in the dying worker's first batch (p < W), `offset` samples into it: with offset 0 the worker has
// made no segment yet, with offset >= 1 it has made one (at the batch's first sample) that the tracker must
// find.
Scenario DrawDeath(CaseRandom& rng, bool inside_the_batch) {
  Scenario s;
  s.W = static_cast<int>(rng.Int(2, 3));
  s.B = rng.Int(inside_the_batch ? 2 : 1, 3);
  const int64_t batches = rng.Int(s.W + 1, 8);
  s.n = (batches - 1) * s.B + rng.Int(1, s.B);
  s.p = rng.Int(0, s.W - 1);
  s.offset = inside_the_batch ? rng.Int(1, s.B - 1) : 0;
  s.at = s.p * s.B + s.offset;
  return s;
}

void ExpectDeath(const Scenario& s, Fault fault, const std::string& want) {
  const int leaked_segments = s.offset > 0 ? 1 : 0;
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl,
                         DataLoader::Create(std::make_shared<Faulty>(s.n, s.at, fault), Opts(s.B, s.W)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const std::vector<pid_t> pids = dl->worker_pids();
    ASSERT_EQ(pids.size(), static_cast<size_t>(s.W));
    int batches = 0;
    absl::Status st = ReadUntilError(*dl, &batches);
    ASSERT_FALSE(st.ok()) << "the worker's death went unnoticed";
    EXPECT_LE(batches, s.p) << "a batch at or after the dead one was delivered";
    const std::string msg(st.message());
    EXPECT_THAT(msg, HasSubstr("DataLoader worker (pid " +
                               std::to_string(pids[static_cast<size_t>(s.worker())]) + ")"));
    EXPECT_THAT(msg, HasSubstr(want));
    Batch b;
    EXPECT_FALSE(dl->Next(&b).ok()) << "after a worker died, every call reports the error";
    ASSERT_OK(dl->Shutdown());
    EXPECT_EQ(dl->reclaimed_segments(), leaked_segments)
        << (leaked_segments ? "the dead worker had made its batch's segment: the tracker must reclaim it"
                            : "the dead worker had made no segment");
    if (leaked_segments > 0) {
      EXPECT_THAT(dl->tracker_report(), HasSubstr("There appear to be " + std::to_string(leaked_segments) +
                                                  " leaked shared_memory"));
    }
  }
  leaks.Check(prefix);
}

// The first sample of the dying worker's first batch ends it: no segment made yet.
TEST(WorkerExit, ExitCodeIsReported) {
  CaseRandom rng;
  const Scenario s = DrawDeath(rng, false);
  SCOPED_TRACE(Drawn(s.Describe() + " calls std::exit(3)"));
  ExpectDeath(s, Fault::kExit3, "exited unexpectedly with exit code 3");
}

TEST(WorkerExit, ExitZeroMidEpochIsStillUnexpected) {
  CaseRandom rng;
  const Scenario s = DrawDeath(rng, false);
  SCOPED_TRACE(Drawn(s.Describe() + " calls std::exit(0)"));
  ExpectDeath(s, Fault::kExit0, "exited unexpectedly with exit code 0");
}

// A later sample of the dying worker's first batch: its segment exists when it dies, and the tracker finds
// it.
TEST(WorkerExit, SigkillIsReportedAndItsSegmentReclaimed) {
  CaseRandom rng;
  const Scenario s = DrawDeath(rng, true);
  SCOPED_TRACE(Drawn(s.Describe() + " raises SIGKILL"));
  ExpectDeath(s, Fault::kSigkill, "is killed by signal: Killed");
}

TEST(WorkerExit, SegfaultIsReported) {
  CaseRandom rng;
  const Scenario s = DrawDeath(rng, false);
  SCOPED_TRACE(Drawn(s.Describe() + " raises SIGSEGV"));
  ExpectDeath(s, Fault::kSigsegv, "is killed by signal: Segmentation fault");
}

TEST(WorkerExit, BusErrorHintsAtSharedMemory) {
  CaseRandom rng;
  const Scenario s = DrawDeath(rng, false);
  SCOPED_TRACE(Drawn(s.Describe() + " raises SIGBUS"));
  ExpectDeath(s, Fault::kSigbus, "is killed by signal: Bus error");
  const pid_t pid = static_cast<pid_t>(rng.Int(2, 4000000));
  EXPECT_THAT(DescribeWorkerExit(pid, SIGBUS), HasSubstr("shared memory"));
  EXPECT_THAT(DescribeWorkerExit(pid, SIGKILL), Not(HasSubstr("shared memory")));
}

TEST(WorkerExit, DescribeWorkerExitReadsWaitStatus) {
  CaseRandom rng;
  const pid_t pid = static_cast<pid_t>(rng.Int(2, 4000000));
  const int code = static_cast<int>(rng.Int(0, 255));
  const int sig = std::vector<int>{
      SIGKILL, SIGTERM, SIGSEGV, SIGABRT, SIGINT, SIGHUP, SIGFPE, SIGILL}[static_cast<size_t>(rng.Int(0, 7))];
  SCOPED_TRACE(Drawn(Str("pid ", pid, ", exit code ", code, ", signal ", sig)));
  EXPECT_EQ(DescribeWorkerExit(pid, code << 8),
            Str("DataLoader worker (pid ", pid, ") exited unexpectedly with exit code ", code));
  EXPECT_EQ(DescribeWorkerExit(pid, sig),
            Str("DataLoader worker (pid ", pid, ") is killed by signal: ", ::strsignal(sig)));
  const std::string type = rng.Pick(std::vector<std::string>{"std::out_of_range", "std::runtime_error", "int",
                                                             "mylib::(anonymous namespace)::BadRow"});
  const int worker = static_cast<int>(rng.Int(0, 15));
  const std::string message = "index " + std::to_string(rng.Int(0, 999));
  EXPECT_EQ(DescribeWorkerException(type, worker, message),
            Str("Caught ", type, " in DataLoader worker process ", worker, ". Original: ", message));
}

// The failing batch is the last of the epoch and its worker's first: its segment is made at its first
// sample, a later one throws; no other batch is left in flight to hold a segment.
TEST(WorkerExit, FailedFetchUnlinksItsSegment) {
  CaseRandom rng;
  Scenario s;
  s.W = static_cast<int>(rng.Int(2, 3));
  s.B = rng.Int(2, 5);
  s.p = rng.Int(0, s.W - 1);
  const int64_t last = rng.Int(2, s.B);
  s.n = s.p * s.B + last;
  s.offset = rng.Int(1, last - 1);
  s.at = s.p * s.B + s.offset;
  SCOPED_TRACE(Drawn(s.Describe() + " throws"));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(
        auto dl, DataLoader::Create(std::make_shared<Faulty>(s.n, s.at, Fault::kThrow), Opts(s.B, s.W)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    int batches = 0;
    absl::Status st = ReadUntilError(*dl, &batches);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(batches, s.p);
    EXPECT_TRUE(ShmEntries(prefix).empty()) << "the failed batch's segment was not unlinked";
    ASSERT_OK(dl->Shutdown());
    EXPECT_EQ(dl->reclaimed_segments(), 0);
  }
  leaks.Check(prefix);
}

TEST(WorkerExit, RaggedBatchInAWorkerNamesBothShapes) {
  CaseRandom rng;
  const int64_t B = rng.Int(2, 6), at = rng.Int(1, B - 1);
  int64_t len = rng.Int(1, 5);
  if (len == 2) len = 6;
  SCOPED_TRACE(Drawn(
      Str("one batch of ", B, " samples of shape [2] on 1 worker; sample ", at, " has shape [", len, "]")));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(
        auto dl, DataLoader::Create(std::make_shared<Faulty>(B, at, Fault::kRagged, len), Opts(B, 1)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    auto r = dl->Next(&b);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(ShapeString({len})));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("[2]"));
    EXPECT_TRUE(ShmEntries(prefix).empty()) << "the failed batch's segment was not unlinked";
  }
  leaks.Check(prefix);
}

// The main process (a child of this test) is SIGKILLed while its workers hold unread segments. This test
// becomes the subreaper of the orphaned workers, so it can wait for them and see how fast they leave.
TEST(WorkerExit, WorkersExitWhenTheMainProcessIsKilled) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 3));
  const int64_t B = rng.Int(1, 3);
  SCOPED_TRACE(Drawn(Str(W, " workers, batch ", B, ", 64 samples; the main process reads one batch")));
  int info[2];
  ASSERT_EQ(::pipe(info), 0);
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  std::fflush(nullptr);
  const pid_t main_pid = ::fork();
  ASSERT_GE(main_pid, 0);
  if (main_pid == 0) {
    ::close(info[0]);
    LoaderOptions o = Opts(B, W);
    auto dl = DataLoader::Create(std::make_shared<Faulty>(64, -1, Fault::kThrow), o);
    if (!dl.ok() || !(*dl)->StartEpoch().ok()) ::_exit(2);
    Batch b;
    if (!(*dl)->Next(&b).ok()) ::_exit(2);
    // Wait (bounded) until the workers have made segments this process will never read.
    for (int i = 0; i < 2000 && ShmEntries((*dl)->shm_prefix()).empty(); ++i) ::usleep(5000);
    std::string msg = (*dl)->shm_prefix() + " " + std::to_string(ShmEntries((*dl)->shm_prefix()).size());
    for (pid_t p : (*dl)->worker_pids()) msg += " " + std::to_string(p);
    msg += "\n";
    (void)!::write(info[1], msg.data(), msg.size());
    for (;;) ::pause();
  }
  ::close(info[1]);
  char buf[512] = {0};
  pollfd p{info[0], POLLIN, 0};
  ASSERT_GT(::poll(&p, 1, 20000), 0) << "the main process never reported its workers";
  ASSERT_GT(::read(info[0], buf, sizeof buf - 1), 0);
  ::close(info[0]);
  std::istringstream in(buf);
  std::string prefix;
  int segments = 0;
  std::vector<pid_t> workers;
  in >> prefix >> segments;
  for (pid_t w; in >> w;) workers.push_back(w);
  ASSERT_EQ(workers.size(), static_cast<size_t>(W)) << buf;
  EXPECT_GT(segments, 0) << "the scenario needs unread segments";
  ASSERT_EQ(::kill(main_pid, SIGKILL), 0);
  ASSERT_EQ(::waitpid(main_pid, nullptr, 0), main_pid);
  const auto start = std::chrono::steady_clock::now();
  const auto bound = distlab::testing::Scaled(std::chrono::milliseconds(3000));
  for (pid_t w : workers) {
    int status = 0;
    pid_t r = 0;
    while ((r = ::waitpid(w, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() - start < bound) {
      ::usleep(5000);
    }
    if (r == 0) {
      ::kill(w, SIGKILL);
      ::waitpid(w, &status, 0);
      ADD_FAILURE() << "worker " << w << " outlived its main process by more than " << bound.count() << " ms";
    } else {
      EXPECT_EQ(r, w);
      EXPECT_TRUE(WIFEXITED(status)) << "worker " << w << " should leave on its own, not be killed";
    }
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  EXPECT_TRUE(ShmEntries(prefix).empty()) << "the dead main process's segments were not reclaimed";
  ReclaimSegments(prefix).IgnoreError();
}

// What a forked worker must (not) run on the way out, shown in a child so this process stays clean:
// the parent has a line buffered and an atexit handler; the worker writes a line and returns a code.
int g_atexit_fd = -1;
void AtexitHandler() { (void)!::write(g_atexit_fd, "atexit\n", 7); }

TEST(WorkerExit, ForkWorkerFlushesOnceAndSkipsAtexit) {
  CaseRandom rng;
  const int code = static_cast<int>(rng.Int(0, 120));
  const std::string parent_line = "parent " + std::to_string(rng.Int(0, 9999)) + "\n",
                    worker_line = "worker " + std::to_string(rng.Int(0, 9999)) + "\n";
  SCOPED_TRACE(Drawn(Str("the worker's body returns ", code)));
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(out[0]);
    FILE* f = ::fdopen(out[1], "w");
    std::setvbuf(f, nullptr, _IOFBF, 4096);
    std::fputs(parent_line.c_str(), f);  // buffered, not yet written
    g_atexit_fd = out[1];
    std::atexit(AtexitHandler);
    auto pid = ForkWorker([f, &worker_line, code] {
      std::fputs(worker_line.c_str(), f);
      return code;
    });
    if (!pid.ok()) ::_exit(2);
    int status = 0;
    ::waitpid(*pid, &status, 0);
    std::fflush(f);
    const std::string end = WIFEXITED(status) ? "code " + std::to_string(WEXITSTATUS(status)) + "\n"
                                              : std::string("no exit code\n");
    (void)!::write(out[1], end.data(), end.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string all;
  char buf[256];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  // The parent's line once (flushed before fork, not copied into the worker), the worker's once (flushed by
  // the worker), no "atexit" (the worker left with _exit), and the body's return value as the exit code.
  EXPECT_EQ(all, parent_line + worker_line + "code " + std::to_string(code) + "\n");
}

TEST(WorkerExit, TrackerReclaimsAndReportsLeakedSegments) {
  CaseRandom rng;
  const std::string prefix = "distlab_test_tracker_" + std::to_string(::getpid()) + "_";
  const std::string other = "distlab_test_keep_" + std::to_string(::getpid()) + "_x";  // not the prefix's
  const size_t k = static_cast<size_t>(rng.Int(0, 5));
  std::vector<std::string> names;
  while (names.size() < k) {
    const std::string name =
        prefix + "w" + std::to_string(rng.Int(0, 3)) + "_s" + std::to_string(rng.Int(0, 99));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  SCOPED_TRACE(Drawn(Str(k, " segments under the prefix, one other")));
  for (const std::string& name : names) {
    int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  int fd = ::shm_open(("/" + other).c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_OK_AND_ASSIGN(auto got, ReclaimSegments(prefix));
  std::sort(names.begin(), names.end());
  EXPECT_SAME(got, names) << "the names under the prefix, sorted";
  EXPECT_TRUE(ShmEntries(prefix).empty());
  EXPECT_EQ(ShmEntries(other).size(), 1u) << "a segment outside the prefix was unlinked";
  ::shm_unlink(("/" + other).c_str());
  EXPECT_EQ(LeakReport(k), k == 0 ? std::string()
                                  : Str("resource_tracker: There appear to be ", k,
                                        " leaked shared_memory objects to clean up at shutdown"));
  const size_t more = static_cast<size_t>(rng.Int(1, 50));
  EXPECT_EQ(LeakReport(more), Str("resource_tracker: There appear to be ", more,
                                  " leaked shared_memory objects to clean up at shutdown"));
  EXPECT_EQ(LeakReport(0), "");
}

class Stuck : public MapDataset {
 public:
  int64_t size() const override { return 4; }
  Sample Get(int64_t) const override {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return Sample{{}, {0}};
  }
};

TEST(WorkerExit, DestructorNeverHangs) {
  LeakCheck leaks;
  std::string prefix;
  const auto start = std::chrono::steady_clock::now();
  {
    LoaderOptions o = Opts(1, 2);
    o.shutdown_timeout_s = 0.3;
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Stuck>(), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            distlab::testing::Scaled(std::chrono::milliseconds(5000)));
  leaks.Check(prefix);
}

// Get never returns; on SIGTERM the worker writes the time (CLOCK_MONOTONIC) to a pipe, then either leaves or
// ignores it (and is SIGKILLed 0.2 s later).
int g_term_fd = -1;
int g_ready_fd = -1;  // Get writes one byte here once its SIGTERM handler is in place
bool g_term_ignored = false;
void OnTerm(int) {
  timespec t;
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  const int64_t ns = static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
  (void)!::write(g_term_fd, &ns, sizeof ns);
  if (!g_term_ignored) ::_exit(0);
}
class Stubborn : public MapDataset {
 public:
  int64_t size() const override { return 2; }
  Sample Get(int64_t) const override {
    struct sigaction sa = {};
    sa.sa_handler = OnTerm;
    ::sigaction(SIGTERM, &sa, nullptr);
    (void)!::write(g_ready_fd, "r", 1);
    for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return Sample{{}, {0}};
  }
};
int64_t MonotonicNs() {
  timespec t;
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// The bound loader.h states: join until shutdown_timeout_s, SIGTERM, 0.2 s more, SIGKILL. What can be
// asserted without a flaky timer: the escalation never comes early (the loader's deadlines are measured from
// after Shutdown began, and clocks do not run backwards), it comes in this order, and it ends with every
// worker reaped. The upper bound is checked only loosely (scaled): a loaded machine may run late, never
// early.
TEST(WorkerExit, ShutdownEscalatesOnlyAfterItsDeadlines) {
  if (distlab::testing::Sanitizer() == "tsan") {
    // TSan defers a signal handler until the thread next enters one of its interceptors; in a worker forked
    // from a multithreaded process the handler then runs after the SIGKILL, so there is no time to read.
    GTEST_SKIP() << "the SIGTERM handler's timing is not observable under TSan";
  }
  for (bool ignore : {false, true}) {
    int pipefd[2], readyfd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    ASSERT_EQ(::pipe(readyfd), 0);
    g_term_fd = pipefd[1];
    g_ready_fd = readyfd[1];
    g_term_ignored = ignore;
    LeakCheck leaks;
    std::string prefix;
    int64_t began = 0, ended = 0;
    {
      LoaderOptions o = Opts(1, 1);
      o.shutdown_timeout_s = 0.3;
      ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Stubborn>(), o));
      prefix = dl->shm_prefix();
      ASSERT_OK(dl->StartEpoch());
      // Wait until the worker is inside Get with its handler installed (a fixed sleep is too short under
      // a sanitizer, and a SIGTERM before the handler would kill the worker without a trace).
      pollfd ready{readyfd[0], POLLIN, 0};
      const int wait_ms =
          static_cast<int>(distlab::testing::Scaled(std::chrono::milliseconds(10000)).count());
      ASSERT_GT(::poll(&ready, 1, wait_ms), 0) << "the worker never entered Get (ignore = " << ignore << ")";
      began = MonotonicNs();
      ASSERT_OK(dl->Shutdown());
      ended = MonotonicNs();
    }
    int64_t term = 0;
    pollfd p{pipefd[0], POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 0), 0) << "the stuck worker never got SIGTERM (ignore = " << ignore << ")";
    ASSERT_EQ(::read(pipefd[0], &term, sizeof term), static_cast<ssize_t>(sizeof term));
    EXPECT_GE(term - began, 300000000) << "SIGTERM came before shutdown_timeout_s had passed";
    if (ignore) {
      // Measured on this process's clock from the call: the handler's own timestamp can run late on a
      // loaded machine, which would shorten term -> ended below the 0.2 s the loader really waited.
      EXPECT_GE(ended - began, 500000000)
          << "Shutdown returned less than shutdown_timeout_s + 0.2 s after it began, with a worker that "
             "ignores SIGTERM: SIGKILL came too early";
    }
    EXPECT_LT(ended - began,
              500000000 + distlab::testing::Scaled(std::chrono::milliseconds(2000)).count() * 1000000)
        << "Shutdown took far longer than shutdown_timeout_s + 0.2 s";
    leaks.Check(prefix);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    ::close(readyfd[0]);
    ::close(readyfd[1]);
  }
}

TEST(WorkerExit, ShutdownMidEpochLeavesNothing) {
  CaseRandom rng;
  const int W = static_cast<int>(rng.Int(1, 3));
  const int64_t B = rng.Int(1, 4), n = rng.Int((2 * W + 1) * B, 48), taken = rng.Int(1, W);
  SCOPED_TRACE(Drawn(Str("n ", n, ", batch ", B, ", ", W, " workers; Shutdown after ", taken, " batches")));
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl,
                         DataLoader::Create(std::make_shared<Faulty>(n, -1, Fault::kThrow), Opts(B, W)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    for (int64_t k = 0; k < taken; ++k) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
      ASSERT_TRUE(more);
    }
    ASSERT_OK(dl->Shutdown());
    EXPECT_TRUE(dl->worker_pids().empty());
    // The last batch taken, (taken - 1) * B .. taken * B - 1, stays valid after shutdown.
    const int64_t first = (taken - 1) * B;
    for (int64_t j = 0; j < B; ++j) {
      if (b.data()[2 * j] != static_cast<float>(first + j) ||
          b.data()[2 * j + 1] != static_cast<float>(first + j)) {
        ADD_FAILURE() << "batch " << taken - 1 << ", handed out before the shutdown, changed: sample " << j
                      << " holds " << b.data()[2 * j] << ", expected " << first + j;
        break;
      }
    }
  }
  leaks.Check(prefix);
}

}  // namespace
}  // namespace distlab::dataloader
