// The rendezvous stores (store.h).
//
// Wire format of the TCP store: a request is [u32 length][u8 op][u32 key length][key][value], a reply is
// [u32 length][u8 found][value] (lengths count the bytes after themselves, little-endian as the host is).
// Ops: 'S' set (reply found=1), 'G' get (found=0 when the key is not set). The server is one thread that
// poll()s its listening socket, its clients and a wake-up pipe; it parses whole frames out of per-client
// buffers, so a slow client never blocks the others. Waiting is done by the clients (Store::Get polls).
#include "reference/comm/store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace distlab::comm {

using Clock = std::chrono::steady_clock;

Store::~Store() = default;

absl::StatusOr<std::string> Store::Get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    absl::StatusOr<std::string> value = TryGet(key);
    if (value.ok() || value.status().code() != absl::StatusCode::kNotFound) return value;
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(Describe(), ": key '", key, "' was not set within ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

absl::Status Store::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                         std::vector<bool>* seen_out) {
  const auto deadline = Clock::now() + timeout;
  std::vector<bool> local;
  std::vector<bool>& seen = seen_out != nullptr ? *seen_out : local;
  seen.assign(keys.size(), false);
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    bool all = true;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (seen[i]) continue;
      absl::StatusOr<std::string> value = TryGet(keys[i]);
      if (value.ok()) {
        seen[i] = true;
      } else if (value.status().code() == absl::StatusCode::kNotFound) {
        all = false;
      } else {
        return value.status();
      }
    }
    if (all) return absl::OkStatus();
    if (Clock::now() >= deadline) {
      std::string missing;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!seen[i]) absl::StrAppend(&missing, missing.empty() ? "'" : ", '", keys[i], "'");
      }
      return absl::DeadlineExceededError(
          absl::StrCat(Describe(), ": waited ", timeout.count(), " ms; still missing ", missing));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

// ---------------------------------------------------------------------------------------------------------
// TCP store
// ---------------------------------------------------------------------------------------------------------

namespace {

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

bool WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t w = ::send(fd, data, len, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    len -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t len) {
  while (len > 0) {
    const ssize_t r = ::recv(fd, data, len, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    len -= static_cast<size_t>(r);
  }
  return true;
}

std::string Frame(const std::string& body) {
  const uint32_t len = static_cast<uint32_t>(body.size());
  std::string out(sizeof(len), '\0');
  std::memcpy(out.data(), &len, sizeof(len));
  return out + body;
}

// The server: a thread in the process of rank 0.
class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::InternalError(Errno("tcp store: socket"));
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0) {
      const std::string err = Errno("bind/listen");
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("tcp store: cannot serve on port ", port, " (", err,
                                                 "); is another run using MASTER_PORT ", port, "?"));
    }
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC) != 0) {
      ::close(fd);
      return absl::InternalError(Errno("tcp store: pipe"));
    }
    auto server = std::unique_ptr<Server>(new Server(fd, ntohs(addr.sin_port), wake));
    server->thread_ = std::thread([s = server.get()] { s->Run(); });
    return server;
  }

  ~Server() {
    const char c = 'q';
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
    for (auto& [fd, buf] : clients_) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  int port() const { return port_; }

 private:
  Server(int fd, int port, int wake[2]) : listen_fd_(fd), port_(port) {
    wake_[0] = wake[0];
    wake_[1] = wake[1];
  }

  void Run() {
    while (true) {
      std::vector<pollfd> fds;
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& [fd, buf] : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          const int one = 1;
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          clients_[c];
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        if (!Serve(fds[i].fd)) {
          ::close(fds[i].fd);
          clients_.erase(fds[i].fd);
        }
      }
    }
  }

  // Reads what is available from one client and answers every complete request. False: drop the client.
  bool Serve(int fd) {
    char chunk[64 * 1024];
    const ssize_t r = ::recv(fd, chunk, sizeof(chunk), 0);
    if (r <= 0) return r < 0 && errno == EINTR;
    std::string& buf = clients_[fd];
    buf.append(chunk, static_cast<size_t>(r));
    while (buf.size() >= 4) {
      uint32_t len;
      std::memcpy(&len, buf.data(), 4);
      if (buf.size() < 4 + size_t{len}) break;
      const std::string body = buf.substr(4, len);
      buf.erase(0, 4 + size_t{len});
      if (body.size() < 5) return false;
      uint32_t klen;
      std::memcpy(&klen, body.data() + 1, 4);
      if (body.size() < 5 + size_t{klen}) return false;
      const std::string key = body.substr(5, klen);
      std::string reply;
      if (body[0] == 'S') {
        values_[key] = body.substr(5 + klen);
        reply = "\1";
      } else if (body[0] == 'G') {
        auto it = values_.find(key);
        reply = it == values_.end() ? std::string("\0", 1) : "\1" + it->second;
      } else {
        return false;
      }
      const std::string framed = Frame(reply);
      if (!WriteAll(fd, framed.data(), framed.size())) return false;
    }
    return true;
  }

  const int listen_fd_;
  const int port_;
  int wake_[2];
  std::thread thread_;
  std::map<int, std::string> clients_;  // fd -> bytes received, not yet parsed
  std::map<std::string, std::string> values_;
};

}  // namespace

struct TcpStore::Impl {
  std::unique_ptr<Server> server;
  std::string host;
  int port = 0;
  int fd = -1;
  std::mutex mu;  // one request at a time on the connection

  std::string Where() const { return absl::StrCat("tcp store ", host, ":", port); }

  absl::StatusOr<std::string> Request(char op, const std::string& key, const std::string& value,
                                      bool* found) {
    std::lock_guard<std::mutex> lock(mu);
    std::string body(1, op);
    const uint32_t klen = static_cast<uint32_t>(key.size());
    body.append(reinterpret_cast<const char*>(&klen), 4);
    body += key;
    body += value;
    const std::string framed = Frame(body);
    uint32_t len = 0;
    if (!WriteAll(fd, framed.data(), framed.size()) || !ReadAll(fd, reinterpret_cast<char*>(&len), 4) ||
        len < 1) {
      return absl::UnavailableError(absl::StrCat(
          Where(), ": lost the connection to the store (rank 0, which serves it, exited or was killed?)"));
    }
    std::string reply(len, '\0');
    if (!ReadAll(fd, reply.data(), len)) {
      return absl::UnavailableError(absl::StrCat(Where(), ": lost the connection to the store mid-reply"));
    }
    *found = reply[0] == 1;
    return reply.substr(1);
  }
};

TcpStore::TcpStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStore::~TcpStore() {
  if (impl_->fd >= 0) ::close(impl_->fd);
}

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Create(const std::string& host, int port, bool serve,
                                                           std::chrono::milliseconds timeout) {
  if (port < 0 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("tcp store: bad port ", port));
  auto impl = std::make_unique<Impl>();
  impl->host = host;
  impl->port = port;
  if (serve) {
    auto server = Server::Start(port);
    if (!server.ok()) return server.status();
    impl->server = std::move(*server);
    impl->port = impl->server->port();
  } else if (port == 0) {
    return absl::InvalidArgumentError("tcp store: a client needs the server's port (MASTER_PORT), got 0");
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(impl->port).c_str(), &hints, &res);
  if (gai != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: cannot resolve MASTER_ADDR '", host, "': ", gai_strerror(gai)));
  }
  const auto deadline = Clock::now() + timeout;
  std::string last_error;
  while (true) {
    const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      impl->fd = fd;
      break;
    }
    last_error = Errno("connect");
    if (fd >= 0) ::close(fd);
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(res);
      return absl::UnavailableError(
          absl::StrCat("tcp store ", host, ":", impl->port, " is unreachable: no server answered within ",
                       timeout.count(), " ms (", last_error,
                       "). Rank 0 serves the store: is it running, and are MASTER_ADDR/MASTER_PORT "
                       "right?"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::freeaddrinfo(res);
  return std::unique_ptr<TcpStore>(new TcpStore(std::move(impl)));
}

absl::Status TcpStore::Set(const std::string& key, const std::string& value) {
  bool found = false;
  return impl_->Request('S', key, value, &found).status();
}

absl::StatusOr<std::string> TcpStore::TryGet(const std::string& key) {
  bool found = false;
  absl::StatusOr<std::string> value = impl_->Request('G', key, "", &found);
  if (value.ok() && !found)
    return absl::NotFoundError(absl::StrCat(Describe(), ": key '", key, "' is not set"));
  return value;
}

std::string TcpStore::Describe() const { return impl_->Where(); }

int TcpStore::port() const { return impl_->port; }

// ---------------------------------------------------------------------------------------------------------
// File store
// ---------------------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Create(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("file store: empty directory name");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("file store: cannot create ", dir, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<FileStore>(new FileStore(dir));
}

// Keys may hold any byte: file names are their hex spelling.
std::string FileStore::Path(const std::string& key) const {
  static const char* kHex = "0123456789abcdef";
  std::string name;
  for (unsigned char c : key) {
    name += kHex[c >> 4];
    name += kHex[c & 15];
  }
  return dir_ + "/" + (name.empty() ? std::string("empty") : name);
}

absl::Status FileStore::Set(const std::string& key, const std::string& value) {
  // Written under a temporary name, then renamed: readers see the whole value or nothing.
  const std::string path = Path(key);
  const std::string tmp =
      absl::StrCat(path, ".tmp.", ::getpid(), ".", std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out) return absl::UnavailableError(absl::StrCat(Describe(), ": cannot write ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat(Describe(), ": cannot rename ", tmp, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileStore::TryGet(const std::string& key) {
  std::ifstream in(Path(key), std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(Describe(), ": key '", key, "' is not set"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<int> FreeTcpPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(Errno("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = Errno("bind");
    ::close(fd);
    return absl::InternalError(err);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace distlab::comm
