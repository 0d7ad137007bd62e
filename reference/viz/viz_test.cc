// Tests of the figure writers: every SVG is a well-formed document (tags balance, one <svg> root) that
// carries the labels it was given, and bad input is an error naming the problem.
#include "reference/viz/viz.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distlab::viz {
namespace {

// Checks that start and end tags balance (self-closing tags, <?xml ?> and comments aside) and that the
// document's root element is <svg>. Returns "" or what is wrong.
std::string CheckWellFormed(const std::string& doc) {
  std::vector<std::string> open;
  bool saw_root = false;
  size_t i = 0;
  while ((i = doc.find('<', i)) != std::string::npos) {
    size_t end = doc.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = doc.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
      open.pop_back();
      continue;
    }
    std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
    if (open.empty()) {
      if (saw_root) return "a second root element <" + name + ">";
      if (name != "svg") return "root element is <" + name + ">, not <svg>";
      saw_root = true;
    }
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (!saw_root) return "no <svg> element";
  // No raw '&' outside entities.
  for (size_t a = doc.find('&'); a != std::string::npos; a = doc.find('&', a + 1)) {
    size_t semi = doc.find(';', a);
    if (semi == std::string::npos || semi - a > 6) return "bare '&' at " + std::to_string(a);
  }
  return "";
}

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(CheckWellFormed, CatchesBrokenDocuments) {
  EXPECT_EQ(CheckWellFormed("<svg><g></g></svg>"), "");
  EXPECT_NE(CheckWellFormed("<svg><g></svg>"), "");
  EXPECT_NE(CheckWellFormed("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(CheckWellFormed("<g></g>"), "");
}

TEST(LinePlot, LogAxesLegendAndLabels) {
  LinePlot p;
  p.Title("busbw vs size").XLabel("size (bytes)").YLabel("GB/s").XScale(Scale::kLog2).YScale(Scale::kLog10);
  p.XTickFormat(FormatBytes);
  p.AddSeries("ring", {1024, 4096, 1 << 20}, {0.5, 2, 8});
  p.AddSeries("bound <B/n>", {1024, 1 << 20}, {10, 10}, /*dashed=*/true);
  std::string svg;
  ASSERT_TRUE(p.Render(&svg).ok());
  EXPECT_EQ(CheckWellFormed(svg), "");
  for (const char* s : {"busbw vs size", "size (bytes)", "GB/s", "ring", "bound &lt;B/n&gt;", "1K", "1M",
                        "stroke-dasharray"}) {
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  }
  std::string path = TmpPath("line.svg");
  ASSERT_TRUE(p.Write(path).ok());
  EXPECT_EQ(ReadFile(path), svg);
}

TEST(LinePlot, RejectsBadData) {
  LinePlot p;
  p.Title("t").YScale(Scale::kLog2).AddSeries("zero", {1, 2}, {1, 0});
  std::string svg;
  WriteResult r = p.Render(&svg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("log y axis"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("zero"), std::string::npos) << r.error;

  LinePlot q;
  q.AddSeries("short", {1, 2, 3}, {1, 2});
  r = q.Render(&svg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("3 x values but 2 y values"), std::string::npos) << r.error;
  EXPECT_FALSE(LinePlot().Render(&svg).ok());
  EXPECT_FALSE(LinePlot().AddSeries("a", {1}, {1}).Write("/nonexistent-dir/x.svg").ok());
}

TEST(BarChart, GroupedAndStacked) {
  for (bool stacked : {false, true}) {
    BarChart b;
    b.Title(stacked ? "stacked memory" : "grouped memory").YLabel("GiB").Stacked(stacked);
    b.Categories({"DDP", "ZeRO-1", "ZeRO-3"});
    b.AddSeries("params", {2, 2, 0.5}).AddSeries("optimizer", {8, 2, 2});
    std::string svg;
    ASSERT_TRUE(b.Render(&svg).ok());
    EXPECT_EQ(CheckWellFormed(svg), "");
    for (const char* s : {"memory", "GiB", "DDP", "ZeRO-1", "ZeRO-3", "params", "optimizer"}) {
      EXPECT_NE(svg.find(s), std::string::npos) << s;
    }
    if (stacked) {
      EXPECT_NE(svg.find(">10<"), std::string::npos) << "stack total";
    }
  }
  BarChart bad;
  bad.Categories({"a", "b"}).AddSeries("s", {1});
  std::string svg;
  WriteResult r = bad.Render(&svg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("1 values for 2 categories"), std::string::npos) << r.error;
}

TEST(HeatMap, LabelsScaleAndAnnotations) {
  HeatMap h;
  h.Title("tokens per expert").XLabel("expert").YLabel("rank");
  h.Values({{1, 2, 3}, {4, 5, 6}}).RowLabels({"rank 0", "rank 1"}).ColumnLabels({"e0", "e1", "e2"});
  h.Annotate(true);
  std::string svg;
  ASSERT_TRUE(h.Render(&svg).ok());
  EXPECT_EQ(CheckWellFormed(svg), "");
  for (const char* s : {"tokens per expert", "expert", "rank 1", "e2", ">6<", ">1<"}) {
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  }
  HeatMap bad;
  bad.Values({{1, 2}, {3}});
  WriteResult r = bad.Render(&svg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("row 1 has 1 values"), std::string::npos) << r.error;
}

TEST(Timeline, BoxesRowsAndLegend) {
  Timeline t;
  t.Title("1F1B, p=2, m=2").XLabel("time (units)").Rows({"stage 0", "stage 1"});
  t.AddBox({0, 0, 1, "F0", "", 0}).AddBox({1, 1, 2, "F0", "", 0}).AddBox({1, 2, 4, "B0", "", 1});
  t.AddBox({0, 4, 6, "B0", "#ff0000", 1});
  t.Legend(0, "forward").Legend(1, "backward");
  std::string svg;
  ASSERT_TRUE(t.Render(&svg).ok());
  EXPECT_EQ(CheckWellFormed(svg), "");
  for (const char* s : {"1F1B, p=2, m=2", "stage 1", "F0", "B0", "forward", "backward", "#ff0000"}) {
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  }
  Timeline bad;
  bad.Rows({"only"}).AddBox({3, 0, 1, "lost", "", 0});
  WriteResult r = bad.Render(&svg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("row 3 of 1"), std::string::npos) << r.error;
}

// Range fixes the colour scale: the same value gets the same shade in two maps, and the scale's ends are the
// range's, not the values'.
TEST(HeatMap, RangeFixesTheColourScale) {
  auto render = [](std::vector<std::vector<double>> v, bool range) {
    HeatMap h;
    h.Title("t").Values(std::move(v));
    if (range) h.Range(0, 1);
    std::string svg;
    EXPECT_TRUE(h.Render(&svg).ok());
    return svg;
  };
  auto fill_of_first_cell = [](const std::string& svg) {
    const size_t at = svg.find("fill=\"", svg.find("<rect", svg.find("<rect") + 1));
    return svg.substr(at, 14);
  };
  // Without a range the first cell (0.5) is the darkest of [[.5, .25]] and the lightest of [[.5, .75]].
  EXPECT_NE(fill_of_first_cell(render({{0.5, 0.25}}, false)),
            fill_of_first_cell(render({{0.5, 0.75}}, false)));
  EXPECT_EQ(fill_of_first_cell(render({{0.5, 0.25}}, true)), fill_of_first_cell(render({{0.5, 0.75}}, true)));
  EXPECT_NE(render({{0.5, 0.25}}, true).find(">1<"), std::string::npos);
  HeatMap bad;
  bad.Values({{1}}).Range(1, 1);
  std::string svg;
  EXPECT_FALSE(bad.Render(&svg).ok());
}

// A label is drawn at 10 px when it fits its box, smaller (down to 7 px) when it nearly fits, and left out
// when it would run into its neighbours. Width 860 leaves 750 px for 0..100: 1 unit = 7.5 px.
TEST(Timeline, LabelsThatDoNotFitShrinkOrAreLeftOut) {
  Timeline t;
  t.Rows({"r"}).AddBox({0, 0, 10, "wide", "", 0}).AddBox({0, 10, 14, "BW7.1", "", 1});
  t.AddBox({0, 14, 15, "BW7.1", "", 1}).AddBox({0, 15, 100, "", "", 2});
  std::string svg;
  ASSERT_TRUE(t.Render(&svg).ok());
  EXPECT_NE(svg.find("font-size=\"10\">wide<"), std::string::npos) << svg;
  // 30 px box, "BW7.1" needs about 33 px at 10 px: drawn at 8 px.
  EXPECT_NE(svg.find("font-size=\"8\">BW7.1<"), std::string::npos) << svg;
  // 7.5 px box: left out, so "BW7.1" appears once.
  EXPECT_EQ(svg.find(">BW7.1<"), svg.rfind(">BW7.1<"));
}

TEST(RenderDot, RendersOrExplains) {
  const std::string dot = "digraph ring { r0 -> r1 [label=\"chunk 0\"]; r1 -> r0; }";
  std::string svg_path = TmpPath("ring.svg");
  WriteResult r = RenderDot(dot, svg_path);
  EXPECT_EQ(ReadFile(TmpPath("ring.dot")), dot);
  if (DotAvailable()) {
    ASSERT_TRUE(r.ok()) << r.error;
    std::string svg = ReadFile(svg_path);
    EXPECT_EQ(CheckWellFormed(svg.substr(svg.find("<svg"))), "");
    EXPECT_NE(svg.find("chunk 0"), std::string::npos);
  } else {
    ASSERT_FALSE(r.ok());
  }
  // Without dot on PATH the error says what to install.
  std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", "", 1);
  EXPECT_FALSE(DotAvailable());
  r = RenderDot(dot, TmpPath("ring2.svg"));
  setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("graphviz"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace distlab::viz
