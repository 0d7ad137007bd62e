// Public tests, Lab 2 stage C (they fork: tagged "fork").
#include "labs/dataloader/worker.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/loader.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::HasSubstr;

// Sample 2 throws (exit_code < 0) or ends the worker with std::exit(exit_code).
class Faulty : public MapDataset {
 public:
  explicit Faulty(int exit_code) : exit_code_(exit_code) {}
  int64_t size() const override { return 6; }
  Sample Get(int64_t i) const override {
    if (i == 2) {
      if (exit_code_ >= 0) std::exit(exit_code_);
      throw std::runtime_error("sample 2 is broken");
    }
    return Sample{{}, {static_cast<float>(i)}};
  }

 private:
  int exit_code_;
};

// A dataset's own exception type, and something that is not a std::exception at all.
struct BadRow : std::out_of_range {
  using std::out_of_range::out_of_range;
};
class Throwing : public MapDataset {
 public:
  int64_t size() const override { return 6; }
  Sample Get(int64_t i) const override {
    if (i == 2) throw BadRow("row 2 is cut short");
    if (i == 4) throw 7;
    return Sample{{}, {static_cast<float>(i)}};
  }
};

LoaderOptions Opts() {
  LoaderOptions o;
  o.num_workers = 1;
  o.timeout_s = 10;  // a loader that misses a death fails with a timeout instead of hanging
  return o;
}

// Batches 0 and 1 arrive; batch 2's exception arrives at position 2, as an error:
//   Caught std::runtime_error in DataLoader worker process 0. Original: sample 2 is broken (worker pid P)
TEST(WorkerExit, ExceptionArrivesAtItsPosition) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Faulty>(-1), Opts()));
  ASSERT_OK(dl->StartEpoch());
  Batch b;
  ASSERT_OK(dl->Next(&b));
  ASSERT_OK(dl->Next(&b));
  const pid_t pid = dl->worker_pids().at(0);
  auto r = dl->Next(&b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(
      std::string(r.status().message()),
      "Caught std::runtime_error in DataLoader worker process 0. Original: sample 2 is broken (worker pid " +
          std::to_string(pid) + ")");
}

// <type> is the dynamic type, demangled and fully qualified; a thrown int is named "int":
//   Caught distlab::dataloader::(anonymous namespace)::BadRow in DataLoader worker process 0. Original: row 2
//   is cut short (worker pid P)
//   Caught int in DataLoader worker process 0. Original: (not a std::exception: no message) (worker pid P)
TEST(WorkerExit, ExceptionTypeIsTheDemangledDynamicType) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Throwing>(), Opts()));
  ASSERT_OK(dl->StartEpoch());
  const std::string pid = " (worker pid " + std::to_string(dl->worker_pids().at(0)) + ")";
  std::vector<std::string> errors;
  for (int k = 0; k < 7; ++k) {
    Batch b;
    auto r = dl->Next(&b);
    if (r.ok() && !*r) break;
    if (!r.ok()) errors.push_back(std::string(r.status().message()));
  }
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(
      errors[0],
      "Caught distlab::dataloader::(anonymous namespace)::BadRow in DataLoader worker process 0. Original: "
      "row 2 is cut short" +
          pid);
  EXPECT_EQ(errors[1],
            "Caught int in DataLoader worker process 0. Original: (not a std::exception: no message)" + pid);
}

TEST(WorkerExit, InProcessExceptionNamesTheMainProcess) {
  LoaderOptions o = Opts();
  o.num_workers = 0;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Throwing>(), o));
  ASSERT_OK(dl->StartEpoch());
  Batch b;
  ASSERT_OK(dl->Next(&b));
  ASSERT_OK(dl->Next(&b));
  auto r = dl->Next(&b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      std::string(r.status().message()),
      "Caught distlab::dataloader::(anonymous namespace)::BadRow in the DataLoader main process. Original: "
      "row 2 is cut short");
}

// Reads until the first error (at most 10 calls) and returns it.
absl::Status FirstError(DataLoader& dl) {
  for (int k = 0; k < 10; ++k) {
    Batch b;
    auto r = dl.Next(&b);
    if (!r.ok()) return r.status();
    if (!*r) break;
  }
  return absl::OkStatus();
}

TEST(WorkerExit, ExitCodeIsReported) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Faulty>(3), Opts()));
  ASSERT_OK(dl->StartEpoch());
  const pid_t pid = dl->worker_pids().at(0);
  EXPECT_THAT(
      std::string(FirstError(*dl).message()),
      HasSubstr("DataLoader worker (pid " + std::to_string(pid) + ") exited unexpectedly with exit code 3"));
}

// A worker has no business ending before it is told to: exit code 0 mid-epoch is reported like any other
// (PyTorch's loader notices it only by its 5-second liveness poll; this loader reports it at once).
TEST(WorkerExit, ExitZeroIsReportedToo) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Faulty>(0), Opts()));
  ASSERT_OK(dl->StartEpoch());
  const pid_t pid = dl->worker_pids().at(0);
  const absl::Status st = FirstError(*dl);
  EXPECT_NE(st.code(), absl::StatusCode::kDeadlineExceeded) << "the exit went unnoticed: " << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("DataLoader worker (pid " + std::to_string(pid) +
                                                   ") exited unexpectedly with exit code 0"));
}

// What the parent sees of a ForkWorker child, by what its body does:
//   body               the child's wait status
//   returns 7          exited normally, exit code 7
//   returns 0          exited normally, exit code 0
//   throws             exited normally, exit code 1 (the exception's text goes to the child's stderr)
TEST(WorkerExit, ForkWorkerReturnsTheBodysExitCode) {
  const std::function<int()> bodies[] = {[] { return 7; }, [] { return 0; },
                                         []() -> int { throw std::runtime_error("the body failed"); }};
  const int want[] = {7, 0, 1};
  for (int k = 0; k < 3; ++k) {
    ASSERT_OK_AND_ASSIGN(pid_t child, ForkWorker(bodies[k]));
    ASSERT_GT(child, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "body " << k << " did not end with an exit";
    EXPECT_EQ(WEXITSTATUS(status), want[k]) << "body " << k;
  }
}

// The names under /dev/shm that start with `prefix`.
std::vector<std::string> ShmNames(const std::string& prefix) {
  std::vector<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    for (dirent* e = ::readdir(dir); e != nullptr; e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Unlinks its names when it goes, whatever the test's outcome, so that a failing case leaves nothing.
struct Unlinker {
  std::vector<std::string> names;
  ~Unlinker() {
    for (const std::string& name : names) ::shm_unlink(("/" + name).c_str());
  }
};

// /dev/shm before (p = "distlab_pub_reclaim_<id>_", q = "distlab_pub_keep_<id>_", <id> this run's own):
//   p + "w1_s0"   p + "w0_s3"   q + "x"
// ReclaimSegments(p) unlinks and returns the two names under p, sorted: {p + "w0_s3", p + "w1_s0"};
// q + "x" is left alone. The tracker then reports them as Python's resource_tracker would:
//   "resource_tracker: There appear to be 2 leaked shared_memory objects to clean up at shutdown"
// and says nothing ("") when it found nothing. An empty prefix would match every segment: InvalidArgument.
TEST(WorkerExit, ReclaimSegmentsTakesOnlyItsPrefix) {
  // The pid alone is not unique: Bazel's sandboxes give parallel runs their own pid namespaces.
  const std::string id = std::to_string(::getpid()) + "_" +
                         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::string p = "distlab_pub_reclaim_" + id + "_", q = "distlab_pub_keep_" + id + "_";
  const Unlinker cleanup{{p + "w1_s0", p + "w0_s3", q + "x"}};
  for (const std::string& name : cleanup.names) {
    const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << name;
    ::close(fd);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> unlinked, ReclaimSegments(p));
  EXPECT_EQ(unlinked, (std::vector<std::string>{p + "w0_s3", p + "w1_s0"}));
  EXPECT_TRUE(ShmNames(p).empty());
  EXPECT_EQ(ShmNames(q), std::vector<std::string>{q + "x"});
  EXPECT_EQ(LeakReport(unlinked.size()),
            "resource_tracker: There appear to be 2 leaked shared_memory objects to clean up at shutdown");
  EXPECT_EQ(LeakReport(0), "");
  EXPECT_EQ(ReclaimSegments("").status().code(), absl::StatusCode::kInvalidArgument);
}

// Every Get sleeps 30 s: the worker takes task 0 and is stuck in Get. With shutdown_timeout_s = 0.2:
//   t = 0        Shutdown sends the done signal; the worker is inside Get and does not read it
//   t = 0.2 s    the join gives up: SIGTERM (the worker has no handler: it ends)
//   (t = 0.4 s   SIGKILL, for a worker that would have ignored SIGTERM)
//   then         the worker is reaped, the tracker finds nothing under shm_prefix(), Shutdown returns OK
// Afterwards no worker is left, and a second Shutdown does nothing and returns OK.
class Sleepy : public MapDataset {
 public:
  int64_t size() const override { return 4; }
  Sample Get(int64_t i) const override {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return Sample{{}, {static_cast<float>(i)}};
  }
};

TEST(WorkerExit, ShutdownStopsAStuckWorker) {
  LoaderOptions o = Opts();
  o.shutdown_timeout_s = 0.2;
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Sleepy>(), o));
  ASSERT_OK(dl->StartEpoch());
  const pid_t pid = dl->worker_pids().at(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the worker reach Get
  ASSERT_OK(dl->Shutdown());
  EXPECT_TRUE(dl->worker_pids().empty());
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1) << "worker " << pid << " is still there (running or not reaped)";
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(ShmNames(dl->shm_prefix()).empty());
  EXPECT_OK(dl->Shutdown());
}

}  // namespace
}  // namespace distlab::dataloader
