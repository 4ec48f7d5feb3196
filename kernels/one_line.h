// Messages that quote user input stay one line: control bytes are shown as \xNN.
#pragma once

#include <string>
#include <string_view>

namespace mactune::detail {

// `text` with control bytes (a NUL, a newline, from a file or a YAML block scalar) shown as
// \xNN, so that a message quoting user input stays one line and one C string.
inline std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  constexpr char hex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

}  // namespace mactune::detail
