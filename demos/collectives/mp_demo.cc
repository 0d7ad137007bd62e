// Lab 1 as processes: the same program runs its ranks as threads (threads backend) or, started by the
// launcher, as processes (gloo backend), and prints the same results.
//
//   bazel build --config=solution //demos/collectives:mp_demo
//   bazel-bin/demos/collectives/mp_demo -g 4                 # 4 ranks as threads
//   ./labctl launch -n 4 -- bazel-bin/demos/collectives/mp_demo   # 4 ranks as processes (gloo)
//
// 1. Results: the built-in collectives and the lab's rings (labs/collectives/ring.h) on the same integer
//    inputs, each summarised by a checksum of every rank's output (gathered to rank 0). Integer sums are
//    exact, so the lines are identical whichever backend runs them -- the point of the exercise.
// 2. Bandwidth: built-in all-reduce and the lab's ring all-reduce (f32, sum) at 1, 8 and 64 MiB: time per
//    call (the slowest rank's), algbw = S/t and busbw = algbw * 2(n-1)/n (bandwidth.h). On threads the
//    data moves by memcpy through shared memory; on processes it crosses the kernel's TCP loopback, once
//    per hop (notes/01-collectives.md, "Threads vs processes").
// --json FILE writes the numbers. Rank 0 prints; the launcher prefixes its lines with "[rank 0]".
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "labs/collectives/bandwidth.h"
#include "labs/collectives/ring.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "reference/comm/comm.h"
#include "tools/base/cli.h"

namespace dc = distlab::collectives;
namespace comm = distlab::comm;
using comm::DataType;
using comm::RedOp;

namespace {

// FNV-1a over bytes: a checksum that any change of any byte changes.
uint64_t Fnv(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::vector<int32_t> Inputs(int rank, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = static_cast<int32_t>((i * 2654435761u + rank * 40503u) % 2001) - 1000;
  return v;
}

struct Options {
  std::vector<size_t> sizes = {size_t{1} << 20, size_t{8} << 20, size_t{64} << 20};
  int iters = 5;
};

struct Row {
  std::string algo;
  size_t bytes;
  double us, algbw, busbw;
};

// Everything one rank does; rank 0 fills `lines` and `rows`.
absl::Status Body(int rank, comm::Comm& c, comm::Stream& s, const Options& o, std::vector<std::string>* lines,
                  std::vector<Row>* rows) {
  const int n = c.size();
  // --- 1. Results ---
  const size_t count = 100003;  // not a multiple of n: the rings' uneven chunks are exercised
  const std::vector<int32_t> in = Inputs(rank, count);
  struct Result {
    std::string name;
    std::vector<int32_t> out;
  };
  std::vector<Result> results;
  auto keep = [&](const std::string& name, std::vector<int32_t> out) {
    results.push_back({name, std::move(out)});
  };
  {
    std::vector<int32_t> a(count), b(count);
    RETURN_IF_ERROR(c.AllReduce(in.data(), a.data(), count, DataType::kI32, RedOp::kSum, s));
    RETURN_IF_ERROR(dc::RingAllReduce(in.data(), b.data(), count, DataType::kI32, RedOp::kSum, c, s));
    RETURN_IF_ERROR(s.Synchronize());
    keep("all_reduce i32 sum     built-in", a);
    keep("all_reduce i32 sum     ring    ", b);
  }
  {
    std::vector<int32_t> a(count), b(count);
    RETURN_IF_ERROR(c.AllReduce(in.data(), a.data(), count, DataType::kI32, RedOp::kMax, s));
    RETURN_IF_ERROR(dc::RingAllReduce(in.data(), b.data(), count, DataType::kI32, RedOp::kMax, c, s));
    RETURN_IF_ERROR(s.Synchronize());
    keep("all_reduce i32 max     built-in", a);
    keep("all_reduce i32 max     ring    ", b);
  }
  {
    const size_t per = count / n;
    std::vector<int32_t> a(per), b(per);
    RETURN_IF_ERROR(c.ReduceScatter(in.data(), a.data(), per, DataType::kI32, RedOp::kSum, s));
    RETURN_IF_ERROR(dc::RingReduceScatter(in.data(), b.data(), per, DataType::kI32, RedOp::kSum, c, s));
    RETURN_IF_ERROR(s.Synchronize());
    keep("reduce_scatter i32 sum built-in", a);
    keep("reduce_scatter i32 sum ring    ", b);
    std::vector<int32_t> g(per * n), h(per * n);
    RETURN_IF_ERROR(c.AllGather(in.data(), g.data(), per, DataType::kI32, s));
    RETURN_IF_ERROR(dc::RingAllGather(in.data(), h.data(), per, DataType::kI32, c, s));
    RETURN_IF_ERROR(s.Synchronize());
    keep("all_gather i32         built-in", g);
    keep("all_gather i32         ring    ", h);
    std::vector<int32_t> x(per * n), y(per * n);
    RETURN_IF_ERROR(c.AllToAll(in.data(), x.data(), per, DataType::kI32, s));
    RETURN_IF_ERROR(dc::RingAllToAll(in.data(), y.data(), per, DataType::kI32, c, s));
    RETURN_IF_ERROR(s.Synchronize());
    keep("all_to_all i32         built-in", x);
    keep("all_to_all i32         ring    ", y);
  }
  {
    std::vector<int32_t> a(count), b(count);
    RETURN_IF_ERROR(c.Broadcast(in.data(), a.data(), count, DataType::kI32, n - 1, s));
    RETURN_IF_ERROR(dc::RingBroadcast(in.data(), b.data(), count, DataType::kI32, n - 1, c, s));
    RETURN_IF_ERROR(s.Synchronize());
    keep("broadcast i32 root n-1 built-in", a);
    keep("broadcast i32 root n-1 ring    ", b);
  }
  // Every rank's checksum of every result, gathered to all (so rank 0 can print them all).
  std::vector<uint64_t> mine, all(results.size() * n);
  for (const Result& r : results) mine.push_back(Fnv(r.out.data(), r.out.size() * sizeof(int32_t)));
  RETURN_IF_ERROR(c.AllGather(mine.data(), all.data(), mine.size(), DataType::kI64, s));
  RETURN_IF_ERROR(s.Synchronize());
  if (rank == 0) {
    lines->push_back("results (checksum of each rank's output; identical on every backend):");
    for (size_t k = 0; k < results.size(); ++k) {
      uint64_t h = 1469598103934665603ull;
      for (int p = 0; p < n; ++p) h = Fnv(&all[p * results.size() + k], sizeof(uint64_t), h);
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %s  first=%-6d checksum=%016llx", results[k].name.c_str(),
                    results[k].out.empty() ? 0 : results[k].out[0], static_cast<unsigned long long>(h));
      lines->push_back(buf);
    }
  }
  // --- 2. Bandwidth ---
  for (size_t bytes : o.sizes) {
    const size_t elems = bytes / sizeof(float);
    std::vector<float> src(elems, 1.0f + rank), dst(elems);
    for (int algo = 0; algo < 2; ++algo) {
      auto run = [&]() -> absl::Status {
        if (algo == 0) return c.AllReduce(src.data(), dst.data(), elems, DataType::kF32, RedOp::kSum, s);
        return dc::RingAllReduce(src.data(), dst.data(), elems, DataType::kF32, RedOp::kSum, c, s);
      };
      RETURN_IF_ERROR(run());  // warm-up
      RETURN_IF_ERROR(s.Synchronize());
      int32_t token = 0;
      RETURN_IF_ERROR(c.AllReduce(&token, &token, 1, DataType::kI32, RedOp::kSum, s));  // line the ranks up
      RETURN_IF_ERROR(s.Synchronize());
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) RETURN_IF_ERROR(run());
      RETURN_IF_ERROR(s.Synchronize());
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      RETURN_IF_ERROR(c.AllReduce(&sec, &sec, 1, DataType::kF64, RedOp::kMax, s));  // the slowest rank's time
      RETURN_IF_ERROR(s.Synchronize());
      if (rank == 0) {
        rows->push_back({algo == 0 ? "built-in" : "ring", bytes, sec * 1e6,
                         dc::AlgBw(static_cast<double>(bytes), sec),
                         dc::BusBw(dc::Collective::kAllReduce, n, static_cast<double>(bytes), sec)});
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"Lab 1 on threads or processes: the same results, and all-reduce bandwidth"};
  int ranks = 4;
  std::string json_path;
  Options o;
  app.add_option("-g,--ranks", ranks, "ranks when run as threads (without the launcher)")
      ->check(distlab::cli::Range(1, 64));
  app.add_option("-n,--iters", o.iters, "timed calls per size")->check(distlab::cli::Range(1, 1000));
  app.add_option("--json", json_path, "write the numbers as JSON");
  DISTLAB_CLI_PARSE(app, argc, argv);

  std::vector<std::string> lines;
  std::vector<Row> rows;
  std::string backend;
  int n = ranks;
  absl::Status status;
  comm::CommOptions options;
  options.timeout = std::chrono::seconds(120);
  if (comm::LaunchedByLauncher()) {
    auto c = comm::CommInitFromEnv(options);
    if (!c.ok()) {
      std::fprintf(stderr, "mp_demo: %s\n", std::string(c.status().ToString()).c_str());
      return 1;
    }
    n = (*c)->size();
    backend = (*c)->backend() == comm::Backend::kGloo ? "gloo" : "threads";
    backend += " (" + std::to_string(n) + " processes)";
    comm::Stream s;
    status = Body((*c)->rank(), **c, s, o, &lines, &rows);
    if (status.ok()) status = s.Synchronize();
    absl::Status d = (*c)->Destroy();
    if (status.ok()) status = d;
    if ((*c)->rank() != 0 && status.ok()) return 0;
  } else {
    backend = "threads (" + std::to_string(n) + " ranks in one process)";
    status = comm::FirstError(comm::RunRanks(
        n, [&](int r, comm::Comm& c, comm::Stream& s) { return Body(r, c, s, o, &lines, &rows); }, options));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "mp_demo: %s\n", std::string(status.ToString()).c_str());
    return 1;
  }
  std::printf("backend: %s\n", backend.c_str());
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  std::printf("all-reduce f32 sum, %d ranks (time: the slowest rank's mean of %d calls)\n", n, o.iters);
  std::printf("  %-9s %10s %12s %12s %12s\n", "algo", "size", "time (us)", "algbw GB/s", "busbw GB/s");
  for (const Row& r : rows) {
    std::printf("  %-9s %7zu MiB %12.0f %12.3f %12.3f\n", r.algo.c_str(), r.bytes >> 20, r.us, r.algbw,
                r.busbw);
  }
  if (!json_path.empty()) {
    nlohmann::json j;
    j["backend"] = backend;
    j["ranks"] = n;
    for (const Row& r : rows) {
      j["rows"].push_back({{"algo", r.algo},
                           {"bytes", r.bytes},
                           {"us", r.us},
                           {"algbw_GBps", r.algbw},
                           {"busbw_GBps", r.busbw}});
    }
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
