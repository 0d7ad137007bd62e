// Runs a test binary's communicators on another backend, for the GPU variants of the labs' tests
// (tools/build_defs/gpu.bzl: gpu_variant). The labs' tests make their communicators with default options
// (comm::RunRanks(n, body)) and keep their tensors in host memory; with DISTLAB_TEST_BACKEND=nccl this
// library makes those defaults the nccl backend with host staging (testing.h: SetDefaultBackend,
// CommOptions::host_staging), so every unchanged case runs its communication through NCCL on real GPUs, one
// rank per GPU.
//
// A binary's cases need up to DISTLAB_GPU_RANKS ranks (set by gpu_variant). NCCL refuses two ranks of one
// communicator on one GPU, so:
//   * with that many GPUs or more, every case runs, in this process;
//   * with none (or without the nccl backend or its libraries), every case is reported skipped, with a
//     message naming the GPUs needed and found, and none runs;
//   * with some but fewer, each case runs in a process of its own (this binary again, one --gtest_filter
//     each): a case that asks for more ranks than there are GPUs is ended at that CommInitAll (testing.h:
//     SetCommInitObserver) and reported skipped ("needs N GPUs, found K"); the others pass or fail as usual.
// Skips are never passes. GoogleTest 1.12 reports the cases of a GTEST_SKIP in a global environment as
// passed, so in the last two modes this environment reports the cases itself -- on stdout, in GoogleTest's
// words, and in the XML file Bazel reads -- and ends the program. Unset or "threads", nothing changes; any
// other value fails every case naming the variable.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/comm/comm.h"
#include "reference/comm/testing.h"
#include "reference/viz/viz.h"

namespace distlab::testing {
namespace {

int RanksNeeded() {
  const char* env = std::getenv("DISTLAB_GPU_RANKS");
  const int n = env ? std::atoi(env) : 1;
  return n >= 1 ? n : 1;
}

// viz::XmlEscape, with newlines kept as character references (an XML parser turns a raw one in an attribute
// into a space; the summarizer finds the reason after "file:line&#x0A;", as GoogleTest writes it).
std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : viz::XmlEscape(s)) {
    if (c == '\n') {
      out += "&#x0A;";
    } else {
      out += c;
    }
  }
  return out;
}

// The XML file GoogleTest would write: GTEST_OUTPUT=xml:PATH, else Bazel's XML_OUTPUT_FILE; "" for none.
std::string XmlPath() {
  if (const char* o = std::getenv("GTEST_OUTPUT")) {
    const std::string v = o;
    if (v.rfind("xml:", 0) == 0) return v.substr(4);
  }
  const char* b = std::getenv("XML_OUTPUT_FILE");
  return b ? b : "";
}

// One case's outcome, for Report.
struct Outcome {
  const ::testing::TestInfo* info;
  enum Verdict { kPassed, kFailed, kSkipped } verdict;
  std::string message;  // the skip reason or the failure's output
};

// The cases the filter selects, in order.
std::vector<const ::testing::TestInfo*> SelectedCases() {
  std::vector<const ::testing::TestInfo*> cases;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      if (suite.GetTestInfo(j)->should_run()) cases.push_back(suite.GetTestInfo(j));
    }
  }
  return cases;
}

std::string FullName(const ::testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

// Prints the summary in GoogleTest's words, writes the XML file (GoogleTest's format) and ends the program:
// status 1 when a case failed, else 0.
[[noreturn]] void Report(const std::vector<Outcome>& outcomes) {
  std::ostringstream suites;
  int passed = 0, failed = 0, skipped = 0;
  for (size_t i = 0; i < outcomes.size();) {
    const std::string suite = outcomes[i].info->test_suite_name();
    std::ostringstream cases;
    int n = 0, f = 0, s = 0;
    for (; i < outcomes.size() && suite == outcomes[i].info->test_suite_name(); ++i) {
      const Outcome& o = outcomes[i];
      ++n;
      cases << "    <testcase name=\"" << XmlEscape(o.info->name()) << "\" status=\"run\" result=\""
            << (o.verdict == Outcome::kSkipped ? "skipped" : "completed") << "\" time=\"0\" classname=\""
            << XmlEscape(suite) << "\"";
      if (o.verdict == Outcome::kPassed) {
        ++passed;
        cases << " />\n";
        continue;
      }
      const char* tag = o.verdict == Outcome::kSkipped ? "skipped" : "failure";
      if (o.verdict == Outcome::kSkipped) {
        ++s, ++skipped;
      } else {
        ++f, ++failed;
      }
      cases << ">\n      <" << tag << " message=\""
            << XmlEscape(std::string(__FILE__) + ":" + std::to_string(__LINE__) + "\n" + o.message)
            << "\" type=\"\"/>\n    </testcase>\n";
    }
    suites << "  <testsuite name=\"" << XmlEscape(suite) << "\" tests=\"" << n << "\" failures=\"" << f
           << "\" disabled=\"0\" skipped=\"" << s << "\" errors=\"0\" time=\"0\">\n"
           << cases.str() << "  </testsuite>\n";
  }
  if (passed > 0) std::printf("[  PASSED  ] %d tests.\n", passed);
  if (skipped > 0) std::printf("[  SKIPPED ] %d tests, listed above.\n", skipped);
  if (failed > 0) std::printf("[  FAILED  ] %d tests, listed above.\n", failed);
  std::fflush(stdout);
  const std::string path = XmlPath();
  if (!path.empty()) {
    std::ofstream xml(path, std::ios::trunc);
    xml << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"" << outcomes.size()
        << "\" failures=\"" << failed << "\" disabled=\"0\" errors=\"0\" time=\"0\" name=\"AllTests\">\n"
        << suites.str() << "</testsuites>\n";
    xml.close();
    if (!xml) {
      std::fprintf(stderr, "test_backend: cannot write %s\n", path.c_str());
      std::_Exit(1);
    }
  }
  std::_Exit(failed > 0 ? 1 : 0);
}

// Reports every selected case as skipped for `reason`; none runs.
[[noreturn]] void SkipEveryCase(const std::string& reason) {
  std::vector<Outcome> outcomes;
  for (const ::testing::TestInfo* info : SelectedCases()) {
    std::printf("[ SKIPPED  ] %s\n", FullName(*info).c_str());
    outcomes.push_back({info, Outcome::kSkipped, reason});
  }
  std::printf("%s\n", reason.c_str());
  Report(outcomes);
}

// The exit status and marker line of a case process that asked for more ranks than there are GPUs.
constexpr int kNeedsMoreGpus = 77;
constexpr const char* kNeedsMarker = "DISTLAB_NEEDS_GPUS ";

// Runs `argv` with `env`, its stdout and stderr into *output; returns the wait status.
int RunCaseProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   std::string* output) {
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) {
    *output = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls until execve
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execve("/proc/self/exe", args.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    *output = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof(buf))) > 0 || (got < 0 && errno == EINTR)) {
    if (got > 0) output->append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// A case process's output, indented, so that its summary lines are not read as this program's.
std::string Indented(const std::string& output) {
  std::string out;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    out += "    " + output.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// Runs each selected case in a process of its own, with `gpus` GPUs for its ranks; reports and exits.
[[noreturn]] void RunEachCaseAlone(int gpus, int needed) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("XML_OUTPUT_FILE=", 0) == 0 || kv.rfind("GTEST_OUTPUT=", 0) == 0 ||
        kv.rfind("DISTLAB_RECORD_FD=", 0) == 0) {
      continue;
    }
    env.push_back(kv);
  }
  env.push_back("DISTLAB_TEST_BACKEND_GPUS=" + std::to_string(gpus));
  std::printf(
      "DISTLAB_TEST_BACKEND=nccl: this binary's cases use up to %d ranks and this machine has %d GPU%s: "
      "each case runs in a process of its own, and one that needs more ranks is skipped\n",
      needed, gpus, gpus == 1 ? "" : "s");
  std::vector<Outcome> outcomes;
  for (const ::testing::TestInfo* info : SelectedCases()) {
    const std::string name = FullName(*info);
    std::printf("[ RUN      ] %s\n", name.c_str());
    std::fflush(stdout);
    std::string output;
    const int status =
        RunCaseProcess({"/proc/self/exe", "--gtest_filter=" + name, "--gtest_color=no"}, env, &output);
    const size_t marker = output.find(kNeedsMarker);
    Outcome o{info, Outcome::kFailed, ""};
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == kNeedsMoreGpus &&
        marker != std::string::npos) {
      const int ranks = std::atoi(output.c_str() + marker + std::strlen(kNeedsMarker));
      o = {info, Outcome::kSkipped,
           "needs " + std::to_string(ranks) + " GPUs (one rank per GPU on the nccl backend), found " +
               std::to_string(gpus)};
      std::printf("[ SKIPPED  ] %s: %s\n", name.c_str(), o.message.c_str());
    } else if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
               output.find("[  SKIPPED ] 1 test") != std::string::npos) {
      o = {info, Outcome::kSkipped, "skipped in its own process: " + output};
      std::printf("%s[ SKIPPED  ] %s\n", Indented(output).c_str(), name.c_str());
    } else if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
               output.find("[  PASSED  ] 1 test") != std::string::npos) {
      o.verdict = Outcome::kPassed;
      std::printf("[       OK ] %s\n", name.c_str());
    } else {
      o.message = output.size() > 4000 ? output.substr(output.size() - 4000) : output;
      if (status < 0 || !WIFEXITED(status)) {
        o.message += "\n(the case's process " +
                     std::string(status >= 0 && WIFSIGNALED(status)
                                     ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                     : "did not run") +
                     ")";
      }
      std::printf("%s[  FAILED  ] %s\n", Indented(output).c_str(), name.c_str());
    }
    std::fflush(stdout);
    outcomes.push_back(o);
  }
  Report(outcomes);
}

// The most ranks the nccl backend can make here (0 when it cannot run at all), with the reason it cannot make
// `needed` in *why.
int GpusFor(int needed, std::string* why) {
  const absl::Status all = comm::BackendAvailable(comm::Backend::kNccl, needed);
  if (all.ok()) return needed;
  *why = std::string(all.message());
  for (int k = needed - 1; k >= 1; --k) {
    if (comm::BackendAvailable(comm::Backend::kNccl, k).ok()) return k;
  }
  return 0;
}

class NcclBackendEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const int ranks = RanksNeeded();
    std::string why;
    const int gpus = GpusFor(ranks, &why);
    if (gpus == ranks) return;  // every case runs here
    if (gpus == 0) {
      SkipEveryCase("DISTLAB_TEST_BACKEND=nccl: this binary's cases use up to " + std::to_string(ranks) +
                    " ranks, one per GPU; " + why);
    }
    RunEachCaseAlone(gpus, ranks);
  }
};

class BadBackendEnvironment : public ::testing::Environment {
 public:
  explicit BadBackendEnvironment(std::string value) : value_(std::move(value)) {}
  void SetUp() override { FAIL() << "DISTLAB_TEST_BACKEND='" << value_ << "' is not one of threads, nccl"; }

 private:
  std::string value_;
};

const bool installed = [] {
  const char* env = std::getenv("DISTLAB_TEST_BACKEND");
  const std::string backend = env ? env : "";
  if (backend.empty() || backend == "threads") return false;
  if (backend == "nccl") {
    comm::SetDefaultBackend(comm::Backend::kNccl, /*host_staging=*/true);
    if (const char* gpus = std::getenv("DISTLAB_TEST_BACKEND_GPUS")) {
      // A case process of RunEachCaseAlone: a communicator of more ranks than GPUs ends it, saying how many.
      const int limit = std::atoi(gpus);
      comm::SetCommInitObserver([limit](int nranks, comm::Backend b) {
        if (b != comm::Backend::kNccl || nranks <= limit) return;
        std::fprintf(stderr, "\n%s%d\n", kNeedsMarker, nranks);
        std::fflush(stderr);
        std::_Exit(kNeedsMoreGpus);
      });
    } else {
      ::testing::AddGlobalTestEnvironment(new NcclBackendEnvironment());
    }
  } else {
    ::testing::AddGlobalTestEnvironment(new BadBackendEnvironment(backend));
  }
  return true;
}();

}  // namespace
}  // namespace distlab::testing
