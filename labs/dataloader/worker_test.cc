// Public tests, Lab 2 stage C (they fork: tagged "fork").
#include <cstdlib>
#include <stdexcept>

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
  auto r = dl->Next(&b);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(
      std::string(r.status().message()),
      HasSubstr("Caught std::runtime_error in DataLoader worker process 0. Original: sample 2 is broken"));
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
