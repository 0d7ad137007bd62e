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

class Faulty : public MapDataset {
 public:
  explicit Faulty(bool exit_instead) : exit_(exit_instead) {}
  int64_t size() const override { return 6; }
  Sample Get(int64_t i) const override {
    if (i == 2) {
      if (exit_) std::exit(3);
      throw std::runtime_error("sample 2 is broken");
    }
    return Sample{{}, {static_cast<float>(i)}};
  }

 private:
  bool exit_;
};

LoaderOptions Opts() {
  LoaderOptions o;
  o.num_workers = 1;
  o.timeout_s = 20;
  return o;
}

// Batches 0 and 1 arrive; batch 2's exception arrives at position 2, as an error:
//   Caught std::runtime_error in DataLoader worker process 0. Original: sample 2 is broken (worker pid P)
TEST(WorkerExit, ExceptionArrivesAtItsPosition) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Faulty>(false), Opts()));
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

TEST(WorkerExit, ExitCodeIsReported) {
  ASSERT_OK_AND_ASSIGN(auto dl, DataLoader::Create(std::make_shared<Faulty>(true), Opts()));
  ASSERT_OK(dl->StartEpoch());
  const pid_t pid = dl->worker_pids().at(0);
  absl::Status st;
  for (int k = 0; k < 10 && st.ok(); ++k) {
    Batch b;
    auto r = dl->Next(&b);
    st = r.status();
  }
  EXPECT_THAT(std::string(st.message()), HasSubstr("DataLoader worker (pid " + std::to_string(pid) +
                                                   ") exited unexpectedly with exit code 3"));
}

}  // namespace
}  // namespace distlab::dataloader
