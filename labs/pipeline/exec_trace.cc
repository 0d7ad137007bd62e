// Lab 5 (pipeline), given; not graded: executor timelines as trace events, and the bubble read back.
#include "labs/pipeline/exec_trace.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "reference/trace/trace.h"

namespace distlab::pipeline {

void RecordExecTrace(const ExecResult& result, int64_t origin_ns) {
  if (!trace::Enabled()) return;
  for (size_t s = 0; s < result.timeline.size(); ++s) {
    const int stage = static_cast<int>(s);
    trace::SetTrackName(stage, ComputeTrack(stage), "stage " + std::to_string(stage) + " compute");
    for (const TimedOp& t : result.timeline[s]) {
      const int64_t start = origin_ns + static_cast<int64_t>(t.start * 1e6);
      const int64_t end = origin_ns + static_cast<int64_t>(t.end * 1e6);
      trace::Complete(ToString(t.op), "pipeline", stage, start, end,
                      trace::Args()
                          .Add("stage", stage)
                          .Add("microbatch", t.op.mb)
                          .Add("chunk", t.op.chunk)
                          .Add("kind", KindName(t.op.kind)),
                      ComputeTrack(stage));
    }
  }
}

absl::StatusOr<TraceBubble> BubbleFromTrace(const trace::TraceDoc& doc) {
  std::map<int, double> busy_us;
  std::map<std::string, std::pair<double, int>> per_kind;  // kind -> (sum us, count)
  double first = 1e300, last = -1e300;
  for (const trace::TraceEvent& e : doc.events) {
    if (e.cat != "pipeline") continue;
    busy_us[e.pid] += e.dur;
    first = std::min(first, e.ts);
    last = std::max(last, e.end());
    auto& k = per_kind[e.args.value("kind", "")];
    k.first += e.dur;
    ++k.second;
  }
  if (busy_us.empty()) return absl::InvalidArgumentError("BubbleFromTrace: the trace has no pipeline events");
  TraceBubble b;
  b.stages = busy_us.rbegin()->first + 1;
  b.busy_ms.assign(b.stages, 0);
  double sum = 0;
  for (const auto& [s, us] : busy_us) {
    b.busy_ms[s] = us / 1e3;
    sum += us / 1e3;
  }
  b.makespan_ms = (last - first) / 1e3;
  b.bubble_rate = b.makespan_ms > 0 ? 1.0 - (sum / b.stages) / b.makespan_ms : 0.0;
  auto mean = [&](const char* kind) {
    const auto it = per_kind.find(kind);
    return it == per_kind.end() || it->second.second == 0 ? 0.0 : it->second.first / it->second.second / 1e3;
  };
  b.mean_f_ms = mean(KindName(OpKind::kForward));
  b.mean_b_ms = mean(KindName(OpKind::kBackward));
  b.mean_w_ms = mean(KindName(OpKind::kWeight));
  b.mean_bw_ms = mean(KindName(OpKind::kFullBackward));

  // Messages: index every F and every B/BW by (virtual stage, microbatch), then look at each op that
  // consumes one and waited for it.
  std::map<int, std::vector<const trace::TraceEvent*>> per_stage;
  for (const trace::TraceEvent& e : doc.events) {
    if (e.cat == "pipeline") per_stage[e.pid].push_back(&e);
  }
  const std::string f = KindName(OpKind::kForward), bk = KindName(OpKind::kBackward),
                    bw = KindName(OpKind::kFullBackward);
  auto vstage = [&](const trace::TraceEvent& e) { return e.args.value("chunk", 0) * b.stages + e.pid; };
  std::map<std::tuple<bool, int, int>, const trace::TraceEvent*> producer;  // (activation, k, mb) -> op
  for (const trace::TraceEvent& e : doc.events) {
    if (e.cat != "pipeline") continue;
    const std::string kind = e.args.value("kind", "");
    if (kind == f || kind == bk || kind == bw) {
      producer[{kind == f, vstage(e), e.args.value("microbatch", 0)}] = &e;
    }
  }
  std::vector<double> waits;
  for (auto& [s, ops] : per_stage) {
    std::sort(ops.begin(), ops.end(), [](auto* x, auto* y) { return x->ts < y->ts; });
    for (size_t i = 0; i < ops.size(); ++i) {
      const trace::TraceEvent& e = *ops[i];
      const std::string kind = e.args.value("kind", "");
      if (kind != f && kind != bk && kind != bw) continue;
      const bool activation = kind == f;
      const int from = vstage(e) + (activation ? -1 : 1);
      const auto it = producer.find({activation, from, e.args.value("microbatch", 0)});
      if (it == producer.end() || it->second->pid == e.pid) continue;  // no message (first/last, same rank)
      const double sent = it->second->end();
      if (i > 0 && ops[i - 1]->end() > sent) continue;  // the stage was busy when the message was sent
      waits.push_back((e.ts - sent) / 1e3);
    }
  }
  if (!waits.empty()) {
    double total = 0;
    for (double w : waits) total += std::max(0.0, w);
    b.comm_ms = total / waits.size();
    b.comm_samples = static_cast<int>(waits.size());
  }
  return b;
}

}  // namespace distlab::pipeline
