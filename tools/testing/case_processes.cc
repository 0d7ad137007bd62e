#include "tools/testing/case_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"

extern char** environ;

namespace distlab::testing {
namespace {

constexpr const char* kResultVar = "DISTLAB_RANK_RESULT";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// This process's environment, less what tells a test binary where to report: those belong to the parent.
std::vector<std::string> InheritedEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    bool theirs = false;
    for (const char* var :
         {"TEST_PREMATURE_EXIT_FILE=", "XML_OUTPUT_FILE=", "GTEST_OUTPUT=", "TEST_SHARD_STATUS_FILE=",
          "TEST_TOTAL_SHARDS=", "TEST_SHARD_INDEX=", "GTEST_SHARD_INDEX=", "GTEST_TOTAL_SHARDS=", "RANK=",
          "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "DISTLAB_BACKEND=", "DISTLAB_STORE="}) {
      theirs |= kv.rfind(var, 0) == 0;
    }
    if (!theirs) env.push_back(kv);
  }
  return env;
}

}  // namespace

std::string RankResultPath() {
  const char* p = std::getenv(kResultVar);
  return p != nullptr ? p : "";
}

absl::StatusOr<std::vector<RankProcess>> RunCaseAsProcesses(int n, std::chrono::milliseconds deadline) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return absl::FailedPreconditionError("RunCaseAsProcesses: no test case is running");
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/case_processes_" +
                          std::to_string(::getpid()) + "_" + info->name();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir + "/store", ec);
  if (ec) return absl::InternalError("cannot make " + dir + ": " + ec.message());
  std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  std::string self = "/proc/self/exe";
  char* argv[] = {self.data(), filter.data(), nullptr};

  std::vector<pid_t> pids(n, -1);
  std::vector<int> statuses(n, 0);
  std::vector<bool> done(n, false);
  auto log = [&](int r) { return dir + "/rank" + std::to_string(r) + ".log"; };
  auto result = [&](int r) { return dir + "/rank" + std::to_string(r) + ".result"; };
  auto kill_all = [&] {
    for (int r = 0; r < n; ++r) {
      if (pids[r] > 0 && !done[r]) {
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &statuses[r], 0);
      }
    }
  };
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env = InheritedEnvironment();
    for (const std::string& kv :
         {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(n), "LOCAL_RANK=" + std::to_string(r),
          "LOCAL_WORLD_SIZE=" + std::to_string(n), std::string("DISTLAB_BACKEND=gloo"),
          "DISTLAB_STORE=file:" + dir + "/store", std::string(kResultVar) + "=" + result(r)}) {
      env.push_back(kv);
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log(r).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = ::posix_spawn(&pids[r], self.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pids[r] = -1;
      kill_all();
      return absl::InternalError("cannot start rank " + std::to_string(r) + " of " + std::to_string(n) +
                                 ": posix_spawn: " + std::strerror(rc));
    }
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (true) {
    bool all = true;
    for (int r = 0; r < n; ++r) {
      if (!done[r] && ::waitpid(pids[r], &statuses[r], WNOHANG) == pids[r]) done[r] = true;
      all = all && done[r];
    }
    if (all) break;
    if (std::chrono::steady_clock::now() > until) {
      std::string why;
      for (int r = 0; r < n; ++r) {
        if (done[r]) continue;
        why += "\nrank " + std::to_string(r) + " still ran after " + std::to_string(deadline.count()) +
               " ms (killed); its output:\n" + ReadFile(log(r));
      }
      kill_all();
      return absl::DeadlineExceededError(std::to_string(n) + " rank processes of " + info->name() + ":" +
                                         why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<RankProcess> out(n);
  for (int r = 0; r < n; ++r) {
    out[r].exit_code = WIFEXITED(statuses[r]) ? WEXITSTATUS(statuses[r]) : -1;
    out[r].output = ReadFile(log(r));
    out[r].result = ReadFile(result(r));
  }
  std::filesystem::remove_all(dir, ec);
  return out;
}

}  // namespace distlab::testing
