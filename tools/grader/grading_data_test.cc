// tests/<lab>/grading.json (grading_data.h): the seed it was measured under, and files older than that field.
#include "tools/grader/grading_data.h"

#include <fstream>

#include "gtest/gtest.h"

namespace distlab::grader {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(GradingData, AFileWithoutASeedWasMeasuredUnderSeedOne) {
  const GradingData d = ReadGradingData(TempFile(
      "old.json", R"({"lab": "x", "inputs": "ab", "timings": {"t": {"A.B": 0.5}}, "signatures": {}})"));
  EXPECT_EQ(d.seed, 1u);
  EXPECT_DOUBLE_EQ(d.timings.at("t").at("A.B"), 0.5);
}

TEST(GradingData, TheSeedRoundTrips) {
  GradingData d;
  d.lab = "x";
  d.inputs = "ab";
  d.seed = 9007199254740991;  // 2^53 - 1, the largest seed
  d.timings["t"]["A.B"] = 0.25;
  d.signatures["s__m"] = {"cd", {{"t", {"A.B"}}}};
  const std::string path = ::testing::TempDir() + "/round.json";
  WriteGradingData(path, d);
  const GradingData back = ReadGradingData(path);
  EXPECT_EQ(back.seed, d.seed);
  EXPECT_EQ(back.signatures.at("s__m").tests.at("t").count("A.B"), 1u);
}

}  // namespace
}  // namespace distlab::grader
