// Lab 1 (collectives), given; not graded: the perf tool's table, JSON and CSV (see perf_output.h).
#include "labs/collectives/perf_output.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "labs/collectives/bandwidth.h"
#include "nlohmann/json.hpp"

namespace distlab::collectives {
namespace {

bool Rooted(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }
bool Reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}

std::string RedopColumn(const PerfOptions& o) {
  return Reduces(o.collective) ? std::string(comm::Name(o.op)) : "none";
}
int RootColumn(const PerfOptions& o) { return Rooted(o.collective) ? o.root : -1; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// The shortest text that reads back as the same double (CSV cells; the JSON writer does the same).
std::string Number(double v) {
  for (int digits = 6; digits < 17; ++digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return Format("%.17g", v);
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "csv") return OutputFormat::kCsv;
  return absl::InvalidArgumentError("unknown output format '" + std::string(name) +
                                    "'; expected table, json or csv");
}

absl::StatusOr<OutputFormat> FormatFromFileName(std::string_view path) {
  if (EndsWith(path, ".json")) return OutputFormat::kJson;
  if (EndsWith(path, ".csv")) return OutputFormat::kCsv;
  return absl::InvalidArgumentError("cannot tell the format of output file '" + std::string(path) +
                                    "': name it *.json or *.csv");
}

std::string_view BackendName(comm::Backend backend) {
  switch (backend) {
    case comm::Backend::kThreads:
      return "threads";
    case comm::Backend::kGloo:
      return "gloo";
    case comm::Backend::kNccl:
      return "nccl";
  }
  return "?";
}

absl::StatusOr<comm::Backend> ParseBackend(std::string_view name) {
  for (comm::Backend b : {comm::Backend::kThreads, comm::Backend::kGloo, comm::Backend::kNccl}) {
    if (name == BackendName(b)) return b;
  }
  return absl::InvalidArgumentError("unknown backend '" + std::string(name) +
                                    "'; expected threads, gloo or nccl");
}

std::string_view NcclTestsTypeName(comm::DataType t) {
  switch (t) {
    case comm::DataType::kF32:
      return "float";
    case comm::DataType::kF64:
      return "double";
    case comm::DataType::kBF16:
      return "bfloat16";
    case comm::DataType::kF16:
      return "half";
    case comm::DataType::kI32:
      return "int32";
    case comm::DataType::kI64:
      return "int64";
    case comm::DataType::kU8:
      return "uint8";
  }
  return "?";
}

absl::StatusOr<comm::DataType> ParseNcclTestsType(std::string_view name) {
  for (comm::DataType t : comm::kAllDataTypes) {
    if (name == NcclTestsTypeName(t) || name == comm::Name(t)) return t;
  }
  return absl::InvalidArgumentError("unknown data type '" + std::string(name) +
                                    "'; expected float, double, bfloat16, half, int32, int64 or uint8");
}

const std::vector<std::string>& PerfColumns() {
  static const std::vector<std::string> columns = {
      "collective", "algorithm", "backend", "ranks",      "bytes",      "count", "dtype",     "redop",
      "root",       "placement", "time_us", "algbw_GBps", "busbw_GBps", "wrong", "copy_GBps", "bound_GBps"};
  return columns;
}

std::vector<PerfRecord> RowRecords(const PerfOptions& o, comm::Backend backend, const PerfRow& row,
                                   std::optional<RowBound> bound) {
  std::vector<PerfRecord> out;
  for (const auto& [placement, p] :
       {std::pair<const char*, const PerfPoint*>{"out_of_place", &row.out_of_place},
        {"in_place", &row.in_place}}) {
    if (!p->measured) continue;
    PerfRecord r;
    r.collective = std::string(CollectiveName(o.collective));
    r.algorithm = std::string(AlgorithmName(o.algorithm));
    r.backend = std::string(BackendName(backend));
    r.ranks = o.ranks;
    r.bytes = row.bytes;
    r.count = row.count;
    r.dtype = std::string(NcclTestsTypeName(o.dtype));
    r.redop = RedopColumn(o);
    r.root = RootColumn(o);
    r.placement = placement;
    r.time_us = p->time_us;
    r.algbw_gbps = p->algbw;
    r.busbw_gbps = p->busbw;
    if (p->wrong >= 0) r.wrong = p->wrong;
    if (bound) r.copy_gbps = bound->copy_gbps, r.bound_gbps = bound->bound_gbps;
    out.push_back(std::move(r));
  }
  return out;
}

PerfSummary Summarize(const std::vector<PerfRecord>& records) {
  PerfSummary s;
  double sum = 0;
  for (const PerfRecord& r : records) {
    sum += r.busbw_gbps;
    if (r.wrong && *r.wrong > 0) s.wrong_total += *r.wrong;
  }
  s.avg_busbw_gbps = records.empty() ? 0 : sum / static_cast<double>(records.size());
  return s;
}

std::string TableHeader(const PerfOptions& o, comm::Backend backend, int copy_threads) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "# distlab perf: %s, algorithm %s, %d ranks (%s backend), %d iterations after %d warm-up\n",
                std::string(CollectiveName(o.collective)).c_str(),
                std::string(AlgorithmName(o.algorithm)).c_str(), o.ranks,
                std::string(BackendName(backend)).c_str(), o.iters, o.warmup_iters);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "# B = memcpy bandwidth of %d threads at each size; bound = shared-memory bound on algbw\n",
                copy_threads);
  out += buf;
  std::snprintf(buf, sizeof buf, "#%48s %-31s %-31s %s\n", "", "          out-of-place",
                "            in-place", "   physical bound");
  out += buf;
  std::snprintf(buf, sizeof buf, "#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s %9s %9s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                "busbw", "#wrong", "B", "bound");
  out += buf;
  std::snprintf(buf, sizeof buf, "#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s %9s %9s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
                "(GB/s)", "(GB/s)");
  out += buf;
  return out;
}

std::string TableLine(const PerfOptions& o, const PerfRow& row, std::optional<RowBound> bound) {
  auto cells = [](const PerfPoint& p) {
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
  char buf[512];
  std::snprintf(buf, sizeof buf, " %11zu %12zu %8s %6s %6d %s %s %9s %9s\n", row.bytes, row.count,
                std::string(NcclTestsTypeName(o.dtype)).c_str(), RedopColumn(o).c_str(), RootColumn(o),
                cells(row.out_of_place).c_str(), cells(row.in_place).c_str(),
                bound ? Format("%.2f", bound->copy_gbps).c_str() : "N/A",
                bound ? Format("%.2f", bound->bound_gbps).c_str() : "N/A");
  return buf;
}

std::string TableFooter(const PerfSummary& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %g \n",
                static_cast<long long>(s.wrong_total), s.wrong_total ? "FAILED" : "OK", s.avg_busbw_gbps);
  return buf;
}

std::string CsvHeader() {
  std::string out;
  for (const std::string& c : PerfColumns()) out += (out.empty() ? "" : ",") + c;
  return out + "\n";
}

std::string CsvLine(const PerfRecord& r) {
  auto opt = [](const auto& v) { return v ? Number(static_cast<double>(*v)) : std::string(); };
  std::string out = r.collective + "," + r.algorithm + "," + r.backend + "," + std::to_string(r.ranks) + "," +
                    std::to_string(r.bytes) + "," + std::to_string(r.count) + "," + r.dtype + "," + r.redop +
                    "," + std::to_string(r.root) + "," + r.placement + "," + Number(r.time_us) + "," +
                    Number(r.algbw_gbps) + "," + Number(r.busbw_gbps) + "," +
                    (r.wrong ? std::to_string(*r.wrong) : std::string()) + "," + opt(r.copy_gbps) + "," +
                    opt(r.bound_gbps);
  return out + "\n";
}

std::string JsonDocument(const PerfOptions& o, comm::Backend backend,
                         const std::vector<PerfRecord>& records) {
  using json = nlohmann::ordered_json;  // keys in the order of PerfColumns()
  json rows = json::array();
  for (const PerfRecord& r : records) {
    json j = json::object();
    j["collective"] = r.collective;
    j["algorithm"] = r.algorithm;
    j["backend"] = r.backend;
    j["ranks"] = r.ranks;
    j["bytes"] = r.bytes;
    j["count"] = r.count;
    j["dtype"] = r.dtype;
    j["redop"] = r.redop;
    j["root"] = r.root;
    j["placement"] = r.placement;
    j["time_us"] = r.time_us;
    j["algbw_GBps"] = r.algbw_gbps;
    j["busbw_GBps"] = r.busbw_gbps;
    j["wrong"] = r.wrong ? json(*r.wrong) : json(nullptr);
    j["copy_GBps"] = r.copy_gbps ? json(*r.copy_gbps) : json(nullptr);
    j["bound_GBps"] = r.bound_gbps ? json(*r.bound_gbps) : json(nullptr);
    rows.push_back(std::move(j));
  }
  const PerfSummary s = Summarize(records);
  json doc = {{"schema", "distlab.perf.v1"},
              {"config",
               {{"collective", std::string(CollectiveName(o.collective))},
                {"algorithm", std::string(AlgorithmName(o.algorithm))},
                {"backend", std::string(BackendName(backend))},
                {"ranks", o.ranks},
                {"dtype", std::string(NcclTestsTypeName(o.dtype))},
                {"redop", RedopColumn(o)},
                {"root", RootColumn(o)},
                {"min_bytes", o.min_bytes},
                {"max_bytes", o.max_bytes},
                {"step_factor", o.step_factor},
                {"iters", o.iters},
                {"warmup_iters", o.warmup_iters},
                {"check", o.check}}},
              {"columns", PerfColumns()},
              {"rows", rows},
              {"out_of_bounds", {{"count", s.wrong_total}, {"okay", s.wrong_total == 0}}},
              {"avg_busbw_GBps", s.avg_busbw_gbps}};
  return doc.dump(2) + "\n";
}

}  // namespace distlab::collectives
