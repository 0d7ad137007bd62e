// Conformance of the nccl backend: every collective on device memory against results computed on the host
// with the runtime's own reduction (comm::ReduceInto / FinishReduce, the threads backend's semantics).
//
// Inputs are 1 or 2, so sums, products, minima and maxima are exact in every dtype and integer
// results must match bit for bit; only float avg is compared with a tolerance (NCCL pre-multiplies by 1/n
// where the host divides the sum once). The rank count comes from the target (DISTLAB_GPU_RANKS: 1, 2, 4
// or 8); every case skips with "needs N GPUs, found K" where the GPUs are missing, and with "built without
// the nccl backend" where the CUDA toolkit was missing when the build was configured.
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/comm/testing.h"
#include "reference/comm/types.h"
#include "tools/testing/gpu.h"
#include "tools/testing/test_support.h"

namespace distlab::comm {
namespace {

using ::distlab::testing::DeviceBuffer;
using ::testing::HasSubstr;

CommOptions Nccl() {
  CommOptions o;
  o.backend = Backend::kNccl;
  o.timeout = std::chrono::seconds(60);
  return o;
}

bool NcclBuilt() {
#ifdef DISTLAB_WITH_NCCL
  return true;
#else
  return false;
#endif
}

// GPUs first (so a GPU-less machine names them), then the backend.
#define REQUIRE_NCCL(n)                                                                             \
  do {                                                                                              \
    DISTLAB_REQUIRE_GPUS(n);                                                                        \
    if (!NcclBuilt()) GTEST_SKIP() << "built without the nccl backend (no CUDA toolkit was found)"; \
  } while (0)

// Element i of rank r's input: 1 or 2, so every sum (<= 16) and product (a power of two <= 256) is exact in
// bf16 and f16 whatever order NCCL reduces in.
double Input(int r, size_t i) { return static_cast<double>((r * 7 + i * 3 + i / 5) % 2 + 1); }

std::vector<char> MakeInput(int r, size_t count, DataType dtype, size_t offset = 0) {
  std::vector<char> v(count * SizeOf(dtype));
  for (size_t i = 0; i < count; ++i) SetElementFromDouble(v.data(), i, dtype, Input(r, i + offset));
  return v;
}

// The host reference: op over ranks of their inputs (elements [offset, offset + count)).
std::vector<char> Expected(int n, size_t count, DataType dtype, RedOp op, size_t offset = 0) {
  std::vector<char> acc = MakeInput(0, count, dtype, offset);
  for (int r = 1; r < n; ++r) {
    std::vector<char> in = MakeInput(r, count, dtype, offset);
    ReduceInto(acc.data(), in.data(), count, dtype, op);
  }
  FinishReduce(acc.data(), count, dtype, op, n);
  return acc;
}

// Compares typed buffers: exact, except float avg within a relative tolerance.
absl::Status Compare(const std::vector<char>& got, const std::vector<char>& want, size_t count,
                     DataType dtype, RedOp op, const std::string& what) {
  const double tol = (IsFloating(dtype) && op == RedOp::kAvg) ? (dtype == DataType::kBF16  ? 1e-2
                                                                 : dtype == DataType::kF16 ? 2e-3
                                                                                           : 1e-6)
                                                              : 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double g = ElementAsDouble(got.data(), i, dtype), w = ElementAsDouble(want.data(), i, dtype);
    if (std::fabs(g - w) > tol * std::fabs(w)) {
      return absl::InternalError(what + ": element " + std::to_string(i) + " is " + std::to_string(g) +
                                 ", expected " + std::to_string(w));
    }
  }
  return absl::OkStatus();
}

TEST(NcclAllReduce, EveryDtypeAndOpMatchesTheHostReduction) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const size_t count = 1000;  // not a multiple of n, of the warp size or of NCCL's chunking
  for (DataType dtype : kAllDataTypes) {
    for (RedOp op : kAllRedOps) {
      const std::string what = "AllReduce " + std::string(Name(dtype)) + " " + std::string(Name(op));
      SCOPED_TRACE(what);
      auto statuses = RunRanks(
          n,
          [&](int r, Comm& comm, Stream& stream) -> absl::Status {
            const size_t bytes = count * SizeOf(dtype);
            DeviceBuffer send(r, bytes), recv(r, bytes);
            RETURN_IF_ERROR(send.Upload(MakeInput(r, count, dtype)));
            RETURN_IF_ERROR(comm.AllReduce(send.get(), recv.get(), count, dtype, op, stream));
            RETURN_IF_ERROR(stream.Synchronize());
            std::vector<char> got(bytes);
            RETURN_IF_ERROR(recv.Download(got));
            return Compare(got, Expected(n, count, dtype, op), count, dtype, op, what);
          },
          Nccl());
      for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
    }
  }
}

TEST(NcclAllReduce, InPlace) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const size_t count = 4097;
  auto statuses = RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        DeviceBuffer buf(r, count * 4);
        RETURN_IF_ERROR(buf.Upload(MakeInput(r, count, DataType::kI32)));
        RETURN_IF_ERROR(comm.AllReduce(buf.get(), buf.get(), count, DataType::kI32, RedOp::kSum, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        std::vector<char> got(count * 4);
        RETURN_IF_ERROR(buf.Download(got));
        return Compare(got, Expected(n, count, DataType::kI32, RedOp::kSum), count, DataType::kI32,
                       RedOp::kSum, "in-place AllReduce");
      },
      Nccl());
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

TEST(NcclCollectives, BroadcastReduceAllGatherReduceScatterAllToAll) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const size_t count = 513;
  const DataType dt = DataType::kI32;
  const size_t elem = SizeOf(dt);
  auto statuses = RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        DeviceBuffer a(r, n * count * elem), b(r, n * count * elem);
        std::vector<char> got(n * count * elem);
        for (int root = 0; root < n; ++root) {
          // Broadcast: everyone gets root's input.
          RETURN_IF_ERROR(a.Upload(MakeInput(r, count, dt)));
          RETURN_IF_ERROR(comm.Broadcast(a.get(), b.get(), count, dt, root, stream));
          RETURN_IF_ERROR(stream.Synchronize());
          RETURN_IF_ERROR(b.Download(got.data(), count * elem));
          RETURN_IF_ERROR(Compare(got, MakeInput(root, count, dt), count, dt, RedOp::kSum,
                                  "Broadcast from root " + std::to_string(root)));
          // Reduce (max) to root.
          RETURN_IF_ERROR(comm.Reduce(a.get(), b.get(), count, dt, RedOp::kMax, root, stream));
          RETURN_IF_ERROR(stream.Synchronize());
          if (r == root) {
            RETURN_IF_ERROR(b.Download(got.data(), count * elem));
            RETURN_IF_ERROR(Compare(got, Expected(n, count, dt, RedOp::kMax), count, dt, RedOp::kMax,
                                    "Reduce(max) to root " + std::to_string(root)));
          }
        }
        // AllGather: block p = rank p's input.
        RETURN_IF_ERROR(a.Upload(MakeInput(r, count, dt)));
        RETURN_IF_ERROR(comm.AllGather(a.get(), b.get(), count, dt, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        RETURN_IF_ERROR(b.Download(got));
        for (int p = 0; p < n; ++p) {
          std::vector<char> block(got.begin() + p * count * elem, got.begin() + (p + 1) * count * elem);
          RETURN_IF_ERROR(Compare(block, MakeInput(p, count, dt), count, dt, RedOp::kSum,
                                  "AllGather block " + std::to_string(p)));
        }
        // ReduceScatter (sum): rank r gets block r of the reduction of n*count inputs.
        RETURN_IF_ERROR(a.Upload(MakeInput(r, n * count, dt)));
        RETURN_IF_ERROR(comm.ReduceScatter(a.get(), b.get(), count, dt, RedOp::kSum, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        RETURN_IF_ERROR(b.Download(got.data(), count * elem));
        RETURN_IF_ERROR(Compare(got, Expected(n, count, dt, RedOp::kSum, r * count), count, dt, RedOp::kSum,
                                "ReduceScatter"));
        // AllToAll: recv block p = rank p's send block r.
        RETURN_IF_ERROR(a.Upload(MakeInput(r, n * count, dt)));
        RETURN_IF_ERROR(comm.AllToAll(a.get(), b.get(), count, dt, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        RETURN_IF_ERROR(b.Download(got));
        for (int p = 0; p < n; ++p) {
          std::vector<char> block(got.begin() + p * count * elem, got.begin() + (p + 1) * count * elem);
          std::vector<char> want(count * elem);
          std::vector<char> peer = MakeInput(p, n * count, dt);
          std::memcpy(want.data(), peer.data() + r * count * elem, count * elem);
          RETURN_IF_ERROR(
              Compare(block, want, count, dt, RedOp::kSum, "AllToAll block " + std::to_string(p)));
        }
        // Stats by kind: n broadcasts and n reduces of S = count elements, one all-gather, reduce-scatter and
        // all-to-all of the whole array, n count elements.
        const Stats s = comm.stats();
        const uint64_t one = count * elem, whole = n * count * elem;
        if (s.broadcast.calls != static_cast<uint64_t>(n) || s.broadcast.bytes != n * one ||
            s.reduce.calls != static_cast<uint64_t>(n) || s.all_gather.calls != 1 ||
            s.all_gather.bytes != whole || s.reduce_scatter.calls != 1 || s.reduce_scatter.bytes != whole ||
            s.all_to_all.calls != 1 || s.all_to_all.bytes != whole || s.all_reduce.calls != 0 ||
            s.collective_calls != static_cast<uint64_t>(2 * n + 3)) {
          return absl::InternalError("stats by kind: broadcast " + std::to_string(s.broadcast.calls) +
                                     ", reduce " + std::to_string(s.reduce.calls) + ", all-gather " +
                                     std::to_string(s.all_gather.calls) + "/" +
                                     std::to_string(s.all_gather.bytes) + ", collective calls " +
                                     std::to_string(s.collective_calls));
        }
        return absl::OkStatus();
      },
      Nccl());
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

TEST(NcclSendRecv, GroupedRingStepAndStats) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const size_t count = 1 << 16;
  auto statuses = RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        DeviceBuffer send(r, count * 4), recv(r, count * 4);
        RETURN_IF_ERROR(send.Upload(MakeInput(r, count, DataType::kF32)));
        RETURN_IF_ERROR(GroupStart());
        RETURN_IF_ERROR(comm.Send(send.get(), count, DataType::kF32, next, stream));
        RETURN_IF_ERROR(comm.Recv(recv.get(), count, DataType::kF32, prev, stream));
        RETURN_IF_ERROR(GroupEnd());
        RETURN_IF_ERROR(stream.Synchronize());
        std::vector<char> got(count * 4);
        RETURN_IF_ERROR(recv.Download(got));
        RETURN_IF_ERROR(Compare(got, MakeInput(prev, count, DataType::kF32), count, DataType::kF32,
                                RedOp::kSum, "Recv from the previous rank"));
        const Stats s = comm.stats();
        if (s.sends != 1 || s.recvs != 1 || s.bytes_sent != count * 4 || s.bytes_received != count * 4 ||
            s.collective_calls != 0) {
          return absl::InternalError("stats: sends " + std::to_string(s.sends) + ", recvs " +
                                     std::to_string(s.recvs) + ", bytes sent " +
                                     std::to_string(s.bytes_sent) + ", collective calls " +
                                     std::to_string(s.collective_calls));
        }
        return absl::OkStatus();
      },
      Nccl());
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

TEST(NcclStream, EventsTimeTheDeviceWork) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const size_t count = 1 << 22;
  auto statuses = RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        DeviceBuffer buf(r, count * 4);
        RETURN_IF_ERROR(comm.AllReduce(buf.get(), buf.get(), count, DataType::kF32, RedOp::kSum, stream));
        Event start, end;
        start.Record(stream);
        RETURN_IF_ERROR(comm.AllReduce(buf.get(), buf.get(), count, DataType::kF32, RedOp::kSum, stream));
        end.Record(stream);
        RETURN_IF_ERROR(end.Synchronize());
        if (!end.Query()) return absl::InternalError("end event not reached after its Synchronize");
        auto ms = Event::ElapsedMs(start, end);
        if (!ms.ok()) return ms.status();
        if (!(*ms > 0.0))
          return absl::InternalError("ElapsedMs of a 16 MiB AllReduce is " + std::to_string(*ms));
        return absl::OkStatus();
      },
      Nccl());
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

// Without CommOptions::host_staging (the default), host memory is an error that names it and the option.
TEST(NcclErrors, HostMemoryIsRejectedByName) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  auto statuses = RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        std::vector<float> host(256);
        absl::Status s =
            comm.AllReduce(host.data(), host.data(), host.size(), DataType::kF32, RedOp::kSum, stream);
        if (s.code() != absl::StatusCode::kInvalidArgument ||
            std::string(s.message()).find("host memory") == std::string::npos ||
            std::string(s.message()).find("host_staging") == std::string::npos) {
          return absl::InternalError("expected INVALID_ARGUMENT naming host memory, got: " + s.ToString());
        }
        return absl::OkStatus();
      },
      Nccl());
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

// --- CommOptions::host_staging: host buffers staged through device memory ---

CommOptions NcclStaged() {
  CommOptions o = Nccl();
  o.host_staging = true;
  return o;
}

template <typename T>
std::vector<T> Typed(const std::vector<char>& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// Every collective on host vectors, out of place and in place (the in-place forms stage one block for both).
TEST(NcclHostStaging, CollectivesOnHostBuffersMatchTheHostReduction) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const size_t count = 1001;
  const DataType dt = DataType::kI32;
  auto statuses = RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        const std::vector<int32_t> in = Typed<int32_t>(MakeInput(r, count, dt));
        // AllReduce, out of place and in place.
        std::vector<int32_t> out(count, -1), inplace = in;
        RETURN_IF_ERROR(comm.AllReduce(in.data(), out.data(), count, dt, RedOp::kSum, stream));
        RETURN_IF_ERROR(comm.AllReduce(inplace.data(), inplace.data(), count, dt, RedOp::kMax, stream));
        // AllGather in place: rank r's block already sits at r * count.
        std::vector<int32_t> gathered(count * n, -1);
        std::memcpy(gathered.data() + r * count, in.data(), count * 4);
        RETURN_IF_ERROR(comm.AllGather(gathered.data() + r * count, gathered.data(), count, dt, stream));
        // ReduceScatter in place: every block of each rank's input is its `in`, so rank r's block of the
        // result is the sum over ranks of their `in`, in place in that block.
        std::vector<int32_t> scatter(count * n);
        for (int p = 0; p < n; ++p) std::memcpy(scatter.data() + p * count, in.data(), count * 4);
        RETURN_IF_ERROR(
            comm.ReduceScatter(scatter.data(), scatter.data() + r * count, count, dt, RedOp::kSum, stream));
        // Broadcast from the last rank into a separate buffer.
        std::vector<int32_t> bcast(count, -1);
        RETURN_IF_ERROR(comm.Broadcast(in.data(), bcast.data(), count, dt, n - 1, stream));
        RETURN_IF_ERROR(stream.Synchronize());

        const std::vector<int32_t> sum = Typed<int32_t>(Expected(n, count, dt, RedOp::kSum));
        const std::vector<int32_t> max = Typed<int32_t>(Expected(n, count, dt, RedOp::kMax));
        const std::vector<int32_t> last = Typed<int32_t>(MakeInput(n - 1, count, dt));
        for (size_t i = 0; i < count; ++i) {
          if (out[i] != sum[i]) return absl::InternalError("AllReduce sum, element " + std::to_string(i));
          if (inplace[i] != max[i])
            return absl::InternalError("in-place AllReduce max, element " + std::to_string(i));
          if (scatter[r * count + i] != sum[i])
            return absl::InternalError("ReduceScatter, element " + std::to_string(i));
          if (bcast[i] != last[i]) return absl::InternalError("Broadcast, element " + std::to_string(i));
          for (int p = 0; p < n; ++p) {
            if (gathered[p * count + i] != Typed<int32_t>(MakeInput(p, 1, dt, i))[0]) {
              return absl::InternalError("AllGather, block " + std::to_string(p) + " element " +
                                         std::to_string(i));
            }
          }
        }
        return absl::OkStatus();
      },
      NcclStaged());
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

// A grouped ring step on host vectors, and host work enqueued behind it sees the received data (the copy back
// runs on the stream before later work).
TEST(NcclHostStaging, GroupedSendRecvThenHostWorkSeesTheData) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const size_t count = 1 << 16;
  auto statuses = RunRanks(
      n,
      [&](int r, Comm& comm, Stream& stream) -> absl::Status {
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        std::vector<float> send(count, static_cast<float>(r + 1)), recv(count, 0.0f);
        RETURN_IF_ERROR(GroupStart());
        RETURN_IF_ERROR(comm.Send(send.data(), count, DataType::kF32, next, stream));
        RETURN_IF_ERROR(comm.Recv(recv.data(), count, DataType::kF32, prev, stream));
        RETURN_IF_ERROR(GroupEnd());
        float seen = -1;
        stream.Enqueue([&] {
          seen = recv[count - 1];
          return absl::OkStatus();
        });
        RETURN_IF_ERROR(stream.Synchronize());
        if (seen != static_cast<float>(prev + 1)) {
          return absl::InternalError("host work after the Recv saw " + std::to_string(seen) + ", expected " +
                                     std::to_string(prev + 1));
        }
        const Stats s = comm.stats();
        if (s.bytes_sent != count * 4 || s.bytes_received != count * 4)
          return absl::InternalError("byte counters");
        return absl::OkStatus();
      },
      NcclStaged());
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

TEST(NcclLifecycle, CallsAfterDestroyOrAbortAreErrors) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  ASSERT_OK_AND_ASSIGN(auto comms, CommInitAll(n, Nccl()));
  std::vector<std::thread> threads;
  std::vector<absl::Status> destroyed(n);
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { destroyed[r] = comms[r]->Destroy(); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_OK(destroyed[r]);
    EXPECT_TRUE(comms[r]->released());
    Stream stream;
    absl::Status s = comms[r]->AllReduce(nullptr, nullptr, 0, DataType::kF32, RedOp::kSum, stream);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("destroyed"));
  }
  ASSERT_OK_AND_ASSIGN(auto again, CommInitAll(n, Nccl()));
  for (int r = 0; r < n; ++r) {
    EXPECT_OK(again[r]->GetAsyncError());
    EXPECT_OK(again[r]->Abort());
    EXPECT_EQ(again[r]->GetAsyncError().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(NcclInit, CommInitRankOneThreadPerRank) {
  const int n = ::distlab::testing::GpuRanks();
  REQUIRE_NCCL(n);
  const UniqueId id = GetUniqueId();
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = [&]() -> absl::Status {
        auto comm = CommInitRank(n, id, r, Nccl());
        if (!comm.ok()) return comm.status();
        if ((*comm)->rank() != r || (*comm)->size() != n) return absl::InternalError("wrong rank or size");
        Stream stream;
        DeviceBuffer buf(r, 4 * 64);
        RETURN_IF_ERROR(buf.Upload(std::vector<int32_t>(64, r + 1)));
        RETURN_IF_ERROR((*comm)->AllReduce(buf.get(), buf.get(), 64, DataType::kI32, RedOp::kSum, stream));
        RETURN_IF_ERROR(stream.Synchronize());
        std::vector<int32_t> got(64);
        RETURN_IF_ERROR(buf.Download(got));
        if (got[63] != n * (n + 1) / 2) return absl::InternalError("sum is " + std::to_string(got[63]));
        return (*comm)->Destroy();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_OK(statuses[r]) << "rank " << r;
}

// Needs no GPU at all: asking for more ranks than devices is a clear error naming both numbers.
TEST(NcclInit, MoreRanksThanGpusNamesNeededAndFound) {
  if (!NcclBuilt()) GTEST_SKIP() << "built without the nccl backend (no CUDA toolkit was found)";
  const int found = ::distlab::testing::GpuCount();
  auto comms = CommInitAll(found + 1, Nccl());
  ASSERT_FALSE(comms.ok());
  EXPECT_EQ(comms.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(comms.status().message()),
              HasSubstr("needs " + std::to_string(found + 1) + " GPU"));
  EXPECT_THAT(std::string(comms.status().message()), HasSubstr("found " + std::to_string(found)));
}

// Needs no GPU: BackendAvailable says what CommInitAll would, before any communicator is made.
TEST(NcclInit, BackendAvailableNamesNeededAndFound) {
  if (!NcclBuilt()) GTEST_SKIP() << "built without the nccl backend (no CUDA toolkit was found)";
  const int found = ::distlab::testing::GpuCount();
  const absl::Status s = BackendAvailable(Backend::kNccl, found + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs " + std::to_string(found + 1) + " GPU"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("found " + std::to_string(found)));
  EXPECT_OK(BackendAvailable(Backend::kThreads, 8));
  EXPECT_EQ(BackendAvailable(Backend::kThreads, 0).code(), absl::StatusCode::kInvalidArgument);
}

// The process-wide defaults that a default CommOptions starts from (what DISTLAB_TEST_BACKEND=nccl sets).
TEST(CommDefaults, SetDefaultBackendChangesDefaultOptionsOnly) {
  EXPECT_EQ(CommOptions().backend, Backend::kThreads);
  EXPECT_FALSE(CommOptions().host_staging);
  SetDefaultBackend(Backend::kNccl, true);
  const CommOptions changed;
  CommOptions explicit_threads;
  explicit_threads.backend = Backend::kThreads;
  SetDefaultBackend(Backend::kThreads, false);
  EXPECT_EQ(changed.backend, Backend::kNccl);
  EXPECT_TRUE(changed.host_staging);
  EXPECT_EQ(explicit_threads.backend, Backend::kThreads);
  EXPECT_EQ(CommOptions().backend, Backend::kThreads);
}

}  // namespace
}  // namespace distlab::comm
