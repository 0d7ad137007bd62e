// Hidden tests, Lab 2 stage C: how worker and main-process deaths look from the other side. Each case ends
// with no leaked child process, file descriptor or shared-memory segment.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
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

using ::testing::HasSubstr;
using testing::LeakCheck;
using ::testing::Not;
using testing::ShmEntries;

enum class Fault { kThrow, kExit3, kExit0, kSigkill, kSigsegv, kSigbus, kRagged };

// Samples are [i, i]; sample `at` misbehaves in the way `fault` says.
class Faulty : public MapDataset {
 public:
  Faulty(int64_t n, int64_t at, Fault fault) : n_(n), at_(at), fault_(fault) {}
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
          return Sample{{3}, {0, 0, 0}};
      }
    }
    return Sample{{2}, {static_cast<float>(i), static_cast<float>(i)}};
  }

 private:
  int64_t n_, at_;
  Fault fault_;
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

TEST(WorkerExit, ExceptionRethrownAtItsBatchPosition) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl,
                         DataLoader::Create(std::make_shared<Faulty>(10, 5, Fault::kThrow), Opts(2, 2)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const std::vector<pid_t> pids = dl->worker_pids();
    ASSERT_EQ(pids.size(), 2u);
    Batch b;
    for (int k = 0; k < 2; ++k) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
      ASSERT_TRUE(more);
      EXPECT_EQ(b.position, k);
    }
    auto bad = dl->Next(&b);  // batch 2 = samples 4, 5, made by worker 0
    ASSERT_FALSE(bad.ok());
    const std::string msg(bad.status().message());
    EXPECT_THAT(
        msg, HasSubstr("Caught std::runtime_error in DataLoader worker process 0. Original: bad sample 5"));
    // The worker caught it and lives on: the epoch continues with batches 3 and 4.
    for (int k = 3; k < 5; ++k) {
      ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
      ASSERT_TRUE(more);
      EXPECT_EQ(b.position, k);
    }
  }
  leaks.Check(prefix);
}

// " (worker pid P)" ends every worker error: P is the pid of the worker that threw (worker 0 here), so a
// user can find that process's own logs.
TEST(WorkerExit, ExceptionEndsWithTheWorkersPid) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl,
                         DataLoader::Create(std::make_shared<Faulty>(10, 5, Fault::kThrow), Opts(2, 2)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const std::vector<pid_t> pids = dl->worker_pids();
    ASSERT_EQ(pids.size(), 2u);
    int batches = 0;
    const absl::Status st = ReadUntilError(*dl, &batches);
    ASSERT_FALSE(st.ok()) << "the worker's exception never reached the caller";
    EXPECT_EQ(batches, 2) << "the error belongs to batch 2 (samples 4, 5)";
    EXPECT_THAT(std::string(st.message()),
                ::testing::EndsWith(" (worker pid " + std::to_string(pids[0]) + ")"))
        << "a worker's error must end with ' (worker pid P)', P the pid of worker 0 that threw";
  }
  leaks.Check(prefix);
}

void ExpectDeath(Fault fault, int64_t at, int dead_worker, const std::string& want, int leaked_segments) {
  LeakCheck leaks;
  std::string prefix;
  {
    LoaderOptions o = Opts(2, 2);
    ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Faulty>(12, at, fault), o));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    const std::vector<pid_t> pids = dl->worker_pids();
    ASSERT_EQ(pids.size(), 2u);
    int batches = 0;
    absl::Status st = ReadUntilError(*dl, &batches);
    ASSERT_FALSE(st.ok()) << "the worker's death went unnoticed";
    EXPECT_LE(batches, at / 2) << "a batch at or after the dead one was delivered";
    const std::string msg(st.message());
    EXPECT_THAT(msg, HasSubstr("DataLoader worker (pid " + std::to_string(pids[dead_worker]) + ")"));
    EXPECT_THAT(msg, HasSubstr(want));
    Batch b;
    EXPECT_FALSE(dl->Next(&b).ok()) << "after a worker died, every call reports the error";
    ASSERT_OK(dl->Shutdown());
    EXPECT_EQ(dl->reclaimed_segments(), leaked_segments);
    if (leaked_segments > 0) {
      EXPECT_THAT(dl->tracker_report(), HasSubstr("There appear to be " + std::to_string(leaked_segments) +
                                                  " leaked shared_memory"));
    }
  }
  leaks.Check(prefix);
}

// Sample 4 is the first of batch 2 (worker 0): it dies before making a segment.
TEST(WorkerExit, ExitCodeIsReported) {
  ExpectDeath(Fault::kExit3, 4, 0, "exited unexpectedly with exit code 3", 0);
}

TEST(WorkerExit, ExitZeroMidEpochIsStillUnexpected) {
  ExpectDeath(Fault::kExit0, 4, 0, "exited unexpectedly with exit code 0", 0);
}

// Sample 3 is the second of batch 1 (worker 1): its segment exists when it dies, and the tracker finds it.
TEST(WorkerExit, SigkillIsReportedAndItsSegmentReclaimed) {
  ExpectDeath(Fault::kSigkill, 3, 1, "is killed by signal: Killed", 1);
}

TEST(WorkerExit, SegfaultIsReported) {
  ExpectDeath(Fault::kSigsegv, 4, 0, "is killed by signal: Segmentation fault", 0);
}

TEST(WorkerExit, BusErrorHintsAtSharedMemory) {
  ExpectDeath(Fault::kSigbus, 4, 0, "is killed by signal: Bus error", 0);
  EXPECT_THAT(DescribeWorkerExit(77, SIGBUS), HasSubstr("shared memory"));
  EXPECT_THAT(DescribeWorkerExit(77, SIGKILL), Not(HasSubstr("shared memory")));
}

TEST(WorkerExit, DescribeWorkerExitReadsWaitStatus) {
  EXPECT_EQ(DescribeWorkerExit(1234, 5 << 8),
            "DataLoader worker (pid 1234) exited unexpectedly with exit code 5");
  EXPECT_EQ(DescribeWorkerExit(1234, SIGKILL), "DataLoader worker (pid 1234) is killed by signal: Killed");
  EXPECT_EQ(DescribeWorkerException("std::out_of_range", 3, "index 9"),
            "Caught std::out_of_range in DataLoader worker process 3. Original: index 9");
}

TEST(WorkerExit, FailedFetchUnlinksItsSegment) {
  LeakCheck leaks;
  std::string prefix;
  {
    // Batch 1 = samples 4..7 (worker 1): the segment is made at sample 4, sample 5 throws.
    ASSERT_OK_AND_ASSIGN(auto dl,
                         DataLoader::Create(std::make_shared<Faulty>(8, 5, Fault::kThrow), Opts(4, 2)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    int batches = 0;
    absl::Status st = ReadUntilError(*dl, &batches);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(batches, 1);
    EXPECT_TRUE(ShmEntries(prefix).empty()) << "the failed batch's segment was not unlinked";
    ASSERT_OK(dl->Shutdown());
    EXPECT_EQ(dl->reclaimed_segments(), 0);
  }
  leaks.Check(prefix);
}

TEST(WorkerExit, RaggedBatchInAWorkerNamesBothShapes) {
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl,
                         DataLoader::Create(std::make_shared<Faulty>(3, 2, Fault::kRagged), Opts(3, 1)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    auto r = dl->Next(&b);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("[3]"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("[2]"));
    EXPECT_TRUE(ShmEntries(prefix).empty()) << "the failed batch's segment was not unlinked";
  }
  leaks.Check(prefix);
}

// The main process (a child of this test) is SIGKILLed while its workers hold unread segments. This test
// becomes the subreaper of the orphaned workers, so it can wait for them and see how fast they leave.
TEST(WorkerExit, WorkersExitWhenTheMainProcessIsKilled) {
  int info[2];
  ASSERT_EQ(::pipe(info), 0);
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  std::fflush(nullptr);
  const pid_t main_pid = ::fork();
  ASSERT_GE(main_pid, 0);
  if (main_pid == 0) {
    ::close(info[0]);
    LoaderOptions o = Opts(1, 2);
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
  char buf[256] = {0};
  pollfd p{info[0], POLLIN, 0};
  ASSERT_GT(::poll(&p, 1, 20000), 0) << "the main process never reported its workers";
  ASSERT_GT(::read(info[0], buf, sizeof buf - 1), 0);
  ::close(info[0]);
  char prefix[128];
  int segments = 0, w0 = 0, w1 = 0;
  ASSERT_EQ(std::sscanf(buf, "%127s %d %d %d", prefix, &segments, &w0, &w1), 4) << buf;
  EXPECT_GT(segments, 0) << "the scenario needs unread segments";
  ASSERT_EQ(::kill(main_pid, SIGKILL), 0);
  ASSERT_EQ(::waitpid(main_pid, nullptr, 0), main_pid);
  const auto start = std::chrono::steady_clock::now();
  const auto bound = distlab::testing::Scaled(std::chrono::milliseconds(3000));
  for (pid_t w : {w0, w1}) {
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
// the parent has "parent\n" buffered and an atexit handler; the worker writes "worker\n".
int g_atexit_fd = -1;
void AtexitHandler() { (void)!::write(g_atexit_fd, "atexit\n", 7); }

TEST(WorkerExit, ForkWorkerFlushesOnceAndSkipsAtexit) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(out[0]);
    FILE* f = ::fdopen(out[1], "w");
    std::setvbuf(f, nullptr, _IOFBF, 4096);
    std::fputs("parent\n", f);  // buffered, not yet written
    g_atexit_fd = out[1];
    std::atexit(AtexitHandler);
    auto pid = ForkWorker([f] {
      std::fputs("worker\n", f);
      return 7;
    });
    if (!pid.ok()) ::_exit(2);
    int status = 0;
    ::waitpid(*pid, &status, 0);
    std::fflush(f);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
    (void)!::write(out[1], code == 7 ? "code7\n" : "badcode\n", code == 7 ? 6 : 8);
    ::_exit(0);
  }
  ::close(out[1]);
  std::string all;
  char buf[256];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  // "parent" once (flushed before fork, not copied into the worker), "worker" once (flushed by the worker),
  // no "atexit" (the worker left with _exit), and the worker's return value as its exit code.
  EXPECT_EQ(all, "parent\nworker\ncode7\n");
}

TEST(WorkerExit, TrackerReclaimsAndReportsLeakedSegments) {
  const std::string prefix = "distlab_test_tracker_" + std::to_string(::getpid()) + "_";
  for (int i = 0; i < 2; ++i) {
    int fd = ::shm_open(("/" + prefix + std::to_string(i)).c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  ASSERT_OK_AND_ASSIGN(auto names, ReclaimSegments(prefix));
  EXPECT_EQ(names, (std::vector<std::string>{prefix + "0", prefix + "1"}));
  EXPECT_TRUE(ShmEntries(prefix).empty());
  EXPECT_EQ(LeakReport(2),
            "resource_tracker: There appear to be 2 leaked shared_memory objects to clean up at shutdown");
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
  LeakCheck leaks;
  std::string prefix;
  {
    ASSERT_OK_AND_ASSIGN(auto dl,
                         DataLoader::Create(std::make_shared<Faulty>(40, -1, Fault::kThrow), Opts(2, 2)));
    prefix = dl->shm_prefix();
    ASSERT_OK(dl->StartEpoch());
    Batch b;
    ASSERT_OK_AND_ASSIGN(bool more, dl->Next(&b));
    ASSERT_TRUE(more);
    ASSERT_OK(dl->Shutdown());
    EXPECT_TRUE(dl->worker_pids().empty());
    EXPECT_EQ(b.data()[0], 0.0f) << "a batch handed out stays valid after shutdown";
  }
  leaks.Check(prefix);
}

}  // namespace
}  // namespace distlab::dataloader
