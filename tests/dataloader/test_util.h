// Shared by the hidden tests of Lab 2: leak checks (child processes, file descriptors, shared-memory
// segments), small datasets whose samples say where they were made, and what seeded cases need.
//
// Most cases draw their inputs (dataset sizes, batch sizes, worker and rank counts, seeds, corpora, the
// faulty sample, the stop points of a resume) from a distlab::testing::CaseRandom, so each grading checks
// other inputs (tools/testing/test_support.h). Such a case opens with SCOPED_TRACE(Drawn(...)): every failure
// in it then ends with the drawn input and testing::SeedNote(). Its assertions say which property failed and
// where the result first differs from the reference (FirstDifference, EXPECT_SAME), never a whole expected
// array.
#ifndef DISTLAB_TESTS_DATALOADER_TEST_UTIL_H_
#define DISTLAB_TESTS_DATALOADER_TEST_UTIL_H_

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/loader.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader::testing {

inline int CountOpenFds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n - 1;  // the directory stream's own descriptor
}

inline std::vector<std::string> ShmEntries(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (!prefix.empty() && name.compare(0, prefix.size(), prefix) == 0) out.push_back(name);
    }
    ::closedir(d);
  }
  return out;
}

// True when this process has no child at all (running or zombie).
inline bool NoChildren() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

// Records the descriptors open at construction; Check() fails the test on any child, fd or segment left.
class LeakCheck {
 public:
  LeakCheck() : fds_(CountOpenFds()) {}
  void Check(const std::string& shm_prefix) const {
    EXPECT_TRUE(NoChildren()) << "a worker process was left behind (not reaped)";
    EXPECT_EQ(CountOpenFds(), fds_) << "file descriptors leaked";
    EXPECT_TRUE(ShmEntries(shm_prefix).empty())
        << "shared-memory segments left under /dev/shm/" << shm_prefix;
  }

 private:
  int fds_;
};

// Sample i = {i, worker id (-1 in the main process)}, shape [2].
class IotaDataset : public MapDataset {
 public:
  explicit IotaDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    const WorkerInfo* info = GetWorkerInfo();
    return Sample{{2}, {static_cast<float>(i), static_cast<float>(info ? info->id : -1)}};
  }

 private:
  int64_t n_;
};

// --- Seeded cases -----------------------------------------------------------------------------------------

// The arguments written one after another, as an ostream writes them.
template <typename... Args>
std::string Str(const Args&... args) {
  std::ostringstream o;
  (o << ... << args);
  return o.str();
}

// "{7, 1, 12}": a short drawn list, for a failure message.
template <typename T>
std::string Show(const std::vector<T>& v) {
  std::ostringstream o;
  o << "{";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "}";
  return o.str();
}

// "<input>; grading seed S; to draw the same inputs: ...": what SCOPED_TRACE shows under every failure of a
// seeded case.
inline std::string Drawn(const std::string& input) { return input + "; " + distlab::testing::SeedNote(); }

// A value as a message writes it (a char or uint8_t as its number).
template <typename T>
auto Printable(const T& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return +v;
  } else {
    return v;
  }
}

template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};

// "" when `got` equals `want`; else where they first differ: "element 3 is 7, expected 5", "batch 2: element
// 1 is 0.5, expected 4" (nested lists), or "5 elements, expected 6" when one is a prefix of the other. One
// element's values, never the lists: the inputs are drawn, so they do not carry over to another grading.
template <typename T>
std::string FirstDifference(const std::vector<T>& got, const std::vector<T>& want,
                            const std::string& what = "element") {
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i) {
    if constexpr (IsVector<T>::value) {
      const std::string inner = FirstDifference(got[i], want[i]);
      if (!inner.empty()) return Str(what, " ", i, ": ", inner);
    } else if (!(got[i] == want[i])) {
      return Str(what, " ", i, " is ", Printable(got[i]), ", expected ", Printable(want[i]));
    }
  }
  if (got.size() != want.size()) return Str(got.size(), " ", what, "s, expected ", want.size());
  return "";
}

// The predicate-formatter behind EXPECT_SAME / ASSERT_SAME.
template <typename T>
::testing::AssertionResult SameAs(const char* got_text, const char* want_text, const std::vector<T>& got,
                                  const std::vector<T>& want) {
  const std::string d = FirstDifference(got, want, IsVector<T>::value ? "batch" : "element");
  if (d.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got_text << " differs from " << want_text << ": " << d;
}

}  // namespace distlab::dataloader::testing

// EXPECT_SAME(got, want): two lists (of numbers, or of lists of numbers) are equal; on failure the first
// difference only ("Read(*dl) differs from the_reference: batch 2: element 1 is 0.5, expected 4").
#define EXPECT_SAME(got, want) EXPECT_PRED_FORMAT2(::distlab::dataloader::testing::SameAs, got, want)
#define ASSERT_SAME(got, want) ASSERT_PRED_FORMAT2(::distlab::dataloader::testing::SameAs, got, want)

// EXPECT_NO_PROBLEM(check): `check` is a std::string, "" when all is well and else what is wrong; on failure
// the case fails with that text (and whatever is streamed after the macro). ASSERT_NO_PROBLEM also returns.
#define DISTLAB_NO_PROBLEM_(check, fail)                                          \
  switch (0)                                                                      \
  case 0:                                                                         \
  default:                                                                        \
    if (const std::string distlab_problem_ = (check); distlab_problem_.empty()) { \
    } else                                                                        \
      fail() << distlab_problem_
#define EXPECT_NO_PROBLEM(check) DISTLAB_NO_PROBLEM_(check, ADD_FAILURE)
#define ASSERT_NO_PROBLEM(check) DISTLAB_NO_PROBLEM_(check, GTEST_FAIL)

#endif  // DISTLAB_TESTS_DATALOADER_TEST_UTIL_H_
