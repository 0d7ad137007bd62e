// Timelines of every rank: Chrome trace-event JSON, the format Perfetto (ui.perfetto.dev) and
// chrome://tracing open.
//
// A trace is one file {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}. Every event is a
// complete event (ph "X": name, cat, ts and dur in microseconds, pid, tid, args) or, for process and
// thread names, a metadata event (ph "M"). The course's conventions:
//   pid = the rank (the rank in the communicator the process or thread was created for; 0 in a program
//         without ranks), so each rank is one row group in the viewer whether ranks are threads or
//         processes;
//   tid = the operating-system thread id of the thread that did the work (the caller of a collective, its
//         stream's worker, a data-loader worker process), named by thread_name metadata ("rank 2 stream");
//   ts  = the trace clock, CLOCK_MONOTONIC: one clock for every process of a machine, so parts written by
//         the processes of one run line up without correction (trace_file.h: MergeParts).
//
// Recording is off unless DISTLAB_TRACE=FILE is set when the program starts, or Start() is called. Off, an
// instrumented call costs one relaxed atomic load and a branch (Enabled()); on, an event costs about a
// microsecond or less (measured by //reference/trace:trace_bench). Events go to a per-thread buffer and are
// written once, at Stop() or at exit.
//
// Where the file goes:
//   a plain process                   FILE, at exit (or Stop()).
//   a rank started by `labctl launch` (RANK and WORLD_SIZE set): FILE.rank<R>.json, its part; the
//                                     launcher joins the parts into FILE when every rank has ended. A rank
//                                     stopped with SIGTERM or SIGINT (the launcher stops the others when
//                                     one fails) writes its part before it dies.
//   a forked child (a data-loader worker): its events are appended to FILE.fork<PID>.jsonl as they happen
//                                     (the child leaves with _exit, which runs no atexit handlers), and the
//                                     parent folds those files into its own when it writes.
//
// What this leaves out: flow arrows between ranks, counters, sampling; events are not streamed while the
// process runs (except in forked children).
#ifndef DISTLAB_REFERENCE_TRACE_TRACE_H_
#define DISTLAB_REFERENCE_TRACE_TRACE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace distlab::trace {

namespace internal {
extern std::atomic<bool> g_enabled;
}  // namespace internal

// True while recording. One relaxed load: instrumented code tests it before building any event.
inline bool Enabled() { return internal::g_enabled.load(std::memory_order_relaxed); }

// Starts recording into memory, forgetting anything recorded before. `path`: where Stop() (and the exit of
// the program, if it has not called Stop) writes the file; empty to keep the events in memory only (tests
// read them with Json()).
void Start(const std::string& path = "");
// Stops recording and, if Start was given a path, writes the file there (a rank's part when launched).
absl::Status Stop();
// Where the file will be written ("" when nowhere).
std::string OutputPath();

// The events recorded so far as one trace document (what Stop writes), sorted by pid, tid, then start.
std::string Json();
// Forgets the events recorded so far (recording stays on or off).
void Clear();

// The trace clock: nanoseconds of CLOCK_MONOTONIC.
int64_t NowNs();

// The pid events get when their caller does not name one: RANK from the environment, else 0.
int DefaultPid();
// The operating-system id of the calling thread (what events record as tid).
int CurrentTid();

// Names shown by the viewer. A process name belongs to a pid ("rank 3"); a thread name to the calling
// thread, under every pid it records events for ("rank 3 stream").
void SetProcessName(int pid, const std::string& name);
void SetThreadName(const std::string& name);
// A track that is not a thread of this process (events recorded with an explicit tid, e.g. a stage's ops
// rebuilt from a timeline): its name under `pid`.
void SetTrackName(int pid, int tid, const std::string& name);

// Marks the instant every rank of a run passes together (the end of the communicator's rendezvous). Parts
// from different machines, whose monotonic clocks differ, are aligned on it when they are merged.
void MarkClockSync();

// The arguments of an event, written as the JSON object "args". Keys are plain identifiers.
class Args {
 public:
  Args& Add(std::string_view key, int64_t value);
  Args& Add(std::string_view key, int value) { return Add(key, static_cast<int64_t>(value)); }
  Args& Add(std::string_view key, uint64_t value);
  Args& Add(std::string_view key, double value);
  Args& Add(std::string_view key, std::string_view value);
  Args& Add(std::string_view key, const char* value) { return Add(key, std::string_view(value)); }
  const std::string& json_body() const { return body_; }  // "\"k\":1,\"s\":\"x\"" (no braces)
  bool empty() const { return body_.empty(); }

 private:
  void Key(std::string_view key);
  std::string body_;
};

// Records a complete event [start_ns, end_ns) on the trace clock. tid < 0: the calling thread. Does
// nothing when recording is off.
void Complete(std::string_view name, std::string_view category, int pid, int64_t start_ns, int64_t end_ns,
              const Args& args = Args(), int tid = -1);

// A complete event from construction to destruction on the calling thread; costs one Enabled() test when
// recording is off. Arguments may be added while it is open (a status known only at the end).
class Span {
 public:
  // Inline, so that with recording off a Span is the Enabled() test and nothing else: no call.
  Span(std::string_view name, std::string_view category, int pid) : category_(category), pid_(pid) {
    if (Enabled()) Begin(name);
  }
  ~Span() {
    if (start_ns_ >= 0) End();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  bool active() const { return start_ns_ >= 0; }
  Args& args() { return args_; }

 private:
  void Begin(std::string_view name);
  void End();

  std::string name_;
  std::string_view category_;
  int pid_;
  int64_t start_ns_ = -1;
  Args args_;
};

}  // namespace distlab::trace

#endif  // DISTLAB_REFERENCE_TRACE_TRACE_H_
