// Lab 2, stages B and C (solution): the multi-process DataLoader.
//
// Main process                                   Worker w (forked)
//   StartEpoch: plan the batches, fork workers     loop: poll(index queue, 100 ms)
//   Dispatch: task t -> queue of the next worker         timeout: parent gone? -> reclaim own segments, exit
//   Next: deliver from the reorder buffer,               EOF: main is gone -> reclaim, exit; STOP -> exit
//         else poll(result channel, 50 ms):              TASK: fetch samples straight into a shm segment
//           a message -> map a new segment, unlink it;         (a free one of its pool, else a new one),
//                        a reused one is mapped already        send {task, segment, shape} (one atomic write)
//           silence   -> waitpid(WNOHANG) every worker
//   a Batch dropped -> its pooled segment is free again
#include "labs/dataloader/loader.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>
#include <typeinfo>

#include "absl/strings/str_cat.h"
#include "labs/dataloader/sampler.h"
#include "labs/dataloader/worker.h"
#include "reference/base/status.h"
#include "reference/trace/trace.h"

namespace distlab::dataloader {
namespace {

using Clock = std::chrono::steady_clock;

WorkerInfo g_worker_info;
bool g_in_worker = false;

constexpr int kMaxDims = 8;
constexpr int32_t kTask = 1, kStop = 2;
constexpr int32_t kBatchReady = 1, kError = 2, kExhausted = 3;

// main -> worker, followed by `count` int64 indices (map-style) or none (iterable: count = batch size).
// The first task a worker gets in an epoch (or in a resumed one) carries `reseed`: the worker then sets its
// WorkerInfo::seed from base_seed, its data generator to `rng`, and (iterable) opens its stream anew and
// seeks it to `stream_pos` (0: from the start).
struct TaskHeader {
  int32_t kind;
  int32_t epoch;
  int64_t task_id;
  int64_t count;
  int32_t reseed = 0;
  uint64_t base_seed = 0;
  uint64_t rng = 0;
  int64_t stream_pos = 0;
};

// worker -> main. Fixed size and <= PIPE_BUF, so the writes of several workers into one pipe never
// interleave.
struct ResultMsg {
  int32_t kind;
  int32_t worker_id;
  int64_t task_id;
  int32_t epoch;
  int32_t ndim;
  int64_t shape[kMaxDims];
  int64_t numel;
  int32_t code;  // absl::StatusCode of an error
  int32_t pid;
  int32_t pool_index;  // the worker's pool entry that holds the values; -1: a one-shot segment
  uint64_t rng_after;  // the worker's data generator after this task (stage E: saved when it is delivered)
  int64_t stream_pos;  // iterable: its stream's Position() after this task (-1: not resumable)
  char segment[96];  // a new segment's name ("" when a pooled one was reused: the main process has it mapped)
  char text[1536];
};
static_assert(sizeof(ResultMsg) <= PIPE_BUF, "result messages must be written atomically");

void CopyText(char* dst, size_t cap, const std::string& s) {
  size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

bool WriteFull(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadFull(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A write to a pipe whose reader died raises SIGPIPE, which would kill the main process; block it for the
// write and swallow the one it caused, so the caller sees EPIPE and can ask which worker died.
bool WriteNoSigpipe(int fd, const void* p, size_t n) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  const bool ok = WriteFull(fd, p, n);
  if (!ok && errno == EPIPE) {
    const timespec zero{0, 0};
    sigtimedwait(&block, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

std::string Demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = (status == 0 && d) ? d : name;
  std::free(d);
  return s;
}

// The <type> and <message> of the exception being handled (call inside a catch block): a std::exception's
// dynamic type and what(); anything else thrown (an int, a string literal, a class of its own) by the type
// the C++ runtime recorded for it, with no message.
std::pair<std::string, std::string> CurrentException() {
  try {
    throw;
  } catch (const std::exception& e) {
    return {Demangle(typeid(e).name()), e.what()};
  } catch (...) {
    const std::type_info* t = abi::__cxa_current_exception_type();
    return {t ? Demangle(t->name()) : "an unknown type", "(not a std::exception: no message)"};
  }
}

std::string ShapeMismatch(size_t k, const std::vector<int64_t>& got, const std::vector<int64_t>& first) {
  return absl::StrCat("collate: sample ", k, " has shape ", ShapeString(got), " but sample 0 has shape ",
                      ShapeString(first), "; samples in one batch must have the same shape (pad them first)");
}

// --- Shared-memory segments -------------------------------------------------------------------------------
// Every segment starts with a small header; the batch values follow it. The header's one word says who may
// write the segment: the worker sets kSegmentBusy before it writes a batch, and the main process sets
// kSegmentFree when the last copy of that Batch is dropped.
constexpr size_t kSegmentHeader = 64;  // keeps the values cache-line aligned
constexpr uint32_t kSegmentFree = 0, kSegmentBusy = 1;

uint32_t* SegmentState(void* base) { return static_cast<uint32_t*>(base); }

// Worker side: the segments a worker writes batches into. Making a segment costs shm_open, ftruncate, mmap,
// one page fault per 4 KiB page the first time it is written (the kernel hands out zeroed pages), then munmap
// and the freeing of the pages -- about a millisecond for 1 MiB, far more than the copy itself. So a worker
// keeps up to `capacity` segments mapped and reuses the ones the main process has released: in the steady
// state a batch costs one copy of its values and one message. When every pooled segment is still held (the
// training loop keeps many batches), the worker falls back to a one-shot segment that lives exactly as long
// as its Batch.
class SegmentPool {
 public:
  struct Lease {
    int index = -1;    // the pool entry; -1: a one-shot segment
    std::string name;  // set when the segment is new: the main process has not mapped it yet
    void* base = nullptr;
    size_t bytes = 0;
  };

  SegmentPool(std::string name_prefix, size_t capacity)
      : prefix_(std::move(name_prefix)), capacity_(capacity) {}
  ~SegmentPool() {
    for (Entry& e : entries_) Unmap(&e);
  }

  // A segment with room for `payload` bytes after the header, marked busy.
  absl::StatusOr<Lease> Acquire(size_t payload) {
    const size_t need = kSegmentHeader + payload;
    int reuse = -1, replace = -1;
    for (size_t i = 0; i < entries_.size() && reuse < 0; ++i) {
      Entry& e = entries_[i];
      if (e.base == nullptr) {
        if (replace < 0) replace = static_cast<int>(i);
      } else if (__atomic_load_n(SegmentState(e.base), __ATOMIC_ACQUIRE) == kSegmentFree) {
        if (e.bytes >= need) {
          reuse = static_cast<int>(i);
        } else if (replace < 0) {
          replace = static_cast<int>(i);  // free but too small: make a bigger one in its place
        }
      }
    }
    if (reuse >= 0) {  // the fast path: no system call at all
      Entry& e = entries_[static_cast<size_t>(reuse)];
      __atomic_store_n(SegmentState(e.base), kSegmentBusy, __ATOMIC_RELAXED);
      return Lease{reuse, "", e.base, e.bytes};
    }
    int index = replace;
    if (index < 0 && entries_.size() < capacity_) index = static_cast<int>(entries_.size());
    Lease lease;
    lease.index = index;
    lease.name = absl::StrCat(prefix_, "s", serial_++);
    lease.bytes = (need + 4095) / 4096 * 4096;
    int fd = ::shm_open(("/" + lease.name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return absl::InternalError(absl::StrCat("shm_open ", lease.name, ": ", std::strerror(errno)));
    void* p = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(lease.bytes)) == 0) {
      p = ::mmap(nullptr, lease.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      ::shm_unlink(("/" + lease.name).c_str());
      return absl::InternalError(absl::StrCat("ftruncate/mmap ", lease.name, ": ", std::strerror(err)));
    }
    lease.base = p;
    __atomic_store_n(SegmentState(p), kSegmentBusy, __ATOMIC_RELAXED);
    if (index >= 0) {
      if (index == static_cast<int>(entries_.size())) entries_.emplace_back();
      Entry& e = entries_[static_cast<size_t>(index)];
      Unmap(&e);
      e.base = p;
      e.bytes = lease.bytes;
    }
    return lease;
  }

  // The batch was sent: a one-shot segment now belongs to the main process alone.
  void Sent(const Lease& lease) {
    if (lease.index < 0) ::munmap(lease.base, lease.bytes);
  }

  // The batch failed: a new segment leaves the pool (the caller unlinks its name), a reused one is free
  // again.
  void Abandon(const Lease& lease) {
    if (lease.index < 0) {
      ::munmap(lease.base, lease.bytes);
    } else if (!lease.name.empty()) {
      Unmap(&entries_[static_cast<size_t>(lease.index)]);
    } else {
      __atomic_store_n(SegmentState(lease.base), kSegmentFree, __ATOMIC_RELEASE);
    }
  }

 private:
  struct Entry {
    void* base = nullptr;
    size_t bytes = 0;
  };
  static void Unmap(Entry* e) {
    if (e->base != nullptr) ::munmap(e->base, e->bytes);
    e->base = nullptr;
  }
  std::string prefix_;
  size_t capacity_;
  int64_t serial_ = 0;
  std::vector<Entry> entries_;
};

// Writes one batch straight into a shared-memory segment: the only copy of the values between the dataset
// and the training loop. Abort() (any error after Begin) must unlink a new segment, or it outlives us.
class SegmentWriter {
 public:
  explicit SegmentWriter(SegmentPool* pool) : pool_(pool) {}
  absl::Status Begin(int64_t count, const std::vector<int64_t>& sample_shape) {
    shape_ = sample_shape;
    per_ = NumElements(sample_shape);
    bytes_ = static_cast<size_t>(count * per_) * sizeof(float);
    if (bytes_ == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(lease_, pool_->Acquire(bytes_));
    name_ = lease_.name;
    created_ = !name_.empty();
    dst_ = reinterpret_cast<float*>(static_cast<char*>(lease_.base) + kSegmentHeader);
    return absl::OkStatus();
  }
  absl::Status Put(size_t k, const Sample& s) {
    if (s.shape != shape_) return absl::InvalidArgumentError(ShapeMismatch(k, s.shape, shape_));
    if (static_cast<int64_t>(s.data.size()) != per_) {
      return absl::InvalidArgumentError(absl::StrCat("collate: sample ", k, " has ", s.data.size(),
                                                     " values for shape ", ShapeString(s.shape)));
    }
    if (per_ > 0) std::memcpy(dst_ + k * per_, s.data.data(), sizeof(float) * per_);
    return absl::OkStatus();
  }
  // Hands the segment over to the main process (which unlinks a new one's name once mapped).
  void Finish() {
    if (dst_ != nullptr) pool_->Sent(lease_);
    dst_ = nullptr;
    created_ = false;
  }
  void Abort() {
    if (dst_ != nullptr) pool_->Abandon(lease_);
    dst_ = nullptr;
    if (created_) ::shm_unlink(("/" + name_).c_str());
    created_ = false;
  }
  ~SegmentWriter() { Abort(); }
  bool has_segment() const { return dst_ != nullptr; }
  const std::string& new_name() const { return name_; }  // "" when a pooled segment was reused
  int pool_index() const { return lease_.index; }

 private:
  SegmentPool* pool_;
  SegmentPool::Lease lease_;
  std::string name_;
  std::vector<int64_t> shape_;
  int64_t per_ = 0;
  size_t bytes_ = 0;
  float* dst_ = nullptr;
  bool created_ = false;
};

// Collates sample k into the batch's segment, recorded (when a trace is on) as a "collate" event on the
// worker's row: in a worker, collating is this copy into shared memory, one sample at a time between its
// fetches, so the row reads fetch, collate, fetch, collate, ... (traced_dataset.h records the fetches).
absl::Status TracedPut(SegmentWriter& seg, size_t k, const Sample& s, int64_t task) {
  if (!trace::Enabled()) return seg.Put(k, s);
  trace::Span span("collate", "dataloader", trace::DefaultPid());
  span.args()
      .Add("task", task)
      .Add("sample", static_cast<int64_t>(k))
      .Add("bytes", static_cast<int64_t>(s.data.size() * sizeof(float)));
  return seg.Put(k, s);
}

class RangeStream : public SampleStream {
 public:
  RangeStream(int64_t lo, int64_t hi) : lo_(lo), next_(lo), hi_(hi) {}
  bool Next(Sample* out) override {
    if (next_ >= hi_) return false;
    out->shape.clear();
    out->data.assign(1, static_cast<float>(next_++));
    return true;
  }
  int64_t Position() const override { return next_ - lo_; }
  absl::Status Seek(int64_t position) override {
    if (position < 0 || position > hi_ - lo_) {
      return absl::OutOfRangeError(
          absl::StrCat("RangeStream: position ", position, " is outside its ", hi_ - lo_, " samples"));
    }
    next_ = lo_ + position;
    return absl::OkStatus();
  }

 private:
  int64_t lo_, next_, hi_;
};

}  // namespace

const WorkerInfo* GetWorkerInfo() { return g_in_worker ? &g_worker_info : nullptr; }

std::pair<int64_t, int64_t> ShardRange(int64_t start, int64_t end, int worker_id, int num_workers) {
  if (num_workers <= 0 || end <= start) return {start, start};
  const int64_t per = (end - start + num_workers - 1) / num_workers;
  const int64_t lo = std::min(end, start + per * worker_id);
  const int64_t hi = std::min(end, lo + per);
  return {lo, hi};
}

std::unique_ptr<SampleStream> RangeDataset::Open() const {
  const WorkerInfo* info = GetWorkerInfo();
  // The main process reads the rank's whole block; a worker its part of it.
  auto [lo, hi] = info == nullptr ? GridShard(start_, end_, rank_, num_ranks_, 0, 1)
                                  : GridShard(start_, end_, rank_, num_ranks_, info->id, info->num_workers);
  return std::make_unique<RangeStream>(lo, hi);
}

// ---------------------------------------------------------------------------------------------------------
struct DataLoader::Impl {
  struct Slot {
    bool skip = false;  // an iterable worker reported the end of its shard for this task
    absl::Status error;
    Batch batch;
    int worker = -1;
    uint64_t rng_after = 0;  // the worker's data generator and stream position after this task
    int64_t stream_pos = 0;
  };
  struct Worker {
    pid_t pid = -1;
    int queue_fd = -1;
    bool active = true;  // iterable: not exhausted this epoch
    // Stage E. What the worker starts this epoch from (sent with its first task, when reseed is set), and
    // where it was after its last *delivered* batch: that, not where it is now, is what state_dict saves.
    bool reseed = true;
    uint64_t rng_start = 0;
    int64_t stream_start = 0;
    uint64_t rng_delivered = 0;
    int64_t stream_delivered = 0;
  };

  std::shared_ptr<const MapDataset> map;
  std::shared_ptr<const IterableDataset> iterable;
  LoaderOptions opt;
  std::string prefix;

  int32_t epoch = -1;
  bool epoch_active = false;
  bool epoch_done = false;  // Next returned false for this epoch
  // Stage E: the generator that draws one base seed per epoch, this epoch's base seed, the state a
  // load_state_dict left for the next StartEpoch, and (iterable) the worker of the last delivered batch.
  uint64_t generator = 0;
  uint64_t base_seed = 0;
  std::optional<LoaderState> pending;
  int last_worker = -1;
  // The readers' start state when there are no workers (the main process reads).
  uint64_t main_rng_start = 0;
  int64_t main_stream_start = 0;
  std::vector<std::vector<int64_t>> plan;  // map-style batches of this epoch
  int64_t next_task = 0;                   // tasks sent
  int64_t next_deliver = 0;                // in order: the task whose batch is due next
  int64_t delivered = 0;
  std::map<int64_t, Slot> buffer;      // the reorder buffer: results not yet handed out
  std::map<int64_t, int> outstanding;  // task -> worker, sent and not yet answered
  int64_t in_flight = 0;               // tasks sent and not yet handed out (what prefetch bounds)
  std::vector<Worker> workers;
  int result_fd = -1;
  int rr = 0;  // round robin: the next worker to get a task
  absl::Status broken;
  int reclaimed = 0;
  std::string report;
  std::unique_ptr<SampleStream> stream;  // num_workers = 0, iterable
  // The main process's mapping of every pooled segment, by worker and pool entry: a new segment is mapped
  // once, when its first batch arrives; later batches in it need no system call. A Batch holds its mapping,
  // so the memory stays valid after the loader is gone.
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
    ~Mapping() { ::munmap(base, bytes); }
  };
  std::vector<std::vector<std::shared_ptr<Mapping>>> mappings;

  int W() const { return opt.num_workers; }

  // --- worker side -------------------------------------------------------------------------------------
  void ReclaimOwn(int w) { (void)ReclaimSegments(absl::StrCat(prefix, "w", w, "_")); }

  ResultMsg ErrorMessage(int w, const TaskHeader& h, const std::string& text, absl::StatusCode code) {
    ResultMsg m;
    std::memset(&m, 0, sizeof m);
    m.kind = kError;
    m.worker_id = w;
    m.task_id = h.task_id;
    m.epoch = h.epoch;
    m.pid = static_cast<int32_t>(::getpid());
    m.pool_index = -1;
    m.code = static_cast<int32_t>(code);
    CopyText(m.text, sizeof m.text, text);
    return m;
  }

  ResultMsg RunTask(int w, const TaskHeader& h, const std::vector<int64_t>& idx, SampleStream** stream_io,
                    bool* exhausted, SegmentPool* pool) {
    ResultMsg m;
    std::memset(&m, 0, sizeof m);
    m.worker_id = w;
    m.task_id = h.task_id;
    m.epoch = h.epoch;
    m.pid = static_cast<int32_t>(::getpid());
    m.pool_index = -1;
    SegmentWriter seg(pool);
    absl::Status st;
    std::vector<int64_t> sample_shape;
    int64_t count = 0;
    try {
      if (map) {
        count = static_cast<int64_t>(idx.size());
        for (size_t k = 0; k < idx.size() && st.ok(); ++k) {
          Sample s = map->Get(idx[k]);
          if (k == 0) {
            sample_shape = s.shape;
            st = seg.Begin(count, s.shape);
          }
          if (st.ok()) st = TracedPut(seg, k, s, h.task_id);
        }
      } else {
        std::vector<Sample> got;
        Sample s;
        while (!*exhausted && static_cast<int64_t>(got.size()) < h.count) {
          if (!(*stream_io)->Next(&s)) {
            *exhausted = true;
            break;
          }
          got.push_back(s);
        }
        if (got.empty() || (opt.drop_last && static_cast<int64_t>(got.size()) < h.count)) {
          m.kind = kExhausted;
          return m;
        }
        count = static_cast<int64_t>(got.size());
        sample_shape = got[0].shape;
        st = seg.Begin(count, sample_shape);
        for (size_t k = 0; k < got.size() && st.ok(); ++k) st = TracedPut(seg, k, got[k], h.task_id);
      }
      if (st.ok() && sample_shape.size() + 1 > kMaxDims) {
        st = absl::InvalidArgumentError(absl::StrCat("samples have ", sample_shape.size(),
                                                     " dimensions; at most ", kMaxDims - 1,
                                                     " fit a batch message"));
      }
      if (!st.ok()) {
        seg.Abort();
        m.kind = kError;
        m.code = static_cast<int32_t>(st.code());
        CopyText(m.text, sizeof m.text,
                 DescribeWorkerException(absl::StatusCodeToString(st.code()), w, std::string(st.message())));
        return m;
      }
    } catch (...) {
      seg.Abort();  // the segment must not outlive a failed batch
      const auto [type, message] = CurrentException();
      m.kind = kError;
      m.code = static_cast<int32_t>(absl::StatusCode::kInternal);
      CopyText(m.text, sizeof m.text, DescribeWorkerException(type, w, message));
      return m;
    }
    if (seg.has_segment()) {
      CopyText(m.segment, sizeof m.segment, seg.new_name());
      m.pool_index = seg.pool_index();
    }
    seg.Finish();
    m.kind = kBatchReady;
    m.ndim = static_cast<int32_t>(sample_shape.size() + 1);
    m.shape[0] = count;
    for (size_t d = 0; d < sample_shape.size(); ++d) m.shape[d + 1] = sample_shape[d];
    m.numel = count * NumElements(sample_shape);
    return m;
  }

  int WorkerMain(int w, int queue_fd, int result_fd_w, pid_t parent) {
    ::signal(SIGPIPE, SIG_IGN);  // a dead main process must show up as a failed write, not kill us silently
    g_worker_info = WorkerInfo{w, W(), WorkerSeed(base_seed, w), map.get(), iterable.get()};
    DataGeneratorState() = g_worker_info.seed;
    g_in_worker = true;
    if (opt.worker_init_fn) opt.worker_init_fn(w);
    // Room for the batches this worker has in flight (about prefetch_factor), the one the caller holds, and
    // one more; beyond that a batch gets a one-shot segment.
    SegmentPool pool(absl::StrCat(prefix, "w", w, "_"), static_cast<size_t>(opt.prefetch_factor) + 2);
    std::unique_ptr<SampleStream> own_stream;
    SampleStream* stream_ptr = nullptr;
    int32_t stream_epoch = -1;
    bool exhausted = false;
    for (;;) {
      pollfd p{queue_fd, POLLIN, 0};
      int r = ::poll(&p, 1, 100);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        // Nothing to do: is the main process still there? (Reparented children see another parent pid.)
        if (::getppid() != parent) {
          ReclaimOwn(w);
          return 0;
        }
        continue;
      }
      TaskHeader h;
      if (!ReadFull(queue_fd, &h, sizeof h)) {  // end of file: the main process is gone
        ReclaimOwn(w);
        return 0;
      }
      if (h.kind == kStop) return 0;
      std::vector<int64_t> idx;
      if (map && h.count > 0) {
        idx.resize(static_cast<size_t>(h.count));
        if (!ReadFull(queue_fd, idx.data(), sizeof(int64_t) * idx.size())) {
          ReclaimOwn(w);
          return 0;
        }
      }
      absl::Status seek;
      if (h.reseed) {  // a new epoch, or a resumed one: start from the state the main process sent
        g_worker_info.seed = WorkerSeed(h.base_seed, w);
        DataGeneratorState() = h.rng;
      }
      if (iterable && (h.reseed || h.epoch != stream_epoch)) {
        own_stream = iterable->Open();
        stream_ptr = own_stream.get();
        stream_epoch = h.epoch;
        exhausted = false;
        if (h.stream_pos != 0) seek = stream_ptr->Seek(h.stream_pos);
      }
      ResultMsg m =
          seek.ok()
              ? RunTask(w, h, idx, &stream_ptr, &exhausted, &pool)
              : ErrorMessage(w, h,
                             DescribeWorkerException(absl::StatusCodeToString(seek.code()), w,
                                                     absl::StrCat("resuming the stream: ", seek.message())),
                             seek.code());
      m.rng_after = DataGeneratorState();
      m.stream_pos = stream_ptr != nullptr ? stream_ptr->Position() : 0;
      if (!WriteFull(result_fd_w, &m, sizeof m)) {
        ReclaimOwn(w);
        return 0;
      }
    }
  }

  // --- main side ---------------------------------------------------------------------------------------
  absl::Status StartWorkers() {
    int rp[2];
    if (::pipe2(rp, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
    result_fd = rp[0];
    const pid_t parent = ::getpid();
    mappings.assign(static_cast<size_t>(W()), {});
    workers.assign(static_cast<size_t>(W()), Worker{});
    absl::Status st;
    for (int w = 0; w < W(); ++w) {
      int qp[2];
      if (::pipe2(qp, O_CLOEXEC) != 0) {
        st = absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
        break;
      }
      auto pid = ForkWorker([&, w, qp]() {
        // In the child: keep only our own queue's read end and the result channel's write end.
        for (int j = 0; j < w; ++j) ::close(workers[static_cast<size_t>(j)].queue_fd);
        ::close(qp[1]);
        ::close(rp[0]);
        return WorkerMain(w, qp[0], rp[1], parent);
      });
      ::close(qp[0]);
      if (!pid.ok()) {
        ::close(qp[1]);
        st = pid.status();
        break;
      }
      workers[static_cast<size_t>(w)].pid = *pid;
      workers[static_cast<size_t>(w)].queue_fd = qp[1];
    }
    ::close(rp[1]);  // only workers write results now: when all are gone, the channel reads end-of-file
    rr = 0;
    if (!st.ok()) StopWorkers();
    return st;
  }

  bool WorkersAlive() const { return !workers.empty(); }

  // The storage of the batch a message announces: maps a new segment (and unlinks its name: the mapping keeps
  // the memory, nobody needs the name any more), or finds the mapping of a pooled one. Dropping the last copy
  // of the storage hands a pooled segment back to its worker.
  absl::StatusOr<std::shared_ptr<float>> Adopt(const ResultMsg& m) {
    const size_t need = kSegmentHeader + static_cast<size_t>(m.numel) * sizeof(float);
    if (m.worker_id < 0 || m.worker_id >= static_cast<int32_t>(mappings.size())) {
      return absl::InternalError(absl::StrCat("result from unknown worker ", m.worker_id));
    }
    auto& own = mappings[static_cast<size_t>(m.worker_id)];
    std::shared_ptr<Mapping> mapping;
    if (m.segment[0] != '\0') {
      const std::string name = std::string("/") + m.segment;
      int fd = ::shm_open(name.c_str(), O_RDWR, 0);
      if (fd < 0) return absl::InternalError(absl::StrCat("shm_open ", name, ": ", std::strerror(errno)));
      ::shm_unlink(name.c_str());
      struct stat sb;
      if (::fstat(fd, &sb) != 0 || static_cast<size_t>(sb.st_size) < need) {
        ::close(fd);
        return absl::InternalError(
            absl::StrCat("segment ", name, " is smaller than its ", need, "-byte batch"));
      }
      void* p = ::mmap(nullptr, static_cast<size_t>(sb.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ::close(fd);
      if (p == MAP_FAILED)
        return absl::InternalError(absl::StrCat("mmap ", name, ": ", std::strerror(errno)));
      mapping = std::make_shared<Mapping>();
      mapping->base = p;
      mapping->bytes = static_cast<size_t>(sb.st_size);
      if (m.pool_index >= 0) {
        if (own.size() <= static_cast<size_t>(m.pool_index))
          own.resize(static_cast<size_t>(m.pool_index) + 1);
        own[static_cast<size_t>(m.pool_index)] = mapping;  // replaces a smaller one the worker gave up
      }
    } else {
      if (m.pool_index < 0 || static_cast<size_t>(m.pool_index) >= own.size() ||
          !own[static_cast<size_t>(m.pool_index)]) {
        return absl::InternalError(absl::StrCat("worker ", m.worker_id, " reused pool segment ", m.pool_index,
                                                " that the main process never mapped"));
      }
      mapping = own[static_cast<size_t>(m.pool_index)];
      if (mapping->bytes < need) return absl::InternalError("pooled segment is smaller than its batch");
    }
    float* values = reinterpret_cast<float*>(static_cast<char*>(mapping->base) + kSegmentHeader);
    const bool pooled = m.pool_index >= 0;
    return std::shared_ptr<float>(values, [mapping, pooled](float*) {
      if (pooled) __atomic_store_n(SegmentState(mapping->base), kSegmentFree, __ATOMIC_RELEASE);
    });
  }

  // A batch nobody will read: release its segment (unlink the name if mapping it fails).
  void DiscardMessage(const ResultMsg& m) {
    if (m.kind != kBatchReady || m.numel == 0) return;
    if (!Adopt(m).ok() && m.segment[0] != '\0') ::shm_unlink((std::string("/") + m.segment).c_str());
  }

  void DrainResults() {
    if (result_fd < 0) return;
    for (;;) {
      pollfd p{result_fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      ResultMsg m;
      if (!ReadFull(result_fd, &m, sizeof m)) return;
      DiscardMessage(m);
    }
  }

  // Done signal, join with a timeout, then terminate. Never blocks for long.
  void StopWorkers() {
    for (Worker& w : workers) {
      if (w.queue_fd >= 0) {
        ::fcntl(w.queue_fd, F_SETFL, O_NONBLOCK);
        TaskHeader h{kStop, epoch, -1, 0};
        (void)WriteNoSigpipe(w.queue_fd, &h, sizeof h);
        ::close(w.queue_fd);
        w.queue_fd = -1;
      }
    }
    auto reap_all = [&](Clock::time_point deadline) {
      for (;;) {
        bool any = false;
        for (Worker& w : workers) {
          if (w.pid <= 0) continue;
          int status = 0;
          pid_t r = ::waitpid(w.pid, &status, WNOHANG);
          if (r == w.pid || (r < 0 && errno == ECHILD)) {
            w.pid = -1;
          } else {
            any = true;
          }
        }
        if (!any) return true;
        DrainResults();  // a worker blocked on a full result channel could not see its done signal
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    };
    auto after = [](double s) {
      return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(s * 1e6));
    };
    if (!reap_all(after(opt.shutdown_timeout_s))) {
      for (Worker& w : workers) {
        if (w.pid > 0) ::kill(w.pid, SIGTERM);
      }
      if (!reap_all(after(0.2))) {
        for (Worker& w : workers) {
          if (w.pid > 0) {
            ::kill(w.pid, SIGKILL);
            ::waitpid(w.pid, nullptr, 0);  // SIGKILL cannot be ignored: this wait ends
            w.pid = -1;
          }
        }
      }
    }
    DrainResults();
    if (result_fd >= 0) ::close(result_fd);
    result_fd = -1;
    workers.clear();
    mappings.clear();  // batches still held keep their own mapping
    outstanding.clear();
    in_flight = 0;
    // The resource tracker: whatever is left under our prefix belongs to a worker that died mid-batch.
    auto left = ReclaimSegments(prefix);
    if (left.ok() && !left->empty()) {
      reclaimed += static_cast<int>(left->size());
      report = LeakReport(left->size());
      std::fprintf(stderr, "%s\n", report.c_str());
    }
  }

  absl::Status Fail(absl::Status st) {
    broken = st;
    epoch_active = false;
    StopWorkers();
    return st;
  }

  bool MoreToSend() const {
    if (map) return next_task < static_cast<int64_t>(plan.size());
    for (const Worker& w : workers) {
      if (w.active) return true;
    }
    return false;
  }

  // Keeps prefetch_factor * W tasks outstanding.
  absl::Status Dispatch() {
    const int64_t limit = static_cast<int64_t>(opt.prefetch_factor) * W();
    while (in_flight < limit && MoreToSend()) {
      int w = -1;
      for (int k = 0; k < W(); ++k) {
        int c = (rr + k) % W();
        if (workers[static_cast<size_t>(c)].active) {
          w = c;
          break;
        }
      }
      if (w < 0) break;
      rr = (w + 1) % W();
      const int64_t t = next_task++;
      std::vector<char> msg(sizeof(TaskHeader));
      TaskHeader h{kTask, epoch, t,
                   map ? static_cast<int64_t>(plan[static_cast<size_t>(t)].size()) : opt.batch_size};
      Worker& target = workers[static_cast<size_t>(w)];
      if (target.reseed) {  // its first task this epoch: where its generator and stream start
        h.reseed = 1;
        h.base_seed = base_seed;
        h.rng = target.rng_start;
        h.stream_pos = target.stream_start;
        target.reseed = false;
      }
      std::memcpy(msg.data(), &h, sizeof h);
      if (map) {
        const auto& idx = plan[static_cast<size_t>(t)];
        msg.resize(sizeof h + sizeof(int64_t) * idx.size());
        std::memcpy(msg.data() + sizeof h, idx.data(), sizeof(int64_t) * idx.size());
      }
      outstanding[t] = w;
      ++in_flight;
      if (!WriteNoSigpipe(workers[static_cast<size_t>(w)].queue_fd, msg.data(), msg.size())) {
        // Only a dead worker closes its queue. The task is lost with it; Next() notices the death through
        // waitpid and reports it like any other, so stop sending here.
        break;
      }
    }
    return absl::OkStatus();
  }

  // Any worker that ended while the epoch needs it is an error -- exit code 0 included.
  absl::Status CheckWorkers() {
    for (Worker& w : workers) {
      if (w.pid <= 0) continue;
      int status = 0;
      pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == w.pid) {
        const pid_t pid = w.pid;
        w.pid = -1;
        return absl::InternalError(DescribeWorkerExit(pid, status));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Receive(const ResultMsg& m) {
    if (m.epoch != epoch) {  // a persistent worker finishing a task of an abandoned epoch
      DiscardMessage(m);
      return absl::OkStatus();
    }
    outstanding.erase(m.task_id);
    Slot& slot = buffer[m.task_id];
    slot.worker = m.worker_id;
    slot.rng_after = m.rng_after;
    slot.stream_pos = m.stream_pos;
    if (m.kind == kExhausted) {
      slot.skip = true;
      workers[static_cast<size_t>(m.worker_id)].active = false;
      return absl::OkStatus();
    }
    if (m.kind == kError) {
      slot.error = absl::Status(static_cast<absl::StatusCode>(m.code),
                                absl::StrCat(m.text, " (worker pid ", m.pid, ")"));
      return absl::OkStatus();
    }
    Batch& b = slot.batch;
    b.shape.assign(m.shape, m.shape + m.ndim);
    b.numel = m.numel;
    b.worker_id = m.worker_id;
    b.position = m.task_id;
    if (map) b.indices = plan[static_cast<size_t>(m.task_id)];
    if (m.numel == 0) {
      b.storage = std::shared_ptr<float>(new float[1], std::default_delete<float[]>());
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(b.storage, Adopt(m));
    return absl::OkStatus();
  }

  // Takes the next deliverable slot: in order, the one at next_deliver; otherwise any finished one.
  bool TakeReady(Slot* out) {
    if (opt.in_order) {
      for (;;) {
        auto it = buffer.find(next_deliver);
        if (it == buffer.end()) return false;
        ++next_deliver;
        --in_flight;
        if (it->second.skip) {
          buffer.erase(it);
          continue;
        }
        *out = std::move(it->second);
        buffer.erase(it);
        return true;
      }
    }
    for (auto it = buffer.begin(); it != buffer.end();) {
      --in_flight;
      if (it->second.skip) {
        it = buffer.erase(it);
        continue;
      }
      *out = std::move(it->second);
      buffer.erase(it);
      return true;
    }
    return false;
  }

  absl::StatusOr<bool> NextFromWorkers(Batch* out) {
    const Clock::time_point start = Clock::now();
    for (;;) {
      Slot slot;
      if (TakeReady(&slot)) {
        absl::Status sent = Dispatch();  // refill: one new task per batch taken
        if (!sent.ok()) return Fail(sent);
        // This position is now behind the caller: its worker's state after it is what a resume starts from.
        Worker& from = workers[static_cast<size_t>(slot.worker)];
        from.rng_delivered = slot.rng_after;
        from.stream_delivered = slot.stream_pos;
        last_worker = slot.worker;
        ++delivered;
        if (!slot.error.ok()) return slot.error;
        *out = std::move(slot.batch);
        return true;
      }
      if (in_flight == 0 && !MoreToSend()) {
        epoch_active = false;
        epoch_done = true;
        if (!opt.persistent_workers) StopWorkers();
        return false;
      }
      absl::Status sent = Dispatch();  // iterable: replace tasks of workers that ran dry
      if (!sent.ok()) return Fail(sent);
      int wait_ms = 50;
      if (opt.timeout_s > 0) {
        const double left = opt.timeout_s - std::chrono::duration<double>(Clock::now() - start).count();
        if (left <= 0) {
          return Fail(absl::DeadlineExceededError(
              absl::StrCat("DataLoader timed out after ", opt.timeout_s, " seconds")));
        }
        wait_ms = std::max(1, std::min(wait_ms, static_cast<int>(left * 1000) + 1));
      }
      pollfd p{result_fd, POLLIN, 0};
      int r = ::poll(&p, 1, wait_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r > 0) {
        ResultMsg m;
        if (ReadFull(result_fd, &m, sizeof m)) {
          absl::Status st = Receive(m);
          if (!st.ok()) return Fail(st);
          continue;
        }
        // End of file: every worker has closed the channel, so every worker has ended; find out how.
        for (int i = 0; i < 100; ++i) {
          absl::Status st = CheckWorkers();
          if (!st.ok()) return Fail(st);
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return Fail(absl::InternalError("DataLoader workers closed the result channel unexpectedly"));
      }
      absl::Status st = CheckWorkers();  // silence: did a worker die?
      if (!st.ok()) return Fail(st);
    }
  }

  absl::StatusOr<bool> NextInProcess(Batch* out) {
    std::vector<Sample> samples;
    std::vector<int64_t> idx;
    try {
      if (map) {
        if (next_task >= static_cast<int64_t>(plan.size())) {
          epoch_active = false;
          epoch_done = true;
          return false;
        }
        idx = plan[static_cast<size_t>(next_task)];
        for (int64_t i : idx) samples.push_back(map->Get(i));
      } else {
        Sample s;
        while (static_cast<int64_t>(samples.size()) < opt.batch_size && stream->Next(&s))
          samples.push_back(s);
        if (samples.empty() || (opt.drop_last && static_cast<int64_t>(samples.size()) < opt.batch_size)) {
          epoch_active = false;
          epoch_done = true;
          return false;
        }
      }
    } catch (...) {
      ++next_task;
      ++delivered;
      const auto [type, message] = CurrentException();
      return absl::InternalError(
          absl::StrCat("Caught ", type, " in the DataLoader main process. Original: ", message));
    }
    absl::StatusOr<Batch> collated;
    {
      trace::Span span("collate", "dataloader", trace::DefaultPid());  // without workers: the whole batch
      if (span.active())
        span.args().Add("task", next_task).Add("samples", static_cast<int64_t>(samples.size()));
      collated = Collate(samples);
    }
    ASSIGN_OR_RETURN(Batch b, std::move(collated));
    b.indices = std::move(idx);
    b.position = next_task++;
    *out = std::move(b);
    ++delivered;
    return true;
  }
};

namespace {
std::atomic<int> g_loader_serial{0};

// /dev/shm is shared by every process of the machine, and processes in their own PID namespaces (Bazel's
// sandboxed tests, the grader's cases) can share a pid: the prefix adds the creation time in nanoseconds.
std::string NewShmPrefix() {
  const int64_t ns = std::chrono::steady_clock::now().time_since_epoch().count();
  return absl::StrCat("distlab_dl_", ::getpid(), "_", ns, "_", g_loader_serial++, "_");
}

absl::Status Validate(const LoaderOptions& o) {
  if (o.batch_size < 1)
    return absl::InvalidArgumentError(absl::StrCat("batch_size must be >= 1, got ", o.batch_size));
  if (o.num_workers < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers must be >= 0, got ", o.num_workers));
  }
  if (o.prefetch_factor < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prefetch_factor must be >= 1, got ", o.prefetch_factor));
  }
  if (o.timeout_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout option should be non-negative, got ", o.timeout_s));
  }
  if (o.persistent_workers && o.num_workers == 0) {
    return absl::InvalidArgumentError("persistent_workers needs num_workers > 0");
  }
  if (o.shutdown_timeout_s < 0) return absl::InvalidArgumentError("shutdown_timeout_s must be >= 0");
  return absl::OkStatus();
}
}  // namespace

DataLoader::DataLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DataLoader::~DataLoader() {
  if (impl_) (void)Shutdown();
}

absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(std::shared_ptr<const MapDataset> dataset,
                                                               LoaderOptions options) {
  if (!dataset) return absl::InvalidArgumentError("DataLoader: dataset is null");
  RETURN_IF_ERROR(Validate(options));
  auto impl = std::make_unique<Impl>();
  impl->map = std::move(dataset);
  impl->opt = std::move(options);
  impl->generator = impl->opt.generator_seed.value_or(0);
  impl->prefix = NewShmPrefix();
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(std::shared_ptr<const IterableDataset> dataset,
                                                               LoaderOptions options) {
  if (!dataset) return absl::InvalidArgumentError("DataLoader: dataset is null");
  RETURN_IF_ERROR(Validate(options));
  auto impl = std::make_unique<Impl>();
  impl->iterable = std::move(dataset);
  impl->opt = std::move(options);
  impl->generator = impl->opt.generator_seed.value_or(0);
  impl->prefix = NewShmPrefix();
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(impl)));
}

absl::Status DataLoader::StartEpoch() {
  Impl& m = *impl_;
  if (!m.broken.ok()) return m.broken;
  if (m.epoch_active && m.W() > 0 && !m.opt.persistent_workers) m.StopWorkers();  // abandoned epoch
  // Stage E: a state loaded with load_state_dict either continues its epoch or is where the next one starts.
  std::optional<LoaderState> resume;
  if (m.pending) {
    resume = std::move(m.pending);
    m.pending.reset();
    m.generator = resume->generator;
    m.epoch = static_cast<int32_t>(resume->epoch);
    if (resume->epoch < 0 || resume->done) resume.reset();  // nothing to continue: begin the next epoch
  }
  if (resume) {
    m.base_seed = resume->base_seed;  // the saved epoch again, with the base seed it had
  } else {
    ++m.epoch;
    m.base_seed = m.opt.generator_seed ? EpochBaseSeed(&m.generator) : m.opt.base_seed;
  }
  m.epoch_done = false;
  m.last_worker = resume ? resume->last_worker : -1;
  m.plan.clear();
  if (m.map) {
    std::vector<int64_t> order(static_cast<size_t>(m.map->size()));
    std::iota(order.begin(), order.end(), 0);
    if (m.opt.shuffle) SeededShuffle(&order, m.opt.seed + static_cast<uint64_t>(m.epoch));
    for (size_t i = 0; i < order.size(); i += static_cast<size_t>(m.opt.batch_size)) {
      const size_t end = std::min(order.size(), i + static_cast<size_t>(m.opt.batch_size));
      if (m.opt.drop_last && end - i < static_cast<size_t>(m.opt.batch_size)) break;
      m.plan.emplace_back(order.begin() + i, order.begin() + end);
    }
  }
  // A resumed epoch goes on after its delivered positions; map-style tasks keep their ids (task t is batch t
  // of the plan and goes to worker t mod W, as it would have), iterable task ids just count on.
  const int64_t skip = resume ? resume->delivered : 0;
  m.next_task = m.next_deliver = m.delivered = skip;
  m.buffer.clear();
  m.outstanding.clear();
  m.in_flight = 0;
  m.epoch_active = true;
  if (m.W() == 0) {
    DataGeneratorState() = resume && !resume->rng.empty() ? resume->rng[0] : WorkerSeed(m.base_seed, 0);
    if (m.iterable) {
      m.stream = m.iterable->Open();
      if (resume && !resume->stream.empty() && resume->stream[0] != 0) {
        absl::Status st = m.stream->Seek(resume->stream[0]);
        if (!st.ok()) return m.Fail(st);
      }
    }
    return absl::OkStatus();
  }
  const bool forked = !m.WorkersAlive();
  if (forked) {
    absl::Status st = m.StartWorkers();
    if (!st.ok()) return m.Fail(st);
  }
  for (int w = 0; w < m.W(); ++w) {
    Impl::Worker& k = m.workers[static_cast<size_t>(w)];
    k.active = true;
    k.reseed = true;  // persistent workers too: an epoch depends on its base seed alone
    const bool saved = resume && static_cast<int>(resume->rng.size()) == m.W();
    k.rng_start = saved ? resume->rng[static_cast<size_t>(w)] : WorkerSeed(m.base_seed, w);
    k.stream_start = resume && static_cast<int>(resume->stream.size()) == m.W()
                         ? resume->stream[static_cast<size_t>(w)]
                         : 0;
    k.rng_delivered = k.rng_start;
    k.stream_delivered = k.stream_start;
  }
  // Round robin goes on where it stopped: map-style at worker (delivered mod W); iterable after the worker of
  // the last delivered batch (the workers that ran dry answer "exhausted" again and are skipped).
  m.rr = !resume ? 0 : m.map ? static_cast<int>(skip % m.W()) : (m.last_worker + 1) % m.W();
  absl::Status st = m.Dispatch();
  if (!st.ok()) return m.Fail(st);
  return absl::OkStatus();
}

absl::StatusOr<bool> DataLoader::Next(Batch* out) {
  Impl& m = *impl_;
  if (!m.broken.ok()) return m.broken;
  if (!m.epoch_active) return absl::FailedPreconditionError("DataLoader: call StartEpoch() before Next()");
  return m.W() == 0 ? m.NextInProcess(out) : m.NextFromWorkers(out);
}

int64_t DataLoader::num_batches() const {
  if (!impl_->map) return -1;
  const int64_t n = impl_->map->size(), b = impl_->opt.batch_size;
  return impl_->opt.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<pid_t> DataLoader::worker_pids() const {
  std::vector<pid_t> out;
  for (const auto& w : impl_->workers) out.push_back(w.pid);
  return out;
}

std::string DataLoader::shm_prefix() const { return impl_->prefix; }

absl::Status DataLoader::Shutdown() {
  impl_->epoch_active = false;
  if (impl_->WorkersAlive() || impl_->result_fd >= 0) impl_->StopWorkers();
  impl_->buffer.clear();
  return absl::OkStatus();
}

// --- Stage E
// ------------------------------------------------------------------------------------------------
absl::StatusOr<LoaderState> DataLoader::state_dict() const {
  const Impl& m = *impl_;
  if (!m.broken.ok()) return m.broken;
  LoaderState s;
  s.epoch = m.epoch;
  s.delivered = m.delivered;
  s.generator = m.generator;
  s.base_seed = m.base_seed;
  s.num_workers = m.W();
  s.done = m.epoch_done;
  s.last_worker = m.last_worker;
  if (m.epoch < 0) return s;
  if (m.W() > 0 && !m.opt.in_order && m.delivered > 0 && !m.epoch_done) {
    return absl::FailedPreconditionError(
        "DataLoader::state_dict: with in_order = false the batches handed out are not a prefix of the epoch, "
        "so no position describes them; resume needs in_order = true");
  }
  if (m.W() == 0) {
    s.rng.push_back(DataGeneratorState());
    if (m.iterable) s.stream.push_back(m.stream ? m.stream->Position() : 0);
  } else {
    for (const Impl::Worker& w : m.workers) {
      s.rng.push_back(w.rng_delivered);
      if (m.iterable) s.stream.push_back(w.stream_delivered);
    }
    if (m.workers.empty()) {  // between epochs, workers gone: the next epoch starts from its seeds anyway
      for (int w = 0; w < m.W(); ++w) s.rng.push_back(WorkerSeed(m.base_seed, w));
      if (m.iterable) s.stream.assign(static_cast<size_t>(m.W()), 0);
    }
  }
  for (size_t w = 0; w < s.stream.size(); ++w) {
    if (s.stream[w] < 0 && !s.done) {
      return absl::FailedPreconditionError(absl::StrCat(
          "DataLoader::state_dict: the iterable dataset's stream (worker ",
          m.W() == 0 ? -1 : static_cast<int>(w),
          ") does not say where it is (SampleStream::Position() is -1), so it cannot be resumed mid-epoch"));
    }
  }
  return s;
}

absl::Status DataLoader::load_state_dict(const LoaderState& s) {
  Impl& m = *impl_;
  if (!m.broken.ok()) return m.broken;
  if (m.epoch_active && !m.epoch_done) {
    return absl::FailedPreconditionError(absl::StrCat("DataLoader::load_state_dict: epoch ", m.epoch,
                                                      " is in progress; load a state between epochs"));
  }
  if (s.delivered < 0) {
    return absl::InvalidArgumentError(absl::StrCat("LoaderState: delivered = ", s.delivered, " is negative"));
  }
  const int64_t batches = num_batches();
  if (m.map && s.epoch >= 0 && s.delivered > batches) {
    return absl::InvalidArgumentError(absl::StrCat("LoaderState: delivered = ", s.delivered,
                                                   " but an epoch of this loader has ", batches, " batches"));
  }
  const bool boundary = s.epoch < 0 || s.done || (m.map && s.delivered == batches);
  if (!boundary && s.num_workers != m.W()) {
    return absl::FailedPreconditionError(
        absl::StrCat("DataLoader::load_state_dict: the state was saved with ", s.num_workers,
                     " workers in the middle of epoch ", s.epoch, " (", s.delivered,
                     " batches delivered); this loader has ", m.W(), ": each worker's random stream",
                     m.iterable ? " and shard" : "",
                     " depends on the worker count, so resuming mid-epoch needs the same num_workers (any "
                     "count works at an "
                     "epoch boundary)"));
  }
  const size_t readers = static_cast<size_t>(std::max(1, s.num_workers));
  if (!boundary && s.rng.size() != readers) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoaderState: rng has ", s.rng.size(), " entries, ", readers, " expected"));
  }
  if (!boundary && m.iterable && s.stream.size() != readers) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoaderState: stream has ", s.stream.size(), " entries, ", readers, " expected"));
  }
  if (m.epoch_active && m.W() > 0 && !m.opt.persistent_workers) m.StopWorkers();
  m.epoch_active = false;
  m.pending = s;
  return absl::OkStatus();
}

int DataLoader::reclaimed_segments() const { return impl_->reclaimed; }
std::string DataLoader::tracker_report() const { return impl_->report; }

}  // namespace distlab::dataloader
