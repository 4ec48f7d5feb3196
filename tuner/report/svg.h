// A small SVG line-chart writer for the tuner report: panels (small multiples) sharing a
// legend, linear or log2/log10 axes, reference lines, and markers for missing values.
// No dependencies; the output opens in any browser and embeds in markdown.
//
// Every text element is laid out with the font metrics of tuner/report/svg_text.h: the title wraps
// onto more lines, panel titles and axis labels are shortened to their panel, the left margin
// fits the widest y tick label and the legend column its widest entry, so all text lies inside
// the canvas and no two text elements overlap. The legend is <g class="legend">, one
// <g class="legend-entry"> per entry.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mactune::tuner::svg {

enum class Scale { linear, log2, log10 };

struct Series {
  std::string label;
  std::vector<double> x, y;  // y may be NaN: a gap in the line
  // A shaded band from band_lo[i] to band_hi[i] at x[i] (e.g. a bracket), under the line; empty
  // or NaN entries: no band there.
  std::vector<double> band_lo, band_hi;
  bool dashed = false;  // a dashed line (e.g. a model's prediction beside the measurements)
  bool line = true;     // a line through the points (false: markers only, a scatter)
  bool markers = true;  // a dot at every point
  double marker_radius = 2.5;
  std::string color_of;  // series with the same key share a colour (empty: the label)
  std::string color;     // a colour of its own ("#777777"), outside the palette
  // Points drawn as hollow markers at the top edge with this note (e.g. "never"), one per x.
  std::vector<std::pair<double, std::string>> off_scale;
};

struct Panel {
  std::string title;
  std::vector<Series> series;
  std::vector<double> hlines;  // horizontal reference lines (e.g. 1x speedup)
};

struct Chart {
  std::string title;
  std::string x_label, y_label;
  Scale x_scale = Scale::linear, y_scale = Scale::linear;
  std::optional<double> y_min, y_max;  // default: from the data (and the reference lines)
  std::vector<Panel> panels;           // laid out left to right, wrapping after `columns`
  int columns = 3;
};

// Renders the chart as a standalone SVG document.
std::string render(const Chart& chart);

// Tick values for an axis over [lo, hi]: powers of two on log2 axes; on log10 axes 1, 1.5, 2, 3,
// 5, 7 or 1, 2, 5 x 10^k from the tick at or below lo to the one at or above hi where that
// makes at most 8, else powers of ten; "nice" steps (1, 2, 5 x 10^k) on linear ones.
std::vector<double> ticks(Scale scale, double lo, double hi);
// Short tick label: 4096 -> "4K", 131072 -> "128K", 0.5 -> "0.5", 16 -> "16".
std::string tick_label(double v);

}  // namespace mactune::tuner::svg
