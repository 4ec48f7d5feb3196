// Text metrics of the SVG writer (tuner/report/svg.h): the font it names, the width and box of a
// text element in that font, and the two ways it makes a text fit (wrapped at spaces, or shortened
// with an ellipsis). The writer lays every text element out with these, and the report's
// layout test checks the SVG it wrote with the same ones.
//
// The font is DejaVu Sans (Debian's default sans-serif, the one rsvg-convert and most Linux
// browsers draw "sans-serif" in); the widths are its advance widths, regular and bold, for
// printable ASCII and the few symbols the report uses. A renderer without DejaVu Sans falls
// back to Verdana (as wide) or a narrower sans-serif, so text measured here never runs wider.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mactune::tuner::svg {

// The SVG's font-family.
inline constexpr std::string_view kFontFamily = "DejaVu Sans, Verdana, sans-serif";

struct Font {
  double size = 11;  // px
  bool bold = false;
};

// The advance width of `text` (UTF-8) in px. A code point outside the table counts one em.
double text_width(std::string_view text, const Font& font);
// Above and below the baseline, px: the font's ascender and descender (DejaVu Sans: 0.76 and
// 0.24 em; accented capitals reach higher and do not occur in the report).
double text_ascent(const Font& font);
double text_descent(const Font& font);

enum class Anchor { start, middle, end };  // SVG text-anchor

// A box on the canvas, px.
struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  bool inside(double width, double height) const {
    return x0 >= 0 && y0 >= 0 && x1 <= width && y1 <= height;
  }
};

// The box of a text element at (x, y) with `anchor`; `vertical`: turned by -90 degrees about
// (x, y) (a y-axis label, reading upwards).
Box text_box(std::string_view text, const Font& font, double x, double y, Anchor anchor,
             bool vertical = false);

// `text` shortened to at most `max_width` px: cut at a character boundary, "…" appended
// (unchanged when it fits).
std::string fit_text(std::string_view text, const Font& font, double max_width);
// `text` broken at spaces into lines of at most `max_width` px each; a word wider than a line
// on its own is shortened (fit_text).
std::vector<std::string> wrap_text(std::string_view text, const Font& font, double max_width);

}  // namespace mactune::tuner::svg
