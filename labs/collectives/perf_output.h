// Lab 1 (collectives), given; not graded: what the perf tool (perf.cc) prints and writes -- nccl-tests'
// table for people, and the same numbers as JSON or CSV for programs. Your harness (harness.h) measures the
// rows; this file only formats them, the same way for every backend.
//
// Vocabulary: n = ranks, S = bytes (CollectiveBytes), count = NCCL's count argument.
//
// One record is one measured point: one size, one placement (out of place or in place). Its columns, in
// order, are the CSV header and the JSON keys of each element of "rows" (`PerfColumns()`):
//
//   collective   all_reduce, reduce_scatter, ...      (CollectiveName)
//   algorithm    builtin, ring, hd                    (AlgorithmName)
//   backend      threads, gloo, nccl                  (the communicators' backend)
//   ranks        n
//   bytes        S                                    (the table's "size")
//   count        NCCL's count argument                (the table's "count")
//   dtype        float, double, bfloat16, half, int32, int64, uint8   (nccl-tests' type names)
//   redop        sum, prod, max, min, avg; "none" for collectives that do not reduce
//   root         the root of broadcast and reduce; -1 for the others
//   placement    out_of_place or in_place
//   time_us      average over ranks of the time per call, microseconds
//   algbw_GBps   S / time, 10^9 bytes per second
//   busbw_GBps   algbw x BusBwFactor(collective, n)
//   wrong        #wrong: elements that differ from the expected values, summed over ranks;
//                JSON null / empty CSV field when the run did not check (-c 0)
//   copy_GBps    B, the memcpy bandwidth of every core measured at this size (host backends);
//                null / empty on the nccl backend, whose data lives in device memory
//   bound_GBps   the shared-memory bound on algbw that B implies (AlgBwBound); null / empty where B is
//
// A point the collective does not have (in-place all-to-all and send/recv) is not a record: the table
// shows N/A, JSON and CSV leave the row out.
//
// The JSON document (schema "distlab.perf.v1"):
//   {"schema": "distlab.perf.v1", "config": {collective, algorithm, backend, ranks, dtype, redop, root,
//    min_bytes, max_bytes, step_factor, iters, warmup_iters, check}, "columns": [...PerfColumns()],
//    "rows": [record, ...], "out_of_bounds": {"count": N, "okay": bool}, "avg_busbw_GBps": x}
// CSV: the header line PerfColumns() joined by commas, then one line per record; nothing else.
//
// How this relates to nccl-tests: since 2.17.4 its -J/--output_file FILE writes JSON ("only json supported
// presently"; no CSV), one object per size with nested "out_of_place" / "in_place" objects holding time,
// alg_bw, bus_bw and nwrong, beside its config, the ranks' devices and the footer's out_of_bounds and
// average_bus_bandwidth. This tool keeps those numbers and footer but flattens each placement into its own
// record, so that one schema serves JSON and CSV alike and a row is self-describing (collective, backend
// and ranks are repeated in every record, which lets rows of several runs be concatenated).
#ifndef DISTLAB_LABS_COLLECTIVES_PERF_OUTPUT_H_
#define DISTLAB_LABS_COLLECTIVES_PERF_OUTPUT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "labs/collectives/harness.h"
#include "reference/comm/comm.h"

namespace distlab::collectives {

enum class OutputFormat { kTable, kJson, kCsv };

// "table", "json", "csv"; anything else is INVALID_ARGUMENT naming the accepted names.
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);
// The format a file name asks for by its suffix: ".json" or ".csv" (as nccl-tests' -J infers it);
// anything else is INVALID_ARGUMENT naming the file.
absl::StatusOr<OutputFormat> FormatFromFileName(std::string_view path);

// "threads", "gloo", "nccl" and back.
std::string_view BackendName(comm::Backend backend);
absl::StatusOr<comm::Backend> ParseBackend(std::string_view name);

// nccl-tests' type names: "float", "double", "bfloat16", "half", "int32", "int64", "uint8".
std::string_view NcclTestsTypeName(comm::DataType dtype);
// Accepts those and the runtime's names ("f32", ...).
absl::StatusOr<comm::DataType> ParseNcclTestsType(std::string_view name);

// The column names, in order (see the file comment).
const std::vector<std::string>& PerfColumns();

struct PerfRecord {
  std::string collective, algorithm, backend;
  int ranks = 0;
  size_t bytes = 0, count = 0;
  std::string dtype, redop;
  int root = -1;
  std::string placement;  // "out_of_place" or "in_place"
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  std::optional<int64_t> wrong;                 // nullopt: not checked
  std::optional<double> copy_gbps, bound_gbps;  // nullopt: not measured
};

// What the table prints beside a row on host backends: B at that size and the bound it implies.
struct RowBound {
  double copy_gbps = 0, bound_gbps = 0;
};

// The records of one row: out of place, then in place where the collective has it.
std::vector<PerfRecord> RowRecords(const PerfOptions& options, comm::Backend backend, const PerfRow& row,
                                   std::optional<RowBound> bound);

// nccl-tests' footer: the wrong elements of every checked record, and the average busbw of all records.
struct PerfSummary {
  int64_t wrong_total = 0;
  double avg_busbw_gbps = 0;
};
PerfSummary Summarize(const std::vector<PerfRecord>& records);

// --- Writers -----------------------------------------------------------------------------------------

// The table: the header lines (start with '#'), one line per row, and the footer.
std::string TableHeader(const PerfOptions& options, comm::Backend backend, int copy_threads);
std::string TableLine(const PerfOptions& options, const PerfRow& row, std::optional<RowBound> bound);
std::string TableFooter(const PerfSummary& summary);

// CSV: the header line, then one line per record (each ends with '\n'). Strings are written as they are:
// none of the columns can hold a comma or a quote.
std::string CsvHeader();
std::string CsvLine(const PerfRecord& record);

// The whole JSON document, pretty-printed (2 spaces), ending with '\n'.
std::string JsonDocument(const PerfOptions& options, comm::Backend backend,
                         const std::vector<PerfRecord>& records);

}  // namespace distlab::collectives

#endif  // DISTLAB_LABS_COLLECTIVES_PERF_OUTPUT_H_
