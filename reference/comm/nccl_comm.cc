// The nccl backend: the same Comm API on real NCCL, one rank per CUDA device.
//
// Mapping (docs/design.md §3.5):
//   CommInitAll(n)        ncclCommInitAll over devices 0..n-1 (one rank per device; NCCL rejects two ranks of
//                         one communicator on one GPU with "Duplicate GPU detected"), then one thread per
//                         rank
//   CommInitRank          ncclCommInitRankConfig (blocking); the course's 64-bit UniqueId names a
//   process-wide
//                         ncclUniqueId made by the first rank that joins (so in-process ranks only; processes
//                         on several machines exchange the ncclUniqueId out of band, see the README)
//   Stream / Event        a CUDA stream (non-blocking) attached to the Stream on its first NCCL call; events
//                         recorded on such a stream are CUDA events (cudaEventElapsedTime)
//   collectives, P2P      ncclAllReduce, ..., ncclAlltoAll, ncclSend/ncclRecv; a group is replayed between
//                         ncclGroupStart and ncclGroupEnd at the outermost GroupEnd
//   Destroy / Abort       ncclCommFinalize + ncclCommDestroy / ncclCommAbort
//   GetAsyncError         ncclCommGetAsyncError
// Buffers must be device memory from cudaMalloc on the rank's device: host and managed memory are rejected
// with INVALID_ARGUMENT naming the buffer (cudaPointerGetAttributes tells them apart), except that with
// CommOptions::host_staging a host buffer is staged through a device block for the call (Launch).
//
// What the threads backend offers and NCCL does not (this backend says so instead of pretending):
//   * no mismatch detection: ranks that call different collectives (or counts, dtypes, roots) are not
//     compared; NCCL hangs or produces garbage, and the stream's watchdog reports DEADLINE_EXCEEDED without
//     being able to name the ranks that did not arrive;
//   * collective calls return once the work is enqueued on the CUDA stream, not once every rank launched it,
//     and a Send outside a group returns at once (the deadlock of "everyone sends first" shows at
//     Synchronize, as a timeout);
//   * Stats count what this rank's calls asked for (payload bytes of Send/Recv, built-in collective calls
//     and their S), exactly as the threads backend defines them; NCCL's own wire traffic is not visible.
// Errors carry the failing NCCL or CUDA call, its error string, and the file and line.
//
// This file is compiled into //reference/comm wherever the CUDA toolkit was found, in every configuration,
// but links neither the CUDA runtime nor NCCL: every call goes through cuda_dl.h's table, loaded by the first
// CommInitAll / CommInitRank on this backend (a machine without the libraries gets FAILED_PRECONDITION naming
// the library then, and nothing is loaded by programs that never use the backend).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/comm/cuda_dl.h"
#include "reference/comm/internal.h"
#include "reference/comm/types.h"
#include "reference/trace/trace.h"

namespace distlab::comm::nccl {
namespace {

using Clock = std::chrono::steady_clock;

// Every CUDA runtime and NCCL call goes through the table InitAll and InitRank load (cuda_dl.h): a
// communicator exists only once it is loaded, so everything after them may call Dl().
const cuda_dl::Api& Dl() { return cuda_dl::Loaded(); }

std::string Basename(const char* file) {
  std::string f(file);
  const size_t slash = f.rfind("reference/");
  return slash == std::string::npos ? f : f.substr(slash);
}

absl::Status CudaError(const char* call, cudaError_t e, const char* file, int line) {
  Dl().cudaGetLastError();  // clear a non-sticky error so later calls do not report it again
  return absl::InternalError(absl::StrCat(call, " failed: ", Dl().cudaGetErrorName(e), " (",
                                          Dl().cudaGetErrorString(e), ") at ", Basename(file), ":", line));
}

absl::Status NcclError(const char* call, ncclResult_t r, const char* file, int line) {
  std::string msg = absl::StrCat(call, " failed: ", Dl().ncclGetErrorString(r));
  const char* last = Dl().ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&msg, " (", last, ")");
  absl::StrAppend(&msg, " at ", Basename(file), ":", line);
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(msg);
    case ncclRemoteError:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

// Both run `call` through the loaded table: DISTLAB_CUDA(cudaSetDevice(d)) calls Dl().cudaSetDevice(d) and
// names "cudaSetDevice(d)" when it fails.
#define DISTLAB_CUDA(call)                                                                            \
  do {                                                                                                \
    const cudaError_t distlab_cuda_e_ = (Dl().call);                                                  \
    if (distlab_cuda_e_ != cudaSuccess) return CudaError(#call, distlab_cuda_e_, __FILE__, __LINE__); \
  } while (0)

#define DISTLAB_NCCL(call)                                                   \
  do {                                                                       \
    const ncclResult_t distlab_nccl_r_ = (Dl().call);                        \
    if (distlab_nccl_r_ != ncclSuccess && distlab_nccl_r_ != ncclInProgress) \
      return NcclError(#call, distlab_nccl_r_, __FILE__, __LINE__);          \
  } while (0)

// Devices this process sees; 0 with the reason when cudaGetDeviceCount fails (no driver, no device).
int DeviceCount(std::string* why) {
  int n = 0;
  const cudaError_t e = Dl().cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    Dl().cudaGetLastError();
    if (why) *why = absl::StrCat(" (cudaGetDeviceCount: ", Dl().cudaGetErrorString(e), ")");
    return 0;
  }
  return n;
}

// Loads the libraries first (cuda_dl.h); every path to a communicator passes here.
absl::Status NeedDevices(const char* where, int needed, int device_index) {
  RETURN_IF_ERROR(cuda_dl::Load().status());
  std::string why;
  const int found = DeviceCount(&why);
  if (device_index < found) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      where, " on the nccl backend: needs ", needed, " GPU", needed == 1 ? "" : "s",
      " (one rank per device: NCCL refuses two ranks of one communicator on one GPU), found ", found, why));
}

ncclDataType_t ToNccl(DataType d) {
  switch (d) {
    case DataType::kF32:
      return ncclFloat32;
    case DataType::kF64:
      return ncclFloat64;
    case DataType::kBF16:
      return ncclBfloat16;
    case DataType::kF16:
      return ncclFloat16;
    case DataType::kI32:
      return ncclInt32;
    case DataType::kI64:
      return ncclInt64;
    case DataType::kU8:
      return ncclUint8;
  }
  return ncclNumTypes;
}

ncclRedOp_t ToNccl(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return ncclSum;
    case RedOp::kProd:
      return ncclProd;
    case RedOp::kMax:
      return ncclMax;
    case RedOp::kMin:
      return ncclMin;
    case RedOp::kAvg:
      return ncclAvg;
  }
  return ncclNumOps;
}

bool ValidDtype(DataType d) { return ToNccl(d) != ncclNumTypes; }
bool ValidOp(RedOp op) { return ToNccl(op) != ncclNumOps; }

// --- The CUDA stream behind a Stream, and CUDA events ---

// Polls `query` until it stops returning cudaErrorNotReady or `timeout` passes.
absl::Status PollUntilDone(const std::function<cudaError_t()>& query, std::chrono::milliseconds timeout,
                           const std::string& what) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::microseconds(20);
  while (true) {
    const cudaError_t e = query();
    if (e == cudaSuccess) return absl::OkStatus();
    if (e != cudaErrorNotReady) return CudaError(what.c_str(), e, __FILE__, __LINE__);
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": the device work did not finish within ", timeout.count(),
          " ms. The nccl backend cannot name the ranks that did not arrive (NCCL does not report them); the "
          "usual cause is a rank that skipped or mismatched a collective, or a Send whose Recv never came. "
          "Abort the communicator to release the stuck work."));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

class CudaMarker : public internal::DeviceMarker {
 public:
  CudaMarker(int device, cudaStream_t stream, std::chrono::milliseconds timeout)
      : device_(device), timeout_(timeout) {
    status_ = [&]() -> absl::Status {
      DISTLAB_CUDA(cudaSetDevice(device_));
      DISTLAB_CUDA(cudaEventCreate(&event_));
      DISTLAB_CUDA(cudaEventRecord(event_, stream));
      return absl::OkStatus();
    }();
  }
  ~CudaMarker() override {
    if (event_ != nullptr) {
      Dl().cudaSetDevice(device_);
      Dl().cudaEventDestroy(event_);
    }
  }
  absl::Status Synchronize() override {
    RETURN_IF_ERROR(status_);
    DISTLAB_CUDA(cudaSetDevice(device_));
    return PollUntilDone([this] { return Dl().cudaEventQuery(event_); }, timeout_, "cudaEventQuery");
  }
  bool Query() const override {
    if (!status_.ok()) return false;
    Dl().cudaSetDevice(device_);
    return Dl().cudaEventQuery(event_) == cudaSuccess;
  }
  absl::StatusOr<double> ElapsedMsSince(const internal::DeviceMarker& start) const override {
    RETURN_IF_ERROR(status_);
    const auto* s = dynamic_cast<const CudaMarker*>(&start);
    if (s == nullptr || !s->status_.ok()) {
      return absl::FailedPreconditionError("Event::ElapsedMs: the start event is not a usable CUDA event");
    }
    float ms = 0;
    DISTLAB_CUDA(cudaSetDevice(device_));
    const cudaError_t e = Dl().cudaEventElapsedTime(&ms, s->event_, event_);
    if (e == cudaErrorNotReady) {
      Dl().cudaGetLastError();
      return absl::FailedPreconditionError(
          "Event::ElapsedMs: the stream has not reached both events yet (Synchronize the end event first)");
    }
    if (e != cudaSuccess) return CudaError("cudaEventElapsedTime", e, __FILE__, __LINE__);
    return static_cast<double>(ms);
  }

 private:
  const int device_;
  const std::chrono::milliseconds timeout_;
  cudaEvent_t event_ = nullptr;
  absl::Status status_;
};

class CudaQueue : public internal::DeviceQueue {
 public:
  CudaQueue(int device, std::chrono::milliseconds timeout) : device_(device), timeout_(timeout) {
    status_ = [&]() -> absl::Status {
      DISTLAB_CUDA(cudaSetDevice(device_));
      DISTLAB_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      return absl::OkStatus();
    }();
  }
  ~CudaQueue() override {
    if (stream_ == nullptr) return;
    (void)Synchronize();  // bounded by the timeout; a stream still busy is released when its work ends
    Dl().cudaSetDevice(device_);
    Dl().cudaStreamDestroy(stream_);
  }
  absl::Status Synchronize() override {
    RETURN_IF_ERROR(status_);
    DISTLAB_CUDA(cudaSetDevice(device_));
    return PollUntilDone([this] { return Dl().cudaStreamQuery(stream_); }, timeout_,
                         absl::StrCat("Stream::Synchronize (CUDA stream on device ", device_, ")"));
  }
  bool Idle() const override {
    if (!status_.ok()) return true;
    Dl().cudaSetDevice(device_);
    return Dl().cudaStreamQuery(stream_) != cudaErrorNotReady;
  }
  std::shared_ptr<internal::DeviceMarker> Record() override {
    return std::make_shared<CudaMarker>(device_, stream_, timeout_);
  }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  const absl::Status& status() const { return status_; }

 private:
  const int device_;
  const std::chrono::milliseconds timeout_;
  cudaStream_t stream_ = nullptr;
  absl::Status status_;
};

// --- Grouped operations ---

// `after` runs once the NCCL call was made (launched: it returned success) or refused: it copies staged
// output back and releases staging blocks (CommOptions::host_staging); a no-op when nothing was staged.
class NcclOp : public internal::GroupedOp {
 public:
  NcclOp(int device, std::string what, std::function<ncclResult_t()> launch, std::function<void(bool)> after)
      : device(device), what(std::move(what)), launch(std::move(launch)), after(std::move(after)) {}
  Backend backend() const override { return Backend::kNccl; }
  const int device;
  const std::string what;  // the NCCL call, for error messages
  const std::function<ncclResult_t()> launch;
  const std::function<void(bool launched)> after;
};

// One operation's input and output: where the caller's memory is, and whether it lives on the host (then it
// is staged through device memory; CommOptions::host_staging).
struct Span {
  const void* p = nullptr;
  size_t bytes = 0;
  bool host = false;
};
struct Spans {
  Span in, out;
};

enum class Life { kLive, kDestroyed, kAborted };

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

const void* At(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }

class NcclComm : public Comm {
 public:
  NcclComm(ncclComm_t comm, int rank, int size, int device, CommOptions options)
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        options_(std::move(options)),
        timeout_(ScaledTimeout(options_.timeout)) {}
  ~NcclComm() override {
    if (life_.load() == Life::kLive) (void)Abort();  // never leak a communicator (Destroy may block)
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::kNccl; }
  const CommOptions& options() const override { return options_; }

  absl::Status AllReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                         Stream& stream) override {
    RETURN_IF_ERROR(CheckReduce("AllReduce", dtype, op));
    const size_t bytes = count * SizeOf(dtype);
    ASSIGN_OR_RETURN(Spans spans, CheckBuffers("AllReduce", send, count, recv, count, dtype, send == recv));
    return Launch(
        "ncclAllReduce", stream, bytes, &Stats::all_reduce, spans,
        [=](cudaStream_t s, const void* in, void* out) {
          return Dl().ncclAllReduce(in, out, count, ToNccl(dtype), ToNccl(op), comm_, s);
        },
        count);
  }
  absl::Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                         Stream& stream) override {
    RETURN_IF_ERROR(CheckType("Broadcast", dtype));
    RETURN_IF_ERROR(CheckRoot("Broadcast", root));
    ASSIGN_OR_RETURN(Spans spans, CheckBuffers("Broadcast", rank_ == root ? send : nullptr, count, recv,
                                               count, dtype, send == recv, /*need_send=*/rank_ == root));
    return Launch(
        "ncclBroadcast", stream, count * SizeOf(dtype), &Stats::broadcast, spans,
        [=](cudaStream_t s, const void* in, void* out) {
          return Dl().ncclBroadcast(in, out, count, ToNccl(dtype), root, comm_, s);
        },
        count);
  }
  absl::Status Reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
                      Stream& stream) override {
    RETURN_IF_ERROR(CheckReduce("Reduce", dtype, op));
    RETURN_IF_ERROR(CheckRoot("Reduce", root));
    ASSIGN_OR_RETURN(Spans spans, CheckBuffers("Reduce", send, count, rank_ == root ? recv : nullptr, count,
                                               dtype, send == recv, true, /*need_recv=*/rank_ == root));
    return Launch(
        "ncclReduce", stream, count * SizeOf(dtype), &Stats::reduce, spans,
        [=](cudaStream_t s, const void* in, void* out) {
          return Dl().ncclReduce(in, out, count, ToNccl(dtype), ToNccl(op), root, comm_, s);
        },
        count);
  }
  absl::Status AllGather(const void* send, void* recv, size_t count, DataType dtype,
                         Stream& stream) override {
    RETURN_IF_ERROR(CheckType("AllGather", dtype));
    const size_t elem = SizeOf(dtype);
    ASSIGN_OR_RETURN(Spans spans, CheckBuffers("AllGather", send, count, recv, count * size_, dtype,
                                               recv != nullptr && send == At(recv, rank_ * count * elem)));
    return Launch(
        "ncclAllGather", stream, count * size_ * elem, &Stats::all_gather, spans,
        [=](cudaStream_t s, const void* in, void* out) {
          return Dl().ncclAllGather(in, out, count, ToNccl(dtype), comm_, s);
        },
        count);
  }
  absl::Status ReduceScatter(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                             Stream& stream) override {
    RETURN_IF_ERROR(CheckReduce("ReduceScatter", dtype, op));
    const size_t elem = SizeOf(dtype);
    ASSIGN_OR_RETURN(Spans spans, CheckBuffers("ReduceScatter", send, count * size_, recv, count, dtype,
                                               send != nullptr && recv == At(send, rank_ * count * elem)));
    return Launch(
        "ncclReduceScatter", stream, count * size_ * elem, &Stats::reduce_scatter, spans,
        [=](cudaStream_t s, const void* in, void* out) {
          return Dl().ncclReduceScatter(in, out, count, ToNccl(dtype), ToNccl(op), comm_, s);
        },
        count);
  }
  absl::Status AllToAll(const void* send, void* recv, size_t count, DataType dtype, Stream& stream) override {
    RETURN_IF_ERROR(CheckType("AllToAll", dtype));
    const size_t bytes = count * size_ * SizeOf(dtype);
    if (Overlap(send, bytes, recv, bytes)) {
      return absl::InvalidArgumentError(Where("AllToAll") +
                                        ": send and recv buffers overlap (AllToAll cannot run in place)");
    }
    ASSIGN_OR_RETURN(Spans spans,
                     CheckBuffers("AllToAll", send, count * size_, recv, count * size_, dtype, false));
    return Launch(
        "ncclAlltoAll", stream, bytes, &Stats::all_to_all, spans,
        [=](cudaStream_t s, const void* in, void* out) {
          return Dl().ncclAlltoAll(in, out, count, ToNccl(dtype), comm_, s);
        },
        count);
  }

  absl::Status Send(const void* buf, size_t count, DataType dtype, int peer, Stream& stream) override {
    RETURN_IF_ERROR(CheckType("Send", dtype));
    RETURN_IF_ERROR(CheckPeer("Send", peer));
    ASSIGN_OR_RETURN(Spans spans, CheckBuffers("Send", buf, count, nullptr, 0, dtype, false, true, false));
    RETURN_IF_ERROR(Launch(
        "ncclSend", stream, 0, nullptr, spans,
        [=](cudaStream_t s, const void* in, void*) {
          return Dl().ncclSend(in, count, ToNccl(dtype), peer, comm_, s);
        },
        count));
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.sends;
    stats_.bytes_sent += count * SizeOf(dtype);
    return absl::OkStatus();
  }
  absl::Status Recv(void* buf, size_t count, DataType dtype, int peer, Stream& stream) override {
    RETURN_IF_ERROR(CheckType("Recv", dtype));
    RETURN_IF_ERROR(CheckPeer("Recv", peer));
    ASSIGN_OR_RETURN(Spans spans, CheckBuffers("Recv", nullptr, 0, buf, count, dtype, false, false, true));
    RETURN_IF_ERROR(Launch(
        "ncclRecv", stream, 0, nullptr, spans,
        [=](cudaStream_t s, const void*, void* out) {
          return Dl().ncclRecv(out, count, ToNccl(dtype), peer, comm_, s);
        },
        count));
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.recvs;
    stats_.bytes_received += count * SizeOf(dtype);
    return absl::OkStatus();
  }

  absl::Status Destroy() override {
    RETURN_IF_ERROR(Usable("Destroy"));
    Life expected = Life::kLive;
    if (!life_.compare_exchange_strong(expected, Life::kDestroyed)) return Usable("Destroy");
    absl::Status status = [&]() -> absl::Status {
      DISTLAB_CUDA(cudaSetDevice(device_));
      ncclResult_t async = ncclSuccess;
      DISTLAB_NCCL(ncclCommGetAsyncError(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        return NcclError("ncclCommGetAsyncError (before Destroy)", async, __FILE__, __LINE__);
      }
      DISTLAB_NCCL(ncclCommFinalize(comm_));  // waits for this communicator's pending work (blocking comm)
      return absl::OkStatus();
    }();
    const ncclResult_t destroyed = status.ok() ? Dl().ncclCommDestroy(comm_) : Dl().ncclCommAbort(comm_);
    if (status.ok() && destroyed != ncclSuccess) {
      status = NcclError("ncclCommDestroy", destroyed, __FILE__, __LINE__);
    }
    return status;
  }
  absl::Status Abort() override {
    Life expected = Life::kLive;
    if (!life_.compare_exchange_strong(expected, Life::kAborted)) return Usable("Abort");
    Dl().cudaSetDevice(device_);
    DISTLAB_NCCL(ncclCommAbort(comm_));
    return absl::OkStatus();
  }
  absl::Status GetAsyncError() override {
    RETURN_IF_ERROR(Usable("GetAsyncError"));
    ncclResult_t async = ncclSuccess;
    DISTLAB_NCCL(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      return NcclError("ncclCommGetAsyncError", async, __FILE__, __LINE__);
    }
    return absl::OkStatus();
  }
  bool released() const override { return life_.load() != Life::kLive; }

  absl::StatusOr<std::unique_ptr<Comm>> Split(int color, int key) override {
    RETURN_IF_ERROR(Usable("Split"));
    if (internal::InGroup()) {
      return absl::InvalidArgumentError(Where("Split") + ": Split cannot be grouped on this runtime");
    }
    DISTLAB_CUDA(cudaSetDevice(device_));
    ncclComm_t child = nullptr;
    DISTLAB_NCCL(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, nullptr));
    if (color < 0 || child == nullptr) return std::unique_ptr<Comm>();
    int rank = 0, size = 0;
    DISTLAB_NCCL(ncclCommUserRank(child, &rank));
    DISTLAB_NCCL(ncclCommCount(child, &size));
    CommOptions opts = options_;
    opts.name = absl::StrCat(options_.name, "/", color);
    return std::unique_ptr<Comm>(new NcclComm(child, rank, size, device_, opts));
  }

  Stats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void ResetStats() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = Stats();
  }

 private:
  std::string Where(const char* what) const {
    return absl::StrCat(what, " on nccl comm '", options_.name, "' (rank ", rank_, ", device ", device_, ")");
  }

  absl::Status Usable(const char* what) const {
    switch (life_.load()) {
      case Life::kDestroyed:
        return absl::FailedPreconditionError(Where(what) + ": the communicator was destroyed");
      case Life::kAborted:
        return absl::FailedPreconditionError(Where(what) + ": the communicator was aborted");
      case Life::kLive:
        break;
    }
    return absl::OkStatus();
  }

  absl::Status CheckType(const char* what, DataType dtype) const {
    RETURN_IF_ERROR(Usable(what));
    if (!ValidDtype(dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(what), ": invalid dtype ", static_cast<int>(dtype)));
    }
    return absl::OkStatus();
  }
  absl::Status CheckReduce(const char* what, DataType dtype, RedOp op) const {
    RETURN_IF_ERROR(CheckType(what, dtype));
    if (!ValidOp(op)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(what), ": invalid reduction op ", static_cast<int>(op)));
    }
    return absl::OkStatus();
  }
  absl::Status CheckRoot(const char* what, int root) const {
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(what), ": root ", root, " is out of range for ", size_, " ranks"));
    }
    return absl::OkStatus();
  }
  absl::Status CheckPeer(const char* what, int peer) const {
    if (peer < 0 || peer >= size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(what), ": peer ", peer, " is out of range for ", size_, " ranks"));
    }
    if (peer == rank_ && !internal::InGroup()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(what), ": a ", what, " to/from itself outside a group would wait forever for its own ",
          std::string(what) == "Send" ? "Recv" : "Send", "; put both between GroupStart and GroupEnd"));
    }
    return absl::OkStatus();
  }

  // Where `p` lives: false for device memory of this rank's device (from cudaMalloc), true for host memory
  // when the communicator stages host buffers; otherwise INVALID_ARGUMENT naming the kind of memory.
  absl::StatusOr<bool> HostBuffer(const char* what, const char* which, const void* p) const {
    cudaPointerAttributes attr{};
    const cudaError_t e = Dl().cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
      Dl().cudaGetLastError();
      return absl::InvalidArgumentError(absl::StrCat(
          Where(what), ": the ", which, " is not memory CUDA knows (", Dl().cudaGetErrorString(e),
          "); the nccl backend needs device memory "
          "from cudaMalloc on device ",
          device_));
    }
    switch (attr.type) {
      case cudaMemoryTypeDevice:
        if (attr.device != device_) {
          return absl::InvalidArgumentError(absl::StrCat(Where(what), ": the ", which,
                                                         " is memory of device ", attr.device,
                                                         ", but this rank runs on device ", device_));
        }
        return false;
      case cudaMemoryTypeManaged:
        return absl::InvalidArgumentError(
            absl::StrCat(Where(what), ": the ", which,
                         " is managed memory "
                         "(cudaMallocManaged); the course uses cudaMalloc only"));
      default:
        if (options_.host_staging) return true;
        return absl::InvalidArgumentError(
            absl::StrCat(Where(what), ": the ", which,
                         " is host memory; the "
                         "nccl backend needs device memory from cudaMalloc on device ",
                         device_, " (or CommOptions::host_staging)"));
    }
  }

  // Null checks, aliasing (exactly in place as NCCL defines it, or disjoint) and the kind of memory; returns
  // the spans the operation reads and writes.
  absl::StatusOr<Spans> CheckBuffers(const char* what, const void* send, size_t send_count, const void* recv,
                                     size_t recv_count, DataType dtype, bool in_place, bool need_send = true,
                                     bool need_recv = true) const {
    const size_t elem = SizeOf(dtype);
    Spans spans;
    if (need_send) spans.in = Span{send, send_count * elem, false};
    if (need_recv) spans.out = Span{recv, recv_count * elem, false};
    const size_t count = need_send ? send_count : recv_count;
    if (count == 0) return spans;
    const bool p2p = std::string(what) == "Send" || std::string(what) == "Recv";
    if (need_send && send == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(what), ": ", p2p ? "buffer" : "send buffer", " is null with count ", count));
    }
    if (need_recv && recv == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(what), ": ", p2p ? "buffer" : "recv buffer", " is null with count ", count));
    }
    if (need_send && need_recv && !in_place && Overlap(send, send_count * elem, recv, recv_count * elem)) {
      return absl::InvalidArgumentError(
          Where(what) + ": send and recv buffers overlap without being in place as NCCL defines it");
    }
    if (need_send) {
      ASSIGN_OR_RETURN(spans.in.host, HostBuffer(what, p2p ? "buffer" : "send buffer", send));
    }
    if (need_recv) {
      ASSIGN_OR_RETURN(spans.out.host, HostBuffer(what, p2p ? "buffer" : "recv buffer", recv));
    }
    return spans;
  }

  using DeviceCall = std::function<ncclResult_t(cudaStream_t, const void* in, void* out)>;

  // Runs `call` on the stream's CUDA stream now, or records it for the outermost GroupEnd. Host spans are
  // staged first: one device block per host buffer (one for both when they overlap, i.e. in place), allocated
  // on the CUDA stream, the input copied in now (the host work before this call has run: AttachDevice waits
  // for it); after the call, the stream copies the output back and frees the blocks.
  // `kind`: the collective's counter in Stats (null for Send and Recv, which count themselves).
  absl::Status Launch(const char* nccl_call, Stream& stream, size_t collective_bytes,
                      Stats::Kind Stats::*kind, const Spans& spans, DeviceCall call, size_t count) {
    // The launch as a trace event ("AllReduce", ... on the calling thread; host_comm.h names the arguments).
    // The device work is not traced: it runs on the GPU, after this returns.
    trace::Span traced(nccl_call + 4, "comm", rank_);
    if (traced.active()) {
      traced.args()
          .Add("op", nccl_call + 4)
          .Add("count", static_cast<uint64_t>(count))
          .Add("bytes", static_cast<uint64_t>(kind != nullptr ? collective_bytes
                                                              : std::max(spans.in.bytes, spans.out.bytes)))
          .Add("rank", rank_)
          .Add("nranks", size_);
    }
    RETURN_IF_ERROR(Usable(nccl_call));
    if (kind != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.collective_calls;
      stats_.collective_bytes += collective_bytes;
      ++(stats_.*kind).calls;
      (stats_.*kind).bytes += collective_bytes;
    }
    if (count == 0) return absl::OkStatus();  // nothing moves; NCCL need not see it
    const int device = device_;
    const auto timeout = timeout_;
    internal::DeviceQueue* queue = internal::AttachDevice(stream, [device, timeout] {
      return std::unique_ptr<internal::DeviceQueue>(new CudaQueue(device, timeout));
    });
    auto* cuda = dynamic_cast<CudaQueue*>(queue);
    if (cuda == nullptr)
      return absl::InternalError(Where(nccl_call) + ": the stream has a foreign device queue");
    RETURN_IF_ERROR(cuda->status());
    if (cuda->device() != device_) {
      return absl::InvalidArgumentError(absl::StrCat(Where(nccl_call), ": the stream belongs to device ",
                                                     cuda->device(), "; use one Stream per device"));
    }
    const cudaStream_t s = cuda->stream();
    DISTLAB_CUDA(cudaSetDevice(device_));

    const Span in = spans.in, out = spans.out;
    const void* din = in.p;
    void* dout = const_cast<void*>(out.p);
    std::vector<void*> blocks;
    auto release = [s](const std::vector<void*>& bs) {
      for (void* b : bs) Dl().cudaFreeAsync(b, s);
    };
    auto stage = [&](size_t bytes, void** block) -> absl::Status {
      const cudaError_t e = Dl().cudaMallocAsync(block, bytes, s);
      if (e != cudaSuccess) {
        release(blocks);
        return CudaError(
            absl::StrCat("cudaMallocAsync(", bytes, " bytes) staging a host buffer for ", nccl_call).c_str(),
            e, __FILE__, __LINE__);
      }
      blocks.push_back(*block);
      return absl::OkStatus();
    };
    if (in.host && out.host && Overlap(in.p, in.bytes, out.p, out.bytes)) {
      const char* lo = std::min(static_cast<const char*>(in.p), static_cast<const char*>(out.p));
      const char* hi =
          std::max(static_cast<const char*>(in.p) + in.bytes, static_cast<const char*>(out.p) + out.bytes);
      void* block = nullptr;
      RETURN_IF_ERROR(stage(static_cast<size_t>(hi - lo), &block));
      din = static_cast<char*>(block) + (static_cast<const char*>(in.p) - lo);
      dout = static_cast<char*>(block) + (static_cast<const char*>(out.p) - lo);
    } else {
      void* block = nullptr;
      if (in.host) {
        RETURN_IF_ERROR(stage(in.bytes, &block));
        din = block;
      }
      if (out.host) {
        RETURN_IF_ERROR(stage(out.bytes, &block));
        dout = block;
      }
    }
    if (in.host) {
      const cudaError_t e =
          Dl().cudaMemcpyAsync(const_cast<void*>(din), in.p, in.bytes, cudaMemcpyHostToDevice, s);
      if (e != cudaSuccess) {
        release(blocks);
        return CudaError("cudaMemcpyAsync (staging the input in device memory)", e, __FILE__, __LINE__);
      }
    }
    // After the call: copy a staged output back (host work behind the device work) and free the blocks.
    std::function<void(bool)> after = [device, &stream, s, out, dout, blocks, release](bool launched) {
      if (blocks.empty()) return;
      if (!launched || !out.host) {
        release(blocks);  // stream-ordered: freed once the operation has run
        return;
      }
      stream.Enqueue([device, out, dout, blocks, release]() -> absl::Status {
        absl::Status status;
        cudaError_t e = Dl().cudaSetDevice(device);
        if (e == cudaSuccess)
          e = Dl().cudaMemcpy(const_cast<void*>(out.p), dout, out.bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
          status = CudaError("cudaMemcpy (copying a staged output back to the host)", e, __FILE__, __LINE__);
        release(blocks);
        return status;
      });
    };
    if (internal::InGroup()) {
      internal::AddToGroup(std::make_unique<NcclOp>(
          device_, Where(nccl_call), [call, s, din, dout] { return call(s, din, dout); }, after));
      return absl::OkStatus();
    }
    const ncclResult_t r = call(s, din, dout);
    const bool launched = r == ncclSuccess || r == ncclInProgress;
    after(launched);
    if (!launched) return NcclError(Where(nccl_call).c_str(), r, __FILE__, __LINE__);
    return absl::OkStatus();
  }

  const ncclComm_t comm_;
  const int rank_;
  const int size_;
  const int device_;
  const CommOptions options_;
  const std::chrono::milliseconds timeout_;
  std::atomic<Life> life_{Life::kLive};
  mutable std::mutex mu_;
  Stats stats_;
};

std::string CommName(const CommOptions& options) {
  static std::atomic<int> counter{0};
  return options.name.empty() ? absl::StrCat("nccl", counter.fetch_add(1)) : options.name;
}

// CommInitRank's registry: the ncclUniqueId behind each course UniqueId of this process.
struct Pending {
  ncclUniqueId id;
  int nranks = 0;
  int joined = 0;
  std::string name;
};

std::mutex& RegistryMu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::map<uint64_t, Pending>& Registry() {
  static auto* registry = new std::map<uint64_t, Pending>();
  return *registry;
}

// The device of a rank that joins by CommInitRank: LOCAL_RANK (set by launchers) or else the rank.
int LocalDevice(int rank) {
  if (const char* env = std::getenv("LOCAL_RANK")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && v >= 0) return static_cast<int>(v);
  }
  return rank;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Comm>>> InitAll(int n, const CommOptions& options) {
  RETURN_IF_ERROR(NeedDevices("CommInitAll", n, n - 1));
  std::vector<ncclComm_t> raw(n, nullptr);
  std::vector<int> devices(n);
  for (int r = 0; r < n; ++r) devices[r] = r;
  DISTLAB_NCCL(ncclCommInitAll(raw.data(), n, devices.data()));
  CommOptions opts = options;
  opts.name = CommName(options);
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(std::make_unique<NcclComm>(raw[r], r, n, devices[r], opts));
  return comms;
}

absl::StatusOr<std::unique_ptr<Comm>> InitRank(int nranks, UniqueId id, int rank,
                                               const CommOptions& options) {
  const int device = LocalDevice(rank);
  RETURN_IF_ERROR(NeedDevices(absl::StrCat("CommInitRank (rank ", rank, " on device ", device, ")").c_str(),
                              device + 1, device));
  ncclUniqueId nccl_id;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(RegistryMu());
    auto [it, fresh] = Registry().try_emplace(id.value);
    Pending& p = it->second;
    if (fresh) {
      const ncclResult_t r = Dl().ncclGetUniqueId(&p.id);
      if (r != ncclSuccess) {
        Registry().erase(it);
        return NcclError("ncclGetUniqueId", r, __FILE__, __LINE__);
      }
      p.nranks = nranks;
      p.name = options.name.empty() ? absl::StrCat("id", id.value % 1000000) : options.name;
    }
    if (p.nranks != nranks) {
      return absl::InvalidArgumentError(absl::StrCat("CommInitRank: rank ", rank, " was given ", nranks,
                                                     " ranks, but an earlier rank of this id was given ",
                                                     p.nranks));
    }
    nccl_id = p.id;
    name = p.name;
    if (++p.joined == nranks) Registry().erase(it);
  }
  DISTLAB_CUDA(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  DISTLAB_NCCL(ncclCommInitRankConfig(&comm, nranks, nccl_id, rank, &config));
  CommOptions opts = options;
  opts.name = name;
  return std::unique_ptr<Comm>(new NcclComm(comm, rank, nranks, device, opts));
}

absl::Status LaunchGroup(std::vector<std::unique_ptr<internal::GroupedOp>> ops) {
  DISTLAB_NCCL(ncclGroupStart());
  absl::Status status;
  for (auto& g : ops) {
    const auto& op = static_cast<const NcclOp&>(*g);
    const cudaError_t e = Dl().cudaSetDevice(op.device);
    if (e != cudaSuccess) {
      if (status.ok()) status = CudaError("cudaSetDevice", e, __FILE__, __LINE__);
      continue;
    }
    const ncclResult_t r = op.launch();
    if (r != ncclSuccess && r != ncclInProgress && status.ok())
      status = NcclError(op.what.c_str(), r, __FILE__, __LINE__);
  }
  const ncclResult_t end = Dl().ncclGroupEnd();
  if (end != ncclSuccess && end != ncclInProgress && status.ok()) {
    status = NcclError("ncclGroupEnd", end, __FILE__, __LINE__);
  }
  for (auto& g : ops) {
    const auto& op = static_cast<const NcclOp&>(*g);
    Dl().cudaSetDevice(op.device);
    op.after(status.ok());
  }
  return status;
}

absl::Status Available(int ranks) {
  return NeedDevices(absl::StrCat("running ", ranks, ranks == 1 ? " rank" : " ranks").c_str(), ranks,
                     ranks - 1);
}

}  // namespace distlab::comm::nccl
