// Public tests, Lab 2 stage C (they fork: tagged "fork").
#include <cstdlib>
#include <stdexcept>
#include <string>
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

}  // namespace
}  // namespace distlab::dataloader
