#include "tuner/report/report_text.h"

#include <cctype>
#include <iomanip>
#include <sstream>

namespace mactune::tuner {
namespace {

// Code points in `s` (UTF-8): bytes that do not continue a sequence.
std::size_t columns_of(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::size_t leading_spaces(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return i;
}

// The width of a list marker at the start of `s` ("- ", "* ", "+ ", "12. "), 0 when none.
std::size_t list_marker(std::string_view s) {
  if (s.size() >= 2 && (s[0] == '-' || s[0] == '*' || s[0] == '+') && s[1] == ' ') return 2;
  std::size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i > 0 && i + 1 < s.size() && (s[i] == '.' || s[i] == ')') && s[i + 1] == ' ') return i + 2;
  return 0;
}

// Whether a line starting with `s` would be read as block syntax rather than continue a
// paragraph (a list item, heading, quote, table row, setext underline).
bool starts_block(std::string_view s) {
  if (s.empty()) return false;
  if (std::string_view("-+*#>|=").find(s[0]) != std::string_view::npos) return true;
  return list_marker(s) > 0;
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// One paragraph or list-item line broken at spaces into lines of at most `columns`.
std::string wrap_line(std::string_view line, std::size_t columns) {
  const std::size_t lead = leading_spaces(line);
  const std::string indent(lead + list_marker(line.substr(lead)), ' ');
  std::string out, prefix;  // prefix: "" on the first line, the indent on the others
  std::string_view rest = line;
  while (prefix.size() + columns_of(rest) > columns) {
    std::size_t cut = std::string_view::npos;
    for (std::size_t i = prefix.empty() ? indent.size() : 1; i < rest.size(); ++i) {
      if (rest[i] != ' ') continue;
      const std::size_t next = i + leading_spaces(rest.substr(i));
      if (next == rest.size()) break;
      if (starts_block(rest.substr(next))) continue;
      const bool fits = prefix.size() + columns_of(trim_right(rest.substr(0, i))) <= columns;
      if (fits || cut == std::string_view::npos) cut = i;
      if (!fits) break;
    }
    if (cut == std::string_view::npos) break;  // no space to break at
    out += prefix;
    out += trim_right(rest.substr(0, cut));
    out += '\n';
    rest = rest.substr(cut + leading_spaces(rest.substr(cut)));
    prefix = indent;
  }
  return out + prefix + std::string(rest);
}

}  // namespace

std::string verdict_mark(Verdict v) {
  switch (v) {
    case Verdict::faster:
      return "✓";
    case Verdict::slower:
      return "✗";
    case Verdict::tie:
      return "≈";
  }
  return "?";
}

std::string speedup_text(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(v < 10 ? 2 : 1) << v << 'x';
  return o.str();
}

std::string wrap_markdown(std::string_view md, std::size_t columns) {
  std::string out;
  bool fenced = false;
  while (!md.empty()) {
    const std::size_t eol = md.find('\n');
    const std::string_view line = md.substr(0, eol);
    md = eol == std::string_view::npos ? std::string_view() : md.substr(eol + 1);
    const std::string_view body = line.substr(leading_spaces(line));
    if (body.starts_with("```")) fenced = !fenced;
    const bool as_is = fenced || body.starts_with("```") || body.starts_with('|') ||
                       body.starts_with('#') || columns_of(line) <= columns;
    out += as_is ? std::string(line) : wrap_line(line, columns);
    if (eol != std::string_view::npos) out += '\n';
  }
  return out;
}

}  // namespace mactune::tuner
