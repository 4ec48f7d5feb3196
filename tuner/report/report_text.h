// Text pieces that report.md (tuner/report/report.h) and tune's closing table
// (tuner/report/report_summary.h) share: the verdict marks, speedups as they print them, and the
// wrapping of markdown source.
#pragma once

#include <string>
#include <string_view>

#include "tuner/decide/decide.h"

namespace mactune::tuner {

// "✓" MAC clearly faster, "✗" clearly slower, "≈" too close to call.
std::string verdict_mark(Verdict v);
// "1.52x", "12.3x".
std::string speedup_text(double speedup);

// Markdown source with every paragraph and list item longer than `columns` code points broken
// at spaces (list items' continuation lines indented under their text). Table rows, headings,
// fenced code and lines without a space to break at stay as they are; a line is never broken
// where its continuation would start with a character markdown reads as block syntax there
// ("-", "+", "*", "#", ">", "|", "1.").
std::string wrap_markdown(std::string_view markdown, std::size_t columns = 100);

}  // namespace mactune::tuner
