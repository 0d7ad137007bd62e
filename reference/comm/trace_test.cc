// The runtime's trace events (host_comm.h: TraceCall): every collective and Send/Recv leaves a launch event
// on the caller's thread and a stream event on the stream's thread, with op, dtype, count, bytes, peer and
// sequence number; the bytes in the trace equal the communicator's byte counters; and when a run goes wrong
// -- a mismatch, a hang -- the last event of each rank says what it was doing. On the threads and the gloo
// backend (its ranks threads of this process here, each with its own Gloo context over loopback).
#include "reference/trace/trace.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/trace/trace_file.h"
#include "tools/testing/test_support.h"

namespace distlab::comm {
namespace {

using nlohmann::json;
using trace::TraceDoc;
using trace::TraceEvent;

CommOptions Options(Backend backend, int timeout_ms = 20000) {
  CommOptions o;
  o.backend = backend;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  o.name = "traced";
  return o;
}

// Records `run`, then checks the format and returns the parsed trace.
TraceDoc Record(const std::function<void()>& run) {
  trace::Start();
  run();
  EXPECT_OK(trace::Stop());
  const std::string text = trace::Json();
  for (const std::string& p : trace::CheckTrace(json::parse(text))) ADD_FAILURE() << p;
  absl::StatusOr<TraceDoc> doc = trace::ParseTrace(text);
  EXPECT_OK(doc);
  trace::Clear();
  return doc.ok() ? *doc : TraceDoc();
}

std::vector<TraceEvent> Events(const TraceDoc& doc, int pid, const std::string& cat) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : doc.events) {
    if (e.pid == pid && e.cat == cat) out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const TraceEvent& a, const TraceEvent& b) { return a.ts < b.ts; });
  return out;
}

class CommTrace : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kGloo && distlab::testing::Sanitizer() == "tsan") {
      GTEST_SKIP() << "Gloo is not built with TSan, which cannot follow it: the gloo cases run in the plain "
                      "and ASan configurations";
    }
  }
};

// One of each: six collectives, then a ring step (grouped Send to r+1, Recv from r-1).
absl::Status EveryKind(int r, Comm& comm, Stream& stream, std::vector<Stats>& stats) {
  const int n = comm.size();
  std::vector<float> a(64, 1.0f + r), b(64 * n, 0.0f), c(64 * n, 2.0f);
  RETURN_IF_ERROR(comm.AllReduce(a.data(), b.data(), 64, DataType::kF32, RedOp::kSum, stream));
  RETURN_IF_ERROR(comm.Broadcast(a.data(), b.data(), 32, DataType::kF32, 1, stream));
  RETURN_IF_ERROR(comm.Reduce(a.data(), b.data(), 16, DataType::kF32, RedOp::kMax, 0, stream));
  RETURN_IF_ERROR(comm.AllGather(a.data(), b.data(), 8, DataType::kF32, stream));
  RETURN_IF_ERROR(comm.ReduceScatter(c.data(), a.data(), 8, DataType::kF32, RedOp::kSum, stream));
  RETURN_IF_ERROR(comm.AllToAll(c.data(), b.data(), 4, DataType::kF32, stream));
  RETURN_IF_ERROR(GroupStart());
  absl::Status s = comm.Send(a.data(), 10, DataType::kF32, (r + 1) % n, stream);
  if (s.ok()) s = comm.Recv(b.data(), 10, DataType::kF32, (r + n - 1) % n, stream);
  absl::Status end = GroupEnd();
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(end);
  RETURN_IF_ERROR(stream.Synchronize());
  stats[r] = comm.stats();
  return absl::OkStatus();
}

TEST_P(CommTrace, EveryCallHasALaunchAndAStreamEvent) {
  constexpr int n = 4;
  std::vector<Stats> stats(n);
  const TraceDoc doc = Record([&] {
    ASSERT_OK(FirstError(RunRanks(
        n, [&](int r, Comm& comm, Stream& stream) { return EveryKind(r, comm, stream, stats); },
        Options(GetParam()))));
  });
  const std::vector<std::string> kinds = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                          "ReduceScatter", "AllToAll",  "Send",   "Recv"};
  for (int r = 0; r < n; ++r) {
    const std::vector<TraceEvent> launch = Events(doc, r, "comm"), work = Events(doc, r, "comm.stream");
    ASSERT_EQ(launch.size(), kinds.size()) << "rank " << r;
    ASSERT_EQ(work.size(), kinds.size()) << "rank " << r;
    std::multiset<std::string> launched, worked;
    for (size_t i = 0; i < kinds.size(); ++i) {
      launched.insert(launch[i].name);
      worked.insert(work[i].name);
      for (const TraceEvent* e : {&launch[i], &work[i]}) {
        const json& a = e->args;
        EXPECT_EQ(a["op"], e->name);
        EXPECT_EQ(a["dtype"], "f32");
        EXPECT_EQ(a["rank"], r);
        EXPECT_EQ(a["nranks"], n);
        EXPECT_EQ(a["comm"], "traced");
        EXPECT_EQ(a["status"], "OK") << e->name;
        EXPECT_TRUE(a.contains("count") && a.contains("bytes") && a.contains("seq")) << a.dump();
        if (e->name == "Send") EXPECT_EQ(a["peer"], (r + 1) % n);
        if (e->name == "Recv") EXPECT_EQ(a["peer"], (r + n - 1) % n);
        if (e->name == "Broadcast") EXPECT_EQ(a["root"], 1);
        if (e->name == "Reduce") EXPECT_EQ(a["redop"], "max");
        if (e->name == "Send" || e->name == "Recv") EXPECT_EQ(a["grouped"], 1);
      }
      EXPECT_LE(launch[i].ts, work[i].ts + 1) << "launched before it ran: " << launch[i].name;
    }
    EXPECT_EQ(launched, std::multiset<std::string>(kinds.begin(), kinds.end()));
    EXPECT_EQ(worked, launched);
    // The collectives are numbered 1..6 in call order (the k of "collective #k").
    for (int k = 0; k < 6; ++k) EXPECT_EQ(launch[k].args["seq"], k + 1) << launch[k].name;
    // The stream work ran on a thread named for the rank, not on the caller's.
    EXPECT_NE(work[0].tid, launch[0].tid);
    EXPECT_EQ(doc.thread_names.at({r, work[0].tid}), "rank " + std::to_string(r) + " stream");
  }
}

TEST_P(CommTrace, BytesInTheTraceEqualTheByteCounters) {
  constexpr int n = 3;
  std::vector<Stats> stats(n);
  const TraceDoc doc = Record([&] {
    ASSERT_OK(FirstError(RunRanks(
        n, [&](int r, Comm& comm, Stream& stream) { return EveryKind(r, comm, stream, stats); },
        Options(GetParam()))));
  });
  for (int r = 0; r < n; ++r) {
    uint64_t sent = 0, received = 0, collective = 0, sends = 0, recvs = 0, calls = 0;
    for (const TraceEvent& e : Events(doc, r, "comm")) {
      const uint64_t bytes = e.args["bytes"].get<uint64_t>();
      if (e.name == "Send") {
        sent += bytes, ++sends;
      } else if (e.name == "Recv") {
        received += bytes, ++recvs;
      } else {
        collective += bytes, ++calls;
      }
    }
    EXPECT_EQ(sent, stats[r].bytes_sent) << "rank " << r;
    EXPECT_EQ(received, stats[r].bytes_received) << "rank " << r;
    EXPECT_EQ(collective, stats[r].collective_bytes) << "rank " << r;
    EXPECT_EQ(sends, stats[r].sends);
    EXPECT_EQ(recvs, stats[r].recvs);
    EXPECT_EQ(calls, stats[r].collective_calls);
    EXPECT_GT(collective, 0u);
  }
}

// Rank 0 reduces 8 floats, rank 1 reduces 16: a mismatch. The last event of each rank is that AllReduce,
// with its own count and the error naming both calls.
TEST_P(CommTrace, AMismatchIsTheLastEventOfEachRank) {
  const TraceDoc doc = Record([&] {
    const std::vector<absl::Status> statuses = RunRanks(
        2,
        [](int r, Comm& comm, Stream& stream) -> absl::Status {
          std::vector<float> x(16, 1.0f), y(16);
          RETURN_IF_ERROR(comm.Broadcast(x.data(), y.data(), 4, DataType::kF32, 0, stream));
          RETURN_IF_ERROR(stream.Synchronize());
          RETURN_IF_ERROR(
              comm.AllReduce(x.data(), y.data(), r == 0 ? 8 : 16, DataType::kF32, RedOp::kSum, stream));
          return stream.Synchronize();
        },
        Options(GetParam()));
    EXPECT_EQ(FirstError(statuses).code(), absl::StatusCode::kInvalidArgument) << FirstError(statuses);
  });
  // A call has a launch event ("comm") and, once launched, a stream event ("comm.stream"). The mismatch shows
  // on the one that found it: the launch on the threads backend, which compares the ranks' calls there; the
  // stream on gloo, whose stream exchanges the descriptors. On gloo, which of the two ends last is a race
  // (the stream can fail before the launch returns), so each rank's last call is read from its failed event.
  const auto last = trace::LastEventOfEachPid(doc);
  ASSERT_EQ(last.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    TraceEvent e = last.at(r);
    for (const TraceEvent& o : doc.events) {
      if (o.pid == r && o.name == e.name && o.args["seq"] == e.args["seq"] && o.args["status"] != "OK") e = o;
    }
    EXPECT_EQ(e.name, "AllReduce") << "rank " << r;
    EXPECT_EQ(e.args["count"], r == 0 ? 8 : 16);
    EXPECT_EQ(e.args["seq"], 2);
    const std::string status = e.args["status"];
    EXPECT_NE(status.find("mismatch"), std::string::npos) << status;
    EXPECT_NE(status.find("count=8"), std::string::npos) << status;
    EXPECT_NE(status.find("count=16"), std::string::npos) << status;
  }
}

// Ranks 0 and 1 call an AllReduce that rank 2 never calls (it goes on to a long computation). The watchdog
// ends their wait; the last event of ranks 0 and 1 is that AllReduce, failed with DEADLINE_EXCEEDED (on the
// threads backend naming rank 2 as missing), and rank 2's last is the Broadcast every rank made before.
TEST_P(CommTrace, AHangIsTheLastEventOfEachRank) {
  const TraceDoc doc = Record([&] {
    const std::vector<absl::Status> statuses = RunRanks(
        3,
        [](int r, Comm& comm, Stream& stream) -> absl::Status {
          std::vector<float> x(16, 1.0f), y(16);
          RETURN_IF_ERROR(comm.Broadcast(x.data(), y.data(), 4, DataType::kF32, 0, stream));
          RETURN_IF_ERROR(stream.Synchronize());
          if (r == 2) {
            std::this_thread::sleep_for(distlab::testing::Scaled(std::chrono::milliseconds(1500)));
            return absl::OkStatus();
          }
          RETURN_IF_ERROR(comm.AllReduce(x.data(), y.data(), 16, DataType::kF32, RedOp::kSum, stream));
          return stream.Synchronize();
        },
        Options(GetParam(), /*timeout_ms=*/500));
    EXPECT_FALSE(FirstError(statuses).ok());
  });
  const auto last = trace::LastEventOfEachPid(doc);
  ASSERT_EQ(last.size(), 3u);
  for (int r = 0; r < 2; ++r) {
    const TraceEvent& e = last.at(r);
    EXPECT_EQ(e.name, "AllReduce") << "rank " << r;
    const std::string status = e.args["status"];
    EXPECT_NE(status.find("DEADLINE_EXCEEDED"), std::string::npos) << "rank " << r << ": " << status;
    if (GetParam() == Backend::kThreads)
      EXPECT_NE(status.find("missing: rank 2"), std::string::npos) << status;
  }
  EXPECT_EQ(last.at(2).name, "Broadcast");
  EXPECT_EQ(last.at(2).args["status"], "OK");
}

TEST(CommTraceOff, NothingIsRecorded) {
  ASSERT_OK(trace::Stop());
  trace::Clear();
  std::vector<Stats> stats(2);
  ASSERT_OK(FirstError(RunRanks(
      2, [&](int r, Comm& comm, Stream& stream) { return EveryKind(r, comm, stream, stats); },
      Options(Backend::kThreads))));
  const json doc = json::parse(trace::Json());
  for (const json& e : doc["traceEvents"]) EXPECT_NE(e["ph"], "X") << e.dump();
}

INSTANTIATE_TEST_SUITE_P(Backends, CommTrace, ::testing::Values(Backend::kThreads, Backend::kGloo),
                         [](const auto& info) { return std::string(Name(info.param)); });

}  // namespace
}  // namespace distlab::comm
