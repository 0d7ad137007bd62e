// Reading, checking and merging trace files (trace_file.h).
#include "reference/trace/trace_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace distlab::trace {
namespace {

using nlohmann::json;

// Timestamps carry three decimals; sums of them may be off by less than this.
constexpr double kEpsUs = 2e-3;

std::string Where(const json& e, size_t i) {
  std::string s = "event " + std::to_string(i);
  if (e.is_object() && e.contains("name") && e["name"].is_string())
    s += " '" + e["name"].get<std::string>() + "'";
  if (e.is_object() && e.contains("pid") && e["pid"].is_number_integer()) {
    s += " (pid " + std::to_string(e["pid"].get<int64_t>());
    if (e.contains("tid") && e["tid"].is_number_integer())
      s += ", tid " + std::to_string(e["tid"].get<int64_t>());
    s += ")";
  }
  return s;
}

const json* Events(const json& doc) {
  if (doc.is_array()) return &doc;
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array())
    return &doc["traceEvents"];
  return nullptr;
}

}  // namespace

absl::StatusOr<TraceDoc> ParseTrace(const std::string& text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("trace: not JSON");
  const json* events = Events(doc);
  if (events == nullptr) return absl::InvalidArgumentError("trace: no \"traceEvents\" array");
  TraceDoc out;
  if (doc.is_object() && doc.contains("otherData")) out.other = doc["otherData"];
  for (const json& e : *events) {
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", 0), tid = e.value("tid", 0);
    if (ph == "M") {
      const std::string what = e.value("name", "");
      const std::string name = e.contains("args") ? e["args"].value("name", "") : "";
      if (what == "process_name") out.process_names[pid] = name;
      if (what == "thread_name") out.thread_names[{pid, tid}] = name;
      continue;
    }
    if (ph != "X") continue;
    TraceEvent t;
    t.name = e.value("name", "");
    t.cat = e.value("cat", "");
    t.ts = e.value("ts", 0.0);
    t.dur = e.value("dur", 0.0);
    t.pid = pid;
    t.tid = tid;
    if (e.contains("args") && e["args"].is_object()) t.args = e["args"];
    out.events.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<TraceDoc> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("trace: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<TraceDoc> doc = ParseTrace(ss.str());
  if (!doc.ok()) return absl::InvalidArgumentError(path + ": " + std::string(doc.status().message()));
  return doc;
}

std::vector<std::string> CheckTrace(const json& doc) {
  std::vector<std::string> problems;
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    problems.push_back("the document is not an object with a \"traceEvents\" array");
    return problems;
  }
  const json& events = doc["traceEvents"];
  struct Track {
    double last_ts = -1e300;
    std::vector<std::pair<double, double>> open;  // X events still enclosing: (start, end)
    std::vector<std::string> begun;               // names of B events not yet ended
  };
  std::map<std::pair<int64_t, int64_t>, Track> tracks;
  std::map<int64_t, bool> named_pid;  // pid -> has process_name
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string where = Where(e, i);
    if (!e.is_object()) {
      problems.push_back(where + ": not an object");
      continue;
    }
    if (!e.contains("name") || !e["name"].is_string() || e["name"].get<std::string>().empty()) {
      problems.push_back(where + ": no name");
    }
    if (!e.contains("ph") || !e["ph"].is_string()) {
      problems.push_back(where + ": no ph");
      continue;
    }
    const std::string ph = e["ph"];
    if (!e.contains("pid") || !e["pid"].is_number_integer()) {
      problems.push_back(where + ": no integer pid");
      continue;
    }
    const int64_t pid = e["pid"];
    if (ph == "M") {
      if (e.value("name", "") == "process_name") named_pid[pid] = true;
      continue;
    }
    if (!e.contains("tid") || !e["tid"].is_number_integer()) {
      problems.push_back(where + ": no integer tid");
      continue;
    }
    if (!named_pid.count(pid)) named_pid[pid] = false;
    Track& t = tracks[{pid, e["tid"].get<int64_t>()}];
    if (!e.contains("ts") || !e["ts"].is_number()) {
      problems.push_back(where + ": no numeric ts");
      continue;
    }
    const double ts = e["ts"];
    if (ts + kEpsUs < t.last_ts) {
      problems.push_back(where + ": ts " + std::to_string(ts) +
                         " is before the previous event of its thread (" + std::to_string(t.last_ts) + ")");
    }
    t.last_ts = std::max(t.last_ts, ts);
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        problems.push_back(where + ": an X event needs dur >= 0");
        continue;
      }
      const double end = ts + e["dur"].get<double>();
      while (!t.open.empty() && t.open.back().second <= ts + kEpsUs) t.open.pop_back();
      if (!t.open.empty() && end > t.open.back().second + kEpsUs) {
        problems.push_back(where + ": [" + std::to_string(ts) + ", " + std::to_string(end) +
                           ") starts inside the event [" + std::to_string(t.open.back().first) + ", " +
                           std::to_string(t.open.back().second) + ") of its thread but ends after it");
      }
      t.open.emplace_back(ts, end);
    } else if (ph == "B") {
      t.begun.push_back(e.value("name", ""));
    } else if (ph == "E") {
      if (t.begun.empty()) {
        problems.push_back(where + ": an E event with no open B on its thread");
      } else {
        t.begun.pop_back();
      }
    }
  }
  for (const auto& [key, t] : tracks) {
    for (const std::string& name : t.begun) {
      problems.push_back("pid " + std::to_string(key.first) + ", tid " + std::to_string(key.second) +
                         ": B event '" + name + "' never ended");
    }
  }
  for (const auto& [pid, named] : named_pid) {
    if (!named) problems.push_back("pid " + std::to_string(pid) + " has events but no process_name");
  }
  return problems;
}

absl::StatusOr<json> MergeParts(const std::vector<json>& parts, const std::vector<std::string>& names) {
  if (parts.empty()) return absl::InvalidArgumentError("merge: no parts");
  auto name_of = [&](size_t i) { return i < names.size() ? names[i] : "part " + std::to_string(i); };
  struct Info {
    std::string boot;
    int64_t origin = 0, wall = 0, sync = -1;
  };
  std::vector<Info> info(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const json& p = parts[i];
    if (!p.is_object() || !p.contains("otherData") || !p["otherData"].is_object() || Events(p) == nullptr) {
      return absl::InvalidArgumentError("merge: " + name_of(i) +
                                        " is not a distlab trace part (no traceEvents or otherData)");
    }
    const json& o = p["otherData"];
    info[i].boot = o.value("boot_id", "");
    info[i].origin = o.value("origin_ns", int64_t{0});
    info[i].wall = o.value("wall_origin_ns", int64_t{0});
    info[i].sync = o.value("sync_ns", int64_t{-1});
  }
  // The reference clock: the machine of part 0 (rank 0 when the parts are given in rank order).
  const Info& ref = info[0];
  // A sync instant of the reference machine, if any of its parts has one.
  int64_t ref_sync = -1;
  for (const Info& x : info) {
    if (x.boot == ref.boot && x.sync >= 0) ref_sync = x.sync;
  }
  std::map<std::string, int64_t> sync_of_boot;
  for (const Info& x : info) {
    if (x.sync >= 0 && !sync_of_boot.count(x.boot)) sync_of_boot[x.boot] = x.sync;
  }
  // offset[i]: add to a part's own ns (origin + ts) to get the reference clock.
  std::vector<int64_t> offset(parts.size(), 0);
  json alignment = json::array();
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string by;
    if (info[i].boot == ref.boot && !ref.boot.empty()) {
      by = "same machine: one monotonic clock";
    } else if (ref_sync >= 0 && sync_of_boot.count(info[i].boot)) {
      offset[i] = ref_sync - sync_of_boot[info[i].boot];
      by = "rendezvous instant (sync_ns)";
    } else {
      // mono -> wall is wall_origin - origin on each machine.
      offset[i] = (info[i].wall - info[i].origin) - (ref.wall - ref.origin);
      by = "wall clocks";
    }
    alignment.push_back({{"part", name_of(i)}, {"by", by}, {"offset_ns", offset[i]}});
  }
  // Every event on the reference clock in ns, then shifted so that the earliest starts at 0.
  json metadata = json::array(), timed = json::array();
  double earliest = 1e300;
  for (size_t i = 0; i < parts.size(); ++i) {
    const double shift_us = static_cast<double>(info[i].origin + offset[i]) / 1000.0;
    for (json e : *Events(parts[i])) {
      if (!e.is_object()) continue;
      if (e.value("ph", "") == "M" || !e.contains("ts")) {
        metadata.push_back(std::move(e));
        continue;
      }
      const double ts = e["ts"].get<double>() + shift_us;
      e["ts"] = ts;
      earliest = std::min(earliest, ts);
      timed.push_back(std::move(e));
    }
  }
  for (json& e : timed) e["ts"] = std::round((e["ts"].get<double>() - earliest) * 1000.0) / 1000.0;
  std::stable_sort(timed.begin(), timed.end(), [](const json& a, const json& b) {
    const int pa = a.value("pid", 0), pb = b.value("pid", 0);
    if (pa != pb) return pa < pb;
    const int ta = a.value("tid", 0), tb = b.value("tid", 0);
    if (ta != tb) return ta < tb;
    const double sa = a["ts"].get<double>(), sb = b["ts"].get<double>();
    if (sa != sb) return sa < sb;
    return a.value("dur", 0.0) > b.value("dur", 0.0);
  });
  // One metadata event per (name, pid, tid): parts of one process folded twice would repeat them.
  json unique_metadata = json::array();
  std::map<std::string, bool> seen;
  for (const json& m : metadata) {
    const std::string key = m.value("name", "") + "/" + std::to_string(m.value("pid", 0)) + "/" +
                            std::to_string(m.value("tid", -1));
    if (seen[key]) continue;
    seen[key] = true;
    unique_metadata.push_back(m);
  }
  json all = unique_metadata;
  for (json& e : timed) all.push_back(std::move(e));
  json other = {{"format", "distlab trace 1"},
                {"merged_from", names},
                {"alignment", alignment},
                {"origin_ns", static_cast<int64_t>(std::llround(earliest * 1000.0))},
                {"clock", "CLOCK_MONOTONIC of " + name_of(0)}};
  return json{{"traceEvents", all}, {"displayTimeUnit", "ms"}, {"otherData", other}};
}

std::vector<TraceEvent> TopLevel(const TraceDoc& doc, int pid, int tid) {
  std::vector<TraceEvent> track;
  for (const TraceEvent& e : doc.events) {
    if (e.pid == pid && e.tid == tid) track.push_back(e);
  }
  std::stable_sort(track.begin(), track.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
  });
  std::vector<TraceEvent> top;
  for (const TraceEvent& e : track) {
    if (!top.empty() && e.end() <= top.back().end() + kEpsUs) continue;  // nested in the previous one
    top.push_back(e);
  }
  return top;
}

std::map<int, TraceEvent> LastEventOfEachPid(const TraceDoc& doc, const std::string& category) {
  std::map<int, TraceEvent> last;
  for (const TraceEvent& e : doc.events) {
    if (!category.empty() && e.cat != category) continue;
    auto it = last.find(e.pid);
    if (it == last.end() || e.end() > it->second.end()) last[e.pid] = e;
  }
  return last;
}

}  // namespace distlab::trace
