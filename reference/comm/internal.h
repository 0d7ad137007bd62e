// Internals shared by the backend-independent part of the runtime (comm.cc, stream.cc) and the backends
// (threads_comm.cc). Not part of the API: code outside reference/comm must not include it.
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

}  // namespace internal

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
// Joins the communicator of `nranks` ranks that meet in `store` under the key prefix `prefix`; Gloo listens on
// `host` (an address of this machine the peers can reach). The communicator keeps the store (Split uses it).
absl::StatusOr<std::unique_ptr<Comm>> InitWithStore(int nranks, int rank, std::shared_ptr<Store> store,
                                                    const std::string& prefix, const std::string& host,
                                                    const CommOptions& options);
// Ranks of this machine (threads or processes) that share a UniqueId meet in a file store under $TMPDIR.
absl::StatusOr<std::unique_ptr<Comm>> InitRank(int nranks, UniqueId id, int rank, const CommOptions& options);
// n ranks of this process, one thread each joining through InitRank.
absl::StatusOr<std::vector<std::unique_ptr<Comm>>> InitAll(int n, const CommOptions& options);
absl::Status LaunchGroup(std::vector<std::unique_ptr<internal::GroupedOp>> ops);
}  // namespace gloo_backend

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_INTERNAL_H_
