// measurements.samples_s (schema v5): a row's samples as text and back.
#include <charconv>

#include "db/store.h"
#include "kernels/one_line.h"

namespace mactune::db {

std::string samples_text(std::span<const double> samples) {
  std::string out = "[";
  for (double v : samples) {
    if (out.size() > 1) out += ',';
    out += format_double(v);
  }
  return out + "]";
}

std::vector<double> parse_samples_text(std::string_view text) {
  std::vector<double> out;
  const auto bad = [&] {
    input_error("measurements.samples_s: '", mactune::detail::clip(text, 60),
                "' is not a JSON array of numbers");
  };
  std::size_t i = 0;
  const auto skip = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
  };
  skip();
  if (i >= text.size() || text[i++] != '[') bad();
  skip();
  if (i < text.size() && text[i] == ']') return out;
  for (;;) {
    skip();
    double v = 0;
    const auto r = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (r.ec != std::errc{}) bad();
    out.push_back(v);
    i = static_cast<std::size_t>(r.ptr - text.data());
    skip();
    if (i >= text.size()) bad();
    if (text[i] == ']') break;
    if (text[i++] != ',') bad();
  }
  if (++i != text.size()) bad();
  return out;
}

}  // namespace mactune::db
