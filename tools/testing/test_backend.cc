// Runs a test binary's communicators on another backend, for the GPU variants of the labs' tests
// (tools/build_defs/gpu.bzl: gpu_variant). The labs' tests make their communicators with default options
// (comm::RunRanks(n, body)) and keep their tensors in host memory; with DISTLAB_TEST_BACKEND=nccl this library
// makes those defaults the nccl backend with host staging (comm.h: SetDefaultBackend, CommOptions::host_staging),
// so every unchanged case runs its communication through NCCL on real GPUs, one rank per GPU.
//
// A binary's cases need up to DISTLAB_GPU_RANKS ranks (set by gpu_variant). NCCL refuses two ranks of one
// communicator on one GPU, so on a machine with fewer GPUs, or without the nccl backend or its libraries, every
// case is reported skipped, with a message naming the GPUs needed and found, and none runs: never a pass.
// (GoogleTest 1.12 reports the cases of a GTEST_SKIP in a global environment as passed, so the environment
// writes the skips itself -- to stdout and to the XML file Bazel reads -- and ends the program.)
// Unset or "threads", nothing changes; any other value fails every case naming the variable.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/comm/comm.h"

namespace distlab::testing {
namespace {

int RanksNeeded() {
  const char* env = std::getenv("DISTLAB_GPU_RANKS");
  const int n = env ? std::atoi(env) : 1;
  return n >= 1 ? n : 1;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\n': out += "&#x0A;"; break;
      default: out += c;
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

// Reports every selected case as skipped for `reason` (stdout and the XML file, in GoogleTest's format) and
// ends the program with status 0. Called before any case ran.
[[noreturn]] void SkipEveryCase(const std::string& reason) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  std::ostringstream suites;
  int total = 0;
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    std::ostringstream cases;
    int n = 0;
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(j);
      if (!info.should_run()) continue;
      ++n;
      std::printf("[ SKIPPED  ] %s.%s\n", suite.name(), info.name());
      cases << "    <testcase name=\"" << XmlEscape(info.name()) << "\" status=\"run\" result=\"skipped\" time=\"0\" "
            << "classname=\"" << XmlEscape(suite.name()) << "\">\n      <skipped message=\""
            << XmlEscape(std::string(__FILE__) + ":" + std::to_string(__LINE__) + "\n" + reason) << "\"/>\n"
            << "    </testcase>\n";
    }
    if (n == 0) continue;
    total += n;
    suites << "  <testsuite name=\"" << XmlEscape(suite.name()) << "\" tests=\"" << n << "\" failures=\"0\" "
           << "disabled=\"0\" skipped=\"" << n << "\" errors=\"0\" time=\"0\">\n" << cases.str() << "  </testsuite>\n";
  }
  std::printf("%s\n[  SKIPPED ] %d tests, none of them run.\n", reason.c_str(), total);
  std::fflush(stdout);
  const std::string path = XmlPath();
  if (!path.empty()) {
    std::ofstream xml(path, std::ios::trunc);
    xml << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"" << total
        << "\" failures=\"0\" disabled=\"0\" errors=\"0\" time=\"0\" name=\"AllTests\">\n"
        << suites.str() << "</testsuites>\n";
    xml.close();
    if (!xml) {
      std::fprintf(stderr, "test_backend: cannot write %s\n", path.c_str());
      std::_Exit(1);
    }
  }
  std::_Exit(0);
}

class NcclBackendEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const int ranks = RanksNeeded();
    const absl::Status available = comm::BackendAvailable(comm::Backend::kNccl, ranks);
    if (!available.ok()) {
      SkipEveryCase("DISTLAB_TEST_BACKEND=nccl: this binary's cases use up to " + std::to_string(ranks) +
                    " ranks, one per GPU; " + std::string(available.message()));
    }
  }
};

class BadBackendEnvironment : public ::testing::Environment {
 public:
  explicit BadBackendEnvironment(std::string value) : value_(std::move(value)) {}
  void SetUp() override {
    FAIL() << "DISTLAB_TEST_BACKEND='" << value_ << "' is not one of threads, nccl";
  }

 private:
  std::string value_;
};

const bool installed = [] {
  const char* env = std::getenv("DISTLAB_TEST_BACKEND");
  const std::string backend = env ? env : "";
  if (backend.empty() || backend == "threads") return false;
  if (backend == "nccl") {
    comm::SetDefaultBackend(comm::Backend::kNccl, /*host_staging=*/true);
    ::testing::AddGlobalTestEnvironment(new NcclBackendEnvironment());
  } else {
    ::testing::AddGlobalTestEnvironment(new BadBackendEnvironment(backend));
  }
  return true;
}();

}  // namespace
}  // namespace distlab::testing
