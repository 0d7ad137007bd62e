// The main() of every distlab test binary.
//
// 1. A per-case watchdog: a case that runs longer than DISTLAB_CASE_TIMEOUT_S seconds (default 60, times
//    DISTLAB_TIMEOUT_SCALE) is failed with a message naming the case and what it was waiting for
//    (distlab::testing::Activity), and the process exits, so a hang never stalls a test run.
// 2. The grader's record channel: when the grader's runner starts a case it passes a pipe in
//    DISTLAB_RECORD_FD. This listener writes one line per finished case: "<verdict> <case>\n", with verdict
//    PASS, FAIL or SKIP. The runner trusts nothing else: not the exit code alone, not stdout, not XML.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

namespace {

// The watchdog's state lives in a heap object that is never freed: GoogleTest deletes its listeners during
// static destruction, and the watchdog thread must never wait on a destroyed condition variable.
struct WatchdogState {
  std::mutex mu;
  std::condition_variable cv;
  std::string current;
  std::chrono::steady_clock::time_point deadline;
  bool running = false;
  double limit_s = 60;
};

class CaseWatchdog : public ::testing::EmptyTestEventListener {
 public:
  explicit CaseWatchdog(double limit_s) : state_(new WatchdogState) {
    state_->limit_s = limit_s;
    std::thread([s = state_] { Run(s); }).detach();  // never joined: the process may exit from any state
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->current = std::string(info.test_suite_name()) + "." + info.name();
    state_->deadline = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<long long>(state_->limit_s * 1000));
    state_->running = true;
    state_->cv.notify_all();
  }

  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->running = false;
    state_->cv.notify_all();
  }

 private:
  static void Run(WatchdogState* s) {
    std::unique_lock<std::mutex> lock(s->mu);
    for (;;) {
      s->cv.wait(lock, [s] { return s->running; });
      auto deadline = s->deadline;
      if (s->cv.wait_until(lock, deadline, [&] { return !s->running || s->deadline != deadline; })) {
        continue;
      }
      std::string what = distlab::testing::CurrentActivity();
      std::fprintf(stderr, "\n[ TIMEOUT  ] %s still running after %.0f s%s%s: failing it and exiting\n",
                   s->current.c_str(), s->limit_s, what.empty() ? "" : "; stuck in: ", what.c_str());
      std::fflush(stderr);
      std::_Exit(3);
    }
  }

  WatchdogState* state_;  // intentionally leaked (see WatchdogState)
};

class RecordListener : public ::testing::EmptyTestEventListener {
 public:
  explicit RecordListener(int fd) : fd_(fd) {}

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* r = info.result();
    const char* verdict = r->Skipped() ? "SKIP" : (r->Passed() ? "PASS" : "FAIL");
    std::string line = std::string(verdict) + " " + info.test_suite_name() + "." + info.name() + "\n";
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();

  double limit_s = 60;
  if (const char* s = std::getenv("DISTLAB_CASE_TIMEOUT_S")) {
    double v = std::atof(s);
    if (v > 0) limit_s = v;
  }
  limit_s *= distlab::testing::TimeoutScale();
  listeners.Append(new CaseWatchdog(limit_s));

  if (const char* s = std::getenv("DISTLAB_RECORD_FD")) {
    int fd = std::atoi(s);
    ::unsetenv("DISTLAB_RECORD_FD");
    if (fd > 2 && ::fcntl(fd, F_GETFD) != -1) {
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // children the test forks must not inherit the channel
      listeners.Append(new RecordListener(fd));
    }
  }
  return RUN_ALL_TESTS();
}
