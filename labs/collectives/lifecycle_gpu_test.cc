// Stage A (lifecycle.h) on real GPUs: the same ShutdownWithDeadline and RunWithWatchdog, on the nccl backend
// with buffers in device memory (bazel test --config=gpu). Stage A is backend-independent -- it only uses
// Stream::Idle, Destroy and Abort -- so it runs unchanged on NCCL. (The ring of stage B and the harness of
// stage C keep their data in host memory and reduce it with comm::ReduceInto, so their tests run on NCCL
// through their GPU variants, ring_test_gpu and the like, which stage host buffers through device memory.)
//
// Every case skips naming the GPUs it needs and found, and says so when built without the nccl backend (no
// CUDA toolkit when the build was configured).
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/lifecycle.h"
#include "tools/testing/gpu.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using ::distlab::testing::DeviceBuffer;
using std::chrono::milliseconds;

comm::CommOptions Nccl() {
  comm::CommOptions o;
  o.backend = comm::Backend::kNccl;
  o.timeout = std::chrono::seconds(60);
  return o;
}

// GPUs first, then whether the nccl backend is in this binary.
#define REQUIRE_NCCL(n)                                                             \
  do {                                                                              \
    const int distlab_nccl_ranks_ = (n);                                            \
    DISTLAB_REQUIRE_GPUS(distlab_nccl_ranks_);                                      \
    auto probe = comm::CommInitAll(distlab_nccl_ranks_, Nccl());                    \
    if (!probe.ok() && probe.status().code() == absl::StatusCode::kUnimplemented) { \
      GTEST_SKIP() << "built without the nccl backend (no CUDA toolkit was found)"; \
    }                                                                               \
    ASSERT_OK(probe.status());                                                      \
    for (auto& c : *probe) (void)c->Abort();                                        \
  } while (0)

// A finished device all-reduce: the stream is idle, so the shutdown destroys (ncclCommFinalize + Destroy).
TEST(ShutdownWithDeadlineGpu, FinishedDeviceWorkIsDestroyed) {
  REQUIRE_NCCL(1);
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, Nccl()));
  comm::Stream stream;
  DeviceBuffer buf(0, 1 << 20);
  ASSERT_OK(buf.status());
  ASSERT_OK(comms[0]->AllReduce(buf.get(), buf.get(), (1 << 20) / 4, comm::DataType::kF32, comm::RedOp::kSum,
                                stream));
  ASSERT_OK_AND_ASSIGN(ShutdownResult result, ShutdownWithDeadline(*comms[0], stream, milliseconds(5000)));
  EXPECT_EQ(result, ShutdownResult::kDestroyed);
  EXPECT_TRUE(comms[0]->released());
}

// Work that never finishes before the deadline (host work queued behind the device work) is aborted
// (ncclCommAbort), and the call returns soon after the deadline.
TEST(ShutdownWithDeadlineGpu, PendingWorkIsAbortedAtTheDeadline) {
  REQUIRE_NCCL(1);
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, Nccl()));
  comm::Stream stream;
  DeviceBuffer buf(0, 4096);
  ASSERT_OK(comms[0]->AllReduce(buf.get(), buf.get(), 1024, comm::DataType::kF32, comm::RedOp::kSum, stream));
  std::atomic<bool> gate{false};
  struct OpenAtExit {
    std::atomic<bool>& gate;
    ~OpenAtExit() { gate = true; }
  } open_at_exit{gate};
  stream.Enqueue([&] {
    while (!gate) std::this_thread::sleep_for(milliseconds(1));
    return absl::OkStatus();
  });
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(ShutdownResult result, ShutdownWithDeadline(*comms[0], stream, milliseconds(100)));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(result, ShutdownResult::kAborted);
  EXPECT_TRUE(comms[0]->released());
  EXPECT_LT(took, milliseconds(2000)) << "ShutdownWithDeadline(100 ms) took too long";
  gate = true;
  (void)stream.Synchronize();
}

// A healthy run on every rank the target asks for (one per GPU), with a device all-reduce checked on the
// host.
TEST(RunWithWatchdogGpu, HealthyDeviceRunIsOk) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  EXPECT_OK(RunWithWatchdog(
      n,
      [n](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        activity.Set("device all-reduce");
        DeviceBuffer buf(rank, 256 * sizeof(int32_t));
        if (!buf.status().ok()) return buf.status();
        if (absl::Status s = buf.Upload(std::vector<int32_t>(256, rank + 1)); !s.ok()) return s;
        if (absl::Status s =
                comm.AllReduce(buf.get(), buf.get(), 256, comm::DataType::kI32, comm::RedOp::kSum, stream);
            !s.ok()) {
          return s;
        }
        if (absl::Status s = stream.Synchronize(); !s.ok()) return s;
        std::vector<int32_t> got(256);
        if (absl::Status s = buf.Download(got); !s.ok()) return s;
        if (got[255] != n * (n + 1) / 2) return absl::InternalError("sum is " + std::to_string(got[255]));
        return absl::OkStatus();
      },
      milliseconds(60000), Nccl()));
}

// A rank that fails: its error comes back first, naming the rank and its activity.
TEST(RunWithWatchdogGpu, FailingRankIsReported) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  absl::Status s = RunWithWatchdog(
      n,
      [](int rank, comm::Comm&, comm::Stream&, RankActivity& activity) -> absl::Status {
        activity.Set("loading the batch");
        if (rank == 0) return absl::InternalError("boom");
        return absl::OkStatus();
      },
      milliseconds(60000), Nccl());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("rank 0"), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("boom"), std::string::npos) << s;
}

}  // namespace
}  // namespace distlab::collectives
