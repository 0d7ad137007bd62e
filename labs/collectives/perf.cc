// The nccl-tests-style command line of Lab 1 (given; the harness it drives is yours, harness.cc).
//
//   bazel run --config=solution //labs/collectives:perf -- -b 8 -e 64M -f 2 -g 4 --algo ring --coll
//   all_reduce
//
// Flags as nccl-tests names them: -b min bytes, -e max bytes, -f step factor, -n iterations, -w warm-up
// iterations, -c check (0/1), -o reduction op, -d data type; plus -g ranks, --algo builtin|ring|hd,
// --coll <collective>, --root, --json FILE. Sizes take K, M, G suffixes (powers of 1024).
//
// The table has nccl-tests' columns, then two of this course: B, the aggregate memcpy bandwidth of all
// cores measured at that size, and the shared-memory bound on algbw it implies (AlgBwBound).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "labs/collectives/bandwidth.h"
#include "labs/collectives/harness.h"
#include "nlohmann/json.hpp"
#include "reference/comm/membw.h"

namespace {

using distlab::collectives::Algorithm;
using distlab::collectives::Collective;
using distlab::comm::DataType;

// nccl-tests' type names.
const char* NcclTestsTypeName(DataType t) {
  switch (t) {
    case DataType::kF32:
      return "float";
    case DataType::kF64:
      return "double";
    case DataType::kBF16:
      return "bfloat16";
    case DataType::kF16:
      return "half";
    case DataType::kI32:
      return "int32";
    case DataType::kI64:
      return "int64";
    case DataType::kU8:
      return "uint8";
  }
  return "?";
}

bool ParseType(const std::string& s, DataType* out) {
  for (DataType t : distlab::comm::kAllDataTypes) {
    if (s == NcclTestsTypeName(t) || s == std::string(distlab::comm::Name(t))) {
      *out = t;
      return true;
    }
  }
  return false;
}

// "64M" -> 67108864.
bool ParseSize(const std::string& s, size_t* out) {
  if (s.empty()) return false;
  size_t pos = 0;
  double v;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    return false;
  }
  std::string suffix = s.substr(pos);
  double mult = 1;
  if (suffix == "K" || suffix == "k")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "m")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    return false;
  if (v < 0) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace dc = distlab::collectives;
  CLI::App app{"nccl-tests-style benchmark of the course runtime's collectives and the lab's rings"};
  dc::PerfOptions o;
  std::string min_s = "8", max_s = "32M", type_s = "float", op_s = "sum", coll_s = "all_reduce",
              algo_s = "builtin", json_path;
  int check = 1;
  app.add_option("-b,--minbytes", min_s, "smallest size in bytes (K/M/G suffixes)");
  app.add_option("-e,--maxbytes", max_s, "largest size in bytes (K/M/G suffixes)");
  app.add_option("-f,--stepfactor", o.step_factor, "multiply the size by this factor each step");
  app.add_option("-n,--iters", o.iters, "timed iterations per size");
  app.add_option("-w,--warmup_iters", o.warmup_iters, "untimed warm-up iterations per size");
  app.add_option("-c,--check", check, "check the results (#wrong): 0 or 1");
  app.add_option("-o,--op", op_s, "reduction op: sum, prod, max, min, avg");
  app.add_option("-d,--datatype", type_s, "data type: float, double, bfloat16, half, int32, int64, uint8");
  app.add_option("-g,--ranks", o.ranks, "number of ranks (threads of this process)");
  app.add_option("--algo", algo_s, "builtin, ring (stage B) or hd (stage D, all_reduce)");
  app.add_option("--coll", coll_s,
                 "all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, sendrecv");
  app.add_option("--root", o.root, "root rank of broadcast and reduce");
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const std::string& msg) {
    std::cerr << "perf: " << msg << "\n";
    return 2;
  };
  if (!ParseSize(min_s, &o.min_bytes)) return fail("cannot read -b '" + min_s + "' as a size");
  if (!ParseSize(max_s, &o.max_bytes)) return fail("cannot read -e '" + max_s + "' as a size");
  if (!ParseType(type_s, &o.dtype)) return fail("unknown -d '" + type_s + "'");
  auto op = distlab::comm::ParseRedOp(op_s);
  if (!op.ok()) return fail(std::string(op.status().message()));
  o.op = *op;
  auto coll = dc::ParseCollective(coll_s);
  if (!coll.ok()) return fail(std::string(coll.status().message()));
  o.collective = *coll;
  if (algo_s == "builtin")
    o.algorithm = Algorithm::kBuiltin;
  else if (algo_s == "ring")
    o.algorithm = Algorithm::kRing;
  else if (algo_s == "hd")
    o.algorithm = Algorithm::kHalvingDoubling;
  else
    return fail("unknown --algo '" + algo_s + "'; expected builtin, ring or hd");
  o.check = check != 0;
  const bool rooted = o.collective == Collective::kBroadcast || o.collective == Collective::kReduce;
  const bool reduces = o.collective == Collective::kAllReduce || o.collective == Collective::kReduce ||
                       o.collective == Collective::kReduceScatter;

  std::printf("# distlab perf: %s, algorithm %s, %d ranks (threads), %d iterations after %d warm-up\n",
              std::string(dc::CollectiveName(o.collective)).c_str(), algo_s.c_str(), o.ranks, o.iters,
              o.warmup_iters);
  std::printf("# B = memcpy bandwidth of %d threads at each size; bound = shared-memory bound on algbw\n",
              distlab::comm::HardwareThreads());
  std::printf("#%48s %-31s %-31s %s\n", "", "          out-of-place", "            in-place",
              "   physical bound");
  std::printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s %9s %9s\n", "size", "count", "type",
              "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "B",
              "bound");
  std::printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s %9s %9s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(GB/s)", "(GB/s)");

  auto sizes = dc::SweepSizes(o.min_bytes, o.max_bytes, o.step_factor);
  if (!sizes.ok()) return fail(std::string(sizes.status().message()));
  nlohmann::json rows = nlohmann::json::array();
  double busbw_sum = 0;
  int busbw_points = 0;
  int64_t wrong_total = 0;
  for (size_t bytes : *sizes) {
    auto row = dc::MeasureSize(o, bytes);
    if (!row.ok()) return fail("size " + std::to_string(bytes) + ": " + std::string(row.status().message()));
    const double copy_gbps = distlab::comm::MeasureCopyBandwidth(std::max<size_t>(row->bytes, 1),
                                                                 distlab::comm::HardwareThreads()) /
                             1e9;
    const double bound = dc::AlgBwBound(o.collective, o.ranks, copy_gbps);
    auto cells = [](const dc::PerfPoint& p) {
      char buf[64];
      if (!p.measured) {
        std::snprintf(buf, sizeof buf, "%8s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
      } else if (p.wrong < 0) {
        std::snprintf(buf, sizeof buf, "%8.2f %7.2f %7.2f %6s", p.time_us, p.algbw, p.busbw, "N/A");
      } else {
        std::snprintf(buf, sizeof buf, "%8.2f %7.2f %7.2f %6lld", p.time_us, p.algbw, p.busbw,
                      static_cast<long long>(p.wrong));
      }
      return std::string(buf);
    };
    std::printf(" %11zu %12zu %8s %6s %6d %s %s %9.2f %9.2f\n", row->bytes, row->count,
                NcclTestsTypeName(o.dtype), reduces ? std::string(distlab::comm::Name(o.op)).c_str() : "none",
                rooted ? o.root : -1, cells(row->out_of_place).c_str(), cells(row->in_place).c_str(),
                copy_gbps, bound);
    nlohmann::json jr = {{"size", row->bytes},
                         {"count", row->count},
                         {"type", NcclTestsTypeName(o.dtype)},
                         {"redop", reduces ? std::string(distlab::comm::Name(o.op)) : "none"},
                         {"root", rooted ? o.root : -1},
                         {"copy_gbps", copy_gbps},
                         {"algbw_bound", bound}};
    for (const auto& [name, p] :
         {std::pair<const char*, const dc::PerfPoint*>{"out_of_place", &row->out_of_place},
          {"in_place", &row->in_place}}) {
      if (!p->measured) continue;
      jr[name] = {{"time_us", p->time_us}, {"algbw", p->algbw}, {"busbw", p->busbw}, {"wrong", p->wrong}};
      busbw_sum += p->busbw;
      ++busbw_points;
      if (p->wrong > 0) wrong_total += p->wrong;
    }
    rows.push_back(jr);
  }
  const double avg_busbw = busbw_points ? busbw_sum / busbw_points : 0;
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
              wrong_total ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n", avg_busbw);
  if (!json_path.empty()) {
    nlohmann::json j = {{"collective", std::string(dc::CollectiveName(o.collective))},
                        {"algorithm", algo_s},
                        {"ranks", o.ranks},
                        {"iters", o.iters},
                        {"warmup_iters", o.warmup_iters},
                        {"rows", rows},
                        {"wrong_total", wrong_total},
                        {"avg_busbw", avg_busbw}};
    std::ofstream f(json_path);
    if (!f) return fail("cannot write --json " + json_path);
    f << j.dump(2) << "\n";
  }
  return wrong_total ? 1 : 0;
}
