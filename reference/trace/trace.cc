// The trace recorder (trace.h): per-thread buffers, the document writer, DISTLAB_TRACE, forked children and
// launched ranks.
//
// Cost model. Off: Enabled() is one relaxed load. On: an event is built into the calling thread's own buffer
// under that buffer's mutex, which only the writer ever contends for; names and arguments are copied
// (std::string), nothing is formatted until the document is written.
#include "reference/trace/trace.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace distlab::trace {
namespace internal {
std::atomic<bool> g_enabled{false};
}  // namespace internal

namespace {

using nlohmann::json;

struct Event {
  std::string name;
  std::string category;
  int pid = 0;
  int tid = 0;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  std::string args;  // the body of the args object
};

struct ThreadBuffer {
  std::mutex mu;
  std::vector<Event> events;
  int tid = 0;
  std::string name;
  bool alive = true;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> track_names;  // (pid, tid) -> name (SetTrackName)
  std::string path;  // as given to Start (the part's name is derived from it)
  int64_t origin_ns = 0;
  int64_t wall_origin_ns = 0;
  int64_t sync_ns = -1;
  bool atexit_registered = false;
  bool written = false;  // by Stop or a signal: the exit handler has nothing left to do
  // In a forked child: every event is appended to this file as it is recorded.
  int child_fd = -1;
};

// Leaked on purpose: events recorded by threads that outlive main() and the exit handler may use it.
Registry& Reg() {
  static Registry* r = new Registry;
  return *r;
}

int64_t WallNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<int>(x) : fallback;
}

bool Launched() { return std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr; }

// FILE.rank<R>.json for a launched rank, FILE otherwise.
std::string FilePath(const std::string& path) {
  if (path.empty() || !Launched()) return path;
  return path + ".rank" + std::to_string(EnvInt("RANK", 0)) + ".json";
}

std::string ReadFirstLine(const char* file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

void AppendEscaped(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Microseconds with exactly three decimals (the trace's nanoseconds, nothing invented or lost).
std::string Micros(int64_t ns) {
  const bool negative = ns < 0;
  const int64_t a = negative ? -ns : ns;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", negative ? "-" : "", static_cast<long long>(a / 1000),
                static_cast<long long>(a % 1000));
  return buf;
}

std::string EventJson(const Event& e, int64_t origin_ns) {
  std::string out = "{\"name\":";
  AppendEscaped(out, e.name);
  out += ",\"cat\":";
  AppendEscaped(out, e.category);
  out += ",\"ph\":\"X\",\"ts\":" + Micros(e.start_ns - origin_ns) + ",\"dur\":" + Micros(e.dur_ns) +
         ",\"pid\":" + std::to_string(e.pid) + ",\"tid\":" + std::to_string(e.tid) + ",\"args\":{" + e.args +
         "}}";
  return out;
}

std::string MetadataJson(const char* what, int pid, int tid, const std::string& name) {
  std::string out = std::string("{\"name\":\"") + what + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid);
  if (tid >= 0) out += ",\"tid\":" + std::to_string(tid);
  out += ",\"args\":{\"name\":";
  AppendEscaped(out, name);
  return out + "}}";
}

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

struct ThreadHolder {
  std::shared_ptr<ThreadBuffer> buffer;
  ~ThreadHolder() {
    if (buffer) {
      std::lock_guard<std::mutex> lock(buffer->mu);
      buffer->alive = false;
    }
  }
};

// The calling thread's buffer, registered on first use.
std::shared_ptr<ThreadBuffer>& MyBufferPtr() {
  thread_local ThreadHolder holder;
  if (!holder.buffer) {
    auto b = std::make_shared<ThreadBuffer>();
    b->tid = CurrentTid();
    Registry& r = Reg();
    std::lock_guard<std::mutex> lock(r.mu);
    r.buffers.push_back(b);
    holder.buffer = std::move(b);
  }
  return holder.buffer;
}
ThreadBuffer& MyBuffer() { return *MyBufferPtr(); }

// In a forked child: this event (and, the first time, the thread's name) goes straight to the child's file.
void AppendToChildFile(ThreadBuffer& b, const Event& e) {
  Registry& r = Reg();
  std::string line;
  if (!b.name.empty()) {
    line += MetadataJson("thread_name", e.pid, b.tid, b.name) + "\n";
    b.name.clear();  // written once
  }
  line += EventJson(e, 0) + "\n";  // absolute microseconds: the parent subtracts its own origin
  WriteAll(r.child_fd, line);
}

void ForgetStopHandlers();

// fork(): the child keeps only the forking thread's buffer (the other threads do not exist there), empty,
// and from then on appends each event to FILE.fork<PID>.jsonl. PrepareFork holds the registry's mutex
// across fork, so no document is being written and no buffer is locked by the writer at that moment.
void PrepareFork() { Reg().mu.lock(); }
void ParentAfterFork() { Reg().mu.unlock(); }
void ChildAfterFork() {
  Registry& r = Reg();
  r.buffers.clear();
  r.mu.unlock();
  std::shared_ptr<ThreadBuffer>& mine = MyBufferPtr();  // registers a fresh buffer if this thread had none
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.buffers.empty()) r.buffers.push_back(mine);
  }
  mine->events.clear();
  mine->tid = CurrentTid();
  mine->name = (mine->name.empty() ? std::string("main") : mine->name) + " (forked pid " +
               std::to_string(::getpid()) + ")";
  r.child_fd = -1;       // a grandchild opens its own file
  ForgetStopHandlers();  // their thread did not survive the fork
  const std::string file = FilePath(r.path);
  if (!Enabled() || file.empty()) {
    internal::g_enabled.store(false, std::memory_order_relaxed);
    return;
  }
  const std::string part = file + ".fork" + std::to_string(::getpid()) + ".jsonl";
  r.child_fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (r.child_fd < 0) internal::g_enabled.store(false, std::memory_order_relaxed);
}

void RegisterForkHandlersOnce() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(PrepareFork, ParentAfterFork, ChildAfterFork); });
}

// One X event ready to be written, and the keys it is sorted by.
struct Row {
  int pid, tid;
  double ts_us, dur_us;
  std::string json;
};

// The forked children's files next to `file` (FILE.fork<PID>.jsonl): their X events shifted to the
// document's origin, and their metadata lines as they are.
void FoldChildFiles(const std::string& file, int64_t origin_ns, std::vector<Row>& rows,
                    std::vector<std::string>& metadata, bool remove) {
  const size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash);
  const std::string base = (slash == std::string::npos ? file : file.substr(slash + 1)) + ".fork";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> parts;
  while (dirent* ent = ::readdir(d)) {
    const std::string n = ent->d_name;
    if (n.rfind(base, 0) == 0 && n.size() > 6 && n.substr(n.size() - 6) == ".jsonl") {
      parts.push_back(dir + "/" + n);
    }
  }
  ::closedir(d);
  std::sort(parts.begin(), parts.end());
  for (const std::string& p : parts) {
    std::ifstream in(p);
    std::string line;
    while (std::getline(in, line)) {
      json e = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (e.is_discarded() || !e.is_object()) continue;  // a line the child was writing when it was killed
      if (e.value("ph", "") != "X") {
        metadata.push_back(e.dump());
        continue;
      }
      // The child wrote ts in absolute microseconds of the monotonic clock.
      const double ts = e.value("ts", 0.0) - static_cast<double>(origin_ns) / 1000.0;
      e["ts"] = ts;
      rows.push_back({e.value("pid", 0), e.value("tid", 0), ts, e.value("dur", 0.0), e.dump()});
    }
    if (remove) ::unlink(p.c_str());
  }
}

std::string Document(bool fold_children, bool remove_children) {
  Registry& r = Reg();
  std::vector<Row> rows;
  std::vector<std::pair<int, std::string>> thread_names;  // tid -> name
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> track_names;
  int64_t origin_ns, wall_origin_ns, sync_ns;
  std::string path;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    origin_ns = r.origin_ns;
    for (auto& b : r.buffers) {
      std::lock_guard<std::mutex> block(b->mu);
      for (const Event& e : b->events) {
        rows.push_back({e.pid, e.tid, static_cast<double>(e.start_ns - origin_ns) / 1000.0,
                        static_cast<double>(e.dur_ns) / 1000.0, EventJson(e, origin_ns)});
      }
      if (!b->name.empty()) thread_names.emplace_back(b->tid, b->name);
    }
    process_names = r.process_names;
    track_names = r.track_names;
    wall_origin_ns = r.wall_origin_ns;
    sync_ns = r.sync_ns;
    path = r.path;
  }
  std::vector<std::string> child_metadata;
  if (fold_children && !path.empty()) {
    FoldChildFiles(FilePath(path), origin_ns, rows, child_metadata, remove_children);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.pid != b.pid) return a.pid < b.pid;
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.ts_us != b.ts_us) return a.ts_us < b.ts_us;
    return a.dur_us > b.dur_us;  // the enclosing span first
  });
  // Metadata: a name for every pid seen, and each named thread under every pid it recorded for.
  std::map<int, std::vector<int>> tids_of_pid;
  for (const Row& e : rows) {
    auto& v = tids_of_pid[e.pid];
    if (v.empty() || v.back() != e.tid) v.push_back(e.tid);
  }
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& s) {
    if (!first) out += ",\n";
    out += s;
    first = false;
  };
  for (auto& [pid, tids] : tids_of_pid) {
    const auto pn = process_names.find(pid);
    emit(MetadataJson("process_name", pid, -1,
                      pn != process_names.end() ? pn->second : "rank " + std::to_string(pid)));
    emit("{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
         ",\"args\":{\"sort_index\":" + std::to_string(pid) + "}}");
    for (int tid : tids) {
      const auto track = track_names.find({pid, tid});
      if (track != track_names.end()) {
        emit(MetadataJson("thread_name", pid, tid, track->second));
        continue;
      }
      for (const auto& [t, name] : thread_names) {
        if (t == tid) emit(MetadataJson("thread_name", pid, tid, name));
      }
    }
  }
  for (const std::string& m : child_metadata) emit(m);
  for (const Row& e : rows) emit(e.json);
  out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":";
  json other = {{"format", "distlab trace 1"},
                {"clock", "CLOCK_MONOTONIC"},
                {"origin_ns", origin_ns},
                {"wall_origin_ns", wall_origin_ns},
                {"boot_id", ReadFirstLine("/proc/sys/kernel/random/boot_id")},
                {"host", ReadFirstLine("/proc/sys/kernel/hostname")},
                {"os_pid", static_cast<int>(::getpid())}};
  if (Launched()) {
    other["rank"] = EnvInt("RANK", 0);
    other["world_size"] = EnvInt("WORLD_SIZE", 1);
  }
  if (sync_ns >= 0) other["sync_ns"] = sync_ns;
  out += other.dump() + "\n}\n";
  return out;
}

absl::Status WriteFile(const std::string& file) {
  const std::string doc = Document(/*fold_children=*/true, /*remove_children=*/true);
  const std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError("trace: cannot write " + tmp + ": " + std::strerror(errno));
    out << doc;
    if (!out) return absl::UnavailableError("trace: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    return absl::UnavailableError("trace: cannot rename " + tmp + " to " + file + ": " +
                                  std::strerror(errno));
  }
  return absl::OkStatus();
}

// Writes the file once (Stop, the exit handler or a signal, whichever comes first).
absl::Status WriteOnce() {
  Registry& r = Reg();
  std::string file;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.written || r.path.empty() || r.child_fd >= 0) return absl::OkStatus();
    r.written = true;
    file = FilePath(r.path);
  }
  return WriteFile(file);
}

void AtExit() {
  if (absl::Status s = WriteOnce(); !s.ok()) std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
}

// A launched rank that the launcher stops (SIGTERM; SIGINT from Ctrl-C) writes its part first: the handler
// only wakes a thread (a pipe write is async-signal-safe; formatting the document is not), which writes and
// then dies of the same signal. Installed only where the program left the signal at its default.
int g_signal_pipe[2] = {-1, -1};
bool g_stop_handlers = false;  // guarded by Reg().mu
void OnStopSignal(int sig) {
  const unsigned char s = static_cast<unsigned char>(sig);
  if (::write(g_signal_pipe[1], &s, 1) < 0) {
    // Nothing to do from a signal handler.
  }
}

void InstallStopHandlers() {
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    if (g_stop_handlers) return;
    g_stop_handlers = true;
  }
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;
  std::thread([] {
    unsigned char s = 0;
    while (::read(g_signal_pipe[0], &s, 1) < 0 && errno == EINTR) {
    }
    AtExit();
    ::signal(s, SIG_DFL);
    ::raise(s);
  }).detach();
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // the program's own
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// In a forked child (the registry's mutex held or not needed: one thread): the parent's handlers would wake
// a thread that does not exist here, so a SIGTERM would be swallowed. Back to the defaults.
void ForgetStopHandlers() {
  if (!g_stop_handlers) return;
  g_stop_handlers = false;
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == OnStopSignal) ::signal(sig, SIG_DFL);
  }
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

// DISTLAB_TRACE=FILE: record from the start of the program.
const bool kStartedFromEnv = [] {
  const char* file = std::getenv("DISTLAB_TRACE");
  if (file != nullptr && *file != '\0') Start(file);
  return true;
}();

}  // namespace

void Start(const std::string& path) {
  RegisterForkHandlersOnce();
  Registry& r = Reg();
  bool need_atexit = false;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& b : r.buffers) {
      std::lock_guard<std::mutex> block(b->mu);
      b->events.clear();
    }
    // Threads that have ended and left nothing: forget them.
    r.buffers.erase(std::remove_if(r.buffers.begin(), r.buffers.end(),
                                   [](const std::shared_ptr<ThreadBuffer>& b) {
                                     std::lock_guard<std::mutex> block(b->mu);
                                     return !b->alive;
                                   }),
                    r.buffers.end());
    r.path = path;
    r.origin_ns = NowNs();
    r.wall_origin_ns = WallNs();
    r.sync_ns = -1;
    r.written = false;
    if (r.child_fd >= 0) ::close(r.child_fd);  // a forked child that starts a trace of its own
    r.child_fd = -1;
    need_atexit = !path.empty() && !r.atexit_registered;
    if (need_atexit) r.atexit_registered = true;
  }
  if (need_atexit) std::atexit(AtExit);
  if (!path.empty() && Launched()) InstallStopHandlers();
  internal::g_enabled.store(true, std::memory_order_relaxed);
}

absl::Status Stop() {
  internal::g_enabled.store(false, std::memory_order_relaxed);
  return WriteOnce();
}

std::string OutputPath() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  return FilePath(r.path);
}

std::string Json() { return Document(/*fold_children=*/true, /*remove_children=*/false); }

void Clear() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> block(b->mu);
    b->events.clear();
  }
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int DefaultPid() {
  static const int pid = EnvInt("RANK", 0);
  return pid;
}

int CurrentTid() { return static_cast<int>(::syscall(SYS_gettid)); }

void SetProcessName(int pid, const std::string& name) {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  r.process_names[pid] = name;
}

void SetThreadName(const std::string& name) {
  ThreadBuffer& b = MyBuffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.name = name;
}

void SetTrackName(int pid, int tid, const std::string& name) {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  r.track_names[{pid, tid}] = name;
}

void MarkClockSync() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  r.sync_ns = NowNs();
}

void Args::Key(std::string_view key) {
  if (!body_.empty()) body_ += ',';
  AppendEscaped(body_, key);
  body_ += ':';
}

Args& Args::Add(std::string_view key, int64_t value) {
  Key(key);
  body_ += std::to_string(value);
  return *this;
}

Args& Args::Add(std::string_view key, uint64_t value) {
  Key(key);
  body_ += std::to_string(value);
  return *this;
}

Args& Args::Add(std::string_view key, double value) {
  Key(key);
  if (value != value || value == 1.0 / 0.0 || value == -1.0 / 0.0) {
    body_ += "null";  // JSON has no NaN or infinity
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    body_ += buf;
  }
  return *this;
}

Args& Args::Add(std::string_view key, std::string_view value) {
  Key(key);
  AppendEscaped(body_, value);
  return *this;
}

void Complete(std::string_view name, std::string_view category, int pid, int64_t start_ns, int64_t end_ns,
              const Args& args, int tid) {
  if (!Enabled()) return;
  ThreadBuffer& b = MyBuffer();
  Event e{std::string(name),
          std::string(category),
          pid,
          tid >= 0 ? tid : b.tid,
          start_ns,
          std::max<int64_t>(0, end_ns - start_ns),
          args.json_body()};
  std::lock_guard<std::mutex> lock(b.mu);
  if (Reg().child_fd >= 0) {
    AppendToChildFile(b, e);
    return;
  }
  b.events.push_back(std::move(e));
}

void Span::Begin(std::string_view name) {
  name_ = std::string(name);
  start_ns_ = NowNs();
}

void Span::End() { Complete(name_, category_, pid_, start_ns_, NowNs(), args_); }

}  // namespace distlab::trace
