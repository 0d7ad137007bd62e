// Reading trace files (trace.h's format): the format checks the tests apply, joining the parts of a
// multi-process run into one file with one clock, and the per-track summaries figures and tests use.
//
// Clock alignment when parts are merged. Each part says which clock its timestamps come from
// (otherData.clock = CLOCK_MONOTONIC, otherData.boot_id = the machine's boot id) and where its zero is
// (origin_ns, on that clock). Parts with the same boot id share one clock -- CLOCK_MONOTONIC is one
// system-wide counter -- so shifting each part by its origin lines them up exactly. Parts from different
// machines (different boot ids) have unrelated monotonic clocks; they are aligned on the instant every rank
// passes together (sync_ns, recorded by MarkClockSync at the end of the communicator's rendezvous): the
// error is how far apart the ranks leave that rendezvous, a network latency. Without sync_ns the wall clocks
// (wall_origin_ns) are used, good to whatever NTP gives (milliseconds). otherData.alignment of the merged
// file says, per part, which was used and the shift applied.
#ifndef DISTLAB_REFERENCE_TRACE_TRACE_FILE_H_
#define DISTLAB_REFERENCE_TRACE_TRACE_FILE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace distlab::trace {

// A complete event as read back.
struct TraceEvent {
  std::string name, cat;
  double ts = 0, dur = 0;  // microseconds
  int pid = 0, tid = 0;
  nlohmann::json args = nlohmann::json::object();
  double end() const { return ts + dur; }
};

struct TraceDoc {
  std::vector<TraceEvent> events;                           // the X events, in file order
  std::map<int, std::string> process_names;                 // pid -> name
  std::map<std::pair<int, int>, std::string> thread_names;  // (pid, tid) -> name
  nlohmann::json other = nlohmann::json::object();          // otherData
};

// Parses a document ({"traceEvents": [...]} or a bare array). Errors name what is missing.
absl::StatusOr<TraceDoc> ParseTrace(const std::string& text);
absl::StatusOr<TraceDoc> ReadTrace(const std::string& path);

// The format checks, each problem one line naming the event (empty: the trace is well formed):
//   the document is an object with an array "traceEvents";
//   every event has a non-empty "name", a "ph", an integer "pid" (and "tid" unless it names a process);
//   X events have numeric ts and dur >= 0; B and E events balance on each (pid, tid), E closing the last B;
//   on each (pid, tid) the X events appear with non-decreasing ts, and nest: an event that starts inside
//   another ends inside it too (a flame chart, not a tangle);
//   every pid with events has a process_name.
std::vector<std::string> CheckTrace(const nlohmann::json& doc);

// Joins parts (documents written by trace.h, one per process) into one document with one clock (see the
// file comment), timestamps starting at the earliest event. An empty list or a part without otherData is an
// error naming it.
absl::StatusOr<nlohmann::json> MergeParts(const std::vector<nlohmann::json>& parts,
                                          const std::vector<std::string>& names);

// The events of one track (pid, tid) that are not nested in another (the top level), in time order.
std::vector<TraceEvent> TopLevel(const TraceDoc& doc, int pid, int tid);

// The last event each pid recorded (by end time): what a rank was doing when the run stopped.
std::map<int, TraceEvent> LastEventOfEachPid(const TraceDoc& doc, const std::string& category = "");

}  // namespace distlab::trace

#endif  // DISTLAB_REFERENCE_TRACE_TRACE_FILE_H_
