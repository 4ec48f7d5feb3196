#include "tuner/svg.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

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
  const double x0 = fwd(c.x_scale, xt.empty() ? xr.lo : std::min(xr.lo, xt.front()));
  const double x1 = fwd(c.x_scale, xt.empty() ? xr.hi : std::max(xr.hi, xt.back()));
  const double y0 = fwd(c.y_scale, yt.empty() ? yr.lo : std::min(yr.lo, yt.front()));
  const double y1 = fwd(c.y_scale, yt.empty() ? yr.hi : std::max(yr.hi, yt.back()));

  // Legend: every distinct series label in order of first appearance, drawn as its series
  // (dashed or not); one colour per colour key.
  std::vector<std::string> labels, keys;
  std::vector<bool> label_dashed;
  std::vector<std::string> label_key;
  for (const Panel& p : c.panels)
    for (const Series& s : p.series) {
      const std::string key = s.color_of.empty() ? s.label : s.color_of;
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      if (std::find(labels.begin(), labels.end(), s.label) == labels.end()) {
        labels.push_back(s.label);
        label_dashed.push_back(s.dashed);
        label_key.push_back(key);
      }
    }
  auto color_by_key = [&](const std::string& key) {
    const auto i =
        static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
    return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
  };
  auto color = [&](const Series& s) {
    return color_by_key(s.color_of.empty() ? s.label : s.color_of);
  };

  const int cols = std::max(1, std::min<int>(c.columns, static_cast<int>(c.panels.size())));
  const int rows = static_cast<int>((c.panels.size() + static_cast<std::size_t>(cols) - 1) /
                                    static_cast<std::size_t>(cols));
  const double legend_w = 150, title_h = 34;
  const double width = cols * (kLeft + kPanelW + kRight) + legend_w;
  const double height = title_h + std::max(1, rows) * (kTop + kPanelH + kBottom);

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\""
    << num(height) << "\" viewBox=\"0 0 " << num(width) << ' ' << num(height)
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" << esc(c.title)
    << "</text>\n";

  for (std::size_t pi = 0; pi < c.panels.size(); ++pi) {
    const Panel& p = c.panels[pi];
    const double ox =
        static_cast<double>(static_cast<int>(pi) % cols) * (kLeft + kPanelW + kRight) + kLeft;
    const double oy =
        title_h + static_cast<double>(static_cast<int>(pi) / cols) * (kTop + kPanelH + kBottom) +
        kTop;
    auto px = [&](double v) {
      return ox + (fwd(c.x_scale, v) - x0) / (x1 - x0 == 0 ? 1 : x1 - x0) * kPanelW;
    };
    auto py = [&](double v) {
      const double t = (fwd(c.y_scale, v) - y0) / (y1 - y0 == 0 ? 1 : y1 - y0);
      return oy + kPanelH - std::clamp(t, 0.0, 1.0) * kPanelH;
    };
    o << "<g>\n<text x=\"" << num(ox) << "\" y=\"" << num(oy - 8) << "\" font-weight=\"bold\">"
      << esc(p.title) << "</text>\n";
    o << "<rect x=\"" << num(ox) << "\" y=\"" << num(oy) << "\" width=\"" << num(kPanelW)
      << "\" height=\"" << num(kPanelH) << "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (double t : xt) {
      o << "<line x1=\"" << num(px(t)) << "\" y1=\"" << num(oy) << "\" x2=\"" << num(px(t))
        << "\" y2=\"" << num(oy + kPanelH) << "\" stroke=\"#eee\"/>\n";
      o << "<text x=\"" << num(px(t)) << "\" y=\"" << num(oy + kPanelH + 14)
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
    for (const Series& s : p.series) {
      const char* col = color(s);
      // The band first, under every line: one polygon per run of points that have one.
      std::vector<std::pair<double, double>> upper, lower;
      auto flush_band = [&] {
        if (upper.size() >= 1) {
          std::string pts;
          for (const auto& [x, y] : upper) pts += num(x) + ',' + num(y) + ' ';
          for (auto it = lower.rbegin(); it != lower.rend(); ++it)
            pts += num(it->first) + ',' + num(it->second) + ' ';
          if (upper.size() == 1)  // one point: a short bar, so it shows
            pts = num(upper[0].first - 3) + ',' + num(upper[0].second) + ' ' +
                  num(upper[0].first + 3) + ',' + num(upper[0].second) + ' ' +
                  num(lower[0].first + 3) + ',' + num(lower[0].second) + ' ' +
                  num(lower[0].first - 3) + ',' + num(lower[0].second);
          o << "<polygon class=\"band\" points=\"" << pts << "\" fill=\"" << col
            << "\" fill-opacity=\"0.18\" stroke=\"none\"/>\n";
        }
        upper.clear();
        lower.clear();
      };
      for (std::size_t i = 0; i < s.x.size(); ++i) {
        const bool has = i < s.band_lo.size() && i < s.band_hi.size() &&
                         usable(c.x_scale, s.x[i]) && usable(c.y_scale, s.band_lo[i]) &&
                         usable(c.y_scale, s.band_hi[i]);
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
        o << "<circle cx=\"" << num(px(s.x[i])) << "\" cy=\"" << num(py(s.y[i]))
          << "\" r=\"2.5\" fill=\"" << col << "\"><title>" << esc(s.label) << ": "
          << esc(tick_label(s.x[i])) << " -> " << s.y[i] << "</title></circle>\n";
      }
      if (!path.empty())
        o << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << col
          << "\" stroke-width=\"1.6\"" << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n";
      for (const auto& [x, note] : s.off_scale) {
        if (!usable(c.x_scale, x)) continue;
        o << "<circle cx=\"" << num(px(x)) << "\" cy=\"" << num(oy + 6)
          << "\" r=\"3.5\" fill=\"white\" stroke=\"" << col << "\"><title>" << esc(s.label) << ": "
          << esc(tick_label(x)) << " -> " << esc(note) << "</title></circle>\n";
      }
    }
    o << "<text x=\"" << num(ox + kPanelW / 2) << "\" y=\"" << num(oy + kPanelH + 32)
      << "\" text-anchor=\"middle\">" << esc(c.x_label) << "</text>\n";
    o << "<text transform=\"translate(" << num(ox - 44) << ',' << num(oy + kPanelH / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << esc(c.y_label) << "</text>\n</g>\n";
  }
  const double lx = width - legend_w + 10;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const double ly = title_h + kTop + 14.0 * static_cast<double>(i);
    o << "<line x1=\"" << num(lx) << "\" y1=\"" << num(ly - 4) << "\" x2=\"" << num(lx + 16)
      << "\" y2=\"" << num(ly - 4) << "\" stroke=\"" << color_by_key(label_key[i])
      << "\" stroke-width=\"2\"" << (label_dashed[i] ? " stroke-dasharray=\"6,4\"" : "") << "/>\n";
    o << "<text x=\"" << num(lx + 20) << "\" y=\"" << num(ly) << "\">" << esc(labels[i])
      << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace mactune::tuner::svg
