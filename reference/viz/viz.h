// Figures for the course: standalone SVG writers and a Graphviz helper, standard library only.
//
// Every writer builds a complete SVG document (an <svg> root with its own size, fonts and colours, no
// external style sheet), so a figure opens in a browser or renders on GitHub as it is. The figures are
// deliberately plain: one font, a fixed palette, light grid lines. What this leaves out: interactivity,
// animation, and any layout engine beyond what each chart needs.
//
//   LinePlot  named series of (x, y) points; linear, log2 or log10 axes; legend        (busbw vs size)
//   BarChart  groups of bars, side by side or stacked, with value labels               (memory breakdowns)
//   HeatMap   a matrix with row and column labels and a colour scale                   (routing tables)
//   Timeline  rows of coloured, labelled boxes from a start to an end time             (pipeline schedules)
//   RenderDot a Graphviz graph written as .dot and rendered with `dot -Tsvg`            (rings and trees)
//
// Writers return a WriteResult: ok(), or a message that names the figure and the problem.
#ifndef DISTLAB_REFERENCE_VIZ_VIZ_H_
#define DISTLAB_REFERENCE_VIZ_VIZ_H_

#include <functional>
#include <string>
#include <vector>

namespace distlab::viz {

struct WriteResult {
  std::string error;  // empty when the figure was written
  bool ok() const { return error.empty(); }
};

enum class Scale { kLinear, kLog2, kLog10 };

// Formats an axis tick value. The default prints the number compactly ("0.5", "1024", "1e+06").
using TickFormat = std::function<std::string(double)>;

// 1024 -> "1K", 3 * 2^20 -> "3M": byte sizes on a log2 axis.
std::string FormatBytes(double bytes);

// Escapes &, <, >, " and ' for SVG text and attributes.
std::string XmlEscape(const std::string& text);

// The palette every chart draws series from, in order (10 colours, then it repeats).
const std::string& PaletteColor(size_t i);

// Writes `content` to `path` (creating nothing but the file).
WriteResult WriteTextFile(const std::string& path, const std::string& content);

// ---------------------------------------------------------------------------------------------------------
class LinePlot {
 public:
  LinePlot& Title(std::string title);
  LinePlot& XLabel(std::string label);
  LinePlot& YLabel(std::string label);
  LinePlot& XScale(Scale scale);
  LinePlot& YScale(Scale scale);
  LinePlot& XTickFormat(TickFormat format);
  LinePlot& YTickFormat(TickFormat format);
  LinePlot& Size(int width, int height);
  // A series; x and y must have the same length. dashed draws a reference line (a bound, a model).
  LinePlot& AddSeries(std::string name, std::vector<double> x, std::vector<double> y, bool dashed = false);

  // The SVG document, or an error (mismatched lengths, a value <= 0 on a log axis, no data).
  WriteResult Render(std::string* svg) const;
  WriteResult Write(const std::string& path) const;

 private:
  struct Series {
    std::string name;
    std::vector<double> x, y;
    bool dashed;
  };
  std::string title_, xlabel_, ylabel_;
  Scale xscale_ = Scale::kLinear, yscale_ = Scale::kLinear;
  TickFormat xformat_, yformat_;
  int width_ = 720, height_ = 440;
  std::vector<Series> series_;
};

// ---------------------------------------------------------------------------------------------------------
class BarChart {
 public:
  BarChart& Title(std::string title);
  BarChart& YLabel(std::string label);
  BarChart& Stacked(bool stacked);
  BarChart& Size(int width, int height);
  // Category names along x (one group of bars each).
  BarChart& Categories(std::vector<std::string> categories);
  // One value per category; in a stacked chart the series stack bottom-up in the order added.
  BarChart& AddSeries(std::string name, std::vector<double> values);
  // Print each bar's value on it (or each stack's total above it).
  BarChart& ShowValues(bool show);

  WriteResult Render(std::string* svg) const;
  WriteResult Write(const std::string& path) const;

 private:
  struct Series {
    std::string name;
    std::vector<double> values;
  };
  std::string title_, ylabel_;
  bool stacked_ = false, show_values_ = true;
  int width_ = 720, height_ = 440;
  std::vector<std::string> categories_;
  std::vector<Series> series_;
};

// ---------------------------------------------------------------------------------------------------------
class HeatMap {
 public:
  HeatMap& Title(std::string title);
  HeatMap& XLabel(std::string label);
  HeatMap& YLabel(std::string label);
  // values[r][c]; every row the same length; labels (if given) match the dimensions.
  HeatMap& Values(std::vector<std::vector<double>> values);
  HeatMap& RowLabels(std::vector<std::string> labels);
  HeatMap& ColumnLabels(std::vector<std::string> labels);
  // Print each cell's value in the cell.
  HeatMap& Annotate(bool annotate);
  HeatMap& CellSize(int pixels);
  // The colour scale's ends (default: the smallest and largest value). Fix them when figures are to be
  // compared: two maps with Range(0, 1) shade the same value alike. Values outside are clamped.
  HeatMap& Range(double lo, double hi);

  WriteResult Render(std::string* svg) const;
  WriteResult Write(const std::string& path) const;

 private:
  std::string title_, xlabel_, ylabel_;
  std::vector<std::vector<double>> values_;
  std::vector<std::string> row_labels_, col_labels_;
  bool annotate_ = false;
  int cell_ = 36;
  bool fixed_range_ = false;
  double range_lo_ = 0, range_hi_ = 1;
};

// ---------------------------------------------------------------------------------------------------------
class Timeline {
 public:
  struct Box {
    int row = 0;
    double start = 0, end = 0;
    std::string label;
    std::string color;  // any SVG colour; empty: the palette colour of `category`
    int category = 0;
  };
  Timeline& Title(std::string title);
  Timeline& XLabel(std::string label);
  // Row names top to bottom ("stage 0", "rank 3").
  Timeline& Rows(std::vector<std::string> rows);
  Timeline& AddBox(Box box);
  // Legend entries: category -> name (drawn with the palette colour of the category).
  Timeline& Legend(int category, std::string name);
  Timeline& Size(int width, int row_height);

  WriteResult Render(std::string* svg) const;
  WriteResult Write(const std::string& path) const;

 private:
  std::string title_, xlabel_;
  std::vector<std::string> rows_;
  std::vector<Box> boxes_;
  std::vector<std::pair<int, std::string>> legend_;
  int width_ = 860, row_height_ = 28;
};

// ---------------------------------------------------------------------------------------------------------
// Graphviz: writes `dot_source` to `svg_path` with the extension replaced by ".dot", then runs
// `dot -Tsvg` to write `svg_path`. When `dot` is not on PATH the .dot file is still written and the result
// says so ("install Debian's graphviz").
bool DotAvailable();
WriteResult RenderDot(const std::string& dot_source, const std::string& svg_path);

}  // namespace distlab::viz

#endif  // DISTLAB_REFERENCE_VIZ_VIZ_H_
