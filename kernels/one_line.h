// Messages that quote user input stay one line and whole characters: control bytes, and bytes
// that are not part of a valid UTF-8 character, are shown as \xNN; quotes are cut, and single
// characters taken, at character boundaries (never half of `≥`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mactune::detail {

// Length of the valid UTF-8 character starting at text[i] (1 to 4), or 0 when the bytes there
// are not one (a stray continuation byte, a truncated or overlong sequence, a surrogate).
inline std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4;
  else
    return 0;
  if (i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(k) & 0xc0) != 0x80) return 0;
  if (n == 3 && c == 0xe0 && b(1) < 0xa0) return 0;   // overlong
  if (n == 3 && c == 0xed && b(1) >= 0xa0) return 0;  // a UTF-16 surrogate
  if (n == 4 && c == 0xf0 && b(1) < 0x90) return 0;   // overlong
  if (n == 4 && c == 0xf4 && b(1) >= 0x90) return 0;  // past U+10FFFF
  return n;
}

// `text` with control bytes (a NUL, a newline, from a file or a YAML block scalar) and bytes of
// no valid UTF-8 character shown as \xNN, so that a message quoting user input stays one line,
// one C string and valid UTF-8.
inline std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  constexpr char hex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < text.size();) {
    const auto u = static_cast<unsigned char>(text[i]);
    const std::size_t n = u >= 0x20 && u != 0x7f ? utf8_length(text, i) : 0;
    if (n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
      ++i;
    }
  }
  return out;
}

// The whole character at byte `pos` of `text` (one byte when it is not valid UTF-8): what a
// message quotes as "unexpected 'X'".
inline std::string_view char_at(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return {};
  const std::size_t n = utf8_length(text, pos);
  return text.substr(pos, n > 0 ? n : 1);
}

// At most `max_bytes` of `text`, cut before a character that would not fit whole, with "..."
// when anything was cut: a long value quoted in a message.
inline std::string clip(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t end = 0;
  while (end < max_bytes) {
    const std::size_t n = utf8_length(text, end);
    const std::size_t step = n > 0 ? n : 1;
    if (end + step > max_bytes) break;
    end += step;
  }
  return std::string(text.substr(0, end)) + "...";
}

}  // namespace mactune::detail
