// Lab 1 (collectives), given; not graded: the nccl-tests-style command line (the harness it drives is yours,
// harness.cc).
//
//   bazel run --config=solution //labs/collectives:perf -- -b 8 -e 64M -f 2 -g 4 --algo ring --coll
//   all_reduce
//
// Flags as nccl-tests names them: -b min bytes, -e max bytes, -f step factor, -n iterations, -w warm-up
// iterations, -c check (0/1), -o reduction op, -d data type, -J/--output_file FILE (JSON, or CSV when FILE
// ends in .csv); plus -g ranks, --algo builtin|ring|hd, --coll <collective>, --root, --backend
// threads|gloo|nccl (the ranks are threads of this process on every backend; nccl stages the host buffers
// through device memory) and --output table|json|csv (what stdout gets; json and csv print nothing else).
// Sizes take K, M, G suffixes (powers of 1024). The columns of JSON and CSV: perf_output.h.
//
// The table has nccl-tests' columns, then two of this course: B, the aggregate memcpy bandwidth of all
// cores measured at that size, and the shared-memory bound on algbw it implies (AlgBwBound).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "labs/collectives/bandwidth.h"
#include "labs/collectives/harness.h"
#include "labs/collectives/perf_output.h"
#include "reference/comm/membw.h"
#include "tools/base/cli.h"

namespace {

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
  namespace comm = distlab::comm;
  distlab::cli::App app{"nccl-tests-style benchmark of the course runtime's collectives and the lab's rings"};
  dc::PerfOptions o;
  std::string min_s = "8", max_s = "32M", type_s = "float", op_s = "sum", coll_s = "all_reduce",
              algo_s = "builtin", backend_s = "threads", output_s = "table", output_file, json_path;
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
  app.add_option("--backend", backend_s, "threads, gloo (TCP loopback) or nccl (one GPU per rank)");
  app.add_option("--output", output_s, "what stdout gets: table, json or csv (perf_output.h)");
  app.add_option("-J,--output_file", output_file, "also write the rows to FILE: *.json or *.csv");
  app.add_option("--json", json_path, "also write the rows as JSON to this file (same as -J FILE.json)");
  DISTLAB_CLI_PARSE(app, argc, argv);

  auto fail = [](const std::string& msg) {
    std::cerr << "perf: " << msg << "\n";
    return 2;
  };
  if (!ParseSize(min_s, &o.min_bytes)) return fail("cannot read -b '" + min_s + "' as a size");
  if (!ParseSize(max_s, &o.max_bytes)) return fail("cannot read -e '" + max_s + "' as a size");
  auto type = dc::ParseNcclTestsType(type_s);
  if (!type.ok()) return fail(std::string(type.status().message()));
  o.dtype = *type;
  auto op = comm::ParseRedOp(op_s);
  if (!op.ok()) return fail(std::string(op.status().message()));
  o.op = *op;
  auto coll = dc::ParseCollective(coll_s);
  if (!coll.ok()) return fail(std::string(coll.status().message()));
  o.collective = *coll;
  if (algo_s == "builtin")
    o.algorithm = dc::Algorithm::kBuiltin;
  else if (algo_s == "ring")
    o.algorithm = dc::Algorithm::kRing;
  else if (algo_s == "hd")
    o.algorithm = dc::Algorithm::kHalvingDoubling;
  else
    return fail("unknown --algo '" + algo_s + "'; expected builtin, ring or hd");
  o.check = check != 0;
  auto backend = dc::ParseBackend(backend_s);
  if (!backend.ok()) return fail(std::string(backend.status().message()));
  o.comm.backend = *backend;
  // The harness keeps its buffers in host memory; NCCL moves device memory, so stage them (comm.h).
  o.comm.host_staging = *backend == comm::Backend::kNccl;
  if (absl::Status s = comm::BackendAvailable(*backend, o.ranks); !s.ok()) {
    return fail("--backend " + backend_s + " with " + std::to_string(o.ranks) +
                " ranks: " + std::string(s.message()));
  }
  auto output = dc::ParseOutputFormat(output_s);
  if (!output.ok()) return fail(std::string(output.status().message()));
  std::vector<std::pair<std::string, dc::OutputFormat>> files;
  if (!output_file.empty()) {
    auto f = dc::FormatFromFileName(output_file);
    if (!f.ok()) return fail(std::string(f.status().message()));
    files.emplace_back(output_file, *f);
  }
  if (!json_path.empty()) files.emplace_back(json_path, dc::OutputFormat::kJson);
  // The memcpy bound describes host memory: not measured when the data moves on GPUs.
  const bool host_bound = *backend != comm::Backend::kNccl;

  const bool table = *output == dc::OutputFormat::kTable;
  if (table) std::fputs(dc::TableHeader(o, *backend, comm::HardwareThreads()).c_str(), stdout);
  if (*output == dc::OutputFormat::kCsv) std::fputs(dc::CsvHeader().c_str(), stdout);
  std::fflush(stdout);

  auto sizes = dc::SweepSizes(o.min_bytes, o.max_bytes, o.step_factor);
  if (!sizes.ok()) return fail(std::string(sizes.status().message()));
  std::vector<dc::PerfRecord> records;
  for (size_t bytes : *sizes) {
    auto row = dc::MeasureSize(o, bytes);
    if (!row.ok()) return fail("size " + std::to_string(bytes) + ": " + std::string(row.status().message()));
    std::optional<dc::RowBound> bound;
    if (host_bound) {
      const double copy_gbps =
          comm::MeasureCopyBandwidth(std::max<size_t>(row->bytes, 1), comm::HardwareThreads()) / 1e9;
      bound = dc::RowBound{copy_gbps, dc::AlgBwBound(o.collective, o.ranks, copy_gbps)};
    }
    const std::vector<dc::PerfRecord> row_records = dc::RowRecords(o, *backend, *row, bound);
    if (table) std::fputs(dc::TableLine(o, *row, bound).c_str(), stdout);
    if (*output == dc::OutputFormat::kCsv) {
      for (const dc::PerfRecord& r : row_records) std::fputs(dc::CsvLine(r).c_str(), stdout);
    }
    std::fflush(stdout);
    records.insert(records.end(), row_records.begin(), row_records.end());
  }
  const dc::PerfSummary summary = dc::Summarize(records);
  if (table) std::fputs(dc::TableFooter(summary).c_str(), stdout);
  if (*output == dc::OutputFormat::kJson) std::fputs(dc::JsonDocument(o, *backend, records).c_str(), stdout);
  for (const auto& [path, format] : files) {
    std::ofstream f(path);
    if (!f) return fail("cannot write " + path);
    if (format == dc::OutputFormat::kJson) {
      f << dc::JsonDocument(o, *backend, records);
    } else {
      f << dc::CsvHeader();
      for (const dc::PerfRecord& r : records) f << dc::CsvLine(r);
    }
    if (!f) return fail("cannot write " + path);
  }
  return summary.wrong_total ? 1 : 0;
}
