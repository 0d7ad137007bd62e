// The backend-independent part of the API: the table of backends, thread-local groups, RunRanks, timeouts.
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
#include "reference/comm/testing.h"
#include "reference/trace/trace.h"
#include "tools/base/timeout_scale.h"

namespace distlab::comm {

Comm::~Comm() = default;

namespace {

// What the backend-independent code needs of a backend. Every Backend has a row; a backend that is not built
// into this binary (nccl without the CUDA toolkit) has null operations.
struct BackendOps {
  Backend backend;
  const char* name;  // as DISTLAB_BACKEND spells it
  // OK when `ranks` ranks fit this machine; null: always.
  absl::Status (*available)(int ranks);
  absl::StatusOr<std::vector<std::unique_ptr<Comm>>> (*init_all)(int n, const CommOptions& options);
  absl::StatusOr<std::unique_ptr<Comm>> (*init_rank)(int nranks, UniqueId id, int rank,
                                                     const CommOptions& options);
  // Launches the grouped operations this backend made, all at once; returns the first error.
  absl::Status (*launch_group)(std::vector<std::unique_ptr<internal::GroupedOp>> ops);
};

constexpr BackendOps kBackends[] = {
    {Backend::kThreads, "threads", nullptr, &threads::InitAll, &threads::InitRank, &threads::LaunchGroup},
    {Backend::kGloo, "gloo", nullptr, &gloo_backend::InitAll, &gloo_backend::InitRank,
     &gloo_backend::LaunchGroup},
#ifdef DISTLAB_WITH_NCCL
    {Backend::kNccl, "nccl", &nccl::Available, &nccl::InitAll, &nccl::InitRank, &nccl::LaunchGroup},
#else
    {Backend::kNccl, "nccl", nullptr, nullptr, nullptr, nullptr},
#endif
};

// The row of `backend`, or nullptr for a value that is not a Backend.
const BackendOps* Row(Backend backend) {
  for (const BackendOps& row : kBackends) {
    if (row.backend == backend) return &row;
  }
  return nullptr;
}

// The row of `backend` when it is built into this binary; otherwise why not.
absl::StatusOr<const BackendOps*> Built(Backend backend) {
  const BackendOps* row = Row(backend);
  if (row == nullptr) {
    return absl::InvalidArgumentError("unknown backend " + std::to_string(static_cast<int>(backend)));
  }
  if (row->init_all == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "the ", row->name,
        " backend is not built in this version of the runtime (it needs the CUDA toolkit when the build is "
        "configured); use Backend::kThreads"));
  }
  return row;
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

// --- The defaults of CommOptions and the CommInit observer (testing.h) ---

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

std::string_view Name(Backend backend) {
  const BackendOps* row = Row(backend);
  return row != nullptr ? row->name : "?";
}

namespace {

// "threads, gloo, nccl"
std::string BackendNames() {
  std::string names;
  for (const BackendOps& row : kBackends) absl::StrAppend(&names, names.empty() ? "" : ", ", row.name);
  return names;
}

}  // namespace

absl::StatusOr<Backend> ParseBackend(std::string_view name) {
  for (const BackendOps& row : kBackends) {
    if (name == row.name) return row.backend;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend '", std::string(name), "' is not one of ", BackendNames()));
}

absl::StatusOr<Backend> BackendFromEnv() {
  const char* env = std::getenv("DISTLAB_BACKEND");
  if (env == nullptr || *env == '\0') return Backend::kGloo;
  absl::StatusOr<Backend> backend = ParseBackend(env);
  if (backend.ok()) return backend;
  return absl::InvalidArgumentError(
      absl::StrCat("DISTLAB_BACKEND='", env, "' is not one of ", BackendNames()));
}

absl::Status BackendAvailable(Backend backend, int ranks) {
  if (ranks < 1)
    return absl::InvalidArgumentError(absl::StrCat("BackendAvailable: need at least 1 rank, got ", ranks));
  absl::StatusOr<const BackendOps*> row = Built(backend);
  if (!row.ok()) return row.status();
  return (*row)->available != nullptr ? (*row)->available(ranks) : absl::OkStatus();
}

// The rank counts are checked here, once, for every backend.
absl::StatusOr<std::vector<std::unique_ptr<Comm>>> CommInitAll(int n, CommOptions options) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("CommInitAll: need at least 1 rank, got ", n));
  Observe(n, options.backend);
  absl::StatusOr<const BackendOps*> row = Built(options.backend);
  if (!row.ok()) return row.status();
  return (*row)->init_all(n, options);
}

absl::StatusOr<std::unique_ptr<Comm>> CommInitRank(int nranks, UniqueId id, int rank, CommOptions options) {
  if (nranks < 1)
    return absl::InvalidArgumentError(absl::StrCat("CommInitRank: need at least 1 rank, got ", nranks));
  if (rank < 0 || rank >= nranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommInitRank: rank ", rank, " is out of range for ", nranks, " ranks"));
  }
  Observe(nranks, options.backend);
  absl::StatusOr<const BackendOps*> row = Built(options.backend);
  if (!row.ok()) return row.status();
  return (*row)->init_rank(nranks, id, rank, options);
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
  // Each backend launches the grouped ops it made, in the table's order.
  for (const BackendOps& row : kBackends) {
    std::vector<std::unique_ptr<internal::GroupedOp>> mine;
    for (auto& op : ops) {
      if (op != nullptr && op->backend() == row.backend) mine.push_back(std::move(op));
    }
    if (mine.empty()) continue;
    absl::StatusOr<const BackendOps*> built = Built(row.backend);
    absl::Status launched = built.ok() ? row.launch_group(std::move(mine)) : built.status();
    if (status.ok()) status = launched;
  }
  for (auto& op : ops) {
    if (op != nullptr && status.ok()) status = Built(op->backend()).status();
  }
  return status;
}

absl::Status Grouped(const std::function<absl::Status()>& calls) {
  absl::Status first = GroupStart();
  if (!first.ok()) return first;
  try {
    first = calls();
  } catch (...) {
    GroupEnd().IgnoreError();  // the group never outlives the calls, even when one throws
    throw;
  }
  absl::Status end = GroupEnd();
  return first.ok() ? end : first;
}

absl::Status SendRecv(Comm& comm, const void* send, size_t send_count, int to, void* recv, size_t recv_count,
                      int from, DataType dtype, Stream& stream) {
  return Grouped([&]() -> absl::Status {
    if (send_count > 0) {
      absl::Status sent = comm.Send(send, send_count, dtype, to, stream);
      if (!sent.ok()) return sent;
    }
    if (recv_count > 0) return comm.Recv(recv, recv_count, dtype, from, stream);
    return absl::OkStatus();
  });
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
      if (trace::Enabled()) trace::SetThreadName("rank " + std::to_string(r));
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
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(base.count()) * TimeoutScale()));
}

}  // namespace distlab::comm
