// CommInitFromEnv (comm.h): a communicator of processes, from the variables a launcher sets.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/comm/internal.h"
#include "reference/comm/store.h"
#include "reference/trace/trace.h"

namespace distlab::comm {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

absl::StatusOr<int> IntEnv(const char* name) {
  const char* v = Env(name);
  if (v == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CommInitFromEnv: ", name,
        " is not set. Start the program with ./labctl launch -n N -- PROGRAM "
        "(it sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or run its ranks as threads with "
        "CommInitAll/RunRanks"));
  }
  char* end = nullptr;
  const long value = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || value < 0 || value > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommInitFromEnv: ", name, "='", v, "' is not a valid number"));
  }
  return static_cast<int>(value);
}

// The address of this machine on the route to `host` (no packet is sent: a UDP socket is only connected).
std::string LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0) return "127.0.0.1";
  std::string out = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char buf[INET_ADDRSTRLEN];
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf)) != nullptr) {
      out = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return out;
}

}  // namespace

bool LaunchedByLauncher() { return Env("WORLD_SIZE") != nullptr; }

absl::StatusOr<std::unique_ptr<Comm>> CommInitFromEnv(CommOptions options) {
  ASSIGN_OR_RETURN(const int world, IntEnv("WORLD_SIZE"));
  ASSIGN_OR_RETURN(const int rank, IntEnv("RANK"));
  if (world < 1) return absl::InvalidArgumentError("CommInitFromEnv: WORLD_SIZE must be at least 1, got 0");
  if (rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommInitFromEnv: RANK=", rank, " is out of range for WORLD_SIZE=", world));
  }
  if (const char* ms = Env("DISTLAB_COMM_TIMEOUT_MS")) {
    const long v = std::strtol(ms, nullptr, 10);
    if (v <= 0)
      return absl::InvalidArgumentError(absl::StrCat("DISTLAB_COMM_TIMEOUT_MS='", ms, "' must be > 0"));
    options.timeout = std::chrono::milliseconds(v);
  }
  absl::StatusOr<Backend> backend = BackendFromEnv();
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat("CommInitFromEnv: ", backend.status().message()));
  }
  if (*backend == Backend::kThreads) {
    if (world != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CommInitFromEnv: DISTLAB_BACKEND=threads runs every rank in one process, but WORLD_SIZE=", world,
          " processes were started; use DISTLAB_BACKEND=gloo (or nccl)"));
    }
    options.backend = Backend::kThreads;
    ASSIGN_OR_RETURN(auto comms, CommInitAll(1, options));
    return std::move(comms[0]);
  }
  if (*backend == Backend::kNccl) {
    options.backend = Backend::kNccl;
    return CommInitRank(world, UniqueId{}, rank, options);  // the nccl backend says whether it is built
  }
  options.backend = Backend::kGloo;
  const std::chrono::milliseconds timeout = ScaledTimeout(options.timeout);
  static std::atomic<int> calls{0};
  const std::string prefix = absl::StrCat("world", calls.fetch_add(1));
  std::shared_ptr<Store> store;
  std::string host = "127.0.0.1";
  const char* store_spec = Env("DISTLAB_STORE");
  if (store_spec != nullptr && std::strncmp(store_spec, "file:", 5) == 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<FileStore> fs, FileStore::Create(store_spec + 5));
    store = std::move(fs);
  } else {
    const char* addr = Env("MASTER_ADDR");
    if (addr == nullptr) {
      return absl::FailedPreconditionError(
          "CommInitFromEnv: MASTER_ADDR is not set (the host of rank 0, which serves the rendezvous store)");
    }
    ASSIGN_OR_RETURN(const int port, IntEnv("MASTER_PORT"));
    if (port == 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("CommInitFromEnv: MASTER_PORT=", port, " is not a port"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> tcp, TcpStore::Create(addr, port, rank == 0, timeout));
    store = std::move(tcp);
    host = LocalAddressToward(addr);
  }
  if (const char* h = Env("DISTLAB_GLOO_HOST")) host = h;
  if (options.name.empty()) options.name = prefix;
  std::shared_ptr<Store> keep = store;
  auto comm = gloo_backend::InitWithStore(world, rank, std::move(store), prefix, host, options);
  // Every rank has just left the same rendezvous: the instant trace parts of several machines align on.
  if (comm.ok()) trace::MarkClockSync();
  if (!comm.ok() && rank == 0) {
    // Rank 0 serves the store: it stays a moment after failing so that the other ranks can still read what
    // they need to report their own, precise error (e.g. rank 0's WORLD_SIZE) instead of a lost store.
    std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(1000)));
  }
  return comm;
}

}  // namespace distlab::comm
