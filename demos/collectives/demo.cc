// Lab 1 demo: what the collectives cost on this machine and why.
//
//   1. B, the memcpy bandwidth of all cores -- the physical bound of a shared-memory machine.
//   2. Every collective at 2, 4 and 8 ranks, built-in vs ring: algbw, busbw, and algbw as a fraction of its
//      bound (AlgBwBound). The built-ins are direct shared-memory algorithms; a ring moves each byte
//      through n-1 hops, which is what links need, not what shared memory needs.
//   3. busbw vs size for all-reduce at 4 ranks (built-in, ring, halving-doubling) beside the bound, each
//      point the median of 5 interleaved rounds of >= 16 MiB per sample: notes/figures/collectives_busbw.svg.
//   4. The ring's steps as a Graphviz figure: notes/figures/collectives_ring_steps.svg.
//   5. The lifecycle scenarios of stage A, narrated: a shutdown that must abort, a rank that throws, a
//      rank that never arrives.
// Writes DIR/collectives_summary.json with every number printed.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "labs/collectives/bandwidth.h"
#include "labs/collectives/harness.h"
#include "labs/collectives/lifecycle.h"
#include "labs/collectives/ring.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "reference/comm/membw.h"
#include "reference/trace/trace.h"
#include "reference/trace/trace_file.h"
#include "reference/trace/trace_svg.h"
#include "reference/viz/viz.h"
#include "tools/base/cli.h"

namespace dc = distlab::collectives;
namespace comm = distlab::comm;
namespace viz = distlab::viz;
using nlohmann::json;

namespace {

std::string Mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g MiB", bytes / 1048576.0);
  return buf;
}

// The ring reduce-scatter and all-gather on n ranks as one Graphviz figure: one row per step, an edge
// r -> r+1 labelled with the chunk it carries.
std::string RingStepsDot(int n) {
  std::string dot =
      "digraph ring {\n  rankdir=LR; newrank=true; node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
      "  edge [fontname=\"Helvetica\", fontsize=10];\n  labelloc=t; label=\"Ring all-reduce on " +
      std::to_string(n) + " ranks = reduce-scatter (n-1 steps) + all-gather (n-1 steps)\";\n";
  auto mod = [n](int a) { return ((a % n) + n) % n; };
  std::vector<std::string> clusters;  // dot stacks later clusters above earlier ones: emit them reversed
  for (int phase = 0; phase < 2; ++phase) {
    for (int s = 0; s < n - 1; ++s) {
      const std::string id = (phase == 0 ? "rs" : "ag") + std::to_string(s);
      std::string d;
      d += "  subgraph cluster_" + id + " {\n    label=\"" +
           (phase == 0 ? std::string("reduce-scatter") : std::string("all-gather")) + " step " +
           std::to_string(s) + "\"; color=\"#bbbbbb\";\n";
      for (int r = 0; r < n; ++r)
        d += "    " + id + "_r" + std::to_string(r) + " [label=\"rank " + std::to_string(r) + "\"];\n";
      for (int r = 0; r < n; ++r) {
        const int chunk = phase == 0 ? mod(r - s - 1) : mod(r - s);
        const std::string verb = phase == 0 ? "+= c" : "c";
        d += "    " + id + "_r" + std::to_string(r) + " -> " + id + "_r" + std::to_string(mod(r + 1)) +
             " [label=\"" + verb + std::to_string(chunk) + "\", color=\"" + viz::PaletteColor(chunk) +
             "\", fontcolor=\"" + viz::PaletteColor(chunk) + "\"" + (r == n - 1 ? ", constraint=false" : "") +
             "];\n";
      }
      d += "  }\n";
      clusters.push_back(d);
    }
  }
  for (auto it = clusters.rbegin(); it != clusters.rend(); ++it) dot += *it;
  return dot + "}\n";
}

dc::PerfOptions Options(dc::Collective c, dc::Algorithm a, int n) {
  dc::PerfOptions o;
  o.collective = c;
  o.algorithm = a;
  o.ranks = n;
  o.iters = 3;
  o.warmup_iters = 1;
  o.check = true;
  o.root = 0;
  return o;
}

void Scenarios(json* out) {
  using std::chrono::milliseconds;
  std::printf("\n== Stage A: lifecycle scenarios ==\n");
  // (1) Shutdown of a rank whose all-reduce waits for a peer whose stream is busy.
  {
    auto comms = std::move(comm::CommInitAll(2)).value();
    comm::Stream s0, s1;
    std::atomic<bool> gate{false};
    s1.Enqueue([&] {
      while (!gate) std::this_thread::sleep_for(milliseconds(1));
      return absl::OkStatus();
    });
    float a = 1, b = 2;
    std::thread t([&] { (void)comms[1]->AllReduce(&b, &b, 1, comm::DataType::kF32, comm::RedOp::kSum, s1); });
    (void)comms[0]->AllReduce(&a, &a, 1, comm::DataType::kF32, comm::RedOp::kSum, s0);
    t.join();
    const auto t0 = std::chrono::steady_clock::now();
    auto res = dc::ShutdownWithDeadline(*comms[0], s0, milliseconds(200));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    gate = true;
    absl::Status peer = s1.Synchronize();
    (void)comms[1]->Abort();
    const std::string what = !res.ok() ? res.status().ToString()
                                       : (*res == dc::ShutdownResult::kAborted ? "kAborted" : "kDestroyed");
    std::printf("shutdown, deadline 200 ms, peer's stream busy: %s after %.0f ms; the peer then sees: %s\n",
                what.c_str(), ms, peer.ToString().c_str());
    (*out)["shutdown"] = {{"result", what}, {"ms", ms}, {"peer", peer.ToString()}};
  }
  // (2) A rank that throws while the others wait in an all-reduce.
  {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = dc::RunWithWatchdog(
        4,
        [](int rank, comm::Comm& c, comm::Stream& st, dc::RankActivity& act) -> absl::Status {
          if (rank == 2) {
            act.Set("loading shard 17");
            throw std::runtime_error("file not found: shard-17");
          }
          act.Set("gradient all-reduce");
          float x = 1;
          return c.AllReduce(&x, &x, 1, comm::DataType::kF32, comm::RedOp::kSum, st);
        },
        milliseconds(2000));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("watchdog, rank 2 throws (timeout 2000 ms): after %.0f ms -> %s\n", ms, s.ToString().c_str());
    (*out)["watchdog_throw"] = {{"ms", ms}, {"status", s.ToString()}};
  }
  // (3) A rank that never arrives.
  {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = dc::RunWithWatchdog(
        4,
        [](int rank, comm::Comm& c, comm::Stream& st, dc::RankActivity& act) -> absl::Status {
          if (rank == 3) {
            act.Set("stuck in the data loader");
            while (!c.released()) std::this_thread::sleep_for(milliseconds(1));
            return absl::OkStatus();
          }
          act.Set("gradient all-reduce");
          float x = 1;
          return c.AllReduce(&x, &x, 1, comm::DataType::kF32, comm::RedOp::kSum, st);
        },
        milliseconds(300));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("watchdog, rank 3 never arrives (timeout 300 ms): after %.0f ms -> %s\n", ms,
                s.ToString().c_str());
    (*out)["watchdog_never_arrives"] = {{"ms", ms}, {"status", s.ToString()}};
  }
}

}  // namespace

// One ring all-reduce (stage B's RingAllReduce) of 4 MiB of f32 on n rank threads, recorded with the
// runtime's tracer: each rank's stream runs its 2(n-1) steps, a Send and a Recv each, and the figure draws
// them per rank (the "comm.stream" events: when the stream did the work, not when the caller enqueued it).
// Written to DIR/trace-ring-allreduce.json (open it in https://ui.perfetto.dev) and
// DIR/collectives-trace-ring.svg.
void TracedRing(int n, const std::string& out_dir, std::vector<std::string>* figures, json* out) {
  constexpr size_t kCount = size_t{1} << 20;
  const std::string trace_json = out_dir + "/trace-ring-allreduce.json";
  const std::string svg_path = out_dir + "/collectives-trace-ring.svg";
  // The figure shows the second of two calls: the first pays for the threads' start and the first touch of
  // the buffers. A built-in all-reduce of one float between them is the barrier; the window opens when the
  // first rank leaves it.
  std::atomic<int64_t> window_ns{std::numeric_limits<int64_t>::max()};
  distlab::trace::Start(trace_json);
  const std::vector<absl::Status> ranks =
      comm::RunRanks(n, [&](int rank, comm::Comm& c, comm::Stream& s) -> absl::Status {
        std::vector<float> buf(kCount, static_cast<float>(rank + 1));
        float one = 1;
        for (int call = 0; call < 2; ++call) {
          if (call == 1) {
            RETURN_IF_ERROR(c.AllReduce(&one, &one, 1, comm::DataType::kF32, comm::RedOp::kSum, s));
            RETURN_IF_ERROR(s.Synchronize());
            int64_t now = distlab::trace::NowNs(), seen = window_ns.load();
            while (now < seen && !window_ns.compare_exchange_weak(seen, now)) {
            }
          }
          const absl::Status st = dc::RingAllReduce(buf.data(), buf.data(), kCount, comm::DataType::kF32,
                                                    comm::RedOp::kSum, c, s);
          const absl::Status synced = s.Synchronize();  // buf must outlive the stream's work
          RETURN_IF_ERROR(st.ok() ? synced : st);
        }
        return absl::OkStatus();
      });
  const absl::Status stopped = distlab::trace::Stop();
  absl::Status first = comm::FirstError(ranks);
  if (first.ok()) first = stopped;
  absl::StatusOr<distlab::trace::TraceDoc> doc =
      first.ok() ? distlab::trace::ReadTrace(trace_json) : absl::StatusOr<distlab::trace::TraceDoc>(first);
  if (!doc.ok()) {
    std::printf("ring trace: %s\n", doc.status().ToString().c_str());
    return;
  }
  // The grouped Send and Recv of a step run together on the stream (the same start, ends microseconds apart),
  // so each box of the figure is one step, drawn with the Recv on top.
  // Event times in the file are microseconds since the trace's origin (otherData.origin_ns).
  const double from_us =
      static_cast<double>(window_ns.load() - doc->other.value("origin_ns", int64_t{0})) / 1000.0;
  int steps = 0;
  double to_us = from_us;
  for (const auto& e : doc->events) {
    if (e.cat != "comm.stream" || e.ts < from_us) continue;
    steps += e.pid == 0 && e.name == "Send";
    to_us = std::max(to_us, e.end());
  }
  distlab::trace::SvgOptions svg;
  svg.from_us = from_us - 0.02 * (to_us - from_us);
  svg.to_us = to_us + 0.02 * (to_us - from_us);
  char title[160];
  std::snprintf(title, sizeof title,
                "ring all-reduce, 4 MiB f32, %d rank threads, from its trace: %d steps on rank 0 = 2(n-1)", n,
                steps);
  svg.title = title;
  svg.categories = {"comm.stream"};
  svg.palette = {{"Send", 2}, {"Recv", 5}};
  const absl::Status drawn = distlab::trace::WriteSvg(*doc, svg, svg_path);
  std::printf("%s\n",
              drawn.ok() ? ("wrote " + svg_path + " from " + trace_json).c_str() : drawn.ToString().c_str());
  if (drawn.ok()) figures->push_back(svg_path);
  *out = {{"trace", trace_json}, {"figure", svg_path}, {"rank0_sends", steps}, {"expected", 2 * (n - 1)}};
}

int main(int argc, char** argv) {
  distlab::cli::App app{"Lab 1 demo: collectives, bandwidth math, the shared-memory bound, lifecycle"};
  std::string out_dir = ".";
  size_t table_bytes = 2 << 20;
  app.add_option("--out", out_dir, "directory for the figures and collectives_summary.json");
  app.add_option("--bytes", table_bytes, "S of the bandwidth table (bytes)");
  DISTLAB_CLI_PARSE(app, argc, argv);
  json summary;
  const int threads = comm::HardwareThreads();

  // 1. The bound.
  std::printf("== The physical bound: memcpy bandwidth B of %d threads ==\n", threads);
  std::printf("%12s %10s\n", "size", "B (GB/s)");
  for (size_t s : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20}) {
    const double b = comm::MeasureCopyBandwidth(s, threads) / 1e9;
    std::printf("%12s %10.2f\n", Mib(s).c_str(), b);
    summary["copy_bandwidth"].push_back({{"bytes", s}, {"gbps", b}});
  }
  const double B = comm::MeasureCopyBandwidth(table_bytes, threads) / 1e9;

  // 2. The table.
  std::printf("\n== Every collective at S = %s, out of place (average of 3 calls after 1 warm-up) ==\n",
              Mib(table_bytes).c_str());
  std::printf("B at this size: %.2f GB/s. bound = AlgBwBound(collective, n, B); frac = algbw / bound.\n", B);
  std::printf("%-15s %3s %-8s %10s %9s %9s %9s %6s %7s\n", "collective", "n", "algo", "time(us)", "algbw",
              "busbw", "bound", "frac", "#wrong");
  for (dc::Collective c :
       {dc::Collective::kAllReduce, dc::Collective::kReduceScatter, dc::Collective::kAllGather,
        dc::Collective::kBroadcast, dc::Collective::kReduce, dc::Collective::kAllToAll}) {
    for (int n : {2, 4, 8}) {
      for (dc::Algorithm a : {dc::Algorithm::kBuiltin, dc::Algorithm::kRing}) {
        if (a == dc::Algorithm::kRing && c == dc::Collective::kReduce) continue;
        auto row = dc::MeasureSize(Options(c, a, n), table_bytes);
        if (!row.ok()) {
          std::printf("%-15s %3d %-8s  error: %s\n", std::string(dc::CollectiveName(c)).c_str(), n,
                      std::string(dc::AlgorithmName(a)).c_str(), row.status().ToString().c_str());
          continue;
        }
        const dc::PerfPoint& p = row->out_of_place;
        const double bound = dc::AlgBwBound(c, n, B);
        std::printf("%-15s %3d %-8s %10.1f %9.2f %9.2f %9.2f %6.2f %7lld\n",
                    std::string(dc::CollectiveName(c)).c_str(), n, std::string(dc::AlgorithmName(a)).c_str(),
                    p.time_us, p.algbw, p.busbw, bound, p.algbw / bound, static_cast<long long>(p.wrong));
        summary["table"].push_back({{"collective", std::string(dc::CollectiveName(c))},
                                    {"n", n},
                                    {"algorithm", std::string(dc::AlgorithmName(a))},
                                    {"bytes", row->bytes},
                                    {"time_us", p.time_us},
                                    {"algbw", p.algbw},
                                    {"busbw", p.busbw},
                                    {"bound", bound},
                                    {"fraction_of_bound", p.algbw / bound},
                                    {"wrong", p.wrong}});
      }
    }
  }
  std::printf(
      "(GB/s throughout. Rings run n-1 dependent steps per phase and copy each byte through every hop;\n"
      " the built-ins read each peer's buffer once -- on shared memory the bound favours them.)\n");

  // 3. busbw vs size, all-reduce at 4 ranks: kRounds rounds, each measuring every algorithm and the bound
  // once at every size (interleaved, so that a burst of load from elsewhere hits them alike); a sample
  // times enough calls to move about kBytesPerSample per rank (at least 3); each algorithm's point is the
  // median of its kRounds samples. The bound's point is the best of its rounds: other work on the machine
  // can only slow a copy down, so the fastest copy is the closest to what the memory system can do.
  const int n = 4;
  constexpr int kRounds = 5;
  constexpr size_t kBytesPerSample = size_t{16} << 20;
  std::printf("\n== all_reduce busbw vs size, n = %d: median of %d rounds, >= %s per sample ==\n", n, kRounds,
              Mib(kBytesPerSample).c_str());
  std::printf("%12s %10s %10s %10s %12s\n", "size", "builtin", "ring", "hd", "bound(busbw)");
  viz::LinePlot plot;
  plot.Title("all-reduce busbw, 4 rank threads: median of 5 rounds of >= 16 MiB per sample")
      .XLabel("S (bytes)")
      .YLabel("busbw (GB/s)")
      .XScale(viz::Scale::kLog2)
      .YScale(viz::Scale::kLog10)
      .XTickFormat(viz::FormatBytes);
  const dc::Algorithm algos[3] = {dc::Algorithm::kBuiltin, dc::Algorithm::kRing,
                                  dc::Algorithm::kHalvingDoubling};
  std::vector<size_t> sizes;
  for (size_t s = 16 << 10; s <= (16u << 20); s *= 4) sizes.push_back(s);
  // samples[size][series][round]; series 0..2 the algorithms, 3 the bound
  std::vector<std::array<std::vector<double>, 4>> samples(sizes.size());
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const size_t s = sizes[i];
      for (int k = 0; k < 3; ++k) {
        dc::PerfOptions o = Options(dc::Collective::kAllReduce, algos[k], n);
        o.check = false;
        o.iters = static_cast<int>(std::max<size_t>(3, kBytesPerSample / s));
        auto row = dc::MeasureSize(o, s);
        samples[i][k].push_back(row.ok() ? row->out_of_place.busbw : 0);
      }
      const double b = comm::MeasureCopyBandwidth(s, threads) / 1e9;
      samples[i][3].push_back(dc::AlgBwBound(dc::Collective::kAllReduce, n, b) *
                              dc::BusBwFactor(dc::Collective::kAllReduce, n));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::vector<double> xs, ys[4];
  for (size_t i = 0; i < sizes.size(); ++i) {
    double v[4];
    for (int k = 0; k < 3; ++k) v[k] = median(samples[i][k]);
    v[3] = *std::max_element(samples[i][3].begin(), samples[i][3].end());
    std::printf("%12s %10.3f %10.3f %10.3f %12.3f\n", Mib(sizes[i]).c_str(), v[0], v[1], v[2], v[3]);
    xs.push_back(static_cast<double>(sizes[i]));
    for (int k = 0; k < 4; ++k) ys[k].push_back(std::max(v[k], 1e-3));
    summary["busbw_vs_size"].push_back({{"bytes", sizes[i]},
                                        {"builtin", v[0]},
                                        {"ring", v[1]},
                                        {"hd", v[2]},
                                        {"bound_busbw", v[3]},
                                        {"rounds", kRounds},
                                        {"bytes_per_sample", kBytesPerSample}});
  }
  plot.AddSeries("built-in (direct)", xs, ys[0]).AddSeries("ring (stage B)", xs, ys[1]);
  plot.AddSeries("halving-doubling (D)", xs, ys[2]).AddSeries("bound (best memcpy)", xs, ys[3], true);
  std::vector<std::string> figures;
  auto busbw_svg = out_dir + "/collectives_busbw.svg";
  viz::WriteResult w = plot.Write(busbw_svg);
  std::printf("%s\n", w.ok() ? ("wrote " + busbw_svg).c_str() : w.error.c_str());
  if (w.ok()) figures.push_back(busbw_svg);

  // 4. Ring steps.
  auto ring_svg = out_dir + "/collectives_ring_steps.svg";
  w = viz::RenderDot(RingStepsDot(4), ring_svg);
  std::printf("%s\n", w.ok() ? ("wrote " + ring_svg).c_str() : w.error.c_str());
  if (w.ok()) figures.push_back(ring_svg);

  // 4b. The same steps as they ran: one ring all-reduce on 4 rank threads, traced.
  TracedRing(n, out_dir, &figures, &summary["ring_trace"]);

  // The alpha-beta model with this machine's numbers: beta from the bound, alpha a typical launch cost.
  dc::AlphaBeta ab{5e-6, 1.0 / (B * 1e9)};
  std::printf("\n== alpha-beta model: alpha = 5 us, beta = 1/B ==\n%4s %16s\n", "n", "crossover S*");
  for (int k : {2, 4, 8, 16, 64}) {
    const double s = dc::RingTreeCrossoverBytes(ab, k);
    std::printf("%4d %16s\n", k, s > 0 ? Mib(static_cast<size_t>(s)).c_str() : "ring never slower");
    summary["crossover"].push_back({{"n", k}, {"bytes", s}});
  }

  // 5. Lifecycle.
  Scenarios(&summary["lifecycle"]);

  summary["figures"] = figures;
  const std::string json_path = out_dir + "/collectives_summary.json";
  std::ofstream f(json_path);
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return 1;
  }
  f << summary.dump(2) << "\n";
  std::printf("\nwrote %s\n", json_path.c_str());
  return 0;
}
