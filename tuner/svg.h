// A small SVG line-chart writer for the tuner report: panels (small multiples) sharing a
// legend, linear or log2/log10 axes, reference lines, and markers for missing values.
// No dependencies; the output opens in any browser and embeds in markdown.
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
  bool dashed = false;   // a dashed line (e.g. a model's prediction beside the measurements)
  bool markers = true;   // a dot at every point
  std::string color_of;  // series with the same key share a colour (empty: the label)
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

// Tick values for an axis over [lo, hi]: powers of two or ten on log axes, "nice" steps
// (1, 2, 5 x 10^k) on linear ones.
std::vector<double> ticks(Scale scale, double lo, double hi);
// Short tick label: 4096 -> "4K", 131072 -> "128K", 0.5 -> "0.5", 16 -> "16".
std::string tick_label(double v);

}  // namespace mactune::tuner::svg
