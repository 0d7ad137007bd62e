// Implementation of the SVG writers (see viz.h). Geometry: every chart maps data into a plot rectangle
// [left, right] x [top, bottom] inside the SVG; axes are drawn on the rectangle's left and bottom edges.
#include "reference/viz/viz.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

namespace distlab::viz {
namespace {

constexpr char kFont[] = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string DefaultTick(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

// The document header and the trailer.
std::string Open(int width, int height) {
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height << "\" " << kFont << " font-size=\"12\">\n"
    << "<rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height << "\" fill=\"white\"/>\n";
  return o.str();
}
const char kClose[] = "</svg>\n";

std::string Text(double x, double y, const std::string& s, const char* anchor = "middle",
                 const char* extra = "") {
  std::ostringstream o;
  o << "<text x=\"" << Num(x) << "\" y=\"" << Num(y) << "\" text-anchor=\"" << anchor << "\" " << extra << ">"
    << XmlEscape(s) << "</text>\n";
  return o.str();
}

std::string Line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
                 const char* extra = "") {
  std::ostringstream o;
  o << "<line x1=\"" << Num(x1) << "\" y1=\"" << Num(y1) << "\" x2=\"" << Num(x2) << "\" y2=\"" << Num(y2)
    << "\" stroke=\"" << stroke << "\" stroke-width=\"" << width << "\" " << extra << "/>\n";
  return o.str();
}

std::string Rect(double x, double y, double w, double h, const std::string& fill, const char* extra = "") {
  std::ostringstream o;
  o << "<rect x=\"" << Num(x) << "\" y=\"" << Num(y) << "\" width=\"" << Num(std::max(w, 0.0))
    << "\" height=\"" << Num(std::max(h, 0.0)) << "\" fill=\"" << fill << "\" " << extra << "/>\n";
  return o.str();
}

// One axis: the data range, its scale and the ticks it shows.
struct Axis {
  Scale scale = Scale::kLinear;
  double lo = 0, hi = 1;      // in transformed units (log2/log10 of the data for log axes)
  std::vector<double> ticks;  // data values

  double T(double v) const {
    switch (scale) {
      case Scale::kLog2:
        return std::log2(v);
      case Scale::kLog10:
        return std::log10(v);
      default:
        return v;
    }
  }
  // Position in [0, 1] along the axis.
  double Frac(double v) const { return hi > lo ? (T(v) - lo) / (hi - lo) : 0.5; }
};

// Linear ticks at 1, 2 or 5 times a power of ten, about `target` of them.
std::vector<double> NiceTicks(double lo, double hi, int target, double* nlo, double* nhi) {
  if (!(hi > lo)) {
    double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / target;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  *nlo = std::floor(lo / step) * step;
  *nhi = std::ceil(hi / step) * step;
  std::vector<double> t;
  for (double v = *nlo; v <= *nhi + step * 1e-9; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

Axis MakeAxis(Scale scale, double lo, double hi) {
  Axis a;
  a.scale = scale;
  if (scale == Scale::kLinear) {
    a.ticks = NiceTicks(lo, hi, 6, &a.lo, &a.hi);
    return a;
  }
  double base = scale == Scale::kLog2 ? 2 : 10;
  double tlo = std::floor(a.T(lo)), thi = std::ceil(a.T(hi));
  if (thi <= tlo) thi = tlo + 1;
  a.lo = tlo;
  a.hi = thi;
  int every = std::max(1, static_cast<int>(std::ceil((thi - tlo) / 10.0)));
  for (double e = tlo; e <= thi; e += every) a.ticks.push_back(std::pow(base, e));
  return a;
}

}  // namespace

std::string FormatBytes(double bytes) {
  static const char* kUnits[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%s", std::round(bytes * 100) / 100, kUnits[u]);
  return buf;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const std::string& PaletteColor(size_t i) {
  // A colour-blind-friendly set of ten (the widely used "tableau 10" hues).
  static const std::string kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColors[i % 10];
}

WriteResult WriteTextFile(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return {"cannot open '" + path + "' for writing (does its directory exist?)"};
  f << content;
  f.close();
  if (!f) return {"writing '" + path + "' failed"};
  return {};
}

// ---------------------------------------------------------------------------------------------------------
// LinePlot

LinePlot& LinePlot::Title(std::string t) {
  title_ = std::move(t);
  return *this;
}
LinePlot& LinePlot::XLabel(std::string l) {
  xlabel_ = std::move(l);
  return *this;
}
LinePlot& LinePlot::YLabel(std::string l) {
  ylabel_ = std::move(l);
  return *this;
}
LinePlot& LinePlot::XScale(Scale s) {
  xscale_ = s;
  return *this;
}
LinePlot& LinePlot::YScale(Scale s) {
  yscale_ = s;
  return *this;
}
LinePlot& LinePlot::XTickFormat(TickFormat f) {
  xformat_ = std::move(f);
  return *this;
}
LinePlot& LinePlot::YTickFormat(TickFormat f) {
  yformat_ = std::move(f);
  return *this;
}
LinePlot& LinePlot::Size(int w, int h) {
  width_ = w;
  height_ = h;
  return *this;
}
LinePlot& LinePlot::AddSeries(std::string name, std::vector<double> x, std::vector<double> y, bool dashed) {
  series_.push_back({std::move(name), std::move(x), std::move(y), dashed});
  return *this;
}

WriteResult LinePlot::Render(std::string* svg) const {
  const std::string who = "LinePlot '" + title_ + "': ";
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const Series& s : series_) {
    if (s.x.size() != s.y.size()) {
      return {who + "series '" + s.name + "' has " + std::to_string(s.x.size()) + " x values but " +
              std::to_string(s.y.size()) + " y values"};
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        return {who + "series '" + s.name + "' has a non-finite point at index " + std::to_string(i)};
      }
      if (xscale_ != Scale::kLinear && s.x[i] <= 0) {
        return {who + "series '" + s.name + "' has x=" + DefaultTick(s.x[i]) + " <= 0 on a log x axis"};
      }
      if (yscale_ != Scale::kLinear && s.y[i] <= 0) {
        return {who + "series '" + s.name + "' has y=" + DefaultTick(s.y[i]) + " <= 0 on a log y axis"};
      }
      xlo = std::min(xlo, s.x[i]);
      xhi = std::max(xhi, s.x[i]);
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
    }
  }
  if (!(xhi >= xlo)) return {who + "no data points"};
  if (yscale_ == Scale::kLinear && ylo > 0) ylo = 0;  // linear y starts at zero: ratios read honestly
  Axis ax = MakeAxis(xscale_, xlo, xhi), ay = MakeAxis(yscale_, ylo, yhi);
  TickFormat xf = xformat_ ? xformat_ : TickFormat(DefaultTick);
  TickFormat yf = yformat_ ? yformat_ : TickFormat(DefaultTick);

  const double left = 80, right = width_ - 190, top = 48, bottom = height_ - 60;
  auto px = [&](double v) { return left + ax.Frac(v) * (right - left); };
  auto py = [&](double v) { return bottom - ay.Frac(v) * (bottom - top); };

  std::ostringstream o;
  o << Open(width_, height_);
  o << Text(width_ / 2.0, 24, title_, "middle", "font-size=\"15\" font-weight=\"bold\"");
  for (double t : ax.ticks) {
    o << Line(px(t), top, px(t), bottom, "#e5e5e5");
    o << Text(px(t), bottom + 16, xf(t));
  }
  for (double t : ay.ticks) {
    o << Line(left, py(t), right, py(t), "#e5e5e5");
    o << Text(left - 6, py(t) + 4, yf(t), "end");
  }
  o << Line(left, bottom, right, bottom, "#333") << Line(left, top, left, bottom, "#333");
  o << Text((left + right) / 2, height_ - 18, xlabel_);
  std::ostringstream rot;
  rot << "transform=\"rotate(-90 " << 18 << " " << Num((top + bottom) / 2) << ")\"";
  o << Text(18, (top + bottom) / 2, ylabel_, "middle", rot.str().c_str());
  for (size_t k = 0; k < series_.size(); ++k) {
    const Series& s = series_[k];
    const std::string& c = PaletteColor(k);
    std::vector<size_t> idx(s.x.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    o << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\""
      << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t i : idx) o << Num(px(s.x[i])) << "," << Num(py(s.y[i])) << " ";
    o << "\"/>\n";
    if (!s.dashed) {
      for (size_t i : idx) {
        o << "<circle cx=\"" << Num(px(s.x[i])) << "\" cy=\"" << Num(py(s.y[i])) << "\" r=\"2.5\" fill=\""
          << c << "\"/>\n";
      }
    }
    double ly = top + 10 + 20 * k;
    o << Line(right + 14, ly, right + 40, ly, c, 2, s.dashed ? "stroke-dasharray=\"6 4\"" : "");
    o << Text(right + 46, ly + 4, s.name, "start");
  }
  o << kClose;
  *svg = o.str();
  return {};
}

WriteResult LinePlot::Write(const std::string& path) const {
  std::string svg;
  WriteResult r = Render(&svg);
  return r.ok() ? WriteTextFile(path, svg) : r;
}

// ---------------------------------------------------------------------------------------------------------
// BarChart

BarChart& BarChart::Title(std::string t) {
  title_ = std::move(t);
  return *this;
}
BarChart& BarChart::YLabel(std::string l) {
  ylabel_ = std::move(l);
  return *this;
}
BarChart& BarChart::Stacked(bool s) {
  stacked_ = s;
  return *this;
}
BarChart& BarChart::Size(int w, int h) {
  width_ = w;
  height_ = h;
  return *this;
}
BarChart& BarChart::Categories(std::vector<std::string> c) {
  categories_ = std::move(c);
  return *this;
}
BarChart& BarChart::AddSeries(std::string name, std::vector<double> v) {
  series_.push_back({std::move(name), std::move(v)});
  return *this;
}
BarChart& BarChart::ShowValues(bool s) {
  show_values_ = s;
  return *this;
}

WriteResult BarChart::Render(std::string* svg) const {
  const std::string who = "BarChart '" + title_ + "': ";
  if (categories_.empty() || series_.empty()) return {who + "needs at least one category and one series"};
  double hi = 0, lo = 0;
  for (size_t c = 0; c < categories_.size(); ++c) {
    double pos = 0, neg = 0;
    for (const Series& s : series_) {
      if (s.values.size() != categories_.size()) {
        return {who + "series '" + s.name + "' has " + std::to_string(s.values.size()) + " values for " +
                std::to_string(categories_.size()) + " categories"};
      }
      double v = s.values[c];
      if (!std::isfinite(v)) return {who + "series '" + s.name + "' has a non-finite value"};
      if (stacked_) {
        if (v < 0) return {who + "stacked bars need values >= 0 (series '" + s.name + "')"};
        pos += v;
      } else {
        pos = std::max(pos, v);
        neg = std::min(neg, v);
      }
    }
    hi = std::max(hi, pos);
    lo = std::min(lo, neg);
  }
  Axis ay = MakeAxis(Scale::kLinear, lo, hi > lo ? hi : lo + 1);
  const double left = 80, right = width_ - 170, top = 48, bottom = height_ - 60;
  auto py = [&](double v) { return bottom - ay.Frac(v) * (bottom - top); };
  const double group = (right - left) / categories_.size();
  const double inner = group * 0.8;
  const double bar = stacked_ ? inner : inner / series_.size();

  std::ostringstream o;
  o << Open(width_, height_);
  o << Text(width_ / 2.0, 24, title_, "middle", "font-size=\"15\" font-weight=\"bold\"");
  for (double t : ay.ticks) {
    o << Line(left, py(t), right, py(t), "#e5e5e5");
    o << Text(left - 6, py(t) + 4, DefaultTick(t), "end");
  }
  std::ostringstream rot;
  rot << "transform=\"rotate(-90 18 " << Num((top + bottom) / 2) << ")\"";
  o << Text(18, (top + bottom) / 2, ylabel_, "middle", rot.str().c_str());
  for (size_t c = 0; c < categories_.size(); ++c) {
    double x0 = left + group * c + (group - inner) / 2;
    double base = 0;
    for (size_t k = 0; k < series_.size(); ++k) {
      double v = series_[k].values[c];
      double x = stacked_ ? x0 : x0 + bar * k;
      double from = stacked_ ? base : 0, to = stacked_ ? base + v : v;
      double y1 = py(std::max(from, to)), y2 = py(std::min(from, to));
      o << Rect(x, y1, bar - 1, y2 - y1, PaletteColor(k));
      if (show_values_ && !stacked_)
        o << Text(x + bar / 2, y1 - 3, DefaultTick(v), "middle", "font-size=\"10\"");
      base += v;
    }
    if (show_values_ && stacked_)
      o << Text(x0 + bar / 2, py(base) - 3, DefaultTick(base), "middle", "font-size=\"10\"");
    o << Text(left + group * (c + 0.5), bottom + 16, categories_[c]);
  }
  o << Line(left, py(0), right, py(0), "#333") << Line(left, top, left, bottom, "#333");
  for (size_t k = 0; k < series_.size(); ++k) {
    double ly = top + 10 + 20 * k;
    o << Rect(right + 14, ly - 6, 12, 12, PaletteColor(k));
    o << Text(right + 32, ly + 4, series_[k].name, "start");
  }
  o << kClose;
  *svg = o.str();
  return {};
}

WriteResult BarChart::Write(const std::string& path) const {
  std::string svg;
  WriteResult r = Render(&svg);
  return r.ok() ? WriteTextFile(path, svg) : r;
}

// ---------------------------------------------------------------------------------------------------------
// HeatMap

HeatMap& HeatMap::Title(std::string t) {
  title_ = std::move(t);
  return *this;
}
HeatMap& HeatMap::XLabel(std::string l) {
  xlabel_ = std::move(l);
  return *this;
}
HeatMap& HeatMap::YLabel(std::string l) {
  ylabel_ = std::move(l);
  return *this;
}
HeatMap& HeatMap::Values(std::vector<std::vector<double>> v) {
  values_ = std::move(v);
  return *this;
}
HeatMap& HeatMap::RowLabels(std::vector<std::string> l) {
  row_labels_ = std::move(l);
  return *this;
}
HeatMap& HeatMap::ColumnLabels(std::vector<std::string> l) {
  col_labels_ = std::move(l);
  return *this;
}
HeatMap& HeatMap::Annotate(bool a) {
  annotate_ = a;
  return *this;
}
HeatMap& HeatMap::Range(double lo, double hi) {
  fixed_range_ = true;
  range_lo_ = lo;
  range_hi_ = hi;
  return *this;
}
HeatMap& HeatMap::CellSize(int p) {
  cell_ = p;
  return *this;
}

namespace {
// White to dark blue, linear in t in [0, 1].
std::string Shade(double t) {
  t = std::clamp(t, 0.0, 1.0);
  int r = static_cast<int>(std::lround(247 + (8 - 247) * t));
  int g = static_cast<int>(std::lround(251 + (48 - 251) * t));
  int b = static_cast<int>(std::lround(255 + (107 - 255) * t));
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}
}  // namespace

WriteResult HeatMap::Render(std::string* svg) const {
  const std::string who = "HeatMap '" + title_ + "': ";
  if (values_.empty() || values_[0].empty()) return {who + "no values"};
  const size_t rows = values_.size(), cols = values_[0].size();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (size_t r = 0; r < rows; ++r) {
    if (values_[r].size() != cols) {
      return {who + "row " + std::to_string(r) + " has " + std::to_string(values_[r].size()) +
              " values, row 0 has " + std::to_string(cols)};
    }
    for (double v : values_[r]) {
      if (!std::isfinite(v)) return {who + "non-finite value in row " + std::to_string(r)};
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!row_labels_.empty() && row_labels_.size() != rows) {
    return {who + std::to_string(row_labels_.size()) + " row labels for " + std::to_string(rows) + " rows"};
  }
  if (!col_labels_.empty() && col_labels_.size() != cols) {
    return {who + std::to_string(col_labels_.size()) + " column labels for " + std::to_string(cols) +
            " columns"};
  }
  if (fixed_range_) {
    if (!(range_hi_ > range_lo_)) {
      return {who + "Range(" + DefaultTick(range_lo_) + ", " + DefaultTick(range_hi_) + ") is empty"};
    }
    lo = range_lo_, hi = range_hi_;
  }
  const double left = 110, top = 70;
  // Wide enough for the title too (15 px bold: about 9 px a character).
  const int width = static_cast<int>(std::max(left + cols * cell_ + 120, 40 + 9.0 * title_.size()));
  const int height = static_cast<int>(top + rows * cell_ + 50);
  auto frac = [&](double v) { return hi > lo ? std::clamp((v - lo) / (hi - lo), 0.0, 1.0) : 0.5; };
  std::ostringstream o;
  o << Open(width, height);
  o << Text(width / 2.0, 22, title_, "middle", "font-size=\"15\" font-weight=\"bold\"");
  o << Text(left + cols * cell_ / 2.0, 44, xlabel_);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      double t = frac(values_[r][c]);
      o << Rect(left + c * cell_, top + r * cell_, cell_, cell_, Shade(t), "stroke=\"white\"");
      if (annotate_) {
        o << Text(left + (c + 0.5) * cell_, top + (r + 0.5) * cell_ + 4, DefaultTick(values_[r][c]), "middle",
                  t > 0.55 ? "fill=\"white\" font-size=\"10\"" : "font-size=\"10\"");
      }
    }
    if (!row_labels_.empty()) o << Text(left - 6, top + (r + 0.5) * cell_ + 4, row_labels_[r], "end");
  }
  for (size_t c = 0; c < cols && !col_labels_.empty(); ++c) {
    o << Text(left + (c + 0.5) * cell_, top - 6, col_labels_[c], "middle", "font-size=\"10\"");
  }
  std::ostringstream rot;
  rot << "transform=\"rotate(-90 16 " << Num(top + rows * cell_ / 2.0) << ")\"";
  o << Text(16, top + rows * cell_ / 2.0, ylabel_, "middle", rot.str().c_str());
  // The colour scale: a vertical bar from hi (top) to lo (bottom).
  const double sx = left + cols * cell_ + 30, sh = std::max<double>(rows * cell_, 100);
  for (int i = 0; i < 20; ++i) o << Rect(sx, top + sh * i / 20, 16, sh / 20 + 0.5, Shade(1 - i / 19.0));
  o << Text(sx + 22, top + 10, DefaultTick(hi), "start");
  o << Text(sx + 22, top + sh, DefaultTick(lo), "start");
  o << kClose;
  *svg = o.str();
  return {};
}

WriteResult HeatMap::Write(const std::string& path) const {
  std::string svg;
  WriteResult r = Render(&svg);
  return r.ok() ? WriteTextFile(path, svg) : r;
}

// ---------------------------------------------------------------------------------------------------------
// Timeline

Timeline& Timeline::Title(std::string t) {
  title_ = std::move(t);
  return *this;
}
Timeline& Timeline::XLabel(std::string l) {
  xlabel_ = std::move(l);
  return *this;
}
Timeline& Timeline::Rows(std::vector<std::string> r) {
  rows_ = std::move(r);
  return *this;
}
Timeline& Timeline::AddBox(Box b) {
  boxes_.push_back(std::move(b));
  return *this;
}
Timeline& Timeline::Legend(int category, std::string name) {
  legend_.emplace_back(category, std::move(name));
  return *this;
}
Timeline& Timeline::Size(int w, int rh) {
  width_ = w;
  row_height_ = rh;
  return *this;
}

WriteResult Timeline::Render(std::string* svg) const {
  const std::string who = "Timeline '" + title_ + "': ";
  if (rows_.empty()) return {who + "no rows"};
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  for (size_t i = 0; i < boxes_.size(); ++i) {
    const Box& b = boxes_[i];
    if (b.row < 0 || b.row >= static_cast<int>(rows_.size())) {
      return {who + "box " + std::to_string(i) + " ('" + b.label + "') is on row " + std::to_string(b.row) +
              " of " + std::to_string(rows_.size())};
    }
    if (!(b.end >= b.start)) {
      return {who + "box " + std::to_string(i) + " ('" + b.label + "') ends before it starts"};
    }
    t0 = std::min(t0, b.start);
    t1 = std::max(t1, b.end);
  }
  if (boxes_.empty()) t0 = 0, t1 = 1;
  Axis ax = MakeAxis(Scale::kLinear, std::min(t0, 0.0), t1);
  // Room for the longest row name (about 7 px per character at the default 12 px font), at least 90 px.
  size_t longest = 0;
  for (const std::string& r : rows_) longest = std::max(longest, r.size());
  const double left = std::max(90.0, 16.0 + 7.0 * static_cast<double>(longest)), right = width_ - 20,
               top = 48;
  const double bottom = top + rows_.size() * row_height_;
  const int height = static_cast<int>(bottom + 50 + (legend_.empty() ? 0 : 24));
  auto px = [&](double v) { return left + ax.Frac(v) * (right - left); };
  std::ostringstream o;
  o << Open(width_, height);
  o << Text(width_ / 2.0, 24, title_, "middle", "font-size=\"15\" font-weight=\"bold\"");
  for (double t : ax.ticks) {
    o << Line(px(t), top, px(t), bottom, "#eeeeee");
    o << Text(px(t), bottom + 16, DefaultTick(t));
  }
  for (size_t r = 0; r < rows_.size(); ++r) {
    o << Text(left - 8, top + (r + 0.5) * row_height_ + 4, rows_[r], "end");
  }
  for (const Box& b : boxes_) {
    double x = px(b.start), w = px(b.end) - x, y = top + b.row * row_height_ + 2;
    const std::string& fill = b.color.empty() ? PaletteColor(b.category) : b.color;
    o << Rect(x, y, w, row_height_ - 4, fill, "stroke=\"#333\" stroke-width=\"0.5\"");
    // The label at 10 px, smaller (down to 7 px) where the box is too narrow, or left out: a label never
    // runs into its neighbours. Width estimate: 0.66 em per character (DejaVu Sans capitals and digits).
    const double em = 0.66 * static_cast<double>(b.label.size());
    const double size = em > 0 ? std::min(10.0, std::floor((w - 2) / em)) : 0;
    if (!b.label.empty() && size >= 7) {
      const std::string font = "font-size=\"" + std::to_string(static_cast<int>(size)) + "\"";
      o << Text(x + w / 2, y + row_height_ / 2.0 + 2, b.label, "middle", font.c_str());
    }
  }
  o << Line(left, bottom, right, bottom, "#333");
  o << Text((left + right) / 2, bottom + 36, xlabel_);
  double lx = left;
  for (const auto& [cat, name] : legend_) {
    o << Rect(lx, bottom + 46, 12, 12, PaletteColor(cat));
    o << Text(lx + 16, bottom + 56, name, "start");
    lx += 30 + 7 * name.size();
  }
  o << kClose;
  *svg = o.str();
  return {};
}

WriteResult Timeline::Write(const std::string& path) const {
  std::string svg;
  WriteResult r = Render(&svg);
  return r.ok() ? WriteTextFile(path, svg) : r;
}

// ---------------------------------------------------------------------------------------------------------
// Graphviz

bool DotAvailable() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string exe = dir + "/dot";
    if (access(exe.c_str(), X_OK) == 0) return true;
  }
  return false;
}

namespace {
// A path quoted for /bin/sh: 'it'\''s'.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

WriteResult RenderDot(const std::string& dot_source, const std::string& svg_path) {
  std::string dot_path = svg_path;
  size_t slash = dot_path.find_last_of('/');
  size_t dot = dot_path.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) dot_path.resize(dot);
  dot_path += ".dot";
  if (dot_path == svg_path) return {"RenderDot: the output '" + svg_path + "' must not end in .dot"};
  WriteResult w = WriteTextFile(dot_path, dot_source);
  if (!w.ok()) return w;
  if (!DotAvailable()) {
    return {"RenderDot: `dot` is not on PATH; wrote " + dot_path +
            " but could not render it (install Debian's graphviz: apt-get install graphviz)"};
  }
  std::string cmd = "dot -Tsvg -o " + ShellQuote(svg_path) + " " + ShellQuote(dot_path) + " 2>&1";
  std::string output;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {"RenderDot: could not start `dot`"};
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) output += buf;
  int rc = pclose(p);
  if (rc != 0) {
    return {"RenderDot: `dot -Tsvg " + dot_path + "` failed (status " + std::to_string(rc) + "): " + output};
  }
  return {};
}

}  // namespace distlab::viz
