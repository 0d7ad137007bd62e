// The backend-independent part of the API: backend dispatch, thread-local groups, RunRanks, timeouts.
#include "reference/comm/comm.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "reference/comm/internal.h"

namespace distlab::comm {

Comm::~Comm() = default;

namespace {

absl::Status BackendNotBuilt(Backend backend) {
  switch (backend) {
    case Backend::kNccl:
      return absl::UnimplementedError(
          "the nccl backend is not built in this version of the runtime (it needs the CUDA toolkit when the "
          "build is configured); use Backend::kThreads");
    case Backend::kThreads:
    case Backend::kGloo:
      break;
  }
  return absl::InvalidArgumentError("unknown backend " + std::to_string(static_cast<int>(backend)));
}

// --- Thread-local groups ---

struct GroupState {
  int depth = 0;
  std::vector<std::unique_ptr<internal::GroupedOp>> ops;
  absl::Status first_error;
};

GroupState& Group() {
  thread_local GroupState state;
  return state;
}

std::atomic<Backend>& DefaultBackendSetting() {
  static std::atomic<Backend> backend{Backend::kThreads};
  return backend;
}
std::atomic<bool>& DefaultHostStagingSetting() {
  static std::atomic<bool> staging{false};
  return staging;
}

std::mutex& ObserverMu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::function<void(int, Backend)>& Observer() {
  static auto* observer = new std::function<void(int, Backend)>();
  return *observer;
}

void Observe(int nranks, Backend backend) {
  std::function<void(int, Backend)> observer;
  {
    std::lock_guard<std::mutex> lock(ObserverMu());
    observer = Observer();
  }
  if (observer) observer(nranks, backend);
}

}  // namespace

void SetCommInitObserver(std::function<void(int nranks, Backend backend)> observer) {
  std::lock_guard<std::mutex> lock(ObserverMu());
  Observer() = std::move(observer);
}

Backend DefaultBackend() { return DefaultBackendSetting().load(); }
bool DefaultHostStaging() { return DefaultHostStagingSetting().load(); }
void SetDefaultBackend(Backend backend, bool host_staging) {
  DefaultBackendSetting().store(backend);
  DefaultHostStagingSetting().store(host_staging);
}

absl::Status BackendAvailable(Backend backend, int ranks) {
  if (ranks < 1)
    return absl::InvalidArgumentError(absl::StrCat("BackendAvailable: need at least 1 rank, got ", ranks));
  if (backend == Backend::kThreads || backend == Backend::kGloo) return absl::OkStatus();
#ifdef DISTLAB_WITH_NCCL
  if (backend == Backend::kNccl) return nccl::Available(ranks);
#endif
  return BackendNotBuilt(backend);
}

// The one place that maps a Backend to its implementation; the rank counts are checked here for every
// backend.
absl::StatusOr<std::vector<std::unique_ptr<Comm>>> CommInitAll(int n, CommOptions options) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("CommInitAll: need at least 1 rank, got ", n));
  Observe(n, options.backend);
  if (options.backend == Backend::kThreads) return threads::InitAll(n, options);
  if (options.backend == Backend::kGloo) return gloo_backend::InitAll(n, options);
#ifdef DISTLAB_WITH_NCCL
  if (options.backend == Backend::kNccl) return nccl::InitAll(n, options);
#endif
  return BackendNotBuilt(options.backend);
}

absl::StatusOr<std::unique_ptr<Comm>> CommInitRank(int nranks, UniqueId id, int rank, CommOptions options) {
  if (nranks < 1)
    return absl::InvalidArgumentError(absl::StrCat("CommInitRank: need at least 1 rank, got ", nranks));
  if (rank < 0 || rank >= nranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommInitRank: rank ", rank, " is out of range for ", nranks, " ranks"));
  }
  Observe(nranks, options.backend);
  if (options.backend == Backend::kThreads) return threads::InitRank(nranks, id, rank, options);
  if (options.backend == Backend::kGloo) return gloo_backend::InitRank(nranks, id, rank, options);
#ifdef DISTLAB_WITH_NCCL
  if (options.backend == Backend::kNccl) return nccl::InitRank(nranks, id, rank, options);
#endif
  return BackendNotBuilt(options.backend);
}

UniqueId GetUniqueId() {
  // Random high bits (ids of different runs differ) and a counter (ids of one process never collide).
  static const uint64_t base = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  static std::atomic<uint64_t> counter{0};
  return UniqueId{base + 0x9e3779b97f4a7c15ull * (counter.fetch_add(1) + 1)};
}

namespace internal {

bool InGroup() { return Group().depth > 0; }

void AddToGroup(std::unique_ptr<GroupedOp> op) { Group().ops.push_back(std::move(op)); }

void RecordGroupError(const absl::Status& status) {
  GroupState& group = Group();
  if (group.first_error.ok()) group.first_error = status;
}

}  // namespace internal

absl::Status GroupStart() {
  ++Group().depth;
  return absl::OkStatus();
}

absl::Status GroupEnd() {
  GroupState& group = Group();
  if (group.depth == 0) return absl::FailedPreconditionError("GroupEnd without a matching GroupStart");
  if (--group.depth > 0) return absl::OkStatus();  // only the outermost GroupEnd launches
  std::vector<std::unique_ptr<internal::GroupedOp>> ops = std::move(group.ops);
  group.ops.clear();
  absl::Status status = std::move(group.first_error);
  group.first_error = absl::OkStatus();
  // Dispatch by backend: each backend launches the grouped ops it made.
  std::vector<std::unique_ptr<internal::GroupedOp>> threads_ops, gloo_ops, nccl_ops;
  for (auto& op : ops) {
    if (op->backend() == Backend::kThreads) {
      threads_ops.push_back(std::move(op));
    } else if (op->backend() == Backend::kGloo) {
      gloo_ops.push_back(std::move(op));
    } else if (op->backend() == Backend::kNccl) {
      nccl_ops.push_back(std::move(op));
    } else if (status.ok()) {
      status = BackendNotBuilt(op->backend());
    }
  }
  if (!threads_ops.empty()) {
    absl::Status launched = threads::LaunchGroup(std::move(threads_ops));
    if (status.ok()) status = launched;
  }
  if (!gloo_ops.empty()) {
    absl::Status launched = gloo_backend::LaunchGroup(std::move(gloo_ops));
    if (status.ok()) status = launched;
  }
#ifdef DISTLAB_WITH_NCCL
  if (!nccl_ops.empty()) {
    absl::Status launched = nccl::LaunchGroup(std::move(nccl_ops));
    if (status.ok()) status = launched;
  }
#endif
  return status;
}

std::vector<absl::Status> RunRanks(
    int n, const std::function<absl::Status(int rank, Comm& comm, Stream& stream)>& body,
    CommOptions options) {
  auto comms = CommInitAll(n, options);
  if (!comms.ok()) return std::vector<absl::Status>(n > 0 ? n : 1, comms.status());
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Comm& comm = *(*comms)[r];
      absl::Status status;
      {
        Stream stream;
        try {
          status = body(r, comm, stream);
        } catch (const std::exception& e) {
          status = absl::InternalError("rank " + std::to_string(r) + " threw an exception: " + e.what());
        } catch (...) {
          status = absl::InternalError("rank " + std::to_string(r) + " threw a non-standard exception");
        }
        // A rank that gives up aborts its communicator, so peers blocked in a collective with it fail now
        // ("rank r aborted comm ...") instead of waiting for the communicator's timeout.
        if (!status.ok() && !comm.released()) comm.Abort().IgnoreError();
        absl::Status synced = stream.Synchronize();
        if (status.ok()) status = synced;
      }
      absl::Status destroyed = comm.released() ? absl::OkStatus() : comm.Destroy();
      if (status.ok()) status = destroyed;
      statuses[r] = internal::Fresh(status);
    });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

absl::Status FirstError(const std::vector<absl::Status>& statuses) {
  // A rank that failed because a peer aborted is a consequence; the peer's own error is the cause.
  for (const auto& s : statuses) {
    if (!s.ok() && s.code() != absl::StatusCode::kAborted) return s;
  }
  for (const auto& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::chrono::milliseconds ScaledTimeout(std::chrono::milliseconds base) {
  double scale = 1.0;
  if (const char* env = std::getenv("DISTLAB_TIMEOUT_SCALE")) {
    char* end = nullptr;
    const double parsed = std::strtod(env, &end);
    if (end != env && parsed >= 1.0) scale = parsed;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(base.count()) * scale));
}

}  // namespace distlab::comm
