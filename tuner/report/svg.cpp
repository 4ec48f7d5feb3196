#include "tuner/report/svg.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>

#include "tuner/report/svg_text.h"

namespace mactune::tuner::svg {
namespace {

// Colour-blind-safe palette (Okabe-Ito), then greys.
const char* const kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                               "#56B4E9", "#F0E442", "#000000", "#777777", "#BBBBBB"};

constexpr double kPanelW = 300, kPanelH = 220;
constexpr double kLeft = 58, kRight = 16, kTop = 30, kBottom = 44;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&')
      o += "&amp;";
    else if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

std::string num(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << v;
  return o.str();
}

double fwd(Scale s, double v) {
  switch (s) {
    case Scale::log2:
      return std::log2(v);
    case Scale::log10:
      return std::log10(v);
    case Scale::linear:
      break;
  }
  return v;
}

bool usable(Scale s, double v) {
  return std::isfinite(v) && (s == Scale::linear || v > 0);
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

}  // namespace

std::string tick_label(double v) {
  std::ostringstream o;
  const double a = std::fabs(v);
  if (a >= 1048576 && std::fmod(a, 1048576) == 0)
    o << v / 1048576 << 'M';
  else if (a >= 1024 && std::fmod(a, 1024) == 0)
    o << v / 1024 << 'K';
  else
    o << std::setprecision(3) << v;
  return o.str();
}

std::vector<double> ticks(Scale scale, double lo, double hi) {
  std::vector<double> t;
  if (!(lo <= hi)) return t;
  if (scale == Scale::log10 && lo > 0) {
    // Within a few decades, ticks at 1-2-5 (or finer) steps, the axis from the tick below the
    // data to the one above: speedups of 0.75 to 2.5 get 0.7 to 3, not 0.1 to 10.
    for (const auto& mantissas : {std::vector<double>{1, 1.5, 2, 3, 5, 7}, {1, 2, 5}}) {
      std::vector<double> c;
      for (int e = static_cast<int>(std::floor(std::log10(lo))) - 1;
           e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
        for (double m : mantissas)  // exact decimals: divide by 10^-e rather than multiply
          c.push_back(e >= 0 ? m * std::pow(10.0, e) : m / std::pow(10.0, -e));
      std::size_t first = 0, last = c.size() - 1;
      while (first + 1 < c.size() && c[first + 1] <= lo * (1 + 1e-9)) ++first;
      while (last > 0 && c[last - 1] >= hi * (1 - 1e-9)) --last;
      if (last - first + 1 <= 8) return {c.begin() + first, c.begin() + last + 1};
    }
  }
  if (scale != Scale::linear) {
    const double base = scale == Scale::log2 ? 2.0 : 10.0;
    const double a = std::floor(fwd(scale, lo) + 1e-9), b = std::ceil(fwd(scale, hi) - 1e-9);
    const double step = std::max(1.0, std::ceil((b - a) / 8));  // at most ~8 labels
    for (double e = a; e <= b + 1e-9; e += step) t.push_back(std::pow(base, e));
    return t;
  }
  const double span = hi > lo ? hi - lo : std::max(1.0, std::fabs(hi));
  const double raw = span / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double mult = 10;
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw) {
      mult = m;
      break;
    }
  const double step = mult * mag;
  // Tick i is i * mult * 10^k, computed so that decimal steps come out exact (0.6, not
  // 0.6000000000000001): divide by the integer 10^-k rather than multiply by 10^k.
  const double inv = mag < 1 ? std::round(1 / mag) : 0;
  auto tick = [&](long long i) { return inv > 0 ? double(i) * mult / inv : double(i) * step; };
  for (long long i = static_cast<long long>(std::floor(lo / step + 1e-9));
       tick(i) <= hi + step * 1e-9; ++i)
    t.push_back(tick(i));
  return t;
}

namespace {

const Font kText{11, false}, kBoldText{11, true}, kTitleFont{15, true};
constexpr double kTitleLine = 19;  // px from one title line to the next
constexpr double kLegendRow = 14;  // px from one legend entry to the next

// One legend entry: a distinct series label, drawn as its series.
struct Entry {
  std::string label;
  std::string color;
  bool dashed = false, line = true;
  double marker_radius = 2.5;
};

// The chart's geometry, from its text measured in the writer's font.
struct Layout {
  double left = 0;     // margin left of each panel: the y tick labels and the y-axis label
  double y_label = 0;  // baseline of the (turned) y-axis label, this far left of the panel
  double legend_w = 0, width = 0, height = 0, title_h = 0;
  int cols = 1, rows = 1;
  std::vector<std::string> title_lines;

  double panel_x(std::size_t i) const {
    return static_cast<double>(static_cast<int>(i) % cols) * (left + kPanelW + kRight) + left;
  }
  double panel_y(std::size_t i) const {
    return title_h + static_cast<double>(static_cast<int>(i) / cols) * (kTop + kPanelH + kBottom) +
           kTop;
  }
};

Layout layout(const Chart& c, const std::vector<double>& y_ticks,
              const std::vector<Entry>& legend) {
  Layout l;
  double tick_w = 0;
  for (double t : y_ticks) tick_w = std::max(tick_w, text_width(tick_label(t), kText));
  l.y_label = 5 + tick_w + 3 + text_descent(kText);
  l.left = std::max(kLeft, l.y_label + text_ascent(kText) + 4);
  double label_w = 0;
  for (const Entry& e : legend) label_w = std::max(label_w, text_width(e.label, kText));
  l.legend_w = std::max(150.0, 10 + 20 + label_w + 10);
  l.cols = std::max(1, std::min<int>(c.columns, static_cast<int>(c.panels.size())));
  l.rows = std::max<int>(1, static_cast<int>((c.panels.size() + l.cols - 1) / l.cols));
  l.width = l.cols * (l.left + kPanelW + kRight) + l.legend_w;
  l.title_lines = wrap_text(c.title, kTitleFont, l.width - 20);
  l.title_h = 34 + kTitleLine * static_cast<double>(l.title_lines.size() - 1);
  const double legend_bottom =
      l.title_h + kTop + kLegendRow * static_cast<double>(legend.size()) + 10;
  l.height = std::max(l.title_h + l.rows * (kTop + kPanelH + kBottom), legend_bottom);
  return l;
}

// One series of a panel: its band, its line and markers, its off-scale markers at the panel's
// top edge (y `top`). `px`, `py`: data to canvas.
void draw_series(std::ostream& o, const Series& s, const std::string& col, const Chart& c,
                 const std::function<double(double)>& px, const std::function<double(double)>& py,
                 double top) {
  // The band first, under every line: one polygon per run of points that have one.
  std::vector<std::pair<double, double>> upper, lower;
  auto flush_band = [&] {
    if (upper.size() >= 1) {
      std::string pts;
      for (const auto& [x, y] : upper) pts += num(x) + ',' + num(y) + ' ';
      for (auto it = lower.rbegin(); it != lower.rend(); ++it)
        pts += num(it->first) + ',' + num(it->second) + ' ';
      if (upper.size() == 1)  // one point: a short bar, so it shows
        pts = num(upper[0].first - 3) + ',' + num(upper[0].second) + ' ' + num(upper[0].first + 3) +
              ',' + num(upper[0].second) + ' ' + num(lower[0].first + 3) + ',' +
              num(lower[0].second) + ' ' + num(lower[0].first - 3) + ',' + num(lower[0].second);
      o << "<polygon class=\"band\" points=\"" << pts << "\" fill=\"" << col
        << "\" fill-opacity=\"0.18\" stroke=\"none\"/>\n";
    }
    upper.clear();
    lower.clear();
  };
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    const bool has = i < s.band_lo.size() && i < s.band_hi.size() && usable(c.x_scale, s.x[i]) &&
                     usable(c.y_scale, s.band_lo[i]) && usable(c.y_scale, s.band_hi[i]);
    if (!has) {
      flush_band();
      continue;
    }
    upper.emplace_back(px(s.x[i]), py(s.band_hi[i]));
    lower.emplace_back(px(s.x[i]), py(s.band_lo[i]));
  }
  flush_band();
  std::string path;
  bool pen = false;
  for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (!usable(c.x_scale, s.x[i]) || !usable(c.y_scale, s.y[i])) {
      pen = false;
      continue;
    }
    path += (pen ? " L" : " M") + num(px(s.x[i])) + ',' + num(py(s.y[i]));
    pen = true;
    if (!s.markers) continue;
    o << "<circle cx=\"" << num(px(s.x[i])) << "\" cy=\"" << num(py(s.y[i])) << "\" r=\""
      << num(s.marker_radius) << "\" fill=\"" << col << "\"><title>" << esc(s.label) << ": "
      << esc(tick_label(s.x[i])) << " -> " << s.y[i] << "</title></circle>\n";
  }
  if (!path.empty() && s.line)
    o << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.6\""
      << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n";
  for (const auto& [x, note] : s.off_scale) {
    if (!usable(c.x_scale, x)) continue;
    o << "<circle cx=\"" << num(px(x)) << "\" cy=\"" << num(top + 6)
      << "\" r=\"3.5\" fill=\"white\" stroke=\"" << col << "\"><title>" << esc(s.label) << ": "
      << esc(tick_label(x)) << " -> " << esc(note) << "</title></circle>\n";
  }
}

void draw_legend(std::ostream& o, const Layout& l, const std::vector<Entry>& legend) {
  const double lx = l.width - l.legend_w + 10;
  o << "<g class=\"legend\">\n";
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const Entry& e = legend[i];
    const double ly = l.title_h + kTop + kLegendRow * static_cast<double>(i);
    o << "<g class=\"legend-entry\">";
    if (e.line)
      o << "<line x1=\"" << num(lx) << "\" y1=\"" << num(ly - 4) << "\" x2=\"" << num(lx + 16)
        << "\" y2=\"" << num(ly - 4) << "\" stroke=\"" << e.color << "\" stroke-width=\"2\""
        << (e.dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>";
    else
      o << "<circle cx=\"" << num(lx + 8) << "\" cy=\"" << num(ly - 4) << "\" r=\""
        << num(e.marker_radius) << "\" fill=\"" << e.color << "\"/>";
    o << "<text x=\"" << num(lx + 20) << "\" y=\"" << num(ly) << "\">" << esc(e.label)
      << "</text></g>\n";
  }
  o << "</g>\n";
}

}  // namespace

std::string render(const Chart& c) {
  // Shared ranges over every panel, so panels compare at a glance.
  Range xr, yr;
  for (const Panel& p : c.panels) {
    for (const Series& s : p.series) {
      for (std::size_t i = 0; i < s.x.size(); ++i) {
        if (usable(c.x_scale, s.x[i])) xr.add(s.x[i]);
        if (i < s.y.size() && usable(c.y_scale, s.y[i])) yr.add(s.y[i]);
        for (const auto* band : {&s.band_lo, &s.band_hi})
          if (i < band->size() && usable(c.y_scale, (*band)[i])) yr.add((*band)[i]);
      }
      for (const auto& [x, note] : s.off_scale)
        if (usable(c.x_scale, x)) xr.add(x);
    }
    for (double h : p.hlines)
      if (usable(c.y_scale, h)) yr.add(h);
  }
  if (xr.empty()) xr = {1, 2};
  if (yr.empty()) yr = {c.y_scale == Scale::linear ? 0.0 : 1.0, 2};
  if (c.y_min) yr.lo = *c.y_min;
  if (c.y_max) yr.hi = *c.y_max;
  const auto xt = ticks(c.x_scale, xr.lo, xr.hi), yt = ticks(c.y_scale, yr.lo, yr.hi);
  // The x axis 3% wider than its ticks on each side: a marker at the first or last batch or
  // context sits inside the frame, not on it.
  const double x_lo = fwd(c.x_scale, xt.empty() ? xr.lo : std::min(xr.lo, xt.front()));
  const double x_hi = fwd(c.x_scale, xt.empty() ? xr.hi : std::max(xr.hi, xt.back()));
  const double x0 = x_lo - 0.03 * (x_hi - x_lo), x1 = x_hi + 0.03 * (x_hi - x_lo);
  const double y0 = fwd(c.y_scale, yt.empty() ? yr.lo : std::min(yr.lo, yt.front()));
  const double y1 = fwd(c.y_scale, yt.empty() ? yr.hi : std::max(yr.hi, yt.back()));

  // Colours: one palette colour per colour key, in order of first appearance (a series with a
  // colour of its own takes none); the legend: every distinct label, drawn as its series.
  std::vector<std::string> keys;
  for (const Panel& p : c.panels)
    for (const Series& s : p.series) {
      const std::string key = s.color_of.empty() ? s.label : s.color_of;
      if (s.color.empty() && std::find(keys.begin(), keys.end(), key) == keys.end())
        keys.push_back(key);
    }
  auto color = [&](const Series& s) -> std::string {
    if (!s.color.empty()) return s.color;
    const std::string key = s.color_of.empty() ? s.label : s.color_of;
    const auto i =
        static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
    return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
  };
  std::vector<Entry> legend;
  for (const Panel& p : c.panels)
    for (const Series& s : p.series)
      if (std::none_of(legend.begin(), legend.end(),
                       [&](const Entry& e) { return e.label == s.label; }))
        legend.push_back({s.label, color(s), s.dashed, s.line, s.marker_radius});

  const Layout l = layout(c, yt, legend);
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(l.width) << "\" height=\""
    << num(l.height) << "\" viewBox=\"0 0 " << num(l.width) << ' ' << num(l.height)
    << "\" font-family=\"" << kFontFamily << "\" font-size=\"" << num(kText.size) << "\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (std::size_t i = 0; i < l.title_lines.size(); ++i)
    o << "<text x=\"10\" y=\"" << num(22 + kTitleLine * static_cast<double>(i)) << "\" font-size=\""
      << num(kTitleFont.size) << "\" font-weight=\"bold\">" << esc(l.title_lines[i]) << "</text>\n";

  for (std::size_t pi = 0; pi < c.panels.size(); ++pi) {
    const Panel& p = c.panels[pi];
    const double ox = l.panel_x(pi), oy = l.panel_y(pi);
    auto px = [&](double v) {
      return ox + (fwd(c.x_scale, v) - x0) / (x1 - x0 == 0 ? 1 : x1 - x0) * kPanelW;
    };
    auto py = [&](double v) {
      const double t = (fwd(c.y_scale, v) - y0) / (y1 - y0 == 0 ? 1 : y1 - y0);
      return oy + kPanelH - std::clamp(t, 0.0, 1.0) * kPanelH;
    };
    o << "<g>\n<text x=\"" << num(ox) << "\" y=\"" << num(oy - 8) << "\" font-weight=\"bold\">"
      << esc(fit_text(p.title, kBoldText, kPanelW)) << "</text>\n";
    o << "<rect x=\"" << num(ox) << "\" y=\"" << num(oy) << "\" width=\"" << num(kPanelW)
      << "\" height=\"" << num(kPanelH) << "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (double t : xt) {
      o << "<line x1=\"" << num(px(t)) << "\" y1=\"" << num(oy) << "\" x2=\"" << num(px(t))
        << "\" y2=\"" << num(oy + kPanelH) << "\" stroke=\"#eee\"/>\n";
      o << "<text x=\"" << num(px(t)) << "\" y=\"" << num(oy + kPanelH + 16)
        << "\" text-anchor=\"middle\">" << esc(tick_label(t)) << "</text>\n";
    }
    for (double t : yt) {
      o << "<line x1=\"" << num(ox) << "\" y1=\"" << num(py(t)) << "\" x2=\"" << num(ox + kPanelW)
        << "\" y2=\"" << num(py(t)) << "\" stroke=\"#eee\"/>\n";
      o << "<text x=\"" << num(ox - 5) << "\" y=\"" << num(py(t) + 4) << "\" text-anchor=\"end\">"
        << esc(tick_label(t)) << "</text>\n";
    }
    for (double h : p.hlines)
      if (usable(c.y_scale, h))
        o << "<line x1=\"" << num(ox) << "\" y1=\"" << num(py(h)) << "\" x2=\"" << num(ox + kPanelW)
          << "\" y2=\"" << num(py(h)) << "\" stroke=\"#000\" stroke-dasharray=\"5,3\"/>\n";
    for (const Series& s : p.series) draw_series(o, s, color(s), c, px, py, oy);
    o << "<text x=\"" << num(ox + kPanelW / 2) << "\" y=\"" << num(oy + kPanelH + 34)
      << "\" text-anchor=\"middle\">" << esc(fit_text(c.x_label, kText, kPanelW)) << "</text>\n";
    o << "<text transform=\"translate(" << num(ox - l.y_label) << ',' << num(oy + kPanelH / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << esc(fit_text(c.y_label, kText, kPanelH))
      << "</text>\n</g>\n";
  }
  draw_legend(o, l, legend);
  o << "</svg>\n";
  return o.str();
}

}  // namespace mactune::tuner::svg
