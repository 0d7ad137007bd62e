// The mutant preamble reader (mutants.h): complete preambles parse; every kind of broken one is an error that
// names the file, the line and the problem, and all problems of a directory are reported at once.
#include "tools/grader/mutants.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "gtest/gtest.h"

namespace distlab::grader {
namespace {

class MutantPreamble : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& preamble) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << preamble << "--- solutions/lab/ring.cc\n+++ mutant\n@@ -1 +1 @@\n-a\n+b\n";
    return path;
  }

  std::string Problems(const std::string& path) {
    std::vector<std::string> problems;
    ReadMutant(path, &problems);
    std::string all;
    for (const auto& p : problems) all += p + "\n";
    return all;
  }

  std::filesystem::path dir_;
};

TEST_F(MutantPreamble, ReadsAllThreeKeys) {
  const std::string path = Write("ring__remainder_lost.diff",
                                 "bug: the tail is dropped\n\nkind: logic\nhint: some elements are lost\n");
  std::vector<std::string> problems;
  Mutant m = ReadMutant(path, &problems);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(m.stem, "ring");
  EXPECT_EQ(m.what, "remainder_lost");
  EXPECT_EQ(m.bug, "the tail is dropped");
  EXPECT_EQ(m.kind, "logic");
  EXPECT_EQ(m.hint, "some elements are lost");
}

TEST_F(MutantPreamble, MissingHintIsAnError) {
  const std::string p = Problems(Write("ring__x.diff", "bug: b\nkind: logic\n"));
  EXPECT_NE(p.find("no 'hint:' line"), std::string::npos) << p;
}

TEST_F(MutantPreamble, RepeatedEmptyUnknownAndBadKindAreErrors) {
  const std::string p =
      Problems(Write("ring__x.diff", "bug: b\nbug: c\nkind: style\nhint:\nhnit: typo\njust words\n"));
  EXPECT_NE(p.find(":2: 'bug:' given twice"), std::string::npos) << p;
  EXPECT_NE(p.find(":4: 'hint:' is empty"), std::string::npos) << p;
  EXPECT_NE(p.find(":5: a mutant's preamble holds only"), std::string::npos) << p;
  EXPECT_NE(p.find(":6: a mutant's preamble holds only"), std::string::npos) << p;
  EXPECT_NE(p.find("kind must be logic or convention, not 'style'"), std::string::npos) << p;
}

TEST_F(MutantPreamble, LongHintAndBadNameAreErrors) {
  const std::string p =
      Problems(Write("ring.diff", "bug: b\nkind: logic\nhint: " + std::string(300, 'x') + "\n"));
  EXPECT_NE(p.find("named <solution stem>__<mistake>.diff"), std::string::npos) << p;
  EXPECT_NE(p.find("the hint has 300 characters"), std::string::npos) << p;
}

TEST_F(MutantPreamble, DirectoryReportsEveryProblemAtOnce) {
  Write("a__one.diff", "bug: b\nkind: logic\n");
  Write("b__two.diff", "bug: b\nhint: h\n");
  Write("c__ok.diff", "bug: b\nkind: convention\nhint: h\n");
  try {
    ReadMutants(dir_.string());
    FAIL() << "two incomplete mutants were accepted";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 problem(s)"), std::string::npos) << what;
    EXPECT_NE(what.find("a__one.diff: no 'hint:'"), std::string::npos) << what;
    EXPECT_NE(what.find("b__two.diff: no 'kind:'"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace distlab::grader
