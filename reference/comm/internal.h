// Internals shared by the backend-independent part of the runtime (comm.cc, stream.cc) and the backends
// (threads_comm.cc, gloo_comm.cc, nccl_comm.cc). Not part of the API: code outside reference/comm must not
// include it.
#ifndef DISTLAB_REFERENCE_COMM_INTERNAL_H_
#define DISTLAB_REFERENCE_COMM_INTERNAL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reference/comm/comm.h"

namespace distlab::comm {

namespace internal {

// A device-side marker (a CUDA event) recorded by a DeviceQueue.
class DeviceMarker {
 public:
  virtual ~DeviceMarker() = default;
  virtual absl::Status Synchronize() = 0;
  virtual bool Query() const = 0;
  // Milliseconds from `start` to this marker; both reached, both from the same kind of queue.
  virtual absl::StatusOr<double> ElapsedMsSince(const DeviceMarker& start) const = 0;
};

// A device queue (a CUDA stream) that a device backend attaches to a Stream the first time it launches work
// on it. Host work enqueued on such a Stream waits for the device work before it; device work waits for the
// host work before it (see AttachDevice).
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;  // waits for the queued device work, then releases the queue
  // Waits for the device work queued so far; returns its error (a timeout, a CUDA or NCCL error).
  virtual absl::Status Synchronize() = 0;
  virtual bool Idle() const = 0;
  virtual std::shared_ptr<DeviceMarker> Record() = 0;
};

}  // namespace internal

// The worker thread behind a Stream: runs enqueued closures in order.
struct Stream::Impl {
  mutable std::mutex mu;
  std::condition_variable work_cv;  // the worker waits for work or stop
  std::condition_variable done_cv;  // Synchronize waits for `completed`
  std::deque<std::function<absl::Status()>> queue;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  absl::Status error;  // first error since the last Synchronize
  bool stop = false;
  std::thread worker;
  // Set once by a device backend (internal::AttachDevice); released after the worker stopped.
  std::unique_ptr<internal::DeviceQueue> device;

  void Run();
};

namespace internal {

// A copy of `s` with its own storage. absl::Status shares its message between copies through a reference
// count that lives in the (uninstrumented) absl library; statuses that cross threads are copied with this so
// ThreadSanitizer sees no sharing it cannot follow.
inline absl::Status Fresh(const absl::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(s.code(), s.message());
}

// One operation recorded between GroupStart and GroupEnd; the backend that made it launches it.
class GroupedOp {
 public:
  virtual ~GroupedOp() = default;
  virtual Backend backend() const = 0;
};

// True while the calling thread is between GroupStart and the matching outermost GroupEnd.
bool InGroup();
// Records a grouped operation of the calling thread's group (InGroup() must be true).
void AddToGroup(std::unique_ptr<GroupedOp> op);
// Records an error of a grouped call: GroupEnd returns the first one.
void RecordGroupError(const absl::Status& status);

// The device queue of `stream`, made by `make` on first use (under the stream's lock). Before returning it
// waits until the stream's host work enqueued so far has run, so device work launched next follows it.
DeviceQueue* AttachDevice(Stream& stream, const std::function<std::unique_ptr<DeviceQueue>()>& make);

}  // namespace internal

// Backend entry points: the rows of comm.cc's table of backends. CommInitAll / CommInitRank check the rank
// counts before calling them.

// --- The threads backend (threads_comm.cc) ---
namespace threads {
absl::StatusOr<std::vector<std::unique_ptr<Comm>>> InitAll(int n, const CommOptions& options);
absl::StatusOr<std::unique_ptr<Comm>> InitRank(int nranks, UniqueId id, int rank, const CommOptions& options);
// Launches grouped operations made by this backend (all of them at once; returns the first error).
absl::Status LaunchGroup(std::vector<std::unique_ptr<internal::GroupedOp>> ops);
}  // namespace threads

// --- The gloo backend (gloo_comm.cc): one rank per process, Gloo over TCP, rendezvous through a Store ---
class Store;
namespace gloo_backend {
// Joins the communicator of `nranks` ranks that meet in `store` under the key prefix `prefix`; Gloo listens
// on `host` (an address of this machine the peers can reach). The communicator keeps the store (Split uses
// it).
absl::StatusOr<std::unique_ptr<Comm>> InitWithStore(int nranks, int rank, std::shared_ptr<Store> store,
                                                    const std::string& prefix, const std::string& host,
                                                    const CommOptions& options);
// Ranks of this machine (threads or processes) that share a UniqueId meet in a file store under $TMPDIR.
absl::StatusOr<std::unique_ptr<Comm>> InitRank(int nranks, UniqueId id, int rank, const CommOptions& options);
// n ranks of this process, one thread each joining through InitRank.
absl::StatusOr<std::vector<std::unique_ptr<Comm>>> InitAll(int n, const CommOptions& options);
absl::Status LaunchGroup(std::vector<std::unique_ptr<internal::GroupedOp>> ops);
}  // namespace gloo_backend
// --- The nccl backend (nccl_comm.cc; compiled wherever the CUDA toolkit exists, loads it with dlopen) ---
#ifdef DISTLAB_WITH_NCCL
namespace nccl {
absl::StatusOr<std::vector<std::unique_ptr<Comm>>> InitAll(int n, const CommOptions& options);
absl::StatusOr<std::unique_ptr<Comm>> InitRank(int nranks, UniqueId id, int rank, const CommOptions& options);
absl::Status LaunchGroup(std::vector<std::unique_ptr<internal::GroupedOp>> ops);
// OK when `ranks` ranks fit this machine's GPUs (one per device), else FAILED_PRECONDITION saying why.
absl::Status Available(int ranks);
}  // namespace nccl
#endif

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_INTERNAL_H_
