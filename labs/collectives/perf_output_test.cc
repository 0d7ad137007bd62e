// Lab 1 (collectives), given; not graded: tests of perf's writers (perf_output.h) on rows made by hand.
// JSON and CSV must carry the same columns, in the same order, for every backend; JSON must parse.
#include "labs/collectives/perf_output.h"

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

PerfRow MakeRow(bool in_place, bool checked) {
  PerfRow row;
  row.bytes = 1024;
  row.count = 256;
  row.out_of_place = {true, 12.5, 0.08192, 0.12288, checked ? 0 : -1};
  if (in_place) row.in_place = {true, 10.0, 0.1024, 0.1536, checked ? 3 : -1};
  return row;
}

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.push_back("");
  return out;
}

TEST(PerfOutput, RecordsOnePerMeasuredPlacement) {
  PerfOptions o;
  o.collective = Collective::kAllReduce;
  o.ranks = 4;
  auto both = RowRecords(o, comm::Backend::kThreads, MakeRow(true, true), RowBound{10, 2.5});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].placement, "out_of_place");
  EXPECT_EQ(both[1].placement, "in_place");
  EXPECT_EQ(both[1].wrong, 3);
  EXPECT_EQ(both[0].redop, "sum");
  EXPECT_EQ(both[0].root, -1);
  EXPECT_EQ(both[0].dtype, "float");
  o.collective = Collective::kAllToAll;  // no in-place variant: one record
  auto one = RowRecords(o, comm::Backend::kGloo, MakeRow(false, false), std::nullopt);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].redop, "none");
  EXPECT_FALSE(one[0].wrong.has_value());
  EXPECT_FALSE(one[0].copy_gbps.has_value());
  EXPECT_EQ(one[0].backend, "gloo");
}

TEST(PerfOutput, JsonAndCsvShareTheColumns) {
  PerfOptions o;
  o.collective = Collective::kBroadcast;
  o.root = 2;
  o.ranks = 3;
  std::vector<PerfRecord> records = RowRecords(o, comm::Backend::kNccl, MakeRow(true, true), std::nullopt);
  const auto unchecked = RowRecords(o, comm::Backend::kNccl, MakeRow(true, false), std::nullopt);
  records.insert(records.end(), unchecked.begin(), unchecked.end());

  const nlohmann::json doc = nlohmann::json::parse(JsonDocument(o, comm::Backend::kNccl, records));
  EXPECT_EQ(doc["schema"], "distlab.perf.v1");
  EXPECT_EQ(doc["config"]["backend"], "nccl");
  EXPECT_EQ(doc["columns"].get<std::vector<std::string>>(), PerfColumns());
  ASSERT_EQ(doc["rows"].size(), records.size());
  for (const auto& row : doc["rows"]) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : row.items()) keys.push_back(k);
    std::vector<std::string> want = PerfColumns();
    std::sort(want.begin(), want.end());
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, want);
    EXPECT_EQ(row["root"], 2);
    EXPECT_TRUE(row["copy_GBps"].is_null());  // not measured on nccl
  }
  EXPECT_EQ(doc["rows"][1]["wrong"], 3);
  EXPECT_TRUE(doc["rows"][2]["wrong"].is_null());  // -c 0
  EXPECT_EQ(doc["out_of_bounds"]["count"], 3);
  EXPECT_EQ(doc["out_of_bounds"]["okay"], false);
  EXPECT_NEAR(doc["avg_busbw_GBps"].get<double>(), (0.12288 + 0.1536) / 2, 1e-12);

  const std::vector<std::string> header = Split(CsvHeader().substr(0, CsvHeader().size() - 1), ',');
  EXPECT_EQ(header, PerfColumns());
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string line = CsvLine(records[i]);
    ASSERT_EQ(line.back(), '\n');
    const std::vector<std::string> cells = Split(line.substr(0, line.size() - 1), ',');
    ASSERT_EQ(cells.size(), header.size()) << line;
    for (size_t c = 0; c < header.size(); ++c) {
      const nlohmann::json& v = doc["rows"][i][header[c]];
      if (v.is_null()) {
        EXPECT_EQ(cells[c], "") << header[c];
      } else if (v.is_string()) {
        EXPECT_EQ(cells[c], v.get<std::string>()) << header[c];
      } else {
        EXPECT_DOUBLE_EQ(std::stod(cells[c]), v.get<double>()) << header[c];  // the same number
      }
    }
  }
}

TEST(PerfOutput, TableKeepsNcclTestsColumns) {
  PerfOptions o;
  o.ranks = 4;
  const std::string header = TableHeader(o, comm::Backend::kThreads, 2);
  for (const char* col : {"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"}) {
    EXPECT_NE(header.find(col), std::string::npos) << col;
  }
  const std::string line = TableLine(o, MakeRow(true, true), RowBound{10, 2.5});
  EXPECT_NE(line.find("1024"), std::string::npos) << line;
  EXPECT_NE(line.find("float"), std::string::npos) << line;
  EXPECT_NE(line.find("2.50"), std::string::npos) << line;
  const std::string footer =
      TableFooter(Summarize(RowRecords(o, comm::Backend::kThreads, MakeRow(true, true), {})));
  EXPECT_NE(footer.find("Out of bounds values : 3 FAILED"), std::string::npos) << footer;
}

TEST(PerfOutput, FormatsAndNamesParse) {
  EXPECT_EQ(*ParseOutputFormat("csv"), OutputFormat::kCsv);
  EXPECT_EQ(ParseOutputFormat("xml").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*FormatFromFileName("out/run.json"), OutputFormat::kJson);
  EXPECT_EQ(*FormatFromFileName("run.csv"), OutputFormat::kCsv);
  EXPECT_EQ(FormatFromFileName("run.txt").status().code(), absl::StatusCode::kInvalidArgument);
  for (comm::Backend b : {comm::Backend::kThreads, comm::Backend::kGloo, comm::Backend::kNccl}) {
    EXPECT_EQ(*ParseBackend(BackendName(b)), b);
  }
  for (comm::DataType t : comm::kAllDataTypes) {
    EXPECT_EQ(*ParseNcclTestsType(NcclTestsTypeName(t)), t);
    EXPECT_EQ(*ParseNcclTestsType(comm::Name(t)), t);
  }
  EXPECT_FALSE(ParseNcclTestsType("float32").ok());
}

}  // namespace
}  // namespace distlab::collectives
