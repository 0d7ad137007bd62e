// The dependency rule (docs/design.md §1): each allowed edge passes, each forbidden one is named.
#include "tools/deps/rule.h"

#include "gtest/gtest.h"

namespace distlab::deps {
namespace {

TEST(DepsFolder, KnowsTheRepositoryFoldersOnly) {
  EXPECT_EQ(Folder("labs/moe/router.cc"), "labs");
  EXPECT_EQ(Folder("//reference/comm:comm"), "reference");
  EXPECT_EQ(Folder("//tools"), "tools");
  EXPECT_EQ(Folder("absl/status/status.h"), std::nullopt);
  EXPECT_EQ(Folder("@local_cuda//:headers"), std::nullopt);
}

TEST(DepsAllowed, TheTable) {
  for (const char* f : {"labs", "solutions", "tests", "demos", "reference", "tools"}) {
    EXPECT_TRUE(Allowed(f, f)) << f;
    EXPECT_TRUE(Allowed(f, "third_party")) << f;
    EXPECT_TRUE(Allowed(f, "tools")) << f;
  }
  EXPECT_TRUE(Allowed("labs", "reference"));
  EXPECT_TRUE(Allowed("solutions", "labs"));
  EXPECT_TRUE(Allowed("tests", "labs"));
  EXPECT_TRUE(Allowed("demos", "labs"));
  EXPECT_TRUE(Allowed("demos", "reference"));
  EXPECT_FALSE(Allowed("reference", "labs"));
  EXPECT_FALSE(Allowed("reference", "demos"));
  EXPECT_FALSE(Allowed("tools", "reference"));
  EXPECT_FALSE(Allowed("tools", "labs"));
  EXPECT_FALSE(Allowed("labs", "solutions"));
  EXPECT_FALSE(Allowed("tests", "solutions"));
  EXPECT_FALSE(Allowed("demos", "solutions"));
  EXPECT_FALSE(Allowed("labs", "tests"));
  EXPECT_FALSE(Allowed("third_party", "tools"));
  EXPECT_EQ(AllowedList("tools"), "third_party, tools");
  EXPECT_EQ(AllowedList("tests"), "labs, reference, tests, third_party, tools");
}

TEST(DepsIncludes, NamesTheLineAndTheEdge) {
  const std::string text =
      "// a test\n"
      "#include \"labs/ring/ring.h\"\n"
      "#include <vector>\n"
      "#include \"absl/status/status.h\"\n"
      "  #  include \"solutions/collectives/ring.cc\"\n"
      "#include \"reference/comm/comm.h\"\n";
  const std::vector<Violation> bad = CheckIncludes("tests/collectives/ring_hidden_test.cc", text);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].where, "tests/collectives/ring_hidden_test.cc:5");
  EXPECT_NE(bad[0].edge.find("tests -> solutions"), std::string::npos) << bad[0].edge;
  EXPECT_NE(bad[0].edge.find("solutions/collectives/ring.cc"), std::string::npos) << bad[0].edge;

  EXPECT_EQ(CheckIncludes("reference/comm/x.cc", "#include \"labs/moe/router.h\"\n").size(), 1u);
  EXPECT_EQ(CheckIncludes("tools/testing/x.cc", "#include \"reference/comm/comm.h\"\n").size(), 1u);
  EXPECT_TRUE(CheckIncludes("demos/moe/demo.cc", "#include \"labs/moe/router.h\"\n").empty());
}

TEST(DepsGraph, AllowsOnlyTheBuildsOwnSwitchesIntoSolutions) {
  EXPECT_EQ(CheckEdge("//labs/moe:impl", "//solutions/moe:impl"), std::nullopt);
  EXPECT_EQ(CheckEdge("//tests/moe:impl_mutant_drop_last", "//solutions/moe:part_router"), std::nullopt);
  EXPECT_EQ(CheckEdge("//tests/moe:mutant_src_drop_last", "//solutions/moe:router.cc"), std::nullopt);
  EXPECT_EQ(CheckEdge("//tests/moe:router_hidden_test", "@com_google//:x"), std::nullopt);

  EXPECT_NE(CheckEdge("//labs/moe:headers", "//solutions/moe:impl"), std::nullopt);
  EXPECT_NE(CheckEdge("//labs/pipeline:impl", "//solutions/moe:impl"), std::nullopt);
  EXPECT_NE(CheckEdge("//tests/moe:router_hidden_test", "//solutions/moe:impl"), std::nullopt);
  EXPECT_NE(CheckEdge("//tests/pipeline:impl_mutant_x", "//solutions/moe:part_router"), std::nullopt);
  EXPECT_NE(CheckEdge("//demos/moe:demo", "//solutions/moe:impl"), std::nullopt);
  const std::optional<Violation> v = CheckEdge("//tools/testing:x", "//reference/comm");
  ASSERT_NE(v, std::nullopt);
  EXPECT_EQ(v->where, "//tools/testing:x");
  EXPECT_NE(v->edge.find("tools -> reference"), std::string::npos) << v->edge;
}

TEST(DepsGraph, ParsesBazelQueryGraphOutput) {
  const std::string text =
      "digraph mygraph {\n"
      "  node [shape=box];\n"
      "  \"//labs/moe:impl\"\n"
      "  \"//labs/moe:impl\" -> \"//solutions/moe:impl\"\n"
      "  \"//labs/moe:impl\" -> \"//labs/moe:student_impl\"\n"
      "}\n";
  const auto edges = ParseGraph(text);
  ASSERT_EQ(edges.size(), 2u);
  EXPECT_EQ(edges[0].first, "//labs/moe:impl");
  EXPECT_EQ(edges[0].second, "//solutions/moe:impl");
  EXPECT_EQ(edges[1].second, "//labs/moe:student_impl");
}

TEST(DepsFirstLine, OneFormatForALabsHeadersAndStarters) {
  EXPECT_EQ(CheckFirstLine("labs/moe/balance.cc", "// Lab 6 (moe), stage B: the loss -- your code.\n"),
            std::nullopt);
  EXPECT_EQ(
      CheckFirstLine("labs/dataloader/loader.h", "// Lab 2 (dataloader), stages B and C: the loader.\n"),
      std::nullopt);
  EXPECT_EQ(
      CheckFirstLine("labs/dataloader/loader.cc", "// Lab 2 (dataloader), stages B, C and E: the loader.\n"),
      std::nullopt);
  EXPECT_EQ(CheckFirstLine("labs/dedup/lsh.h", "// Lab 3 (dedup), stage C (first half): banding.\n"),
            std::nullopt);
  EXPECT_EQ(CheckFirstLine("labs/dedup/synthetic.h", "// Lab 3 (dedup), given; not graded: the corpus.\n"),
            std::nullopt);
  // Tests and files outside labs/ are not starters.
  EXPECT_EQ(CheckFirstLine("labs/moe/balance_test.cc", "// anything\n"), std::nullopt);
  EXPECT_EQ(CheckFirstLine("solutions/moe/balance.cc", "// anything\n"), std::nullopt);

  // The old variants each fail, naming the file and the format.
  for (const char* bad : {"// Lab 6 stage B: the loss.", "// Lab 2, stage D: samples.",
                          "// Lab 2 (given; not graded): the types.", "// The planted-duplicate generator.",
                          "// Lab 6 (moe), stage B the loss."}) {
    const auto v = CheckFirstLine("labs/moe/balance.cc", std::string(bad) + "\nmore\n");
    ASSERT_TRUE(v.has_value()) << bad;
    EXPECT_EQ(v->where, "labs/moe/balance.cc:1");
    EXPECT_NE(v->edge.find("// Lab <N> (moe), stage <S>: ..."), std::string::npos) << v->edge;
  }
  // The lab named must be the folder's.
  EXPECT_TRUE(CheckFirstLine("labs/moe/balance.cc", "// Lab 4 (parallel), stage B: x.\n").has_value());
}

}  // namespace
}  // namespace distlab::deps
