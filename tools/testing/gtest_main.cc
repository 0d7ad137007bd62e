// The main() of every distlab test binary.
//
// 1. A per-case watchdog: a case that runs longer than DISTLAB_CASE_TIMEOUT_S seconds (default 60, times
//    DISTLAB_TIMEOUT_SCALE) is failed with a message naming the case and what it was waiting for
//    (distlab::testing::Activity), and the process exits, so a hang never stalls a test run.
// 2. The grader's record channel. When the grader's runner starts a case it hands over, in the environment, a
//    pipe's descriptor number (DISTLAB_RECORD_FD, a random number), a key made for this case alone
//    (DISTLAB_RECORD_KEY) and the case to run (DISTLAB_CASE). ReadRecordChannel takes them before any other
//    static initializer of the binary runs (constructor priority 101; the grader refuses student objects
//    that bring prioritised initializers of their own) and wipes them from the environment, in place, so
//    neither getenv, nor the environment a constructor receives, nor /proc/self/environ shows them; the case
//    name never appears on the command line. The harness then writes "<key> HELLO" once main() runs,
//    "<key> START <case>" when the case starts and "<key> <verdict> <case>" (PASS, FAIL or SKIP) when it
//    ends, and forgets the key. The runner trusts nothing else: not the exit code alone, not stdout, not XML;
//    a line without the key fails the case. (tools/grader/README.md: what this protects and what it cannot.)
// 3. The grading seed (DISTLAB_GRADING_SEED, also set by the runner) is not taken here: test_support.cc reads
//    it with a constructor of the same priority, beside GradingSeed(), and leaves it in the environment.
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
#include <vector>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

extern char** environ;

namespace {

// The record channel's settings: plain zero-initialised storage, so no constructor runs on it after
// ReadRecordChannel has filled it.
struct RecordChannel {
  int fd_plus_one;  // 0: no channel
  char key[72];
  char case_name[1024];
};
RecordChannel g_channel;

// Copies the value of NAME=value out of the environment, overwrites the variable's bytes where they are, and
// removes it from environ. Returns false when the variable is absent or its value does not fit.
bool TakeFromEnvironment(const char* name, char* out, size_t cap) {
  const size_t len = std::strlen(name);
  bool found = false;
  for (char** e = environ; e != nullptr && *e != nullptr;) {
    if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=') {
      const char* value = *e + len + 1;
      const size_t n = std::strlen(value);
      if (n < cap) {
        std::memcpy(out, value, n + 1);
        found = true;
      }
      std::memset(*e, 0, len + 1 + n);
      for (char** f = e; *f != nullptr; ++f) f[0] = f[1];  // the next entry moves into this slot
      continue;
    }
    ++e;
  }
  return found;
}

__attribute__((constructor(101))) void ReadRecordChannel() {
  char fd_text[32] = {0};
  const bool have_fd = TakeFromEnvironment("DISTLAB_RECORD_FD", fd_text, sizeof fd_text);
  const bool have_key = TakeFromEnvironment("DISTLAB_RECORD_KEY", g_channel.key, sizeof g_channel.key);
  const bool have_case = TakeFromEnvironment("DISTLAB_CASE", g_channel.case_name, sizeof g_channel.case_name);
  if (!have_fd || !have_key || !have_case) return;
  const int fd = std::atoi(fd_text);
  if (fd > 2 && ::fcntl(fd, F_GETFD) != -1) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // a program the test execs must not inherit the channel
    g_channel.fd_plus_one = fd + 1;
  }
}

void WriteRecord(const std::string& what) {
  if (g_channel.fd_plus_one == 0) return;
  std::string line = std::string(g_channel.key) + " " + what + "\n";
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(g_channel.fd_plus_one - 1, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

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
  void OnTestStart(const ::testing::TestInfo& info) override {
    WriteRecord(std::string("START ") + info.test_suite_name() + "." + info.name());
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* r = info.result();
    const char* verdict = r->Skipped() ? "SKIP" : (r->Passed() ? "PASS" : "FAIL");
    WriteRecord(std::string(verdict) + " " + info.test_suite_name() + "." + info.name());
    // One case per process: what runs after this (static destructors, atexit hooks) has no key to use.
    std::memset(g_channel.key, 0, sizeof g_channel.key);
    g_channel.fd_plus_one = 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Under the grader the case to run arrives with the channel, not on the command line.
  std::vector<char*> args(argv, argv + argc);
  std::string filter;
  if (g_channel.fd_plus_one != 0) {
    filter = std::string("--gtest_filter=") + g_channel.case_name;
    args.push_back(filter.data());
  }
  args.push_back(nullptr);
  argc = static_cast<int>(args.size()) - 1;
  argv = args.data();
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();

  double limit_s = 60;
  if (const char* s = std::getenv("DISTLAB_CASE_TIMEOUT_S")) {
    double v = std::atof(s);
    if (v > 0) limit_s = v;
  }
  limit_s *= distlab::testing::TimeoutScale();
  listeners.Append(new CaseWatchdog(limit_s));

  if (g_channel.fd_plus_one != 0) {
    listeners.Append(new RecordListener);
    WriteRecord("HELLO");
  }
  return RUN_ALL_TESTS();
}
