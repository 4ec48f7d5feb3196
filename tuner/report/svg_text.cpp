#include "tuner/report/svg_text.h"

#include <cstdint>
#include <sstream>

namespace mactune::tuner::svg {
namespace {

// DejaVu Sans advance widths in 1/1000 em, code points 32..126, read from the hmtx table of
// DejaVuSans.ttf and DejaVuSans-Bold.ttf (version 2.37).
constexpr std::uint16_t kRegular[95] = {
    318,  401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,  // ' '../
    636,  636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531,  // 0..?
    1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787,  // @..O
    603,  787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500,  // P.._
    500,  613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,  // `..o
    635,  635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838};      // p..~
constexpr std::uint16_t kBold[95] = {
    348,  456, 521, 838, 696, 1002, 872, 306,  457, 457, 523, 838, 380, 415,  380, 365,
    696,  696, 696, 696, 696, 696,  696, 696,  696, 696, 400, 400, 838, 838,  838, 580,
    1000, 774, 762, 734, 830, 683,  683, 821,  837, 372, 372, 775, 637, 995,  837, 850,
    733,  850, 770, 720, 682, 812,  774, 1103, 771, 724, 725, 457, 365, 457,  838, 500,
    500,  675, 716, 593, 716, 678,  435, 716,  712, 343, 343, 665, 343, 1042, 712, 687,
    716,  716, 493, 595, 478, 712,  652, 924,  645, 652, 582, 712, 365, 712,  838};

// The symbols the report writes (both weights: the same width).
struct Symbol {
  char32_t code;
  std::uint16_t regular, bold;
};
constexpr Symbol kSymbols[] = {{U'≈', 838, 838}, {U'✓', 838, 838}, {U'✗', 838, 838},
                               {U'×', 838, 838}, {U'–', 500, 500}, {U'—', 1000, 1000},
                               {U'μ', 636, 736}, {U'·', 318, 380}, {U'…', 1000, 1000}};

// The next code point of `s` at `i` (advanced past it); a stray byte counts as one.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
  char32_t c = extra == 3 ? b & 0x07 : extra == 2 ? b & 0x0F : extra == 1 ? b & 0x1F : b;
  ++i;
  for (; extra > 0 && i < s.size(); --extra, ++i)
    c = (c << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  return c;
}

double em_of(char32_t c, bool bold) {
  if (c >= 32 && c <= 126) return (bold ? kBold : kRegular)[c - 32] / 1000.0;
  for (const Symbol& s : kSymbols)
    if (s.code == c) return (bold ? s.bold : s.regular) / 1000.0;
  return 1.0;
}

constexpr std::string_view kEllipsis = "…";

}  // namespace

double text_width(std::string_view text, const Font& font) {
  double em = 0;
  for (std::size_t i = 0; i < text.size();) em += em_of(next_code_point(text, i), font.bold);
  return em * font.size;
}

double text_ascent(const Font& font) {
  return 0.76 * font.size;
}
double text_descent(const Font& font) {
  return 0.24 * font.size;
}

Box text_box(std::string_view text, const Font& font, double x, double y, Anchor anchor,
             bool vertical) {
  const double w = text_width(text, font);
  const double before = anchor == Anchor::start ? 0 : anchor == Anchor::middle ? w / 2 : w;
  if (vertical)  // turned by -90 degrees: the text runs upwards, its ascent points left
    return {x - text_ascent(font), y - (w - before), x + text_descent(font), y + before};
  return {x - before, y - text_ascent(font), x + w - before, y + text_descent(font)};
}

std::string fit_text(std::string_view text, const Font& font, double max_width) {
  if (text_width(text, font) <= max_width) return std::string(text);
  const double room = max_width - text_width(kEllipsis, font);
  double w = 0;
  std::size_t cut = 0;
  for (std::size_t i = 0; i < text.size();) {
    w += em_of(next_code_point(text, i), font.bold) * font.size;
    if (w > room) break;
    cut = i;
  }
  return std::string(text.substr(0, cut)) + std::string(kEllipsis);
}

std::vector<std::string> wrap_text(std::string_view text, const Font& font, double max_width) {
  std::vector<std::string> lines;
  std::istringstream words{std::string(text)};
  std::string word, line;
  while (words >> word) {
    const std::string longer = line.empty() ? word : line + " " + word;
    if (text_width(longer, font) <= max_width) {
      line = longer;
      continue;
    }
    if (!line.empty()) lines.push_back(line);
    line = fit_text(word, font, max_width);
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

}  // namespace mactune::tuner::svg
